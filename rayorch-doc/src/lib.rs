//! rayorch's document jobs as library code: each job's pipeline, its Calls
//! and plan, its command line and its outputs. The examples
//! (`rayorch-doc/examples/doc_ocr.rs`, `rayorch-doc/examples/doc_layout.rs`) parse arguments and call
//! [`ocr::run`] / [`layout::run`]; tests and benches build the jobs' own
//! plans ([`ocr::OcrJob::plan`], [`layout::LayoutJob::plan`]).
//!
//! | module | what |
//! | --- | --- |
//! | [`ocr`] | the main job: render, detect and recognise lines, embed pages, one [`Document`] per PDF; local or distributed |
//! | [`layout`] | documents by layout: regions read by their own model, tables, reading order, Markdown |
//! | [`document`] | the OCR job's record and its Parquet rows |
//! | [`calls`] | Calls both jobs make the same way |
//! | [`domains`] | the Domains both jobs share (`Pdf`, `Page`) |
//! | [`inputs`] | files, folders and patterns to PDF paths |
//!
//! Built on the job kit (`rayorch-kit`: progress, timeline, Parquet rows,
//! resume, Ctrl-C, roles) and the model families of `rayorch-models`.

pub mod calls;
pub mod document;
pub mod domains;
pub mod inputs;
pub mod layout;
pub mod ocr;

pub use document::Document;
