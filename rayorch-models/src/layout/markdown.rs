//! Regions back into pages and documents: text per region, captions attached
//! to their figure or table, reading order, Markdown.
//!
//! Invariants:
//! - A region's text comes from one source: the page's text layer when the
//!   page has a usable one (and OCR is not forced), else its OCR lines.
//! - Headers and footers are kept as records (ordered first and last) but
//!   never enter the body Markdown.
//! - A caption sits next to the figure/table it belongs to (the nearest one
//!   of its kind, vertically, among those it overlaps horizontally): right
//!   after it when below it, right before it when above.
//! - Body order is [`crate::layout::reading_order::reading_order`] over the boxes.

use serde::{Deserialize, Serialize};

use crate::layout::reading_order::reading_order;
use crate::layout::table::Table;
use crate::layout::{Orientation, PageInfo, Region, RegionKind, TextSource};
use crate::pdf::text::Verdict;
use crate::{LineText, page_text};

/// One finished region: what the per-region records hold.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RegionResult {
    /// The document's name.
    pub doc: String,
    /// Zero-based page number.
    pub page: usize,
    /// Index in detection order (stable id on the page).
    pub index: usize,
    /// Position in the page's reading order (set by [`assemble_page`]).
    pub order: usize,
    /// The class.
    pub kind: RegionKind,
    /// `[x0, y0, x1, y1]` in page pixels.
    pub bbox: [u32; 4],
    /// The text, lines separated by newlines (table rows by newlines, cells by ` | `).
    pub text: String,
    /// Where the text came from.
    pub source: TextSource,
    /// Mean line confidence (1 for the text layer, 0 without lines).
    pub confidence: f32,
    /// Layout score of the region.
    pub layout_score: f32,
    /// For a caption: the `index` of its figure or table.
    pub caption_of: Option<usize>,
    /// For a table: its cells.
    pub table: Option<Table>,
}

/// Finish one region from its OCR lines (ignored when the region has
/// text-layer lines) and, for a table, its structure.
pub fn finish_region(region: &Region, ocr: &[LineText], table: Option<Table>) -> RegionResult {
    let (lines, source) = match &region.layer {
        Some(l) => (&l[..], TextSource::Layer),
        None => (ocr, TextSource::Ocr),
    };
    let confidence = if lines.is_empty() {
        0.0
    } else {
        lines.iter().map(|l| l.confidence).sum::<f32>() / lines.len() as f32
    };
    let table = table.map(|mut t| {
        t.fill(lines);
        t
    });
    let text = match &table {
        Some(t) => t
            .grid()
            .iter()
            .map(|r| r.join(" | "))
            .collect::<Vec<_>>()
            .join("\n"),
        None => page_text(lines),
    };
    RegionResult {
        doc: region.doc.to_string(),
        page: region.page,
        index: region.index,
        order: 0,
        kind: region.kind,
        bbox: region.bbox,
        text,
        source,
        confidence,
        layout_score: region.score,
        caption_of: None,
        table,
    }
}

/// One finished page.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PageResult {
    /// Zero-based page number.
    pub page: usize,
    /// Where the page's text came from.
    pub text_source: TextSource,
    /// Why: the text-layer checks' verdict on the page, and its reason.
    pub verdict: Verdict,
    /// The verdict in words.
    #[serde(default)]
    pub reason: String,
    /// What was done to bring the page upright before layout (region boxes
    /// are in the upright page's pixels).
    #[serde(default)]
    pub orientation: Orientation,
    /// Its regions: headers, body in reading order, footers.
    pub regions: Vec<RegionResult>,
    /// The body as Markdown.
    pub markdown: String,
}

impl PageResult {
    /// The page as plain text: each region's text in reading order
    /// (headers first, footers last, as a text layer has them), one region
    /// per line; a table's cells separated by a space.
    pub fn plain_text(&self) -> String {
        let texts: Vec<String> = self
            .regions
            .iter()
            .filter(|r| !r.text.is_empty())
            .map(|r| r.text.replace(" | ", " "))
            .collect();
        texts.join("\n")
    }
}

fn caption_target(kind: RegionKind) -> Option<RegionKind> {
    match kind {
        RegionKind::FigureCaption => Some(RegionKind::Figure),
        RegionKind::TableCaption => Some(RegionKind::Table),
        _ => None,
    }
}

/// For each region, the position (in `regions`) of the figure/table it captions.
fn attach_captions(regions: &[RegionResult]) -> Vec<Option<usize>> {
    regions
        .iter()
        .map(|c| {
            let target = caption_target(c.kind)?;
            regions
                .iter()
                .enumerate()
                .filter(|(_, t)| t.kind == target)
                .filter(|(_, t)| t.bbox[0] < c.bbox[2] && c.bbox[0] < t.bbox[2])
                .min_by_key(|(_, t)| {
                    if c.bbox[1] >= t.bbox[3] {
                        c.bbox[1] - t.bbox[3]
                    } else {
                        t.bbox[1].saturating_sub(c.bbox[3])
                    }
                })
                .map(|(i, _)| i)
        })
        .collect()
}

/// Order a page's regions, attach captions and write its Markdown.
pub fn assemble_page(info: PageInfo, regions: Vec<RegionResult>) -> PageResult {
    let captions = attach_captions(&regions);
    // A page set vertically is read right to left: its boxes mirrored.
    let right = regions.iter().map(|r| r.bbox[2]).max().unwrap_or(0) as f32;
    let boxes = |idx: &[usize]| {
        idx.iter()
            .map(|&i| {
                let [x0, y0, x1, y1] = regions[i].bbox.map(|v| v as f32);
                match info.vertical {
                    true => [right - x1, y0, right - x0, y1],
                    false => [x0, y0, x1, y1],
                }
            })
            .collect::<Vec<_>>()
    };
    let by_y = |kind: RegionKind| {
        let mut v: Vec<usize> = (0..regions.len()).filter(|&i| regions[i].kind == kind).collect();
        v.sort_by_key(|&i| regions[i].bbox[1]);
        v
    };
    // Captions with a target are placed next to it, not by the column walk.
    let body: Vec<usize> = (0..regions.len())
        .filter(|&i| regions[i].kind.is_body() && captions[i].is_none())
        .collect();
    let mut order: Vec<usize> = Vec::with_capacity(regions.len());
    order.extend(by_y(RegionKind::Header));
    for k in reading_order(&boxes(&body)) {
        let i = body[k];
        let attached: Vec<usize> = (0..regions.len()).filter(|&c| captions[c] == Some(i)).collect();
        let above = |c: &usize| regions[*c].bbox[1] < regions[i].bbox[1];
        order.extend(attached.iter().copied().filter(above));
        order.push(i);
        order.extend(attached.iter().copied().filter(|c| !above(c)));
    }
    order.extend(by_y(RegionKind::Footer));
    let target_index: Vec<Option<usize>> = captions.iter().map(|t| t.map(|t| regions[t].index)).collect();
    let mut slots: Vec<Option<RegionResult>> = regions.into_iter().map(Some).collect();
    let mut out: Vec<RegionResult> = Vec::with_capacity(order.len());
    for (pos, i) in order.into_iter().enumerate() {
        if let Some(mut r) = slots[i].take() {
            r.order = pos;
            r.caption_of = target_index[i];
            out.push(r);
        }
    }
    let markdown = page_markdown(&out);
    PageResult {
        page: info.page,
        text_source: info.text_source,
        verdict: info.verdict,
        reason: info.verdict.to_string(),
        orientation: info.orientation,
        regions: out,
        markdown,
    }
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The Markdown of a page's regions (already in reading order): titles as
/// headings, text as paragraphs, tables as pipe tables, figures as image
/// placeholders followed by the text read inside them, captions in
/// italics; headers and footers left out.
pub fn page_markdown(regions: &[RegionResult]) -> String {
    let mut blocks: Vec<String> = Vec::new();
    for r in regions.iter().filter(|r| r.kind.is_body()) {
        let text = one_line(&r.text);
        let block = match r.kind {
            RegionKind::Title => format!("## {text}"),
            RegionKind::Figure => match text.is_empty() {
                true => format!("![figure](page-{}-region-{})", r.page + 1, r.index),
                // The text drawn inside the figure, kept after its placeholder.
                false => format!("![figure](page-{}-region-{})\n\n{text}", r.page + 1, r.index),
            },
            RegionKind::FigureCaption | RegionKind::TableCaption => format!("*{text}*"),
            RegionKind::Table => match &r.table {
                Some(t) if t.rows > 0 => t.to_markdown().trim_end().to_string(),
                _ => text,
            },
            RegionKind::Equation => format!("$$ {text} $$"),
            _ => text,
        };
        if !block.trim().is_empty() {
            blocks.push(block);
        }
    }
    blocks.join("\n\n")
}

/// A document's pages as one Markdown text: a heading with the name, pages
/// separated by a rule.
pub fn document_markdown(name: &str, pages: &[PageResult]) -> String {
    let mut out = format!("# {name}\n");
    for (i, p) in pages.iter().enumerate() {
        if i > 0 {
            out.push_str("\n---\n");
        }
        out.push('\n');
        out.push_str(&p.markdown);
        out.push('\n');
    }
    out
}

/// One finished document of the layout job.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LayoutDocument {
    /// The document's name (its path).
    pub name: String,
    /// Its pages, in page order.
    pub pages: Vec<PageResult>,
    /// The whole document as Markdown.
    pub markdown: String,
}

impl LayoutDocument {
    /// Assemble a document from its pages (sorted by page number).
    pub fn assemble(name: &str, mut pages: Vec<PageResult>) -> LayoutDocument {
        pages.sort_by_key(|p| p.page);
        LayoutDocument {
            name: name.to_string(),
            markdown: document_markdown(name, &pages),
            pages,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(index: usize, kind: RegionKind, bbox: [u32; 4], text: &str) -> RegionResult {
        RegionResult {
            doc: "d".into(),
            page: 0,
            index,
            order: 0,
            kind,
            bbox,
            text: text.into(),
            source: TextSource::Ocr,
            confidence: 1.0,
            layout_score: 0.9,
            caption_of: None,
            table: None,
        }
    }

    #[test]
    fn captions_follow_their_figure_and_headers_stay_out_of_the_body() {
        let regions = vec![
            r(
                0,
                RegionKind::FigureCaption,
                [100, 420, 400, 440],
                "Figure 1: A chart",
            ),
            r(1, RegionKind::Footer, [280, 760, 320, 780], "3"),
            r(2, RegionKind::Text, [40, 460, 560, 600], "After the figure."),
            r(3, RegionKind::Figure, [100, 200, 400, 400], ""),
            r(4, RegionKind::Title, [40, 60, 560, 100], "Results"),
            r(5, RegionKind::Header, [40, 10, 560, 30], "Journal"),
            r(6, RegionKind::Text, [40, 110, 560, 180], "Before the figure."),
        ];
        let info = PageInfo {
            page: 0,
            text_source: TextSource::Ocr,
            verdict: Verdict::NoLayer,
            orientation: Orientation::default(),
            vertical: false,
        };
        let p = assemble_page(info, regions);
        let idx: Vec<usize> = p.regions.iter().map(|r| r.index).collect();
        assert_eq!(idx, vec![5, 4, 6, 3, 0, 2, 1]);
        let cap = p.regions.iter().find(|r| r.index == 0).unwrap();
        assert_eq!(cap.caption_of, Some(3));
        assert_eq!(
            p.markdown,
            "## Results\n\nBefore the figure.\n\n![figure](page-1-region-3)\n\n*Figure 1: A chart*\n\nAfter the figure."
        );
    }
}
