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

/// Expand inputs to files, in a stable order, without duplicates
/// (`rayorch_kit::store::discover`: folders give their PDF files, patterns
/// their matches; a named file is taken whatever its extension).
pub fn discover(inputs: &[String]) -> Result<Vec<PathBuf>, String> {
    rayorch_kit::store::discover(inputs, is_pdf_url)
}

/// Split a document job's inputs into local PDF files ([`discover`]ed now,
/// at most `--limit`) and object-store inputs, checked to list, and check
/// that its `--input-list`s open (`rayorch_kit::store::split`); a URL in a
/// build without `store` is refused naming `rebuild`. No inputs and no
/// list: the bundled samples.
pub fn split(
    inputs: &[String],
    flags: &rayorch_kit::job::RunFlags,
    rebuild: &str,
) -> Result<(Vec<PathBuf>, Vec<String>), Error> {
    let samples = [crate::ocr::cli::samples_dir().display().to_string()];
    rayorch_kit::store::split(
        if runs_samples(flags, inputs) {
            &samples
        } else {
            inputs
        },
        &rayorch_kit::store::Streamed::of(flags)?,
        cfg!(feature = "store"),
        rebuild,
        flags.limit,
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
    invalid: |name, why| PdfFile::invalid(name, why),
    from_bytes: Some(PdfFile::from_bytes),
};

/// The folder whose `manifest.json` says which inputs must fail
/// (`rayorch_kit::expect`): `expected` (`--expected`), or the bundled
/// samples' when no inputs are given (the job then runs them).
pub fn expected_dir(flags: &rayorch_kit::job::RunFlags, inputs: &[String]) -> Option<PathBuf> {
    flags
        .expected
        .clone()
        .or_else(|| runs_samples(flags, inputs).then(crate::ocr::cli::samples_dir))
}

/// Does the job run the bundled samples (no inputs, no input list, no
/// shard)?
pub fn runs_samples(flags: &rayorch_kit::job::RunFlags, inputs: &[String]) -> bool {
    inputs.is_empty() && !flags.names_inputs()
}

/// Open a document job's run over `files`, its input lists and the objects
/// of `urls` into
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
        streamed: rayorch_kit::store::Streamed::of(flags)?,
        what: "PDF files",
        kind: PDF_ROOTS,
    };
    rayorch_kit::job::open_run(out, url, flags, commit, inputs, names)
}
