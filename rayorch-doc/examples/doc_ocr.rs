//! The main job: document OCR on real models, streamed per document
//! (`rayorch_doc::ocr`: the pipeline, its outputs and every role of a
//! distributed run).
//!
//! `cargo run --example doc_ocr` runs the bundled samples (model files are
//! fetched on first use); `-- --help` lists inputs and knobs, and the exit
//! status.

use std::process::ExitCode;

use clap::Parser;

/// `--features mimalloc`: the job on mimalloc (BENCHMARKS.md, "The job's
/// allocator").
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    match rayorch_doc::ocr::run(rayorch_doc::ocr::cli::Args::parse()) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
