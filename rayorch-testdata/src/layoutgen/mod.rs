//! A generated layout corpus with ground truth: two-column pages, a page
//! with a ruled table, a page with a figure and its caption, all with a
//! running header and a page-number footer ([`corpus`]); and the same kinds
//! of pages as scans ([`scan_corpus`]): pictures only, no text layer,
//! degraded, turned by 90/180/270° or skewed by 2° and 5°.
//!
//! Invariants:
//! - Deterministic: the same call gives the same bytes and truth.
//! - Every block's truth box is where its text is drawn (points, converted
//!   to page pixels by [`GtBlock::bbox_px`]), so tests can match detected
//!   regions to truth blocks by overlap instead of by text.
//! - Body text is Helvetica 11 pt (titles Helvetica-Bold 20 pt): the PDF's
//!   text layer holds exactly the truth text, and OCR sees real glyphs.
//! - A scanned page's truth is its digital page's, in the upright page's
//!   coordinates; [`GtPage::scan`] says how its picture was made.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::pdfgen::{LETTER, SENTENCES, Writer, escape, wrap};

mod score;
pub use score::{PageScore, predicted_body, score_page};

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
    /// Short name of the page kind (`two_column`, `table`, `figure`; scans:
    /// `image_only`, `rotated_90`, `rotated_180`, `rotated_270`,
    /// `skewed_2`, `skewed_5`).
    pub kind: String,
    /// Blocks in reading order, header first and footer last.
    pub blocks: Vec<GtBlock>,
    /// The table's cell texts, row by row (table pages only).
    pub table: Option<Vec<Vec<String>>>,
    /// Scanned pages: how the picture was made from the digital page.
    #[serde(default)]
    pub scan: Option<Scan>,
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

/// One page ready to be written: content stream, size, truth, and for a
/// scanned page the picture it draws.
struct Built {
    kind: String,
    ops: String,
    blocks: Vec<GtBlock>,
    table: Option<Vec<Vec<String>>>,
    size: (f32, f32),
    scan: Option<Scan>,
    /// Grey pixels.
    picture: Option<image::GrayImage>,
}

fn built(kind: &str, (p, table): (PageBuilder, Option<Vec<Vec<String>>>)) -> Built {
    Built {
        kind: kind.to_string(),
        ops: p.ops,
        blocks: p.blocks,
        table,
        size: LETTER,
        scan: None,
        picture: None,
    }
}

/// The PDF drawing `pages` and their truth (blocks in reading order).
fn write_pdf(pages: Vec<Built>) -> (Vec<GtPage>, Vec<u8>) {
    let mut w = Writer::new();
    // Objects: 1 catalog, 2 page tree, 3 and 4 fonts, then per page its
    // picture (scans only), its content and the page itself.
    let mut next = 5;
    let numbers: Vec<usize> = pages
        .iter()
        .map(|p| {
            next += 2 + usize::from(p.picture.is_some());
            next - 1
        })
        .collect();
    w.catalog_and_tree(&numbers);
    w.object(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>");
    w.object(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica-Bold /Encoding /WinAnsiEncoding >>");
    let mut truth = Vec::with_capacity(pages.len());
    for p in pages {
        let (resources, ops) = match &p.picture {
            Some(grey) => {
                let im = w.grey_picture(grey.width(), grey.height(), grey.as_raw());
                (
                    format!("<< /XObject << /Im0 {im} 0 R >> >>"),
                    format!("q {} 0 0 {} 0 0 cm /Im0 Do Q\n", p.size.0, p.size.1),
                )
            }
            None => ("<< /Font << /F1 3 0 R /F2 4 0 R >> >>".to_string(), p.ops.clone()),
        };
        let content = w.stream(ops.as_bytes());
        w.object(
            format!(
                "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 {} {}] /Resources {resources} /Contents {content} 0 R >>",
                p.size.0, p.size.1
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
        truth.push(GtPage {
            kind: p.kind,
            blocks,
            table: p.table,
            scan: p.scan,
        });
    }
    (truth, w.finish(1, ""))
}

/// The digital corpus: pages with a text layer (two columns, a ruled
/// table, a figure with caption) and the PDF that draws them.
pub fn corpus() -> (Vec<GtPage>, Vec<u8>) {
    write_pdf(vec![
        built(
            "two_column",
            two_column(1, "Streaming documents through nested pipelines", 11),
        ),
        built("table", table_page(2, 12)),
        built("figure", figure_page(3, 13)),
        built(
            "two_column",
            two_column(4, "Batching across pages and documents", 14),
        ),
    ])
}

/// How a scanned page was made from its digital page: rendered at
/// [`SCAN_DPI`], degraded (grey paper, softened glyphs, noise) when
/// `degraded`, rotated by `skew_deg` (clockwise) about its centre, then
/// turned clockwise by `turn` (a multiple of 90°). Its truth is the
/// digital page's: boxes in the upright page's coordinates.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Scan {
    /// Clockwise quarter turn of the picture (the job must turn it back).
    pub turn: u32,
    /// Clockwise skew in degrees.
    pub skew_deg: f32,
    /// Grey paper, blur and noise.
    pub degraded: bool,
}

/// Resolution of the scanned pictures.
pub const SCAN_DPI: f32 = 150.0;

/// The digital page `page` as a scan: a picture only, no text layer.
fn scanned(page: Built, scan: Scan) -> Built {
    let (_, pdf) = write_pdf(vec![Built {
        kind: page.kind.clone(),
        ops: page.ops.clone(),
        blocks: Vec::new(),
        table: None,
        size: page.size,
        scan: None,
        picture: None,
    }]);
    let cfg = rayorch_models::pdf::RenderConfig {
        dpi: SCAN_DPI,
        ..rayorch_models::pdf::RenderConfig::default()
    };
    // The page was written just above: a failure here is a bug in this file.
    let img =
        rayorch_models::pdf::render_document(&rayorch_models::pdf::PdfFile::from_bytes("scan", pdf), &cfg)
            .expect("a generated page renders")
            .remove(0)
            .image;
    let grey = image::imageops::grayscale(&*img);
    let mut grey = if scan.degraded { degrade(&grey) } else { grey };
    if scan.skew_deg != 0.0 {
        let paper = if scan.degraded { PAPER } else { 255 };
        let rgb = image::DynamicImage::ImageLuma8(grey).to_rgb8();
        let rotated =
            rayorch_models::ocr::geometry::rotate_image_within(&rgb, scan.skew_deg, image::Rgb([paper; 3]));
        grey = image::imageops::grayscale(&rotated);
    }
    let grey = match scan.turn % 360 {
        90 => image::imageops::rotate90(&grey),
        180 => image::imageops::rotate180(&grey),
        270 => image::imageops::rotate270(&grey),
        _ => grey,
    };
    let size = if scan.turn % 180 == 90 {
        (page.size.1, page.size.0)
    } else {
        page.size
    };
    Built {
        kind: page.kind,
        ops: String::new(),
        blocks: page.blocks,
        table: page.table,
        size,
        scan: Some(scan),
        picture: Some(grey),
    }
}

const PAPER: u8 = 228;

/// Scanner look: glyph edges softened, ink and paper pulled to grey
/// (ink ~35, paper [`PAPER`]), deterministic noise of ±16 levels.
fn degrade(img: &image::GrayImage) -> image::GrayImage {
    let soft = image::imageops::blur(img, 0.7);
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    image::GrayImage::from_fn(soft.width(), soft.height(), |x, y| {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let noise = (state >> 59) as f32 - 16.0;
        let v = soft.get_pixel(x, y).0[0] as f32 / 255.0;
        image::Luma([(35.0 + v * (PAPER as f32 - 35.0) + noise).clamp(0.0, 255.0) as u8])
    })
}

/// The scanned corpus: image-only pages (no text layer) made from digital
/// pages — one degraded scan, three turned by 90/180/270°, two skewed by 2°
/// and 5° — and the PDF that draws them. Truth boxes are in the upright
/// page's coordinates.
pub fn scan_corpus() -> (Vec<GtPage>, Vec<u8>) {
    let s = |turn, skew_deg, degraded| Scan {
        turn,
        skew_deg,
        degraded,
    };
    let pages = vec![
        (
            "image_only",
            built("two_column", two_column(1, "Scanned pages go through OCR", 21)),
            s(0, 0.0, true),
        ),
        ("rotated_90", built("table", table_page(2, 22)), s(90, 0.0, false)),
        (
            "rotated_180",
            built("two_column", two_column(3, "Pages fed upside down", 23)),
            s(180, 0.0, false),
        ),
        (
            "rotated_270",
            built("figure", figure_page(4, 24)),
            s(270, 0.0, false),
        ),
        (
            "skewed_2",
            built("two_column", two_column(5, "A slightly crooked scan", 25)),
            s(0, 2.0, false),
        ),
        ("skewed_5", built("table", table_page(6, 26)), s(0, -5.0, false)),
    ];
    write_pdf(
        pages
            .into_iter()
            .map(|(kind, page, scan)| Built {
                kind: kind.to_string(),
                ..scanned(page, scan)
            })
            .collect(),
    )
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

    #[test]
    fn scanned_pages_are_pictures_without_a_text_layer() {
        let (truth, pdf) = scan_corpus();
        assert_eq!(truth.len(), 6);
        let cfg = rayorch_models::pdf::RenderConfig {
            dpi: SCAN_DPI,
            ..rayorch_models::pdf::RenderConfig::default()
        };
        let pages = rayorch_models::pdf::render_document(
            &rayorch_models::pdf::PdfFile::from_bytes("scans", pdf.clone()),
            &cfg,
        )
        .unwrap();
        let layers = rayorch_models::pdf::text::extract(&pdf, &vec![SCAN_DPI / 72.0; pages.len()]);
        for ((t, p), layer) in truth.iter().zip(&pages).zip(layers) {
            let scan = t.scan.expect("every page is a scan");
            assert!(layer.trusted().is_none(), "{}: no text layer", t.kind);
            let (w, h) = p.image.dimensions();
            assert_eq!(w > h, scan.turn % 180 == 90, "{}: {w}x{h}", t.kind);
            // Ink is there: some dark pixels.
            assert!(
                p.image.pixels().filter(|px| px.0[1] < 100).count() > 2000,
                "{}",
                t.kind
            );
        }
        assert_eq!(truth[1].table.as_ref().map(Vec::len), Some(5));
    }
}
