//! Documents by layout: pages → regions → lines, each region read by its
//! own model, gathered back in reading order as Markdown
//! (`rayorch_doc::layout`).
//!
//! `cargo run --example doc_layout` runs the generated layout corpus
//! (`<out>/corpus.pdf`), its scanned twin (`<out>/scans.pdf`) and the
//! bundled samples, and prints each corpus page's score against its truth
//! (`rayorch_testdata::score`: the demo's check, never part of the job's
//! outputs); given inputs, it runs them alone. `-- --help` lists the knobs.

use std::process::ExitCode;
use std::sync::{Arc, Mutex, PoisonError};

use clap::Parser;
use rayorch_doc::layout::{self, cli::Args};
use rayorch_testdata::layoutgen;
use rayorch_testdata::score::LayoutScores;

fn main() -> ExitCode {
    // First, before any thread: glibc keeps freed memory (the process
    // starts itself again with the setting; rayorch_kit::malloc).
    rayorch_kit::malloc::keep_freed_memory();
    match run(Args::parse()) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(mut args: Args) -> Result<u8, rayorch::BoxError> {
    let (mut truth, mut temporary) = (Vec::new(), None);
    // No inputs and no input list or shard: the generated corpus and the
    // samples, scored.
    if args.inputs.is_empty() && !args.run.names_inputs() {
        // The corpus goes beside local outputs, or to a temporary folder
        // when they are at a URL.
        let at_url = args.out.to_string_lossy().contains("://");
        let work = match at_url {
            false => args.out.clone(),
            true => std::env::temp_dir().join(format!("rayorch-layout-{}", std::process::id())),
        };
        std::fs::create_dir_all(&work)?;
        temporary = at_url.then(|| work.clone());
        for (name, (pages, pdf)) in [
            ("corpus.pdf", layoutgen::corpus()),
            ("scans.pdf", layoutgen::scan_corpus()),
        ] {
            let path = work.join(name);
            std::fs::write(&path, pdf)?;
            truth.push((path.display().to_string(), pages));
            args.inputs.push(path.display().to_string());
        }
        let samples = rayorch_doc::ocr::cli::samples_dir();
        args.inputs.push(samples.display().to_string());
        args.run.expected.get_or_insert(samples);
    }
    let scores = Arc::new(Mutex::new(LayoutScores::new(truth, args.dpi)));
    let hook = scores.clone();
    let code = layout::run_inspected(
        args,
        Some(Box::new(move |name, doc| {
            hook.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .ended(name, doc);
        })),
    );
    if let Some(t) = temporary {
        let _ = std::fs::remove_dir_all(t);
    }
    let code = code?;
    for s in scores.lock().unwrap_or_else(PoisonError::into_inner).scores() {
        println!("{s}");
    }
    Ok(code)
}
