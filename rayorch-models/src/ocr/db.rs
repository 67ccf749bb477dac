//! DB (differentiable binarization) post-processing: probability map → text
//! boxes that follow the text, in reading order.
//!
//! Steps, as in PaddleOCR's `DBPostProcess`:
//! 1. binarise the map at `thresh`;
//! 2. 8-connected components of the bitmap;
//! 3. each component's convex hull → minimum-area (rotated) rectangle, by
//!    rotating calipers ([`crate::ocr::geometry::min_area_rect`]);
//! 4. score = mean probability over the map pixels *inside that rectangle*
//!    (not its axis-aligned bounds: a slanted line's bounds are mostly
//!    background); drop boxes under `box_thresh` or thinner than `min_size`;
//! 5. "unclip": the network predicts shrunk text kernels, so each rectangle
//!    is offset outwards by `area * unclip_ratio / perimeter` (the Vatti
//!    offset of a rectangle, squared off again by the minimum-area rectangle);
//! 6. reading order: the page's skew is estimated from the long boxes'
//!    angles, box centres are rotated back by it, then rows top to bottom
//!    (centres within half a box height share a row), left to right.
//!
//! Invariant: boxes, rectangles and bounds stay inside the map.

use crate::ocr::geometry::{Point, RotRect, mean_inside, min_area_rect};

/// DB thresholds.
#[derive(Clone, Debug, PartialEq)]
pub struct DbParams {
    /// Bitmap threshold on the probability map.
    pub thresh: f32,
    /// Minimum mean probability inside a kept box.
    pub box_thresh: f32,
    /// How far boxes grow back from the predicted kernel.
    pub unclip_ratio: f32,
    /// Boxes thinner than this (map pixels, before unclipping) are noise.
    pub min_size: f32,
    /// At most this many components are considered (largest first).
    pub max_candidates: usize,
}

impl Default for DbParams {
    /// `thresh`/`box_thresh` as shipped in PP-OCRv6 tiny det's
    /// `inference.yml`; `unclip_ratio` 1.5 as in PaddleOCR's predictor
    /// (the kernel is measured here on pixel edges, not centres).
    fn default() -> Self {
        DbParams {
            thresh: 0.2,
            box_thresh: 0.4,
            unclip_ratio: 1.5,
            min_size: 3.0,
            max_candidates: 3000,
        }
    }
}

/// One text box, in the coordinates of the map it came from.
#[derive(Clone, Debug, PartialEq)]
pub struct TextBox {
    /// Left edge of the axis-aligned bounds of `rect`.
    pub x0: f32,
    /// Top edge of the bounds.
    pub y0: f32,
    /// Right edge of the bounds (exclusive).
    pub x1: f32,
    /// Bottom edge of the bounds (exclusive).
    pub y1: f32,
    /// Mean probability inside the (pre-unclip) rotated rectangle.
    pub score: f32,
    /// Row in reading order.
    pub row: usize,
    /// The line's rotated rectangle (after unclip), reading direction `u`.
    pub rect: RotRect,
}

impl TextBox {
    /// A box for the rectangle `rect`, its bounds clamped to `w × h`.
    pub fn from_rect(rect: RotRect, score: f32, w: f32, h: f32) -> TextBox {
        let q = rect.quad();
        let (xs, ys) = (q.map(|p| p[0]), q.map(|p| p[1]));
        let min = |a: [f32; 4]| a.iter().copied().fold(f32::MAX, f32::min);
        let max = |a: [f32; 4]| a.iter().copied().fold(f32::MIN, f32::max);
        TextBox {
            x0: min(xs).clamp(0.0, w),
            y0: min(ys).clamp(0.0, h),
            x1: max(xs).clamp(0.0, w),
            y1: max(ys).clamp(0.0, h),
            score,
            row: 0,
            rect,
        }
    }
}

/// One component's outline points: both ends of each pixel row, on pixel
/// edges (enough for the convex hull).
fn components(bitmap: &[bool], w: usize, h: usize) -> Vec<(usize, Vec<Point>)> {
    let mut seen = vec![false; bitmap.len()];
    let mut out = Vec::new();
    let mut stack = Vec::new();
    let mut pixels = Vec::new();
    for start in 0..bitmap.len() {
        if !bitmap[start] || seen[start] {
            continue;
        }
        seen[start] = true;
        stack.push(start);
        pixels.clear();
        while let Some(i) = stack.pop() {
            pixels.push(i);
            let (x, y) = (i % w, i / w);
            for ny in y.saturating_sub(1)..(y + 2).min(h) {
                for nx in x.saturating_sub(1)..(x + 2).min(w) {
                    let j = ny * w + nx;
                    if bitmap[j] && !seen[j] {
                        seen[j] = true;
                        stack.push(j);
                    }
                }
            }
        }
        let y0 = pixels.iter().map(|&i| i / w).min().unwrap_or(0);
        let y1 = pixels.iter().map(|&i| i / w).max().unwrap_or(0);
        let mut ext = vec![(usize::MAX, 0usize); y1 - y0 + 1];
        for &i in &pixels {
            let e = &mut ext[i / w - y0];
            e.0 = e.0.min(i % w);
            e.1 = e.1.max(i % w + 1);
        }
        let mut pts = Vec::with_capacity(ext.len() * 4);
        for (k, &(a, b)) in ext.iter().enumerate() {
            if a == usize::MAX {
                continue;
            }
            let (y, a, b) = ((y0 + k) as f32, a as f32, b as f32);
            pts.extend([[a, y], [b, y], [a, y + 1.0], [b, y + 1.0]]);
        }
        out.push((pixels.len(), pts));
    }
    out
}

/// Text boxes from a `w × h` probability map, in reading order.
///
/// ```
/// use rayorch_models::ocr::{DbParams, db_boxes};
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
    comps.sort_by_key(|c| std::cmp::Reverse(c.0));
    comps.truncate(p.max_candidates);
    let mut boxes = Vec::new();
    for (_, pts) in comps {
        let Some(rect) = min_area_rect(&pts) else { continue };
        if rect.w.min(rect.h) < p.min_size {
            continue;
        }
        let score = mean_inside(prob, w, h, &rect.quad());
        if score < p.box_thresh {
            continue;
        }
        let d = rect.w * rect.h * p.unclip_ratio / (2.0 * (rect.w + rect.h));
        let grown = rect.grown(d);
        if grown.w.min(grown.h) < p.min_size + 2.0 {
            continue;
        }
        boxes.push(TextBox::from_rect(grown, score, w as f32, h as f32));
    }
    reading_order(&mut boxes);
    boxes
}

/// The page's skew in degrees (positive = clockwise): the median angle of
/// the boxes at least three times longer than tall (lines, not specks);
/// 0 when there are none.
pub fn skew_deg(boxes: &[TextBox]) -> f32 {
    let mut a: Vec<f32> = boxes
        .iter()
        .filter(|b| b.rect.w >= 3.0 * b.rect.h)
        .map(|b| b.rect.angle_deg())
        .collect();
    if a.is_empty() {
        return 0.0;
    }
    a.sort_by(f32::total_cmp);
    a[a.len() / 2]
}

/// Sort boxes into rows (top to bottom) and each row left to right; set
/// `row`. Positions are taken in the page's deskewed frame, so the lines of
/// a page scanned a few degrees off stay whole rows.
pub(crate) fn reading_order(boxes: &mut [TextBox]) {
    let (s, c) = (-skew_deg(boxes)).to_radians().sin_cos();
    let frame = |b: &TextBox| {
        let [x, y] = b.rect.c;
        let (fx, fy) = (c * x - s * y, s * x + c * y);
        (fx - b.rect.w / 2.0, fy, b.rect.h / 2.0)
    };
    boxes.sort_by(|a, b| frame(a).1.total_cmp(&frame(b).1));
    let mut row = 0;
    let mut start = 0;
    while start < boxes.len() {
        let (_, acy, half) = frame(&boxes[start]);
        let mut end = start + 1;
        while end < boxes.len() && frame(&boxes[end]).1 - acy <= half {
            end += 1;
        }
        boxes[start..end].sort_by(|a, b| frame(a).0.total_cmp(&frame(b).0));
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

    #[test]
    fn a_slanted_line_gets_a_rotated_box_scored_inside_it() {
        // A 3-px thick bar from (10, 30) to (110, 19): about -6.3 degrees.
        let (w, h) = (130, 50);
        let mut prob = vec![0.0; w * h];
        for x in 10..110 {
            let yc = 30.0 - (x - 10) as f32 * 0.11;
            for y in 0..h {
                if (y as f32 + 0.5 - yc).abs() <= 1.5 {
                    prob[y * w + x] = 0.9;
                }
            }
        }
        let b = db_boxes(&prob, w, h, &DbParams::default());
        assert_eq!(b.len(), 1, "{b:?}");
        let want = (-0.11f32).atan().to_degrees();
        assert!((b[0].rect.angle_deg() - want).abs() < 1.0, "{:?}", b[0].rect);
        // The mean over the axis-aligned bounds is under box_thresh (the old
        // rule dropped such lines); inside the rotated rectangle it passes.
        let (mut sum, mut n) = (0.0, 0);
        for y in 17..33 {
            for x in 10..110 {
                sum += prob[y * w + x];
                n += 1;
            }
        }
        assert!(sum / (n as f32) < DbParams::default().box_thresh);
        assert!(b[0].score > 0.6, "{}", b[0].score);
        assert!(
            b[0].rect.h < 0.6 * (b[0].y1 - b[0].y0) && b[0].rect.w > 100.0,
            "{:?}",
            b[0].rect
        );
        assert!((skew_deg(&b) - want).abs() < 1.0);
    }

    #[test]
    fn skewed_rows_stay_whole() {
        // Two rows of two words each, the page turned by 5 degrees.
        let (w, h) = (400, 200);
        let mut prob = vec![0.0; w * h];
        let t = 5f32.to_radians().tan();
        for (x0, x1, yb) in [
            (20, 180, 60.0),
            (200, 380, 60.0),
            (20, 180, 110.0),
            (200, 380, 110.0),
        ] {
            for x in x0..x1 {
                let yc = yb + x as f32 * t;
                for y in 0..h {
                    if (y as f32 + 0.5 - yc).abs() <= 2.5 {
                        prob[y * w + x] = 0.9;
                    }
                }
            }
        }
        let b = db_boxes(&prob, w, h, &DbParams::default());
        let rows: Vec<usize> = b.iter().map(|b| b.row).collect();
        assert_eq!(rows, [0, 0, 1, 1], "{b:?}");
        assert!(b[0].x0 < b[1].x0 && b[2].x0 < b[3].x0);
    }
}
