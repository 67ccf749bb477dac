//! A tiny PDF writer for test documents with known text, and the bundled
//! sample set (`samples/` at the workspace root, made by
//! `cargo run -p rayorch-testdata --bin gen-samples`).
//!
//! Pages are US letter, text is the standard Helvetica font (no font file is
//! embedded: every PDF reader has its metrics), written line by line at a
//! size large enough for OCR. Everything is deterministic, so the committed
//! files can be checked against a fresh generation.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

/// Page width and height in points (US letter).
pub const LETTER: (f32, f32) = (612.0, 792.0);
const MARGIN: f32 = 60.0;

/// Advance widths of Helvetica for ASCII 32..=126, in 1/1000 em.
const HELVETICA: [u16; 95] = [
    278, 278, 355, 556, 556, 889, 667, 191, 333, 333, 389, 584, 278, 333, 278, 278, // ' '../
    556, 556, 556, 556, 556, 556, 556, 556, 556, 556, // 0-9
    278, 278, 584, 584, 584, 556, 1015, // : ; < = > ? @
    667, 667, 722, 722, 667, 611, 778, 722, 278, 500, 667, 556, 833, 722, 778, 667, 778, 722, 667, 611, 722,
    667, 944, 667, 667, 611, // A-Z
    278, 278, 278, 469, 556, 333, // [ \ ] ^ _ `
    556, 556, 500, 556, 556, 278, 556, 556, 222, 222, 500, 222, 833, 556, 556, 556, 556, 333, 500, 278, 556,
    500, 722, 500, 500, 500, // a-z
    334, 260, 334, 584, // { | } ~
];

/// The width of `s` in Helvetica at `size` points.
pub fn helvetica_width(s: &str, size: f32) -> f32 {
    s.chars()
        .map(|c| {
            let i = c as usize;
            if (32..=126).contains(&i) {
                HELVETICA[i - 32]
            } else {
                556
            }
        })
        .map(|w| w as f32 * size / 1000.0)
        .sum()
}

/// Greedy word wrap to `width` points.
pub fn wrap(text: &str, size: f32, width: f32) -> Vec<String> {
    let mut lines = Vec::new();
    let mut cur = String::new();
    for word in text.split_whitespace() {
        let candidate = if cur.is_empty() {
            word.to_string()
        } else {
            format!("{cur} {word}")
        };
        if !cur.is_empty() && helvetica_width(&candidate, size) > width {
            lines.push(std::mem::take(&mut cur));
            cur = word.to_string();
        } else {
            cur = candidate;
        }
    }
    if !cur.is_empty() {
        lines.push(cur);
    }
    lines
}

pub(crate) fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '(' | ')' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            c if c.is_ascii() && !c.is_ascii_control() => out.push(c),
            _ => out.push('?'),
        }
    }
    out
}

/// Serialises numbered objects and writes the cross-reference table.
pub(crate) struct Writer {
    buf: Vec<u8>,
    offsets: Vec<usize>,
}

impl Writer {
    pub(crate) fn new() -> Writer {
        let mut buf = Vec::new();
        buf.extend_from_slice(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n");
        Writer {
            buf,
            offsets: Vec::new(),
        }
    }

    /// Append object number `offsets.len() + 1`.
    pub(crate) fn object(&mut self, body: &[u8]) -> usize {
        let n = self.offsets.len() + 1;
        self.offsets.push(self.buf.len());
        self.buf.extend_from_slice(format!("{n} 0 obj\n").as_bytes());
        self.buf.extend_from_slice(body);
        self.buf.extend_from_slice(b"\nendobj\n");
        n
    }

    pub(crate) fn stream(&mut self, data: &[u8]) -> usize {
        let mut body = format!("<< /Length {} >>\nstream\n", data.len()).into_bytes();
        body.extend_from_slice(data);
        body.extend_from_slice(b"\nendstream");
        self.object(&body)
    }

    /// Append the catalog (object 1) and the page tree (object 2) of the
    /// pages numbered `pages`.
    pub(crate) fn catalog_and_tree(&mut self, pages: &[usize]) {
        let kids: Vec<String> = pages.iter().map(|n| format!("{n} 0 R")).collect();
        self.object(b"<< /Type /Catalog /Pages 2 0 R >>");
        self.object(
            format!(
                "<< /Type /Pages /Kids [{}] /Count {} >>",
                kids.join(" "),
                pages.len()
            )
            .as_bytes(),
        );
    }

    /// Append a grey picture (an image XObject) of `width` × `height`
    /// pixels from its rows `grey`; returns its object number.
    pub(crate) fn grey_picture(&mut self, width: u32, height: u32, grey: &[u8]) -> usize {
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
        // Writing into a Vec cannot fail.
        let _ = std::io::Write::write_all(&mut z, grey);
        let data = z.finish().unwrap_or_default();
        let mut body = format!(
            "<< /Type /XObject /Subtype /Image /Width {width} /Height {height} /ColorSpace /DeviceGray /BitsPerComponent 8 /Filter /FlateDecode /Length {} >>\nstream\n",
            data.len()
        )
        .into_bytes();
        body.extend_from_slice(&data);
        body.extend_from_slice(b"\nendstream");
        self.object(&body)
    }

    pub(crate) fn finish(mut self, root: usize, extra_trailer: &str) -> Vec<u8> {
        let xref = self.buf.len();
        let mut t = format!("xref\n0 {}\n0000000000 65535 f \n", self.offsets.len() + 1);
        for o in &self.offsets {
            let _ = writeln!(t, "{o:010} 00000 n ");
        }
        let _ = write!(
            t,
            "trailer\n<< /Size {} /Root {root} 0 R{extra_trailer} >>\nstartxref\n{xref}\n%%EOF\n",
            self.offsets.len() + 1
        );
        self.buf.extend_from_slice(t.as_bytes());
        self.buf
    }
}

/// A PDF with one page per entry of `pages`, each line of text at `size`
/// points in Helvetica, top to bottom. Zero entries make a valid PDF with
/// zero pages.
pub fn text_pdf(pages: &[Vec<String>], size: f32) -> Vec<u8> {
    build(pages, size, Opts::PLAIN)
}

/// Like [`text_pdf`], with the page tree written after the pages, as
/// pdfTeX and many other writers do: a file cut short loses its page tree
/// while page objects remain (readers then find pages by scanning).
pub fn text_pdf_tree_last(pages: &[Vec<String>], size: f32) -> Vec<u8> {
    build(
        pages,
        size,
        Opts {
            tree_last: true,
            ..Opts::PLAIN
        },
    )
}

/// Like [`text_pdf`], but with no space characters: each line is one `TJ`
/// array that moves the pen by 0.25 em between words (narrower than
/// Helvetica's space, as in justified text) and kerns inside words by ±0.04
/// em, the way typesetters position words. Readers that look for space
/// characters run the words together; the words are only in the geometry.
pub fn positioned_words_pdf(pages: &[Vec<String>], size: f32) -> Vec<u8> {
    build(
        pages,
        size,
        Opts {
            spacing: Spacing::Positioned,
            ..Opts::PLAIN
        },
    )
}

/// Like [`text_pdf`], but each letter placed on its own, as an OCR
/// engine writes the invisible layer of a scan: the pen moves past each
/// letter by its width plus an extra 0.10 to 0.22 em (where the engine saw
/// the next letter; the layer's font is not the scan's), and 0.55 em more
/// between words; no space characters. Taking every gap wider than
/// kerning for a word break reads "A m e r i c a n".
pub fn placed_letters_pdf(pages: &[Vec<String>], size: f32) -> Vec<u8> {
    build(
        pages,
        size,
        Opts {
            spacing: Spacing::Letters,
            ..Opts::PLAIN
        },
    )
}

/// How a line's words are separated in the content stream.
#[derive(Clone, Copy)]
enum Spacing {
    /// Space characters (`Tj` of the whole line).
    Spaces,
    /// Pen moves in a `TJ` array (see [`positioned_words_pdf`]).
    Positioned,
    /// Every letter moved apart (see [`placed_letters_pdf`]).
    Letters,
}

/// The `TJ` array of `line` with every letter placed apart (see
/// [`placed_letters_pdf`]).
fn placed_line(line: &str) -> String {
    let mut items = Vec::new();
    for (w, word) in line.split_whitespace().enumerate() {
        if w > 0 {
            items.push("-550".to_string());
        }
        for (i, c) in word.chars().enumerate() {
            if i > 0 {
                // 100 to 220 thousandths of an em, varying letter to letter.
                items.push(format!("-{}", 100 + (i * 37 + w * 11) % 13 * 10));
            }
            items.push(format!("({})", escape(&c.to_string())));
        }
    }
    format!("[{}] TJ", items.join(" "))
}

/// The `TJ` array of `line`: words 250/1000 em apart, letters kerned by
/// ∓40/1000 em in turn.
fn positioned_line(line: &str) -> String {
    let words: Vec<String> = line
        .split_whitespace()
        .map(|w| {
            let letters: Vec<String> = w.chars().map(|c| escape(&c.to_string())).collect();
            letters
                .chunks(2)
                .enumerate()
                .map(|(i, pair)| {
                    let kern = if i % 2 == 0 { 40 } else { -40 };
                    format!("({}) {kern}", pair.concat())
                })
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    format!("[{}] TJ", words.join(" -250 "))
}

/// How [`build`] writes a document.
#[derive(Clone, Copy)]
struct Opts<'a> {
    /// The standard security handler's dictionary, if encrypted.
    encrypt: Option<&'a str>,
    spacing: Spacing,
    /// Write the page tree after the pages (see [`text_pdf_tree_last`]).
    tree_last: bool,
}

impl Opts<'_> {
    const PLAIN: Opts<'static> = Opts {
        encrypt: None,
        spacing: Spacing::Spaces,
        tree_last: false,
    };
}

fn build(pages: &[Vec<String>], size: f32, opts: Opts<'_>) -> Vec<u8> {
    let mut w = Writer::new();
    // Fixed numbering: 1 catalog, 2 page tree, 3 font, then (content, page)
    // pairs; with the tree last: 1 catalog, 2 font, the pairs, the tree.
    let n = pages.len();
    let (tree, font, first) = match opts.tree_last {
        false => (2, 3, 4),
        true => (3 + 2 * n, 2, 3),
    };
    let kids: Vec<String> = (0..n).map(|i| format!("{} 0 R", first + 1 + 2 * i)).collect();
    let tree_dict = format!("<< /Type /Pages /Kids [{}] /Count {n} >>", kids.join(" "));
    w.object(format!("<< /Type /Catalog /Pages {tree} 0 R >>").as_bytes());
    if !opts.tree_last {
        w.object(tree_dict.as_bytes());
    }
    w.object(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>");
    let leading = (size * 1.6).round();
    for lines in pages {
        let mut c = format!(
            "BT\n/F1 {size} Tf\n{leading} TL\n{MARGIN} {} Td\n",
            LETTER.1 - MARGIN - size
        );
        for l in lines {
            let _ = match opts.spacing {
                Spacing::Spaces => writeln!(c, "({}) Tj T*", escape(l)),
                Spacing::Positioned => writeln!(c, "{} T*", positioned_line(l)),
                Spacing::Letters => writeln!(c, "{} T*", placed_line(l)),
            };
        }
        c.push_str("ET");
        let content = w.stream(c.as_bytes());
        w.object(
            format!(
                "<< /Type /Page /Parent {tree} 0 R /MediaBox [0 0 {} {}] /Resources << /Font << /F1 {font} 0 R >> >> /Contents {content} 0 R >>",
                LETTER.0, LETTER.1
            )
            .as_bytes(),
        );
    }
    if opts.tree_last {
        w.object(tree_dict.as_bytes());
    }
    let id = "<5241594f5243482053414d504c45303031>";
    let mut trailer = format!(" /ID [{id} {id}]");
    if let Some(enc) = opts.encrypt {
        let e = w.object(enc.as_bytes());
        let _ = write!(trailer, " /Encrypt {e} 0 R");
    }
    w.finish(1, &trailer)
}

/// Resolution of [`scanned_pdf`]'s pictures.
pub const SCAN_DPI: f32 = 150.0;

/// A scan of `pages`: each page drawn as [`text_pdf`] draws it, rendered
/// at [`SCAN_DPI`] in grey and written as a picture-only page (no text
/// layer: a reader must OCR it).
///
/// ```
/// use rayorch_models::pdf::{PdfFile, open_document};
/// let pdf = rayorch_testdata::pdfgen::scanned_pdf(&[vec!["Hello".to_string()]], 18.0);
/// assert_eq!(open_document(&PdfFile::from_bytes("s", pdf)).unwrap().len(), 1);
/// ```
pub fn scanned_pdf(pages: &[Vec<String>], size: f32) -> Vec<u8> {
    scan(pages, None, size)
}

/// A scan of `pages` (as [`scanned_pdf`]) carrying an invisible text
/// layer (text render mode 3, as an OCR engine writes one over the
/// picture) that says `layer`, page by page, line by line, where
/// [`text_pdf`] would draw those lines. With `layer` equal to `pages` it is
/// an OCR'd scan whose layer tells the truth; with other lines, a layer
/// that lies about its page.
pub fn scanned_pdf_with_layer(pages: &[Vec<String>], layer: &[Vec<String>], size: f32) -> Vec<u8> {
    scan(pages, Some(layer), size)
}

fn scan(pages: &[Vec<String>], layer: Option<&[Vec<String>]>, size: f32) -> Vec<u8> {
    let cfg = rayorch_models::pdf::RenderConfig {
        dpi: SCAN_DPI,
        ..rayorch_models::pdf::RenderConfig::default()
    };
    let digital = rayorch_models::pdf::PdfFile::from_bytes("scan", text_pdf(pages, size));
    // The pages were written just above: a failure here is a bug in this file.
    let images = rayorch_models::pdf::render_document(&digital, &cfg).expect("generated pages render");
    let mut w = Writer::new();
    // 1 catalog, 2 page tree, 3 the layer's font if there is a layer, then
    // (picture, content, page) per page. Without a layer the bytes are the
    // committed scan sample's.
    let first = if layer.is_some() { 6 } else { 5 };
    w.catalog_and_tree(&(0..pages.len()).map(|i| first + 3 * i).collect::<Vec<_>>());
    let font = layer.map(|_| {
        let n =
            w.object(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>");
        format!("/Font << /F1 {n} 0 R >> ")
    });
    for (i, page) in images.into_iter().enumerate() {
        let grey = image::imageops::grayscale(&*page.image);
        let picture = w.grey_picture(grey.width(), grey.height(), grey.as_raw());
        let mut c = format!("q {} 0 0 {} 0 0 cm /Im0 Do Q", LETTER.0, LETTER.1);
        if let Some(lines) = layer.and_then(|l| l.get(i)) {
            let leading = (size * 1.6).round();
            let _ = write!(
                c,
                "\nBT\n3 Tr\n/F1 {size} Tf\n{leading} TL\n{MARGIN} {} Td\n",
                LETTER.1 - MARGIN - size
            );
            for l in lines {
                let _ = writeln!(c, "({}) Tj T*", escape(l));
            }
            c.push_str("ET");
        }
        let content = w.stream(c.as_bytes());
        w.object(
            format!(
                "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 {} {}] /Resources << {}/XObject << /Im0 {picture} 0 R >> >> /Contents {content} 0 R >>",
                LETTER.0,
                LETTER.1,
                font.as_deref().unwrap_or("")
            )
            .as_bytes(),
        );
    }
    w.finish(1, "")
}

/// A one-page PDF: `body` lines upright from the top (as [`text_pdf`]),
/// and each of `labels` drawn once at its own angle (degrees
/// counter-clockwise, as a PDF's text matrix turns it) starting at its
/// point `(x, y)` (points from the bottom left), as axis labels, margin
/// notes and stamps are drawn.
pub fn rotated_labels_pdf(body: &[String], labels: &[(&str, f32, (f32, f32))], size: f32) -> Vec<u8> {
    let mut w = Writer::new();
    w.object(b"<< /Type /Catalog /Pages 2 0 R >>");
    w.object(b"<< /Type /Pages /Kids [5 0 R] /Count 1 >>");
    w.object(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>");
    let leading = (size * 1.6).round();
    let mut c = format!(
        "BT\n/F1 {size} Tf\n{leading} TL\n{MARGIN} {} Td\n",
        LETTER.1 - MARGIN - size
    );
    for l in body {
        let _ = writeln!(c, "({}) Tj T*", escape(l));
    }
    c.push_str("ET\n");
    for (text, degrees, (x, y)) in labels {
        let (s, co) = degrees.to_radians().sin_cos();
        let _ = writeln!(
            c,
            "BT\n/F1 {size} Tf\n{co:.5} {s:.5} {:.5} {co:.5} {x} {y} Tm\n({}) Tj\nET",
            -s,
            escape(text)
        );
    }
    let content = w.stream(c.as_bytes());
    w.object(
        format!(
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 {} {}] /Resources << /Font << /F1 3 0 R >> >> /Contents {content} 0 R >>",
            LETTER.0, LETTER.1
        )
        .as_bytes(),
    );
    w.finish(1, "")
}

/// A one-page PDF of vertical CJK writing: each of `columns` top to
/// bottom, the first column rightmost and the next ones to its left, one
/// glyph every 1.05 em down a column and columns 1.5 em apart, as a
/// Japanese or Chinese page set vertically is read. Each glyph is placed
/// on its own (as PDFs with a vertical font draw them: upright glyphs, the
/// pen moving down); the font is a Type 3 font of filled squares whose
/// `ToUnicode` map gives each its character, so the text layer holds the
/// text and the pixels hold no readable glyph.
pub fn vertical_cjk_pdf(columns: &[String], size: f32) -> Vec<u8> {
    let mut chars: Vec<char> = columns.iter().flat_map(|c| c.chars()).collect();
    chars.sort_unstable();
    chars.dedup();
    let chars = &chars[..chars.len().min(254)];
    let code = |c: char| chars.iter().position(|&k| k == c).map(|i| i + 1);
    let mut w = Writer::new();
    // 1 catalog, 2 tree, 3 font, 4 ToUnicode, 5 glyph, 6 content, 7 page.
    w.catalog_and_tree(&[7]);
    let names: Vec<String> = (1..=chars.len()).map(|i| format!("/g{i}")).collect();
    let procs: Vec<String> = names.iter().map(|n| format!("{n} 5 0 R")).collect();
    let widths = vec!["1000"; chars.len()].join(" ");
    w.object(
        format!(
            "<< /Type /Font /Subtype /Type3 /FontBBox [0 0 1000 1000] /FontMatrix [0.001 0 0 0.001 0 0] /CharProcs << {} >> /Encoding << /Type /Encoding /Differences [1 {}] >> /FirstChar 1 /LastChar {} /Widths [{widths}] /ToUnicode 4 0 R /Resources << >> >>",
            procs.join(" "),
            names.join(" "),
            chars.len().max(1)
        )
        .as_bytes(),
    );
    let mut cmap = String::from(
        "/CIDInit /ProcSet findresource begin\n12 dict begin\nbegincmap\n/CIDSystemInfo << /Registry (Adobe) /Ordering (UCS) /Supplement 0 >> def\n/CMapName /Adobe-Identity-UCS def\n/CMapType 2 def\n1 begincodespacerange\n<00> <FF>\nendcodespacerange\n",
    );
    for (block, cs) in chars.chunks(100).enumerate() {
        let _ = writeln!(cmap, "{} beginbfchar", cs.len());
        for (i, c) in cs.iter().enumerate() {
            let mut units = [0u16; 2];
            let hex: String = c
                .encode_utf16(&mut units)
                .iter()
                .map(|u| format!("{u:04X}"))
                .collect();
            let _ = writeln!(cmap, "<{:02X}> <{hex}>", block * 100 + i + 1);
        }
        cmap.push_str("endbfchar\n");
    }
    cmap.push_str("endcmap\nCMapName currentdict /CMap defineresource pop\nend\nend\n");
    w.stream(cmap.as_bytes());
    w.stream(b"1000 0 100 0 900 800 d1\n100 0 800 800 re f");
    let mut c = format!("BT\n/F1 {size} Tf\n");
    for (j, column) in columns.iter().enumerate() {
        let x = LETTER.0 - MARGIN - (j as f32 + 1.0) * 1.5 * size;
        for (i, ch) in column.chars().enumerate() {
            let y = LETTER.1 - MARGIN - (i as f32 + 1.0) * 1.05 * size;
            if let Some(k) = code(ch) {
                let _ = writeln!(c, "1 0 0 1 {x:.2} {y:.2} Tm <{k:02X}> Tj");
            }
        }
    }
    c.push_str("ET\n");
    w.stream(c.as_bytes());
    w.object(
        format!(
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 {} {}] /Resources << /Font << /F1 3 0 R >> >> /Contents 6 0 R >>",
            LETTER.0, LETTER.1
        )
        .as_bytes(),
    );
    w.finish(1, "")
}

/// A PDF of `pages` letter pages for load and memory runs: blank pages, or
/// with `text` one short line per page (`"Page 7 of 400"`). 2,000 blank
/// pages make a file of about 528 KB.
///
/// ```
/// let pdf = rayorch_testdata::pdfgen::long_pdf(2_000, false);
/// assert_eq!(pdf.len(), 528_251);
/// ```
pub fn long_pdf(pages: usize, text: bool) -> Vec<u8> {
    let pages: Vec<Vec<String>> = (1..=pages)
        .map(|i| match text {
            true => vec![format!("Page {i} of {pages}")],
            false => Vec::new(),
        })
        .collect();
    text_pdf(&pages, 12.0)
}

/// A PDF protected by a user password (standard security handler, RC4
/// 40-bit): readers without the password cannot open it.
pub fn encrypted_pdf(pages: &[Vec<String>], size: f32) -> Vec<u8> {
    // /U is the check value an empty password must reproduce; a value made
    // for another password makes the empty one fail, as with any document
    // whose user password we do not know.
    let o = "<".to_string() + &"6b".repeat(32) + ">";
    let u = "<".to_string() + &"3c".repeat(32) + ">";
    let dict = format!("<< /Filter /Standard /V 1 /R 2 /Length 40 /O {o} /U {u} /P -44 >>");
    build(
        pages,
        size,
        Opts {
            encrypt: Some(&dict),
            ..Opts::PLAIN
        },
    )
}

/// What a sample file is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SampleKind {
    /// A healthy PDF with known text.
    Text,
    /// A valid PDF with zero pages.
    Empty,
    /// Truncated, garbled bytes after a PDF header.
    Corrupt,
    /// Password-protected.
    Encrypted,
    /// Not a PDF at all (a text file named `.pdf`).
    NotPdf,
}

/// One bundled sample: its file, kind and known page texts.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// File name under `samples/`.
    pub file: String,
    /// What it is.
    pub kind: SampleKind,
    /// Font size of the text, in points.
    pub font_size: f32,
    /// The text of each page, line by line.
    pub pages: Vec<Vec<String>>,
    /// A text sample drawn as a scan: pictures only, no text layer
    /// ([`scanned_pdf`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub scanned: bool,
}

impl Sample {
    /// The file's bytes, as the generator writes them.
    pub fn bytes(&self) -> Vec<u8> {
        match self.kind {
            SampleKind::Text if self.scanned => scanned_pdf(&self.pages, self.font_size),
            SampleKind::Text | SampleKind::Empty => text_pdf(&self.pages, self.font_size),
            SampleKind::Encrypted => encrypted_pdf(&self.pages, self.font_size),
            SampleKind::Corrupt => {
                // A real document cut off mid-stream, its structure gone.
                let whole = text_pdf(&self.pages, self.font_size);
                let mut b = whole[..whole.len() / 3].to_vec();
                b.extend_from_slice(b"\n\x00\x17garbage: the rest of this file was lost\n");
                b
            }
            SampleKind::NotPdf => self
                .pages
                .iter()
                .flatten()
                .map(|l| format!("{l}\n"))
                .collect::<String>()
                .into_bytes(),
        }
    }

    /// The known text of each page, lines joined by newlines.
    pub fn page_texts(&self) -> Vec<String> {
        self.pages.iter().map(|p| p.join("\n")).collect()
    }
}

pub(crate) const SENTENCES: &[&str] = &[
    "The quarterly report shows revenue of 4,210 dollars against costs of 3,875 dollars.",
    "Every parent document returns to its own place in the output, in the order it was declared.",
    "Pages from many documents share one batch, so the model never waits for a slow file.",
    "Please send the signed contract to the office on Main Street before Friday, May 14.",
    "A pipeline changes its unit of work: a document becomes pages, a page becomes lines.",
    "The warehouse received 128 boxes of paper, 36 printers and 12 new desks this week.",
    "Short documents should not wait behind long ones; each is written when it is complete.",
    "Our team measured a throughput of 2.5 pages per second on a small laptop with two cores.",
    "The committee will meet again on Tuesday at 10:30 in room 214 to review the budget.",
    "Data preparation pipelines read millions of files, and a few of them are always broken.",
    "A corrupt file must fail alone, with a clear message, while every healthy file is kept.",
    "The library opens at nine in the morning and closes at six in the evening on weekdays.",
    "Bring your own questions: what failed, for which document, and what can the user do?",
    "Invoice number 7731 lists three items with a total of 982 euros, tax included.",
    "The river rose by two meters after the storm, and the old bridge was closed for a day.",
    "Good tests fail when the code is wrong; they do not merely run the code once.",
];

struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) as usize
    }
}

fn document(title: &str, pages: usize, lines_per_page: usize, size: f32, seed: u64) -> Vec<Vec<String>> {
    let mut rng = Lcg(seed);
    let width = LETTER.0 - 2.0 * MARGIN;
    (0..pages)
        .map(|p| {
            let mut lines = vec![format!("{title} - page {}", p + 1)];
            while lines.len() < lines_per_page {
                let s = SENTENCES[rng.next() % SENTENCES.len()];
                for l in wrap(s, size, width) {
                    if lines.len() < lines_per_page {
                        lines.push(l);
                    }
                }
            }
            lines
        })
        .collect()
}

/// The bundled sample set, exactly as `samples/` holds it.
pub fn samples() -> Vec<Sample> {
    let text = |file: &str, title: &str, pages, lines, seed| Sample {
        file: file.into(),
        kind: SampleKind::Text,
        font_size: 18.0,
        pages: document(title, pages, lines, 18.0, seed),
        scanned: false,
    };
    // Numbered so that folder order mixes short, long and bad documents.
    vec![
        text("01-letter.pdf", "A short letter", 1, 10, 1),
        Sample {
            file: "02-corrupt.pdf".into(),
            kind: SampleKind::Corrupt,
            font_size: 18.0,
            pages: document("Lost file", 2, 10, 18.0, 5),
            scanned: false,
        },
        text("03-memo.pdf", "Office memo", 2, 12, 2),
        text("04-handbook.pdf", "Employee handbook", 16, 18, 4),
        Sample {
            file: "05-empty.pdf".into(),
            kind: SampleKind::Empty,
            font_size: 18.0,
            pages: vec![],
            scanned: false,
        },
        text("06-report.pdf", "Quarterly report", 3, 14, 3),
        Sample {
            file: "07-encrypted.pdf".into(),
            kind: SampleKind::Encrypted,
            font_size: 18.0,
            pages: document("Secret", 1, 8, 18.0, 6),
            scanned: false,
        },
        Sample {
            file: "08-not-a-pdf.pdf".into(),
            kind: SampleKind::NotPdf,
            font_size: 18.0,
            pages: vec![vec![
                "These are plain text notes that someone saved with a .pdf name.".into(),
            ]],
            scanned: false,
        },
        // A scanned page: no text layer, so the job OCRs it.
        Sample {
            scanned: true,
            ..text("09-scanned-notice.pdf", "A scanned notice", 1, 10, 7)
        },
    ]
}

/// The expected-text file of a sample: its pages joined by a form-feed line.
pub fn expected_text(s: &Sample) -> String {
    s.page_texts().join("\n\u{c}\n") + "\n"
}

/// Write every sample, `expected/<file>.txt` and `manifest.json` into `dir`;
/// returns how many files were written.
pub fn write_samples(dir: &std::path::Path) -> std::io::Result<usize> {
    let expected = dir.join("expected");
    std::fs::create_dir_all(&expected)?;
    let all = samples();
    for s in &all {
        std::fs::write(dir.join(&s.file), s.bytes())?;
        std::fs::write(expected.join(format!("{}.txt", s.file)), expected_text(s))?;
    }
    let manifest = serde_json::to_string_pretty(&all).map_err(std::io::Error::other)?;
    std::fs::write(dir.join("manifest.json"), manifest + "\n")?;
    Ok(all.len() * 2 + 1)
}

/// Read `manifest.json` from a samples folder.
pub fn read_manifest(dir: &std::path::Path) -> std::io::Result<Vec<Sample>> {
    let text = std::fs::read_to_string(dir.join("manifest.json"))?;
    serde_json::from_str(&text).map_err(std::io::Error::other)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrapped_lines_fit_the_page() {
        for s in samples().into_iter().filter(|s| s.kind != SampleKind::NotPdf) {
            for l in s.pages.iter().flatten() {
                assert!(helvetica_width(l, s.font_size) <= LETTER.0 - 2.0 * MARGIN, "{l}");
            }
        }
    }

    #[test]
    fn text_pdf_has_a_consistent_xref() {
        let pdf = text_pdf(&[vec!["a (b) c\\".into()]], 20.0);
        // Offsets are in bytes: keep the binary header comment as is.
        let at = |needle: &[u8]| pdf.windows(needle.len()).rposition(|w| w == needle).unwrap();
        let tail = String::from_utf8(pdf[at(b"startxref\n")..].to_vec()).unwrap();
        let start: usize = tail.lines().nth(1).unwrap().parse().unwrap();
        assert!(pdf[start..].starts_with(b"xref"));
        assert!(pdf.windows(16).any(|w| w == b"(a \\(b\\) c\\\\) Tj"));
        let table = String::from_utf8(pdf[start..].to_vec()).unwrap();
        for (i, line) in table.lines().skip(3).take(5).enumerate() {
            let off: usize = line[..10].parse().unwrap();
            assert!(
                pdf[off..].starts_with(format!("{} 0 obj", i + 1).as_bytes()),
                "object {}",
                i + 1
            );
        }
    }
}
