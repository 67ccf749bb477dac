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
    /// Whether the line classifier turned the crop 180° (it judged the
    /// line upside down). Recognition then reads the line both ways and
    /// keeps the more confident reading: a line the classifier misjudges
    /// ("9999 Tannon Road", whose digits and n/u/o read as well upside
    /// down) is not lost to a garbled, low-confidence reading.
    pub flipped: bool,
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

/// `lines` of one page put in reading order across columns, rows
/// renumbered (a row of the input split between two columns becomes two
/// rows). For OCR lines and text-layer lines alike.
///
/// A recursive XY-cut over the lines' boxes, with `h` the median line
/// height:
/// - a **gutter** (a vertical gap in the lines' x projection at least
///   0.8 `h` wide, with lines at least 5 `h` wide at the median on both
///   sides: text columns, not table cells) cuts a block into its left and
///   right parts, read one after the other;
/// - otherwise the block is cut into **bands** at every horizontal gap in
///   the y projection, read top to bottom; neighbouring bands that share a
///   gutter are read as one block first (the lines of two columns, whose
///   paragraph gaps may line up, stay in their columns);
/// - a block with neither keeps its lines' own order (row, then left to
///   right).
///
/// ```
/// use rayorch_models::{LineText, lines::reading_order, page_text};
/// let l = |t: &str, row, x: u32, y: u32| LineText {
///     text: t.into(), confidence: 1.0, low_confidence: false, row, bbox: [x, y, x + 300, y + 20],
/// };
/// // Two columns whose lines share rows: read down the left column first.
/// let page = [l("left one", 0, 0, 0), l("right one", 0, 400, 0), l("left two", 1, 0, 30), l("right two", 1, 400, 30)];
/// assert_eq!(page_text(&reading_order(&page)), "left one\nleft two\nright one\nright two");
/// ```
pub fn reading_order(lines: &[LineText]) -> Vec<LineText> {
    let mut heights: Vec<u32> = lines
        .iter()
        .map(|l| l.bbox[3].saturating_sub(l.bbox[1]))
        .collect();
    heights.sort_unstable();
    let h = heights.get(heights.len() / 2).copied().unwrap_or(1).max(1) as f32;
    let mut order = Vec::with_capacity(lines.len());
    xy_cut(lines, (0..lines.len()).collect(), h, &mut order);
    let mut out = Vec::with_capacity(lines.len());
    let mut row = 0;
    let mut last = None;
    for i in order {
        let l = &lines[i];
        if last.is_some_and(|r| r != l.row) {
            row += 1;
        }
        last = Some(l.row);
        out.push(LineText { row, ..l.clone() });
    }
    out
}

/// Append the block `idx` of `lines` to `out` in reading order (see
/// [`reading_order`]).
fn xy_cut(lines: &[LineText], mut idx: Vec<usize>, h: f32, out: &mut Vec<usize>) {
    if idx.len() <= 1 {
        out.extend(idx);
        return;
    }
    if let Some(cut) = gutter(lines, &idx, h) {
        let (left, right) = idx.into_iter().partition(|&i| (lines[i].bbox[2] as f32) <= cut);
        xy_cut(lines, left, h, out);
        xy_cut(lines, right, h, out);
        return;
    }
    idx.sort_by_key(|&i| (lines[i].bbox[1], lines[i].bbox[0]));
    let mut bands: Vec<Vec<usize>> = Vec::new();
    let mut bottom = 0;
    for i in idx {
        let b = lines[i].bbox;
        match bands.last_mut() {
            Some(band) if b[1] < bottom => band.push(i),
            _ => bands.push(vec![i]),
        }
        bottom = bottom.max(b[3]);
    }
    if bands.len() == 1 {
        let mut leaf = bands.pop().unwrap_or_default();
        leaf.sort_by_key(|&i| (lines[i].row, lines[i].bbox[0]));
        out.extend(leaf);
        return;
    }
    let mut blocks: Vec<Vec<usize>> = Vec::new();
    for band in bands {
        if let Some(cur) = blocks.last_mut() {
            let joined: Vec<usize> = cur.iter().chain(&band).copied().collect();
            if gutter(lines, &joined, h).is_some() {
                *cur = joined;
                continue;
            }
        }
        blocks.push(band);
    }
    for block in blocks {
        xy_cut(lines, block, h, out);
    }
}

/// The widest column gutter of the block `idx`: where its left part ends
/// (lines ending at or before it are left), if there is one.
fn gutter(lines: &[LineText], idx: &[usize], h: f32) -> Option<f32> {
    let mut spans: Vec<(u32, u32)> = idx
        .iter()
        .map(|&i| (lines[i].bbox[0], lines[i].bbox[2]))
        .collect();
    spans.sort_unstable();
    let mut best: Option<(u32, u32)> = None;
    let mut right = spans[0].1;
    for &(x0, x1) in &spans[1..] {
        if x0 > right && (x0 - right) as f32 >= 0.8 * h && best.is_none_or(|(a, b)| x0 - right > b - a) {
            let wide = |side: &mut Vec<u32>| {
                side.sort_unstable();
                side[side.len() / 2] as f32 >= 5.0 * h
            };
            let (mut l, mut r): (Vec<u32>, Vec<u32>) = (Vec::new(), Vec::new());
            for &(a, b) in &spans {
                if b <= right {
                    l.push(b - a)
                } else {
                    r.push(b.saturating_sub(a))
                }
            }
            if wide(&mut l) && wide(&mut r) {
                best = Some((right, x0));
            }
        }
        right = right.max(x1);
    }
    best.map(|(a, _)| a as f32)
}
