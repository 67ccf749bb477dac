//! Large payloads of a distributed run in object storage
//! (`--payload-store s3://bucket/prefix/`; features `dist` and `store`):
//! a [`PayloadStore`] over `object_store`, so page images and other large
//! values between the owner and the workers go to the store the inputs
//! already live in, and the broker carries only their keys.
//!
//! Invariants:
//! - **Keys stay under the run's prefix**: `<prefix>/<job>/<key>`, the
//!   engine's key unique per owner run, ticket and slot; two jobs sharing a
//!   prefix never meet.
//! - **A read never trusts a size**: the object's size from the store's
//!   answer is checked against the caller's bound before its body is read;
//!   a body longer than it said is refused too.
//! - **Not found is final** ([`GONE`]: the batch was decided and its
//!   payloads released; no retry helps); every other error is the engine's
//!   to retry (`rayorch_dist`'s payload retries), on top of the client's own
//!   (5xx, 429, SlowDown, cut connections: [`StoreOptions`]).
//! - What is left after a killed run (an owner's released payloads are
//!   deleted as their batches are decided) stays under `<prefix>/<job>/`; a
//!   lifecycle rule on the prefix, or deleting it between runs, removes it.

use std::sync::Arc;

use futures::StreamExt;
use object_store::path::Path as Key;
use object_store::{ObjectStore, ObjectStoreExt};
use rayorch::BoxFuture;
use rayorch_dist::{GONE, PayloadStore, SharedPayloads, TOO_LARGE};

use super::{StoreError, StoreOptions, Stores};

/// A [`PayloadStore`] under an object-store prefix.
pub struct ObjectPayloads {
    store: Arc<dyn ObjectStore>,
    prefix: Key,
    url: String,
}

impl ObjectPayloads {
    /// The store at `url` (`s3://bucket/prefix/`, `gs://…`, `az://…`),
    /// keys of job `job` under it; the client configured from the
    /// environment as for inputs (`AWS_*`, `AWS_ENDPOINT_URL`, …) and
    /// `opts`.
    pub fn new(url: &str, job: &str, opts: StoreOptions) -> Result<ObjectPayloads, StoreError> {
        if !url.contains("://") || url.starts_with("http") || url.starts_with("file:") {
            return Err(StoreError::BadUrl {
                input: url.to_string(),
                why: "--payload-store takes a bucket prefix the owner and every worker can write (s3://bucket/prefix/, gs://…, az://…)".into(),
            });
        }
        let (store, prefix) = Stores::new(opts).resolve(url)?;
        let prefix = prefix.clone().join(job);
        Ok(ObjectPayloads {
            store,
            url: format!("{}/{job}/", url.trim_end_matches('/')),
            prefix,
        })
    }

    /// Where its payloads go: `<url>/<job>/`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// This store as a distributed run shares it (`DistConfig::payloads`).
    pub fn shared(self) -> SharedPayloads {
        SharedPayloads {
            url: self.url.clone(),
            store: Arc::new(self),
        }
    }

    fn key(&self, key: &str) -> Key {
        self.prefix.clone().join(key)
    }
}

impl PayloadStore for ObjectPayloads {
    fn put(&self, key: String, bytes: Vec<u8>) -> BoxFuture<Result<(), String>> {
        let (store, at) = (self.store.clone(), self.key(&key));
        Box::pin(async move {
            store
                .put(&at, bytes.into())
                .await
                .map(|_| ())
                .map_err(|e| format!("{at}: {e}"))
        })
    }

    fn get(&self, key: String, max: u64) -> BoxFuture<Result<Vec<u8>, String>> {
        let (store, at) = (self.store.clone(), self.key(&key));
        Box::pin(async move {
            let got = match store.get(&at).await {
                Ok(got) => got,
                Err(object_store::Error::NotFound { .. }) => return Err(format!("{GONE}{at}")),
                Err(e) => return Err(format!("{at}: {e}")),
            };
            let size = got.meta.size;
            if size > max {
                return Err(format!(
                    "{TOO_LARGE}object `{at}` holds {size} bytes, at most {max} allowed"
                ));
            }
            let mut out = Vec::with_capacity(size as usize);
            let mut body = got.into_stream();
            while let Some(chunk) = body.next().await {
                let chunk = chunk.map_err(|e| format!("{at}: reading the body: {e}"))?;
                if (out.len() + chunk.len()) as u64 > max {
                    return Err(format!("{TOO_LARGE}object `{at}` holds more than {max} bytes"));
                }
                out.extend_from_slice(&chunk);
            }
            Ok(out)
        })
    }

    fn delete(&self, key: String) -> BoxFuture<Result<(), String>> {
        let (store, at) = (self.store.clone(), self.key(&key));
        Box::pin(async move { store.delete(&at).await.map_err(|e| format!("{at}: {e}")) })
    }
}
