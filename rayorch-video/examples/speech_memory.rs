//! Peak memory of finding a video's speech: the whole 16 kHz track decoded
//! into memory and given to silero VAD in one call (`whole`, what
//! `SpeechSplit` did before) against the track decoded a packet at a time
//! into [`Vad::stream`] (`stream`, what it does now). Both print the spans
//! they found (the same) and the process's peak RSS (`VmHWM`); run each in
//! its own process, e.g. under `/usr/bin/time -v`:
//!
//! ```sh
//! cargo build --release -p rayorch-video --example speech_memory
//! target/release/examples/speech_memory whole  FILE
//! target/release/examples/speech_memory stream FILE
//! ```

use std::path::PathBuf;

use rayorch_models::speech::{SAMPLE_RATE, Vad, VadConfig};
use rayorch_video::decode::{extract_audio, for_each_audio, probe};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

fn peak_rss_kb() -> String {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .map(|l| l.trim_start_matches("VmHWM:").trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into())
}

fn run() -> Result<(), BoxError> {
    let mut args = std::env::args().skip(1);
    let (Some(mode), Some(file)) = (args.next(), args.next().map(PathBuf::from)) else {
        return Err("usage: speech_memory whole|stream FILE".into());
    };
    let info = probe(&file)?;
    let assets = rayorch_models::assets::ensure_speech()?;
    let mut vad = Vad::from_assets(&assets, VadConfig::default())?;
    let after_load = peak_rss_kb();
    let (samples, spans) = match mode.as_str() {
        "whole" => {
            let pcm = extract_audio(&file, 0.0, info.duration_s)?;
            (pcm.len(), vad.segments(&pcm)?)
        }
        "stream" => {
            let mut stream = vad.stream();
            let mut failed = None;
            for_each_audio(&file, 0.0, info.duration_s, |pcm| {
                if failed.is_none() {
                    failed = stream.push(pcm).err();
                }
            })?;
            if let Some(e) = failed {
                return Err(e.into());
            }
            (stream.len(), stream.finish()?)
        }
        "decode" => {
            // The decode alone (no VAD): what the track's decoding holds.
            let mut n = 0usize;
            for_each_audio(&file, 0.0, info.duration_s, |pcm| n += pcm.len())?;
            (n, Vec::new())
        }
        other => return Err(format!("unknown mode {other}: whole, stream or decode").into()),
    };
    println!(
        "{mode}: {} ({:.0} s of audio), {} speech spans; peak RSS after the model load {after_load}, at the end {}",
        file.display(),
        samples as f64 / SAMPLE_RATE as f64,
        spans.len(),
        peak_rss_kb()
    );
    Ok(())
}

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
