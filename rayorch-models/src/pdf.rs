//! `PdfRender`: a whole PDF document to page images, with hayro (pure Rust).
//!
//! One Grain is one document: it is parsed once and its pages rendered in
//! order on the replica's own thread (hayro's render cache is per thread).
//! Bad documents are record failures that name the file and the problem:
//! not a PDF, encrypted, corrupt, or a renderer crash on one page. A PDF with
//! zero pages renders to an empty list: an empty expansion, not an error.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use hayro::hayro_interpret::InterpreterSettings;
use hayro::hayro_syntax::object::Dict;
use hayro::hayro_syntax::{LoadPdfError, Pdf};
use hayro::vello_cpu::color::palette::css::WHITE;
use hayro::{PixmapSettings, RenderCache, RenderSettings};
use image::RgbImage;
use rayorch::{Cause, Outcome, Stage, StageContext, StageResult};
use thiserror::Error;

use crate::types::{PageImage, PdfFile, PdfSource};

/// How pages are rasterised.
#[derive(Clone, Debug, PartialEq)]
pub struct RenderConfig {
    /// Target resolution (72 = one pixel per PDF point).
    pub dpi: f32,
    /// Largest page in pixels; bigger pages are rendered at a lower DPI.
    pub max_pixels: u64,
}

impl Default for RenderConfig {
    fn default() -> Self {
        RenderConfig {
            dpi: 150.0,
            max_pixels: 6_000_000,
        }
    }
}

/// Why a document could not be rendered. Each names the document.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum RenderError {
    /// The file could not be read.
    #[error("{doc}: cannot read the file: {cause}; check the path and its permissions")]
    Read {
        /// The document.
        doc: String,
        /// The I/O error.
        cause: String,
    },
    /// No `%PDF-` header in the first KiB.
    #[error("{doc}: not a PDF (no `%PDF-` header; the file starts with {head:?}); pass only PDF files")]
    NotPdf {
        /// The document.
        doc: String,
        /// Its first bytes, for the message.
        head: String,
    },
    /// The document is encrypted.
    #[error(
        "{doc}: the PDF is encrypted ({detail}); decrypt it first (e.g. `qpdf --decrypt`), the renderer reads no encrypted files"
    )]
    Encrypted {
        /// The document.
        doc: String,
        /// What the decryptor said.
        detail: String,
    },
    /// The PDF structure cannot be parsed.
    #[error("{doc}: the PDF is corrupt ({detail}); repair it (e.g. `qpdf` or re-export it) and run again")]
    Corrupt {
        /// The document.
        doc: String,
        /// What failed.
        detail: String,
    },
    /// The renderer crashed on a page.
    #[error(
        "{doc}: the renderer crashed on page {page}: {detail}; this document uses a PDF feature the renderer cannot handle"
    )]
    Crashed {
        /// The document.
        doc: String,
        /// Zero-based page.
        page: usize,
        /// The panic message.
        detail: String,
    },
}

fn head_text(bytes: &[u8]) -> String {
    bytes
        .iter()
        .take(16)
        .map(|&b| {
            if b.is_ascii_graphic() || b == b' ' {
                b as char
            } else {
                '.'
            }
        })
        .collect()
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_string())
}

/// Render every page of `file`.
///
/// ```
/// use rayorch_models::{PdfFile, RenderConfig, render_document};
/// let pdf = rayorch_models::pdfgen::text_pdf(&[vec!["Hello".to_string()]], 24.0);
/// let pages = render_document(&PdfFile::from_bytes("hello.pdf", pdf), &RenderConfig::default()).unwrap();
/// assert_eq!(pages.len(), 1);
/// assert_eq!(pages[0].image.width(), 1275); // US letter at 150 dpi
/// ```
pub fn render_document(file: &PdfFile, cfg: &RenderConfig) -> Result<Vec<PageImage>, RenderError> {
    let doc = file.name.to_string();
    let bytes: Arc<[u8]> = match &file.source {
        PdfSource::Bytes(b) => b.clone(),
        PdfSource::Path(p) => std::fs::read(p)
            .map_err(|e| RenderError::Read {
                doc: doc.clone(),
                cause: e.to_string(),
            })?
            .into(),
    };
    let window = &bytes[..bytes.len().min(1024)];
    if !window.windows(5).any(|w| w == b"%PDF-") {
        return Err(RenderError::NotPdf {
            doc,
            head: head_text(&bytes),
        });
    }
    let parsed = catch_unwind(AssertUnwindSafe(|| Pdf::new(bytes.to_vec())));
    let pdf = match parsed {
        Ok(Ok(pdf)) => pdf,
        Ok(Err(LoadPdfError::Decryption(e))) => {
            return Err(RenderError::Encrypted {
                doc,
                detail: format!("{e:?}"),
            });
        }
        Ok(Err(LoadPdfError::Invalid)) => {
            return Err(RenderError::Corrupt {
                doc,
                detail: "no readable cross-reference table or page tree".into(),
            });
        }
        Err(p) => {
            return Err(RenderError::Corrupt {
                doc,
                detail: format!("the parser crashed: {}", panic_message(&*p)),
            });
        }
    };
    check_page_count(&pdf, &doc)?;
    let cache = RenderCache::new();
    let interp = InterpreterSettings::default();
    let settings = RenderSettings::default();
    let mut out = Vec::with_capacity(pdf.pages().len());
    for (i, page) in pdf.pages().iter().enumerate() {
        let (w, h) = page.render_dimensions();
        let mut scale = cfg.dpi / 72.0;
        let px = (w * scale) as f64 * (h * scale) as f64;
        if px > cfg.max_pixels as f64 {
            scale *= (cfg.max_pixels as f64 / px).sqrt() as f32;
        }
        // Pixmaps are u16-sized.
        scale = scale.min(16_000.0 / w.max(h).max(1.0));
        let pix = catch_unwind(AssertUnwindSafe(|| {
            hayro::render(
                page,
                &cache,
                &interp,
                &settings,
                &PixmapSettings {
                    x_scale: scale,
                    y_scale: scale,
                    bg_color: WHITE,
                },
            )
        }))
        .map_err(|p| RenderError::Crashed {
            doc: doc.clone(),
            page: i,
            detail: panic_message(&*p),
        })?;
        let (pw, ph) = (pix.width() as u32, pix.height() as u32);
        let rgba = pix.data_as_u8_slice();
        let mut rgb = Vec::with_capacity(pw as usize * ph as usize * 3);
        for px in rgba.chunks_exact(4) {
            rgb.extend_from_slice(&px[..3]);
        }
        let image = RgbImage::from_raw(pw, ph, rgb).ok_or_else(|| RenderError::Crashed {
            doc: doc.clone(),
            page: i,
            detail: "the pixmap has an unexpected size".into(),
        })?;
        out.push(PageImage {
            doc: file.name.clone(),
            page: i,
            image: Arc::new(image),
            dpi: scale * 72.0,
        });
    }
    Ok(out)
}

/// Every page the page tree declares must be readable: the parser recovers
/// what it can from a damaged file, and a truncated file often yields fewer
/// pages (or none), which must not pass for a shorter (or empty) document.
/// Zero pages is legal only when the page tree says so.
fn check_page_count(pdf: &Pdf, doc: &str) -> Result<(), RenderError> {
    let read = pdf.pages().len();
    let xref = pdf.xref();
    let catalog: Option<Dict<'_>> = xref.get(xref.root_id());
    let declared = catalog
        .and_then(|c| c.get::<Dict<'_>>(b"Pages"))
        .and_then(|p| p.get::<i64>(b"Count"));
    let corrupt = |detail: String| RenderError::Corrupt {
        doc: doc.to_string(),
        detail,
    };
    match declared {
        Some(n) if n > read as i64 => Err(corrupt(format!(
            "the page tree declares {n} pages but only {read} could be read (is the file truncated?)"
        ))),
        Some(_) => Ok(()),
        None if read == 0 => Err(corrupt("no page tree could be read".into())),
        // A damaged root whose pages were still found: their count is all we know.
        None => Ok(()),
    }
}

/// The render stage: one document per Grain (use batch size 1 and several
/// replicas for parallelism).
#[derive(Clone, Debug, Default)]
pub struct PdfRender {
    cfg: RenderConfig,
}

impl PdfRender {
    /// A renderer with `cfg`.
    pub fn new(cfg: RenderConfig) -> PdfRender {
        PdfRender { cfg }
    }
}

impl Stage for PdfRender {
    type In = PdfFile;
    type Out = Vec<PageImage>;

    fn run(&mut self, batch: Vec<PdfFile>, _cx: &StageContext) -> StageResult<Vec<PageImage>> {
        Ok(batch
            .iter()
            .map(|f| {
                let _span = tracing::debug_span!("pdf_render", doc = &*f.name).entered();
                match render_document(f, &self.cfg) {
                    Ok(pages) => Outcome::Ok(pages),
                    Err(e) => Outcome::RecordFailure(Cause::new(e.to_string())),
                }
            })
            .collect())
    }
}
