//! The committed `samples/` folder is exactly what the generator makes, and
//! every kind of bad input fails to render with its own clear cause.

use std::path::PathBuf;

use rayorch_models::{PdfFile, RenderConfig, RenderError, pdf::render_document};
use rayorch_testdata::pdfgen::{SampleKind, expected_text, read_manifest, samples};

fn dir() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../samples"))
}

#[test]
fn committed_samples_match_the_generator() {
    let fresh = samples();
    assert_eq!(
        read_manifest(&dir()).unwrap(),
        fresh,
        "regenerate: cargo run -p rayorch-testdata --bin gen-samples"
    );
    for s in &fresh {
        let on_disk = std::fs::read(dir().join(&s.file)).unwrap();
        assert!(
            on_disk == s.bytes(),
            "{} differs from the generator's output",
            s.file
        );
        let txt = std::fs::read_to_string(dir().join("expected").join(format!("{}.txt", s.file))).unwrap();
        assert_eq!(txt, expected_text(s));
    }
    let kinds: Vec<SampleKind> = fresh.iter().map(|s| s.kind).collect();
    for k in [
        SampleKind::Text,
        SampleKind::Empty,
        SampleKind::Corrupt,
        SampleKind::Encrypted,
        SampleKind::NotPdf,
    ] {
        assert!(kinds.contains(&k), "samples cover {k:?}");
    }
    let pages: Vec<usize> = fresh
        .iter()
        .filter(|s| s.kind == SampleKind::Text)
        .map(|s| s.pages.len())
        .collect();
    assert!(
        pages.iter().max() >= Some(&10) && pages.contains(&1),
        "short and long documents: {pages:?}"
    );
}

#[test]
fn each_sample_renders_or_fails_as_its_kind_says() {
    for s in samples() {
        let name = dir().join(&s.file);
        let got = render_document(&PdfFile::from_path(&name), &RenderConfig::default());
        let doc = name.display().to_string();
        match (s.kind, got) {
            (SampleKind::Text, Ok(pages)) => {
                assert_eq!(pages.len(), s.pages.len(), "{doc}");
                assert!(
                    pages
                        .iter()
                        .enumerate()
                        .all(|(i, p)| p.page == i && p.image.width() == 1275)
                );
            }
            (SampleKind::Empty, Ok(pages)) => assert!(pages.is_empty(), "{doc}"),
            (SampleKind::Corrupt, Err(e @ RenderError::Corrupt { .. }))
            | (SampleKind::Encrypted, Err(e @ RenderError::Encrypted { .. }))
            | (SampleKind::NotPdf, Err(e @ RenderError::NotPdf { .. })) => {
                let msg = e.to_string();
                assert!(msg.starts_with(&doc), "the cause names the document: {msg}");
            }
            (kind, other) => panic!("{doc} ({kind:?}): unexpected {other:?}"),
        }
    }
    let missing = render_document(
        &PdfFile::from_path("/nonexistent/x.pdf"),
        &RenderConfig::default(),
    );
    assert!(matches!(missing, Err(RenderError::Read { .. })));
}
