//! CTranslate2 `model.bin` → safetensors with Hugging Face whisper names, so
//! `candle_transformers::models::whisper` can load a CTranslate2 whisper.
//!
//! The file (binary version 6, little-endian) is: `u32` version, a string
//! spec name, `u32` revision, `u32` variable count, then per variable a
//! string name, `u8` rank, `u32` dims, `u8` dtype, `u32` byte count and the
//! raw bytes; then `u32` alias count and (alias, target) string pairs.
//! Strings are `u16` length (NUL included) + bytes + NUL. Scalars (rank 0)
//! are attributes such as `encoder/num_heads`.
//!
//! Invariants of the conversion: every tensor candle's whisper asks for is
//! written exactly once; fused projections are split along the output
//! dimension (`q|k|v` for self-attention, `k|v` for cross-attention); key
//! projections carry no bias in whisper, so a non-zero key bias is an error
//! rather than silently dropped. Tensors keep their stored dtype (fp16 here);
//! the loader casts to f32.

use std::collections::HashMap;
use std::path::Path;

use candle_core::{DType, Device, Tensor};
use serde::Serialize;

use crate::error::ModelError;

/// One stored variable.
#[derive(Debug, Clone)]
pub struct Variable {
    /// CTranslate2 name, e.g. `decoder/layer_0/ffn/linear_0/weight`.
    pub name: String,
    /// Dimensions (empty for a scalar attribute).
    pub shape: Vec<usize>,
    /// Element type.
    pub dtype: DType,
    /// Raw little-endian bytes.
    pub bytes: Vec<u8>,
}

/// A parsed CTranslate2 model file.
#[derive(Debug, Clone)]
pub struct Ct2Model {
    /// The spec name (`WhisperSpec`).
    pub spec: String,
    /// Variables by name.
    pub vars: HashMap<String, Variable>,
    /// Alias → target variable name.
    pub aliases: HashMap<String, String>,
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.buf.len());
        let end = end.ok_or_else(|| format!("truncated at byte {} (wanted {n} more)", self.pos))?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16, String> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }
    fn u32(&mut self) -> Result<u32, String> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn string(&mut self) -> Result<String, String> {
        let n = usize::from(self.u16()?);
        let b = self.take(n)?;
        let b = b.strip_suffix(&[0]).unwrap_or(b);
        String::from_utf8(b.to_vec()).map_err(|e| format!("a name is not UTF-8: {e}"))
    }
}

fn dtype(id: u8) -> Result<DType, String> {
    // CTranslate2's DataType enum order.
    match id {
        0 => Ok(DType::F32),
        1 => Err("int8 weights (quantized models) are not supported".into()),
        2 => Ok(DType::I16),
        3 => Ok(DType::I32),
        4 => Ok(DType::F16),
        5 => Ok(DType::BF16),
        other => Err(format!("unknown dtype id {other}")),
    }
}

impl Ct2Model {
    /// Parse a `model.bin` held in memory.
    pub fn parse(buf: &[u8]) -> Result<Ct2Model, String> {
        let mut r = Reader { buf, pos: 0 };
        let version = r.u32()?;
        if version != 6 {
            return Err(format!("binary version {version}; only version 6 is supported"));
        }
        let spec = r.string()?;
        let _revision = r.u32()?;
        let n = r.u32()?;
        let mut vars = HashMap::new();
        for _ in 0..n {
            let name = r.string()?;
            let rank = r.u8()?;
            let shape = (0..rank)
                .map(|_| r.u32().map(|d| d as usize))
                .collect::<Result<Vec<_>, _>>()?;
            let id = r.u8()?;
            let len = r.u32()? as usize;
            let bytes = r.take(len)?.to_vec();
            // Scalar attributes may be int8/bool; keep them as raw bytes.
            let dtype = if shape.is_empty() && id == 1 {
                DType::U8
            } else {
                dtype(id).map_err(|e| format!("{name}: {e}"))?
            };
            let want = shape.iter().product::<usize>() * dtype.size_in_bytes();
            if want != len {
                return Err(format!("{name}: {len} bytes for shape {shape:?} of {dtype:?}"));
            }
            vars.insert(
                name.clone(),
                Variable {
                    name,
                    shape,
                    dtype,
                    bytes,
                },
            );
        }
        let mut aliases = HashMap::new();
        for _ in 0..r.u32()? {
            let alias = r.string()?;
            let target = r.string()?;
            aliases.insert(alias, target);
        }
        Ok(Ct2Model { spec, vars, aliases })
    }

    fn get(&self, name: &str) -> Result<&Variable, String> {
        let name = self.aliases.get(name).map_or(name, String::as_str);
        self.vars
            .get(name)
            .ok_or_else(|| format!("variable {name} is missing"))
    }

    fn tensor(&self, name: &str) -> Result<Tensor, String> {
        let v = self.get(name)?;
        Tensor::from_raw_buffer(&v.bytes, v.dtype, &v.shape, &Device::Cpu).map_err(|e| format!("{name}: {e}"))
    }

    fn scalar_i16(&self, name: &str) -> Result<usize, String> {
        let v = self.get(name)?;
        match (v.dtype, v.bytes.as_slice()) {
            (DType::I16, [a, b]) => Ok(i16::from_le_bytes([*a, *b]).max(0) as usize),
            _ => Err(format!("{name} is not an int16 scalar")),
        }
    }

    fn count_layers(&self, stack: &str) -> usize {
        (0..)
            .take_while(|i| {
                self.vars
                    .contains_key(&format!("{stack}/layer_{i}/ffn/linear_0/weight"))
            })
            .count()
    }
}

/// `config.json` in the shape `candle_transformers::models::whisper::Config` reads.
#[derive(Debug, Clone, Serialize)]
struct HfConfig {
    num_mel_bins: usize,
    max_source_positions: usize,
    d_model: usize,
    encoder_attention_heads: usize,
    encoder_layers: usize,
    vocab_size: usize,
    max_target_positions: usize,
    decoder_attention_heads: usize,
    decoder_layers: usize,
    suppress_tokens: Vec<u32>,
}

/// Split `t` into equal chunks along dim 0.
fn split(t: &Tensor, parts: usize, name: &str) -> Result<Vec<Tensor>, String> {
    let rows = t.dim(0).map_err(|e| e.to_string())?;
    if rows % parts != 0 {
        return Err(format!("{name}: {rows} rows do not split in {parts}"));
    }
    t.chunk(parts, 0).map_err(|e| format!("{name}: {e}"))
}

fn all_zero(t: &Tensor) -> Result<bool, String> {
    let m = t
        .to_dtype(DType::F32)
        .and_then(|t| t.abs())
        .and_then(|t| t.max_all())
        .and_then(|t| t.to_scalar::<f32>())
        .map_err(|e| e.to_string())?;
    Ok(m == 0.0)
}

/// Map a CTranslate2 `WhisperSpec` to candle's tensor names and config.
fn to_hf(m: &Ct2Model, suppress_tokens: Vec<u32>) -> Result<(HashMap<String, Tensor>, HfConfig), String> {
    if m.spec != "WhisperSpec" {
        return Err(format!("spec {} is not a whisper model", m.spec));
    }
    let mut out = HashMap::new();
    let mut put = |name: String, t: Tensor| {
        out.insert(name, t);
    };
    let norm = |src: &str, dst: &str, put: &mut dyn FnMut(String, Tensor)| -> Result<(), String> {
        put(format!("{dst}.weight"), m.tensor(&format!("{src}/gamma"))?);
        put(format!("{dst}.bias"), m.tensor(&format!("{src}/beta"))?);
        Ok(())
    };
    let linear = |src: &str, dst: &str, put: &mut dyn FnMut(String, Tensor)| -> Result<(), String> {
        put(format!("{dst}.weight"), m.tensor(&format!("{src}/weight"))?);
        put(format!("{dst}.bias"), m.tensor(&format!("{src}/bias"))?);
        Ok(())
    };
    // (k weight, k bias) → k_proj without bias, after checking the bias is zero.
    let key =
        |w: &Tensor, b: &Tensor, dst: &str, put: &mut dyn FnMut(String, Tensor)| -> Result<(), String> {
            if !all_zero(b)? {
                return Err(format!("{dst}: non-zero key bias, which whisper does not have"));
            }
            put(format!("{dst}.weight"), w.clone());
            Ok(())
        };
    let enc_layers = m.count_layers("encoder");
    let dec_layers = m.count_layers("decoder");
    for (stack, n) in [("encoder", enc_layers), ("decoder", dec_layers)] {
        let hf = format!("model.{stack}");
        for i in 0..n {
            let src = format!("{stack}/layer_{i}");
            let dst = format!("{hf}.layers.{i}");
            let sa = format!("{src}/self_attention");
            let qkv_w = split(&m.tensor(&format!("{sa}/linear_0/weight"))?, 3, &sa)?;
            let qkv_b = split(&m.tensor(&format!("{sa}/linear_0/bias"))?, 3, &sa)?;
            put(format!("{dst}.self_attn.q_proj.weight"), qkv_w[0].clone());
            put(format!("{dst}.self_attn.q_proj.bias"), qkv_b[0].clone());
            key(&qkv_w[1], &qkv_b[1], &format!("{dst}.self_attn.k_proj"), &mut put)?;
            put(format!("{dst}.self_attn.v_proj.weight"), qkv_w[2].clone());
            put(format!("{dst}.self_attn.v_proj.bias"), qkv_b[2].clone());
            linear(
                &format!("{sa}/linear_1"),
                &format!("{dst}.self_attn.out_proj"),
                &mut put,
            )?;
            norm(
                &format!("{sa}/layer_norm"),
                &format!("{dst}.self_attn_layer_norm"),
                &mut put,
            )?;
            if stack == "decoder" {
                let ca = format!("{src}/attention");
                linear(
                    &format!("{ca}/linear_0"),
                    &format!("{dst}.encoder_attn.q_proj"),
                    &mut put,
                )?;
                let kv_w = split(&m.tensor(&format!("{ca}/linear_1/weight"))?, 2, &ca)?;
                let kv_b = split(&m.tensor(&format!("{ca}/linear_1/bias"))?, 2, &ca)?;
                key(
                    &kv_w[0],
                    &kv_b[0],
                    &format!("{dst}.encoder_attn.k_proj"),
                    &mut put,
                )?;
                put(format!("{dst}.encoder_attn.v_proj.weight"), kv_w[1].clone());
                put(format!("{dst}.encoder_attn.v_proj.bias"), kv_b[1].clone());
                linear(
                    &format!("{ca}/linear_2"),
                    &format!("{dst}.encoder_attn.out_proj"),
                    &mut put,
                )?;
                norm(
                    &format!("{ca}/layer_norm"),
                    &format!("{dst}.encoder_attn_layer_norm"),
                    &mut put,
                )?;
            }
            linear(&format!("{src}/ffn/linear_0"), &format!("{dst}.fc1"), &mut put)?;
            linear(&format!("{src}/ffn/linear_1"), &format!("{dst}.fc2"), &mut put)?;
            norm(
                &format!("{src}/ffn/layer_norm"),
                &format!("{dst}.final_layer_norm"),
                &mut put,
            )?;
        }
        norm(
            &format!("{stack}/layer_norm"),
            &format!("{hf}.layer_norm"),
            &mut put,
        )?;
    }
    for c in ["conv1", "conv2"] {
        linear(&format!("encoder/{c}"), &format!("model.encoder.{c}"), &mut put)?;
    }
    // candle computes the encoder's sinusoidal positions itself.
    put(
        "model.decoder.embed_tokens.weight".into(),
        m.tensor("decoder/embeddings/weight")?,
    );
    put(
        "model.decoder.embed_positions.weight".into(),
        m.tensor("decoder/position_encodings/encodings")?,
    );
    let conv1 = &m.get("encoder/conv1/weight")?.shape;
    let emb = &m.get("decoder/embeddings/weight")?.shape;
    let (Some(&num_mel_bins), Some(&d_model), Some(&vocab_size)) = (conv1.get(1), conv1.first(), emb.first())
    else {
        return Err("unexpected conv1 or embedding shape".into());
    };
    let rows = |name: &str| -> Result<usize, String> {
        m.get(name)?
            .shape
            .first()
            .copied()
            .ok_or_else(|| format!("{name} is a scalar"))
    };
    let cfg = HfConfig {
        num_mel_bins,
        max_source_positions: rows("encoder/position_encodings/encodings")?,
        d_model,
        encoder_attention_heads: m.scalar_i16("encoder/num_heads")?,
        encoder_layers: enc_layers,
        vocab_size,
        max_target_positions: rows("decoder/position_encodings/encodings")?,
        decoder_attention_heads: m.scalar_i16("decoder/num_heads")?,
        decoder_layers: dec_layers,
        suppress_tokens,
    };
    Ok((out, cfg))
}

/// Convert the CTranslate2 whisper in `dir` (`ct2_model.bin`, `ct2_config.json`)
/// into `model.safetensors` and `config.json` beside it, unless both exist.
/// Files are written under temporary names and renamed, `config.json` last,
/// so a killed run leaves no half-written model behind.
pub fn convert_whisper_dir(dir: &Path) -> Result<(), ModelError> {
    let st = dir.join("model.safetensors");
    let cfg_path = dir.join("config.json");
    if st.is_file() && cfg_path.is_file() {
        return Ok(());
    }
    let bin = dir.join("ct2_model.bin");
    let what = bin.display().to_string();
    let buf = std::fs::read(&bin).map_err(ModelError::io(&bin))?;
    let ct2_cfg = dir.join("ct2_config.json");
    let suppress: Vec<u32> = match std::fs::read_to_string(&ct2_cfg) {
        Ok(t) => serde_json::from_str::<serde_json::Value>(&t)
            .map_err(|e| ModelError::model(ct2_cfg.display().to_string(), e))?["suppress_ids"]
            .as_array()
            .map(|a| a.iter().filter_map(|v| v.as_u64()).map(|v| v as u32).collect())
            .unwrap_or_default(),
        Err(_) => Vec::new(),
    };
    let model = Ct2Model::parse(&buf).map_err(|e| ModelError::model(&what, e))?;
    drop(buf);
    let (tensors, cfg) = to_hf(&model, suppress).map_err(|e| ModelError::model(&what, e))?;
    let pid = std::process::id();
    let tmp = dir.join(format!(".model.safetensors.{pid}"));
    candle_core::safetensors::save(&tensors, &tmp).map_err(|e| ModelError::model(&what, e))?;
    std::fs::rename(&tmp, &st).map_err(ModelError::io(&st))?;
    let tmp = dir.join(format!(".config.json.{pid}"));
    let json = serde_json::to_string_pretty(&cfg).map_err(|e| ModelError::model(&what, e))?;
    std::fs::write(&tmp, json).map_err(ModelError::io(&tmp))?;
    std::fs::rename(&tmp, &cfg_path).map_err(ModelError::io(&cfg_path))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn string(out: &mut Vec<u8>, s: &str) {
        out.extend(((s.len() + 1) as u16).to_le_bytes());
        out.extend(s.as_bytes());
        out.push(0);
    }

    fn var(out: &mut Vec<u8>, name: &str, shape: &[u32], id: u8, bytes: &[u8]) {
        string(out, name);
        out.push(shape.len() as u8);
        for d in shape {
            out.extend(d.to_le_bytes());
        }
        out.push(id);
        out.extend((bytes.len() as u32).to_le_bytes());
        out.extend(bytes);
    }

    #[test]
    fn parses_variables_scalars_and_aliases() {
        let mut b = Vec::new();
        b.extend(6u32.to_le_bytes());
        string(&mut b, "WhisperSpec");
        b.extend(3u32.to_le_bytes());
        b.extend(2u32.to_le_bytes());
        let w: Vec<u8> = [1.0f32, 2.0].iter().flat_map(|v| v.to_le_bytes()).collect();
        var(&mut b, "decoder/embeddings/weight", &[1, 2], 0, &w);
        var(&mut b, "encoder/num_heads", &[], 2, &6i16.to_le_bytes());
        b.extend(1u32.to_le_bytes());
        string(&mut b, "decoder/projection/weight");
        string(&mut b, "decoder/embeddings/weight");
        let m = Ct2Model::parse(&b).unwrap();
        assert_eq!(m.spec, "WhisperSpec");
        assert_eq!(m.scalar_i16("encoder/num_heads").unwrap(), 6);
        let t = m.tensor("decoder/projection/weight").unwrap();
        assert_eq!(t.to_vec2::<f32>().unwrap(), vec![vec![1.0, 2.0]]);
        // Cut the file anywhere: a typed error, never a panic.
        for cut in 0..b.len() {
            assert!(Ct2Model::parse(&b[..cut]).is_err(), "cut at {cut}");
        }
    }
}
