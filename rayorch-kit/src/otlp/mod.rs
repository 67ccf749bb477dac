//! Traces of a run over OTLP/HTTP (the exporter: feature `otlp`), for any pipeline.
//!
//! The run loop opens a `tracing` span per physical batch (target
//! `rayorch::batch`: Call, size, whether it mixes parents, retries, then
//! the replica and outcome) and one per root (target `rayorch::root`: key,
//! then outcome), linked: a batch span *follows from* the span of every root
//! it holds Grains of, so a trace viewer shows which documents a mixed batch
//! served. `Otlp` bridges those spans to OpenTelemetry and posts them as
//! OTLP protobuf over HTTP to a collector (Jaeger, Tempo, the OpenTelemetry
//! Collector: `http://HOST:4318`, the path `/v1/traces` appended unless the
//! URL names one). The messages are the ones `opentelemetry-proto` ships
//! generated, so no `protoc` is needed to build.
//!
//! Invariants:
//! - Only spans whose target starts with `rayorch` are exported: a stage's
//!   own libraries (ONNX Runtime, HTTP clients) add nothing to a run's trace.
//! - The run never waits on the collector: spans queue in memory (bounded by
//!   `OtlpConfig::queue`) and a background thread posts them in batches.
//!   A full queue drops spans rather than slow the run; a collector that is
//!   down costs the run nothing but those spans.
//! - Nothing is lost silently: `Otlp::shutdown` flushes and returns an
//!   `OtlpReport` — spans ended, exported, failed and dropped, and the last
//!   export error — so a job can say "the collector at … refused 3 exports".
//! - Dropping an `Otlp` without calling `shutdown` still flushes (best
//!   effort, bounded by the export timeout).
//!
//! A job's `--otlp URL` goes through [`job_traces`], compiled with or without
//! the feature: a binary built without it refuses the flag with the build
//! command that adds it, instead of running untraced.

#[cfg(feature = "otlp")]
mod exporter;

#[cfg(feature = "otlp")]
pub use exporter::{Otlp, OtlpConfig, OtlpReport};

/// Why the exporter could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum OtlpError {
    /// The collector URL is not an `http://` or `https://` URL.
    #[error(
        "--otlp {url:?}: give the collector's OTLP/HTTP URL, e.g. http://localhost:4318 (the path /v1/traces is added)"
    )]
    Url {
        /// The URL as given.
        url: String,
    },
    /// The OTLP exporter refused its configuration.
    #[error("OTLP exporter for {url}: {cause}")]
    Build {
        /// The traces endpoint.
        url: String,
        /// What the exporter said.
        cause: String,
    },
    /// `--otlp` was given to a binary built without the exporter.
    #[error(
        "--otlp {url}: this binary was built without traces; rebuild it with the `otlp` feature (for the examples: cargo run --release --features otlp --example ...)"
    )]
    NotBuilt {
        /// The URL as given.
        url: String,
    },
    /// A global `tracing` subscriber is set already (by the program itself).
    #[error(
        "a tracing subscriber is installed already: build with Otlp::new and run under its dispatch() instead of Otlp::install"
    )]
    SubscriberSet,
}

/// A job's traces, from [`job_traces`]: flushed and reported by
/// [`JobTraces::finish`].
pub struct JobTraces {
    #[cfg(feature = "otlp")]
    otlp: Otlp,
}

/// A job's `--otlp URL`: when given, post the run's spans there as `service`
/// (the exporter installed as the process's `tracing` subscriber). Without
/// the `otlp` feature a given URL is an [`OtlpError::NotBuilt`].
pub fn job_traces(endpoint: Option<&str>, service: &str) -> Result<Option<JobTraces>, OtlpError> {
    let Some(url) = endpoint else { return Ok(None) };
    #[cfg(feature = "otlp")]
    {
        let otlp = Otlp::install(OtlpConfig::new(url, service))?;
        Ok(Some(JobTraces { otlp }))
    }
    #[cfg(not(feature = "otlp"))]
    {
        let _ = service;
        Err(OtlpError::NotBuilt { url: url.to_string() })
    }
}

impl JobTraces {
    /// Post what is queued and say what became of the spans (one line for
    /// the job's log; it names the failures and drops, if any).
    pub fn finish(self) -> String {
        #[cfg(feature = "otlp")]
        {
            self.otlp.shutdown().to_string()
        }
        #[cfg(not(feature = "otlp"))]
        {
            String::new()
        }
    }
}
