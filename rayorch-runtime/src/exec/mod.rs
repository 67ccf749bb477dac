//! Executors and everything around a run: the one run loop
//! every executor drives (`run_loop`) and its backends — the threaded
//! [`Runner`](runner::Runner)'s replica pools, the seeded `sim` executor
//! (feature `sim`); the distributed one lives in `rayorch-dist` — plus run
//! control, sinks, the journal and metrics.

pub(crate) mod backpressure;
pub(crate) mod control;
pub mod journal;
pub(crate) mod metrics;
pub(crate) mod replica;
pub(crate) mod run_loop;
pub(crate) mod runner;
#[cfg(feature = "sim")]
pub mod sim;
pub mod sink;
