//! The immutable, validated Plan.
//!
//! `Plan::build` runs a closure that appends to a draft (see `build`), then
//! validates it and pre-indexes everything the engine needs so that the hot
//! path never searches: per Port its consumers, per Domain the Ports, Calls,
//! reduces and broadcasts that touch it. Invariants after `build` succeeds:
//! exactly one source, in the one root Domain; every input Port precedes its
//! consumer (acyclic); each child Domain has exactly one expansion; every node
//! reaches an output; every operation's inputs are in the Domains it needs.

pub(crate) mod build;
pub(crate) mod call;
#[doc(hidden)]
pub mod check;
pub mod domain;
pub(crate) mod fingerprint;
pub(crate) mod forward;
pub(crate) mod pipeline;
pub(crate) mod port;

use std::marker::PhantomData;
use std::sync::Arc;

use crate::error::{PlanError, PlanErrors};
use crate::plan::build::{Draft, Edge, NodeKind};
use crate::plan::call::CallConfig;
use crate::plan::domain::{DomainInfo, RootDomain};
use crate::plan::port::{OutputSet, Port};
use crate::stage::ErasedCall;
use crate::value::{Data, take_value};

/// An immutable, validated pipeline graph. Cheap to clone.
#[derive(Clone)]
pub struct Plan {
    pub(crate) inner: Arc<PlanInner>,
}

/// Declares a plan's source and outputs inside [`Plan::build`].
pub struct PlanBuilder {
    _private: (),
}

/// A handle to one of a plan's outputs, to read it from a root's outcome.
pub struct Output<T> {
    pub(crate) index: usize,
    /// The id of the plan that declared it ([`Plan`]'s build id).
    pub(crate) plan: u32,
    _type: PhantomData<fn() -> T>,
}

impl<T> Clone for Output<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Output<T> {}

impl<T> std::fmt::Debug for Output<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Output#{}", self.index)
    }
}

impl PlanBuilder {
    /// Declare the plan's source: one `T` per root Entity of Domain `D`.
    #[track_caller]
    pub fn source<D: RootDomain, T: Data>(&mut self) -> Port<D, T> {
        let ids = build::add_node::<D>(
            NodeKind::Source {
                type_id: std::any::TypeId::of::<T>(),
                type_name: std::any::type_name::<T>(),
                split: None,
            },
            1,
        );
        Port::from_id(ids[0])
    }

    /// Declare a source whose per-root input is a tuple, split into one Port
    /// per field (a `forward` with several source Ports).
    ///
    /// ```
    /// use rayorch::{domain, Call, Plan};
    /// domain!(Doc);
    /// let add = Call::map("add", |(a, b): (u32, u32)| a + b);
    /// let (plan, _) = Plan::build(|b| {
    ///     let (x, y) = b.sources::<Doc, (u32, u32)>();
    ///     b.output(add.apply((x, y)))
    /// }).unwrap();
    /// assert_eq!(plan.source_type(), "(u32, u32)");
    /// ```
    #[track_caller]
    pub fn sources<D: RootDomain, T: OutputSet + Data>(&mut self) -> T::Ports<D> {
        fn split<T: OutputSet + Data>(v: crate::value::Value) -> Option<Vec<crate::value::Value>> {
            take_value::<T>(v).map(|t| t.split().into_vec())
        }
        let ids = build::add_node::<D>(
            NodeKind::Source {
                type_id: std::any::TypeId::of::<T>(),
                type_name: std::any::type_name::<T>(),
                split: Some(split::<T>),
            },
            T::arity(),
        );
        T::ports::<D>(&ids)
    }

    /// Declare a root-Domain Port as an output of the plan.
    pub fn output<D: RootDomain, T: Data>(&mut self, port: Port<D, T>) -> Output<T> {
        let (index, plan) = build::with_draft(|d| {
            if d.check_ref(port.port_ref(), "output") {
                d.outputs.push(port.id());
            }
            (d.outputs.len().saturating_sub(1), d.build)
        })
        .unwrap_or((0, 0));
        Output {
            index,
            plan,
            _type: PhantomData,
        }
    }
}

impl Plan {
    /// Build and validate a plan. The closure declares the source, applies
    /// Calls and operators, and declares outputs; its return value (usually
    /// the [`Output`] handles) is handed back beside the plan.
    ///
    /// A pipeline is usually a `#[pipeline]` struct, whose
    /// [`build_plan`](crate::Pipeline::build_plan) makes this call from its
    /// `forward`; the builder below is what that `forward` is rewritten to.
    ///
    /// ```
    /// use rayorch::{domain, reduce, expand, Call, Plan};
    /// domain!(Doc);
    /// domain!(Word: Doc);
    /// let split = Call::map("split", |s: String| s.split(' ').map(String::from).collect::<Vec<_>>());
    /// let len = Call::map("len", |w: String| w.len());
    /// let (plan, out) = Plan::build(|b| {
    ///     let docs = b.source::<Doc, String>();
    ///     let words = expand::<Word, _, _>(split.apply(docs));
    ///     b.output(reduce(len.apply(words)))
    /// }).unwrap();
    /// assert_eq!(plan.calls().len(), 2);
    /// # let _ = out;
    /// ```
    pub fn build<R>(f: impl FnOnce(&mut PlanBuilder) -> R) -> Result<(Plan, R), PlanErrors> {
        build::begin().map_err(|e| PlanErrors(vec![e]))?;
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            f(&mut PlanBuilder { _private: () })
        }));
        let draft = build::finish();
        let r = match result {
            Ok(r) => r,
            Err(panic) => std::panic::resume_unwind(panic),
        };
        let draft = draft.ok_or_else(|| PlanErrors(vec![PlanError::NestedBuild]))?;
        let inner = compile(draft).map_err(PlanErrors)?;
        Ok((
            Plan {
                inner: Arc::new(inner),
            },
            r,
        ))
    }

    /// The plan's Calls, in the order they were applied.
    pub fn calls(&self) -> &[CallSpec] {
        &self.inner.calls
    }

    /// The Domains, parents before children.
    pub fn domains(&self) -> Vec<&'static str> {
        self.inner.domains.iter().map(|d| d.info.name).collect()
    }

    /// The type the source expects.
    pub fn source_type(&self) -> &'static str {
        self.inner.source_type.1
    }

    /// Number of outputs.
    pub fn outputs(&self) -> usize {
        self.inner.outputs.len()
    }

    /// Are roots of type `T` what the source takes? Checked by every typed
    /// entry point (the `Runner`'s, the distributed owner's) before anything
    /// is admitted, so that a wrong input type stops the run before any work
    /// rather than at its first root: [`RunError::SourceType`](crate::RunError::SourceType) otherwise.
    pub fn check_source<T: 'static>(&self) -> Result<(), crate::RunError> {
        let (expected_id, expected) = self.inner.source_type;
        if std::any::TypeId::of::<T>() == expected_id {
            return Ok(());
        }
        Err(crate::RunError::SourceType {
            domain: self.inner.domains[self.inner.root].info.name,
            expected,
            given: std::any::type_name::<T>(),
        })
    }
}

impl std::fmt::Debug for Plan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plan")
            .field("domains", &self.domains())
            .field(
                "calls",
                &self.inner.calls.iter().map(|c| &*c.name).collect::<Vec<_>>(),
            )
            .field("ports", &self.inner.ports.len())
            .finish()
    }
}

/// One Call node as the executors see it.
pub struct CallSpec {
    /// The Call's name.
    pub name: Arc<str>,
    /// Its configuration.
    pub config: CallConfig,
    /// Spawns replicas.
    pub runtime: Arc<dyn ErasedCall>,
    /// Calls applied from the same `Call` value share a pool id.
    pub pool: usize,
    pub(crate) domain: usize,
    pub(crate) inputs: Vec<Edge>,
    pub(crate) outputs: Vec<u32>,
    /// Aligned expansions over this Call's own outputs.
    pub(crate) aligned: Vec<AlignedCheck>,
    /// The shape key of a Grain, from its input ([`crate::Call::shape`]).
    pub(crate) shape: Option<crate::plan::call::ShapeFn>,
}

pub(crate) struct DomainSpec {
    pub(crate) info: DomainInfo,
    pub(crate) parent: Option<usize>,
    /// The expand node into this Domain.
    pub(crate) expand: Option<usize>,
    pub(crate) ports: Vec<u32>,
    pub(crate) calls: Vec<usize>,
    /// Calls one level below (their barriers are indexed by our Entities).
    pub(crate) child_calls: Vec<usize>,
    /// Reduce nodes whose inputs live here.
    pub(crate) reduces_over: Vec<usize>,
    /// Reduce nodes whose outputs live here.
    pub(crate) reduces_into: Vec<usize>,
    /// Broadcast nodes whose outputs live here.
    pub(crate) broadcasts_into: Vec<usize>,
    /// Child Domains.
    pub(crate) children: Vec<usize>,
}

pub(crate) struct PortSpec {
    pub(crate) domain: usize,
    /// The node inputs that react when an Item of this Port resolves.
    pub(crate) consumers: Vec<Consumer>,
    /// How many times the Port is declared as a plan output (a Port may be
    /// declared twice; each declaration gets the same Item).
    pub(crate) declared_outputs: u32,
    /// Read by exactly one consumer edge and not an output: its values may
    /// move to that consumer once it no longer needs them kept.
    pub(crate) sole_consumer: bool,
}

/// One node input reading a Port.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Consumer {
    pub(crate) node: usize,
    /// The input slot of that node.
    pub(crate) slot: usize,
}

/// One list of an aligned expansion that a Call produces itself.
#[derive(Clone, Copy)]
pub(crate) struct AlignedList {
    /// Index among the Call's outputs.
    pub(crate) output: usize,
    pub(crate) len: build::ListLen,
}

/// An aligned expansion fed only by one Call's outputs: the Call's Grain
/// is checked for equal list lengths before it commits (CONFORMANCE §B11).
#[derive(Clone)]
pub(crate) struct AlignedCheck {
    /// The Expand node.
    pub(crate) node: usize,
    pub(crate) lists: Vec<AlignedList>,
}

pub(crate) struct NodeSpec {
    pub(crate) kind: NodeKind,
    pub(crate) domain: usize,
    pub(crate) outputs: Vec<u32>,
    pub(crate) label: String,
    /// Dense index among nodes of the same kind (Call, Reduce).
    pub(crate) dense: usize,
}

pub(crate) struct PlanInner {
    pub(crate) domains: Vec<DomainSpec>,
    pub(crate) ports: Vec<PortSpec>,
    pub(crate) nodes: Vec<NodeSpec>,
    pub(crate) calls: Vec<CallSpec>,
    pub(crate) reduces: Vec<usize>,
    pub(crate) root: usize,
    pub(crate) source_ports: Vec<u32>,
    pub(crate) source_split: Option<build::SplitList>,
    pub(crate) source_type: (std::any::TypeId, &'static str),
    pub(crate) outputs: Vec<u32>,
    /// Unique per process (the build id); stamped on every [`Output`] and
    /// [`crate::RootOutcome`] so that a foreign handle is caught.
    pub(crate) id: u32,
}

impl PlanInner {
    /// Ancestor chain from `from` (exclusive) up to `to` (inclusive), as
    /// Domain indices; empty when `to` is not an ancestor.
    pub(crate) fn path_up(&self, from: usize, to: usize) -> Vec<usize> {
        let mut path = Vec::new();
        let mut d = from;
        while let Some(p) = self.domains[d].parent {
            path.push(p);
            if p == to {
                return path;
            }
            d = p;
        }
        Vec::new()
    }
}

/// The aligned expansions all of whose lists are among `outputs`.
fn aligned_checks(nodes: &[NodeSpec], outputs: &[u32]) -> Vec<AlignedCheck> {
    let mut checks = Vec::new();
    for (ni, n) in nodes.iter().enumerate() {
        let NodeKind::Expand { inputs, len, .. } = &n.kind else {
            continue;
        };
        if inputs.len() < 2 {
            continue;
        }
        let lists: Option<Vec<AlignedList>> = inputs
            .iter()
            .zip(len)
            .map(|(p, &len)| {
                let output = outputs.iter().position(|o| o == p)?;
                Some(AlignedList { output, len })
            })
            .collect();
        if let Some(lists) = lists {
            checks.push(AlignedCheck { node: ni, lists });
        }
    }
    checks
}

const CALL_HINT: &str = "all inputs of one Call must be in the Call's Domain";

fn compile(mut d: Draft) -> Result<PlanInner, Vec<PlanError>> {
    let mut errors = std::mem::take(&mut d.errors);
    let labels: Vec<String> = (0..d.ports.len() as u32).map(|p| d.port_label(p)).collect();
    let node_labels: Vec<String> = d
        .nodes
        .iter()
        .map(|n| n.label(d.domains[n.domain].name))
        .collect();
    let dname = |i: usize| d.domains[i].name;
    let parent_of = |i: usize| {
        d.domains[i]
            .parent()
            .and_then(|p| d.domains.iter().position(|x| x.id == p.id))
    };

    // Source and root.
    let sources: Vec<usize> = d
        .nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| matches!(n.kind, NodeKind::Source { .. }))
        .map(|(i, _)| i)
        .collect();
    let Some(&src) = sources.first() else {
        errors.push(PlanError::NoSource);
        return Err(errors);
    };
    for &extra in &sources[1..] {
        errors.push(PlanError::SecondSource {
            port: labels[d.nodes[extra].outputs[0] as usize].clone(),
        });
    }
    let root = d.nodes[src].domain;
    let source_ports = d.nodes[src].outputs.clone();
    let NodeKind::Source {
        type_id,
        type_name,
        split: source_split,
    } = d.nodes[src].kind
    else {
        unreachable!("filtered above")
    };
    if d.outputs.is_empty() {
        errors.push(PlanError::NoOutput);
    }
    for (i, p) in d.ports.iter().enumerate() {
        if parent_of(p.domain).is_none() && p.domain != root {
            errors.push(PlanError::SecondRoot {
                port: labels[i].clone(),
                domain: dname(p.domain),
                root: dname(root),
            });
        }
    }

    // Per-node Domain rules and acyclicity.
    let mut expand_of: Vec<Option<usize>> = vec![None; d.domains.len()];
    for (ni, n) in d.nodes.iter().enumerate() {
        let first_out = n.outputs.first().copied().unwrap_or(u32::MAX);
        let mut need = |port: u32, expected_dom: Option<usize>, expected: String, hint: &'static str| {
            let pd = d.ports[port as usize].domain;
            if port >= first_out || Some(pd) != expected_dom {
                errors.push(PlanError::DomainMismatch {
                    node: node_labels[ni].clone(),
                    input: labels[port as usize].clone(),
                    found: dname(pd),
                    expected,
                    hint,
                });
            }
        };
        let here = format!("Domain `{}`", dname(n.domain));
        match &n.kind {
            NodeKind::Source { .. } => {}
            NodeKind::Call { inputs, .. } => {
                for e in inputs {
                    need(e.port, Some(n.domain), here.clone(), CALL_HINT);
                }
            }
            NodeKind::Filter { value, mask, .. } => {
                need(
                    *value,
                    Some(n.domain),
                    here.clone(),
                    "filter's value and mask share a Domain",
                );
                need(
                    *mask,
                    Some(n.domain),
                    here.clone(),
                    "filter's value and mask share a Domain",
                );
            }
            NodeKind::Expand { inputs, .. } => {
                let parent = parent_of(n.domain);
                for &p in inputs {
                    need(
                        p,
                        parent,
                        format!("the parent Domain of `{}`", dname(n.domain)),
                        "expand lists of a parent into its child Domain",
                    );
                }
                match expand_of[n.domain] {
                    Some(first) => errors.push(PlanError::SecondExpansion {
                        domain: dname(n.domain),
                        first: node_labels[first].clone(),
                        second: node_labels[ni].clone(),
                    }),
                    None => expand_of[n.domain] = Some(ni),
                }
            }
            NodeKind::Reduce { inputs, members, .. } => {
                let child = inputs
                    .first()
                    .map(|&p| d.ports[p as usize].domain)
                    .filter(|&c| parent_of(c) == Some(n.domain));
                for &p in inputs.iter().chain(members) {
                    need(
                        p,
                        child.or(Some(usize::MAX)),
                        format!("a child Domain of `{}`", dname(n.domain)),
                        "reduce gathers a child Domain into its parent; every input must be in the same child Domain",
                    );
                }
            }
            NodeKind::Broadcast { value, like } => {
                let vd = d.ports[*value as usize].domain;
                let mut a = parent_of(n.domain);
                let mut ok = false;
                while let Some(x) = a {
                    ok |= x == vd;
                    a = parent_of(x);
                }
                need(
                    *value,
                    ok.then_some(vd),
                    format!("an ancestor Domain of `{}`", dname(n.domain)),
                    "broadcast copies an ancestor's value down",
                );
                need(
                    *like,
                    Some(n.domain),
                    here.clone(),
                    "`like` names the target Domain",
                );
            }
        }
    }

    // Liveness: walk back from the outputs.
    let mut live = vec![false; d.nodes.len()];
    let mut stack: Vec<usize> = d
        .outputs
        .iter()
        .map(|&p| d.ports[p as usize].node as usize)
        .collect();
    while let Some(n) = stack.pop() {
        if std::mem::replace(&mut live[n], true) {
            continue;
        }
        for p in d.nodes[n].kind.input_ports() {
            stack.push(d.ports[p as usize].node as usize);
        }
    }
    for (i, l) in live.iter().enumerate() {
        if !l {
            errors.push(PlanError::Unused {
                node: node_labels[i].clone(),
            });
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }

    // Index.
    let mut domains: Vec<DomainSpec> = (0..d.domains.len())
        .map(|i| DomainSpec {
            info: d.domains[i],
            parent: parent_of(i),
            expand: expand_of[i],
            ports: Vec::new(),
            calls: Vec::new(),
            child_calls: Vec::new(),
            reduces_over: Vec::new(),
            reduces_into: Vec::new(),
            broadcasts_into: Vec::new(),
            children: Vec::new(),
        })
        .collect();
    for i in 0..domains.len() {
        if let Some(p) = domains[i].parent {
            domains[p].children.push(i);
        }
    }
    let mut ports: Vec<PortSpec> = d
        .ports
        .iter()
        .enumerate()
        .map(|(i, p)| PortSpec {
            domain: p.domain,
            consumers: Vec::new(),
            declared_outputs: d.outputs.iter().filter(|&&o| o as usize == i).count() as u32,
            sole_consumer: false,
        })
        .collect();
    for (i, p) in ports.iter().enumerate() {
        domains[p.domain].ports.push(i as u32);
    }
    let mut calls = Vec::new();
    let mut reduces = Vec::new();
    let mut nodes = Vec::new();
    for (ni, n) in d.nodes.into_iter().enumerate() {
        let mut dense = 0;
        match &n.kind {
            NodeKind::Call {
                name,
                config,
                runtime,
                pool,
                inputs,
                shape,
            } => {
                dense = calls.len();
                domains[n.domain].calls.push(dense);
                if let Some(p) = domains[n.domain].parent {
                    domains[p].child_calls.push(dense);
                }
                for (slot, e) in inputs.iter().enumerate() {
                    ports[e.port as usize].consumers.push(Consumer { node: ni, slot });
                }
                calls.push(CallSpec {
                    name: name.clone(),
                    config: config.clone(),
                    runtime: runtime.clone(),
                    pool: *pool,
                    domain: n.domain,
                    inputs: inputs.clone(),
                    outputs: n.outputs.clone(),
                    aligned: Vec::new(),
                    shape: shape.clone(),
                });
            }
            NodeKind::Reduce { inputs, members, .. } => {
                dense = reduces.len();
                reduces.push(ni);
                let over = ports[inputs[0] as usize].domain;
                domains[over].reduces_over.push(ni);
                domains[n.domain].reduces_into.push(ni);
                for (slot, &p) in inputs.iter().chain(members).enumerate() {
                    ports[p as usize].consumers.push(Consumer { node: ni, slot });
                }
            }
            NodeKind::Broadcast { value, .. } => {
                domains[n.domain].broadcasts_into.push(ni);
                ports[*value as usize]
                    .consumers
                    .push(Consumer { node: ni, slot: 0 });
            }
            kind => {
                for (slot, p) in kind.input_ports().into_iter().enumerate() {
                    ports[p as usize].consumers.push(Consumer { node: ni, slot });
                }
            }
        }
        nodes.push(NodeSpec {
            label: node_labels[ni].clone(),
            kind: n.kind,
            domain: n.domain,
            outputs: n.outputs,
            dense,
        });
    }
    for p in &mut ports {
        p.sole_consumer = p.declared_outputs == 0 && p.consumers.len() == 1;
    }
    for call in &mut calls {
        call.aligned = aligned_checks(&nodes, &call.outputs);
    }
    Ok(PlanInner {
        domains,
        ports,
        nodes,
        calls,
        reduces,
        root,
        source_ports,
        source_split,
        source_type: (type_id, type_name),
        outputs: d.outputs,
        id: d.build,
    })
}
