//! The names of a run's roots while they are live: the source names each
//! root as it yields it, the sink takes the name when the root's outcome
//! arrives. What is held is what is in flight (plus roots the source named
//! and the run never reached), not the run's history, so a streaming source
//! of any length holds a window's worth of names.
//!
//! ```
//! let names = rayorch_kit::names::RootNames::new();
//! names.insert(7, "s3://b/a.pdf");
//! names.insert(9, "s3://b/c.pdf");
//! assert_eq!(names.take(7), Some(("s3://b/a.pdf".into(), None)));
//! assert_eq!(names.take(7), None);
//! assert_eq!(names.remaining(), ["s3://b/c.pdf"]);
//! ```

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// A root's metadata: the fields its input list gave it
/// (`rayorch_kit::store::input_list`), a JSON object.
pub type Meta = Arc<serde_json::Value>;

/// A root's name and metadata.
pub type Named = (Arc<str>, Option<Meta>);

/// Root names by key (see the module note); shared by source and sink.
#[derive(Debug, Default)]
pub struct RootNames(Mutex<HashMap<u64, Named>>);

impl RootNames {
    /// An empty set, to share.
    pub fn new() -> Arc<RootNames> {
        Arc::new(RootNames::default())
    }

    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Named>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Name the root `key` (the source, as it yields it).
    pub fn insert(&self, key: u64, name: impl Into<Arc<str>>) {
        self.map().insert(key, (name.into(), None));
    }

    /// Name the root `key` and give it `meta` (an input list's row).
    ///
    /// ```
    /// let names = rayorch_kit::names::RootNames::new();
    /// let meta = std::sync::Arc::new(serde_json::json!({"lang": "en"}));
    /// names.insert_with(3, "s3://b/a.pdf", Some(meta.clone()));
    /// assert_eq!(names.take(3), Some(("s3://b/a.pdf".into(), Some(meta))));
    /// ```
    pub fn insert_with(&self, key: u64, name: impl Into<Arc<str>>, meta: Option<Meta>) {
        self.map().insert(key, (name.into(), meta));
    }

    /// The name and metadata of `key`, forgotten (the sink, when the root
    /// ends).
    pub fn take(&self, key: u64) -> Option<Named> {
        self.map().remove(&key)
    }

    /// The names never taken, sorted: roots named and never ended.
    pub fn remaining(&self) -> Vec<String> {
        let mut v: Vec<String> = self.map().values().map(|(n, _)| n.to_string()).collect();
        v.sort();
        v
    }
}
