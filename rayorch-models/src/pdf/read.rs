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
//! - Except an OCR'd scan's invisible layer ([`PageLayer::hidden`]), which
//!   says what another OCR engine read: such a page is rendered and OCR'd
//!   too ([`ReadPage::verify`]), and its text is the layer's only when the
//!   two agree on at least [`LAYER_AGREES`] of their words
//!   ([`agreement`]), with [`Verdict::Verified`] as the reason; otherwise
//!   the OCR's, with [`Verdict::Disagrees`]. The whole page is read, not a sampled strip: when the
//!   layer loses, the page's text must come from somewhere, and the plan
//!   has no second pass to OCR the rest of the page.
//! - Reading the layer never fails a document (an unreadable layer means
//!   OCR); a render failure is the page's group failure, as with
//!   [`super::PdfPageRender`].

use std::sync::Arc;

use hayro::RenderCache;
use rayorch::{Cause, Outcome, Stage, StageContext, StageResult};
use serde::{Deserialize, Serialize};

use super::render::{page_scale, per_document};
use super::text::{PageLayer, TextSource, Verdict, layer_lines, read_page};
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
    /// The layer is trusted by its checks but is an OCR'd scan's hidden
    /// layer: OCR reads the page too, and [`ReadPage::text`] keeps the
    /// layer only if the two agree.
    pub verify: bool,
}

impl ReadPage {
    /// Where the page's text comes from, as read: a page to verify
    /// ([`ReadPage::verify`]) says layer here and may still move to OCR in
    /// [`ReadPage::text`].
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
    /// `ocr` (the page's recognised lines), in reading order. A page to
    /// verify keeps its layer's text only if it agrees with `ocr`.
    pub fn text(&self, ocr: &[LineText]) -> PageText {
        let read = |lines: &[LineText]| page_text(&reading_order(lines));
        // Each reading is put in order once: a page to verify needs both.
        let (verdict, text) = match (self.verify, self.source()) {
            (true, _) => {
                let (layer, ocr) = (read(&self.layer), read(ocr));
                let share = agreement(&layer, &ocr);
                let percent = (100.0 * share).round() as u32;
                match share >= LAYER_AGREES {
                    true => (Verdict::Verified { percent }, layer),
                    false => (Verdict::Disagrees { percent }, ocr),
                }
            }
            (false, TextSource::Layer) => (self.verdict, read(&self.layer)),
            (false, TextSource::Ocr) => (self.verdict, read(ocr)),
        };
        PageText {
            text,
            source: verdict.source(),
            verdict,
        }
    }
}

/// The least word agreement ([`agreement`]) at which an OCR'd scan's
/// hidden layer is kept over the page's own OCR. A layer that tells the
/// truth agrees on most words (89-95% on the real corpus' English scans),
/// less where the job's recognition model reads the script badly (43% on a
/// scanned Japanese page: the model misreads kana); one that does not
/// shares only common words with the page (13% for that page's layer
/// against another document's OCR, under 20% for unrelated English).
pub const LAYER_AGREES: f32 = 0.3;

/// How far two readings of a page agree: the F1 of their bags of words,
/// 0 to 1. Words are compared lowercased, as their letters, digits and
/// combining accents only (so `don’t`, `don't` and `dont` are one word,
/// and a typographic quote or dash is no part of one), and each ideograph,
/// kana or hangul syllable counts as a word of its own (CJK text has no
/// spaces, and two readers put spaces into it differently). Two empty
/// readings agree fully.
///
/// ```
/// use rayorch_models::pdf::agreement;
/// assert_eq!(agreement("The cat sat.", "the cat sat"), 1.0);
/// assert_eq!(agreement("“Don’t” — she said…", "\"Don't\" - she said..."), 1.0);
/// assert!(agreement("The cat sat on the mat", "A dog ran in the park") < 0.2);
/// assert_eq!(agreement("项目 总体", "项目总体"), 1.0);
/// ```
pub fn agreement(a: &str, b: &str) -> f32 {
    use std::collections::HashMap;
    fn words(text: &str) -> HashMap<String, usize> {
        let mut bag = HashMap::new();
        for w in text.split_whitespace() {
            let mut latin = String::new();
            for c in w.chars() {
                if wide(c) {
                    *bag.entry(c.to_string()).or_insert(0) += 1;
                } else if c.is_alphanumeric() {
                    latin.extend(c.to_lowercase());
                } else if !latin.is_empty() && combining(c) {
                    latin.push(c);
                }
            }
            if !latin.is_empty() {
                *bag.entry(latin).or_insert(0) += 1;
            }
        }
        bag
    }
    /// A combining mark (an accent written after its letter): part of
    /// the word. Any other character that is no letter or digit (quotes,
    /// apostrophes, dashes, ASCII or typographic) is not.
    fn combining(c: char) -> bool {
        matches!(c, '\u{0300}'..='\u{036F}' | '\u{1AB0}'..='\u{1AFF}' | '\u{1DC0}'..='\u{1DFF}' | '\u{20D0}'..='\u{20FF}' | '\u{FE20}'..='\u{FE2F}')
    }
    fn wide(c: char) -> bool {
        matches!(c, '\u{3040}'..='\u{30FF}' | '\u{3400}'..='\u{4DBF}' | '\u{4E00}'..='\u{9FFF}' | '\u{AC00}'..='\u{D7AF}' | '\u{F900}'..='\u{FAFF}')
    }
    let (a, b) = (words(a), words(b));
    let (na, nb): (usize, usize) = (a.values().sum(), b.values().sum());
    if na + nb == 0 {
        return 1.0;
    }
    let common: usize = a
        .iter()
        .map(|(w, &n)| n.min(b.get(w).copied().unwrap_or(0)))
        .sum();
    2.0 * common as f32 / (na + nb) as f32
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
    /// Take hidden layers as they are ([`PdfPageRead::trusting_hidden_layers`]).
    trust_hidden: bool,
}

impl PdfPageRead {
    /// A page reader rendering with `cfg`; `force_ocr` renders every page
    /// for OCR without reading its layer ([`Verdict::Forced`]).
    pub fn new(cfg: RenderConfig, force_ocr: bool) -> PdfPageRead {
        PdfPageRead {
            cfg,
            force_ocr,
            trust_hidden: false,
        }
    }

    /// The same reader, taking an OCR'd scan's hidden layer as it is
    /// (trusted when it passes its checks, never rendered to verify it):
    /// cheaper on corpora of such scans, blind to a layer that lies.
    pub fn trusting_hidden_layers(mut self, trust: bool) -> PdfPageRead {
        self.trust_hidden = trust;
        self
    }

    /// Read one page (its layer, then its pixels if OCR needs them).
    pub fn read<'a>(&self, page: &'a PdfPage, cache: &RenderCache<'a>) -> Outcome<ReadPage> {
        let p = &page.doc.pdf.pages()[page.index];
        let (verdict, layer, verify) = if self.force_ocr {
            (Verdict::Forced, Vec::new(), false)
        } else {
            let PageLayer {
                glyphs,
                verdict,
                hidden,
            } = read_page(p, page_scale(p, &self.cfg));
            let lines = match verdict {
                Verdict::Trusted => layer_lines(&glyphs, [f32::MIN, f32::MIN, f32::MAX, f32::MAX]),
                _ => Vec::new(),
            };
            (
                verdict,
                lines,
                hidden && verdict == Verdict::Trusted && !self.trust_hidden,
            )
        };
        let image = match (verdict.source(), verify) {
            (TextSource::Layer, false) => None,
            _ => match render_page(page, cache, &self.cfg) {
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
            verify,
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
