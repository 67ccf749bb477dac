//! A BERT encoder in candle (what all-MiniLM-L6-v2 is), written against the
//! Hugging Face `BertModel` weight names.
//!
//! Post-LayerNorm transformer: embeddings (word + position + token type,
//! LayerNorm) then `num_hidden_layers` blocks of multi-head self-attention
//! and a GELU feed-forward, each followed by a residual add and LayerNorm.
//! Padding positions are masked out of attention. The pooler head is not
//! loaded: sentence embeddings mean-pool the last hidden states instead.

use candle_core::{D, DType, Device, Module, Result, Tensor};
use candle_nn::{Embedding, LayerNorm, Linear, VarBuilder};
use serde::Deserialize;

/// The fields of a Hugging Face BERT `config.json` this model uses.
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct Config {
    /// Vocabulary size.
    pub vocab_size: usize,
    /// Width of every hidden state.
    pub hidden_size: usize,
    /// Transformer blocks.
    pub num_hidden_layers: usize,
    /// Attention heads per block.
    pub num_attention_heads: usize,
    /// Width of the feed-forward layer.
    pub intermediate_size: usize,
    /// Activation of the feed-forward layer (`gelu` is the exact erf GELU).
    pub hidden_act: String,
    /// Longest sequence the position table covers.
    pub max_position_embeddings: usize,
    /// Token type (segment) vocabulary.
    pub type_vocab_size: usize,
    /// LayerNorm epsilon.
    pub layer_norm_eps: f64,
}

struct Embeddings {
    word: Embedding,
    position: Embedding,
    token_type: Embedding,
    norm: LayerNorm,
}

impl Embeddings {
    fn load(vb: VarBuilder, c: &Config) -> Result<Embeddings> {
        Ok(Embeddings {
            word: candle_nn::embedding(c.vocab_size, c.hidden_size, vb.pp("word_embeddings"))?,
            position: candle_nn::embedding(
                c.max_position_embeddings,
                c.hidden_size,
                vb.pp("position_embeddings"),
            )?,
            token_type: candle_nn::embedding(
                c.type_vocab_size,
                c.hidden_size,
                vb.pp("token_type_embeddings"),
            )?,
            norm: candle_nn::layer_norm(c.hidden_size, c.layer_norm_eps, vb.pp("LayerNorm"))?,
        })
    }

    fn forward(&self, ids: &Tensor) -> Result<Tensor> {
        let (_, s) = ids.dims2()?;
        let positions = Tensor::arange(0u32, s as u32, ids.device())?;
        let types = ids.zeros_like()?;
        let x = self
            .word
            .forward(ids)?
            .broadcast_add(&self.position.forward(&positions)?)?
            .add(&self.token_type.forward(&types)?)?;
        self.norm.forward(&x)
    }
}

struct Block {
    query: Linear,
    key: Linear,
    value: Linear,
    attn_out: Linear,
    attn_norm: LayerNorm,
    up: Linear,
    down: Linear,
    out_norm: LayerNorm,
    heads: usize,
    head_dim: usize,
}

impl Block {
    fn load(vb: VarBuilder, c: &Config) -> Result<Block> {
        let h = c.hidden_size;
        let att = vb.pp("attention");
        Ok(Block {
            query: candle_nn::linear(h, h, att.pp("self").pp("query"))?,
            key: candle_nn::linear(h, h, att.pp("self").pp("key"))?,
            value: candle_nn::linear(h, h, att.pp("self").pp("value"))?,
            attn_out: candle_nn::linear(h, h, att.pp("output").pp("dense"))?,
            attn_norm: candle_nn::layer_norm(h, c.layer_norm_eps, att.pp("output").pp("LayerNorm"))?,
            up: candle_nn::linear(h, c.intermediate_size, vb.pp("intermediate").pp("dense"))?,
            down: candle_nn::linear(c.intermediate_size, h, vb.pp("output").pp("dense"))?,
            out_norm: candle_nn::layer_norm(h, c.layer_norm_eps, vb.pp("output").pp("LayerNorm"))?,
            heads: c.num_attention_heads,
            head_dim: h / c.num_attention_heads,
        })
    }

    /// `x`: `[b, s, h]`; `bias`: `[b, 1, 1, s]`, 0 for tokens, very negative for padding.
    fn forward(&self, x: &Tensor, bias: &Tensor) -> Result<Tensor> {
        let (b, s, h) = x.dims3()?;
        let split = |t: Tensor| -> Result<Tensor> {
            t.reshape((b, s, self.heads, self.head_dim))?
                .transpose(1, 2)?
                .contiguous()
        };
        let q = split(self.query.forward(x)?)?;
        let k = split(self.key.forward(x)?)?;
        let v = split(self.value.forward(x)?)?;
        let scores = (q.matmul(&k.t()?)? / (self.head_dim as f64).sqrt())?.broadcast_add(bias)?;
        let probs = candle_nn::ops::softmax_last_dim(&scores)?;
        let ctx = probs.matmul(&v)?.transpose(1, 2)?.reshape((b, s, h))?;
        let x = self.attn_norm.forward(&(self.attn_out.forward(&ctx)? + x)?)?;
        let ff = self.down.forward(&self.up.forward(&x)?.gelu_erf()?)?;
        self.out_norm.forward(&(ff + x)?)
    }
}

/// A BERT encoder.
pub struct BertModel {
    embeddings: Embeddings,
    blocks: Vec<Block>,
}

impl BertModel {
    /// Load the weights under `vb` (names as in Hugging Face's `BertModel`,
    /// without a `bert.` prefix).
    pub fn load(vb: VarBuilder, c: &Config) -> Result<BertModel> {
        if c.hidden_act != "gelu" {
            candle_core::bail!(
                "unsupported hidden_act {:?}: this BERT implements exact `gelu`",
                c.hidden_act
            );
        }
        if c.num_attention_heads == 0 || !c.hidden_size.is_multiple_of(c.num_attention_heads) {
            candle_core::bail!(
                "hidden_size {} is not divisible into {} heads",
                c.hidden_size,
                c.num_attention_heads
            );
        }
        Ok(BertModel {
            embeddings: Embeddings::load(vb.pp("embeddings"), c)?,
            blocks: (0..c.num_hidden_layers)
                .map(|i| Block::load(vb.pp("encoder").pp("layer").pp(i), c))
                .collect::<Result<_>>()?,
        })
    }

    /// Last hidden states `[b, s, h]` for `ids` `[b, s]` (u32) with
    /// `mask` `[b, s]` (1 for tokens, 0 for padding).
    pub fn forward(&self, ids: &Tensor, mask: &Tensor) -> Result<Tensor> {
        let (b, s) = ids.dims2()?;
        // 0 where attended, a large negative where padded (finite: no NaN
        // when a whole row is padding).
        let bias = ((mask.to_dtype(DType::F32)? - 1.0)? * 1e9)?.reshape((b, 1, 1, s))?;
        let mut x = self.embeddings.forward(ids)?;
        for block in &self.blocks {
            x = block.forward(&x, &bias)?;
        }
        Ok(x)
    }
}

/// Masked mean over the sequence, then L2 normalisation: `[b, s, h]` → `[b, h]`.
pub fn mean_pool_normalized(hidden: &Tensor, mask: &Tensor) -> Result<Tensor> {
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

/// The candle device for `ordinal` (`None` = CPU). CUDA needs the crate's
/// `candle-cuda` feature.
pub fn device(ordinal: Option<usize>) -> Result<Device> {
    match ordinal {
        None => Ok(Device::Cpu),
        Some(i) => Device::new_cuda(i),
    }
}
