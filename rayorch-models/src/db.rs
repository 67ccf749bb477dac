//! DB (differentiable binarization) post-processing: probability map → text
//! boxes in reading order.
//!
//! Steps, as in PaddleOCR's `DBPostProcess` for upright text:
//! 1. binarise the map at `thresh`;
//! 2. 8-connected components of the bitmap;
//! 3. score each component by the mean probability over its box, drop boxes
//!    under `box_thresh` or thinner than `min_size`;
//! 4. "unclip": the network predicts shrunk text kernels, so grow each box
//!    by `area * unclip_ratio / perimeter` on every side;
//! 5. sort into reading order: rows top to bottom (boxes whose vertical
//!    centres fall within half a box height share a row), left to right.
//!
//! Boxes are axis-aligned: rendered document pages are upright. (Paddle fits
//! rotated rectangles for scene text; that buys nothing here.)

/// DB thresholds.
#[derive(Clone, Debug, PartialEq)]
pub struct DbParams {
    /// Bitmap threshold on the probability map.
    pub thresh: f32,
    /// Minimum mean probability of a kept box.
    pub box_thresh: f32,
    /// How far boxes grow back from the predicted kernel.
    pub unclip_ratio: f32,
    /// Boxes thinner than this (map pixels, before unclipping) are noise.
    pub min_size: f32,
    /// At most this many components are considered (largest first).
    pub max_candidates: usize,
}

impl Default for DbParams {
    /// The values shipped in PP-OCRv6 tiny det's `inference.yml`.
    fn default() -> Self {
        DbParams {
            thresh: 0.2,
            box_thresh: 0.4,
            unclip_ratio: 1.4,
            min_size: 3.0,
            max_candidates: 3000,
        }
    }
}

/// One text box, in the coordinates of the map it came from.
#[derive(Clone, Debug, PartialEq)]
pub struct TextBox {
    /// Left edge.
    pub x0: f32,
    /// Top edge.
    pub y0: f32,
    /// Right edge (exclusive).
    pub x1: f32,
    /// Bottom edge (exclusive).
    pub y1: f32,
    /// Mean probability inside the box.
    pub score: f32,
    /// Row in reading order.
    pub row: usize,
}

struct Component {
    x0: usize,
    y0: usize,
    x1: usize,
    y1: usize,
    pixels: usize,
}

fn components(bitmap: &[bool], w: usize, h: usize) -> Vec<Component> {
    let mut seen = vec![false; bitmap.len()];
    let mut out = Vec::new();
    let mut stack = Vec::new();
    for start in 0..bitmap.len() {
        if !bitmap[start] || seen[start] {
            continue;
        }
        seen[start] = true;
        stack.push(start);
        let (mut c, mut n) = (
            Component {
                x0: usize::MAX,
                y0: usize::MAX,
                x1: 0,
                y1: 0,
                pixels: 0,
            },
            0,
        );
        while let Some(i) = stack.pop() {
            let (x, y) = (i % w, i / w);
            c.x0 = c.x0.min(x);
            c.x1 = c.x1.max(x + 1);
            c.y0 = c.y0.min(y);
            c.y1 = c.y1.max(y + 1);
            n += 1;
            for dy in -1i64..=1 {
                for dx in -1i64..=1 {
                    let (nx, ny) = (x as i64 + dx, y as i64 + dy);
                    if nx < 0 || ny < 0 || nx >= w as i64 || ny >= h as i64 {
                        continue;
                    }
                    let j = ny as usize * w + nx as usize;
                    if bitmap[j] && !seen[j] {
                        seen[j] = true;
                        stack.push(j);
                    }
                }
            }
        }
        c.pixels = n;
        out.push(c);
    }
    out
}

/// Text boxes from a `w × h` probability map, in reading order.
///
/// ```
/// use rayorch_models::{DbParams, db_boxes};
/// // Two "lines": a long one on top, a short one below.
/// let (w, h) = (40, 20);
/// let mut prob = vec![0.0f32; w * h];
/// for y in 3..6 { for x in 2..38 { prob[y * w + x] = 0.9; } }
/// for y in 12..15 { for x in 2..20 { prob[y * w + x] = 0.9; } }
/// let boxes = db_boxes(&prob, w, h, &DbParams::default());
/// assert_eq!(boxes.len(), 2);
/// assert!(boxes[0].y0 < boxes[1].y0 && boxes[0].row == 0 && boxes[1].row == 1);
/// assert!(boxes[0].x0 < 2.0 && boxes[0].x1 > 38.0); // grown back by unclip
/// ```
pub fn db_boxes(prob: &[f32], w: usize, h: usize, p: &DbParams) -> Vec<TextBox> {
    if w == 0 || h == 0 || prob.len() < w * h {
        return Vec::new();
    }
    let bitmap: Vec<bool> = prob[..w * h].iter().map(|&v| v > p.thresh).collect();
    let mut comps = components(&bitmap, w, h);
    comps.sort_by_key(|c| std::cmp::Reverse(c.pixels));
    comps.truncate(p.max_candidates);
    let mut boxes = Vec::new();
    for c in comps {
        let (bw, bh) = ((c.x1 - c.x0) as f32, (c.y1 - c.y0) as f32);
        if bw.min(bh) < p.min_size {
            continue;
        }
        let mut sum = 0.0f64;
        for y in c.y0..c.y1 {
            sum += prob[y * w + c.x0..y * w + c.x1]
                .iter()
                .map(|&v| v as f64)
                .sum::<f64>();
        }
        let score = (sum / (bw * bh) as f64) as f32;
        if score < p.box_thresh {
            continue;
        }
        let d = bw * bh * p.unclip_ratio / (2.0 * (bw + bh));
        let b = TextBox {
            x0: (c.x0 as f32 - d).max(0.0),
            y0: (c.y0 as f32 - d).max(0.0),
            x1: (c.x1 as f32 + d).min(w as f32),
            y1: (c.y1 as f32 + d).min(h as f32),
            score,
            row: 0,
        };
        if (b.x1 - b.x0).min(b.y1 - b.y0) < p.min_size + 2.0 {
            continue;
        }
        boxes.push(b);
    }
    reading_order(&mut boxes);
    boxes
}

/// Sort boxes into rows (top to bottom) and each row left to right; set `row`.
pub(crate) fn reading_order(boxes: &mut [TextBox]) {
    let cy = |b: &TextBox| (b.y0 + b.y1) / 2.0;
    boxes.sort_by(|a, b| cy(a).total_cmp(&cy(b)));
    let mut row = 0;
    let mut start = 0;
    while start < boxes.len() {
        let anchor = &boxes[start];
        let (acy, half) = (cy(anchor), (anchor.y1 - anchor.y0) / 2.0);
        let mut end = start + 1;
        while end < boxes.len() && cy(&boxes[end]) - acy <= half {
            end += 1;
        }
        boxes[start..end].sort_by(|a, b| a.x0.total_cmp(&b.x0));
        for b in &mut boxes[start..end] {
            b.row = row;
        }
        row += 1;
        start = end;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blob(prob: &mut [f32], w: usize, (x0, y0, x1, y1): (usize, usize, usize, usize), v: f32) {
        for y in y0..y1 {
            for x in x0..x1 {
                prob[y * w + x] = v;
            }
        }
    }

    #[test]
    fn boxes_of_one_row_are_left_to_right() {
        let (w, h) = (100, 30);
        let mut prob = vec![0.0; w * h];
        blob(&mut prob, w, (60, 10, 90, 16), 0.8);
        blob(&mut prob, w, (5, 11, 40, 17), 0.8);
        let b = db_boxes(&prob, w, h, &DbParams::default());
        assert_eq!(b.len(), 2);
        assert!(b[0].x0 < b[1].x0);
        assert_eq!((b[0].row, b[1].row), (0, 0));
    }

    #[test]
    fn faint_and_tiny_blobs_are_dropped() {
        let (w, h) = (60, 30);
        let mut prob = vec![0.0; w * h];
        blob(&mut prob, w, (5, 5, 50, 10), 0.25); // above thresh, below box_thresh
        blob(&mut prob, w, (5, 20, 7, 22), 0.9); // 2x2 speck
        assert!(db_boxes(&prob, w, h, &DbParams::default()).is_empty());
    }

    #[test]
    fn empty_map_gives_no_boxes() {
        assert!(db_boxes(&[], 0, 0, &DbParams::default()).is_empty());
        assert!(db_boxes(&[0.0; 100], 10, 10, &DbParams::default()).is_empty());
    }
}
