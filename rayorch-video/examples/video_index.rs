//! The video job: index videos by shot, safety score, frame embedding and
//! transcript, streamed per video (`rayorch_video::job`).
//!
//! `cargo run -p rayorch-video --example video_index` runs generated samples
//! (made with `ffmpeg` and `espeak-ng` into `target/video_samples` on first
//! use; the models are fetched on first use); `-- --help` lists inputs and
//! knobs.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use rayorch_video::job::{self, Args};

fn files(args: &Args) -> Result<Vec<PathBuf>, rayorch::BoxError> {
    if !args.inputs.is_empty() {
        return Ok(job::discover(&args.inputs)?);
    }
    let dir = PathBuf::from("target/video_samples");
    eprintln!(
        "video_index: generating sample media in {} (first run only)",
        dir.display()
    );
    Ok(rayorch_testdata::media::sample_set(&dir)?
        .into_iter()
        .map(|m| m.path)
        .collect())
}

fn main() -> ExitCode {
    let args = Args::parse();
    match files(&args).and_then(|f| job::run(&args, &f)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
