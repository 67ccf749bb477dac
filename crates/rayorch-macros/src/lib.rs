//! Procedural macros for rayorch: `#[pipeline]` and `#[derive(Domain)]`.
//!
//! This crate holds only its skeleton until the macro issue lands; the runtime's
//! typed builder API (`rayorch::plan`) is what the macros will generate calls to.
