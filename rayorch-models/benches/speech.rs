//! Speech models: silero VAD realtime factor and whisper tiny.en seconds per
//! clip (mel + encoder, and greedy decoding, measured apart), batch 1 vs a
//! batch of `BENCH_BATCH` clips (default 4) in one encoder pass.
//!
//! Input: espeak-ng sentences (resampled by ffmpeg to 16 kHz mono), each
//! 2–4 s; the VAD runs over all of them joined with 1 s silences, repeated to
//! at least 60 s. Every figure is the median of `BENCH_ROUNDS` rounds
//! (default 3); one JSON line carries them with `/proc/loadavg` before and
//! after, since this machine is shared.
//!
//! `cargo bench -p rayorch-models --bench speech`

use std::time::Instant;

use rayorch_models::assets::ensure_speech;
use rayorch_models::speech::{SAMPLE_RATE, Vad, VadConfig, Whisper, WhisperConfig};
use rayorch_testdata::speech as synth;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .trim()
        .to_string()
}

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let rounds = env("BENCH_ROUNDS", 3).max(1);
    let batch = env("BENCH_BATCH", 4).max(1);
    let load_before = loadavg();
    let a = ensure_speech().expect("speech assets");
    let sentences = [
        "The quick brown fox jumps over the lazy dog",
        "Please send the invoice to the office on Monday morning",
        "Seven green apples are lying on the kitchen table",
        "The meeting starts at nine and ends before lunch",
    ];
    let clips: Vec<Vec<f32>> = (0..batch)
        .map(|i| synth::espeak(sentences[i % sentences.len()]).expect("espeak-ng and ffmpeg"))
        .collect();

    let mut vad = Vad::from_assets(&a, VadConfig::default()).expect("vad");
    let mut signal = Vec::new();
    while signal.len() < 60 * SAMPLE_RATE {
        for c in &clips {
            signal.extend(c);
            signal.extend(std::iter::repeat_n(0.0, SAMPLE_RATE));
        }
    }
    let audio_s = signal.len() as f64 / SAMPLE_RATE as f64;
    let mut vad_rtf = Vec::new();
    let mut spans = 0;
    for _ in 0..rounds {
        let t = Instant::now();
        spans = vad.segments(&signal).expect("vad").len();
        vad_rtf.push(t.elapsed().as_secs_f64() / audio_s);
    }

    let mut whisper = Whisper::from_assets(&a, WhisperConfig::default()).expect("whisper");
    let refs: Vec<&[f32]> = clips.iter().map(Vec::as_slice).collect();
    let (mut enc1, mut all1, mut encb, mut allb) = (vec![], vec![], vec![], vec![]);
    for _ in 0..rounds {
        let t = Instant::now();
        whisper.encode(&refs[..1]).expect("encode");
        enc1.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        whisper.transcribe_batch(&refs[..1]).expect("transcribe");
        all1.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        whisper.encode(&refs).expect("encode");
        encb.push(t.elapsed().as_secs_f64() / batch as f64);
        let t = Instant::now();
        whisper.transcribe_batch(&refs).expect("transcribe");
        allb.push(t.elapsed().as_secs_f64() / batch as f64);
    }
    let texts = whisper.transcribe_batch(&refs).expect("transcribe");
    println!(
        "{{\"bench\":\"speech\",\"rounds\":{rounds},\"vad_audio_s\":{audio_s:.1},\"vad_spans\":{spans},\"vad_realtime_factor\":{:.5},\"whisper_batch1_encoder_s_per_clip\":{:.3},\"whisper_batch1_total_s_per_clip\":{:.3},\"whisper_batch\":{batch},\"whisper_batchN_encoder_s_per_clip\":{:.3},\"whisper_batchN_total_s_per_clip\":{:.3},\"texts\":{:?},\"loadavg_before\":\"{load_before}\",\"loadavg_after\":\"{}\"}}",
        median(vad_rtf),
        median(enc1),
        median(all1),
        median(encb),
        median(allb),
        texts,
        loadavg()
    );
}
