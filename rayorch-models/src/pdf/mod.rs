//! The PDF family (feature `pdf`): a document in, its page handles, its
//! rendered pages and its text layer out, all with hayro (pure Rust).
//!
//! | item | what |
//! | --- | --- |
//! | [`PdfOpen`] | a [`PdfFile`] → [`PdfPages`] (parsed once; cheap page handles to `expand!`) |
//! | [`PdfPageRender`] | a [`PdfPage`] → [`PageImage`](crate::PageImage) (one page per Grain, batches mix documents) |
//! | [`PdfPageRead`] | a [`PdfPage`] → [`ReadPage`]: its trusted text layer, or its pixels for OCR (the decision and its reason per page) |
//! | [`text`] | the text a PDF already carries: glyphs, positions, usable or not, lines |
//!
//! [`render_document`] renders a whole document at once (the same images
//! as page by page).

mod read;
mod render;
pub mod text;

use std::path::PathBuf;
use std::sync::Arc;

pub use read::{LAYER_AGREES, PageText, PdfPageRead, ReadPage, agreement};
pub use render::{
    OpenPdf, PdfOpen, PdfPage, PdfPageIter, PdfPageRender, PdfPages, RenderConfig, RenderError,
    document_bytes, open_document, read_urls_with, render_document, render_page,
};

/// One input document: a name for messages and outputs, and its bytes or path.
#[derive(Clone, Debug)]
pub struct PdfFile {
    /// How outputs and failure messages name the document (usually the path).
    pub name: Arc<str>,
    /// Where the bytes come from.
    pub source: PdfSource,
}

/// Where a [`PdfFile`]'s bytes are.
#[derive(Clone, Debug)]
pub enum PdfSource {
    /// Read the file inside the render stage (on its blocking thread).
    Path(PathBuf),
    /// Already in memory.
    Bytes(Arc<[u8]>),
    /// An object in object storage (`s3://…`, `http(s)://…`), read by the
    /// job's fetch Call into [`PdfSource::Bytes`] before it is opened;
    /// opening it unfetched is an error.
    Url(Arc<str>),
    /// No document: why the input names none (an input list's bad row).
    /// The job's first Call fails with it.
    Invalid(Arc<str>),
    /// An object's bytes, read from its URL by the job's fetch Call:
    /// opened like [`PdfSource::Bytes`]. A handle of it sent to another
    /// process travels as the URL alone (`crate::wire`, feature `dist`),
    /// which that process reads itself ([`read_urls_with`]): a page never
    /// carries its whole document.
    Fetched {
        /// Where the bytes were read from.
        url: Arc<str>,
        /// The object's bytes.
        bytes: Arc<[u8]>,
    },
}

impl PdfFile {
    /// A document read from `path` when it is rendered.
    pub fn from_path(path: impl Into<PathBuf>) -> PdfFile {
        let path = path.into();
        PdfFile {
            name: Arc::from(path.display().to_string()),
            source: PdfSource::Path(path),
        }
    }

    /// A document at `url` in object storage, named by its URL (the job's
    /// fetch Call reads it).
    pub fn from_url(url: impl Into<Arc<str>>) -> PdfFile {
        let url = url.into();
        PdfFile {
            name: url.clone(),
            source: PdfSource::Url(url),
        }
    }

    /// An input that names no document (an input list's bad row), named
    /// `name`: reading it fails with `why`.
    pub fn invalid(name: impl Into<Arc<str>>, why: impl Into<Arc<str>>) -> PdfFile {
        PdfFile {
            name: name.into(),
            source: PdfSource::Invalid(why.into()),
        }
    }

    /// A document read from `url` into memory (the fetch Call's output).
    pub fn fetched(
        name: impl Into<Arc<str>>,
        url: impl Into<Arc<str>>,
        bytes: impl Into<Arc<[u8]>>,
    ) -> PdfFile {
        PdfFile {
            name: name.into(),
            source: PdfSource::Fetched {
                url: url.into(),
                bytes: bytes.into(),
            },
        }
    }

    /// A document already in memory.
    pub fn from_bytes(name: impl Into<Arc<str>>, bytes: impl Into<Arc<[u8]>>) -> PdfFile {
        PdfFile {
            name: name.into(),
            source: PdfSource::Bytes(bytes.into()),
        }
    }
}
