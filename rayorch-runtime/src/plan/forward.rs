//! Which values an executor that runs Calls elsewhere must read, and which
//! it may pass along unread (the distributed owner keeps the latter as
//! opaque references: a large value then travels worker → store → worker,
//! never through the owner's memory).
//!
//! Per output Port of each Call, one [`Forward`]:
//! - [`Forward::Reference`]: every reader of the Port is a Call that runs
//!   elsewhere; the value is only ever handed on, so it may stay a
//!   reference (any `Value`: the engine stores and moves values without
//!   looking inside them).
//! - [`Forward::Split`]: every reader is a one-input `expand!` whose child
//!   Port is in turn read only by Calls that run elsewhere; the producer
//!   may split the list itself ([`split_output`], the plan's own split) and
//!   send one reference per element, which the executor gives the engine as
//!   a [`ValueList`] (an expansion accepts one in place of the list).
//! - [`Forward::Decode`]: anything else (a plan output, a Call run here, a
//!   reduce, filter, broadcast or aligned expansion): the value must be
//!   decoded.

use std::sync::Arc;

use crate::plan::Plan;
use crate::plan::build::NodeKind;
use crate::value::Value;

/// How an executor may hold one output Port's values (see the module note).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Forward {
    /// Decode it.
    Decode,
    /// Hand it on unread.
    Reference,
    /// Receive it split into its elements, each handed on unread.
    Split,
}

/// A list already split into its elements: an `expand!` of a list Port
/// accepts one in place of the list (its children are these values, in
/// order), so an executor can expand a list it never decoded.
#[derive(Clone)]
pub struct ValueList(pub Vec<Value>);

/// Per Call, per output (in the Call's output order), how an executor that
/// runs the Calls `elsewhere(c)` picks elsewhere may hold the values.
pub fn forwarding(plan: &Plan, elsewhere: impl Fn(usize) -> bool) -> Vec<Vec<Forward>> {
    let inner = &plan.inner;
    let read_elsewhere = |port: u32| {
        let p = &inner.ports[port as usize];
        p.declared_outputs == 0
            && p.consumers.iter().all(|c| {
                let node = &inner.nodes[c.node];
                matches!(node.kind, NodeKind::Call { .. }) && elsewhere(node.dense)
            })
    };
    inner
        .calls
        .iter()
        .map(|spec| {
            spec.outputs
                .iter()
                .map(|&port| {
                    let p = &inner.ports[port as usize];
                    if p.consumers.is_empty() || p.declared_outputs > 0 {
                        return Forward::Decode;
                    }
                    if read_elsewhere(port) {
                        return Forward::Reference;
                    }
                    let splits = p.consumers.iter().all(|c| {
                        let node = &inner.nodes[c.node];
                        matches!(&node.kind, NodeKind::Expand { inputs, .. } if inputs.len() == 1)
                            && node.outputs.iter().all(|&o| read_elsewhere(o))
                    });
                    if splits { Forward::Split } else { Forward::Decode }
                })
                .collect()
        })
        .collect()
}

/// Split output `output` of Call `call` the way the `expand!` reading it
/// will (the [`Forward::Split`] case): its elements, in order; `None` when
/// no one-input expansion reads that output or the value is not its list.
pub fn split_output(plan: &Plan, call: usize, output: usize, v: Value) -> Option<Vec<Value>> {
    let inner = &plan.inner;
    let port = *inner.calls.get(call)?.outputs.get(output)?;
    let consumer = inner.ports[port as usize].consumers.first()?;
    match &inner.nodes[consumer.node].kind {
        NodeKind::Expand { split, inputs, .. } if inputs.len() == 1 => split.first().and_then(|f| f(v)),
        _ => None,
    }
}

/// The elements of `v` when it is a [`ValueList`] (`None` otherwise): what
/// an expansion's split takes instead of the list.
pub(crate) fn pre_split(v: &Value) -> Option<Vec<Value>> {
    v.downcast_ref::<ValueList>()
        .map(|l| l.0.iter().map(Arc::clone).collect())
}
