//! [`Plan::fingerprint`]: a stable digest of a plan's structure.
//!
//! Invariants:
//! - Two builds of the same pipeline code give the same fingerprint, in any
//!   process, on any machine and any Rust version: the digest is SHA-256 over
//!   an explicit, versioned byte encoding (no `Hash` impls, no `TypeId`, no
//!   pointer or build ids).
//! - It covers what decides a root's outcome: the Domains (names, parents),
//!   the source type, every node in build order with its kind, Domain and
//!   input/output Ports (optional edges marked), each Call's name, stage type
//!   and execution, and the plan's outputs.
//! - It leaves out every tuning knob ([`CallConfig`](crate::CallConfig):
//!   batch size, replicas, reservation, recovery, timeout, concurrency, the
//!   per-record policy; the Runner's window and seed), so a retuned job
//!   still resumes its journal.

use sha2::{Digest, Sha256};

use crate::plan::Plan;
use crate::plan::build::NodeKind;
use crate::spi::Execution;

/// Bumped whenever the encoding below changes meaning.
const ENCODING: &[u8] = b"rayorch-plan-fingerprint/1";

/// Length-prefixed fields, so that no two structures encode alike.
struct Enc(Sha256);

impl Enc {
    fn u64(&mut self, x: u64) {
        self.0.update(x.to_le_bytes());
    }
    fn str(&mut self, s: &str) {
        self.u64(s.len() as u64);
        self.0.update(s.as_bytes());
    }
    fn list(&mut self, xs: impl ExactSizeIterator<Item = u64>) {
        self.u64(xs.len() as u64);
        for x in xs {
            self.u64(x);
        }
    }
}

impl Plan {
    /// A stable hex digest (64 characters) of the plan's structure; tuning
    /// knobs are left out. A durable run's journal stores it and refuses to
    /// resume under another plan.
    ///
    /// ```
    /// use rayorch::prelude::*;
    ///
    /// #[derive(Domain)]
    /// struct Job;
    ///
    /// struct Double {
    ///     double: FnCall<u64, u64>,
    /// }
    ///
    /// #[pipeline]
    /// impl Double {
    ///     fn forward(&self, xs: Port<Job, u64>) -> Port<Job, u64> {
    ///         self.double(xs)
    ///     }
    /// }
    ///
    /// let plan = |batch: usize| {
    ///     let p = Double { double: Call::map("double", |x: u64| 2 * x).batch_size(batch) };
    ///     p.build_plan().unwrap().0
    /// };
    /// assert_eq!(plan(8).fingerprint(), plan(64).fingerprint());
    /// assert_eq!(plan(8).fingerprint().len(), 64);
    /// ```
    pub fn fingerprint(&self) -> String {
        let p = &self.inner;
        let mut e = Enc(Sha256::new());
        e.0.update(ENCODING);
        e.str(p.source_type.1);
        e.u64(p.domains.len() as u64);
        for d in &p.domains {
            e.str(d.info.name);
            e.u64(d.parent.map_or(0, |x| x as u64 + 1));
        }
        e.u64(p.nodes.len() as u64);
        for n in &p.nodes {
            e.u64(n.domain as u64);
            e.list(n.outputs.iter().map(|&x| u64::from(x)));
            match &n.kind {
                NodeKind::Source { type_name, split, .. } => {
                    e.str("source");
                    e.str(type_name);
                    e.u64(u64::from(split.is_some()));
                }
                NodeKind::Call {
                    name,
                    runtime,
                    inputs,
                    ..
                } => {
                    e.str("call");
                    e.str(name);
                    e.str(runtime.stage_name());
                    e.str(match runtime.execution() {
                        Execution::Blocking => "blocking",
                        Execution::Async => "async",
                    });
                    e.list(
                        inputs
                            .iter()
                            .map(|i| u64::from(i.port) << 1 | u64::from(i.optional)),
                    );
                }
                NodeKind::Expand { inputs, len, .. } => {
                    e.str("expand");
                    e.list(inputs.iter().map(|&x| u64::from(x)));
                    e.u64(len.len() as u64);
                }
                NodeKind::Reduce {
                    inputs,
                    members,
                    keep_failed,
                    ..
                } => {
                    e.str("reduce");
                    e.list(inputs.iter().map(|&x| u64::from(x)));
                    e.u64(members.map_or(0, |m| u64::from(m) + 1));
                    e.u64(u64::from(keep_failed.is_some()));
                }
                NodeKind::Filter { value, mask, .. } => {
                    e.str("filter");
                    e.list([u64::from(*value), u64::from(*mask)].into_iter());
                }
                NodeKind::Broadcast { value, like } => {
                    e.str("broadcast");
                    e.list([u64::from(*value), u64::from(*like)].into_iter());
                }
            }
        }
        e.list(p.outputs.iter().map(|&x| u64::from(x)));
        e.0.finalize().iter().map(|b| format!("{b:02x}")).collect()
    }
}
