//! Helpers shared by the integration tests.
#![allow(dead_code, missing_docs)]

use std::sync::Arc;

use rayorch::sim::{self, SimConfig, SimRun};
use rayorch::{Item, Output, Plan, Value};

/// Inputs keyed by their position.
pub fn keyed<T: Send + Sync + 'static>(xs: impl IntoIterator<Item = T>) -> Vec<(u64, Value)> {
    xs.into_iter()
        .enumerate()
        .map(|(i, x)| (i as u64, Arc::new(x) as Value))
        .collect()
}

/// Run sequentially and return the typed output per root, in key order.
pub fn run_seq<I: Send + Sync + 'static, T: rayorch::Data>(
    plan: &Plan,
    out: Output<T>,
    inputs: impl IntoIterator<Item = I>,
) -> (Vec<Item<T>>, SimRun) {
    run_with(plan, out, inputs, &SimConfig::sequential())
}

/// Run under `cfg` and return the typed output per root, in key order.
pub fn run_with<I: Send + Sync + 'static, T: rayorch::Data>(
    plan: &Plan,
    out: Output<T>,
    inputs: impl IntoIterator<Item = I>,
    cfg: &SimConfig,
) -> (Vec<Item<T>>, SimRun) {
    let run = sim::run(plan, keyed(inputs), cfg).expect("run completes");
    let items = run.by_key().iter().map(|o| o.get(out)).collect();
    (items, run)
}

/// Message texts of non-present items, for compact assertions.
pub fn cause_text<T>(i: &Item<T>) -> Option<&str> {
    i.cause().map(|c| c.message())
}
