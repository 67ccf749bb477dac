//! Text inside a region the layout model labels a figure is kept (issue 27,
//! item 3): from the text layer where the page has one, by OCR where it
//! has none, and in the page's Markdown after the figure's placeholder.
//! No model runs here: the layout boxes are given.

use rayorch_models::layout::markdown::{assemble_page, finish_region};
use rayorch_models::layout::regions::render_with_layer;
use rayorch_models::layout::{LayoutBox, RegionKind, TextSource, regions_of};
use rayorch_models::{PdfFile, RenderConfig};
use rayorch_testdata::pdfgen::text_pdf;

/// A form-like page whose every line sits inside one box labelled figure.
fn figure_page(force_ocr: bool) -> (rayorch_models::layout::LayoutPage, Vec<LayoutBox>) {
    let lines = vec![
        "APPLICATION FOR PERMIT".to_string(),
        "Name of applicant and address".to_string(),
        "Signature and date of signature".to_string(),
    ];
    let pdf = PdfFile::from_bytes("form.pdf", text_pdf(&[lines], 16.0));
    let mut pages = render_with_layer(&pdf, &RenderConfig::default(), force_ocr).unwrap();
    let page = pages.remove(0);
    let (w, h) = (page.image.image.width() as f32, page.image.image.height() as f32);
    let figure = LayoutBox {
        kind: RegionKind::Figure,
        score: 0.9,
        bbox: [0.0, 0.0, w, h / 2.0],
    };
    (page, vec![figure])
}

#[test]
fn text_inside_a_figure_is_read_from_the_layer_and_kept_in_the_markdown() {
    let (page, boxes) = figure_page(false);
    let info = page.info();
    let regions = regions_of(&page, boxes);
    assert_eq!(regions.len(), 1, "no line lies outside the figure");
    assert_eq!(regions[0].kind, RegionKind::Figure);
    assert!(!regions[0].needs_ocr(), "the layer reads it");
    let done = finish_region(&regions[0], &[], None);
    assert_eq!(done.source, TextSource::Layer);
    assert_eq!(
        done.text,
        "APPLICATION FOR PERMIT\nName of applicant and address\nSignature and date of signature"
    );
    let page = assemble_page(info, vec![done]);
    assert_eq!(
        page.markdown,
        "![figure](page-1-region-0)\n\nAPPLICATION FOR PERMIT Name of applicant and address Signature and date of signature"
    );
}

#[test]
fn a_figure_on_a_page_without_a_layer_goes_through_ocr() {
    let (page, boxes) = figure_page(true);
    let regions = regions_of(&page, boxes);
    let figure = regions.iter().find(|r| r.kind == RegionKind::Figure).unwrap();
    assert!(figure.needs_ocr());
    let done = finish_region(figure, &[], None);
    assert_eq!(done.source, TextSource::Ocr);
}
