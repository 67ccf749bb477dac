//! The video job: index videos by shot, safety score, frame embedding and
//! transcript, streamed per video (`rayorch_video::job`).
//!
//! `cargo run -p rayorch-video --example video_index` runs generated samples
//! (made with `ffmpeg` and `espeak-ng` into `target/video_samples` on first
//! use; the models are fetched on first use); `-- --help` lists inputs and
//! knobs and the exit status.

use std::collections::HashSet;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use rayorch_kit::expect::Expected;
use rayorch_testdata::media::Expect;
use rayorch_video::job::{self, Args};

/// The inputs, and the generated samples broken on purpose (their
/// failures leave the exit status 0).
type Inputs = (Vec<PathBuf>, Vec<String>, HashSet<String>);

fn inputs(args: &Args) -> Result<Inputs, rayorch::BoxError> {
    if !args.inputs.is_empty() || args.run.names_inputs() {
        let (files, urls) = job::split(&args.inputs, &args.run)?;
        return Ok((files, urls, HashSet::new()));
    }
    let dir = PathBuf::from("target/video_samples");
    eprintln!(
        "video_index: generating sample media in {} (first run only)",
        dir.display()
    );
    let samples = rayorch_testdata::media::sample_set(&dir)?;
    let bad = samples
        .iter()
        .filter(|m| matches!(m.expect, Expect::Failure { .. }))
        .map(|m| m.path.display().to_string())
        .collect();
    Ok((samples.into_iter().map(|m| m.path).collect(), Vec::new(), bad))
}

fn main() -> ExitCode {
    // First, before any thread: glibc keeps freed memory (the process
    // starts itself again with the setting; rayorch_kit::malloc).
    rayorch_kit::malloc::keep_freed_memory();
    let args = Args::parse();
    let ran =
        inputs(&args).and_then(|(files, urls, bad)| job::run(&args, &files, &urls, Expected::failing(bad)));
    match ran {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
