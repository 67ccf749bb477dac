//! The lineage owner: the runtime's run loop (`rayorch::spi::run`) with
//! JetStream as its backend.
//!
//! The loop owns the engine, admission, delivery, the journal, duplicate
//! keys, backpressure, stall detection, cancellation and the summary,
//! exactly as in a local run. This backend ([`DistBackend`]) publishes
//! reserved batches to each Call's work queue while the Call has credits,
//! runs the Calls the owner keeps on the runtime's own replica pool
//! (`ReplicaPool`, panics and timeouts handled as locally), and turns
//! worker reports into the loop's reports. State per published batch is a
//! [`Ticket`]; a ticket leaves the map exactly once (a report passes the
//! fence, or the lease expires), so the engine hears of each dispatch
//! exactly once.
//!
//! Payloads by reference: a value on a Port that only Calls on workers read
//! is never decoded here ([`rayorch::spi::Forward`]): the owner keeps the
//! worker's slot as an opaque value and forwards it in the next batch; a
//! list that only feeds an `expand!` into Calls on workers arrives split
//! into per-element slots. The owner decodes only what its own Calls and
//! the outputs read (counted in [`WireBytes::decoded`]). Reports are
//! decoded off the control loop, in tasks of their own. A referenced
//! object lives while the engine holds its value or a [`Ticket`] names it
//! (the last attempt of a Grain takes the engine's value with the batch),
//! so no batch in flight can find its input deleted.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use async_nats::jetstream::{self, consumer, object_store, stream};
use futures::{FutureExt, Stream, StreamExt};
use rayorch_runtime::sink::{Callback, Sink};
use rayorch_runtime::spi::{
    AttemptError, AttemptResult, Backend, BatchId, Dispatch, Engine, EngineConfig, Finished, Forward,
    Journal, JournalOptions, LoopConfig, ReplicaPool, Report as LoopReport, Value, ValueList, forwarding,
};
use rayorch_runtime::{
    BackendGauge, CancelHandle, Cause, Data, Observer, Outcome, Plan, RootOutcome, RunSummary,
};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::binding::{BatchKey, Seal, batch_key, opens, proof_holds};
use crate::codec::Codecs;
use crate::error::DistError;
use crate::messages::{BatchMsg, Claim, Ctl, Hello, Report, Slot, WireFailure, WireOutcome};
use crate::payload_store::{JetStreamObjects, Payloads, WireBytes, WireRef, stored_keys};
use crate::{DistConfig, Storage};

/// Live counters of an owner, readable while it runs.
#[derive(Debug, Default)]
pub struct OwnerStats {
    /// Batches published to the work queues.
    pub batches_published: AtomicU64,
    /// Grains in them.
    pub grains_published: AtomicU64,
    /// Claims and claim heartbeats received.
    pub claims: AtomicU64,
    /// Batches whose report passed the fence (and went to the engine).
    pub batches_committed: AtomicU64,
    /// ... of which came from a JetStream redelivery (delivery count > 1).
    pub redelivered_commits: AtomicU64,
    /// Reports refused by the generation fence (an older delivery than one
    /// already claimed).
    pub stale_fenced: AtomicU64,
    /// Reports of batches already decided (committed, or expired and retried).
    pub stale_unknown: AtomicU64,
    /// Claims and reports of live batches refused as not from the worker
    /// that pulled and claimed the batch: a wrong proof, a second seal for
    /// a claimed delivery, or an opening that does not open the seal
    /// (`binding`). The batch's real report still commits.
    pub forged_refused: AtomicU64,
    /// Batches whose owner lease expired (handed back to the engine as failed
    /// attempts).
    pub lease_expired: AtomicU64,
    /// Control frames that did not parse (another build on the subject).
    pub malformed: AtomicU64,
    /// Workers whose hello matched the plan.
    pub workers_registered: AtomicU64,
    /// Workers refused for a fingerprint mismatch.
    pub workers_refused: AtomicU64,
    /// The most Grains queued in the owner per Call (plan order; the
    /// engine's upper bound), sampled every turn.
    pub queue_high_water: Mutex<Vec<u64>>,
    /// Payload bytes on the wire, and those the owner decoded.
    pub bytes: Arc<WireBytes>,
}

impl OwnerStats {
    /// All stale reports refused by the owner (fence + decided batches; the
    /// engine's own gate counts in the run's `rejected_reports`).
    pub fn stale_refused(&self) -> u64 {
        self.stale_fenced.load(Ordering::Relaxed) + self.stale_unknown.load(Ordering::Relaxed)
    }
}

/// One published batch, until it is decided.
struct Ticket {
    batch: BatchId,
    call: usize,
    grains: usize,
    dispatched: Instant,
    deadline: Instant,
    /// The newest JetStream delivery a worker claimed (the fence).
    claimed: u64,
    /// The seal of that delivery's claim: only the report that opens it
    /// commits (`binding`).
    seal: Option<Seal>,
    /// The batch's key, which a claim's proof must be made with.
    key: BatchKey,
    /// Store objects this batch's message created (released once decided;
    /// forwarded references belong to their values).
    owned: Vec<Slot>,
    /// The forwarded references the message names, held until the batch is
    /// decided: the attempt no retry can follow takes the engine's last
    /// copy of a value, and dropping it at publish would delete the object
    /// before a worker read it (only dropped, with the ticket).
    _forwarded: Vec<Value>,
}

/// Is `c` a claim the puller of `t`'s batch made, and not a second seal
/// for a delivery already claimed? (A claim of an older delivery than the
/// newest claimed passes here; the fence decides its report.)
fn claim_holds(t: &Ticket, c: &Claim) -> bool {
    proof_holds(&t.key, c.run, c.ticket, c.delivered, &c.seal, &c.proof)
        && (c.delivered != t.claimed || t.seal.is_none_or(|s| s == c.seal))
}

/// The seal of each committed report, for the last [`Committed::KEEP`]
/// tickets (a copy of a report arrives within moments of it).
#[derive(Default)]
struct Committed {
    seals: HashMap<u64, Seal>,
    order: std::collections::VecDeque<u64>,
}

impl Committed {
    const KEEP: usize = 1 << 16;

    fn insert(&mut self, ticket: u64, seal: Seal) {
        if self.order.len() == Self::KEEP
            && let Some(old) = self.order.pop_front()
        {
            self.seals.remove(&old);
        }
        self.order.push_back(ticket);
        self.seals.insert(ticket, seal);
    }

    fn seal(&self, ticket: u64) -> Option<Seal> {
        self.seals.get(&ticket).copied()
    }
}

/// A registered worker: when it was last heard of, and its slots per Call.
struct Seen {
    at: Instant,
    calls: Vec<(u32, u32)>,
}

/// A report that passed the fence, decoded by its task.
struct Decoded {
    finished: Finished,
    delivered: u64,
    /// Store objects to release now (decoded outputs, the batch's own).
    release: Vec<String>,
}

/// The lineage owner of one job.
pub struct Owner {
    plan: Plan,
    cfg: DistConfig,
    payloads: Payloads,
    stats: Arc<OwnerStats>,
    journal: Option<JournalOptions>,
    unique_keys: bool,
    /// Calls this process runs itself (`parse_calls` syntax).
    local: String,
    control: CancelHandle,
    observer: Option<Box<dyn Observer>>,
}

impl Owner {
    /// An owner for `plan`; `codecs` must cover every type a Call takes or
    /// returns (the workers register the same).
    pub fn new(plan: &Plan, codecs: Codecs, cfg: DistConfig) -> Owner {
        let stats = Arc::new(OwnerStats::default());
        Owner {
            plan: plan.clone(),
            payloads: Payloads {
                codecs,
                store: Arc::new(crate::payload_store::NoStore),
                inline_max: cfg.inline_max,
                cap: cfg.payload_cap,
                bytes: stats.bytes.clone(),
                retry_for: cfg.owner_wait,
                attempt: cfg.ack_wait * 2,
            },
            cfg,
            stats,
            journal: None,
            unique_keys: false,
            local: String::new(),
            control: CancelHandle::default(),
            observer: None,
        }
    }

    /// Run these Calls in the owner process instead of on workers
    /// (`name:slots,...` as a worker's `--calls`; empty: none), on the
    /// runtime's replica pool: cheap maps next to their data save a round
    /// trip through the broker each. They are never published.
    #[must_use]
    pub fn local_calls(mut self, calls: &str) -> Owner {
        self.local = calls.to_string();
        self
    }

    /// Journal the run (as [`Runner::journal`](rayorch_runtime::Runner::journal)):
    /// every root handed to the sink is recorded, and an owner restarted
    /// over the same journal resumes — the roots it holds are skipped, the
    /// sink's outputs are cut back to the last commit, the previous run's
    /// leftover queues are dropped and the rest runs again.
    #[must_use]
    pub fn journal(mut self, opts: JournalOptions) -> Owner {
        self.journal = Some(opts);
        self
    }

    /// Refuse a repeated root key even after its first root finished, as
    /// [`Runner::unique_keys`](rayorch_runtime::Runner::unique_keys) (a set
    /// of every key; off, a journaled run still refuses every key its
    /// journal holds).
    #[must_use]
    pub fn unique_keys(mut self, on: bool) -> Owner {
        self.unique_keys = on;
        self
    }

    /// Watch the run (batch events, per-Domain counts), as
    /// [`Runner::observe`](rayorch_runtime::Runner::observe).
    #[must_use]
    pub fn observe(mut self, observer: impl Observer + 'static) -> Owner {
        self.observer = Some(Box::new(observer));
        self
    }

    /// A handle that stops the run from anywhere, as a local run's
    /// (`stop_admitting` drains, `cancel` abandons the live roots).
    pub fn cancel_handle(&self) -> CancelHandle {
        self.control.clone()
    }

    /// The live counters (shared: clone the `Arc` before `run`).
    pub fn stats(&self) -> Arc<OwnerStats> {
        self.stats.clone()
    }

    /// Run every root of `source` to its outcome; each finished root goes to
    /// `sink` at once. Returns when the source is exhausted and every root
    /// was handed out. `T` is checked against the plan's source type first,
    /// as the `Runner` does: a mismatch is `RunError::SourceType` before
    /// anything connects or runs.
    pub async fn run<T: Data>(
        &mut self,
        source: impl Stream<Item = (u64, T)>,
        sink: impl FnMut(&RootOutcome) + Send,
    ) -> Result<RunSummary, DistError> {
        self.run_into(source, Callback(sink)).await
    }

    /// [`Owner::run`] into a [`Sink`] (files, journaled with
    /// [`Owner::journal`]); the sink is closed at the end.
    pub async fn run_into<T: Data>(
        &mut self,
        source: impl Stream<Item = (u64, T)>,
        sink: impl Sink,
    ) -> Result<RunSummary, DistError> {
        self.plan.check_source::<T>()?;
        let values = source.map(|(k, v)| (k, Arc::new(v) as Value));
        self.run_values_into(values, sink).await
    }

    /// [`Owner::run_into`] over type-erased roots (a source that holds
    /// [`Value`]s already): a root of another type than the plan's source
    /// takes fails alone (kind `source`, counted in
    /// `RunSummary::wrong_type_roots`); the run goes on.
    pub async fn run_values_into<S>(
        &mut self,
        source: S,
        mut sink: impl Sink,
    ) -> Result<RunSummary, DistError>
    where
        S: Stream<Item = (u64, Value)>,
    {
        self.cfg.check()?;
        let fingerprint = self.plan.fingerprint();
        let journal = match &self.journal {
            Some(opts) => Some(Journal::open(opts, &fingerprint, &mut sink)?),
            None => None,
        };
        let cfg = self.cfg.clone();
        // Broker link state, from the client's events: (down now, last reconnect).
        let link: Arc<Mutex<(bool, Option<Instant>)>> = Arc::default();
        let events = link.clone();
        let options = cfg.security.options(&cfg.url).await?.event_callback(move |ev| {
            let events = events.clone();
            async move {
                if let Ok(mut l) = events.lock() {
                    match ev {
                        async_nats::Event::Disconnected => l.0 = true,
                        async_nats::Event::Connected => *l = (false, Some(Instant::now())),
                        _ => {}
                    }
                }
            }
        });
        let client = cfg.security.connect(&cfg.url, options).await?;
        let js = jetstream::new(client.clone());
        self.setup(&js).await?;
        let ctl = client
            .subscribe(cfg.ctl_subject())
            .await
            .map_err(DistError::nats_any("subscribe"))?;
        let hello = client
            .subscribe(cfg.hello_subject())
            .await
            .map_err(DistError::nats_any("subscribe"))?;
        let local_spec = if self.local.trim().is_empty() {
            Vec::new()
        } else {
            crate::worker::parse_calls(&self.plan, &self.local)?
        };
        let calls = self.plan.calls().len();
        let mut local_slots = vec![0usize; calls];
        for &(c, n) in &local_spec {
            local_slots[c] += n as usize;
        }
        let local = ReplicaPool::new(
            &self.plan,
            |c| (local_slots[c] > 0).then_some(local_slots[c]),
            Some("owner".into()),
        );
        let forward = Arc::new(forwarding(&self.plan, |c| local_slots[c] == 0));
        let local_slots = local_slots.clone();
        let (release, released) = mpsc::unbounded_channel();
        // Detached: a delete the broker never answers must not hold the run.
        tokio::spawn(release_loop(self.payloads.clone(), released));
        let (decoded_tx, decoded) = mpsc::unbounded_channel();
        let (unpublished_tx, unpublished) = mpsc::unbounded_channel();
        let run_id = run_id();
        let mut backend = DistBackend {
            plan: self.plan.clone(),
            cfg: cfg.clone(),
            client: client.clone(),
            js: js.clone(),
            ctl,
            hello,
            run_id,
            fingerprint,
            tickets: HashMap::new(),
            in_flight: vec![0; calls],
            decoding: 0,
            slots: vec![0; calls],
            local_slots,
            workers: HashMap::new(),
            next_ticket: 0,
            committed: Committed::default(),
            stats: self.stats.clone(),
            payloads: self.payloads.clone(),
            local,
            link,
            forward,
            decoded_tx,
            decoded,
            unpublished_tx,
            unpublished,
            release,
        };
        let config = LoopConfig {
            engine: EngineConfig {
                window: cfg.window,
                window_children: cfg.window_children,
                ..EngineConfig::default()
            },
            backpressure: cfg.backpressure,
            journal,
            unique_keys: self.unique_keys,
        };
        let (result, observer) = rayorch_runtime::spi::run(
            &self.plan,
            config,
            sink,
            &mut backend,
            &self.control,
            self.observer.take(),
            source,
        )
        .await;
        self.observer = observer;
        let _ = client
            .publish(cfg.done_subject(), run_id.to_string().into())
            .await;
        let _ = client.flush().await;
        drop(backend);
        if result.is_ok() {
            teardown(&js, self.plan.calls().len(), &cfg).await;
        }
        result
    }

    /// Create the work queues and the payload bucket; refuse to start over a
    /// previous owner's unfinished queues (no journal to resume from).
    async fn setup(&mut self, js: &jetstream::Context) -> Result<(), DistError> {
        let cfg = &self.cfg;
        let storage = match cfg.storage {
            Storage::Memory => stream::StorageType::Memory,
            Storage::File => stream::StorageType::File,
        };
        for c in 0..self.plan.calls().len() {
            let name = cfg.stream(c);
            if let Ok(mut s) = js.get_stream(&name).await {
                let pending = s.info().await.map(|i| i.state.messages).unwrap_or(0);
                // With a journal a restart resumes: the old run's queues go,
                // its unjournaled roots run again.
                if pending > 0 && !cfg.fresh && self.journal.is_none() {
                    return Err(DistError::OwnerRestart {
                        job: cfg.job.clone(),
                        stream: name,
                        pending,
                    });
                }
                js.delete_stream(&name)
                    .await
                    .map_err(DistError::nats_any(format!("delete stream {name}")))?;
            }
            let s = js
                .create_stream(stream::Config {
                    name: name.clone(),
                    subjects: vec![cfg.call_subject(c)],
                    retention: stream::RetentionPolicy::WorkQueue,
                    storage,
                    num_replicas: cfg.replicas.max(1),
                    ..Default::default()
                })
                .await
                .map_err(DistError::nats_any(format!("create stream {name}")))?;
            s.create_consumer(consumer::pull::Config {
                durable_name: Some(format!("c{c}")),
                ack_policy: consumer::AckPolicy::Explicit,
                ack_wait: cfg.ack_wait,
                max_deliver: -1,
                ..Default::default()
            })
            .await
            .map_err(DistError::nats_any(format!("create consumer on {name}")))?;
        }
        // A store outside the broker: nothing to create (its keys are
        // unique per owner run).
        if let Some(shared) = &cfg.payloads {
            self.payloads.store = shared.store.clone();
            return Ok(());
        }
        let _ = js.delete_object_store(cfg.bucket()).await;
        let store = js
            .create_object_store(object_store::Config {
                bucket: cfg.bucket(),
                storage,
                num_replicas: cfg.replicas.max(1),
                ..Default::default()
            })
            .await
            .map_err(DistError::nats_any("create the payload bucket"))?;
        // Replicated, reads must go to the stream's leader: a direct get
        // (the bucket's default) may be answered by a replica that has not
        // applied the newest writes yet, and an object a worker just put
        // would read as missing. Workers open the bucket after this.
        let store = if cfg.replicas > 1 {
            let name = format!("OBJ_{}", cfg.bucket());
            let mut config = js
                .get_stream(&name)
                .await
                .map_err(DistError::nats_any(format!("read stream {name}")))?
                .info()
                .await
                .map_err(DistError::nats_any(format!("read stream {name}")))?
                .config
                .clone();
            config.allow_direct = false;
            js.update_stream(config)
                .await
                .map_err(DistError::nats_any(format!("update stream {name}")))?;
            js.get_object_store(cfg.bucket())
                .await
                .map_err(DistError::nats_any("open the payload bucket"))?
        } else {
            store
        };
        self.payloads.store = Arc::new(JetStreamObjects(store));
        Ok(())
    }
}

/// The run ended normally: its queues and payload bucket go.
async fn teardown(js: &jetstream::Context, calls: usize, cfg: &DistConfig) {
    for c in 0..calls {
        let _ = js.delete_stream(cfg.stream(c)).await;
    }
    let _ = js.delete_object_store(cfg.bucket()).await;
}

/// Deletes store objects nobody will read again, off the control loop.
async fn release_loop(payloads: Payloads, mut keys: mpsc::UnboundedReceiver<String>) {
    while let Some(key) = keys.recv().await {
        payloads.release(&[Slot::Ref(String::new(), key, 0)]).await;
    }
}

/// The run loop's backend over JetStream (see the module note).
struct DistBackend {
    plan: Plan,
    cfg: DistConfig,
    client: async_nats::Client,
    js: jetstream::Context,
    ctl: async_nats::Subscriber,
    hello: async_nats::Subscriber,
    run_id: u64,
    fingerprint: String,
    tickets: HashMap<u64, Ticket>,
    /// Published and undecided batches per Call (decoding ones included).
    in_flight: Vec<usize>,
    /// Reports past the fence whose decoding task has not answered yet.
    decoding: usize,
    /// Live worker slots per Call (from hellos and heartbeats).
    slots: Vec<usize>,
    /// The owner's own replicas per Call (`owner_local`).
    local_slots: Vec<usize>,
    workers: HashMap<String, Seen>,
    next_ticket: u64,
    stats: Arc<OwnerStats>,
    payloads: Payloads,
    /// The Calls the owner runs itself.
    local: ReplicaPool,
    link: Arc<Mutex<(bool, Option<Instant>)>>,
    forward: Arc<Vec<Vec<Forward>>>,
    decoded_tx: mpsc::UnboundedSender<Decoded>,
    decoded: mpsc::UnboundedReceiver<Decoded>,
    /// The seals of the reports that committed, for the last tickets.
    committed: Committed,
    /// A batch the broker never confirmed (retried for `owner_wait`): the
    /// run fails with it.
    unpublished_tx: mpsc::UnboundedSender<DistError>,
    unpublished: mpsc::UnboundedReceiver<DistError>,
    release: mpsc::UnboundedSender<String>,
}

/// Control frames one turn of the owner's loop reads before it judges
/// leases (a flood of frames cannot keep it from its other work).
const DRAIN_MAX: usize = 4096;

impl DistBackend {
    fn working(&self, c: usize) -> bool {
        self.in_flight[c] > 0 || self.local.working(c)
    }

    /// Live slots per Call: a worker is live while its heartbeats keep coming.
    fn count_slots(&mut self) {
        let now = Instant::now();
        let lease = self.cfg.lease;
        self.workers.retain(|_, s| now.duration_since(s.at) < lease);
        self.slots.iter_mut().for_each(|s| *s = 0);
        for s in self.workers.values() {
            for &(c, n) in &s.calls {
                if let Some(x) = self.slots.get_mut(c as usize) {
                    *x += n as usize;
                }
            }
        }
    }

    /// Encode and publish one batch of a Call on workers.
    async fn publish(&mut self, batch: rayorch_runtime::spi::Batch) -> Result<(), DistError> {
        let c = batch.call;
        self.next_ticket += 1;
        let (t, run_id) = (self.next_ticket, self.run_id);
        let name = self.plan.calls()[c].name.clone();
        let mut wire = Vec::with_capacity(batch.inputs.len() * batch.inputs.arity());
        let mut owned = Vec::new();
        let mut forwarded = Vec::new();
        let mut budget = self.cfg.inline_total;
        for (i, v) in batch.inputs.iter().flatten().enumerate() {
            let key = || format!("{run_id}-{t}-in{i}");
            let (slot, own) = match v
                .as_ref()
                .and_then(|x| x.downcast_ref::<WireRef>().map(|r| (x, r)))
            {
                Some((x, r)) => {
                    forwarded.push(x.clone());
                    self.payloads.forward(r, key, &mut budget).await?
                }
                None => {
                    let s = self
                        .payloads
                        .encode_slot(&name, "inputs", v.as_ref(), key, &mut budget)
                        .await?;
                    let own = matches!(s, Slot::Ref(..));
                    (s, own)
                }
            };
            if own {
                owned.push(slot.clone());
            }
            wire.push(slot);
        }
        let key = batch_key()?;
        let msg = BatchMsg {
            ticket: t,
            run: run_id,
            key,
            call: c as u32,
            arity: batch.inputs.arity() as u32,
            slots: wire,
            split: self.forward[c].iter().map(|f| *f == Forward::Split).collect(),
        };
        let bytes = msg.encode();
        self.stats
            .bytes
            .messages
            .fetch_add(bytes.len() as u64, Ordering::Relaxed);
        // Sent now, in dispatch order; the broker's confirmation (a round
        // trip) is awaited off the loop, so one batch's round trip never
        // holds the next batch's dispatch. A batch not confirmed is sent
        // again with the same message id (JetStream drops a copy).
        let subject = self.cfg.call_subject(c);
        let id = format!("{run_id}-{t}");
        let first = self
            .js
            .send_publish(subject.clone(), batch_message(&bytes, &id))
            .await;
        let (js, wait, failed) = (self.js.clone(), self.cfg.owner_wait, self.unpublished_tx.clone());
        tokio::spawn(async move {
            if let Err(e) = confirm_batch(&js, subject, wait, &id, &bytes, first).await {
                let _ = failed.send(e);
            }
        });
        self.stats.batches_published.fetch_add(1, Ordering::Relaxed);
        self.stats
            .grains_published
            .fetch_add(batch.grains.len() as u64, Ordering::Relaxed);
        self.in_flight[c] += 1;
        let now = Instant::now();
        self.tickets.insert(
            t,
            Ticket {
                batch: batch.id,
                call: c,
                grains: batch.grains.len(),
                dispatched: now,
                deadline: now + self.cfg.lease,
                claimed: 0,
                seal: None,
                key,
                owned,
                _forwarded: forwarded,
            },
        );
        Ok(())
    }

    /// One control frame.
    fn on_ctl(&mut self, payload: &[u8]) {
        self.stats
            .bytes
            .messages
            .fetch_add(payload.len() as u64, Ordering::Relaxed);
        match Ctl::decode(payload) {
            Ok(Ctl::Beat(h)) => {
                if h.fingerprint == self.fingerprint {
                    self.workers.insert(
                        h.worker,
                        Seen {
                            at: Instant::now(),
                            calls: h.calls,
                        },
                    );
                }
            }
            // A claim of an earlier owner run's batch: that run is gone.
            Ok(Ctl::Claim(c)) if c.run != self.run_id => {}
            Ok(Ctl::Claim(c)) => {
                self.stats.claims.fetch_add(1, Ordering::Relaxed);
                if let Some(t) = self.tickets.get_mut(&c.ticket) {
                    if !claim_holds(t, &c) {
                        self.stats.forged_refused.fetch_add(1, Ordering::Relaxed);
                        return;
                    }
                    if c.delivered > t.claimed {
                        t.claimed = c.delivered;
                        t.seal = Some(c.seal);
                    }
                    t.deadline = Instant::now() + self.cfg.lease;
                }
                if let Some(s) = self.workers.get_mut(&c.worker) {
                    s.at = Instant::now();
                }
            }
            Ok(Ctl::Report(r)) => self.on_report(r),
            // A frame of another build: refused, the run goes on.
            Err(_) => {
                self.stats.malformed.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// The fence: a report goes on iff its batch is undecided and its
    /// delivery is the newest claimed; it is then decoded in a task.
    fn on_report(&mut self, r: Report) {
        let outputs: Vec<Slot> = match &r.result {
            Ok(outs) => outs
                .iter()
                .flat_map(|o| match o {
                    WireOutcome::Ok(s) => s.clone(),
                    _ => Vec::new(),
                })
                .collect(),
            Err(_) => Vec::new(),
        };
        let stale = match self.tickets.get(&r.claim.ticket) {
            _ if r.claim.run != self.run_id => Some(&self.stats.stale_unknown),
            None => Some(&self.stats.stale_unknown),
            Some(t) if r.claim.delivered < t.claimed => Some(&self.stats.stale_fenced),
            Some(_) => None,
        };
        if let Some(counter) = stale {
            counter.fetch_add(1, Ordering::Relaxed);
            // A copy of the report that committed (a worker sends a report
            // again when its flush failed) names that report's objects,
            // which the values it committed still use: keep them.
            let copy =
                r.claim.run == self.run_id && self.committed.seal(r.claim.ticket) == Some(r.claim.seal);
            if !copy {
                for key in stored_keys(&outputs) {
                    let _ = self.release.send(key);
                }
            }
            return;
        }
        // Not from the claimer: refused, and its stored payloads left alone
        // (the keys it names may be the real report's).
        if let Some(t) = self.tickets.get(&r.claim.ticket)
            && !(claim_holds(t, &r.claim) && opens(&r.opening, &r.claim.seal))
        {
            self.stats.forged_refused.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let Some(t) = self.tickets.remove(&r.claim.ticket) else {
            return;
        };
        self.committed.insert(r.claim.ticket, r.claim.seal);
        self.decoding += 1;
        let (payloads, forward, release, tx) = (
            self.payloads.clone(),
            self.forward.clone(),
            self.release.clone(),
            self.decoded_tx.clone(),
        );
        tokio::spawn(async move {
            let result = decode_result(&payloads, &forward[t.call], &release, r.result).await;
            let mut keys = stored_keys(&t.owned);
            // Decoded outputs are values now; references keep their objects.
            keys.extend(result.1);
            let _ = tx.send(Decoded {
                finished: Finished {
                    batch: t.batch,
                    call: t.call,
                    size: t.grains,
                    replica: 0,
                    dispatched: t.dispatched,
                    result: result.0,
                    replaced: false,
                    worker: Some(r.claim.worker),
                },
                delivered: r.claim.delivered,
                release: keys,
            });
        });
    }

    /// A worker said hello: registered if it runs this plan, and answered.
    fn on_hello(&mut self, m: async_nats::Message) {
        let Ok(h) = Hello::decode(&m.payload) else { return };
        let counter = if h.fingerprint == self.fingerprint {
            self.workers.insert(
                h.worker,
                Seen {
                    at: Instant::now(),
                    calls: h.calls,
                },
            );
            &self.stats.workers_registered
        } else {
            &self.stats.workers_refused
        };
        counter.fetch_add(1, Ordering::Relaxed);
        if let Some(reply) = m.reply {
            let roots = serde_json::to_string(&self.cfg.input_roots).unwrap_or_else(|_| "[]".into());
            let store = self.cfg.payloads.as_ref().map_or("", |p| p.url.as_str());
            let body = format!("{} {}\n{roots}\n{store}", self.fingerprint, self.run_id);
            let client = self.client.clone();
            tokio::spawn(async move {
                let _ = client.publish(reply, body.into()).await;
            });
        }
    }

    /// A fence-passed report, decoded: to the loop, its objects released.
    fn on_decoded(&mut self, d: Decoded, out: &mut Vec<LoopReport>) {
        self.decoding -= 1;
        self.in_flight[d.finished.call] -= 1;
        self.stats.batches_committed.fetch_add(1, Ordering::Relaxed);
        if d.delivered > 1 {
            self.stats.redelivered_commits.fetch_add(1, Ordering::Relaxed);
        }
        for key in d.release {
            let _ = self.release.send(key);
        }
        out.push(LoopReport::Done(d.finished));
    }

    /// When a ticket's lease runs out: no lease expires while the broker
    /// link is down, nor within a full lease after it came back (meanwhile
    /// no worker could claim, heartbeat or report, so silence proves
    /// nothing).
    fn due(&self) -> impl Fn(&Ticket) -> Instant + use<> {
        let lease = self.cfg.lease;
        let floor = self.link.lock().ok().and_then(|l| match *l {
            (true, _) => Some(Instant::now() + lease),
            (false, up) => up.map(|u| u + lease),
        });
        move |t: &Ticket| floor.map_or(t.deadline, |f| t.deadline.max(f))
    }

    /// Read every control frame and decoded report already queued (at most
    /// [`DRAIN_MAX`] frames); true when the queue was emptied.
    fn drain_ctl(&mut self, out: &mut Vec<LoopReport>) -> bool {
        for _ in 0..DRAIN_MAX {
            match self.ctl.next().now_or_never() {
                Some(Some(m)) => self.on_ctl(&m.payload),
                // Nothing queued (or the subscription closed: the next
                // turn's wait reports it).
                _ => {
                    while let Ok(d) = self.decoded.try_recv() {
                        self.on_decoded(d, out);
                    }
                    return true;
                }
            }
        }
        false
    }

    /// Leases: a batch nobody claimed, heartbeat or reported in time goes
    /// back to the engine as a failed attempt (its recovery policy decides);
    /// any later report of it is refused.
    fn expire(&mut self, out: &mut Vec<LoopReport>) {
        let now = Instant::now();
        let due = self.due();
        let expired: Vec<u64> = self
            .tickets
            .iter()
            .filter(|(_, t)| due(t) <= now)
            .map(|(&k, _)| k)
            .collect();
        for k in expired {
            let Some(t) = self.tickets.remove(&k) else {
                continue;
            };
            self.in_flight[t.call] -= 1;
            self.stats.lease_expired.fetch_add(1, Ordering::Relaxed);
            for key in stored_keys(&t.owned) {
                let _ = self.release.send(key);
            }
            let msg = format!(
                "no worker reported this batch of Call `{}` within the owner lease of {:?} (worker lost, or its report lost); check the workers' logs",
                self.plan.calls()[t.call].name,
                self.cfg.lease
            );
            out.push(LoopReport::Done(Finished {
                batch: t.batch,
                call: t.call,
                size: t.grains,
                replica: 0,
                dispatched: t.dispatched,
                result: Err(AttemptError::TimedOut(msg)),
                replaced: false,
                worker: None,
            }));
        }
    }
}

impl Backend for DistBackend {
    type Error = DistError;

    fn live_replicas(&self, _: &Plan, c: usize) -> usize {
        self.slots[c] + self.local_slots[c]
    }

    fn threads_abandoned(&self, c: usize) -> u64 {
        self.local.threads_abandoned(c)
    }

    fn forged_reports(&self) -> u64 {
        self.stats.forged_refused.load(Ordering::Relaxed)
    }

    fn gauges(&self, out: &mut Vec<BackendGauge>) {
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed) as f64;
        let counter = |name, help, value| BackendGauge {
            name,
            help,
            labels: Vec::new(),
            value,
            counter: true,
        };
        let st = &self.stats;
        out.extend([
            counter(
                "dist_batches_published_total",
                "Batches published to the work queues.",
                load(&st.batches_published),
            ),
            counter(
                "dist_leases_expired_total",
                "Batches whose owner lease expired (retried as failed attempts).",
                load(&st.lease_expired),
            ),
            counter(
                "dist_redelivered_commits_total",
                "Committed batches that came from a JetStream redelivery.",
                load(&st.redelivered_commits),
            ),
            counter(
                "dist_stale_reports_fenced_total",
                "Reports the generation fence or a decided ticket refused.",
                st.stale_refused() as f64,
            ),
            counter(
                "dist_forged_reports_refused_total",
                "Claims and reports refused as not from the worker holding the batch.",
                load(&st.forged_refused),
            ),
            counter(
                "dist_payload_inline_bytes_total",
                "Payload bytes sent inline in messages.",
                load(&st.bytes.inline),
            ),
            counter(
                "dist_payload_stored_bytes_total",
                "Payload bytes written to the payload store.",
                load(&st.bytes.stored),
            ),
            counter(
                "dist_payload_fetched_bytes_total",
                "Payload bytes read back from the payload store.",
                load(&st.bytes.fetched),
            ),
            counter(
                "dist_workers_refused_total",
                "Workers refused for a plan fingerprint mismatch.",
                load(&st.workers_refused),
            ),
        ]);
        let mut workers: Vec<(&String, &Seen)> = self.workers.iter().collect();
        workers.sort_by(|a, b| a.0.cmp(b.0));
        for (name, seen) in workers {
            for &(c, n) in &seen.calls {
                let Some(call) = self.plan.calls().get(c as usize) else {
                    continue;
                };
                out.push(BackendGauge {
                    name: "dist_worker_slots",
                    help: "Slots a live worker serves, per Call.",
                    labels: vec![("worker", name.clone()), ("call", call.name.to_string())],
                    value: f64::from(n),
                    counter: false,
                });
            }
        }
    }

    async fn start(&mut self, _: &Plan) -> Result<(), DistError> {
        self.local.start();
        Ok(())
    }

    async fn dispatch(&mut self, cx: &mut Dispatch<'_>) -> Result<(), DistError> {
        self.count_slots();
        if let Ok(mut high) = self.stats.queue_high_water.lock() {
            let calls = self.plan.calls().len();
            high.resize(calls, 0);
            for (c, h) in high.iter_mut().enumerate() {
                *h = (*h).max(cx.engine().queued_upper_bound(c) as u64);
            }
        }
        // The owner's own Calls, held behind consumers on workers too.
        let remote = &self.in_flight;
        self.local.dispatch_with(cx, |d| remote[d] > 0);
        for c in 0..self.plan.calls().len() {
            if self.local.serves(c) {
                continue;
            }
            let b = self.plan.calls()[c].config.batch_size;
            while self.in_flight[c] < self.slots[c] * self.cfg.credits_per_slot {
                let Some((batch, _)) = cx.reserve(c, b, |d| DistBackend::working(self, d)) else {
                    break;
                };
                self.publish(batch).await?;
            }
        }
        Ok(())
    }

    fn in_flight(&self) -> bool {
        !self.tickets.is_empty() || self.decoding > 0 || self.local.in_flight()
    }

    fn working(&self, c: usize) -> bool {
        DistBackend::working(self, c)
    }

    fn pending(&self, engine: &Engine) -> bool {
        // A Call with work and no worker yet: one may join at any time.
        self.local.initialising()
            || (0..self.slots.len())
                .any(|c| self.slots[c] == 0 && !self.local.serves(c) && engine.may_have_ready(c))
    }

    async fn next(&mut self, out: &mut Vec<LoopReport>) -> Result<(), DistError> {
        let due = self.due();
        let tick = self.cfg.ack_wait / 2;
        let deadline = self
            .tickets
            .values()
            .map(due)
            .min()
            .unwrap_or_else(|| Instant::now() + tick);
        let local_busy = self.local.in_flight() || self.local.initialising();
        tokio::select! {
            m = self.ctl.next() => match m {
                Some(m) => self.on_ctl(&m.payload),
                None => return Err(DistError::Nats { what: "control subscription".into(), cause: "closed".into() }),
            },
            m = self.hello.next() => {
                if let Some(m) = m {
                    self.on_hello(m);
                }
            }
            d = self.decoded.recv() => {
                if let Some(d) = d {
                    self.on_decoded(d, out);
                }
            }
            e = self.unpublished.recv() => {
                if let Some(e) = e {
                    return Err(e);
                }
            }
            r = self.local.next(out), if local_busy => r?,
            _ = tokio::time::sleep_until(deadline) => {}
        }
        // Silence is judged only on an empty queue: after a stall of this
        // task (a slow sink, an fsync, a slow publish) the claims,
        // heartbeats and reports that came meanwhile wait here, and each
        // one read renews or ends its lease. Reading is bounded per turn; a
        // queue not emptied in it leaves the leases to the next turn.
        if self.drain_ctl(out) {
            self.expire(out);
        }
        Ok(())
    }

    async fn finish(&mut self, ok: bool) {
        self.local.shutdown(ok);
    }
}

/// A report's result as the engine takes it: outputs decoded, or kept as
/// references (`forward`); also the store keys of the decoded ones (their
/// objects can go).
async fn decode_result(
    payloads: &Payloads,
    forward: &[Forward],
    release: &mpsc::UnboundedSender<String>,
    r: Result<Vec<WireOutcome>, (WireFailure, String)>,
) -> (AttemptResult, Vec<String>) {
    let outs = match r {
        Ok(o) => o,
        Err((kind, m)) => return (Err(kind.error(m)), Vec::new()),
    };
    let mut decoded_keys = Vec::new();
    let mut res = Vec::with_capacity(outs.len());
    for o in outs {
        res.push(match o {
            WireOutcome::Ok(slots) => {
                let mut vals = rayorch_runtime::spi::Values::with_capacity(slots.len());
                for (i, s) in slots.into_iter().enumerate() {
                    let how = forward.get(i).copied().unwrap_or(Forward::Decode);
                    let v = match (how, s) {
                        (_, Slot::None) => Err("a report carried an empty output slot".to_string()),
                        (Forward::Reference, s) => Ok(WireRef::value(s, release)),
                        (Forward::Split, Slot::List(items)) => Ok(Arc::new(ValueList(
                            items.into_iter().map(|s| WireRef::value(s, release)).collect(),
                        )) as Value),
                        (_, s) => {
                            decoded_keys.extend(stored_keys(std::slice::from_ref(&s)));
                            match payloads.decode_slot(&s).await {
                                Ok(Some(v)) => Ok(v),
                                Ok(None) => Err("a report carried an empty output slot".to_string()),
                                // Decoding is deterministic: a retry would fail again.
                                Err(e) => Err(e.to_string()),
                            }
                        }
                    };
                    match v {
                        Ok(v) => vals.push(v),
                        Err(m) => return (Err(AttemptError::Contract(m)), decoded_keys),
                    }
                }
                Outcome::Ok(vals)
            }
            WireOutcome::Record(m, code) => Outcome::RecordFailure(coded(Cause::new(m), code)),
            WireOutcome::Group(m, code) => Outcome::GroupFailure(coded(Cause::new(m), code)),
        });
    }
    (Ok(res), decoded_keys)
}

/// Publish one batch, retrying while the broker is unreachable (for
/// `owner_wait`: it restarts, or the network heals). The message id makes
/// JetStream drop a copy whose first publish did land (its dedup window).
fn batch_message(bytes: &[u8], id: &str) -> jetstream::message::PublishMessage {
    jetstream::message::PublishMessage::build()
        .payload(bytes.to_vec().into())
        .message_id(id)
}

/// Wait for the broker to confirm a batch whose first send gave `first`,
/// sending it again (same message id) while it is unreachable, for `wait`.
async fn confirm_batch(
    js: &jetstream::Context,
    subject: String,
    wait: std::time::Duration,
    id: &str,
    bytes: &[u8],
    first: Result<jetstream::context::PublishAckFuture, jetstream::context::PublishError>,
) -> Result<(), DistError> {
    let start = Instant::now();
    let mut sent = first;
    loop {
        let confirmed = match sent {
            Ok(ack) => ack.await.map(|_| ()),
            Err(e) => Err(e),
        };
        match confirmed {
            Ok(()) => return Ok(()),
            // Permanent: retrying cannot help.
            Err(e) if e.kind() == jetstream::context::PublishErrorKind::MaxPayloadExceeded => {
                return Err(DistError::Nats {
                    what: format!(
                        "publish a batch on {subject} ({} bytes; lower DistConfig::inline_total or the batch size)",
                        bytes.len()
                    ),
                    cause: e.to_string(),
                });
            }
            Err(e) if start.elapsed() > wait => {
                return Err(DistError::Nats {
                    what: format!("publish a batch on {subject}"),
                    cause: e.to_string(),
                });
            }
            Err(_) => tokio::time::sleep(std::time::Duration::from_millis(250)).await,
        }
        sent = js.send_publish(subject.clone(), batch_message(bytes, id)).await;
    }
}

/// A run id unique enough to tell this owner run's messages from an older one's.
fn run_id() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    nanos ^ (u64::from(std::process::id()) << 32)
}

/// A cause with the code a worker's stage gave it, if any.
fn coded(cause: Cause, code: Option<String>) -> Cause {
    match code {
        Some(c) => cause.with_code(c),
        None => cause,
    }
}
