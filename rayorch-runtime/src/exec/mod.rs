//! Executors and everything around a run: the [`Stage`](stage::Stage) contract,
//! the threaded [`Runner`](runner::Runner), the seeded [`sim`] executor, sinks
//! and metrics.

pub mod metrics;
pub mod runner;
pub mod sim;
pub mod sink;
pub mod stage;
