//! Codecs: how a type-erased Port value crosses the network.
//!
//! The engine carries values as `Arc<dyn Any>`; only the plan's typed glue
//! knows their types. A remote Call's inputs and outputs therefore need a
//! codec per concrete type, registered once on the owner and on every worker
//! (the same code builds both). A codec is found by `TypeId` when encoding and
//! by its tag (a stable name) when decoding, so a tag names the same type in
//! every process.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::Arc;

use rayorch_runtime::spi::Value;
use serde::Serialize;
use serde::de::DeserializeOwned;

type Enc = Arc<dyn Fn(&Value) -> Vec<u8> + Send + Sync>;
type Roots = Arc<dyn Fn(&[String]) -> Result<(), String> + Send + Sync>;
type Dec = Arc<dyn Fn(&[u8]) -> Result<Value, String> + Send + Sync>;

#[derive(Clone)]
struct Entry {
    tag: String,
    enc: Enc,
    dec: Dec,
}

/// The codec registry for one pipeline's remote values.
#[derive(Clone, Default)]
pub struct Codecs {
    by_type: HashMap<TypeId, Entry>,
    by_tag: HashMap<String, Entry>,
    roots: Option<Roots>,
}

impl Codecs {
    /// An empty registry.
    pub fn new() -> Codecs {
        Codecs::default()
    }

    /// Restrict what this process's decoders may read: on a worker, once the
    /// owner has answered its hello, `apply` gets the input roots (folders,
    /// URL prefixes) it may read documents from (the owner's
    /// `DistConfig::input_roots`, narrowed by the worker's own) and must
    /// make the codecs refuse any value naming something else. Without it
    /// the roots are not enforced.
    pub fn input_roots(
        mut self,
        apply: impl Fn(&[String]) -> Result<(), String> + Send + Sync + 'static,
    ) -> Codecs {
        self.roots = Some(Arc::new(apply));
        self
    }

    pub(crate) fn apply_input_roots(&self, roots: &[String]) -> Result<(), crate::DistError> {
        match &self.roots {
            Some(apply) => apply(roots).map_err(crate::DistError::Security),
            None => Ok(()),
        }
    }

    /// Register `T` with its own encode and decode functions under `tag`.
    pub fn custom<T: Any + Send + Sync>(
        mut self,
        tag: &str,
        enc: impl Fn(&T) -> Vec<u8> + Send + Sync + 'static,
        dec: impl Fn(&[u8]) -> Result<T, String> + Send + Sync + 'static,
    ) -> Codecs {
        let e = Entry {
            tag: tag.to_string(),
            enc: Arc::new(move |v: &Value| match v.downcast_ref::<T>() {
                Some(t) => enc(t),
                // Only reached through `by_type`, keyed by this very TypeId.
                None => Vec::new(),
            }),
            dec: Arc::new(move |b: &[u8]| dec(b).map(|t| Arc::new(t) as Value)),
        };
        self.by_type.insert(TypeId::of::<T>(), e.clone());
        self.by_tag.insert(tag.to_string(), e);
        self
    }

    /// Register `T` as JSON (serde), tagged with its type name.
    pub fn json<T: Serialize + DeserializeOwned + Any + Send + Sync>(self) -> Codecs {
        self.custom::<T>(
            std::any::type_name::<T>(),
            |t| serde_json::to_vec(t).unwrap_or_default(),
            |b| serde_json::from_slice(b).map_err(|e| e.to_string()),
        )
    }

    /// Register `Vec<u8>` as raw bytes (no encoding cost): page images,
    /// tensors already serialised.
    pub fn bytes(self) -> Codecs {
        self.custom::<Vec<u8>>("bytes", |b| b.clone(), |b| Ok(b.to_vec()))
    }

    /// The tag and encoded bytes of a value, `None` for an unregistered type.
    pub fn encode(&self, v: &Value) -> Option<(&str, Vec<u8>)> {
        let any: &(dyn Any + Send + Sync) = &**v;
        let e = self.by_type.get(&any.type_id())?;
        Some((&e.tag, (e.enc)(v)))
    }

    /// Decode bytes under a tag.
    pub fn decode(&self, tag: &str, b: &[u8]) -> Result<Value, String> {
        match self.by_tag.get(tag) {
            Some(e) => (e.dec)(b),
            None => Err(format!(
                "no codec registered under `{tag}` in this process; register the same codecs on the owner and the workers"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip_by_type_and_tag() {
        let c = Codecs::new().json::<String>().json::<Vec<u32>>().bytes();
        let v: Value = Arc::new(vec![1u32, 2, 3]);
        let (tag, b) = c.encode(&v).unwrap();
        let back = c.decode(tag, &b).unwrap();
        assert_eq!(back.downcast_ref::<Vec<u32>>(), Some(&vec![1, 2, 3]));
        let raw: Value = Arc::new(vec![7u8, 8]);
        assert_eq!(c.encode(&raw).unwrap(), ("bytes", vec![7, 8]));
        let unknown: Value = Arc::new(1.5f64);
        assert!(c.encode(&unknown).is_none());
        assert!(c.decode("nope", b"").unwrap_err().contains("nope"));
    }
}
