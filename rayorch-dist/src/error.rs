//! The scale-out backend's errors: each says what failed, where, and what to do.

use rayorch_runtime::RunError;

/// What went wrong in an owner or a worker.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DistError {
    /// The broker could not be reached or refused an operation.
    #[error(
        "NATS {what} failed: {cause}; check that nats-server runs with JetStream (`-js`) at the URL you gave"
    )]
    Nats {
        /// The operation (connect, create stream, publish, ...).
        what: String,
        /// The client's error text.
        cause: String,
    },
    /// The worker built a different plan than the owner runs.
    #[error(
        "plan fingerprint mismatch: this worker built plan {worker}, the owner of job `{job}` runs {owner}; start the worker from the same pipeline (same binary or same source) as the owner"
    )]
    FingerprintMismatch {
        /// The job name.
        job: String,
        /// The worker's fingerprint.
        worker: String,
        /// The owner's fingerprint.
        owner: String,
    },
    /// The worker's payload store is not the owner's.
    #[error(
        "the owner of job `{job}` keeps large payloads in {owner} and this worker in {worker}; give every process of the run the same store (`--payload-store`, or none for the broker's own)"
    )]
    PayloadStoreMismatch {
        /// The job name.
        job: String,
        /// The owner's store (its URL, or the broker's bucket).
        owner: String,
        /// The worker's.
        worker: String,
    },
    /// No owner answered the worker's hello in time.
    #[error(
        "no owner of job `{job}` answered at {url} within {waited_s:.0} s; start the owner (`--role owner`) or check the job name and URL"
    )]
    NoOwner {
        /// The job name.
        job: String,
        /// The NATS URL.
        url: String,
        /// How long the worker waited.
        waited_s: f64,
    },
    /// `--calls` names a Call the plan does not have, or is malformed.
    #[error("{0}")]
    Calls(String),
    /// A value of a type with no registered codec must cross the network.
    #[error(
        "a value of an unregistered type reached Call `{call}` ({side}); register a codec for every type a remote Call takes or returns (`Codecs::json::<T>()`, `Codecs::bytes()`, `Codecs::custom`)"
    )]
    NoCodec {
        /// The Call.
        call: String,
        /// Inputs or outputs.
        side: &'static str,
    },
    /// A value is larger than the payload cap.
    #[error(
        "a payload of {bytes} bytes for Call `{call}` exceeds the cap of {cap} bytes; raise `DistConfig::payload_cap` or pass a smaller value (a path or handle)"
    )]
    PayloadTooLarge {
        /// The Call.
        call: String,
        /// The encoded size.
        bytes: usize,
        /// The cap.
        cap: usize,
    },
    /// A message or stored object could not be decoded.
    #[error("malformed {what}: {cause}; are the owner and the worker the same build?")]
    Wire {
        /// What was read.
        what: &'static str,
        /// Why it failed.
        cause: String,
    },
    /// The payload store failed.
    #[error("payload store: {0}")]
    Store(String),
    /// An owner started over a previous run's unfinished queues without a
    /// journal to resume from.
    #[error(
        "job `{job}` already has an owner state on the broker (stream {stream} holds {pending} unfinished batch(es)) and this owner has no journal to resume it from: restart the owner with the journal of the interrupted run (`Owner::journal`; `doc_ocr --resume`), or start the job over (`DistConfig::fresh = true` purges it)"
    )]
    OwnerRestart {
        /// The job name.
        job: String,
        /// The stream found.
        stream: String,
        /// Messages still in it.
        pending: u64,
    },
    /// The engine ended the run.
    #[error(transparent)]
    Run(#[from] RunError),
    /// TLS, credentials or the randomness that binds reports to their
    /// claimer: what is missing or wrong, and what to give.
    #[error("{0}")]
    Security(String),
    /// Starting or fetching nats-server failed.
    #[error("nats-server: {0}")]
    Server(String),
}

impl DistError {
    pub(crate) fn nats_any<E: std::fmt::Display>(what: impl Into<String>) -> impl FnOnce(E) -> DistError {
        let what = what.into();
        move |e| DistError::Nats {
            what,
            cause: e.to_string(),
        }
    }
}
