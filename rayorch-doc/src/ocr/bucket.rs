//! The job's outputs at an object-store URL (`--out s3://bucket/prefix/`,
//! feature `store`): the same three outputs as on disk, as immutable
//! segments committed exactly once (`rayorch_kit::store::outputs`).
//!
//! Each commit holds up to three segments: `documents.jsonl`,
//! `failures.jsonl` and `documents.parquet` (the same rows as the JSONL),
//! and names every document whose line is in them. A commit is due when the
//! segments reach their byte target or the commit interval passed; the run's
//! end commits the rest. A resume reads the commit records at the URL and
//! skips the documents they name: nothing but the URL is needed, on any
//! machine.

use rayorch_kit::store::outputs::{BucketOutputs, Kinds, RowCommits};

use crate::document::DocumentRows;

/// The job's segment kinds (each one's extension in the store).
pub(super) const KINDS: Kinds = Kinds {
    records: "documents.jsonl",
    failures: "failures.jsonl",
    parquet: "documents.parquet",
};

/// The job's commits.
pub(super) type Bucket = RowCommits<DocumentRows>;

/// The commits of a run's documents to `out`.
pub(super) fn bucket(out: BucketOutputs, dim: usize) -> Bucket {
    RowCommits::new(out, DocumentRows { dim }, KINDS)
}
