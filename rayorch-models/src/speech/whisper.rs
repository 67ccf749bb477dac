//! whisper tiny.en on candle-transformers: batched encoder, greedy decoding.
//!
//! A batch of clips (16 kHz mono, each ≤ 30 s) becomes one `[B, 80, 3000]`
//! log-mel tensor and one encoder pass. Decoding is greedy and in lockstep:
//! every row starts from `<|startoftranscript|><|notimestamps|>` (the
//! English-only prompt: no language or task token), each step appends the
//! argmax of every row, and a row that has emitted `<|endoftext|>` keeps
//! receiving it, which cannot change the other rows (attention never mixes
//! rows). So a clip's text does not depend on the batch it rides in.
//!
//! Suppressed at every step: the model's `suppress_tokens` and every special
//! token except `<|endoftext|>` (no timestamps are asked for). At the first
//! step also the bare space and `<|endoftext|>`, as whisper does, so a clip
//! cannot come out empty just because the first guess was "nothing".
//!
//! Silence: as `whisper.transcribe` does, a clip whose no-speech probability
//! (the `<|nocaptions|>` token's, at the start-of-transcript position) is
//! over `no_speech_threshold` and whose mean token log-probability is below
//! −1 yields the empty text. Like whisper's, the rule keeps a confident
//! guess: on 2 s of digital silence tiny.en says "you" with a mean
//! log-probability above −1, and that text is returned. Feed it VAD spans.

use std::path::Path;

use candle_core::{D, DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::whisper::{self as w, Config, model::Whisper as Model};

use crate::error::ModelError;
use crate::speech::mel::MelFilters;
use crate::speech::vocab::Vocab;

/// How whisper runs.
#[derive(Clone, Debug, PartialEq)]
pub struct WhisperConfig {
    /// Most text tokens generated per clip (whisper's own limit is half the
    /// 448-token context: 224).
    pub max_tokens: usize,
    /// Above this no-speech probability (and with a mean log-probability
    /// below −1) a clip is silence: its text is empty. whisper's default is
    /// 0.6; `None` always keeps the decoded text.
    pub no_speech_threshold: Option<f32>,
    /// `None` for the CPU, `Some(i)` for CUDA device `i` (feature `candle-cuda`).
    pub cuda_device: Option<usize>,
}

impl Default for WhisperConfig {
    fn default() -> Self {
        WhisperConfig {
            max_tokens: 224,
            no_speech_threshold: Some(0.6),
            cuda_device: None,
        }
    }
}

/// One decoded clip.
#[derive(Clone, Debug, PartialEq)]
struct Decoded {
    tokens: Vec<u32>,
    /// Mean log-probability per generated token (`<|endoftext|>` counted).
    avg_logprob: f32,
    /// Probability of "no speech" at the start of the transcript.
    no_speech_prob: f32,
}

/// A loaded whisper model, owned by one replica (decoding mutates its
/// cross-attention cache).
pub struct Whisper {
    model: Model,
    config: Config,
    mel: MelFilters,
    vocab: Vocab,
    device: Device,
    /// 0 or −∞ per vocabulary entry, added to the logits at every step.
    suppress: Tensor,
    /// As `suppress`, plus the first-step-only suppressions.
    suppress_first: Tensor,
    prompt: [u32; 2],
    eot: u32,
    no_speech: Option<u32>,
    no_speech_threshold: Option<f32>,
    max_tokens: usize,
}

impl std::fmt::Debug for Whisper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Whisper")
            .field("d_model", &self.config.d_model)
            .field("layers", &self.config.encoder_layers)
            .field("max_tokens", &self.max_tokens)
            .finish()
    }
}

fn mask(vocab_size: usize, suppressed: impl Fn(u32) -> bool, device: &Device) -> Result<Tensor, ModelError> {
    let v: Vec<f32> = (0..vocab_size as u32)
        .map(|i| if suppressed(i) { f32::NEG_INFINITY } else { 0.0 })
        .collect();
    Ok(Tensor::from_vec(v, vocab_size, device)?)
}

impl Whisper {
    /// Load a whisper folder (`model.safetensors`, `config.json` with Hugging
    /// Face names, `vocabulary.txt`) and whisper's `mel_filters.npz`.
    pub fn load(model_dir: &Path, mel_filters: &Path, cfg: WhisperConfig) -> Result<Whisper, ModelError> {
        let file = |f: &str| {
            let p = model_dir.join(f);
            if p.is_file() {
                Ok(p)
            } else {
                Err(ModelError::MissingFile {
                    what: "whisper model file",
                    path: p,
                    hint: "run `cargo run -p rayorch-models --bin fetch-assets` (it converts the CTranslate2 model), or fix the folder".into(),
                })
            }
        };
        let cfg_path = file("config.json")?;
        let text = std::fs::read_to_string(&cfg_path).map_err(ModelError::io(&cfg_path))?;
        let config: Config =
            serde_json::from_str(&text).map_err(|e| ModelError::model(cfg_path.display().to_string(), e))?;
        let vocab = Vocab::load(&file("vocabulary.txt")?)?;
        let mel = MelFilters::load(mel_filters, config.num_mel_bins)?;
        let device = crate::candle::device(cfg.cuda_device)?;
        let weights = file("model.safetensors")?;
        let what = weights.display().to_string();
        let tensors =
            candle_core::safetensors::load(&weights, &device).map_err(|e| ModelError::model(&what, e))?;
        let vb = VarBuilder::from_tensors(tensors, w::DTYPE, &device);
        let model = Model::load(&vb, config.clone()).map_err(|e| ModelError::model(&what, e))?;

        let special = |t: &str| {
            vocab
                .id(t)
                .ok_or_else(|| ModelError::model(&what, format!("the vocabulary has no {t}")))
        };
        let eot = special(w::EOT_TOKEN)?;
        let sot = special(w::SOT_TOKEN)?;
        let no_ts = special(w::NO_TIMESTAMPS_TOKEN)?;
        if vocab.len() < config.vocab_size || sot <= eot {
            return Err(ModelError::model(
                &what,
                format!(
                    "vocabulary of {} tokens does not fit a model of {} (special tokens must follow the text tokens)",
                    vocab.len(),
                    config.vocab_size
                ),
            ));
        }
        let space = vocab.id("Ġ");
        let no_speech = w::NO_SPEECH_TOKENS.iter().find_map(|t| vocab.id(t));
        let listed = |i: u32| config.suppress_tokens.contains(&i) || i > eot;
        let suppress = mask(config.vocab_size, listed, &device)?;
        let suppress_first = mask(
            config.vocab_size,
            |i| listed(i) || i == eot || Some(i) == space,
            &device,
        )?;
        let max_tokens = cfg
            .max_tokens
            .clamp(1, config.max_target_positions.saturating_sub(2).max(1));
        Ok(Whisper {
            model,
            config,
            mel,
            vocab,
            device,
            suppress,
            suppress_first,
            prompt: [sot, no_ts],
            eot,
            no_speech,
            no_speech_threshold: cfg.no_speech_threshold,
            max_tokens,
        })
    }

    /// Load the bundled whisper tiny.en (see [`crate::assets::ensure_speech`]).
    pub fn from_assets(a: &crate::assets::SpeechAssets, cfg: WhisperConfig) -> Result<Whisper, ModelError> {
        Whisper::load(&a.whisper_dir, &a.mel_filters, cfg)
    }

    /// The model's hyper-parameters.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The text of each clip (16 kHz mono, ≤ 30 s), in order. All clips go
    /// through the encoder as one batch. A clip over 30 s is an error that
    /// names it; cut long audio first (e.g. at [`crate::speech::Vad`] spans).
    pub fn transcribe_batch(&mut self, clips: &[&[f32]]) -> Result<Vec<String>, ModelError> {
        if clips.is_empty() {
            return Ok(Vec::new());
        }
        let _span = tracing::debug_span!("whisper", clips = clips.len()).entered();
        if let Some((i, c)) = clips.iter().enumerate().find(|(_, c)| c.len() > w::N_SAMPLES) {
            return Err(ModelError::model(
                "whisper",
                format!(
                    "clip {i} is {:.1} s long; whisper reads at most {} s at a time: split it (at speech spans or fixed {} s windows)",
                    c.len() as f64 / w::SAMPLE_RATE as f64,
                    w::CHUNK_LENGTH,
                    w::CHUNK_LENGTH
                ),
            ));
        }
        let features = self.encode(clips)?;
        let decoded = self.decode(&features)?;
        Ok(decoded
            .iter()
            .map(|d| {
                let silent = self
                    .no_speech_threshold
                    .is_some_and(|t| d.no_speech_prob > t && d.avg_logprob < LOGPROB_THRESHOLD);
                if silent {
                    String::new()
                } else {
                    self.vocab.decode(&d.tokens)
                }
            })
            .collect())
    }

    /// Encoder states `[B, 1500, d_model]` of a batch of clips.
    pub fn encode(&mut self, clips: &[&[f32]]) -> Result<Tensor, ModelError> {
        let n_mels = self.mel.n_mels();
        let mut mels = Vec::with_capacity(clips.len() * n_mels * w::N_FRAMES);
        for clip in clips {
            let clean: Vec<f32> = clip
                .iter()
                .map(|&x| if x.is_finite() { x } else { 0.0 })
                .collect();
            mels.extend(self.mel.log_mel(&self.config, &clean));
        }
        let mel = Tensor::from_vec(mels, (clips.len(), n_mels, w::N_FRAMES), &self.device)?;
        Ok(self.model.encoder.forward(&mel, true)?)
    }

    /// Greedy lockstep decoding of every row of `features`: the generated
    /// token ids per row (prompt and `<|endoftext|>` excluded) and the
    /// scores the silence rule needs.
    fn decode(&mut self, features: &Tensor) -> Result<Vec<Decoded>, ModelError> {
        let b = features.dim(0)?;
        let mut tokens: Vec<Vec<u32>> = vec![self.prompt.to_vec(); b];
        let mut done = vec![false; b];
        let mut sum_logprob = vec![0f32; b];
        let mut no_speech_prob = vec![0f32; b];
        for step in 0..self.max_tokens {
            let len = tokens[0].len();
            let flat: Vec<u32> = tokens.iter().flatten().copied().collect();
            let input = Tensor::from_vec(flat, (b, len), &self.device)?;
            // The first step fills the cross-attention cache from `features`.
            let hidden = self.model.decoder.forward(&input, features, step == 0)?;
            if step == 0
                && let Some(ns) = self.no_speech
            {
                let at_sot = self
                    .model
                    .decoder
                    .final_linear(&hidden.narrow(1, 0, 1)?)?
                    .squeeze(1)?;
                let probs = candle_nn::ops::softmax_last_dim(&at_sot.to_dtype(DType::F32)?)?;
                no_speech_prob = probs.narrow(1, ns as usize, 1)?.flatten_all()?.to_vec1::<f32>()?;
            }
            let last = hidden.narrow(1, len - 1, 1)?;
            let logits = self
                .model
                .decoder
                .final_linear(&last)?
                .squeeze(1)?
                .to_dtype(DType::F32)?;
            let bias = if step == 0 {
                &self.suppress_first
            } else {
                &self.suppress
            };
            let logits = logits.broadcast_add(bias)?;
            let next = logits.argmax(D::Minus1)?;
            let logprobs = candle_nn::ops::log_softmax(&logits, D::Minus1)?
                .gather(&next.unsqueeze(1)?, 1)?
                .flatten_all()?
                .to_vec1::<f32>()?;
            let next = next.to_vec1::<u32>()?;
            for (i, row) in tokens.iter_mut().enumerate() {
                let tok = if done[i] { self.eot } else { next[i] };
                if !done[i] {
                    sum_logprob[i] += logprobs[i];
                }
                done[i] |= tok == self.eot;
                row.push(tok);
            }
            if done.iter().all(|&d| d) {
                break;
            }
        }
        Ok(tokens
            .into_iter()
            .zip(
                sum_logprob
                    .into_iter()
                    .zip(no_speech_prob.into_iter().chain(std::iter::repeat(0.0))),
            )
            .map(|(t, (lp, ns))| {
                let tokens: Vec<u32> = t[2..].iter().copied().take_while(|&x| x != self.eot).collect();
                Decoded {
                    avg_logprob: lp / (tokens.len() + 1) as f32,
                    tokens,
                    no_speech_prob: ns,
                }
            })
            .collect())
    }
}

/// whisper's `logprob_threshold`: a clip decoded this confidently is kept
/// whatever its no-speech probability.
const LOGPROB_THRESHOLD: f32 = -1.0;
