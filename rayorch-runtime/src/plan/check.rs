//! The paths `#[pipeline]` and `#[derive(Domain)]` emit (`__private::check::*`).
//!
//! The checks themselves live in [`crate::plan::domain::typing_rules`], a public,
//! documented module: rustc names a check trait or function by its path when
//! it reports a Domain mistake, and a path inside this hidden module would
//! show the user a name they cannot look up.

pub use crate::plan::domain::Acyclic;
pub use crate::plan::domain::typing_rules::*;
