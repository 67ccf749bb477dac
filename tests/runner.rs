//! The threaded Runner and its executors: run control and streams
//! (`control`), failures and faults, streaming sinks, durable runs across a
//! kill (`durable_kill_resume`, which re-executes this binary as its child),
//! memory bounds, the observer's spans and the `tracing` spans (`traces`), the plan handles a run checks, and
//! per-record vs batch-level async stages against a loopback HTTP server
//! (`http_records`).
//!
//! One test binary; its modules live in `runner/`, the helpers it shares
//! with the other layers' binaries in `common/`.

mod common;

mod runner {
    mod control;
    mod durable_kill_resume;
    mod failures;
    mod faults;
    mod http_records;
    mod memory_bounds;
    mod observer_spans;
    mod provenance;
    mod quiet_panics;
    mod run_handles;
    mod streaming;
    mod traces;
}
