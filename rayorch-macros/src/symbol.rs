//! The words `forward` is written with: pseudo-macro names and their options.
//! Kept in one place so a keyword never appears as a stray string literal.

pub(crate) const FORWARD: &str = "forward";
pub(crate) const PORT: &str = "Port";
/// The crate a qualified pseudo-macro path may start with (`rayorch::reduce!`).
pub(crate) const CRATE: &str = "rayorch";

pub(crate) const EXPAND: &str = "expand";
pub(crate) const EXPAND_ALIGNED: &str = "expand_aligned";
pub(crate) const REDUCE: &str = "reduce";
pub(crate) const REDUCE_ALIGNED: &str = "reduce_aligned";
pub(crate) const FILTER: &str = "filter";
pub(crate) const BROADCAST: &str = "broadcast";
pub(crate) const SPLIT: &str = "split";

pub(crate) const MEMBERS: &str = "members";
pub(crate) const LIKE: &str = "like";
/// `reduce!(x, keep_failed)`: a flag, written bare.
pub(crate) const KEEP_FAILED: &str = "keep_failed";
pub(crate) const PARENT: &str = "parent";
pub(crate) const DOMAIN: &str = "domain";

/// Methods on a Port that keep its Domain (`x.optional()`, `x.clone()`).
pub(crate) const PORT_METHODS: &[&str] = &["optional", "clone"];
