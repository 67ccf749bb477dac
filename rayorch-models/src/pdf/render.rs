//! PDF rendering with hayro (pure Rust): whole documents, or per page.
//!
//! Per page (what the OCR job does): [`PdfOpen`] parses a document once into
//! [`PdfPages`], a cheap list of page handles ([`PdfPage`]: the shared parsed
//! document and an index) that `expand!` turns into page Entities; then
//! [`PdfPageRender`] renders each page in its own Grain, batched and
//! replicated like any Call. Rendered pages in flight are bounded by batch
//! sizes, replicas and queues, not by document length, and a page whose
//! siblings failed is never rendered. [`render_document`] renders a whole
//! document at once (open + every page); both paths make identical images.
//!
//! Bad documents are record failures that name the file and the problem:
//! not a PDF, encrypted, corrupt. A renderer crash on one page is a group
//! failure of that page (its document is then suppressed, naming the page,
//! and its siblings' renders are skipped). A PDF with zero pages opens to an
//! empty list: an empty expansion, not an error.
//!
//! Sharing: hayro's `Pdf` is `Send + Sync` (checked at compile time below),
//! so one parsed document behind an `Arc` serves every replica. Its render
//! cache borrows the document and is not `Send`: a batch renders each
//! document's pages with one cache made for that batch.

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

use crate::{PageImage, PdfFile, PdfSource};

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
#[non_exhaustive]
pub enum RenderError {
    /// The file could not be read.
    #[error("{doc}: cannot read the file: {cause}; check the path and its permissions")]
    Read {
        /// The document.
        doc: String,
        /// The I/O error.
        cause: String,
        /// There is no such file.
        missing: bool,
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
        /// It looks cut short (pages the page tree declares are missing, or
        /// the end-of-file marker is).
        truncated: bool,
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

impl RenderError {
    /// A stable, machine-readable code for the failure lines (group
    /// failures by it without parsing the message): `input.missing`,
    /// `input.unreadable`, `input.not_pdf`, `pdf.encrypted`, `pdf.truncated`,
    /// `pdf.corrupt`, `pdf.render_crashed`.
    pub fn code(&self) -> &'static str {
        match self {
            RenderError::Read { missing: true, .. } => "input.missing",
            RenderError::Read { .. } => "input.unreadable",
            RenderError::NotPdf { .. } => "input.not_pdf",
            RenderError::Encrypted { .. } => "pdf.encrypted",
            RenderError::Corrupt { truncated: true, .. } => "pdf.truncated",
            RenderError::Corrupt { .. } => "pdf.corrupt",
            RenderError::Crashed { .. } => "pdf.render_crashed",
        }
    }

    /// This failure as a record's cause, with its [`code`](RenderError::code).
    pub fn cause(&self) -> Cause {
        Cause::new(self.to_string()).with_code(self.code())
    }
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

/// Render every page of `file`: [`open_document`], then [`render_page`] on
/// each page with one cache.
///
/// ```
/// use rayorch_models::{PdfFile, RenderConfig, render_document};
/// let pdf = rayorch_testdata::pdfgen::text_pdf(&[vec!["Hello".to_string()]], 24.0);
/// let pages = render_document(&PdfFile::from_bytes("hello.pdf", pdf), &RenderConfig::default()).unwrap();
/// assert_eq!(pages.len(), 1);
/// assert_eq!(pages[0].image.width(), 1275); // US letter at 150 dpi
/// ```
pub fn render_document(file: &PdfFile, cfg: &RenderConfig) -> Result<Vec<PageImage>, RenderError> {
    let pages: Vec<PdfPage> = open_document(file)?.into_iter().collect();
    let cache = RenderCache::new();
    pages.iter().map(|p| render_page(p, &cache, cfg)).collect()
}

/// A parsed document, shared by its pages.
pub struct OpenPdf {
    pub(crate) name: Arc<str>,
    /// Where it was read from (a page handle sent to another process is
    /// re-opened from it: `crate::wire`, feature `dist`).
    #[cfg_attr(
        not(feature = "dist"),
        expect(dead_code, reason = "read by the wire formats only")
    )]
    pub(crate) source: PdfSource,
    pub(crate) pdf: Pdf,
}

impl std::fmt::Debug for OpenPdf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenPdf")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

// Pages of one document render on any replica's thread.
const _: () = {
    const fn shared<T: Send + Sync>() {}
    shared::<OpenPdf>();
};

/// One page of an opened document: a cheap handle (an `Arc` and an index).
#[derive(Clone, Debug)]
pub struct PdfPage {
    pub(crate) doc: Arc<OpenPdf>,
    pub(crate) index: usize,
}

impl PdfPage {
    /// The document's name.
    pub fn doc(&self) -> &Arc<str> {
        &self.doc.name
    }

    /// Zero-based page number.
    pub fn index(&self) -> usize {
        self.index
    }
}

/// The pages of an opened document, in order: `expand!` yields one
/// [`PdfPage`] per page.
#[derive(Clone, Debug)]
pub struct PdfPages {
    pub(crate) doc: Arc<OpenPdf>,
}

impl PdfPages {
    /// Number of pages.
    pub fn len(&self) -> usize {
        self.doc.pdf.pages().len()
    }

    /// No pages at all?
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Iterator over the [`PdfPage`]s of a [`PdfPages`].
pub struct PdfPageIter {
    doc: Arc<OpenPdf>,
    next: usize,
    len: usize,
}

impl Iterator for PdfPageIter {
    type Item = PdfPage;
    fn next(&mut self) -> Option<PdfPage> {
        (self.next < self.len).then(|| {
            self.next += 1;
            PdfPage {
                doc: self.doc.clone(),
                index: self.next - 1,
            }
        })
    }
}

impl IntoIterator for PdfPages {
    type Item = PdfPage;
    type IntoIter = PdfPageIter;
    fn into_iter(self) -> PdfPageIter {
        let len = self.len();
        PdfPageIter {
            doc: self.doc,
            next: 0,
            len,
        }
    }
}

/// Read and parse `file` once, rendering nothing.
///
/// ```
/// use rayorch_models::{PdfFile, RenderConfig, open_document, render_page};
/// let pdf = rayorch_testdata::pdfgen::text_pdf(&[vec!["a".into()], vec!["b".into()]], 24.0);
/// let pages = open_document(&PdfFile::from_bytes("two.pdf", pdf)).unwrap();
/// assert_eq!(pages.len(), 2);
/// let cache = hayro::RenderCache::new();
/// let second = pages.into_iter().nth(1).unwrap();
/// assert_eq!(render_page(&second, &cache, &RenderConfig::default()).unwrap().page, 1);
/// ```
pub fn open_document(file: &PdfFile) -> Result<PdfPages, RenderError> {
    let doc = file.name.to_string();
    let bytes = document_bytes(file)?;
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
                truncated: false,
            });
        }
        Err(p) => {
            return Err(RenderError::Corrupt {
                doc,
                detail: format!("the parser crashed: {}", panic_message(&*p)),
                truncated: false,
            });
        }
    };
    check_page_count(&pdf, &doc, &bytes)?;
    // A URL read here keeps its URL: a page handle sent on travels as it.
    let source = match &file.source {
        PdfSource::Url(url) => PdfSource::Fetched {
            url: url.clone(),
            bytes,
        },
        other => other.clone(),
    };
    Ok(PdfPages {
        doc: Arc::new(OpenPdf {
            name: file.name.clone(),
            source,
            pdf,
        }),
    })
}

/// Render one page with `cache` (made for this page's document).
pub fn render_page<'a>(
    page: &'a PdfPage,
    cache: &RenderCache<'a>,
    cfg: &RenderConfig,
) -> Result<PageImage, RenderError> {
    let i = page.index;
    let crashed = |detail: String| RenderError::Crashed {
        doc: page.doc.name.to_string(),
        page: i,
        detail,
    };
    let p = &page.doc.pdf.pages()[i];
    let scale = page_scale(p, cfg);
    let pix = catch_unwind(AssertUnwindSafe(|| {
        hayro::render(
            p,
            cache,
            &InterpreterSettings::default(),
            &RenderSettings::default(),
            &PixmapSettings {
                x_scale: scale,
                y_scale: scale,
                bg_color: WHITE,
            },
        )
    }))
    .map_err(|p| crashed(panic_message(&*p)))?;
    let (pw, ph) = (pix.width() as u32, pix.height() as u32);
    let rgba = pix.data_as_u8_slice();
    let mut rgb = Vec::with_capacity(pw as usize * ph as usize * 3);
    for px in rgba.chunks_exact(4) {
        rgb.extend_from_slice(&px[..3]);
    }
    let image =
        RgbImage::from_raw(pw, ph, rgb).ok_or_else(|| crashed("the pixmap has an unexpected size".into()))?;
    Ok(PageImage {
        doc: page.doc.name.clone(),
        page: i,
        image: Arc::new(image),
        dpi: scale * 72.0,
    })
}

/// Pixels per PDF point for rendering `page` with `cfg`: the resolution,
/// lowered for a page that would pass `cfg.max_pixels` or a 16,000-pixel
/// side (pixmaps are u16-sized).
pub(crate) fn page_scale(page: &hayro::hayro_syntax::page::Page<'_>, cfg: &RenderConfig) -> f32 {
    let (w, h) = page.render_dimensions();
    let mut scale = cfg.dpi / 72.0;
    let px = (w * scale) as f64 * (h * scale) as f64;
    if px > cfg.max_pixels as f64 {
        scale *= (cfg.max_pixels as f64 / px).sqrt() as f32;
    }
    scale.min(16_000.0 / w.max(h).max(1.0))
}

/// Every page the page tree declares must be readable: the parser recovers
/// what it can from a damaged file, and a truncated file often yields fewer
/// pages (or none), which must not pass for a shorter (or empty) document.
/// Zero pages is legal only when the page tree says so. A file cut short
/// of its end-of-file marker whose page tree is lost (writers that put the
/// tree last, as pdfTeX does, lose it to any cut) has its pages found by
/// scanning, and nothing says how many are gone: a failure too.
fn check_page_count(pdf: &Pdf, doc: &str, bytes: &[u8]) -> Result<(), RenderError> {
    let read = pdf.pages().len();
    let xref = pdf.xref();
    let catalog: Option<Dict<'_>> = xref.get(xref.root_id());
    let declared = catalog
        .and_then(|c| c.get::<Dict<'_>>(b"Pages"))
        .and_then(|p| p.get::<i64>(b"Count"));
    let corrupt = |detail: String, truncated| RenderError::Corrupt {
        doc: doc.to_string(),
        detail,
        truncated,
    };
    match declared {
        Some(n) if n > read as i64 => Err(corrupt(
            format!(
                "the page tree declares {n} pages but only {read} could be read (is the file truncated?)"
            ),
            true,
        )),
        Some(_) => Ok(()),
        None if read == 0 => Err(corrupt("no page tree could be read".into(), false)),
        None if !ends_with_eof_marker(bytes) => Err(corrupt(
            format!(
                "the file ends without its end-of-file marker and its page tree is lost; {read} pages were \
             found by scanning, others may be missing (is the file truncated?)"
            ),
            true,
        )),
        // A complete file with a damaged root whose pages were still found:
        // their count is all we know.
        None => Ok(()),
    }
}

/// Does `%%EOF` appear in the last kilobyte (readers allow trailing bytes
/// after it)?
fn ends_with_eof_marker(bytes: &[u8]) -> bool {
    let tail = &bytes[bytes.len().saturating_sub(1024)..];
    tail.windows(5).any(|w| w == b"%%EOF")
}

/// How this process reads a document named by a URL that reaches it
/// unfetched ([`read_urls_with`]).
type ReadUrl = dyn Fn(&str) -> Result<Arc<[u8]>, String> + Send + Sync;

/// This process's reader of documents named by a URL, if one is set.
static READ_URL: std::sync::OnceLock<Box<ReadUrl>> = std::sync::OnceLock::new();

/// Read documents that reach this process as a URL with `read` (an
/// object-store client): a worker of a distributed run gets a fetched
/// document's page handles as its URL ([`PdfSource::Fetched`] travels so)
/// and opens it from there. Set once per process; later calls are ignored.
/// Without it, opening a [`PdfSource::Url`] fails: a pipeline reads a URL
/// by its fetch Call first.
pub fn read_urls_with(read: impl Fn(&str) -> Result<Arc<[u8]>, String> + Send + Sync + 'static) {
    let _ = READ_URL.set(Box::new(read));
}

/// The bytes of `file`: read from its path, or those it holds (a URL's
/// document is read by its fetch Call first, or by [`read_urls_with`]'s
/// reader when one is set).
pub fn document_bytes(file: &PdfFile) -> Result<Arc<[u8]>, RenderError> {
    let doc = || file.name.to_string();
    match &file.source {
        PdfSource::Bytes(b) | PdfSource::Fetched { bytes: b, .. } => Ok(b.clone()),
        PdfSource::Url(u) if let Some(read) = READ_URL.get() => read(u).map_err(|cause| RenderError::Read {
            doc: doc(),
            cause,
            missing: false,
        }),
        PdfSource::Path(p) => std::fs::read(p).map(Into::into).map_err(|e| RenderError::Read {
            doc: doc(),
            cause: e.to_string(),
            missing: e.kind() == std::io::ErrorKind::NotFound,
        }),
        PdfSource::Url(u) => Err(RenderError::Read {
            doc: doc(),
            cause: format!("{u} was not fetched (a pipeline opens a URL's document after its fetch Call)"),
            missing: false,
        }),
        PdfSource::Invalid(why) => Err(RenderError::Read {
            doc: doc(),
            cause: why.to_string(),
            missing: false,
        }),
    }
}

/// Opens documents: one document per Grain, parsed once, nothing rendered
/// (expand its [`PdfPages`] into page Entities and render with
/// [`PdfPageRender`]).
#[derive(Clone, Debug, Default)]
pub struct PdfOpen;

impl Stage for PdfOpen {
    type In = PdfFile;
    type Out = PdfPages;

    fn run(&mut self, batch: Vec<PdfFile>, _cx: &StageContext) -> StageResult<PdfPages> {
        Ok(batch
            .iter()
            .map(|f| {
                let _span = tracing::debug_span!("pdf_open", doc = &*f.name).entered();
                match open_document(f) {
                    Ok(pages) => Outcome::Ok(pages),
                    Err(e) => Outcome::RecordFailure(e.cause()),
                }
            })
            .collect())
    }
}

/// Renders pages: one page per Grain; a batch may mix documents (each
/// document's pages share one render cache within the batch).
#[derive(Clone, Debug, Default)]
pub struct PdfPageRender {
    cfg: RenderConfig,
}

impl PdfPageRender {
    /// A page renderer with `cfg`.
    pub fn new(cfg: RenderConfig) -> PdfPageRender {
        PdfPageRender { cfg }
    }
}

impl Stage for PdfPageRender {
    type In = PdfPage;
    type Out = PageImage;

    fn run(&mut self, batch: Vec<PdfPage>, _cx: &StageContext) -> StageResult<PageImage> {
        Ok(per_document(&batch, |page, cache| {
            let _span =
                tracing::debug_span!("pdf_render_page", doc = &*page.doc.name, page = page.index).entered();
            match render_page(page, cache, &self.cfg) {
                Ok(image) => Outcome::Ok(image),
                // The document cannot be complete: skip its other pages.
                Err(e) => Outcome::GroupFailure(Cause::new(e.to_string())),
            }
        }))
    }
}

/// `f` on each page of `batch`, in order, the pages of one document sharing
/// one render cache (it borrows the document, so it is made per batch).
pub(crate) fn per_document<T>(
    batch: &[PdfPage],
    mut f: impl for<'a> FnMut(&'a PdfPage, &RenderCache<'a>) -> Outcome<T>,
) -> Vec<Outcome<T>> {
    let mut out: Vec<Option<Outcome<T>>> = batch.iter().map(|_| None).collect();
    for (i, first) in batch.iter().enumerate() {
        if out[i].is_some() {
            continue;
        }
        let cache = RenderCache::new();
        for (j, page) in batch.iter().enumerate().skip(i) {
            if out[j].is_none() && Arc::ptr_eq(&page.doc, &first.doc) {
                out[j] = Some(f(page, &cache));
            }
        }
    }
    out.into_iter().flatten().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rayorch_testdata::pdfgen::text_pdf;

    fn doc(name: &str, pages: usize) -> PdfFile {
        let texts: Vec<Vec<String>> = (0..pages).map(|i| vec![format!("{name} page {i}")]).collect();
        PdfFile::from_bytes(name, text_pdf(&texts, 24.0))
    }

    fn open(f: &PdfFile) -> PdfPages {
        match PdfOpen
            .run(vec![f.clone()], &StageContext::new("open", 0))
            .unwrap()
            .remove(0)
        {
            Outcome::Ok(p) => p,
            _ => panic!("{} opens", f.name),
        }
    }

    #[test]
    fn pages_rendered_one_per_grain_in_mixed_batches_equal_the_whole_document() {
        let cfg = RenderConfig {
            dpi: 40.0,
            ..RenderConfig::default()
        };
        let (a, b) = (doc("a.pdf", 3), doc("b.pdf", 2));
        let (pa, pb) = (open(&a), open(&b));
        assert_eq!((pa.len(), pb.len()), (3, 2));
        // Interleaved documents, out of page order: one batch.
        let (va, vb): (Vec<PdfPage>, Vec<PdfPage>) = (pa.into_iter().collect(), pb.into_iter().collect());
        let batch = vec![
            va[2].clone(),
            vb[0].clone(),
            va[0].clone(),
            vb[1].clone(),
            va[1].clone(),
        ];
        let out = PdfPageRender::new(cfg.clone())
            .run(batch, &StageContext::new("render", 0))
            .unwrap();
        let whole_a = render_document(&a, &cfg).unwrap();
        let whole_b = render_document(&b, &cfg).unwrap();
        let want = [&whole_a[2], &whole_b[0], &whole_a[0], &whole_b[1], &whole_a[1]];
        assert_eq!(out.len(), want.len());
        for (got, want) in out.iter().zip(want) {
            let Outcome::Ok(got) = got else { panic!("rendered") };
            assert_eq!((&got.doc, got.page, got.dpi), (&want.doc, want.page, want.dpi));
            assert_eq!(
                got.image.as_raw(),
                want.image.as_raw(),
                "{} page {}",
                got.doc,
                got.page
            );
        }
    }

    #[test]
    fn bad_files_fail_at_open_naming_the_file_and_empty_ones_open_to_no_pages() {
        let bad = PdfFile::from_bytes("notes.txt", b"just text".to_vec());
        let out = PdfOpen.run(vec![bad], &StageContext::new("open", 0)).unwrap();
        match &out[0] {
            Outcome::RecordFailure(c) => assert!(c.message().starts_with("notes.txt: not a PDF"), "{c:?}"),
            _ => panic!("not a PDF must fail"),
        }
        let empty = open(&PdfFile::from_bytes("empty.pdf", text_pdf(&[], 12.0)));
        assert!(empty.is_empty());
        assert_eq!(empty.into_iter().count(), 0);
    }
}
