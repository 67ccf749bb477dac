//! What a job tells its user about each root and about the run: one
//! meaning in every job (documents, layout, video).
//!
//! Invariants:
//! - **A failure line's `outcome`** (`failures.jsonl`) is `failed` for
//!   every root that did not complete because of an error, wherever the
//!   error arose: at the root's own step (a corrupt file) or at a later one
//!   whose failure left the root's output uncomputed (the engine's
//!   `Suppressed`, which is about the output, not the root). For the user
//!   the document or video failed; `cause`, `code`, `call` and `entity` say
//!   where and why. A root a filter removed is `dropped`. The engine's own
//!   [`FailureLine::of`] keeps the output's kind (`suppressed`); jobs write
//!   [`failure_line`].
//! - **The exit status** ([`exit`]): 0 when every root was written, 3 when
//!   at least one failed (the others are written), 130 when interrupted, 1
//!   when the run could not start or broke off, 2 for a wrong command line
//!   (clap's own). A job that knows which failures to expect (the bundled
//!   samples' manifest) passes the count of unexpected ones.

use rayorch::sink::FailureLine;
use rayorch::{ItemKind, RootOutcome};

/// The exit statuses every job uses (see the module note).
pub mod exit {
    /// Every root was written.
    pub const OK: u8 = 0;
    /// The run could not start or broke off (the message says why).
    pub const BROKE_OFF: u8 = 1;
    /// The command line is wrong (clap exits with it).
    pub const USAGE: u8 = 2;
    /// At least one root failed; the others are written.
    pub const SOME_FAILED: u8 = 3;
    /// Interrupted by Ctrl-C; what finished is written.
    pub const INTERRUPTED: u8 = 130;
}

/// The status of a run that ended: interrupted first, then any failure.
pub fn exit_status(interrupted: bool, failed: usize) -> u8 {
    if interrupted {
        exit::INTERRUPTED
    } else if failed > 0 {
        exit::SOME_FAILED
    } else {
        exit::OK
    }
}

/// The `outcome` a root of this output kind is reported as.
pub fn label(kind: ItemKind) -> &'static str {
    match kind {
        ItemKind::Present => "written",
        ItemKind::Dropped => "dropped",
        ItemKind::Failed | ItemKind::Suppressed => "failed",
    }
}

/// The failure line of a root that is not present (`None` for a present
/// one), with the job's `outcome` ([`label`]).
pub fn failure_line(o: &RootOutcome, name: Option<String>) -> Option<FailureLine> {
    let mut line = FailureLine::of(o, name)?;
    line.outcome = label(o.kind()).to_string();
    Some(line)
}

/// A failure line as the JSON of `failures.jsonl`, with the root's
/// input-list `meta` beside it (`metadata`), if it has any.
///
/// ```
/// use std::sync::Arc;
/// let line = rayorch::sink::FailureLine {
///     key: 7,
///     name: Some("a.pdf".into()),
///     outcome: "failed".into(),
///     kind: None,
///     code: None,
///     cause: "corrupt".into(),
///     at: None,
///     call: None,
///     entity: None,
/// };
/// let meta = Arc::new(serde_json::json!({"lang": "en"}));
/// let json: serde_json::Value = serde_json::from_slice(&rayorch_kit::outcome::failure_json(&line, Some(&meta)).unwrap()).unwrap();
/// assert_eq!((json["key"].as_u64(), &json["metadata"]["lang"]), (Some(7), &serde_json::json!("en")));
/// let plain = rayorch_kit::outcome::failure_json(&line, None).unwrap();
/// assert!(!String::from_utf8(plain).unwrap().contains("metadata"));
/// ```
pub fn failure_json(line: &FailureLine, meta: Option<&crate::names::Meta>) -> serde_json::Result<Vec<u8>> {
    #[derive(serde::Serialize)]
    struct WithMeta<'a> {
        #[serde(flatten)]
        line: &'a FailureLine,
        #[serde(skip_serializing_if = "Option::is_none")]
        metadata: Option<&'a serde_json::Value>,
    }
    serde_json::to_vec(&WithMeta {
        line,
        metadata: meta.map(|m| &**m),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_suppressed_root_is_failed_and_the_status_says_so() {
        assert_eq!(label(ItemKind::Suppressed), "failed");
        assert_eq!(label(ItemKind::Failed), "failed");
        assert_eq!(label(ItemKind::Dropped), "dropped");
        assert_eq!(exit_status(false, 0), exit::OK);
        assert_eq!(exit_status(false, 2), exit::SOME_FAILED);
        assert_eq!(exit_status(true, 2), exit::INTERRUPTED);
    }
}
