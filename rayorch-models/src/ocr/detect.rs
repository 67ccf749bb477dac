//! Text detection: PP-OCRv6 tiny det (a DB model) on ONNX Runtime.
//!
//! Pre-processing follows PaddleOCR's `DetResizeForTest` (limit type `max`):
//! pages whose longer side exceeds `max_side` are scaled down, both sides are
//! rounded to multiples of 32, pixels go in BGR order normalised with the
//! ImageNet mean/std. Pages of one batch with the same input size share one
//! ONNX Runtime call (no padding); the map is decoded by [`crate::ocr::db_boxes`]
//! and boxes (rotated rectangles) are scaled back to page pixels.
//!
//! [`TextDetector::detect_lines`] then makes line crops that follow the text:
//! each rotated rectangle is cut out as an upright image
//! ([`crate::ocr::geometry::warp_crop`]), tall crops are turned a quarter
//! counter-clockwise, the line-orientation classifier (when loaded) decides
//! the page's quarter turn ([`crate::ocr::page_turn`]) — a turned page is turned
//! upright and detected again — and flips single upside-down lines. Page
//! skew needs no resampling of the page: each crop is already upright, and
//! reading order is taken in the deskewed frame ([`crate::ocr::db_boxes`]).

use std::path::Path;
use std::sync::Arc;

use image::RgbImage;
use ndarray::ArrayViewD;
use rayorch::{Outcome, Stage, StageContext, StageResult};

use crate::assets::Assets;
use crate::error::ModelError;
use crate::image::{resize, write_bgr_chw};
use crate::ocr::db::{DbParams, TextBox, db_boxes};
use crate::ocr::geometry::warp_crop;
use crate::ocr::orient::{LineOrientation, is_tall, page_turn, turn};
use crate::onnx::{OnnxConfig, OnnxSession};
use crate::{PageImage, TextLine};

const MEAN: [f32; 3] = [0.485, 0.456, 0.406];
const STD: [f32; 3] = [0.229, 0.224, 0.225];

/// How pages are detected.
#[derive(Clone, Debug, PartialEq)]
pub struct DetectConfig {
    /// Session settings.
    pub onnx: OnnxConfig,
    /// Longest side of the model input (pages are scaled down to it);
    /// 0 detects at full page size (as the reference pipeline does; slower).
    pub max_side: u32,
    /// Post-processing thresholds.
    pub db: DbParams,
    /// Run the line-orientation classifier: turn pages by 90/180/270° and
    /// flip upside-down lines (needs `cls.onnx`, see [`crate::assets`]).
    pub orientation: bool,
    /// A line is flipped when the classifier is at least this sure it is
    /// upside down (PaddleOCR's `cls_thresh`).
    pub flip_thresh: f32,
}

impl Default for DetectConfig {
    fn default() -> Self {
        DetectConfig {
            onnx: OnnxConfig::default(),
            max_side: 960,
            db: DbParams::default(),
            orientation: true,
            flip_thresh: 0.9,
        }
    }
}

/// The detection model, ready to run.
#[derive(Debug)]
pub struct TextDetector {
    session: OnnxSession,
    cls: Option<LineOrientation>,
    cfg: DetectConfig,
    /// The input tensor's buffer, kept between calls (a 4-page batch is
    /// ~34 MB: a fresh one per call faults in fresh pages every time).
    input: Vec<f32>,
}

/// One page's lines after orientation: crops upright, boxes in the
/// coordinates of the page turned by `turn`.
#[derive(Clone, Debug)]
pub struct PageLines {
    /// Clockwise quarter turn applied to the page before the boxes were found.
    pub turn: u32,
    /// The page's skew in degrees (median angle of its long lines).
    pub skew_deg: f32,
    /// The page as the boxes see it (`None` when `turn` is 0: the input).
    pub turned: Option<Arc<RgbImage>>,
    /// Boxes in reading order and their upright crops.
    pub lines: Vec<(TextBox, RgbImage)>,
    /// For each line, whether its crop was flipped (turned 180°) because
    /// the classifier judged it upside down (`TextLine::flipped`).
    pub flipped: Vec<bool>,
}

impl PageLines {
    /// The page's [`TextLine`]s, in reading order.
    pub fn into_text_lines(self, page: &PageImage) -> Vec<TextLine> {
        self.lines
            .into_iter()
            .zip(self.flipped.into_iter().chain(std::iter::repeat(false)))
            .map(|((b, crop), flipped)| TextLine {
                doc: page.doc.clone(),
                page: page.page,
                row: b.row,
                bbox: [
                    b.x0.floor() as u32,
                    b.y0.floor() as u32,
                    b.x1.ceil() as u32,
                    b.y1.ceil() as u32,
                ],
                score: b.score,
                crop: Arc::new(crop),
                flipped,
            })
            .collect()
    }
}

fn input_size(w: u32, h: u32, max_side: u32) -> (u32, u32) {
    let limit = if max_side == 0 { u32::MAX } else { max_side };
    let scale = (limit as f32 / w.max(h).max(1) as f32).min(1.0);
    let round = |v: u32| (((v as f32 * scale) / 32.0).round() as u32).max(1) * 32;
    (round(w), round(h))
}

impl TextDetector {
    /// Load the model at `model` with the ONNX Runtime library `ort_lib`.
    pub fn load(model: &Path, ort_lib: &Path, cfg: DetectConfig) -> Result<TextDetector, ModelError> {
        Ok(TextDetector {
            session: OnnxSession::load(model, ort_lib, &cfg.onnx)?,
            cls: None,
            cfg,
            input: Vec::new(),
        })
    }

    /// Also load the line-orientation classifier `cls_model` (used by
    /// [`TextDetector::detect_lines`] when `cfg.orientation` is on).
    pub fn with_orientation(mut self, cls_model: &Path, ort_lib: &Path) -> Result<TextDetector, ModelError> {
        self.cls = Some(LineOrientation::load(cls_model, ort_lib, &self.cfg.onnx)?);
        Ok(self)
    }

    /// Load the bundled models (see [`crate::assets`]); the orientation
    /// classifier only when `cfg.orientation` is on.
    pub fn from_assets(a: &Assets, cfg: DetectConfig) -> Result<TextDetector, ModelError> {
        let orient = cfg.orientation;
        let det = TextDetector::load(&a.det_model, &a.ort_lib, cfg)?;
        if orient {
            det.with_orientation(&a.cls_model, &a.ort_lib)
        } else {
            Ok(det)
        }
    }

    /// Text boxes of each page, in page pixels and reading order (no
    /// orientation handling: see [`TextDetector::detect_lines`]).
    pub fn detect(&mut self, pages: &[&RgbImage]) -> Result<Vec<Vec<TextBox>>, ModelError> {
        let sizes: Vec<(u32, u32)> = pages
            .iter()
            .map(|p| input_size(p.width(), p.height(), self.cfg.max_side))
            .collect();
        let mut out = vec![Vec::new(); pages.len()];
        let mut shapes = sizes.clone();
        shapes.sort_unstable();
        shapes.dedup();
        for (w, h) in shapes {
            let group: Vec<usize> = (0..pages.len()).filter(|&i| sizes[i] == (w, h)).collect();
            let (hw, ww) = (h as usize, w as usize);
            let db = &self.cfg.db;
            let fill = |buf: &mut [f32]| {
                for (n, &i) in group.iter().enumerate() {
                    write_bgr_chw(buf, n, (hw, ww), &resize(pages[i], w, h), MEAN, STD);
                }
            };
            // The probability maps are read where the runtime left them.
            let read = |prob: ArrayViewD<'_, f32>| {
                let shape = prob.shape();
                if shape.len() != 4 || shape[0] != group.len() || shape[2] != hw || shape[3] != ww {
                    return Err(format!(
                        "expected a [N,1,{hw},{ww}] probability map, got {shape:?}"
                    ));
                }
                let flat = prob.as_standard_layout();
                let flat = flat.as_slice().unwrap_or(&[]);
                Ok((0..group.len())
                    .map(|n| db_boxes(&flat[n * hw * ww..(n + 1) * hw * ww], ww, hw, db))
                    .collect::<Vec<_>>())
            };
            let boxes = self
                .session
                .run_filled(&mut self.input, &[group.len(), 3, hw, ww], fill, read)?;
            for (&i, found) in group.iter().zip(boxes) {
                let (sx, sy) = (
                    pages[i].width() as f32 / ww as f32,
                    pages[i].height() as f32 / hw as f32,
                );
                let (pw, ph) = (pages[i].width() as f32, pages[i].height() as f32);
                out[i] = found
                    .into_iter()
                    .map(|b| TextBox {
                        row: b.row,
                        ..TextBox::from_rect(b.rect.scaled(sx, sy), b.score, pw, ph)
                    })
                    .collect();
            }
        }
        Ok(out)
    }

    /// Upright crops of the boxes; tall ones turned a quarter counter-clockwise.
    fn crops(page: &RgbImage, boxes: Vec<TextBox>) -> Vec<(TextBox, RgbImage)> {
        boxes
            .into_iter()
            .map(|b| {
                let c = warp_crop(page, &b.rect);
                let c = if is_tall(&b) { turn(&c, 270) } else { c };
                (b, c)
            })
            .collect()
    }

    /// Probability that each crop is upside down (zeros without a classifier).
    fn upside_down(&mut self, lines: &[(TextBox, RgbImage)]) -> Result<Vec<f32>, ModelError> {
        match self.cls.as_mut().filter(|_| self.cfg.orientation) {
            Some(cls) => cls.upside_down(&lines.iter().map(|l| &l.1).collect::<Vec<_>>()),
            None => Ok(vec![0.0; lines.len()]),
        }
    }

    /// Lines of each page with upright crops: pages turned by 90/180/270°
    /// are turned back and detected again, upside-down lines flipped.
    pub fn detect_lines(&mut self, pages: &[&RgbImage]) -> Result<Vec<PageLines>, ModelError> {
        let boxes = self.detect(pages)?;
        let mut out = Vec::with_capacity(pages.len());
        let mut again = Vec::new();
        for (i, b) in boxes.into_iter().enumerate() {
            let lines = Self::crops(pages[i], b);
            let p = self.upside_down(&lines)?;
            let t = if self.cls.is_some() && self.cfg.orientation {
                page_turn(&lines.iter().map(|l| l.0.clone()).collect::<Vec<_>>(), &p)
            } else {
                0
            };
            if t != 0 {
                again.push(i);
            }
            out.push((t, lines, p));
        }
        // Turned pages: detect once more on the upright page.
        let turned: Vec<Arc<RgbImage>> = again
            .iter()
            .map(|&i| Arc::new(turn(pages[i], out[i].0)))
            .collect();
        let redo = self.detect(&turned.iter().map(|p| &**p).collect::<Vec<_>>())?;
        let mut turned_of = vec![None; pages.len()];
        for ((&i, img), b) in again.iter().zip(turned).zip(redo) {
            let lines = Self::crops(&img, b);
            out[i].2 = self.upside_down(&lines)?;
            out[i].1 = lines;
            turned_of[i] = Some(img);
        }
        Ok(out
            .into_iter()
            .zip(turned_of)
            .map(|((t, lines, p), turned)| {
                let flipped: Vec<bool> = p.iter().map(|&p| p >= self.cfg.flip_thresh).collect();
                let lines: Vec<(TextBox, RgbImage)> = lines
                    .into_iter()
                    .zip(&flipped)
                    .map(|((b, c), &flip)| if flip { (b, turn(&c, 180)) } else { (b, c) })
                    .collect();
                let boxes: Vec<TextBox> = lines.iter().map(|l| l.0.clone()).collect();
                PageLines {
                    turn: t,
                    skew_deg: crate::ocr::db::skew_deg(&boxes),
                    turned,
                    lines,
                    flipped,
                }
            })
            .collect())
    }
}

/// The detection stage: a page in, its text lines (with their crops) out, in
/// reading order. A page without text gives an empty list.
#[derive(Debug)]
pub struct TextDetect {
    det: TextDetector,
}

impl TextDetect {
    /// Wrap a loaded detector.
    pub fn new(det: TextDetector) -> TextDetect {
        TextDetect { det }
    }
}

impl Stage for TextDetect {
    type In = PageImage;
    type Out = Vec<TextLine>;

    fn run(&mut self, batch: Vec<PageImage>, _cx: &StageContext) -> StageResult<Vec<TextLine>> {
        let pages: Vec<&PageImage> = batch.iter().collect();
        Ok(self.lines(&pages)?.into_iter().map(Outcome::Ok).collect())
    }
}

impl TextDetect {
    /// The text lines of each of `pages`, in reading order.
    fn lines(&mut self, pages: &[&PageImage]) -> Result<Vec<Vec<TextLine>>, ModelError> {
        if pages.is_empty() {
            return Ok(Vec::new());
        }
        let _span = tracing::debug_span!("text_detect", pages = pages.len()).entered();
        let images: Vec<&RgbImage> = pages.iter().map(|p| &*p.image).collect();
        let found = self.det.detect_lines(&images)?;
        Ok(pages
            .iter()
            .zip(found)
            .map(|(page, found)| {
                if found.turn != 0 || found.skew_deg.abs() >= 0.5 {
                    tracing::debug!(doc = %page.doc, page = page.page, turn = found.turn, skew = found.skew_deg, "page orientation");
                }
                found.into_text_lines(page)
            })
            .collect())
    }
}

/// Detection over read pages ([`crate::pdf::PdfPageRead`]): the model runs
/// on the pages that carry an image (those OCR reads), in one batch; a
/// page whose text layer is trusted gives no lines.
#[cfg(feature = "pdf")]
#[derive(Debug)]
pub struct PageDetect(pub TextDetect);

#[cfg(feature = "pdf")]
impl Stage for PageDetect {
    type In = crate::pdf::ReadPage;
    type Out = Vec<TextLine>;

    fn run(&mut self, batch: Vec<crate::pdf::ReadPage>, _cx: &StageContext) -> StageResult<Vec<TextLine>> {
        let images: Vec<&PageImage> = batch.iter().filter_map(|p| p.image.as_ref()).collect();
        let mut found = self.0.lines(&images)?.into_iter();
        Ok(batch
            .iter()
            .map(|p| Outcome::Ok(p.image.as_ref().and_then(|_| found.next()).unwrap_or_default()))
            .collect())
    }
}
