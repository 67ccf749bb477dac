//! silero VAD v6 on ONNX Runtime: 16 kHz mono PCM → speech spans.
//!
//! The model is recurrent. Each call sees one 512-sample window (32 ms)
//! preceded by the last 64 samples of the previous window (its "context";
//! without it the probability stays near 0), plus the LSTM state `[2, 1, 128]`
//! the previous call returned. Both start at zero for every new signal, so
//! [`Vad::segments`] on the same samples always gives the same spans.
//! [`Vad::stream`] takes the signal in pieces (a long audio track decoded a
//! packet at a time) and gives the same spans as one call over the whole.
//!
//! Turning per-window probabilities into spans follows silero's
//! `get_speech_timestamps` with its defaults (see [`VadConfig`]): speech
//! starts at the first window with probability ≥ `threshold`, ends after
//! `min_silence_ms` below `threshold - 0.15`, spans shorter than
//! `min_speech_ms` are dropped, and every span is padded by `speech_pad_ms`
//! on both sides (split in the middle where two spans are closer than twice
//! that). silero's `max_speech_duration_s` defaults to infinity and is not
//! implemented: a caller feeding whisper cuts long spans into ≤ 30 s pieces.

use std::path::Path;

use ndarray::{Array3, ArrayView2, arr0};
use ort::value::TensorRef;

use crate::error::ModelError;
use crate::onnx::{OnnxConfig, OnnxSession};
use crate::speech::{SAMPLE_RATE, SpeechSpan};

/// New samples per model call at 16 kHz.
pub const WINDOW: usize = 512;
/// Samples of the previous window prepended to each call at 16 kHz.
const CONTEXT: usize = 64;
/// Width of the recurrent state.
const STATE: usize = 128;

/// How probabilities become spans; the defaults are silero's.
#[derive(Clone, Debug, PartialEq)]
pub struct VadConfig {
    /// A window with probability ≥ this is speech (silero: 0.5).
    pub threshold: f32,
    /// Speech shorter than this is dropped (silero: 250 ms).
    pub min_speech_ms: u32,
    /// Silence shorter than this does not end a span (silero: 100 ms).
    pub min_silence_ms: u32,
    /// Padding added on each side of a span (silero: 30 ms).
    pub speech_pad_ms: u32,
    /// The ONNX Runtime session.
    pub onnx: OnnxConfig,
}

impl Default for VadConfig {
    fn default() -> Self {
        VadConfig {
            threshold: 0.5,
            min_speech_ms: 250,
            min_silence_ms: 100,
            speech_pad_ms: 30,
            onnx: OnnxConfig::default(),
        }
    }
}

/// A loaded silero VAD, owned by one replica.
#[derive(Debug)]
pub struct Vad {
    session: OnnxSession,
    cfg: VadConfig,
}

impl Vad {
    /// Load `model` (`silero_vad.onnx`) with the ONNX Runtime library `ort_lib`.
    pub fn load(model: &Path, ort_lib: &Path, cfg: VadConfig) -> Result<Vad, ModelError> {
        let session = OnnxSession::load(model, ort_lib, &cfg.onnx)?;
        Ok(Vad { session, cfg })
    }

    /// Load the bundled silero VAD (see [`crate::assets::ensure_speech`]).
    pub fn from_assets(a: &crate::assets::SpeechAssets, cfg: VadConfig) -> Result<Vad, ModelError> {
        Vad::load(&a.vad_model, &a.ort_lib, cfg)
    }

    /// The speech probability of every 512-sample window of `pcm_16k_mono`
    /// (the last window zero-padded), state and context carried across.
    pub fn probabilities(&mut self, pcm_16k_mono: &[f32]) -> Result<Vec<f32>, ModelError> {
        let mut stream = self.stream();
        stream.push(pcm_16k_mono)?;
        stream.finish_probabilities()
    }

    /// The speech spans of `pcm_16k_mono`, in order, not overlapping.
    pub fn segments(&mut self, pcm_16k_mono: &[f32]) -> Result<Vec<SpeechSpan>, ModelError> {
        let _span = tracing::debug_span!("vad", samples = pcm_16k_mono.len()).entered();
        let mut stream = self.stream();
        stream.push(pcm_16k_mono)?;
        stream.finish()
    }

    /// A signal fed in pieces of any length (`VadStream::push`): the same
    /// windows, context and state as one call over the whole signal, so the
    /// same probabilities and spans, while holding at most one window of
    /// samples plus one probability per window (1/512 of the signal).
    pub fn stream(&mut self) -> VadStream<'_> {
        VadStream {
            vad: self,
            state: Array3::<f32>::zeros((2, 1, STATE)),
            input: vec![0f32; CONTEXT + WINDOW],
            filled: 0,
            len: 0,
            probs: Vec::new(),
        }
    }

    /// One model call on `input` (context + window); returns the
    /// probability and replaces `state` with the next one.
    fn step(&mut self, input: &[f32], state: &mut Array3<f32>) -> Result<f32, ModelError> {
        let name = self.session.name().to_string();
        let fail = |e: ort::Error| ModelError::Onnx(format!("running {name}: {e}"));
        let sr = arr0(SAMPLE_RATE as i64);
        let batch = ArrayView2::from_shape((1, CONTEXT + WINDOW), input)
            .map_err(|e| ModelError::Onnx(format!("{name}: {e}")))?;
        let (p, next) = {
            let outputs = self
                .session
                .session_mut()
                .run(ort::inputs![
                    "input" => TensorRef::from_array_view(batch).map_err(fail)?,
                    "state" => TensorRef::from_array_view(state.view()).map_err(fail)?,
                    "sr" => TensorRef::from_array_view(sr.view()).map_err(fail)?,
                ])
                .map_err(fail)?;
            let p = outputs["output"].try_extract_array::<f32>().map_err(fail)?;
            let next = outputs["stateN"].try_extract_array::<f32>().map_err(fail)?;
            (p.iter().next().copied().unwrap_or(0.0), next.to_owned())
        };
        *state = next
            .into_shape_with_order((2, 1, STATE))
            .map_err(|e| ModelError::Onnx(format!("{name}: state has an unexpected shape: {e}")))?;
        Ok(p)
    }
}

/// silero VAD over a signal fed in pieces (see [`Vad::stream`]).
///
/// Invariant: `input[CONTEXT..CONTEXT + filled]` holds the samples of the
/// window being filled, `input[..CONTEXT]` the last samples of the window
/// before it (zeros before the first); a window runs the model the moment
/// it is full, so piece boundaries never change which samples a call sees.
#[derive(Debug)]
pub struct VadStream<'a> {
    vad: &'a mut Vad,
    state: Array3<f32>,
    input: Vec<f32>,
    filled: usize,
    len: usize,
    probs: Vec<f32>,
}

impl VadStream<'_> {
    /// Feed the next samples (16 kHz mono, any count).
    pub fn push(&mut self, pcm_16k_mono: &[f32]) -> Result<(), ModelError> {
        self.len += pcm_16k_mono.len();
        for &x in pcm_16k_mono {
            // NaN or infinite samples would poison the recurrent state for
            // the rest of the signal; treat them as silence.
            self.input[CONTEXT + self.filled] = if x.is_finite() { x } else { 0.0 };
            self.filled += 1;
            if self.filled == WINDOW {
                self.run_window()?;
            }
        }
        Ok(())
    }

    /// Samples fed so far.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing was fed yet.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn run_window(&mut self) -> Result<(), ModelError> {
        // A window cut short by the signal's end is zero-padded.
        self.input[CONTEXT + self.filled..].fill(0.0);
        let p = self.vad.step(&self.input, &mut self.state)?;
        self.probs.push(p);
        // The last CONTEXT samples become the next call's context.
        self.input.copy_within(WINDOW.., 0);
        self.filled = 0;
        Ok(())
    }

    /// The probability of every window (the last one zero-padded).
    pub fn finish_probabilities(mut self) -> Result<Vec<f32>, ModelError> {
        if self.filled > 0 {
            self.run_window()?;
        }
        Ok(self.probs)
    }

    /// The speech spans of everything fed, in order, not overlapping.
    pub fn finish(self) -> Result<Vec<SpeechSpan>, ModelError> {
        let (len, cfg) = (self.len, self.vad.cfg.clone());
        let probs = self.finish_probabilities()?;
        let sr = SAMPLE_RATE as f64;
        Ok(spans_from_probabilities(&probs, len, &cfg)
            .into_iter()
            .map(|(s, e)| SpeechSpan {
                start_s: s as f64 / sr,
                end_s: e as f64 / sr,
            })
            .collect())
    }
}

/// silero's `get_speech_timestamps` state machine over window probabilities;
/// spans in samples, `[start, end)`.
pub fn spans_from_probabilities(probs: &[f32], len: usize, cfg: &VadConfig) -> Vec<(usize, usize)> {
    let ms = |v: u32| SAMPLE_RATE * v as usize / 1000;
    let (min_speech, min_silence, pad) = (
        ms(cfg.min_speech_ms),
        ms(cfg.min_silence_ms),
        ms(cfg.speech_pad_ms),
    );
    let neg_threshold = (cfg.threshold - 0.15).max(0.01);
    let mut spans: Vec<(usize, usize)> = Vec::new();
    let mut start: Option<usize> = None;
    let mut temp_end = 0usize;
    for (i, &p) in probs.iter().enumerate() {
        let cur = i * WINDOW;
        if p >= cfg.threshold {
            temp_end = 0;
            if start.is_none() {
                start = Some(cur);
            }
            continue;
        }
        let Some(s) = start else { continue };
        if p < neg_threshold {
            if temp_end == 0 {
                temp_end = cur;
            }
            if cur - temp_end < min_silence {
                continue;
            }
            if temp_end - s > min_speech {
                spans.push((s, temp_end));
            }
            start = None;
            temp_end = 0;
        }
    }
    if let Some(s) = start
        && len.saturating_sub(s) > min_speech
    {
        spans.push((s, len));
    }
    // Pad: each side by `pad`, or half the gap when two spans are closer.
    for i in 0..spans.len() {
        if i == 0 {
            spans[0].0 = spans[0].0.saturating_sub(pad);
        }
        if i + 1 < spans.len() {
            let gap = spans[i + 1].0 - spans[i].1;
            if gap < 2 * pad {
                spans[i].1 += gap / 2;
                spans[i + 1].0 -= gap / 2;
            } else {
                spans[i].1 = (spans[i].1 + pad).min(len);
                spans[i + 1].0 = spans[i + 1].0.saturating_sub(pad);
            }
        } else {
            spans[i].1 = (spans[i].1 + pad).min(len);
        }
    }
    spans
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probs(pattern: &str) -> Vec<f32> {
        pattern
            .chars()
            .map(|c| match c {
                'S' => 0.9,
                '~' => 0.4, // between the two thresholds: neither starts nor ends speech
                _ => 0.05,
            })
            .collect()
    }

    #[test]
    fn silence_and_short_blips_give_no_span() {
        let cfg = VadConfig::default();
        let p = probs("..........");
        assert!(spans_from_probabilities(&p, p.len() * WINDOW, &cfg).is_empty());
        // 3 windows = 96 ms < 250 ms.
        let p = probs("....SSS..........");
        assert!(spans_from_probabilities(&p, p.len() * WINDOW, &cfg).is_empty());
    }

    #[test]
    fn a_span_is_padded_and_bridges_short_pauses() {
        let cfg = VadConfig::default();
        // Speech at windows 10..30 with a 2-window pause (64 ms < 100 ms) and a
        // hesitation between the thresholds that must not end it.
        let p = probs("..........SSSSSSSS..SSSS~~SSSSSS..........");
        let spans = spans_from_probabilities(&p, p.len() * WINDOW, &cfg);
        let pad = 16 * 30;
        assert_eq!(spans, vec![(10 * WINDOW - pad, 32 * WINDOW + pad)]);
    }

    #[test]
    fn speech_running_to_the_end_closes_at_the_end() {
        let cfg = VadConfig::default();
        let p = probs("....SSSSSSSSSS");
        let len = p.len() * WINDOW - 100;
        let spans = spans_from_probabilities(&p, len, &cfg);
        assert_eq!(spans, vec![(4 * WINDOW - 480, len)]);
    }
}
