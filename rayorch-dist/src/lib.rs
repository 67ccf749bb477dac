//! Scale-out for rayorch: one lineage owner and N worker processes over NATS
//! JetStream.
//!
//! The owner runs the unchanged [`Engine`](rayorch_runtime::spi::Engine):
//! it admits roots, reserves batches per Call exactly as the local runner
//! does, and publishes each reserved batch to the Call's JetStream WorkQueue
//! stream. Workers are the same pipeline binary started in worker mode
//! ([`worker`]); they build the same plan, check its fingerprint against the
//! owner's, instantiate only the Calls they serve, pull batches (≤ B
//! Grains each; one running and at most one fetched ahead per slot), run
//! them and report to the owner's control subject.
//!
//! Invariants:
//! - Lineage, queues and the commit gate live only in the owner; the broker
//!   is a dispatch, lease and redelivery substrate, never a commit authority
//!   (JetStream accepts late acks).
//! - Generation fence: a report commits only while its batch is in flight in
//!   the engine *and* its JetStream delivery count is the newest the owner has
//!   seen claimed; every other report is refused and counted
//!   ([`OwnerStats`]). An engine retry (lease expiry) is a new batch with a new
//!   ticket, so a report of the old one is refused as unknown.
//! - Reports bound to the lease holder: a batch carries a random key; a
//!   claim proves the claimer pulled it and seals a secret of its own, and
//!   only the report that opens that seal commits (`binding` in the source;
//!   forgeries are counted in [`OwnerStats::forged_refused`]).
//! - Leases: JetStream redelivers a batch whose worker stopped acking
//!   (`ack_wait`; running workers send progress acks every `ack_wait`/3); the
//!   owner's own lease (default 3×`ack_wait`, refreshed by claims and
//!   heartbeats) catches what the broker cannot see (a batch acked but never
//!   reported, a lost report) and hands the batch back to the engine as a
//!   failed attempt, which the Call's recovery policy retries.
//! - Owner restart: an owner with a journal ([`Owner::journal`]) that finds
//!   an earlier run's unfinished queues drops them and resumes from the
//!   journal (roots it holds are skipped, outputs cut back to its last
//!   commit, the rest run again); tickets restart with every owner run, so
//!   claims and reports carry the run id and another run's are refused.
//!   A worker that pulls a batch of a newer run asks the owner and adopts it.
//!   Without a journal the restart is refused ([`DistError::OwnerRestart`]).
//! - Broker outages: publishes, pulls, reports and payload-store calls
//!   (each attempt bounded by 2×`ack_wait`: a read cut off by a lost
//!   connection never waits forever) are retried for `owner_wait` while the
//!   client reconnects (file storage keeps the queues
//!   across a nats-server restart); batches are published with a message id,
//!   so JetStream drops a copy whose first publish landed.
//! - Credit window: at most `credits_per_slot` × (live worker slots) batches
//!   of a Call are published and undecided; the rest wait in the engine's
//!   queues, so a GroupFailure still suppresses queued siblings before they
//!   are dispatched.

mod binding;
mod codec;
mod error;
#[cfg(feature = "fault-injection")]
mod fault;
pub mod messages;
mod owner;
mod payload_store;
mod security;
pub mod server;
mod worker;

use std::time::Duration;

pub use codec::Codecs;
pub use error::DistError;
pub use owner::{Owner, OwnerStats};
pub use payload_store::{GONE, JetStreamObjects, PayloadStore, SharedPayloads, TOO_LARGE, WireBytes};
pub use security::{Credentials, Security};
pub use worker::{WorkerSummary, parse_calls, worker};
#[cfg(feature = "fault-injection")]
pub use {
    fault::{Fault, FaultKind},
    worker::worker_with_fault,
};

/// Where the broker keeps the work queues.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Storage {
    /// In memory (fast; lost if nats-server restarts).
    Memory,
    /// On disk (survives a nats-server restart).
    File,
}

/// Settings shared by an owner and its workers.
#[derive(Clone, Debug)]
pub struct DistConfig {
    /// The NATS URL (`nats://host:4222`, `tls://host:4222`; the servers of
    /// a cluster separated by commas).
    pub url: String,
    /// TLS and credentials. The default refuses plain TCP: give the
    /// broker's CA ([`Security::tls`]) or allow it ([`Security::insecure`]).
    pub security: Security,
    /// The job name: streams, subjects and the payload bucket are named after
    /// it, so several jobs can share a broker. Letters, digits, `-`, `_`.
    pub job: String,
    /// JetStream's ack wait: a batch whose worker neither acks nor sends a
    /// progress ack for this long is redelivered.
    pub ack_wait: Duration,
    /// The owner's lease on a dispatched batch (refreshed by claims and
    /// worker heartbeats); past it the batch is a failed attempt. It runs
    /// from the publish until a worker claims the batch; a worker also
    /// claims a batch it fetched ahead while that waits behind a long one.
    /// A batch still in the stream after a lease (no slot free for that
    /// long: each slot holds its running batch and one fetched ahead, so
    /// with the default 2 credits per slot few wait there) is expired and
    /// retried.
    pub lease: Duration,
    /// Payloads up to this many encoded bytes travel inline.
    pub inline_max: usize,
    /// At most this many bytes of payloads travel inline in one message
    /// (a batch, a report); the rest go through the store. Keep it under the
    /// server's `max_payload` (1 MiB by default).
    pub inline_total: usize,
    /// Larger payloads are refused.
    pub payload_cap: usize,
    /// Batches per live worker slot that may be published and undecided.
    pub credits_per_slot: usize,
    /// Broker storage of the work queues.
    pub storage: Storage,
    /// Copies of each work queue and of the payload bucket on a JetStream
    /// cluster (1: a single server; 3: a three-node cluster survives the
    /// loss of any one node).
    pub replicas: usize,
    /// How long a worker waits for the owner to answer.
    pub owner_wait: Duration,
    /// The engine's admission window (roots in flight).
    pub window: usize,
    /// No root is admitted while this many child Entities are live
    /// (`Runner::window_children`; default as a local run's; `usize::MAX`:
    /// off).
    pub window_children: usize,
    /// Hold a Call's dispatch while a Call reading its outputs has this many
    /// full batches queued in the owner (`Runner::backpressure`; default as
    /// a local run's; `None`: off). Bounds the payloads parked in the owner
    /// between two Calls.
    pub backpressure: Option<usize>,
    /// Input roots (absolute folders, URL prefixes). An owner announces its
    /// own to every worker; a worker reads documents only under those, or
    /// under its own when it gives some (each inside one of the owner's):
    /// see [`Codecs::input_roots`]. Empty on the owner: workers may read
    /// nothing by path.
    pub input_roots: Vec<String>,
    /// Delete a previous run's leftover streams of this job instead of
    /// refusing to start ([`DistError::OwnerRestart`]).
    pub fresh: bool,
    /// Where payloads too large to travel inline go: `None`, the run's
    /// JetStream Object Store bucket on the broker; else a store outside
    /// it that the owner and every worker reach (the same on each, which
    /// the owner's hello answer checks).
    pub payloads: Option<SharedPayloads>,
}

impl DistConfig {
    /// Defaults for a job at a URL: TLS required (set [`DistConfig::security`]),
    /// ack wait 30 s, lease 90 s, inline ≤ 256 KiB
    /// per value and 512 KiB per message,
    /// cap 64 MiB, 2 credits per slot, file storage, and the memory bounds of a
    /// local run (window, children window, backpressure: `rayorch::DEFAULT_*`).
    pub fn new(url: impl Into<String>, job: impl Into<String>) -> DistConfig {
        DistConfig {
            url: url.into(),
            security: Security::default(),
            job: job.into(),
            ack_wait: Duration::from_secs(30),
            lease: Duration::from_secs(90),
            inline_max: 256 << 10,
            inline_total: 512 << 10,
            payload_cap: 64 << 20,
            credits_per_slot: 2,
            storage: Storage::File,
            replicas: 1,
            owner_wait: Duration::from_secs(60),
            window: rayorch_runtime::DEFAULT_WINDOW,
            window_children: rayorch_runtime::DEFAULT_WINDOW_CHILDREN,
            backpressure: Some(rayorch_runtime::DEFAULT_BACKPRESSURE),
            fresh: false,
            input_roots: Vec::new(),
            payloads: None,
        }
    }

    /// Set the ack wait and the owner lease to 3× it (tests use ~1 s).
    pub fn ack_wait(mut self, d: Duration) -> DistConfig {
        self.ack_wait = d;
        self.lease = d * 3;
        self
    }

    pub(crate) fn check(&self) -> Result<(), DistError> {
        let ok = !self.job.is_empty()
            && self
                .job
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if ok && !self.ack_wait.is_zero() && self.inline_max <= self.payload_cap {
            Ok(())
        } else {
            Err(DistError::Calls(format!(
                "invalid DistConfig for job `{}`: the job name must be letters, digits, `-` or `_`, ack_wait non-zero, inline_max ≤ payload_cap",
                self.job
            )))
        }
    }

    pub(crate) fn stream(&self, call: usize) -> String {
        format!("RAYORCH_{}_C{call}", self.job)
    }
    pub(crate) fn call_subject(&self, call: usize) -> String {
        format!("rayorch.{}.call.{call}", self.job)
    }
    pub(crate) fn ctl_subject(&self) -> String {
        format!("rayorch.{}.ctl", self.job)
    }
    pub(crate) fn hello_subject(&self) -> String {
        format!("rayorch.{}.hello", self.job)
    }
    pub(crate) fn done_subject(&self) -> String {
        format!("rayorch.{}.done", self.job)
    }
    pub(crate) fn bucket(&self) -> String {
        format!("rayorch_{}", self.job)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_names_are_checked() {
        assert!(DistConfig::new("u", "job-1_a").check().is_ok());
        assert!(DistConfig::new("u", "a.b").check().is_err());
        assert!(DistConfig::new("u", "").check().is_err());
    }
}
