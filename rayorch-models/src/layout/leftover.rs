//! Text the layout model missed or clipped: lines of the page that no layout
//! region covers grow the region they continue, or become extra text
//! regions, so nothing on the page goes unread.
//!
//! Invariants:
//! - A line is *covered* when at least half of its box lies inside layout
//!   regions (any kind: text inside a figure belongs to the figure, which is
//!   deliberately not read).
//! - Uncovered lines come from the page's text layer (glyphs outside every
//!   region) or, for OCR pages, from the line boxes of the upright pass
//!   ([`crate::layout::LayoutPage::lines`]); a page without either gets no
//!   leftover regions.
//! - An uncovered line that a region cuts short (a clipped last word, a
//!   paragraph box that stops a line early) grows that region instead: the
//!   region's box is the layout box joined with the lines it continues.
//! - The remaining uncovered lines close to each other (vertical gap under
//!   one line height, overlapping horizontally) form one block; each block
//!   is a [`RegionKind::Text`] region with layout score 0 (the mark of a
//!   leftover region in the records).

use crate::layout::{LayoutBox, LayoutPage, RegionKind};
use crate::pdf::text::layer_lines;

fn area(r: &[f32; 4]) -> f32 {
    (r[2] - r[0]).max(0.0) * (r[3] - r[1]).max(0.0)
}

fn inter(a: &[f32; 4], b: &[f32; 4]) -> f32 {
    area(&[a[0].max(b[0]), a[1].max(b[1]), a[2].min(b[2]), a[3].min(b[3])])
}

/// Is at least half of `line` inside `regions`? (Regions of one page rarely
/// overlap after [`crate::layout::suppress_covered`]; an overlap counted
/// twice only makes a line more covered.)
fn covered(line: &[f32; 4], regions: &[LayoutBox]) -> bool {
    let inside: f32 = regions.iter().map(|r| inter(line, &r.bbox)).sum();
    inside >= 0.5 * area(line)
}

/// Group line boxes into blocks: two lines join when their boxes, grown by
/// one line height vertically, overlap (and overlap horizontally).
pub fn blocks(lines: &[[f32; 4]]) -> Vec<[f32; 4]> {
    let mut parent: Vec<usize> = (0..lines.len()).collect();
    fn root(p: &mut [usize], mut i: usize) -> usize {
        while p[i] != i {
            p[i] = p[p[i]];
            i = p[i];
        }
        i
    }
    for i in 0..lines.len() {
        for j in i + 1..lines.len() {
            let (a, b) = (&lines[i], &lines[j]);
            let h = (a[3] - a[1]).max(b[3] - b[1]);
            let near = a[0] < b[2] && b[0] < a[2] && a[1] - h < b[3] && b[1] - h < a[3];
            if near {
                let (ri, rj) = (root(&mut parent, i), root(&mut parent, j));
                parent[ri] = rj;
            }
        }
    }
    let mut out: Vec<(usize, [f32; 4])> = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let r = root(&mut parent, i);
        match out.iter_mut().find(|(k, _)| *k == r) {
            Some((_, b)) => *b = [b[0].min(l[0]), b[1].min(l[1]), b[2].max(l[2]), b[3].max(l[3])],
            None => out.push((r, *l)),
        }
    }
    out.into_iter().map(|(_, b)| b).collect()
}

/// The page's lines that `regions` leave uncovered, in page pixels.
pub fn uncovered_lines(page: &LayoutPage, regions: &[LayoutBox]) -> Vec<[f32; 4]> {
    let (w, h) = page.image.image.dimensions();
    let lines: Vec<[f32; 4]> = match (&page.glyphs, &page.lines) {
        (Some(g), _) => layer_lines(g, [0.0, 0.0, w as f32, h as f32])
            .iter()
            .map(|l| l.bbox.map(|v| v as f32))
            .collect(),
        (None, Some(l)) => l.to_vec(),
        (None, None) => Vec::new(),
    };
    lines
        .into_iter()
        // Specks (under 4 px high or wide) are no text worth a region.
        .filter(|l| l[2] - l[0] >= 4.0 && l[3] - l[1] >= 4.0)
        .filter(|l| !covered(l, regions))
        .collect()
}

/// Does `line` continue region `r`: overlapping it horizontally by at least
/// half the line's width, and vertically within half a line height of it?
/// (A region that clips the last word of a line, or stops a line short of
/// its paragraph's end.) Figures never grow: text near a figure is a
/// caption or body text, not part of the picture.
fn continues(line: &[f32; 4], r: &LayoutBox) -> bool {
    let h = line[3] - line[1];
    let across = (line[2].min(r.bbox[2]) - line[0].max(r.bbox[0])).max(0.0);
    let gap = (r.bbox[1] - line[3]).max(line[1] - r.bbox[3]);
    r.kind != RegionKind::Figure && across >= 0.5 * (line[2] - line[0]) && gap <= 0.5 * h
}

/// `boxes` completed so that every line of the page is read: a region that
/// cuts an uncovered line short grows to hold it (top to bottom, so a
/// paragraph cut short grows line by line), and the lines no region
/// continues become leftover text regions, appended after the others.
pub fn complete(page: &LayoutPage, mut boxes: Vec<LayoutBox>) -> Vec<LayoutBox> {
    let mut lines = uncovered_lines(page, &boxes);
    lines.sort_by(|a, b| a[1].total_cmp(&b[1]));
    let mut left = Vec::new();
    for l in lines {
        let best = boxes
            .iter_mut()
            .filter(|b| continues(&l, b))
            .max_by(|a, b| inter(&l, &a.bbox).total_cmp(&inter(&l, &b.bbox)));
        match best {
            Some(b) => {
                let r = &mut b.bbox;
                *r = [r[0].min(l[0]), r[1].min(l[1]), r[2].max(l[2]), r[3].max(l[3])];
            }
            None => left.push(l),
        }
    }
    boxes.extend(blocks(&left).into_iter().map(|bbox| LayoutBox {
        kind: RegionKind::Text,
        score: 0.0,
        bbox,
    }));
    boxes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearby_lines_form_one_block_and_distant_ones_their_own() {
        let b = blocks(&[
            [10.0, 10.0, 200.0, 30.0],
            [10.0, 35.0, 180.0, 55.0],
            [10.0, 300.0, 90.0, 320.0],
            [400.0, 10.0, 500.0, 30.0],
        ]);
        assert_eq!(
            b,
            vec![
                [10.0, 10.0, 200.0, 55.0],
                [10.0, 300.0, 90.0, 320.0],
                [400.0, 10.0, 500.0, 30.0]
            ]
        );
        assert!(blocks(&[]).is_empty());
    }

    #[test]
    fn a_line_half_inside_a_region_is_covered() {
        let r = |bbox| LayoutBox {
            kind: RegionKind::Figure,
            score: 0.9,
            bbox,
        };
        let line = [0.0, 0.0, 100.0, 10.0];
        assert!(covered(&line, &[r([0.0, 0.0, 50.0, 10.0])]));
        assert!(!covered(&line, &[r([0.0, 0.0, 40.0, 10.0])]));
        assert!(covered(
            &line,
            &[r([0.0, 0.0, 30.0, 10.0]), r([70.0, 0.0, 100.0, 10.0])]
        ));
        assert!(!covered(&line, &[]));
    }

    #[test]
    fn a_clipped_line_grows_its_region_and_a_distant_one_is_left_over() {
        let r = |kind, bbox| LayoutBox {
            kind,
            score: 0.9,
            bbox,
        };
        let footer = r(RegionKind::Footer, [607.0, 1561.0, 666.0, 1578.0]);
        let figure = r(RegionKind::Figure, [0.0, 0.0, 100.0, 100.0]);
        // "Page 1" sticks out of its footer box on the right.
        assert!(continues(&[599.0, 1552.0, 676.0, 1587.0], &footer));
        // A paragraph's next line, 6 px below its box.
        let para = r(RegionKind::Text, [100.0, 100.0, 500.0, 300.0]);
        assert!(continues(&[100.0, 306.0, 480.0, 330.0], &para));
        assert!(
            !continues(&[100.0, 330.0, 480.0, 354.0], &para),
            "a gap of a line"
        );
        assert!(
            !continues(&[450.0, 306.0, 900.0, 330.0], &para),
            "mostly beside it"
        );
        assert!(
            !continues(&[0.0, 101.0, 90.0, 120.0], &figure),
            "figures never grow"
        );
    }
}
