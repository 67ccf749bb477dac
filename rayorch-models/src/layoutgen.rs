//! A generated layout corpus with ground truth: two-column pages, a page
//! with a ruled table, a page with a figure and its caption, all with a
//! running header and a page-number footer.
//!
//! Invariants:
//! - Deterministic: the same call gives the same bytes and truth.
//! - Every block's truth box is where its text is drawn (points, converted
//!   to page pixels by [`GtBlock::bbox_px`]), so tests can match detected
//!   regions to truth blocks by overlap instead of by text.
//! - Body text is Helvetica 11 pt (titles Helvetica-Bold 20 pt): the PDF's
//!   text layer holds exactly the truth text, and OCR sees real glyphs.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::cer::normalize_whitespace;
use crate::layout::RegionKind;
use crate::markdown::PageResult;
use crate::pdfgen::{LETTER, SENTENCES, Writer, escape, wrap};
use crate::reading_order::adjacent_inversions;

const MARGIN: f32 = 60.0;
const BODY: f32 = 11.0;
const LEADING: f32 = 15.0;
const TITLE: f32 = 20.0;
const SMALL: f32 = 9.0;

/// What a truth block is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GtKind {
    /// A heading.
    Title,
    /// A paragraph.
    Text,
    /// A table (its cells are in [`GtPage::table`]).
    Table,
    /// A figure.
    Figure,
    /// A figure or table caption.
    Caption,
    /// Running header.
    Header,
    /// Page number.
    Footer,
}

/// One block of a page, in reading order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GtBlock {
    /// What it is.
    pub kind: GtKind,
    /// Its text, lines joined by newlines (empty for figures and tables).
    pub text: String,
    /// `[x0, y0, x1, y1]` in points, y down from the top of the page.
    pub bbox: [f32; 4],
}

impl GtBlock {
    /// The box in pixels of a page rendered at `dpi`.
    pub fn bbox_px(&self, dpi: f32) -> [f32; 4] {
        self.bbox.map(|v| v * dpi / 72.0)
    }
}

/// One page of the corpus with its truth.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GtPage {
    /// Short name of the page kind (`two_column`, `table`, `figure`).
    pub kind: String,
    /// Blocks in reading order, header first and footer last.
    pub blocks: Vec<GtBlock>,
    /// The table's cell texts, row by row (table pages only).
    pub table: Option<Vec<Vec<String>>>,
}

impl GtPage {
    /// The body text in reading order: titles, paragraphs and captions, one
    /// block per line group, blocks separated by a newline.
    pub fn body_text(&self) -> String {
        self.blocks
            .iter()
            .filter(|b| matches!(b.kind, GtKind::Title | GtKind::Text | GtKind::Caption))
            .map(|b| b.text.clone())
            .collect::<Vec<_>>()
            .join("\n")
    }
}

struct PageBuilder {
    ops: String,
    blocks: Vec<GtBlock>,
}

impl PageBuilder {
    fn new() -> PageBuilder {
        PageBuilder {
            ops: String::new(),
            blocks: Vec::new(),
        }
    }

    /// Lines at `size` from top-left `(x, top)` (points, y down); returns the bottom.
    fn lines(&mut self, kind: GtKind, lines: &[String], x: f32, top: f32, size: f32, bold: bool) -> f32 {
        let leading = if size > 12.0 {
            size * 1.3
        } else {
            LEADING * size / BODY
        };
        let font = if bold { "F2" } else { "F1" };
        let mut width: f32 = 0.0;
        for (i, l) in lines.iter().enumerate() {
            let baseline = top + size + i as f32 * leading;
            let _ = writeln!(
                self.ops,
                "BT /{font} {size} Tf {x} {} Td ({}) Tj ET",
                LETTER.1 - baseline,
                escape(l)
            );
            width = width.max(crate::pdfgen::helvetica_width(l, size) * if bold { 1.08 } else { 1.0 });
        }
        let bottom = top + size * 0.25 + lines.len() as f32 * leading;
        self.blocks.push(GtBlock {
            kind,
            text: lines.join("\n"),
            bbox: [x, top, x + width, bottom],
        });
        bottom
    }

    fn rect(&mut self, [x0, y0, x1, y1]: [f32; 4], op: &str) {
        let _ = writeln!(self.ops, "{x0} {} {} {} re {op}", LETTER.1 - y1, x1 - x0, y1 - y0);
    }
}

fn paragraph(rng: &mut u64, sentences: usize) -> String {
    (0..sentences)
        .map(|_| {
            *rng = rng
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            SENTENCES[(*rng >> 33) as usize % SENTENCES.len()]
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn header_footer(p: &mut PageBuilder, page_no: usize) {
    p.lines(
        GtKind::Header,
        &["Rayorch Technical Review, volume 3".to_string()],
        MARGIN,
        30.0,
        SMALL,
        false,
    );
    let n = format!("Page {page_no}");
    let w = crate::pdfgen::helvetica_width(&n, SMALL);
    p.lines(
        GtKind::Footer,
        &[n],
        (LETTER.0 - w) / 2.0,
        LETTER.1 - 45.0,
        SMALL,
        false,
    );
}

fn two_column(page_no: usize, title: &str, seed: u64) -> (PageBuilder, Option<Vec<Vec<String>>>) {
    let mut p = PageBuilder::new();
    let mut rng = seed;
    header_footer(&mut p, page_no);
    let full = LETTER.0 - 2.0 * MARGIN;
    let top = p.lines(
        GtKind::Title,
        &wrap(title, TITLE, full),
        MARGIN,
        80.0,
        TITLE,
        true,
    ) + 18.0;
    let col_w = (full - 30.0) / 2.0;
    for col in 0..2 {
        let x = MARGIN + col as f32 * (col_w + 30.0);
        let mut y = top;
        for _ in 0..3 {
            let text = paragraph(&mut rng, 3);
            y = p.lines(GtKind::Text, &wrap(&text, BODY, col_w), x, y, BODY, false) + 14.0;
        }
    }
    (p, None)
}

/// A page with its header/footer, a one-line `title` and a three-sentence
/// paragraph under it: the page, the generator state after the paragraph,
/// and the y below it.
fn opened_page(page_no: usize, title: &str, seed: u64) -> (PageBuilder, u64, f32) {
    let mut p = PageBuilder::new();
    let mut rng = seed;
    header_footer(&mut p, page_no);
    let full = LETTER.0 - 2.0 * MARGIN;
    let y = p.lines(GtKind::Title, &[title.to_string()], MARGIN, 80.0, TITLE, true) + 18.0;
    let y = p.lines(
        GtKind::Text,
        &wrap(&paragraph(&mut rng, 3), BODY, full),
        MARGIN,
        y,
        BODY,
        false,
    ) + 18.0;
    (p, rng, y)
}

fn table_page(page_no: usize, seed: u64) -> (PageBuilder, Option<Vec<Vec<String>>>) {
    let (mut p, mut rng, mut y) = opened_page(page_no, "Quarterly results", seed);
    let full = LETTER.0 - 2.0 * MARGIN;
    y = p.lines(
        GtKind::Caption,
        &["Table 1: Revenue and costs by region".to_string()],
        MARGIN,
        y,
        BODY,
        false,
    ) + 8.0;
    let cells: Vec<Vec<String>> = [
        ["Region", "Revenue", "Costs", "Staff"],
        ["North", "4210", "3875", "42"],
        ["South", "2980", "2415", "31"],
        ["East", "5125", "4760", "57"],
        ["West", "3640", "3320", "38"],
    ]
    .iter()
    .map(|r| r.iter().map(|c| c.to_string()).collect())
    .collect();
    let (col_w, row_h) = (full / 4.0, 26.0);
    let table_top = y;
    for (r, row) in cells.iter().enumerate() {
        for (c, text) in row.iter().enumerate() {
            let (x0, y0) = (MARGIN + c as f32 * col_w, table_top + r as f32 * row_h);
            p.rect([x0, y0, x0 + col_w, y0 + row_h], "S");
            let _ = writeln!(
                p.ops,
                "BT /F1 {BODY} Tf {} {} Td ({}) Tj ET",
                x0 + 8.0,
                LETTER.1 - (y0 + row_h / 2.0 + BODY * 0.35),
                escape(text)
            );
        }
    }
    let table_bottom = table_top + cells.len() as f32 * row_h;
    p.blocks.push(GtBlock {
        kind: GtKind::Table,
        text: String::new(),
        bbox: [MARGIN, table_top, MARGIN + full, table_bottom],
    });
    p.lines(
        GtKind::Text,
        &wrap(&paragraph(&mut rng, 2), BODY, full),
        MARGIN,
        table_bottom + 20.0,
        BODY,
        false,
    );
    (p, Some(cells))
}

fn figure_page(page_no: usize, seed: u64) -> (PageBuilder, Option<Vec<Vec<String>>>) {
    let (mut p, mut rng, mut y) = opened_page(page_no, "Throughput over time", seed);
    let full = LETTER.0 - 2.0 * MARGIN;
    let fig = [MARGIN + 96.0, y, LETTER.0 - MARGIN - 96.0, y + 200.0];
    p.ops.push_str("0.92 g\n");
    p.rect(fig, "f");
    p.ops.push_str("0.35 g\n");
    for (i, h) in [60.0, 110.0, 90.0, 150.0, 130.0, 175.0].iter().enumerate() {
        let x0 = fig[0] + 20.0 + i as f32 * 48.0;
        p.rect([x0, fig[3] - 10.0 - h, x0 + 30.0, fig[3] - 10.0], "f");
    }
    p.ops.push_str("0 g\n");
    p.blocks.push(GtBlock {
        kind: GtKind::Figure,
        text: String::new(),
        bbox: fig,
    });
    y = p.lines(
        GtKind::Caption,
        &["Figure 1: Pages per second for each configuration".to_string()],
        fig[0],
        fig[3] + 10.0,
        BODY,
        false,
    ) + 18.0;
    p.lines(
        GtKind::Text,
        &wrap(&paragraph(&mut rng, 3), BODY, full),
        MARGIN,
        y,
        BODY,
        false,
    );
    (p, None)
}

/// The corpus pages (truth) and the PDF that draws them.
pub fn corpus() -> (Vec<GtPage>, Vec<u8>) {
    let built = [
        (
            "two_column",
            two_column(1, "Streaming documents through nested pipelines", 11),
        ),
        ("table", table_page(2, 12)),
        ("figure", figure_page(3, 13)),
        (
            "two_column",
            two_column(4, "Batching across pages and documents", 14),
        ),
    ];
    let mut w = Writer::new();
    let n = built.len();
    let kids: Vec<String> = (0..n).map(|i| format!("{} 0 R", 6 + 2 * i)).collect();
    // Objects: 1 catalog, 2 page tree, 3 and 4 fonts, then (content, page) pairs from 5.
    w.object(b"<< /Type /Catalog /Pages 2 0 R >>");
    w.object(format!("<< /Type /Pages /Kids [{}] /Count {n} >>", kids.join(" ")).as_bytes());
    w.object(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>");
    w.object(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica-Bold /Encoding /WinAnsiEncoding >>");
    let mut pages = Vec::with_capacity(n);
    for (kind, (p, table)) in built {
        let content = w.stream(p.ops.as_bytes());
        w.object(
            format!(
                "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 {} {}] /Resources << /Font << /F1 3 0 R /F2 4 0 R >> >> /Contents {content} 0 R >>",
                LETTER.0, LETTER.1
            )
            .as_bytes(),
        );
        // Truth in reading order: header, body as drawn, footer.
        let mut blocks = p.blocks;
        blocks.sort_by_key(|b| match b.kind {
            GtKind::Header => 0,
            GtKind::Footer => 2,
            _ => 1,
        });
        pages.push(GtPage {
            kind: kind.to_string(),
            blocks,
            table,
        });
    }
    (pages, w.finish(1, ""))
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_corpus_is_deterministic_and_its_truth_is_complete() {
        let (a, pdf_a) = corpus();
        let (b, pdf_b) = corpus();
        assert_eq!(a, b);
        assert_eq!(pdf_a, pdf_b);
        assert_eq!(a.len(), 4);
        let table = a[1].table.as_ref().unwrap();
        assert_eq!((table.len(), table[0].len()), (5, 4));
        // Two-column page: header, title, 3 + 3 paragraphs, footer; the left
        // column's paragraphs come before the right column's.
        let kinds: Vec<GtKind> = a[0].blocks.iter().map(|b| b.kind).collect();
        assert_eq!(kinds.len(), 9);
        assert_eq!((kinds[0], kinds[8]), (GtKind::Header, GtKind::Footer));
        assert!(a[0].blocks[4].bbox[0] < a[0].blocks[5].bbox[0]);
        for p in &a {
            for b in &p.blocks {
                assert!(
                    b.bbox[2] <= LETTER.0 - MARGIN + 1.0 && b.bbox[3] < LETTER.1,
                    "{b:?}"
                );
            }
        }
    }
}
