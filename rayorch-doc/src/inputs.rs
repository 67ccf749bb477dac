//! Inputs of the document jobs: files, folders and glob patterns, expanded
//! to PDF paths in a stable order ([`discover`]); and, with the `store`
//! feature, objects in object storage, listed while the run goes
//! (`Roots`: local files first, keyed by their place in the list, then
//! each listed object, keyed by its URL).

use std::path::{Path, PathBuf};

use rayorch_kit::store::RootKind;
use rayorch_models::PdfFile;

type Error = rayorch::BoxError;

fn is_pdf_name(p: &Path) -> bool {
    p.extension().is_some_and(|e| e.eq_ignore_ascii_case("pdf"))
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    entries.sort();
    for p in entries {
        if p.is_dir() {
            walk(&p, out)?;
        } else if is_pdf_name(&p) {
            out.push(p);
        }
    }
    Ok(())
}

/// Expand inputs to files, in a stable order, without duplicates. A named
/// file is taken whatever its extension (the renderer says if it is no PDF).
/// An input that is neither a file, a folder nor a pattern matching files is
/// kept as a path too: the run reports it as a failed document (the renderer
/// cannot read it) and goes on with the others. Only a folder that cannot be
/// listed, or a malformed pattern, is an error.
pub fn discover(inputs: &[String]) -> Result<Vec<PathBuf>, String> {
    let mut files = Vec::new();
    for input in inputs {
        let p = Path::new(input);
        if p.is_dir() {
            walk(p, &mut files).map_err(|e| format!("{input}: {e}"))?;
        } else if p.is_file() || !input.contains(['*', '?', '[']) {
            files.push(p.to_path_buf());
        } else {
            let matches: Vec<PathBuf> = glob::glob(input)
                .map_err(|e| format!("{input}: not a file, folder or valid glob pattern ({e})"))?
                .filter_map(Result::ok)
                .filter(|m| m.is_file())
                .collect();
            if matches.is_empty() {
                // Nothing matches: one failure line names the pattern.
                files.push(p.to_path_buf());
            }
            files.extend(matches);
        }
    }
    let mut seen = std::collections::HashSet::new();
    files.retain(|f| seen.insert(f.clone()));
    Ok(files)
}

/// Split a document job's inputs into local PDF files ([`discover`]ed now,
/// at most `limit`) and object-store inputs, checked to list
/// (`rayorch_kit::store::split`); a URL in a build without `store` is
/// refused naming `rebuild`.
pub fn split(
    inputs: &[String],
    rebuild: &str,
    limit: Option<usize>,
) -> Result<(Vec<PathBuf>, Vec<String>), Error> {
    rayorch_kit::store::split(
        inputs,
        cfg!(feature = "store"),
        rebuild,
        limit,
        discover,
        is_pdf_url,
        "PDF files",
    )
}

/// Is `name` a PDF's (what a prefix listing keeps)?
fn is_pdf_url(name: &str) -> bool {
    is_pdf_name(Path::new(name))
}

/// The document jobs' roots: a [`PdfFile`] read from its path, or fetched
/// from its URL by the job's fetch Call.
pub type Roots = rayorch_kit::store::Roots<PdfFile>;

/// How a document job makes its roots.
pub const PDF_ROOTS: RootKind<PdfFile> = RootKind {
    accept: is_pdf_url,
    from_path: |p| PdfFile::from_path(p),
    from_url: PdfFile::from_url,
};

/// The folder whose `manifest.json` says which inputs must fail
/// (`rayorch_kit::expect`): `expected` (`--expected`), or the bundled
/// samples' when no inputs are given (the job then runs them).
pub fn expected_dir(expected: &Option<PathBuf>, inputs: &[String]) -> Option<PathBuf> {
    expected
        .clone()
        .or_else(|| inputs.is_empty().then(crate::ocr::cli::samples_dir))
}

/// Open a document job's run over `files` and the objects of `urls` into
/// `out` (or its URL form `url`), as `flags` say
/// (`rayorch_kit::job::open_run`).
pub fn open_run(
    out: &Path,
    url: Option<&str>,
    flags: &rayorch_kit::job::RunFlags,
    commit: &rayorch_kit::store::CommitFlags,
    (files, urls): (Vec<PathBuf>, Vec<String>),
    names: std::sync::Arc<rayorch_kit::names::RootNames>,
) -> Result<rayorch_kit::job::Opened<PdfFile>, Error> {
    let inputs = rayorch_kit::job::JobInputs {
        files,
        urls,
        what: "PDF files",
        kind: PDF_ROOTS,
    };
    rayorch_kit::job::open_run(out, url, flags, commit, inputs, names)
}
