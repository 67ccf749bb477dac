//! The committed `.stderr` files of `tests/ui/fail/` (what users see) stay
//! short and name nothing of rayorch's internals. A blessed `.stderr` that
//! breaks a rule fails here even though trybuild accepts it.

use std::path::{Path, PathBuf};

/// Paths a user never wrote and cannot look up.
const INTERNAL: &[&str] = &["__private", "rayorch::check", "rayorch_runtime::", "plan::check"];

/// The budget: median at most 12 lines, none over 30.
const MEDIAN_MAX: usize = 12;
const ONE_MAX: usize = 30;
/// At least this many compile-fail cases, each with its `.stderr`.
const CASES_MIN: usize = 45;

fn files(dir: &Path, ext: &str, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("ui directory") {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            files(&path, ext, out);
        } else if path.extension().is_some_and(|e| e == ext) {
            out.push(path);
        }
    }
}

fn stderr_files() -> Vec<(PathBuf, String)> {
    let mut paths = Vec::new();
    files(Path::new("tests/ui/fail"), "stderr", &mut paths);
    paths.sort();
    paths
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).expect("readable .stderr");
            (p, text)
        })
        .collect()
}

#[test]
fn no_internal_paths() {
    let bad: Vec<String> = stderr_files()
        .iter()
        .flat_map(|(p, text)| {
            INTERNAL
                .iter()
                .filter(|needle| text.contains(*needle))
                .map(move |needle| format!("{}: {needle}", p.display()))
        })
        .collect();
    assert!(
        bad.is_empty(),
        "internal paths in user errors:\n{}",
        bad.join("\n")
    );
}

#[test]
fn short_errors() {
    let mut lines: Vec<(usize, String)> = stderr_files()
        .iter()
        .map(|(p, text)| (text.lines().count(), p.display().to_string()))
        .collect();
    assert!(!lines.is_empty());
    let long: Vec<_> = lines.iter().filter(|(n, _)| *n > ONE_MAX).collect();
    assert!(long.is_empty(), "over {ONE_MAX} lines: {long:?}");
    lines.sort();
    let median = lines[lines.len() / 2].0;
    assert!(median <= MEDIAN_MAX, "median .stderr is {median} lines");
}

#[test]
fn every_case_has_its_stderr() {
    let mut cases = Vec::new();
    files(Path::new("tests/ui/fail"), "rs", &mut cases);
    let missing: Vec<_> = cases
        .iter()
        .filter(|c| !c.with_extension("stderr").exists())
        .collect();
    assert!(missing.is_empty(), "no .stderr: {missing:?}");
    assert!(
        cases.len() >= CASES_MIN,
        "{} compile-fail cases, want {CASES_MIN}",
        cases.len()
    );
}
