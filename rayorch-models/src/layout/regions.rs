//! The stages around layout that are not a model of their own: rendering a
//! document together with its text layer, and line detection on region
//! crops (the existing detector, run per region instead of per page).
//!
//! Invariants:
//! - A page's text source is decided once, at render time: the text layer
//!   when it is usable and OCR is not forced, else OCR. Every region of the
//!   page follows that choice (`text_source` is per page).
//! - Lines found in a region crop are returned in page pixels with their
//!   crops cut from the region, so recognition batches mix lines of any
//!   region, page and document, exactly as in the page-level job.

use std::sync::Arc;

use image::RgbImage;
use rayorch::{Outcome, Stage, StageContext, StageResult};

use crate::image::crop;
use crate::layout::{LayoutPage, Region};
use crate::ocr::detect::TextDetector;
use crate::pdf::text::{self as textlayer, Verdict};
use crate::pdf::{RenderConfig, RenderError, document_bytes, render_document};
use crate::{PdfFile, PdfSource, TextLine};

/// Render every page of `file` and, unless `force_ocr`, read its text layer.
pub fn render_with_layer(
    file: &PdfFile,
    cfg: &RenderConfig,
    force_ocr: bool,
) -> Result<Vec<LayoutPage>, RenderError> {
    let bytes = document_bytes(file)?;
    let in_memory = PdfFile {
        name: file.name.clone(),
        source: PdfSource::Bytes(bytes.clone()),
    };
    let pages = render_document(&in_memory, cfg)?;
    let verdicts: Vec<(Option<Vec<textlayer::Glyph>>, Verdict)> = if force_ocr {
        pages.iter().map(|_| (None, Verdict::Forced)).collect()
    } else {
        let scales: Vec<f32> = pages.iter().map(|p| p.dpi / 72.0).collect();
        textlayer::extract(&bytes, &scales)
            .into_iter()
            .map(|l| {
                let v = l.verdict;
                (l.trusted(), v)
            })
            .collect()
    };
    Ok(pages
        .into_iter()
        .zip(verdicts)
        .map(|(image, (g, verdict))| LayoutPage {
            image,
            glyphs: g.map(Arc::new),
            verdict,
            orientation: Default::default(),
            lines: None,
        })
        .collect())
}

/// The render stage of the layout job: one document per Grain.
#[derive(Clone, Debug, Default)]
pub struct LayoutRender {
    cfg: RenderConfig,
    force_ocr: bool,
}

impl LayoutRender {
    /// A renderer with `cfg`; `force_ocr` ignores the text layer.
    pub fn new(cfg: RenderConfig, force_ocr: bool) -> LayoutRender {
        LayoutRender { cfg, force_ocr }
    }
}

impl Stage for LayoutRender {
    type In = PdfFile;
    type Out = Vec<LayoutPage>;

    fn run(&mut self, batch: Vec<PdfFile>, _cx: &StageContext) -> StageResult<Vec<LayoutPage>> {
        Ok(batch
            .iter()
            .map(|f| {
                let _span = tracing::debug_span!("layout_render", doc = &*f.name).entered();
                match render_with_layer(f, &self.cfg, self.force_ocr) {
                    Ok(p) => Outcome::Ok(p),
                    Err(e) => Outcome::RecordFailure(e.cause()),
                }
            })
            .collect())
    }
}

/// Text lines of each region that needs OCR (others give none), in page
/// pixels, in the detector's reading order within the region.
pub fn region_lines(
    det: &mut TextDetector,
    regions: &[&Region],
) -> Result<Vec<Vec<TextLine>>, crate::ModelError> {
    let ocr: Vec<usize> = (0..regions.len()).filter(|&i| regions[i].needs_ocr()).collect();
    let crops: Vec<&RgbImage> = ocr.iter().map(|&i| &*regions[i].crop).collect();
    let mut out = vec![Vec::new(); regions.len()];
    for (&i, boxes) in ocr.iter().zip(det.detect(&crops)?) {
        let r = regions[i];
        let (ox, oy) = r.crop_origin;
        out[i] = boxes
            .into_iter()
            .map(|b| {
                let local = [
                    b.x0.floor().max(0.0) as u32,
                    b.y0.floor().max(0.0) as u32,
                    (b.x1.ceil() as u32).min(r.crop.width()),
                    (b.y1.ceil() as u32).min(r.crop.height()),
                ];
                TextLine {
                    doc: r.doc.clone(),
                    page: r.page,
                    row: b.row,
                    bbox: [local[0] + ox, local[1] + oy, local[2] + ox, local[3] + oy],
                    score: b.score,
                    crop: Arc::new(crop(&r.crop, local)),
                    flipped: false,
                }
            })
            .collect();
    }
    Ok(out)
}

/// The region line-detection stage: a region in, its text lines out.
#[derive(Debug)]
pub struct RegionDetect {
    det: TextDetector,
}

impl RegionDetect {
    /// Wrap a loaded detector.
    pub fn new(det: TextDetector) -> RegionDetect {
        RegionDetect { det }
    }
}

impl Stage for RegionDetect {
    type In = Region;
    type Out = Vec<TextLine>;

    fn run(&mut self, batch: Vec<Region>, _cx: &StageContext) -> StageResult<Vec<TextLine>> {
        let _span = tracing::debug_span!("region_detect", regions = batch.len()).entered();
        let refs: Vec<&Region> = batch.iter().collect();
        Ok(region_lines(&mut self.det, &refs)?
            .into_iter()
            .map(Outcome::Ok)
            .collect())
    }
}
