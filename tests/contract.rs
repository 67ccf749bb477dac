//! The engine contract: CONFORMANCE.md §A–§D (`conformance_*`, the randomized
//! contract in `randomized`), and the engine's own promises through the
//! public API (`engine`, payload moves in `payloads`, `keep_failed` reduces,
//! the reservation policies in `scheduling`, shape keys and batch delays in
//! `shape_batching`).
//!
//! One test binary; its modules live in `contract/`, the helpers it shares
//! with the other layers' binaries in `common/`. Run one module with
//! `cargo test --test contract conformance_b`.

mod common;

mod contract {
    mod backends;
    mod conformance_a_rules;
    mod conformance_b_end_to_end;
    mod conformance_c_recovery;
    mod engine;
    mod keep_failed;
    mod payloads;
    mod randomized;
    mod scheduling;
    mod shape_batching;
}
