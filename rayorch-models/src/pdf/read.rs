//! One page read the cheapest right way: its text layer when the layer can
//! be trusted, its pixels (for OCR) when not.
//!
//! [`PdfPageRead`] reads a page's text layer ([`super::text::read_page`],
//! positioned at the render scale) and judges it ([`Verdict`]); only a page
//! whose layer is not trusted (or every page, with `force_ocr`) is
//! rendered. The [`ReadPage`] it gives carries the verdict, the layer's
//! lines (trusted pages) and the image (the others), so a detection stage
//! runs the model only on pages that need it and [`ReadPage::text`] makes
//! the page's text from the layer or from the OCR lines, in reading order
//! ([`reading_order`]) either way.
//!
//! Invariants:
//! - A page has exactly one source: a trusted page's text is its layer and
//!   it is never rendered; any other page is rendered and OCR'd, and its
//!   record says why ([`Verdict`]'s text).
//! - Reading the layer never fails a document (an unreadable layer means
//!   OCR); a render failure is the page's group failure, as with
//!   [`super::PdfPageRender`].

use std::sync::Arc;

use hayro::RenderCache;
use rayorch::{Cause, Outcome, Stage, StageContext, StageResult};
use serde::{Deserialize, Serialize};

use super::render::{page_scale, per_document};
use super::text::{TextSource, Verdict, layer_lines, read_page};
use super::{PdfPage, RenderConfig, render_page};
use crate::PageImage;
use crate::lines::{LineText, page_text, reading_order};

/// A page as [`PdfPageRead`] read it.
#[derive(Clone, Debug)]
pub struct ReadPage {
    /// The document's name.
    pub doc: Arc<str>,
    /// Zero-based page number.
    pub page: usize,
    /// The verdict on the page's text layer: trusted means the text comes
    /// from the layer.
    pub verdict: Verdict,
    /// The layer's lines when it is trusted (empty otherwise), page pixels
    /// at the render scale.
    pub layer: Arc<Vec<LineText>>,
    /// The rendered page when OCR reads it.
    pub image: Option<PageImage>,
}

impl ReadPage {
    /// Where the page's text comes from.
    pub fn source(&self) -> TextSource {
        self.verdict.source()
    }

    /// The same page without its pixels (what waits for the page's OCR
    /// lines need not hold them).
    pub fn without_image(mut self) -> ReadPage {
        self.image = None;
        self
    }

    /// The page's text: from the layer when it is trusted, else from
    /// `ocr` (the page's recognised lines), in reading order.
    pub fn text(&self, ocr: &[LineText]) -> PageText {
        let lines = match self.source() {
            TextSource::Layer => &self.layer[..],
            TextSource::Ocr => ocr,
        };
        PageText {
            text: page_text(&reading_order(lines)),
            source: self.source(),
            verdict: self.verdict,
        }
    }
}

/// A page's text and where it came from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PageText {
    /// The text, rows joined by newlines.
    pub text: String,
    /// Text layer or OCR.
    pub source: TextSource,
    /// Why: the verdict on the page's layer.
    pub verdict: Verdict,
}

/// Reads pages: one page per Grain, each document's pages in a batch
/// rendered with one cache; see [`ReadPage`] for what a read page holds.
#[derive(Clone, Debug, Default)]
pub struct PdfPageRead {
    cfg: RenderConfig,
    force_ocr: bool,
}

impl PdfPageRead {
    /// A page reader rendering with `cfg`; `force_ocr` renders every page
    /// for OCR without reading its layer ([`Verdict::Forced`]).
    pub fn new(cfg: RenderConfig, force_ocr: bool) -> PdfPageRead {
        PdfPageRead { cfg, force_ocr }
    }

    /// Read one page (its layer, then its pixels if OCR needs them).
    pub fn read<'a>(&self, page: &'a PdfPage, cache: &RenderCache<'a>) -> Outcome<ReadPage> {
        let p = &page.doc.pdf.pages()[page.index];
        let (verdict, layer) = if self.force_ocr {
            (Verdict::Forced, Vec::new())
        } else {
            let read = read_page(p, page_scale(p, &self.cfg));
            let lines = match read.verdict {
                Verdict::Trusted => layer_lines(&read.glyphs, [f32::MIN, f32::MIN, f32::MAX, f32::MAX]),
                _ => Vec::new(),
            };
            (read.verdict, lines)
        };
        let image = match verdict.source() {
            TextSource::Layer => None,
            TextSource::Ocr => match render_page(page, cache, &self.cfg) {
                Ok(image) => Some(image),
                // The document cannot be complete: skip its other pages.
                Err(e) => return Outcome::GroupFailure(Cause::new(e.to_string())),
            },
        };
        Outcome::Ok(ReadPage {
            doc: page.doc.name.clone(),
            page: page.index,
            verdict,
            layer: Arc::new(layer),
            image,
        })
    }
}

impl Stage for PdfPageRead {
    type In = PdfPage;
    type Out = ReadPage;

    fn run(&mut self, batch: Vec<PdfPage>, _cx: &StageContext) -> StageResult<ReadPage> {
        Ok(per_document(&batch, |page, cache| {
            let _span =
                tracing::debug_span!("pdf_read_page", doc = &*page.doc.name, page = page.index).entered();
            self.read(page, cache)
        }))
    }
}
