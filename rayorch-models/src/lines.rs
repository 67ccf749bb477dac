//! Text lines as the families exchange them: a detected line with its
//! pixels ([`TextLine`], from OCR detection), a line's text ([`LineText`],
//! from recognition or from a PDF's text layer), and a page's text from its
//! lines ([`page_text`]).

use std::sync::Arc;

use image::RgbImage;
use serde::{Deserialize, Serialize};

/// One detected text line: where it is and its pixels.
#[derive(Clone, Debug)]
pub struct TextLine {
    /// The document's name.
    pub doc: Arc<str>,
    /// Zero-based page number.
    pub page: usize,
    /// Row in reading order (boxes of one visual line share a row).
    pub row: usize,
    /// `[x0, y0, x1, y1]` in page pixels, x1/y1 exclusive: the bounds of
    /// the line's rotated box on the page turned upright (pages detected as
    /// turned by 90/180/270° are measured after turning them back).
    pub bbox: [u32; 4],
    /// Mean detection probability inside the (rotated) box.
    pub score: f32,
    /// The line's pixels, cut from the page along its rotated box and
    /// turned upright.
    pub crop: Arc<RgbImage>,
}

/// One recognised line.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LineText {
    /// The text.
    pub text: String,
    /// Mean probability of the decoded characters.
    pub confidence: f32,
    /// `confidence` fell under the recogniser's threshold: the line stays
    /// in the records but is left out of [`page_text`].
    #[serde(default)]
    pub low_confidence: bool,
    /// Row in reading order (see [`TextLine::row`]).
    pub row: usize,
    /// `[x0, y0, x1, y1]` in page pixels.
    pub bbox: [u32; 4],
}

/// A page's text from its lines in reading order: boxes of one row joined by
/// a space, rows by a newline; empty and low-confidence lines are skipped.
///
/// ```
/// use rayorch_models::{LineText, page_text};
/// let l = |t: &str, row| LineText { text: t.into(), confidence: 1.0, low_confidence: false, row, bbox: [0; 4] };
/// let junk = LineText { low_confidence: true, ..l("#~%", 1) };
/// assert_eq!(page_text(&[l("Hello", 0), l("world", 0), l("", 1), junk, l("Bye", 2)]), "Hello world\nBye");
/// ```
pub fn page_text(lines: &[LineText]) -> String {
    let mut out = String::new();
    let mut last_row = None;
    for l in lines {
        let t = l.text.trim();
        if t.is_empty() || l.low_confidence {
            continue;
        }
        match last_row {
            None => {}
            Some(r) if r == l.row => out.push(' '),
            Some(_) => out.push('\n'),
        }
        out.push_str(t);
        last_row = Some(l.row);
    }
    out
}
