//! The plan draft that Port operations append to while a plan is being built.
//!
//! Ports are plain `Copy` ids so that `forward` functions read like ordinary
//! code (a Port may be used twice without cloning). The draft they refer to
//! lives in a thread-local for the duration of [`crate::Plan::build`]; every
//! Port carries the id of the build that made it, so a Port that escapes its
//! build is reported as an error, never silently reused. Nothing here panics:
//! problems are collected and returned by `build` all at once.

use std::any::TypeId;
use std::cell::RefCell;
use std::panic::Location;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::error::PlanError;
use crate::plan::call::CallConfig;
use crate::plan::domain::{Domain, DomainInfo};
use crate::stage::ErasedCall;
use crate::value::{Cause, Value};

/// A Port id together with the build that made it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortRef {
    pub(crate) id: u32,
    pub(crate) build: u32,
}

/// One input edge of a Call node.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Edge {
    pub(crate) port: u32,
    pub(crate) optional: bool,
}

pub(crate) type SplitList = fn(Value) -> Option<Vec<Value>>;
pub(crate) type GatherList = fn(Vec<Value>) -> Option<Value>;
/// A `keep_failed` Reduce's gather: each kept child is its value or the
/// cause that made it fail.
pub(crate) type GatherKept = fn(Vec<Result<Value, Cause>>) -> Option<Value>;
pub(crate) type ReadMask = fn(&Value) -> Option<bool>;
/// The length of an erased list, read without consuming it.
pub(crate) type ListLen = fn(&Value) -> Option<usize>;

/// What a node does; its output Ports live in the node's Domain.
pub(crate) enum NodeKind {
    Source {
        type_id: TypeId,
        type_name: &'static str,
        /// Splits a tuple input into one value per source Port.
        split: Option<SplitList>,
    },
    Call {
        name: Arc<str>,
        config: CallConfig,
        runtime: Arc<dyn ErasedCall>,
        pool: usize,
        inputs: Vec<Edge>,
        shape: Option<crate::plan::call::ShapeFn>,
    },
    Expand {
        inputs: Vec<u32>,
        split: Vec<SplitList>,
        /// One per input, for the aligned form (checked before commit).
        len: Vec<ListLen>,
    },
    Reduce {
        inputs: Vec<u32>,
        members: Option<u32>,
        gather: Vec<GatherList>,
        /// `reduce!(x, keep_failed)`: a failed child is gathered as its
        /// cause instead of suppressing the parent (one input only).
        keep_failed: Option<GatherKept>,
    },
    Filter {
        value: u32,
        mask: u32,
        read_mask: ReadMask,
    },
    Broadcast {
        value: u32,
        like: u32,
    },
}

impl NodeKind {
    pub(crate) fn input_ports(&self) -> Vec<u32> {
        match self {
            NodeKind::Source { .. } => vec![],
            NodeKind::Call { inputs, .. } => inputs.iter().map(|e| e.port).collect(),
            NodeKind::Expand { inputs, .. } => inputs.clone(),
            NodeKind::Reduce { inputs, members, .. } => inputs.iter().copied().chain(*members).collect(),
            NodeKind::Filter { value, mask, .. } => vec![*value, *mask],
            NodeKind::Broadcast { value, like } => vec![*value, *like],
        }
    }

    pub(crate) fn label(&self, domain: &str) -> String {
        match self {
            NodeKind::Source { .. } => format!("source({domain})"),
            NodeKind::Call { name, .. } => format!("Call `{name}`"),
            NodeKind::Expand { .. } => format!("expand(=> {domain})"),
            NodeKind::Reduce {
                keep_failed: Some(_), ..
            } => format!("reduce(keep_failed => {domain})"),
            NodeKind::Reduce { .. } => format!("reduce(=> {domain})"),
            NodeKind::Filter { .. } => format!("filter({domain})"),
            NodeKind::Broadcast { .. } => format!("broadcast(=> {domain})"),
        }
    }
}

pub(crate) struct DraftNode {
    pub(crate) kind: NodeKind,
    pub(crate) domain: usize,
    pub(crate) outputs: Vec<u32>,
    /// Where the user wrote the operation (`#[track_caller]` from the
    /// builder call, or from the `#[pipeline]` check call spanned at the
    /// user's token), so that a plan error can name the line.
    pub(crate) at: &'static Location<'static>,
}

impl DraftNode {
    /// The node's label; an unnamed operation (`expand(=> Page)`) also says
    /// where it was written, since two of them would read the same.
    pub(crate) fn label(&self, domain: &str) -> String {
        let base = self.kind.label(domain);
        match self.kind {
            NodeKind::Call { .. } => base,
            _ => format!("{base} at {}", self.at),
        }
    }
}

pub(crate) struct DraftPort {
    pub(crate) node: u32,
    pub(crate) domain: usize,
}

/// Everything recorded during one build.
pub(crate) struct Draft {
    pub(crate) build: u32,
    pub(crate) domains: Vec<DomainInfo>,
    pub(crate) nodes: Vec<DraftNode>,
    pub(crate) ports: Vec<DraftPort>,
    pub(crate) outputs: Vec<u32>,
    pub(crate) errors: Vec<PlanError>,
}

impl Draft {
    pub(crate) fn domain_index(&mut self, info: DomainInfo) -> usize {
        if let Some(i) = self.domains.iter().position(|d| d.id == info.id) {
            return i;
        }
        if let Some(p) = info.parent() {
            self.domain_index(p);
        }
        self.domains.push(info);
        self.domains.len() - 1
    }

    pub(crate) fn port_label(&self, port: u32) -> String {
        let p = &self.ports[port as usize];
        let node = &self.nodes[p.node as usize];
        let name = self.domains[p.domain].name;
        let base = node.label(name);
        if node.outputs.len() > 1 {
            let idx = node.outputs.iter().position(|&o| o == port).unwrap_or(0);
            format!("port #{port} ({base}, output {idx}, Domain `{name}`)")
        } else {
            format!("port #{port} ({base}, Domain `{name}`)")
        }
    }

    /// Check that `r` belongs to this build; record an error otherwise.
    pub(crate) fn check_ref(&mut self, r: PortRef, op: &str) -> bool {
        if r.build == self.build && (r.id as usize) < self.ports.len() {
            true
        } else if r.build == self.build && r.id == u32::MAX {
            // Made by an operation that already reported its error.
            false
        } else {
            self.errors.push(PlanError::ForeignPort { op: op.to_string() });
            false
        }
    }
}

thread_local! {
    static DRAFT: RefCell<Option<Draft>> = const { RefCell::new(None) };
}

/// Build ids, process-wide: a build's id is also its plan's id, which the
/// plan's [`crate::Output`] handles carry, so that a handle read against
/// another plan's outcome (built on any thread) is recognised.
static NEXT_BUILD: AtomicU32 = AtomicU32::new(1);

/// Run `f` with the active draft, if a build is active on this thread.
pub(crate) fn with_draft<R>(f: impl FnOnce(&mut Draft) -> R) -> Option<R> {
    DRAFT.with(|d| d.borrow_mut().as_mut().map(f))
}

/// The id of the active build, 0 when none is active.
pub(crate) fn current_build_id() -> u32 {
    with_draft(|d| d.build).unwrap_or(0)
}

pub(crate) fn begin() -> Result<(), PlanError> {
    DRAFT.with(|d| {
        let mut d = d.borrow_mut();
        if d.is_some() {
            return Err(PlanError::NestedBuild);
        }
        // 0 means "no build"; skipped when the counter wraps.
        let build = match NEXT_BUILD.fetch_add(1, Ordering::Relaxed) {
            0 => NEXT_BUILD.fetch_add(1, Ordering::Relaxed),
            b => b,
        };
        *d = Some(Draft {
            build,
            domains: Vec::new(),
            nodes: Vec::new(),
            ports: Vec::new(),
            outputs: Vec::new(),
            errors: Vec::new(),
        });
        Ok(())
    })
}

pub(crate) fn finish() -> Option<Draft> {
    DRAFT.with(|d| d.borrow_mut().take())
}

/// Append a node whose `arity` outputs live in Domain `D`; returns their ids
/// (`u32::MAX` each when no build is active).
#[track_caller]
pub(crate) fn add_node<D: Domain>(kind: NodeKind, arity: usize) -> Vec<u32> {
    let at = Location::caller();
    with_draft(|d| {
        let domain = d.domain_index(DomainInfo::of::<D>());
        let node = d.nodes.len() as u32;
        let first = d.ports.len() as u32;
        let outputs: Vec<u32> = (first..first + arity as u32).collect();
        for _ in &outputs {
            d.ports.push(DraftPort { node, domain });
        }
        d.nodes.push(DraftNode {
            kind,
            domain,
            outputs: outputs.clone(),
            at,
        });
        outputs
    })
    .unwrap_or_else(|| vec![u32::MAX; arity])
}

/// Validate input refs for an operation; returns their ids, or `None` after
/// recording an error.
pub(crate) fn resolve_inputs(refs: &[PortRef], op: &str) -> Option<Vec<u32>> {
    with_draft(|d| {
        let mut ok = true;
        for r in refs {
            ok &= d.check_ref(*r, op);
        }
        ok.then(|| refs.iter().map(|r| r.id).collect())
    })
    .flatten()
}
