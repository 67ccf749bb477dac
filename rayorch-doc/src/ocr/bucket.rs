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

use rayorch::BoxError;
use rayorch_kit::parquet::ParquetFile;
use rayorch_kit::store::commits::Segment;
use rayorch_kit::store::outputs::{BucketOutputs, Uploaded};

use crate::document::{Document, DocumentRows};

/// Segment kinds (each one's extension in the store).
pub(super) const DOCUMENTS: &str = "documents.jsonl";
pub(super) const FAILURES: &str = "failures.jsonl";
pub(super) const PARQUET: &str = "documents.parquet";

/// The rows of the commit being built.
pub(super) struct Bucket {
    pub(super) out: BucketOutputs,
    dim: usize,
    documents: Vec<u8>,
    document_lines: u64,
    failures: Vec<u8>,
    failure_lines: u64,
    parquet: Option<ParquetFile<DocumentRows, Vec<u8>>>,
    roots: Vec<u64>,
    /// What the uploads did, once the run's outputs are closed.
    pub(super) uploaded: Option<Uploaded>,
}

impl Bucket {
    pub(super) fn new(out: BucketOutputs, dim: usize) -> Bucket {
        Bucket {
            out,
            dim,
            documents: Vec::new(),
            document_lines: 0,
            failures: Vec::new(),
            failure_lines: 0,
            parquet: None,
            roots: Vec::new(),
            uploaded: None,
        }
    }

    /// A written document: its JSONL line and its Parquet row.
    pub(super) fn document(&mut self, key: u64, line: &[u8], doc: Document) -> Result<(), BoxError> {
        self.documents.extend_from_slice(line);
        self.documents.push(b'\n');
        self.document_lines += 1;
        let parquet = match &mut self.parquet {
            Some(p) => p,
            None => self.parquet.insert(ParquetFile::in_memory(
                PARQUET,
                DocumentRows { dim: self.dim },
                8,
            )?),
        };
        parquet.write((key, doc))?;
        self.root_done(key)
    }

    /// A failed document's line.
    pub(super) fn failure(&mut self, key: u64, line: &[u8]) -> Result<(), BoxError> {
        self.failures.extend_from_slice(line);
        self.failures.push(b'\n');
        self.failure_lines += 1;
        self.root_done(key)
    }

    fn root_done(&mut self, key: u64) -> Result<(), BoxError> {
        self.roots.push(key);
        let pending = self.documents.len()
            + self.failures.len()
            + self.parquet.as_ref().map_or(0, ParquetFile::bytes_so_far);
        if self.out.due(pending) {
            self.commit()?;
        }
        Ok(())
    }

    /// Hand what is pending to the uploader as one commit.
    fn commit(&mut self) -> Result<(), BoxError> {
        if self.roots.is_empty() {
            return Ok(());
        }
        let mut segments = Vec::with_capacity(3);
        if self.document_lines > 0 {
            segments.push(Segment {
                kind: DOCUMENTS,
                bytes: std::mem::take(&mut self.documents).into(),
                rows: std::mem::take(&mut self.document_lines),
            });
        }
        if self.failure_lines > 0 {
            segments.push(Segment {
                kind: FAILURES,
                bytes: std::mem::take(&mut self.failures).into(),
                rows: std::mem::take(&mut self.failure_lines),
            });
        }
        if let Some(p) = self.parquet.take() {
            let rows = segments
                .first()
                .filter(|s| s.kind == DOCUMENTS)
                .map_or(0, |s| s.rows);
            segments.push(Segment {
                kind: PARQUET,
                bytes: p.into_bytes()?.into(),
                rows,
            });
        }
        self.out.commit(segments, std::mem::take(&mut self.roots))?;
        Ok(())
    }

    /// The run ended: commit the rest and wait for every upload.
    pub(super) fn finish(&mut self) -> Result<(), BoxError> {
        self.commit()?;
        self.uploaded = Some(self.out.finish()?);
        Ok(())
    }
}
