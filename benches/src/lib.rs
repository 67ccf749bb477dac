//! rayorch's benchmarks (`publish = false`): what they share, beside them.
//!
//! - [`workload`]: the long-tail workloads, generated in the repository
//!   (MinerU-shaped page counts, byte-identical to the reference files).
//! - [`longtail`]: the simulated long-tail document pipeline (sleeps for
//!   costs) run through the real runtime, one run per scheduler arm.
//!
//! The benches (`benches/control_plane.rs`, `benches/longtail.rs`, both
//! `harness = false`) print their figures; `BENCHMARKS.md` says how to run
//! each and records them. The tests (`tests/longtail_small.rs`,
//! `tests/scheduling_workloads.rs`) check the pipeline and the generator.

pub mod longtail;
pub mod workload;
