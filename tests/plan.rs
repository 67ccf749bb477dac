//! Plans and the macros: every `PlanError` of `Plan::build` (`errors`), and
//! `#[pipeline]` twins of builder-written conformance cases
//! (`macro_twins`). Compile-time mistakes are `ui-tests/`' part.
//!
//! One test binary; its modules live in `plan/`, the helpers it shares with
//! the other layers' binaries in `common/`.

mod common;

mod plan {
    mod errors;
    mod macro_twins;
}
