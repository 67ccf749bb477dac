//! Byte formats for the values of these families (feature `dist`), so
//! their Calls can run in other processes (`rayorch::dist`: the owner and the workers register the
//! same codecs).
//!
//! Invariants:
//! - `decode(encode(v))` is `v`, bit for bit: pixels travel raw (RGB8),
//!   floats as their IEEE bits, so a document's output is the same whichever
//!   process ran each Call.
//! - A page handle ([`PdfPage`], [`PdfPages`]) travels as its document's
//!   source (path, or bytes for an in-memory document) and page index; the
//!   receiving process re-opens the document once and shares it among every
//!   page handle it decodes while any is alive (a weak cache), as
//!   [`open_document`] does within one process. So workers must reach the
//!   same paths as the owner (a shared file system), or the documents must
//!   be given as bytes.
//! - Decoding never panics: truncated or foreign bytes are an `Err` naming
//!   what was being read.
//! - Decoders given input roots ([`Wire::from_wire_within`], [`InputRoots`]:
//!   a worker's, set to the roots its owner announces) decode a document
//!   only when its path lies under one of them once symbolic links and `..`
//!   are resolved, or its URL starts with one; any other is refused naming
//!   the document, the path and the roots, before the file is opened.
//!   [`Wire::from_wire`] (a process that runs the whole job) reads what it
//!   is given.
//! - Decoding never trusts a declared size: a length or count is refused
//!   when the bytes left cannot hold it, before anything is allocated for
//!   it, so a decode allocates at most a small multiple of its input (whose
//!   size `rayorch::dist` caps at `DistConfig::payload_cap` before reading
//!   it). An image's width × height × 3 must equal its pixel bytes exactly
//!   and stay within [`MAX_IMAGE_PIXELS`].

#[cfg(feature = "pdf")]
use std::path::PathBuf;
use std::sync::Arc;
#[cfg(feature = "pdf")]
use std::sync::Mutex;
#[cfg(feature = "pdf")]
use std::sync::Weak;

use image::RgbImage;

use crate::PageImage;
use crate::lines::{LineText, TextLine};
#[cfg(feature = "pdf")]
use crate::pdf::text::Verdict;
#[cfg(feature = "pdf")]
use crate::pdf::{OpenPdf, PageText, PdfFile, PdfPage, PdfPages, PdfSource, ReadPage, open_document};

/// The most pixels a decoded image may declare (2^28, about 268 M: an A0
/// page rendered at 400 dpi is 248 M), whatever bytes follow: a page or a
/// line crop larger than this is a damaged frame, not a document.
pub const MAX_IMAGE_PIXELS: u64 = 1 << 28;

/// A value with a byte encoding of its own.
pub trait Wire: Sized {
    /// A stable name for the type on the wire.
    const TAG: &'static str;
    /// Append the encoding of `self` to `out`.
    fn put(&self, out: &mut Vec<u8>);
    /// Read one value.
    fn get(r: &mut Reader<'_>) -> Result<Self, String>;

    /// The encoding alone.
    fn to_wire(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.put(&mut out);
        out
    }

    /// Decode a whole buffer (trailing bytes are an error).
    fn from_wire(b: &[u8]) -> Result<Self, String> {
        Self::read_all(Reader {
            b,
            at: 0,
            roots: None,
        })
    }

    /// [`Wire::from_wire`], refusing documents outside `roots` (a worker's
    /// codecs: see [`InputRoots`]).
    #[cfg(feature = "pdf")]
    fn from_wire_within(b: &[u8], roots: &InputRoots) -> Result<Self, String> {
        Self::read_all(Reader {
            b,
            at: 0,
            roots: Some(roots),
        })
    }

    /// Read one value that fills the reader's buffer.
    fn read_all(mut r: Reader<'_>) -> Result<Self, String> {
        let b = r.b;
        let v = Self::get(&mut r)?;
        if r.at != b.len() {
            return Err(format!(
                "{}: {} bytes left over after the value",
                Self::TAG,
                b.len() - r.at
            ));
        }
        Ok(v)
    }
}

/// Reads values back from a buffer.
pub struct Reader<'a> {
    b: &'a [u8],
    at: usize,
    /// The roots documents must lie under, when the decoder was given some.
    #[cfg(feature = "pdf")]
    roots: Option<&'a InputRoots>,
    #[cfg(not(feature = "pdf"))]
    #[expect(
        dead_code,
        reason = "only documents (feature `pdf`) are checked against roots"
    )]
    roots: Option<&'a ()>,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], String> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&e| e <= self.b.len())
            .ok_or_else(|| {
                format!(
                    "truncated value: {what} needs {n} bytes at offset {}, the buffer holds {}",
                    self.at,
                    self.b.len()
                )
            })?;
        let s = &self.b[self.at..end];
        self.at = end;
        Ok(s)
    }

    /// A little-endian `u64` (`what` names it in errors).
    pub fn u64(&mut self, what: &str) -> Result<u64, String> {
        let s = self.take(8, what)?;
        Ok(u64::from_le_bytes(s.try_into().unwrap_or([0; 8])))
    }

    /// One byte.
    pub fn u8(&mut self, what: &str) -> Result<u8, String> {
        Ok(self.take(1, what)?[0])
    }

    /// A little-endian `u32`.
    pub fn u32(&mut self, what: &str) -> Result<u32, String> {
        let s = self.take(4, what)?;
        Ok(u32::from_le_bytes(s.try_into().unwrap_or([0; 4])))
    }

    /// A count of items, refused when larger than the bytes left (a
    /// damaged length never makes a huge allocation).
    pub fn len(&mut self, what: &str) -> Result<usize, String> {
        let n = self.u64(what)?;
        let left = self.b.len().saturating_sub(self.at);
        usize::try_from(n)
            .ok()
            .filter(|&n| n <= left)
            .ok_or_else(|| format!("bad value: {what} claims {n} items, more than the {left} bytes left"))
    }

    /// A length-prefixed byte string.
    pub fn bytes(&mut self, what: &str) -> Result<&'a [u8], String> {
        let n = self.len(what)?;
        self.take(n, what)
    }

    /// A length-prefixed UTF-8 string.
    pub fn string(&mut self, what: &str) -> Result<String, String> {
        let b = self.bytes(what)?;
        String::from_utf8(b.to_vec()).map_err(|_| format!("bad value: {what} is not UTF-8"))
    }
}

/// Append `v` little-endian (what [`Reader::u64`] reads).
pub fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// Append a length-prefixed byte string (what [`Reader::bytes`] reads).
pub fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_u64(out, b.len() as u64);
    out.extend_from_slice(b);
}

fn put_image(out: &mut Vec<u8>, im: &RgbImage) {
    out.extend_from_slice(&im.width().to_le_bytes());
    out.extend_from_slice(&im.height().to_le_bytes());
    put_bytes(out, im.as_raw());
}

fn put_box(out: &mut Vec<u8>, b: [u32; 4]) {
    for v in b {
        out.extend_from_slice(&v.to_le_bytes());
    }
}

fn get_box(r: &mut Reader<'_>) -> Result<[u32; 4], String> {
    let mut b = [0u32; 4];
    for v in &mut b {
        *v = r.u32("a box")?;
    }
    Ok(b)
}

fn get_image(r: &mut Reader<'_>, what: &str) -> Result<RgbImage, String> {
    let (w, h) = (r.u32(what)?, r.u32(what)?);
    // u32 × u32 fits a u64; × 3 checked.
    let pixels = u64::from(w) * u64::from(h);
    if pixels > MAX_IMAGE_PIXELS {
        return Err(format!(
            "bad value: {what} declares {w}×{h} = {pixels} pixels, at most {MAX_IMAGE_PIXELS} allowed"
        ));
    }
    let raw = r.bytes(what)?;
    if pixels.checked_mul(3) != Some(raw.len() as u64) {
        return Err(format!(
            "bad value: {what} is {w}×{h} RGB ({} bytes) but carries {} bytes",
            pixels.saturating_mul(3),
            raw.len()
        ));
    }
    RgbImage::from_raw(w, h, raw.to_vec())
        .ok_or_else(|| format!("bad value: {what} is not a {w}×{h} RGB image"))
}

impl Wire for String {
    const TAG: &'static str = "string";
    fn put(&self, out: &mut Vec<u8>) {
        put_bytes(out, self.as_bytes());
    }
    fn get(r: &mut Reader<'_>) -> Result<String, String> {
        r.string("a string")
    }
}

impl Wire for Vec<f32> {
    const TAG: &'static str = "f32s";
    fn put(&self, out: &mut Vec<u8>) {
        put_u64(out, self.len() as u64);
        for x in self {
            out.extend_from_slice(&x.to_bits().to_le_bytes());
        }
    }
    fn get(r: &mut Reader<'_>) -> Result<Vec<f32>, String> {
        let n = r.len("a float vector")?;
        (0..n).map(|_| r.u32("a float").map(f32::from_bits)).collect()
    }
}

/// Lists of wire values: a count, then each value.
macro_rules! wire_list {
    ($($t:ty => $tag:literal),* $(,)?) => {$(
        impl Wire for Vec<$t> {
            const TAG: &'static str = $tag;
            fn put(&self, out: &mut Vec<u8>) {
                put_u64(out, self.len() as u64);
                for v in self {
                    v.put(out);
                }
            }
            fn get(r: &mut Reader<'_>) -> Result<Self, String> {
                let n = r.len($tag)?;
                (0..n).map(|_| <$t>::get(r)).collect()
            }
        }
    )*};
}

wire_list!(
    String => "strings",
    Vec<f32> => "f32 lists",
);

wire_list!(
    TextLine => "text lines",
    LineText => "line texts",
);

impl Wire for LineText {
    const TAG: &'static str = "line text";
    fn put(&self, out: &mut Vec<u8>) {
        self.text.put(out);
        out.extend_from_slice(&self.confidence.to_bits().to_le_bytes());
        out.push(u8::from(self.low_confidence));
        put_u64(out, self.row as u64);
        put_box(out, self.bbox);
    }
    fn get(r: &mut Reader<'_>) -> Result<LineText, String> {
        let text = String::get(r)?;
        let confidence = f32::from_bits(r.u32("a confidence")?);
        let low_confidence = match r.take(1, "a flag")?[0] {
            0 => false,
            1 => true,
            t => {
                return Err(format!(
                    "bad value: a low-confidence flag of {t}, expected 0 or 1"
                ));
            }
        };
        let row = r.u64("a row")? as usize;
        let bbox = get_box(r)?;
        Ok(LineText {
            text,
            confidence,
            low_confidence,
            row,
            bbox,
        })
    }
}

/// The roots a worker may read documents from, shared by the decoders of
/// one set of codecs: unrestricted until [`InputRoots::set`] is called.
#[cfg(feature = "pdf")]
#[derive(Clone, Default)]
pub struct InputRoots(Arc<std::sync::RwLock<Option<Vec<String>>>>);

#[cfg(feature = "pdf")]
impl InputRoots {
    /// Restrict the documents these decoders accept to those under `roots`
    /// (absolute folders, or URL prefixes such as `s3://bucket/corpus/`);
    /// an empty list refuses every path and URL (documents sent as bytes
    /// still decode). Folders are resolved (`..`, symbolic links) now; one
    /// that does not exist is an error. For
    /// `rayorch_dist::Codecs::input_roots`: a worker applies the roots its
    /// owner announced.
    pub fn set(&self, roots: &[String]) -> Result<(), String> {
        let mut resolved = Vec::with_capacity(roots.len());
        for r in roots {
            if r.contains("://") {
                resolved.push(r.clone());
            } else {
                let p = std::fs::canonicalize(r)
                    .map_err(|e| format!("input root {r} cannot be read on this machine: {e}"))?;
                resolved.push(p.to_string_lossy().into_owned());
            }
        }
        *self.0.write().unwrap_or_else(|p| p.into_inner()) = Some(resolved);
        Ok(())
    }

    /// May these decoders accept `source`?
    fn check(&self, name: &str, source: &PdfSource) -> Result<(), String> {
        match self.0.read().unwrap_or_else(|p| p.into_inner()).as_ref() {
            Some(roots) => within(name, source, roots),
            None => Ok(()),
        }
    }
}

/// Is `path` `root` or below it, by whole components (or URL prefix)?
#[cfg(feature = "pdf")]
fn under(path: &str, root: &str) -> bool {
    let root = root.trim_end_matches('/');
    path == root || path.strip_prefix(root).is_some_and(|rest| rest.starts_with('/'))
}

/// Does `source` lie under one of `roots` (resolved)?
#[cfg(feature = "pdf")]
fn within(name: &str, source: &PdfSource, roots: &[String]) -> Result<(), String> {
    let (what, at) = match source {
        PdfSource::Bytes(_) | PdfSource::Invalid(_) => return Ok(()),
        PdfSource::Url(u) | PdfSource::Fetched { url: u, .. } => ("URL", u.to_string()),
        // Resolved as the file system will (symbolic links, `..`); a path
        // that does not resolve is judged as written, without `..`.
        PdfSource::Path(p) => match std::fs::canonicalize(p) {
            Ok(real) => ("path", real.to_string_lossy().into_owned()),
            Err(_) if p.components().any(|c| c == std::path::Component::ParentDir) => {
                ("path", p.to_string_lossy().into_owned() + " (with `..`)")
            }
            Err(_) => ("path", p.to_string_lossy().into_owned()),
        },
    };
    if roots.iter().any(|r| under(&at, r)) {
        return Ok(());
    }
    Err(format!(
        "document `{name}`: its {what} {at} is outside the input roots this worker may read ({}); the owner named a file outside the roots it announced, or this worker's --input-root is narrower",
        if roots.is_empty() {
            "none".to_string()
        } else {
            roots.join(", ")
        }
    ))
}

#[cfg(feature = "pdf")]
impl Wire for PdfFile {
    const TAG: &'static str = "pdf file";
    fn put(&self, out: &mut Vec<u8>) {
        put_bytes(out, self.name.as_bytes());
        match &self.source {
            PdfSource::Path(p) => {
                out.push(0);
                put_bytes(out, p.as_os_str().as_encoded_bytes());
            }
            PdfSource::Bytes(b) => {
                out.push(1);
                put_bytes(out, b);
            }
            // A fetched document travels as its URL: the receiver reads
            // it itself (`crate::pdf::read_urls_with`).
            PdfSource::Url(u) | PdfSource::Fetched { url: u, .. } => {
                out.push(2);
                put_bytes(out, u.as_bytes());
            }
            PdfSource::Invalid(why) => {
                out.push(3);
                put_bytes(out, why.as_bytes());
            }
        }
    }
    fn get(r: &mut Reader<'_>) -> Result<PdfFile, String> {
        let name: Arc<str> = r.string("a document name")?.into();
        let source = match r.take(1, "a document source")?[0] {
            0 => {
                let b = r.bytes("a document path")?;
                // Paths were written by `as_encoded_bytes` of this same build.
                let s = std::str::from_utf8(b).map_err(|_| format!("{name}: the path is not UTF-8"))?;
                PdfSource::Path(PathBuf::from(s))
            }
            1 => PdfSource::Bytes(r.bytes("document bytes")?.into()),
            2 => PdfSource::Url(r.string("a document URL")?.into()),
            3 => PdfSource::Invalid(r.string("why an input names no document")?.into()),
            t => return Err(format!("{name}: unknown document source tag {t}")),
        };
        if let Some(roots) = r.roots {
            roots.check(&name, &source)?;
        }
        Ok(PdfFile { name, source })
    }
}

#[cfg(feature = "pdf")]
/// Documents this process re-opened for decoded page handles, while any
/// handle holds them.
static OPENED: Mutex<Vec<Weak<OpenPdf>>> = Mutex::new(Vec::new());

#[cfg(feature = "pdf")]
fn same_source(a: &PdfSource, b: &PdfSource) -> bool {
    match (a, b) {
        (PdfSource::Path(x), PdfSource::Path(y)) => x == y,
        (PdfSource::Bytes(x), PdfSource::Bytes(y)) => Arc::ptr_eq(x, y) || x[..] == y[..],
        (
            PdfSource::Url(x) | PdfSource::Fetched { url: x, .. },
            PdfSource::Url(y) | PdfSource::Fetched { url: y, .. },
        )
        | (PdfSource::Invalid(x), PdfSource::Invalid(y)) => x == y,
        _ => false,
    }
}

#[cfg(feature = "pdf")]
/// The last few documents this process read from a URL, kept open after
/// their handles are gone: the next batch of their pages usually follows,
/// and reading one again is a request to the store.
static RECENT_URLS: Mutex<std::collections::VecDeque<Arc<OpenPdf>>> =
    Mutex::new(std::collections::VecDeque::new());

/// How many documents read from URLs stay open without a handle.
#[cfg(feature = "pdf")]
const RECENT_URL_DOCS: usize = 4;

/// The document of `file`, opened once per process while it is in use
/// (and, read from a URL, while it is among the last few read so). No
/// lock is held while it is read and parsed: two decodes of one document
/// at once may both open it, and the first one kept is shared from then.
#[cfg(feature = "pdf")]
fn reopen(file: &PdfFile) -> Result<Arc<OpenPdf>, String> {
    let find = |opened: &mut Vec<Weak<OpenPdf>>| {
        opened.retain(|w| w.strong_count() > 0);
        opened
            .iter()
            .filter_map(Weak::upgrade)
            .find(|d| d.name == file.name && same_source(&d.source, &file.source))
    };
    if let Some(d) = find(&mut OPENED.lock().unwrap_or_else(|p| p.into_inner())) {
        return Ok(d);
    }
    let doc = open_document(file).map_err(|e| e.to_string())?.doc;
    let mut opened = OPENED.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(d) = find(&mut opened) {
        return Ok(d);
    }
    opened.push(Arc::downgrade(&doc));
    drop(opened);
    if matches!(doc.source, PdfSource::Fetched { .. }) {
        let mut recent = RECENT_URLS.lock().unwrap_or_else(|p| p.into_inner());
        recent.push_back(doc.clone());
        if recent.len() > RECENT_URL_DOCS {
            recent.pop_front();
        }
    }
    Ok(doc)
}

#[cfg(feature = "pdf")]
fn doc_file(doc: &OpenPdf) -> PdfFile {
    PdfFile {
        name: doc.name.clone(),
        source: doc.source.clone(),
    }
}

#[cfg(feature = "pdf")]
impl Wire for PdfPages {
    const TAG: &'static str = "pdf pages";
    fn put(&self, out: &mut Vec<u8>) {
        doc_file(&self.doc).put(out);
    }
    fn get(r: &mut Reader<'_>) -> Result<PdfPages, String> {
        Ok(PdfPages {
            doc: reopen(&PdfFile::get(r)?)?,
        })
    }
}

#[cfg(feature = "pdf")]
impl Wire for PdfPage {
    const TAG: &'static str = "pdf page";
    fn put(&self, out: &mut Vec<u8>) {
        doc_file(&self.doc).put(out);
        put_u64(out, self.index as u64);
    }
    fn get(r: &mut Reader<'_>) -> Result<PdfPage, String> {
        let doc = reopen(&PdfFile::get(r)?)?;
        let index = r.u64("a page index")? as usize;
        let pages = PdfPages { doc: doc.clone() }.len();
        if index >= pages {
            return Err(format!("{}: page {index} of a {pages}-page document", doc.name));
        }
        Ok(PdfPage { doc, index })
    }
}

impl Wire for PageImage {
    const TAG: &'static str = "page image";
    fn put(&self, out: &mut Vec<u8>) {
        put_bytes(out, self.doc.as_bytes());
        put_u64(out, self.page as u64);
        out.extend_from_slice(&self.dpi.to_bits().to_le_bytes());
        put_image(out, &self.image);
    }
    fn get(r: &mut Reader<'_>) -> Result<PageImage, String> {
        Ok(PageImage {
            doc: r.string("a document name")?.into(),
            page: r.u64("a page number")? as usize,
            dpi: f32::from_bits(r.u32("a resolution")?),
            image: Arc::new(get_image(r, "a page image")?),
        })
    }
}

impl Wire for TextLine {
    const TAG: &'static str = "text line";
    fn put(&self, out: &mut Vec<u8>) {
        put_bytes(out, self.doc.as_bytes());
        put_u64(out, self.page as u64);
        put_u64(out, self.row as u64);
        put_box(out, self.bbox);
        out.extend_from_slice(&self.score.to_bits().to_le_bytes());
        put_image(out, &self.crop);
        out.push(u8::from(self.flipped));
    }
    fn get(r: &mut Reader<'_>) -> Result<TextLine, String> {
        let doc = r.string("a document name")?.into();
        let page = r.u64("a page number")? as usize;
        let row = r.u64("a row")? as usize;
        let bbox = get_box(r)?;
        Ok(TextLine {
            doc,
            page,
            row,
            bbox,
            score: f32::from_bits(r.u32("a score")?),
            crop: Arc::new(get_image(r, "a line crop")?),
            flipped: match r.u8("whether the line was flipped")? {
                0 => false,
                1 => true,
                b => return Err(format!("a line's flipped flag of {b} (0 or 1)")),
            },
        })
    }
}

/// A verdict travels as one byte naming it, then its measure (a `u32`
/// percent) where it has one.
#[cfg(feature = "pdf")]
fn put_verdict(out: &mut Vec<u8>, v: Verdict) {
    let (code, percent) = match v {
        Verdict::Trusted => (0, None),
        Verdict::Forced => (1, None),
        Verdict::NoLayer => (2, None),
        Verdict::Unmapped { percent } => (3, Some(percent)),
        Verdict::Garbage { percent } => (4, Some(percent)),
        Verdict::SpacedOut { percent } => (5, Some(percent)),
        Verdict::Scrambled { percent } => (6, Some(percent)),
        Verdict::TextInImages { percent } => (7, Some(percent)),
        Verdict::Unreadable => (8, None),
        Verdict::Disagrees { percent } => (9, Some(percent)),
        Verdict::Verified { percent } => (10, Some(percent)),
    };
    out.push(code);
    if let Some(p) = percent {
        out.extend_from_slice(&p.to_le_bytes());
    }
}

#[cfg(feature = "pdf")]
fn get_verdict(r: &mut Reader<'_>) -> Result<Verdict, String> {
    const WHAT: &str = "a text-layer verdict's measure";
    Ok(match r.u8("a text-layer verdict")? {
        0 => Verdict::Trusted,
        1 => Verdict::Forced,
        2 => Verdict::NoLayer,
        3 => Verdict::Unmapped {
            percent: r.u32(WHAT)?,
        },
        4 => Verdict::Garbage {
            percent: r.u32(WHAT)?,
        },
        5 => Verdict::SpacedOut {
            percent: r.u32(WHAT)?,
        },
        6 => Verdict::Scrambled {
            percent: r.u32(WHAT)?,
        },
        7 => Verdict::TextInImages {
            percent: r.u32(WHAT)?,
        },
        8 => Verdict::Unreadable,
        9 => Verdict::Disagrees {
            percent: r.u32(WHAT)?,
        },
        10 => Verdict::Verified {
            percent: r.u32(WHAT)?,
        },
        t => {
            return Err(format!(
                "bad value: a text-layer verdict of {t}, expected 0 to 10"
            ));
        }
    })
}

#[cfg(feature = "pdf")]
impl Wire for ReadPage {
    const TAG: &'static str = "read page";
    fn put(&self, out: &mut Vec<u8>) {
        put_bytes(out, self.doc.as_bytes());
        put_u64(out, self.page as u64);
        put_verdict(out, self.verdict);
        self.layer.put(out);
        match &self.image {
            None => out.push(0),
            Some(im) => {
                out.push(1);
                im.put(out);
            }
        }
        out.push(u8::from(self.verify));
    }
    fn get(r: &mut Reader<'_>) -> Result<ReadPage, String> {
        let doc = r.string("a document name")?.into();
        let page = r.u64("a page number")? as usize;
        let verdict = get_verdict(r)?;
        let layer = Arc::new(Vec::<LineText>::get(r)?);
        let image = match r.u8("an image flag")? {
            0 => None,
            1 => Some(PageImage::get(r)?),
            t => return Err(format!("bad value: an image flag of {t}, expected 0 or 1")),
        };
        let verify = match r.u8("a verify flag")? {
            0 => false,
            1 => true,
            t => return Err(format!("bad value: a verify flag of {t}, expected 0 or 1")),
        };
        Ok(ReadPage {
            doc,
            page,
            verdict,
            layer,
            image,
            verify,
        })
    }
}

#[cfg(feature = "pdf")]
impl Wire for PageText {
    const TAG: &'static str = "page text";
    fn put(&self, out: &mut Vec<u8>) {
        self.text.put(out);
        put_verdict(out, self.verdict);
    }
    fn get(r: &mut Reader<'_>) -> Result<PageText, String> {
        let text = String::get(r)?;
        let verdict = get_verdict(r)?;
        Ok(PageText {
            text,
            source: verdict.source(),
            verdict,
        })
    }
}

#[cfg(feature = "pdf")]
wire_list!(PageText => "page texts");

#[cfg(all(test, feature = "pdf", feature = "ocr"))]
mod tests {
    use super::*;
    use rayorch_testdata::pdfgen::text_pdf;

    fn round_trip<T: Wire>(v: &T) -> T {
        T::from_wire(&v.to_wire()).unwrap()
    }

    #[test]
    fn values_come_back_bit_for_bit() {
        let floats = vec![0.1f32, -0.0, f32::MIN_POSITIVE, 1.0 / 3.0, f32::NAN];
        let back = round_trip(&floats);
        assert_eq!(
            back.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
            floats.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
        );
        let texts = vec![String::from("Hé"), String::new()];
        assert_eq!(round_trip(&texts), texts);
        let embs = vec![vec![2.5f32], vec![]];
        assert_eq!(round_trip(&embs), embs);
        let line = TextLine {
            doc: "d".into(),
            page: 3,
            row: 7,
            bbox: [1, 2, 30, 40],
            score: 0.75,
            crop: Arc::new(RgbImage::from_fn(5, 2, |x, y| image::Rgb([x as u8, y as u8, 9]))),
            flipped: true,
        };
        let back = round_trip(&vec![line.clone()]);
        assert_eq!((back[0].row, back[0].bbox, back[0].score), (7, line.bbox, 0.75));
        assert!(back[0].flipped);
        assert_eq!(back[0].crop.as_raw(), line.crop.as_raw());
    }

    #[test]
    fn documents_outside_the_input_roots_are_refused_naming_them() {
        let base = std::env::temp_dir().join(format!("rayorch-roots-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let root = base.join("corpus");
        std::fs::create_dir_all(root.join("a")).unwrap();
        std::fs::write(root.join("a/x.pdf"), b"%PDF").unwrap();
        std::fs::write(base.join("secret.pdf"), b"%PDF").unwrap();
        std::os::unix::fs::symlink(base.join("secret.pdf"), root.join("link.pdf")).unwrap();
        let roots = [
            std::fs::canonicalize(&root)
                .unwrap()
                .to_string_lossy()
                .into_owned(),
            "s3://bucket/corpus/".to_string(),
        ];
        let path = |p: PathBuf| PdfSource::Path(p);
        assert!(within("x", &path(root.join("a/x.pdf")), &roots).is_ok());
        assert!(
            within("x", &path(root.join("a/missing.pdf")), &roots).is_ok(),
            "opening says it is missing"
        );
        assert!(
            within("b", &PdfSource::Bytes(vec![1].into()), &[]).is_ok(),
            "bytes carry no path"
        );
        assert!(within("u", &PdfSource::Url("s3://bucket/corpus/d/1.pdf".into()), &roots).is_ok());
        for (name, source) in [
            ("dotdot", path(root.join("a/../../secret.pdf"))),
            ("link", path(root.join("link.pdf"))),
            ("abs", path(PathBuf::from("/etc/passwd"))),
            ("sibling", path(base.join("corpus-2/x.pdf"))),
            ("url", PdfSource::Url("s3://bucket/corpus-2/1.pdf".into())),
        ] {
            let e = within(name, &source, &roots).unwrap_err();
            assert!(
                e.contains(&format!("document `{name}`")) && e.contains("outside the input roots"),
                "{e}"
            );
        }
        let e = within("abs", &path(PathBuf::from("/etc/passwd")), &[]).unwrap_err();
        assert!(e.contains("(none)"), "{e}");
        let _ = std::fs::remove_dir_all(&base);
    }

    #[test]
    fn a_url_document_crosses_the_wire_as_its_url_and_is_never_opened_unfetched() {
        let file = PdfFile::from_url("s3://bucket/a.pdf");
        let back = PdfFile::from_wire(&file.to_wire()).unwrap();
        assert!(matches!(&back.source, PdfSource::Url(u) if &**u == "s3://bucket/a.pdf"));
        assert_eq!(&*back.name, "s3://bucket/a.pdf");
        let e = open_document(&back).unwrap_err().to_string();
        assert!(e.contains("s3://bucket/a.pdf was not fetched"), "{e}");
    }

    #[test]
    fn an_input_that_names_no_document_crosses_the_wire_and_fails_with_its_reason() {
        let file = PdfFile::invalid("list.jsonl:3", "input list list.jsonl line 3: not JSON");
        let back = PdfFile::from_wire(&file.to_wire()).unwrap();
        assert!(same_source(&file.source, &back.source));
        assert_eq!(&*back.name, "list.jsonl:3");
        let e = open_document(&back).unwrap_err().to_string();
        assert!(e.contains("line 3: not JSON"), "{e}");
    }

    #[test]
    fn page_handles_reopen_their_document_once() {
        let file = PdfFile::from_bytes("two.pdf", text_pdf(&[vec!["a".into()], vec!["b".into()]], 24.0));
        let pages = open_document(&file).unwrap();
        let wire: Vec<Vec<u8>> = pages.clone().into_iter().map(|p| p.to_wire()).collect();
        let back: Vec<PdfPage> = wire.iter().map(|b| PdfPage::from_wire(b).unwrap()).collect();
        assert_eq!(back.iter().map(PdfPage::index).collect::<Vec<_>>(), [0, 1]);
        // Both decoded handles share one re-opened document.
        assert!(Arc::ptr_eq(&back[0].doc, &back[1].doc));
        assert_eq!(PdfPages::from_wire(&pages.to_wire()).unwrap().len(), 2);
    }

    #[test]
    fn damaged_bytes_are_errors_not_panics() {
        let line = vec![String::from("hello")].to_wire();
        for cut in 0..line.len() {
            assert!(Vec::<String>::from_wire(&line[..cut]).is_err(), "cut at {cut}");
        }
        let mut huge = Vec::new();
        put_u64(&mut huge, u64::MAX);
        assert!(Vec::<f32>::from_wire(&huge).unwrap_err().contains("claims"));
        let mut bad = PdfFile::from_path("/x.pdf").to_wire();
        bad[8 + 6] = 9;
        assert!(PdfFile::from_wire(&bad).unwrap_err().contains("source tag"));
        let missing = PdfPage::from_wire(&{
            let mut b = PdfFile::from_path("/no/such/file.pdf").to_wire();
            put_u64(&mut b, 0);
            b
        });
        assert!(missing.unwrap_err().contains("file.pdf"));
    }
}
