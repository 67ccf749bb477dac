//! whisper's log-mel spectrogram of one 30-s window.
//!
//! The filter bank is the one whisper was trained with (`mel_80` in the
//! `openai-whisper` sdist's `mel_filters.npz`, `[80, 201]`). The spectrogram
//! is candle-transformers' `audio::pcm_to_mel` (whisper.cpp's port of
//! `whisper.log_mel_spectrogram`: 400-point Hann STFT, hop 160, log10, clamp
//! to max − 8, then `(x + 4) / 4`). It zero-pads the signal by at least 15 s,
//! so a clip of ≤ 30 s always yields ≥ 3000 frames; we keep exactly the first
//! 3000, which is what whisper's encoder was trained on.

use std::path::Path;

use candle_core::{DType, Tensor};
use candle_transformers::models::whisper::{self as w, Config};

use crate::error::ModelError;

/// whisper's mel filter bank.
#[derive(Clone, Debug)]
pub struct MelFilters {
    n_mels: usize,
    data: Vec<f32>,
}

impl MelFilters {
    /// Read the `mel_{n_mels}` bank from whisper's `mel_filters.npz`.
    pub fn load(npz: &Path, n_mels: usize) -> Result<MelFilters, ModelError> {
        let what = || npz.display().to_string();
        if !npz.is_file() {
            return Err(ModelError::MissingFile {
                what: "whisper mel filters",
                path: npz.to_path_buf(),
                hint: "run `cargo run -p rayorch-models --bin fetch-assets`, or fix the path".into(),
            });
        }
        let key = format!("mel_{n_mels}");
        let t = Tensor::read_npz_by_name(npz, &[key.as_str()])
            .map_err(|e| ModelError::model(what(), e))?
            .remove(0);
        let bins = w::N_FFT / 2 + 1;
        if t.dims() != [n_mels, bins] {
            return Err(ModelError::model(
                what(),
                format!("{key} has shape {:?}, expected [{n_mels}, {bins}]", t.dims()),
            ));
        }
        let data = t.to_dtype(DType::F32)?.flatten_all()?.to_vec1::<f32>()?;
        Ok(MelFilters { n_mels, data })
    }

    /// Mel bands.
    pub fn n_mels(&self) -> usize {
        self.n_mels
    }

    /// The log-mel spectrogram of `pcm` (16 kHz mono, ≤ 30 s) as
    /// `[n_mels, 3000]`, row-major.
    pub fn log_mel(&self, cfg: &Config, pcm: &[f32]) -> Vec<f32> {
        let n = pcm.len().min(w::N_SAMPLES);
        let mel = w::audio::pcm_to_mel(cfg, &pcm[..n], &self.data);
        let frames = mel.len() / self.n_mels;
        let mut out = Vec::with_capacity(self.n_mels * w::N_FRAMES);
        for row in mel.chunks(frames.max(1)).take(self.n_mels) {
            out.extend(row.iter().take(w::N_FRAMES));
            // Never taken for ≤ 30 s (pcm_to_mel pads by ≥ 15 s); keeps the
            // shape exact should that padding ever change.
            out.extend(std::iter::repeat_n(0.0, w::N_FRAMES.saturating_sub(row.len())));
        }
        out
    }
}
