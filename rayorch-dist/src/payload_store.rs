//! Payloads: small values inline in messages, large ones by reference.
//!
//! A value whose encoding is at most `inline_max` bytes travels inside the
//! batch or report message, as long as the message's inline payloads stay
//! within `inline_total` (NATS refuses messages over its `max_payload`). A larger one is written to a [`PayloadStore`]
//! both sides reach (by default the run's JetStream Object Store bucket: no
//! extra service; or a store outside the broker, [`SharedPayloads`], which
//! keeps large payloads off it), and the message carries its key and size. Anything over `cap` is refused
//! with a typed error before it is sent. Every byte put on the wire, inline or
//! stored, is counted in [`WireBytes`].
//!
//! Reading back never trusts a size it was told: a stored payload whose
//! declared size is over `cap` (`DistConfig::payload_cap`) is refused before
//! the store is asked, and the store reads at most the declared size (an
//! object holding more is refused, not read to its end).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_nats::jetstream::object_store::ObjectStore;
use rayorch_runtime::BoxFuture;
use rayorch_runtime::spi::Value;
use tokio::io::AsyncReadExt;

use crate::codec::Codecs;
use crate::error::DistError;
use crate::messages::Slot;

/// Where large payloads live. Keys are unique per value (owner run, ticket,
/// slot); a store need not support overwrite.
pub trait PayloadStore: Send + Sync {
    /// Store bytes under a key.
    fn put(&self, key: String, bytes: Vec<u8>) -> BoxFuture<Result<(), String>>;
    /// Read the bytes of a key: an object of more than `max` bytes is
    /// refused (an error starting with [`TOO_LARGE`]) without reading more
    /// than `max + 1` bytes of it.
    fn get(&self, key: String, max: u64) -> BoxFuture<Result<Vec<u8>, String>>;
    /// Forget a key (best effort: a payload nobody will read again).
    fn delete(&self, key: String) -> BoxFuture<Result<(), String>>;
}

/// [`PayloadStore`] over a JetStream Object Store bucket.
#[derive(Clone)]
pub struct JetStreamObjects(pub ObjectStore);

/// How a store error says the object is not there (no retry can help: its
/// batch was decided and its payloads released). A [`PayloadStore`] of
/// another crate starts its not-found errors with it.
pub const GONE: &str = "not in the store: ";

/// A payload store outside the broker (an object-store prefix, say), which
/// the owner and every worker reach: `DistConfig::payloads`. Large payloads
/// then never cross the broker, only their keys. The owner tells each
/// worker its `url` when it says hello; a worker whose own is another
/// (or none) is refused before it serves anything
/// (`DistError::PayloadStoreMismatch`): it would read keys that are not in
/// its store.
#[derive(Clone)]
pub struct SharedPayloads {
    /// Where the store is, as the owner and the workers name it.
    pub url: String,
    /// The store.
    pub store: Arc<dyn PayloadStore>,
}

impl std::fmt::Debug for SharedPayloads {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedPayloads")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

/// How a store error says the object is larger than the caller allows
/// (no retry can help either).
pub const TOO_LARGE: &str = "larger than allowed: ";

impl PayloadStore for JetStreamObjects {
    fn put(&self, key: String, bytes: Vec<u8>) -> BoxFuture<Result<(), String>> {
        let s = self.0.clone();
        Box::pin(async move {
            let mut r: &[u8] = &bytes;
            s.put(key.as_str(), &mut r)
                .await
                .map(|_| ())
                .map_err(|e| e.to_string())
        })
    }

    fn get(&self, key: String, max: u64) -> BoxFuture<Result<Vec<u8>, String>> {
        let s = self.0.clone();
        Box::pin(async move {
            let o = s.get(key.as_str()).await.map_err(|e| {
                let gone = e.kind() == async_nats::jetstream::object_store::GetErrorKind::NotFound;
                format!("{}{e}", if gone { GONE } else { "" })
            })?;
            let size = o.info().size as u64;
            if size > max {
                return Err(format!(
                    "{TOO_LARGE}object `{key}` holds {size} bytes, at most {max} allowed"
                ));
            }
            // The object's info could be wrong: read one byte past `max`
            // at most, never to the end of whatever the stream holds.
            let mut out = Vec::new();
            o.take(max.saturating_add(1))
                .read_to_end(&mut out)
                .await
                .map_err(|e| e.to_string())?;
            if out.len() as u64 > max {
                return Err(format!("{TOO_LARGE}object `{key}` holds more than {max} bytes"));
            }
            Ok(out)
        })
    }

    fn delete(&self, key: String) -> BoxFuture<Result<(), String>> {
        let s = self.0.clone();
        Box::pin(async move { s.delete(key.as_str()).await.map_err(|e| e.to_string()) })
    }
}

/// Bytes that crossed the broker, by route.
#[derive(Debug, Default)]
pub struct WireBytes {
    /// Payload bytes sent inline in messages.
    pub inline: AtomicU64,
    /// Payload bytes written to the store.
    pub stored: AtomicU64,
    /// Payload bytes read back from the store.
    pub fetched: AtomicU64,
    /// Whole message bytes published (frames included).
    pub messages: AtomicU64,
    /// Payload bytes this process decoded into values (inline or fetched).
    pub decoded: AtomicU64,
}

impl WireBytes {
    /// A plain copy of the counters: (inline, stored, fetched, messages).
    pub fn snapshot(&self) -> [u64; 4] {
        [
            self.inline.load(Ordering::Relaxed),
            self.stored.load(Ordering::Relaxed),
            self.fetched.load(Ordering::Relaxed),
            self.messages.load(Ordering::Relaxed),
        ]
    }
}

/// Encodes values into slots and back, choosing inline or stored by size.
#[derive(Clone)]
pub(crate) struct Payloads {
    pub(crate) codecs: Codecs,
    pub(crate) store: Arc<dyn PayloadStore>,
    pub(crate) inline_max: usize,
    pub(crate) cap: usize,
    pub(crate) bytes: Arc<WireBytes>,
    /// How long a failing store call is retried.
    pub(crate) retry_for: std::time::Duration,
    /// How long one attempt of a store call may take before it counts as
    /// failed (a read cut off by a lost connection can otherwise wait
    /// forever for its next chunk).
    pub(crate) attempt: std::time::Duration,
}

impl Payloads {
    /// A store call, retried while it fails for `retry_for` (the broker
    /// restarting or unreachable): a transient outage must not fail the
    /// batch whose payload it carries.
    async fn retrying<T, F: std::future::Future<Output = Result<T, String>>>(
        &self,
        call: impl Fn() -> F,
    ) -> Result<T, DistError> {
        let start = std::time::Instant::now();
        loop {
            let tried = tokio::time::timeout(self.attempt, call()).await;
            match tried.unwrap_or_else(|_| Err(format!("no answer within {:?}", self.attempt))) {
                Ok(v) => return Ok(v),
                Err(e)
                    if e.starts_with(GONE)
                        || e.starts_with(TOO_LARGE)
                        || start.elapsed() >= self.retry_for =>
                {
                    return Err(DistError::Store(e));
                }
                Err(_) => tokio::time::sleep(std::time::Duration::from_millis(250)).await,
            }
        }
    }

    /// Encode one slot; `key` names it in the store if it is stored.
    pub(crate) async fn encode_slot(
        &self,
        call: &str,
        side: &'static str,
        v: Option<&Value>,
        key: impl FnOnce() -> String,
        budget: &mut usize,
    ) -> Result<Slot, DistError> {
        let Some(v) = v else { return Ok(Slot::None) };
        let Some((tag, b)) = self.codecs.encode(v) else {
            return Err(DistError::NoCodec {
                call: call.to_string(),
                side,
            });
        };
        if b.len() > self.cap {
            return Err(DistError::PayloadTooLarge {
                call: call.to_string(),
                bytes: b.len(),
                cap: self.cap,
            });
        }
        let n = b.len() as u64;
        // Inline while the message stays under its budget (NATS refuses a
        // message over the server's max_payload, 1 MiB by default).
        if b.len() <= self.inline_max && b.len() <= *budget {
            *budget -= b.len();
            self.bytes.inline.fetch_add(n, Ordering::Relaxed);
            return Ok(Slot::Inline(tag.to_string(), b));
        }
        let key = key();
        let tag = tag.to_string();
        let b = &b;
        self.retrying(|| self.store.put(key.clone(), b.clone())).await?;
        self.bytes.stored.fetch_add(n, Ordering::Relaxed);
        Ok(Slot::Ref(tag, key, n))
    }

    /// Decode one slot (reading the store for a reference).
    /// A codec's refusal of a value is `DistError::Wire` with `what:
    /// "value"` (a worker fails that Grain alone); any other error is the
    /// payload's or the store's.
    pub(crate) async fn decode_slot(&self, s: &Slot) -> Result<Option<Value>, DistError> {
        let wire = |cause: String| DistError::Wire {
            what: "payload",
            cause,
        };
        let refused = |cause: String| DistError::Wire { what: "value", cause };
        match s {
            Slot::None => Ok(None),
            Slot::Inline(_, b) if b.len() > self.cap => Err(wire(format!(
                "inline payload of {} bytes, at most {} allowed (DistConfig::payload_cap)",
                b.len(),
                self.cap
            ))),
            Slot::Inline(tag, b) => {
                self.bytes.decoded.fetch_add(b.len() as u64, Ordering::Relaxed);
                self.codecs.decode(tag, b).map(Some).map_err(refused)
            }
            Slot::List(_) => Err(wire("a list of slots where one value was expected".into())),
            Slot::Ref(_, key, n) if *n > self.cap as u64 => Err(wire(format!(
                "stored payload `{key}` declares {n} bytes, at most {} allowed (DistConfig::payload_cap)",
                self.cap
            ))),
            Slot::Ref(tag, key, n) => {
                let b = self.retrying(|| self.store.get(key.clone(), *n)).await?;
                if b.len() as u64 != *n {
                    return Err(wire(format!(
                        "stored payload `{key}` has {} bytes, expected {n}",
                        b.len()
                    )));
                }
                self.bytes.fetched.fetch_add(*n, Ordering::Relaxed);
                self.bytes.decoded.fetch_add(*n, Ordering::Relaxed);
                self.codecs.decode(tag, &b).map(Some).map_err(refused)
            }
        }
    }

    /// Forget the stored payloads among `slots` (after their batch is decided).
    pub(crate) async fn release(&self, slots: &[Slot]) {
        for key in stored_keys(slots) {
            let _ = self.store.delete(key).await;
        }
    }

    /// The slot that hands `r` on in a batch message: its own, or, when an
    /// inline one does not fit the message's budget, the same bytes put in
    /// the store under `key` (then `true`: the batch owns that object).
    pub(crate) async fn forward(
        &self,
        r: &WireRef,
        key: impl FnOnce() -> String,
        budget: &mut usize,
    ) -> Result<(Slot, bool), DistError> {
        match &r.slot {
            Slot::Inline(tag, b) if b.len() > *budget => {
                let key = key();
                self.retrying(|| self.store.put(key.clone(), b.clone())).await?;
                self.bytes.stored.fetch_add(b.len() as u64, Ordering::Relaxed);
                Ok((Slot::Ref(tag.clone(), key, b.len() as u64), true))
            }
            Slot::Inline(_, b) => {
                *budget -= b.len();
                self.bytes.inline.fetch_add(b.len() as u64, Ordering::Relaxed);
                Ok((r.slot.clone(), false))
            }
            s => Ok((s.clone(), false)),
        }
    }
}

/// The store keys among `slots` (list elements included).
pub(crate) fn stored_keys(slots: &[Slot]) -> Vec<String> {
    let mut keys = Vec::new();
    for s in slots {
        match s {
            Slot::Ref(_, key, _) => keys.push(key.clone()),
            Slot::List(items) => keys.extend(stored_keys(items)),
            Slot::None | Slot::Inline(..) => {}
        }
    }
    keys
}

/// A value the owner hands on without reading it (`rayorch::spi::Forward`):
/// the slot a worker sent. Its stored object, if any, is released when the
/// engine drops the last copy of the value (no Call can read it any more).
pub(crate) struct WireRef {
    pub(crate) slot: Slot,
    release: Option<tokio::sync::mpsc::UnboundedSender<String>>,
}

impl WireRef {
    /// `slot` as a value; `release` hears its store key when it is dropped.
    pub(crate) fn value(slot: Slot, release: &tokio::sync::mpsc::UnboundedSender<String>) -> Value {
        Arc::new(WireRef {
            slot,
            release: Some(release.clone()),
        })
    }
}

impl Drop for WireRef {
    fn drop(&mut self) {
        if let (Some(tx), Slot::Ref(_, key, _)) = (&self.release, &self.slot) {
            let _ = tx.send(key.clone());
        }
    }
}

/// The store before the owner has connected: every call fails.
pub(crate) struct NoStore;

impl PayloadStore for NoStore {
    fn put(&self, _: String, _: Vec<u8>) -> BoxFuture<Result<(), String>> {
        Box::pin(async { Err("not connected".to_string()) })
    }
    fn get(&self, _: String, _: u64) -> BoxFuture<Result<Vec<u8>, String>> {
        Box::pin(async { Err("not connected".to_string()) })
    }
    fn delete(&self, _: String) -> BoxFuture<Result<(), String>> {
        Box::pin(async { Err("not connected".to_string()) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn payloads() -> Payloads {
        Payloads {
            codecs: Codecs::new().bytes(),
            store: Arc::new(NoStore),
            inline_max: 4,
            cap: 8,
            bytes: Arc::new(WireBytes::default()),
            retry_for: std::time::Duration::ZERO,
            attempt: std::time::Duration::from_secs(5),
        }
    }

    fn run<T>(f: impl std::future::Future<Output = T>) -> T {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap()
            .block_on(f)
    }

    #[test]
    fn sizes_choose_the_route_and_the_cap_is_typed() {
        let p = payloads();
        let v = |n: usize| Arc::new(vec![7u8; n]) as Value;
        let mut room = usize::MAX;
        let inline = run(p.encode_slot("ocr", "inputs", Some(&v(3)), || "k".into(), &mut room)).unwrap();
        assert_eq!(inline, Slot::Inline("bytes".into(), vec![7; 3]));
        assert_eq!(
            run(p.decode_slot(&inline))
                .unwrap()
                .unwrap()
                .downcast_ref::<Vec<u8>>(),
            Some(&vec![7; 3])
        );
        // Over inline_max: goes to the store (which fails here, typed).
        let stored = run(p.encode_slot("ocr", "inputs", Some(&v(6)), || "k".into(), &mut room));
        assert!(matches!(stored, Err(DistError::Store(_))), "{stored:?}");
        let big = run(p.encode_slot("ocr", "inputs", Some(&v(9)), || "k".into(), &mut room)).unwrap_err();
        assert!(
            matches!(big, DistError::PayloadTooLarge { bytes: 9, cap: 8, .. }),
            "{big}"
        );
        assert!(big.to_string().contains("`ocr`"), "{big}");
        let odd = Arc::new(1.5f32) as Value;
        let none = run(p.encode_slot("ocr", "outputs", Some(&odd), || "k".into(), &mut room)).unwrap_err();
        assert!(
            matches!(none, DistError::NoCodec { side: "outputs", .. }),
            "{none}"
        );
        assert_eq!(
            run(p.encode_slot("ocr", "inputs", None, || "k".into(), &mut room)).unwrap(),
            Slot::None
        );
        assert_eq!(
            p.bytes.snapshot()[0],
            3,
            "only the inline value's bytes were sent"
        );
        // A message's inline budget spent: the next small value is stored.
        let mut room = 4;
        let first = run(p.encode_slot("ocr", "inputs", Some(&v(3)), || "k".into(), &mut room));
        assert!(matches!(first, Ok(Slot::Inline(..))) && room == 1);
        let second = run(p.encode_slot("ocr", "inputs", Some(&v(3)), || "k".into(), &mut room));
        assert!(matches!(second, Err(DistError::Store(_))), "{second:?}");
    }

    /// A store holding `len` bytes under every key; it records the `max`
    /// each read was given and, like a real store, refuses a larger object.
    struct Recording {
        len: u64,
        asked: std::sync::Mutex<Vec<u64>>,
    }

    impl PayloadStore for Recording {
        fn put(&self, _: String, _: Vec<u8>) -> BoxFuture<Result<(), String>> {
            Box::pin(async { Ok(()) })
        }
        fn get(&self, _: String, max: u64) -> BoxFuture<Result<Vec<u8>, String>> {
            self.asked.lock().unwrap().push(max);
            let len = self.len;
            Box::pin(async move {
                if len > max {
                    return Err(format!("{TOO_LARGE}{len} > {max}"));
                }
                Ok(vec![1; len as usize])
            })
        }
        fn delete(&self, _: String) -> BoxFuture<Result<(), String>> {
            Box::pin(async { Ok(()) })
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 64, ..Default::default() })]

        /// A declared size is checked against the cap before the store is
        /// asked, and the store is never asked for more than was declared.
        #[test]
        fn declared_sizes_never_reach_the_store_over_the_cap(
            declared in proptest::prop_oneof![0u64..12, proptest::prelude::any::<u64>()],
            held in 0u64..12,
        ) {
            let store = Arc::new(Recording { len: held, asked: Default::default() });
            let p = Payloads { store: store.clone(), ..payloads() };
            let slot = Slot::Ref("bytes".into(), "k".into(), declared);
            let r = run(p.decode_slot(&slot));
            let asked = store.asked.lock().unwrap().clone();
            if declared > p.cap as u64 {
                proptest::prop_assert!(asked.is_empty(), "store read for {declared} bytes");
                proptest::prop_assert!(
                    matches!(&r, Err(DistError::Wire { cause, .. }) if cause.contains("payload_cap")),
                    "{r:?}"
                );
            } else {
                proptest::prop_assert!(asked.iter().all(|&m| m == declared), "{asked:?}");
                proptest::prop_assert_eq!(r.is_ok(), held == declared, "{:?}", r);
            }
        }
    }

    #[test]
    fn an_inline_payload_over_the_cap_is_refused() {
        let p = payloads();
        let r = run(p.decode_slot(&Slot::Inline("bytes".into(), vec![0; 9])));
        assert!(
            matches!(&r, Err(DistError::Wire { cause, .. }) if cause.contains("9 bytes")),
            "{r:?}"
        );
    }

    /// A store whose calls never answer (a read cut off mid-object).
    struct Silent(std::sync::atomic::AtomicU32);

    impl PayloadStore for Silent {
        fn put(&self, _: String, _: Vec<u8>) -> BoxFuture<Result<(), String>> {
            Box::pin(std::future::pending())
        }
        fn get(&self, _: String, _: u64) -> BoxFuture<Result<Vec<u8>, String>> {
            self.0.fetch_add(1, Ordering::Relaxed);
            Box::pin(std::future::pending())
        }
        fn delete(&self, _: String) -> BoxFuture<Result<(), String>> {
            Box::pin(std::future::pending())
        }
    }

    #[test]
    fn a_store_call_that_never_answers_is_retried_then_a_typed_error() {
        let silent = Arc::new(Silent(std::sync::atomic::AtomicU32::new(0)));
        let p = Payloads {
            store: silent.clone(),
            retry_for: std::time::Duration::from_millis(100),
            attempt: std::time::Duration::from_millis(40),
            ..payloads()
        };
        let slot = Slot::Ref("bytes".into(), "k".into(), 6);
        let err = run(p.decode_slot(&slot)).unwrap_err();
        assert!(
            matches!(&err, DistError::Store(e) if e.contains("no answer within")),
            "{err}"
        );
        assert!(
            silent.0.load(Ordering::Relaxed) >= 2,
            "retried after a silent attempt"
        );
    }
}
