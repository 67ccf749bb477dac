//! Scoring a finished page against its truth: character error rate of the
//! body in reading order, order inversions between consecutive body
//! regions, and table cell accuracy. Regions are matched to truth blocks by
//! overlap (boxes in the upright page's pixels), never by text.

use serde::{Deserialize, Serialize};

use super::{GtKind, GtPage};
use crate::cer::normalize_whitespace;
use rayorch_models::layout::RegionKind;
use rayorch_models::layout::markdown::PageResult;
use rayorch_models::layout::reading_order::adjacent_inversions;

/// How one finished page compares with its truth.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PageScore {
    /// The page kind.
    pub kind: String,
    /// Character error rate of the body text in reading order.
    pub cer: f64,
    /// Adjacent inversions between consecutive body regions, over the pairs.
    pub order_errors: f64,
    /// Body regions matched to truth blocks (the pairs counted above + 1).
    pub matched_regions: usize,
    /// Table pages: (rows, cols) found.
    pub table_shape: Option<(usize, usize)>,
    /// Table pages: share of truth cells whose text was read exactly.
    pub cell_accuracy: Option<f64>,
}

fn reads_body(kind: RegionKind) -> bool {
    matches!(
        kind,
        RegionKind::Title
            | RegionKind::Text
            | RegionKind::FigureCaption
            | RegionKind::TableCaption
            | RegionKind::Reference
    )
}

fn overlap(a: &[f32; 4], b: &[f32; 4]) -> f32 {
    (a[2].min(b[2]) - a[0].max(b[0])).max(0.0) * (a[3].min(b[3]) - a[1].max(b[1])).max(0.0)
}

/// The body text of a finished page in its reading order (titles,
/// paragraphs, captions; blocks separated by a newline), comparable with
/// [`GtPage::body_text`].
pub fn predicted_body(page: &PageResult) -> String {
    page.regions
        .iter()
        .filter(|r| reads_body(r.kind))
        .map(|r| r.text.clone())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Score a finished page rendered at `dpi` against its truth.
pub fn score_page(truth: &GtPage, page: &PageResult, dpi: f32) -> PageScore {
    let cer = crate::cer::cer(&truth.body_text(), &predicted_body(page));
    // Truth positions of the body regions, in predicted order.
    let targets: Vec<(usize, [f32; 4])> = truth
        .blocks
        .iter()
        .enumerate()
        .filter(|(_, b)| matches!(b.kind, GtKind::Title | GtKind::Text | GtKind::Caption))
        .map(|(i, b)| (i, b.bbox_px(dpi)))
        .collect();
    let seq: Vec<usize> = page
        .regions
        .iter()
        .filter(|r| reads_body(r.kind))
        .filter_map(|r| {
            let rb = r.bbox.map(|v| v as f32);
            targets
                .iter()
                .map(|(i, b)| (*i, overlap(b, &rb)))
                .filter(|(_, a)| *a > 0.0)
                .max_by(|a, b| a.1.total_cmp(&b.1))
                .map(|(i, _)| i)
        })
        .collect();
    let order_errors = if seq.len() > 1 {
        adjacent_inversions(&seq) as f64 / (seq.len() - 1) as f64
    } else {
        0.0
    };
    let (mut table_shape, mut cell_accuracy) = (None, None);
    if let (Some(cells), Some(gt)) = (
        &truth.table,
        truth.blocks.iter().find(|b| b.kind == GtKind::Table),
    ) {
        let gb = gt.bbox_px(dpi);
        let best = page
            .regions
            .iter()
            .filter_map(|r| {
                r.table
                    .as_ref()
                    .map(|t| (t, overlap(&gb, &r.bbox.map(|v| v as f32))))
            })
            .filter(|(_, a)| *a > 0.0)
            .max_by(|a, b| a.1.total_cmp(&b.1));
        let total: usize = cells.iter().map(Vec::len).sum();
        let (shape, right) = match best {
            Some((t, _)) => {
                let grid = t.grid();
                let right = cells
                    .iter()
                    .enumerate()
                    .flat_map(|(r, row)| row.iter().enumerate().map(move |(c, v)| (r, c, v)))
                    .filter(|(r, c, v)| {
                        grid.get(*r)
                            .and_then(|row| row.get(*c))
                            .map(|s| normalize_whitespace(s))
                            == Some(normalize_whitespace(v))
                    })
                    .count();
                (Some((t.rows, t.cols)), right)
            }
            None => (None, 0),
        };
        table_shape = shape;
        cell_accuracy = Some(right as f64 / total.max(1) as f64);
    }
    PageScore {
        kind: truth.kind.clone(),
        cer,
        order_errors,
        matched_regions: seq.len(),
        table_shape,
        cell_accuracy,
    }
}
