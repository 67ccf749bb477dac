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

fn inputs(args: &Args) -> Result<(Vec<PathBuf>, Vec<String>), rayorch::BoxError> {
    if !args.inputs.is_empty() {
        return job::split(&args.inputs);
    }
    let dir = PathBuf::from("target/video_samples");
    eprintln!(
        "video_index: generating sample media in {} (first run only)",
        dir.display()
    );
    let files = rayorch_testdata::media::sample_set(&dir)?
        .into_iter()
        .map(|m| m.path)
        .collect();
    Ok((files, Vec::new()))
}

fn main() -> ExitCode {
    let args = Args::parse();
    match inputs(&args).and_then(|(files, urls)| job::run(&args, &files, &urls)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
