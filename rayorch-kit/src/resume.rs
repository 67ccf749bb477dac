//! Starting, resuming or restarting a journaled run into an output folder.
//!
//! A job journals into its output folder (`journal.redb`). Before it runs,
//! [`prepare`] looks at what the folder holds and decides with the user's
//! choice ([`Start`]):
//! - no journal: a fresh run (`--resume` is an error: nothing to continue);
//! - a finished run over the same roots: replaced, like a folder without a
//!   journal (only an unfinished one needs a choice);
//! - an unfinished run: refused unless the user resumes (same roots: the
//!   journal's roots are skipped, its outputs cut back to its last commit)
//!   or forces a new start (the journal is deleted);
//! - a run over other roots: refused unless forced.
//!
//! The roots are named by a [`source_digest`] of their ordered names, so a
//! resume over a changed listing is refused with a message saying so.

use std::collections::HashSet;
use std::path::Path;

use rayorch::BoxError;
use rayorch::journal::JournalState;

/// What the user asked for (`--resume`, `--force`, or neither).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Start {
    /// Neither flag: start, unless an unfinished run is in the way.
    New,
    /// `--resume`: continue the unfinished run.
    Resume,
    /// `--force`: start over, deleting the journal.
    Force,
}

impl Start {
    /// From the two flags (`resume` wins when a caller lets both through).
    pub fn from_flags(resume: bool, force: bool) -> Start {
        match (resume, force) {
            (true, _) => Start::Resume,
            (false, true) => Start::Force,
            (false, false) => Start::New,
        }
    }
}

/// The source description of `roots` root names in this order: a count and
/// an FNV-1a digest of the names, stable across builds and machines.
///
/// ```
/// let a = rayorch_kit::resume::source_digest("PDF files", &["a.pdf", "b.pdf"]);
/// assert_ne!(a, rayorch_kit::resume::source_digest("PDF files", &["b.pdf", "a.pdf"]));
/// assert!(a.starts_with("2 PDF files, list digest "));
/// ```
pub fn source_digest<S: AsRef<str>>(what: &str, names: &[S]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in names.iter().flat_map(|n| n.as_ref().bytes().chain([0])) {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    format!("{} {what}, list digest {h:016x}", names.len())
}

/// Decide how the run into `out` starts (see the module note): returns the
/// keys the journal at `journal` already holds (empty for a fresh start),
/// having deleted a journal that must not be continued. `roots` is the
/// number of roots of this run (`None` for a source that streams: a
/// journal of it is never known to be finished, so a run into its folder
/// needs `--resume` or `--force`), `source` their [`source_digest`].
pub fn prepare(
    out: &Path,
    journal: &Path,
    start: Start,
    roots: Option<usize>,
    source: &str,
) -> Result<HashSet<u64>, BoxError> {
    let state = JournalState::read(journal)?;
    let finished = state
        .as_ref()
        .is_some_and(|s| Some(s.roots.len()) == roots && s.source == source);
    let of = roots.map_or_else(String::new, |n| format!(" of {n}"));
    match (&state, start) {
        (Some(_), Start::New) if finished => {
            std::fs::remove_file(journal)?;
            Ok(HashSet::new())
        }
        (Some(s), Start::New) if s.source != source => Err(format!(
            "{} holds a journaled run over other inputs ({}; this run: {source}): give another --out, resume with the same inputs, or start over with --force",
            out.display(),
            s.source
        )
        .into()),
        (Some(s), Start::New) => Err(format!(
            "{} holds a journaled run ({}{of} finished): continue it with --resume, or start over with --force",
            out.display(),
            s.roots.len()
        )
        .into()),
        (Some(s), Start::Resume) if s.source != source => Err(format!(
            "--resume: {} holds a journaled run over other inputs ({}; this run: {source}): resume with the same inputs, or start over with --force",
            out.display(),
            s.source
        )
        .into()),
        (Some(_), Start::Force) => {
            std::fs::remove_file(journal)?;
            Ok(HashSet::new())
        }
        (None, Start::Resume) => Err(format!(
            "--resume: {} holds no journaled run to continue; run without --resume",
            out.display()
        )
        .into()),
        (s, _) => Ok(s.as_ref().map(|s| s.roots.keys().copied().collect()).unwrap_or_default()),
    }
}

/// This process's command line with `--resume` instead of `--force` (what
/// to run to continue an interrupted run), as `program args...`.
pub fn resume_command(program: &str) -> String {
    let mut args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--force").collect();
    if !args.iter().any(|a| a == "--resume") {
        args.push("--resume".into());
    }
    format!("{program} {}", args.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_journal_starts_and_resume_without_one_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let j = dir.path().join("journal.redb");
        let src = source_digest("files", &["a"]);
        assert!(
            prepare(dir.path(), &j, Start::New, Some(1), &src)
                .unwrap()
                .is_empty()
        );
        assert!(
            prepare(dir.path(), &j, Start::Force, Some(1), &src)
                .unwrap()
                .is_empty()
        );
        let e = prepare(dir.path(), &j, Start::Resume, Some(1), &src).unwrap_err();
        assert!(e.to_string().contains("no journaled run"), "{e}");
    }

    #[test]
    fn flags_map_to_starts() {
        assert_eq!(Start::from_flags(false, false), Start::New);
        assert_eq!(Start::from_flags(true, false), Start::Resume);
        assert_eq!(Start::from_flags(false, true), Start::Force);
    }
}
