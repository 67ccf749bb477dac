//! Compile-time tests for `#[pipeline]` live in `tests/`; this crate is otherwise empty.
