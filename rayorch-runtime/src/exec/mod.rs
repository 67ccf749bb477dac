//! Executors and everything around a run: the [`Stage`](stage::Stage) contract
//! (and per-record async stages, `records`),
//! the threaded [`Runner`](runner::Runner) (its driver, replicas and run
//! control), the seeded `sim` executor (feature `sim`), sinks and metrics.

pub(crate) mod backpressure;
pub(crate) mod control;
mod driver;
pub mod journal;
pub(crate) mod metrics;
pub(crate) mod records;
mod replica;
pub(crate) mod runner;
#[cfg(feature = "sim")]
pub mod sim;
pub mod sink;
pub(crate) mod stage;
