//! Sentence embeddings: all-MiniLM-L6-v2 (BERT) on candle, masked mean
//! pooling, L2-normalised, as sentence-transformers computes them.
//!
//! Texts longer than `max_tokens` word pieces are cut (sentence-transformers
//! does the same at the model's `max_seq_length`, 256 for this model), so a
//! page's embedding covers its first ~200 words.

use std::path::Path;

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use rayorch::{Outcome, Stage, StageContext, StageResult};

use crate::assets::Assets;
use crate::bert::{BertModel, Config, mean_pool_normalized};
use crate::error::ModelError;
use crate::wordpiece::WordPiece;

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
    tokenizer: WordPiece,
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
        let tokenizer = WordPiece::load(&dir.join("tokenizer.json"))?;
        let max_tokens = cfg.max_tokens.unwrap_or_else(|| {
            read("sentence_bert_config.json")
                .ok()
                .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
                .and_then(|v| v["max_seq_length"].as_u64())
                .map_or(256, |n| n as usize)
        });
        let max_tokens = max_tokens.clamp(2, config.max_position_embeddings);
        let device = crate::bert::device(cfg.cuda_device)?;
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

    /// The tokenizer.
    pub fn tokenizer(&self) -> &WordPiece {
        &self.tokenizer
    }

    /// One unit-length embedding per text, padded to the longest in the call.
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, ModelError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<Vec<u32>> = texts
            .iter()
            .map(|t| self.tokenizer.encode(t, self.max_tokens))
            .collect();
        let s = ids.iter().map(Vec::len).max().unwrap_or(2);
        let mut flat = Vec::with_capacity(ids.len() * s);
        let mut mask = Vec::with_capacity(ids.len() * s);
        for row in &ids {
            flat.extend(row.iter().copied().chain(std::iter::repeat(0)).take(s));
            mask.extend((0..s).map(|i| u32::from(i < row.len())));
        }
        let ids_t = Tensor::from_vec(flat, (ids.len(), s), &self.device)?;
        let mask_t = Tensor::from_vec(mask, (ids.len(), s), &self.device)?;
        let hidden = self.model.forward(&ids_t, &mask_t)?;
        let pooled = mean_pool_normalized(&hidden, &mask_t)?;
        Ok(pooled.to_vec2::<f32>()?)
    }
}

/// The embedding stage: a text in, its embedding out.
#[derive(Debug)]
pub struct SentenceEmbed {
    embedder: SentenceEmbedder,
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
