//! A PDF cut short is a failure that says so, never a silently shorter
//! document: the renderer compares the pages it can read with the count the
//! page tree declares. (Issue: the first 30% of an 18-page report used to
//! come out as a healthy 2-page document.)

use rayorch_models::{PdfFile, RenderConfig, RenderError, pdf::render_document};
use rayorch_testdata::pdfgen::{text_pdf, text_pdf_tree_last};

/// The pages of a generated 18-page report, a few lines per page.
fn report_pages() -> Vec<Vec<String>> {
    (1..=18)
        .map(|p| {
            (1..=6)
                .map(|l| format!("Page {p} line {l}: quarterly figures and notes"))
                .collect()
        })
        .collect()
}

/// The report, its page tree first.
fn report() -> Vec<u8> {
    text_pdf(&report_pages(), 12.0)
}

/// Tiny renders: the page count is what is tested, not the pixels.
fn cfg() -> RenderConfig {
    RenderConfig {
        dpi: 10.0,
        ..RenderConfig::default()
    }
}

#[test]
fn the_whole_report_renders_every_page() {
    let pages = render_document(&PdfFile::from_bytes("report.pdf", report()), &cfg()).unwrap();
    assert_eq!(pages.len(), 18);
}

#[test]
fn the_first_30_percent_of_a_report_is_a_failure_with_the_counts() {
    let full = report();
    let cut = full[..full.len() * 3 / 10].to_vec();
    let err = render_document(&PdfFile::from_bytes("report-cut.pdf", cut), &cfg()).unwrap_err();
    let RenderError::Corrupt {
        doc,
        detail,
        truncated,
    } = &err
    else {
        panic!("expected Corrupt, got {err:?}");
    };
    assert_eq!(doc, "report-cut.pdf");
    assert!(detail.contains("declares 18 pages but only"), "{detail}");
    assert!(*truncated && err.code() == "pdf.truncated");
    let read: usize = detail
        .split("but only ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no read count in {detail:?}"));
    assert!(read < 18, "{detail}");
    // The message names the document and says what to do.
    let msg = err.to_string();
    assert!(
        msg.starts_with("report-cut.pdf:") && msg.contains("repair it"),
        "{msg}"
    );
}

#[test]
fn every_cut_of_a_report_fails_or_renders_all_its_pages() {
    // Wherever the file ends, no shorter document comes out.
    let full = report();
    for tenth in 1..10 {
        let cut = full[..full.len() * tenth / 10].to_vec();
        match render_document(&PdfFile::from_bytes("cut.pdf", cut), &cfg()) {
            Ok(pages) => assert_eq!(pages.len(), 18, "cut at {tenth}0%"),
            Err(e) => assert!(matches!(e, RenderError::Corrupt { .. }), "cut at {tenth}0%: {e}"),
        }
    }
}

#[test]
fn a_cut_that_loses_the_page_tree_is_a_failure_not_a_shorter_document() {
    // The page tree written last (as pdfTeX does): any cut loses it, and
    // the pages before the cut are still found by scanning.
    let full = text_pdf_tree_last(&report_pages(), 12.0);
    let pages = render_document(&PdfFile::from_bytes("report.pdf", full.clone()), &cfg()).unwrap();
    assert_eq!(pages.len(), 18);
    for tenth in 1..10 {
        let cut = full[..full.len() * tenth / 10].to_vec();
        match render_document(&PdfFile::from_bytes("cut.pdf", cut), &cfg()) {
            Ok(pages) => assert_eq!(pages.len(), 18, "cut at {tenth}0%"),
            Err(e) => assert!(matches!(e, RenderError::Corrupt { .. }), "cut at {tenth}0%: {e}"),
        }
    }
    let cut = full[..full.len() * 3 / 10].to_vec();
    let err = render_document(&PdfFile::from_bytes("report-cut.pdf", cut), &cfg()).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.starts_with("report-cut.pdf:") && msg.contains("page tree is lost") && msg.contains("repair it"),
        "{msg}"
    );
}
