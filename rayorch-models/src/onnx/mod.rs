//! ONNX Runtime plumbing: one process-wide environment, one session per replica.
//!
//! `ort` is built with `load-dynamic`: nothing links against ONNX Runtime at
//! build time, and the shared library is opened on first use. `ort` panics if
//! it cannot find the library, so [`OnnxSession::load`] checks the path first
//! and returns a [`ModelError`] that says how to get it.
//!
//! `Session::run` takes `&mut self`, so a session cannot be shared between
//! replicas; each replica loads its own (cheap: a few MB, ~0.1 s).

pub mod proto;

use std::path::Path;
use std::sync::OnceLock;

use ndarray::{ArrayD, ArrayViewD};
use ort::environment::Environment;
use ort::session::Session;

use crate::error::ModelError;

/// Where a session runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Device {
    /// The CPU execution provider (always available).
    #[default]
    Cpu,
    /// The CUDA execution provider on this device ordinal. Needs the crate's
    /// `cuda` feature and an `onnxruntime-gpu` library in `ORT_DYLIB_PATH`.
    Cuda(i32),
}

/// How a session is built.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OnnxConfig {
    /// Threads ONNX Runtime uses inside one operator (per session).
    pub intra_threads: usize,
    /// Where to run.
    pub device: Device,
}

impl Default for OnnxConfig {
    fn default() -> Self {
        OnnxConfig {
            intra_threads: 1,
            device: Device::Cpu,
        }
    }
}

static ENV: OnceLock<Result<Environment, String>> = OnceLock::new();

/// The process-wide ONNX Runtime environment, loading the library at
/// `lib` on the first call (ONNX Runtime allows one environment per
/// process; later calls reuse it whatever path they pass).
pub fn environment(lib: &Path) -> Result<&'static Environment, ModelError> {
    let env = ENV.get_or_init(|| {
        if !lib.is_file() {
            return Err(format!(
                "the ONNX Runtime library {} does not exist; run `cargo run -p rayorch-models --bin fetch-assets` or set ORT_DYLIB_PATH to a libonnxruntime.so (1.24 or newer)",
                lib.display()
            ));
        }
        let builder = ort::init_from(lib).map_err(|e| format!("loading {}: {e}", lib.display()))?;
        builder
            .with_name("rayorch")
            .with_telemetry(false)
            .build()
            .map_err(|e| format!("creating the environment: {e}"))
    });
    env.as_ref().map_err(|e| ModelError::Onnx(e.clone()))
}

/// One loaded ONNX model, owned by one replica.
pub struct OnnxSession {
    session: Session,
    name: String,
}

impl std::fmt::Debug for OnnxSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OnnxSession").field("model", &self.name).finish()
    }
}

impl OnnxSession {
    /// Load `model` with the runtime library `lib`.
    pub fn load(model: &Path, lib: &Path, cfg: &OnnxConfig) -> Result<OnnxSession, ModelError> {
        let env = environment(lib)?;
        let name = model.file_name().map_or_else(
            || model.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        if !model.is_file() {
            return Err(ModelError::MissingFile {
                what: "ONNX model",
                path: model.to_path_buf(),
                hint: "run `cargo run -p rayorch-models --bin fetch-assets`, or fix the path".into(),
            });
        }
        let onnx = |e: ort::Error<ort::session::builder::SessionBuilder>| {
            ModelError::Onnx(format!("building a session for {name}: {e}"))
        };
        let mut builder = Session::builder(env)
            .map_err(|e| ModelError::Onnx(format!("session builder: {e}")))?
            .with_intra_threads(cfg.intra_threads.max(1))
            .map_err(onnx)?
            .with_inter_threads(1)
            .map_err(onnx)?
            // Spinning threads burn the cores other replicas need.
            .with_intra_op_spinning(false)
            .map_err(onnx)?
            .with_log_level(ort::logging::LogLevel::Error)
            .map_err(onnx)?
            // No memory patterns: ORT keeps a memory plan per distinct set
            // of input shapes and takes each run's tensors from the arena as
            // one block of that plan's size, and our shapes vary (page
            // sizes, line widths, batch sizes). Off, the OCR job peaks 16%
            // lower with the same CPU (BENCHMARKS.md, "The job's allocator
            // and ORT's memory patterns"); the arena still reuses memory.
            .with_memory_pattern(false)
            .map_err(onnx)?;
        match cfg.device {
            Device::Cpu => {}
            #[cfg(feature = "cuda")]
            Device::Cuda(id) => {
                builder = builder
                    .with_execution_providers([ort::ep::CUDA::default()
                        .with_device_id(id)
                        .build()
                        .error_on_failure()])
                    .map_err(onnx)?;
            }
            #[cfg(not(feature = "cuda"))]
            Device::Cuda(_) => {
                return Err(ModelError::Onnx(
                    "this build has no CUDA support: rebuild rayorch-models with `--features cuda`".into(),
                ));
            }
        }
        let session = builder
            .commit_from_file(model)
            .map_err(|e| ModelError::Onnx(format!("loading {}: {e}", model.display())))?;
        Ok(OnnxSession { session, name })
    }

    /// The model's file name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The ONNX Runtime session, for models with several named inputs or
    /// outputs (silero VAD's recurrent state).
    pub fn session_mut(&mut self) -> &mut Session {
        &mut self.session
    }

    /// A custom metadata value of the model (e.g. the label list some
    /// Paddle exports keep under `character`).
    pub fn metadata(&self, key: &str) -> Option<String> {
        self.session.metadata().ok()?.custom(key)
    }

    /// Run a single-input f32 model and return every output with its name,
    /// in the model's output order.
    pub fn run_all(&mut self, input: ArrayViewD<'_, f32>) -> Result<Vec<(String, ArrayD<f32>)>, ModelError> {
        let name = &self.name;
        let fail = |e: ort::Error| ModelError::Onnx(format!("running {name}: {e}"));
        let tensor = ort::value::TensorRef::from_array_view(input).map_err(fail)?;
        let outputs = self.session.run(ort::inputs![tensor]).map_err(fail)?;
        let mut out = Vec::with_capacity(outputs.len());
        for (n, v) in outputs.iter() {
            out.push((
                n.to_string(),
                v.try_extract_array::<f32>().map_err(fail)?.to_owned(),
            ));
        }
        Ok(out)
    }

    /// Run a single-input, single-output f32 model.
    pub fn run(&mut self, input: ArrayViewD<'_, f32>) -> Result<ArrayD<f32>, ModelError> {
        self.run_with(input, |view| view.to_owned())
    }

    /// Run a single-input, single-output f32 model and hand `read` a view
    /// of the output where ONNX Runtime left it: nothing is copied, so a
    /// large output (recognition's N × T × classes) is read once, in place.
    pub fn run_with<R>(
        &mut self,
        input: ArrayViewD<'_, f32>,
        read: impl FnOnce(ArrayViewD<'_, f32>) -> R,
    ) -> Result<R, ModelError> {
        let name = &self.name;
        let fail = |e: ort::Error| ModelError::Onnx(format!("running {name}: {e}"));
        let tensor = ort::value::TensorRef::from_array_view(input).map_err(fail)?;
        let outputs = self.session.run(ort::inputs![tensor]).map_err(fail)?;
        let view = outputs[0].try_extract_array::<f32>().map_err(fail)?;
        Ok(read(view))
    }

    /// Run on an input of `shape` that `fill` writes into `buf` (zeroed
    /// first; `buf` keeps its memory between calls, so a batch writes into
    /// pages already mapped instead of faulting in a fresh tensor), and
    /// `read` the output in place ([`OnnxSession::run_with`]). An `Err`
    /// from `read` (an output of the wrong shape) names this model.
    pub fn run_filled<R>(
        &mut self,
        buf: &mut Vec<f32>,
        shape: &[usize],
        fill: impl FnOnce(&mut [f32]),
        read: impl FnOnce(ArrayViewD<'_, f32>) -> Result<R, String>,
    ) -> Result<R, ModelError> {
        buf.clear();
        buf.resize(shape.iter().product(), 0.0);
        fill(buf);
        let input =
            ArrayViewD::from_shape(shape, buf).map_err(|e| ModelError::model(self.name.as_str(), e))?;
        self.run_with(input, read)?
            .map_err(|e| ModelError::model(self.name.as_str(), e))
    }
}
