//! Sentence embeddings: all-MiniLM-L6-v2 (BERT) on candle, masked mean
//! pooling, L2-normalised, as sentence-transformers computes them.
//!
//! The encoder is `candle_transformers::models::bert` and the tokenizer is the
//! `tokenizers` crate reading the model folder's `tokenizer.json`: the field's
//! implementations, not our own. Invariants:
//! - texts longer than `max_tokens` word pieces are cut (sentence-transformers
//!   does the same at the model's `max_seq_length`, 256 for this model), so a
//!   page's embedding covers its first ~200 words;
//! - the `tokenizer.json` padding is switched off: a batch is padded here to
//!   its longest text and the padding is masked out of attention and pooling,
//!   so a text's embedding does not depend on the rest of its batch.

use std::path::Path;

use candle_core::{D, DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use rayorch::{Outcome, Stage, StageContext, StageResult};
use tokenizers::{Tokenizer, TruncationParams};

use crate::assets::Assets;
use crate::error::ModelError;

/// How the embedder runs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EmbedConfig {
    /// Word pieces per text, `[CLS]` and `[SEP]` included. `None`: the model
    /// folder's `sentence_bert_config.json` `max_seq_length`, else 256.
    pub max_tokens: Option<usize>,
    /// `None` for the CPU, `Some(i)` for CUDA device `i` (feature `candle-cuda`).
    pub cuda_device: Option<usize>,
}

/// A loaded sentence-embedding model.
pub struct SentenceEmbedder {
    model: BertModel,
    tokenizer: Tokenizer,
    device: Device,
    max_tokens: usize,
    dim: usize,
}

impl std::fmt::Debug for SentenceEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SentenceEmbedder")
            .field("dim", &self.dim)
            .field("max_tokens", &self.max_tokens)
            .finish()
    }
}

impl SentenceEmbedder {
    /// Load a sentence-transformers BERT folder (`config.json`,
    /// `tokenizer.json`, `model.safetensors`).
    pub fn load(dir: &Path, cfg: &EmbedConfig) -> Result<SentenceEmbedder, ModelError> {
        let read = |f: &str| std::fs::read_to_string(dir.join(f)).map_err(ModelError::io(dir.join(f)));
        let config: Config = serde_json::from_str(&read("config.json")?)
            .map_err(|e| ModelError::model(dir.join("config.json").display().to_string(), e))?;
        let max_tokens = cfg.max_tokens.unwrap_or_else(|| {
            read("sentence_bert_config.json")
                .ok()
                .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
                .and_then(|v| v["max_seq_length"].as_u64())
                .map_or(256, |n| n as usize)
        });
        let max_tokens = max_tokens.clamp(2, config.max_position_embeddings);
        let tokenizer = load_tokenizer(&dir.join("tokenizer.json"), max_tokens)?;
        let device = crate::candle::device(cfg.cuda_device)?;
        let weights = dir.join("model.safetensors");
        if !weights.is_file() {
            return Err(ModelError::MissingFile {
                what: "sentence-embedding weights",
                path: weights,
                hint: "run `cargo run -p rayorch-models --bin fetch-assets`".into(),
            });
        }
        let tensors = candle_core::safetensors::load(&weights, &device)
            .map_err(|e| ModelError::model(weights.display().to_string(), e))?;
        let vb = VarBuilder::from_tensors(tensors, DType::F32, &device);
        let model =
            BertModel::load(vb, &config).map_err(|e| ModelError::model(weights.display().to_string(), e))?;
        Ok(SentenceEmbedder {
            model,
            tokenizer,
            device,
            max_tokens,
            dim: config.hidden_size,
        })
    }

    /// Load the bundled all-MiniLM-L6-v2 (see [`crate::assets`]).
    pub fn from_assets(a: &Assets, cfg: &EmbedConfig) -> Result<SentenceEmbedder, ModelError> {
        SentenceEmbedder::load(&a.embed_dir, cfg)
    }

    /// Embedding width (384 for MiniLM-L6).
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// The tokenizer (`tokenizer.json`, padding off, truncation at `max_tokens`).
    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// The word-piece ids of `text`, `[CLS]` and `[SEP]` included, cut to
    /// `max_tokens`.
    pub fn token_ids(&self, text: &str) -> Result<Vec<u32>, ModelError> {
        let enc = self
            .tokenizer
            .encode(text, true)
            .map_err(|e| ModelError::model("tokenizer.json", e))?;
        Ok(enc.get_ids().to_vec())
    }

    /// One unit-length embedding per text, padded to the longest in the call.
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, ModelError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<Vec<u32>> = texts
            .iter()
            .map(|t| self.token_ids(t))
            .collect::<Result<_, _>>()?;
        let s = ids.iter().map(Vec::len).max().unwrap_or(2);
        let mut flat = Vec::with_capacity(ids.len() * s);
        let mut mask = Vec::with_capacity(ids.len() * s);
        for row in &ids {
            flat.extend(row.iter().copied().chain(std::iter::repeat(0)).take(s));
            mask.extend((0..s).map(|i| u32::from(i < row.len())));
        }
        let ids_t = Tensor::from_vec(flat, (ids.len(), s), &self.device)?;
        let mask_t = Tensor::from_vec(mask, (ids.len(), s), &self.device)?;
        let types = ids_t.zeros_like()?;
        let hidden = self.model.forward(&ids_t, &types, Some(&mask_t))?;
        let pooled = mean_pool_normalized(&hidden, &mask_t)?;
        Ok(pooled.to_vec2::<f32>()?)
    }
}

fn load_tokenizer(path: &Path, max_tokens: usize) -> Result<Tokenizer, ModelError> {
    let name = path.display().to_string();
    let mut t = Tokenizer::from_file(path).map_err(|e| ModelError::model(name.clone(), e))?;
    // The file pads every text to a fixed 128 and cuts there; we pad per
    // batch ourselves and cut at the sentence-transformers length.
    t.with_padding(None);
    t.with_truncation(Some(TruncationParams {
        max_length: max_tokens,
        ..TruncationParams::default()
    }))
    .map_err(|e| ModelError::model(name, e))?;
    Ok(t)
}

/// Masked mean over the sequence, then L2 normalisation: `[b, s, h]` → `[b, h]`.
fn mean_pool_normalized(hidden: &Tensor, mask: &Tensor) -> candle_core::Result<Tensor> {
    let m = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
    let sum = hidden.broadcast_mul(&m)?.sum(1)?;
    let count = m.sum(1)?.clamp(1e-9, f64::MAX)?;
    let mean = sum.broadcast_div(&count)?;
    let norm = mean
        .sqr()?
        .sum_keepdim(D::Minus1)?
        .sqrt()?
        .clamp(1e-12, f64::MAX)?;
    mean.broadcast_div(&norm)
}

/// The embedding stage: a text in, its embedding out.
#[derive(Debug)]
pub struct SentenceEmbed {
    embedder: SentenceEmbedder,
}

/// A text's length bucket, the embedding Call's shape key: about its word
/// pieces (4 bytes each), in powers of two from 16 to 512. A batch is
/// padded to its longest text, so texts of one bucket waste at most half
/// their positions on padding, and the cut at `max_tokens` puts every long
/// page in the last bucket. Depends on the text alone.
pub fn length_bucket(text: &str) -> u64 {
    let pieces = (text.len() / 4).clamp(16, 512);
    u64::from(pieces.next_power_of_two().trailing_zeros())
}

impl SentenceEmbed {
    /// Wrap a loaded embedder.
    pub fn new(embedder: SentenceEmbedder) -> SentenceEmbed {
        SentenceEmbed { embedder }
    }
}

impl Stage for SentenceEmbed {
    type In = String;
    type Out = Vec<f32>;

    fn run(&mut self, batch: Vec<String>, _cx: &StageContext) -> StageResult<Vec<f32>> {
        let _span = tracing::debug_span!("sentence_embed", texts = batch.len()).entered();
        let texts: Vec<&str> = batch.iter().map(String::as_str).collect();
        let out = self.embedder.embed(&texts)?;
        Ok(out.into_iter().map(Outcome::Ok).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn length_buckets_double_and_stop_at_512_pieces() {
        assert_eq!(length_bucket(""), 4);
        assert_eq!(length_bucket(&"a".repeat(64)), 4);
        assert_eq!(length_bucket(&"a".repeat(68)), 5);
        assert_eq!(length_bucket(&"a".repeat(2048)), 9);
        assert_eq!(length_bucket(&"a".repeat(100_000)), 9);
    }
}
