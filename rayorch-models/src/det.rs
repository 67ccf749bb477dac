//! Text detection: PP-OCRv6 tiny det (a DB model) on ONNX Runtime.
//!
//! Pre-processing follows PaddleOCR's `DetResizeForTest` (limit type `max`):
//! pages whose longer side exceeds `max_side` are scaled down, both sides are
//! rounded to multiples of 32, pixels go in BGR order normalised with the
//! ImageNet mean/std. Pages of one batch with the same input size share one
//! ONNX Runtime call (no padding); the map is decoded by [`crate::db_boxes`]
//! and boxes are scaled back to page pixels.

use std::path::Path;
use std::sync::Arc;

use image::RgbImage;
use ndarray::ArrayViewD;
use rayorch::{Outcome, Stage, StageContext, StageResult};

use crate::assets::Assets;
use crate::db::{DbParams, TextBox, db_boxes};
use crate::error::ModelError;
use crate::image_ops::{crop, resize, write_bgr_chw};
use crate::onnx::{OnnxConfig, OnnxSession};
use crate::types::{PageImage, TextLine};

const MEAN: [f32; 3] = [0.485, 0.456, 0.406];
const STD: [f32; 3] = [0.229, 0.224, 0.225];

/// How pages are detected.
#[derive(Clone, Debug, PartialEq)]
pub struct DetectConfig {
    /// Session settings.
    pub onnx: OnnxConfig,
    /// Longest side of the model input (pages are scaled down to it).
    pub max_side: u32,
    /// Post-processing thresholds.
    pub db: DbParams,
}

impl Default for DetectConfig {
    fn default() -> Self {
        DetectConfig {
            onnx: OnnxConfig::default(),
            max_side: 960,
            db: DbParams::default(),
        }
    }
}

/// The detection model, ready to run.
#[derive(Debug)]
pub struct TextDetector {
    session: OnnxSession,
    cfg: DetectConfig,
}

fn input_size(w: u32, h: u32, max_side: u32) -> (u32, u32) {
    let scale = (max_side as f32 / w.max(h).max(1) as f32).min(1.0);
    let round = |v: u32| (((v as f32 * scale) / 32.0).round() as u32).max(1) * 32;
    (round(w), round(h))
}

impl TextDetector {
    /// Load the model at `model` with the ONNX Runtime library `ort_lib`.
    pub fn load(model: &Path, ort_lib: &Path, cfg: DetectConfig) -> Result<TextDetector, ModelError> {
        Ok(TextDetector {
            session: OnnxSession::load(model, ort_lib, &cfg.onnx)?,
            cfg,
        })
    }

    /// Load the bundled model (see [`crate::assets`]).
    pub fn from_assets(a: &Assets, cfg: DetectConfig) -> Result<TextDetector, ModelError> {
        TextDetector::load(&a.det_model, &a.ort_lib, cfg)
    }

    /// Text boxes of each page, in page pixels and reading order.
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
            let mut buf = vec![0f32; group.len() * 3 * hw * ww];
            for (n, &i) in group.iter().enumerate() {
                let scaled = resize(pages[i], w, h);
                write_bgr_chw(&mut buf, n, (hw, ww), &scaled, MEAN, STD);
            }
            let input = ArrayViewD::from_shape(vec![group.len(), 3, hw, ww], &buf)
                .map_err(|e| ModelError::model("det", e))?;
            let prob = self.session.run(input)?;
            let shape = prob.shape().to_vec();
            if shape.len() != 4 || shape[0] != group.len() || shape[2] != hw || shape[3] != ww {
                return Err(ModelError::model(
                    self.session.name(),
                    format!("expected a [N,1,{hw},{ww}] probability map, got {shape:?}"),
                ));
            }
            let flat = prob.as_standard_layout();
            let flat = flat.as_slice().unwrap_or(&[]);
            for (n, &i) in group.iter().enumerate() {
                let map = &flat[n * hw * ww..(n + 1) * hw * ww];
                let (sx, sy) = (
                    pages[i].width() as f32 / ww as f32,
                    pages[i].height() as f32 / hw as f32,
                );
                out[i] = db_boxes(map, ww, hw, &self.cfg.db)
                    .into_iter()
                    .map(|b| TextBox {
                        x0: b.x0 * sx,
                        y0: b.y0 * sy,
                        x1: b.x1 * sx,
                        y1: b.y1 * sy,
                        ..b
                    })
                    .collect();
            }
        }
        Ok(out)
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
        let _span = tracing::debug_span!("text_detect", pages = batch.len()).entered();
        let images: Vec<&RgbImage> = batch.iter().map(|p| &*p.image).collect();
        let boxes = self.det.detect(&images)?;
        Ok(batch
            .iter()
            .zip(boxes)
            .map(|(page, boxes)| {
                let lines = boxes
                    .into_iter()
                    .map(|b| {
                        let bbox = [
                            b.x0.floor() as u32,
                            b.y0.floor() as u32,
                            (b.x1.ceil() as u32).min(page.image.width()),
                            (b.y1.ceil() as u32).min(page.image.height()),
                        ];
                        TextLine {
                            doc: page.doc.clone(),
                            page: page.page,
                            row: b.row,
                            bbox,
                            score: b.score,
                            crop: Arc::new(crop(&page.image, bbox)),
                        }
                    })
                    .collect();
                Outcome::Ok(lines)
            })
            .collect())
    }
}
