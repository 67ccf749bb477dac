//! The main job: document OCR on real models, streamed per document
//! (`rayorch_doc::ocr`: the pipeline, its outputs and every role of a
//! distributed run).
//!
//! `cargo run --example doc_ocr` runs the bundled samples (model files are
//! fetched on first use) and, after the run, prints each sample's score
//! against its known text (`rayorch_testdata::score`: the demo's check,
//! never part of the job's outputs; `--expected DIR` scores another
//! samples folder); `-- --help` lists inputs and knobs, and the exit
//! status.

use std::process::ExitCode;
use std::sync::{Arc, Mutex, PoisonError};

use clap::Parser;
use rayorch_doc::ocr::{self, cli::Args};
use rayorch_testdata::score::TextScores;

/// `--features mimalloc`: the job on mimalloc (BENCHMARKS.md, "The job's
/// allocator").
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    // First, before any thread: glibc keeps freed memory (the process
    // starts itself again with the setting; rayorch_kit::malloc).
    rayorch_kit::malloc::keep_freed_memory();
    let args = Args::parse();
    // The samples' manifest, when there is one to score against (the job
    // itself reads it too, for which samples must fail).
    let manifest = args
        .expected_dir()
        .and_then(|d| rayorch_testdata::pdfgen::read_manifest(&d).ok());
    let scores = Arc::new(Mutex::new(TextScores::new(manifest.unwrap_or_default())));
    let hook = scores.clone();
    let code = ocr::run_inspected(
        args,
        Some(Box::new(move |name, doc| {
            let texts = doc.map(|d| &d.page_texts[..]);
            hook.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .ended(name, texts);
        })),
    );
    let table = scores.lock().unwrap_or_else(PoisonError::into_inner).table();
    if !table.is_empty() {
        print!("\nEach sample against its known text:\n{table}");
    }
    match code {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
