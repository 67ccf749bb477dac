//! `Plan::fingerprint`: a digest of what a plan *means*, so that two processes
//! (a lineage owner and its remote workers) can check they built the same graph.
//!
//! Covered: Domains (names, parents), every node in build order with its kind
//! and ports (Calls with their names, stage types and input optionality;
//! expand, reduce, filter and broadcast wiring), the source type and the
//! declared outputs. Not covered: batch sizes, replicas, recovery, timeouts,
//! reservation: those are tuning, and an owner and a worker may differ there.
//!
//! The hash is FNV-1a over 128 bits, written out here (not `std`'s hasher,
//! whose output may change between Rust releases: the owner and the workers
//! can be separate builds of the same source).

use crate::plan::Plan;
use crate::plan::build::NodeKind;

/// FNV-1a, 128-bit.
struct Fnv(u128);

impl Fnv {
    const PRIME: u128 = 0x0000000001000000000000000000013B;

    fn new() -> Fnv {
        Fnv(0x6c62272e07bb014262b821756295c58d)
    }

    fn bytes(&mut self, b: &[u8]) {
        for &x in b {
            self.0 ^= u128::from(x);
            self.0 = self.0.wrapping_mul(Self::PRIME);
        }
    }

    /// A length-prefixed string, so `("ab", "c")` and `("a", "bc")` differ.
    fn str(&mut self, s: &str) {
        self.num(s.len() as u64);
        self.bytes(s.as_bytes());
    }

    fn num(&mut self, n: u64) {
        self.bytes(&n.to_le_bytes());
    }

    fn nums(&mut self, ns: impl IntoIterator<Item = u32>) {
        let v: Vec<u32> = ns.into_iter().collect();
        self.num(v.len() as u64);
        for n in v {
            self.num(u64::from(n));
        }
    }
}

impl Plan {
    /// A hex digest of the plan's structure: Domains, Calls (names, stage
    /// types, ports) and operators, but not batch sizes or replica counts.
    /// Equal for two builds of the same pipeline, in any process.
    ///
    /// ```
    /// use rayorch_runtime::{Call, Plan, expand, reduce};
    /// rayorch_runtime::domain!(Doc);
    /// rayorch_runtime::domain!(Page: Doc);
    /// let plan = |batch: usize, name: &str| {
    ///     let split = Call::map("split", |d: String| d.split(' ').map(String::from).collect::<Vec<_>>());
    ///     let len = Call::map(name, |w: String| w.len()).batch_size(batch);
    ///     Plan::build(|b| {
    ///         let docs = b.source::<Doc, String>();
    ///         b.output(reduce(len.apply(expand::<Page, _, _>(split.apply(docs)))))
    ///     })
    ///     .unwrap()
    ///     .0
    /// };
    /// // Batch sizes are tuning, not structure; a Call's name is structure.
    /// assert_eq!(plan(4, "len").fingerprint(), plan(32, "len").fingerprint());
    /// assert_ne!(plan(4, "len").fingerprint(), plan(4, "length").fingerprint());
    /// ```
    pub fn fingerprint(&self) -> String {
        let p = &self.inner;
        let mut h = Fnv::new();
        h.str("rayorch-plan-v1");
        h.num(p.domains.len() as u64);
        for d in &p.domains {
            h.str(d.info.name);
            h.num(d.parent.map_or(u64::MAX, |x| x as u64));
        }
        h.num(p.nodes.len() as u64);
        for n in &p.nodes {
            h.num(n.domain as u64);
            h.nums(n.outputs.iter().copied());
            match &n.kind {
                NodeKind::Source { type_name, split, .. } => {
                    h.str("source");
                    h.str(type_name);
                    h.num(u64::from(split.is_some()));
                }
                NodeKind::Call {
                    name,
                    runtime,
                    inputs,
                    ..
                } => {
                    h.str("call");
                    h.str(name);
                    h.str(runtime.stage_name());
                    h.nums(inputs.iter().map(|e| e.port));
                    h.nums(inputs.iter().map(|e| u32::from(e.optional)));
                }
                NodeKind::Expand { inputs, .. } => {
                    h.str("expand");
                    h.nums(inputs.iter().copied());
                }
                NodeKind::Reduce {
                    inputs,
                    members,
                    keep_failed,
                    ..
                } => {
                    h.str("reduce");
                    h.nums(inputs.iter().copied());
                    h.num(members.map_or(u64::MAX, u64::from));
                    h.num(u64::from(keep_failed.is_some()));
                }
                NodeKind::Filter { value, mask, .. } => {
                    h.str("filter");
                    h.nums([*value, *mask]);
                }
                NodeKind::Broadcast { value, like } => {
                    h.str("broadcast");
                    h.nums([*value, *like]);
                }
            }
        }
        h.str(p.source_type.1);
        h.nums(p.outputs.iter().copied());
        format!("{:032x}", h.0)
    }
}
