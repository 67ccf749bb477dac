//! The lineage owner: the unchanged engine, with batches dispatched through
//! JetStream instead of a local replica pool.
//!
//! One async loop owns the [`Engine`]. Each turn it admits roots (as far as
//! the window allows), hands finished roots to the sink, publishes reserved
//! batches while the Call has credits, then waits for one event: a control
//! frame (claim, report, heartbeat), a worker hello, a source item, or the
//! earliest lease deadline. State per dispatched batch is a [`Ticket`]; a
//! ticket leaves the map exactly once (report committed, or lease expired),
//! so the engine hears of each dispatch exactly once.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use async_nats::jetstream::{self, consumer, object_store, stream};
use futures::{FutureExt, Stream, StreamExt};
use rayorch_runtime::sink::{Callback, Sink};
use rayorch_runtime::spi::{
    AttemptError, AttemptResult, Backpressure, BatchId, CallStats, Engine, EngineConfig, Journal,
    JournalOptions, Value,
};
use rayorch_runtime::{Cause, Outcome, Plan, RootOutcome, RunError};
use tokio::time::Instant;

use crate::codec::Codecs;
use crate::error::DistError;
use crate::local::LocalPool;
use crate::messages::{BatchMsg, Ctl, Hello, Report, Slot, WireOutcome};
use crate::payload_store::{JetStreamObjects, Payloads, WireBytes};
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
    /// Batches whose report committed.
    pub batches_committed: AtomicU64,
    /// ... of which came from a JetStream redelivery (delivery count > 1).
    pub redelivered_commits: AtomicU64,
    /// Reports refused by the generation fence (an older delivery than one
    /// already claimed).
    pub stale_fenced: AtomicU64,
    /// Reports of batches already decided (committed, or expired and retried).
    pub stale_unknown: AtomicU64,
    /// Reports the engine's commit gate refused.
    pub engine_rejected: AtomicU64,
    /// Batches whose owner lease expired (handed back to the engine as failed
    /// attempts).
    pub lease_expired: AtomicU64,
    /// Control frames that did not parse (another build on the subject).
    pub malformed: AtomicU64,
    /// Workers whose hello matched the plan.
    pub workers_registered: AtomicU64,
    /// Workers refused for a fingerprint mismatch.
    pub workers_refused: AtomicU64,
    /// Times a Call's dispatch was held by backpressure.
    pub held: AtomicU64,
    /// The most Grains queued in the owner per Call (plan order; the
    /// engine's upper bound), sampled every turn.
    pub queue_high_water: Mutex<Vec<u64>>,
    /// Payload bytes on the wire.
    pub bytes: Arc<WireBytes>,
    /// Grains committed per (worker, Call).
    pub per_worker: Mutex<BTreeMap<(String, String), u64>>,
}

impl OwnerStats {
    /// All stale reports refused (fence + decided batches + engine gate).
    pub fn stale_refused(&self) -> u64 {
        self.stale_fenced.load(Ordering::Relaxed)
            + self.stale_unknown.load(Ordering::Relaxed)
            + self.engine_rejected.load(Ordering::Relaxed)
    }
}

/// What an owner run did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnerSummary {
    /// Roots handed to the sink.
    pub roots: u64,
    /// Grains committed per (worker, Call).
    pub per_worker: BTreeMap<(String, String), u64>,
    /// The engine's counters per Call (plan order).
    pub calls: Vec<CallStats>,
    /// Roots of the source skipped because the journal holds them (a
    /// resumed run).
    pub journal_skipped: u64,
}

/// One dispatched batch, until it is decided.
struct Ticket {
    batch: BatchId,
    call: usize,
    grains: usize,
    deadline: Instant,
    /// The newest JetStream delivery a worker claimed (the fence).
    claimed: u64,
    slots: Vec<Slot>,
}

/// A registered worker: when it was last heard of, and its slots per Call.
struct Seen {
    at: Instant,
    calls: Vec<(u32, u32)>,
}

/// The lineage owner of one job.
pub struct Owner {
    plan: Plan,
    cfg: DistConfig,
    payloads: Payloads,
    stats: Arc<OwnerStats>,
    journal: Option<JournalOptions>,
    /// Calls this process runs itself (`parse_calls` syntax).
    local: String,
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
            local: String::new(),
        }
    }

    /// Run these Calls in the owner process instead of on workers
    /// (`name:slots,...` as a worker's `--calls`; empty: none): cheap maps
    /// next to their data save a round trip through the broker each. They
    /// are never published; workers serving them simply get none.
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

    /// The live counters (shared: clone the `Arc` before `run`).
    pub fn stats(&self) -> Arc<OwnerStats> {
        self.stats.clone()
    }

    /// Run every root of `source` to its outcome; each finished root goes to
    /// `sink` at once. Returns when the source is exhausted and every root
    /// was handed out.
    pub async fn run<S>(
        &mut self,
        source: S,
        sink: impl FnMut(&RootOutcome) + Send,
    ) -> Result<OwnerSummary, DistError>
    where
        S: Stream<Item = (u64, Value)> + Unpin,
    {
        self.run_into(source, Callback(sink)).await
    }

    /// [`Owner::run`] into a [`Sink`] (files, journaled with
    /// [`Owner::journal`]); the sink is closed at the end.
    pub async fn run_into<S>(&mut self, mut source: S, mut sink: impl Sink) -> Result<OwnerSummary, DistError>
    where
        S: Stream<Item = (u64, Value)> + Unpin,
    {
        self.cfg.check()?;
        let fingerprint = self.plan.fingerprint();
        let (mut journal, done) = match &self.journal {
            Some(opts) => {
                let (j, done) = Journal::open(opts, &fingerprint, &mut sink)?;
                (Some(j), done)
            }
            None => (None, Default::default()),
        };
        let mut journal_skipped = 0u64;
        let cfg = self.cfg.clone();
        // Broker link state, from the client's events: (down now, last reconnect).
        let link: Arc<Mutex<(bool, Option<Instant>)>> = Arc::default();
        let events = link.clone();
        let client = async_nats::ConnectOptions::new()
            .event_callback(move |ev| {
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
            })
            .connect(&cfg.url)
            .await
            .map_err(DistError::nats_any(format!("connect to {}", cfg.url)))?;
        let js = jetstream::new(client.clone());
        self.setup(&js).await?;
        let mut ctl = client
            .subscribe(cfg.ctl_subject())
            .await
            .map_err(DistError::nats_any("subscribe"))?;
        let mut hello = client
            .subscribe(cfg.hello_subject())
            .await
            .map_err(DistError::nats_any("subscribe"))?;
        let run_id = run_id();
        let calls = self.plan.calls().len();
        let mut engine = Engine::new(
            &self.plan,
            EngineConfig {
                window: cfg.window,
                window_children: cfg.window_children,
                ..EngineConfig::default()
            },
        );
        let mut tickets: HashMap<u64, Ticket> = HashMap::new();
        let mut in_flight = vec![0usize; calls];
        let mut workers: HashMap<String, Seen> = HashMap::new();
        let mut next_ticket = 0u64;
        let mut exhausted = false;
        let mut roots = 0u64;
        let stats = self.stats.clone();
        let tick = cfg.ack_wait / 2;
        let backpressure = cfg.backpressure.map(|k| Backpressure::new(&self.plan, k));
        let local_spec = if self.local.trim().is_empty() {
            Vec::new()
        } else {
            crate::worker::parse_calls(&self.plan, &self.local)?
        };
        let mut local = LocalPool::new(calls, &local_spec);

        let result = loop {
            while !exhausted && engine.can_admit() {
                match source.next().now_or_never() {
                    Some(Some((k, _))) if done.contains(&k) => journal_skipped += 1,
                    Some(Some((k, v))) => engine.admit(k, v)?,
                    Some(None) => exhausted = true,
                    None => break,
                }
            }
            while let Some(o) = engine.pop_finished() {
                roots += 1;
                if let Some(j) = journal.as_mut() {
                    j.record(&o)?;
                }
                sink.root(&o).map_err(|e| RunError::Sink(e.to_string()))?;
            }
            if let Some(j) = journal.as_mut() {
                j.commit(&mut sink, false)?;
            }
            if let Some(e) = engine.aborted() {
                break Err(DistError::Run(e.clone()));
            }
            if exhausted && engine.live_roots() == 0 && tickets.is_empty() && local.idle() {
                break Ok(());
            }
            // Credits: live slots per Call (a worker is live while its
            // heartbeats keep coming).
            let now = Instant::now();
            workers.retain(|_, s| now.duration_since(s.at) < cfg.lease);
            let mut slots = vec![0usize; calls];
            for s in workers.values() {
                for &(c, n) in &s.calls {
                    if let Some(x) = slots.get_mut(c as usize) {
                        *x += n as usize;
                    }
                }
            }
            if let Ok(mut high) = stats.queue_high_water.lock() {
                high.resize(calls, 0);
                for (c, h) in high.iter_mut().enumerate() {
                    *h = (*h).max(engine.queued_upper_bound(c) as u64);
                }
            }
            for c in 0..calls {
                let b = self.plan.calls()[c].config.batch_size;
                // Held only while the consumer has batches out: their
                // reports wake this loop, so it never stalls a run.
                let held = |engine: &Engine, in_flight: &[usize], local: &LocalPool| {
                    let working = |d: usize| in_flight[d] > 0 || local.busy(d);
                    let h = backpressure
                        .as_ref()
                        .is_some_and(|bp| bp.held(&self.plan, engine, c, working));
                    if h {
                        stats.held.fetch_add(1, Ordering::Relaxed);
                    }
                    h
                };
                if local.serves(c) {
                    while local.free(c) && !held(&engine, &in_flight, &local) {
                        let Some(batch) = engine.reserve(c, b) else { break };
                        local.start(&self.plan, batch);
                    }
                    continue;
                }
                while in_flight[c] < slots[c] * cfg.credits_per_slot {
                    if held(&engine, &in_flight, &local) {
                        break;
                    }
                    let Some(batch) = engine.reserve(c, b) else { break };
                    next_ticket += 1;
                    let t = next_ticket;
                    let name = &self.plan.calls()[c].name;
                    let mut wire = Vec::with_capacity(batch.inputs.len() * batch.inputs.arity());
                    let mut budget = cfg.inline_total;
                    for (i, v) in batch.inputs.iter().flatten().enumerate() {
                        let key = || format!("{run_id}-{t}-in{i}");
                        let slot = self
                            .payloads
                            .encode_slot(name, "inputs", v.as_ref(), key, &mut budget);
                        wire.push(slot.await?);
                    }
                    let msg = BatchMsg {
                        ticket: t,
                        run: run_id,
                        call: c as u32,
                        arity: batch.inputs.arity() as u32,
                        slots: wire,
                    };
                    let bytes = msg.encode();
                    stats
                        .bytes
                        .messages
                        .fetch_add(bytes.len() as u64, Ordering::Relaxed);
                    publish_batch(&js, &cfg, c, format!("{run_id}-{t}"), bytes).await?;
                    stats.batches_published.fetch_add(1, Ordering::Relaxed);
                    stats
                        .grains_published
                        .fetch_add(batch.grains.len() as u64, Ordering::Relaxed);
                    in_flight[c] += 1;
                    tickets.insert(
                        t,
                        Ticket {
                            batch: batch.id,
                            call: c,
                            grains: batch.grains.len(),
                            deadline: Instant::now() + cfg.lease,
                            claimed: 0,
                            slots: msg.slots,
                        },
                    );
                }
            }
            if tickets.is_empty()
                && local.idle()
                && (exhausted || !engine.can_admit())
                && engine.live_roots() > 0
            {
                // Nothing in flight: either a Call waits for workers (they
                // may join at any time) or nothing can ever run.
                let waiting_for_workers =
                    (0..calls).any(|c| slots[c] == 0 && !local.serves(c) && engine.may_have_ready(c));
                if let Some(s) = engine.stall().filter(|_| !waiting_for_workers) {
                    break Err(DistError::Run(rayorch_runtime::RunError::Stalled(s)));
                }
            }
            // No lease expires while the broker link is down, nor within a
            // full lease after it came back: meanwhile no worker could claim,
            // heartbeat or report, so silence proves nothing.
            let floor = link.lock().ok().and_then(|l| match *l {
                (true, _) => Some(Instant::now() + cfg.lease),
                (false, up) => up.map(|u| u + cfg.lease),
            });
            let due = move |t: &Ticket| floor.map_or(t.deadline, |f| t.deadline.max(f));
            let commit_at = journal.as_ref().and_then(Journal::due);
            let deadline = tickets.values().map(due).chain(commit_at).min();
            let want_source = !exhausted && engine.can_admit();
            tokio::select! {
                m = ctl.next() => {
                    let Some(m) = m else { break Err(DistError::Nats { what: "control subscription".into(), cause: "closed".into() }) };
                    stats.bytes.messages.fetch_add(m.payload.len() as u64, Ordering::Relaxed);
                    match Ctl::decode(&m.payload) {
                        Ok(Ctl::Beat(h)) => {
                            if h.fingerprint == fingerprint {
                                workers.insert(h.worker, Seen { at: Instant::now(), calls: h.calls });
                            }
                        }
                        // A claim of an earlier owner run's batch: that run is gone.
                        Ok(Ctl::Claim(c)) if c.run != run_id => {}
                        Ok(Ctl::Claim(c)) => {
                            stats.claims.fetch_add(1, Ordering::Relaxed);
                            if let Some(t) = tickets.get_mut(&c.ticket) {
                                t.claimed = t.claimed.max(c.delivered);
                                t.deadline = Instant::now() + cfg.lease;
                            }
                            if let Some(s) = workers.get_mut(&c.worker) {
                                s.at = Instant::now();
                            }
                        }
                        Ok(Ctl::Report(r)) => {
                            self.report(&mut engine, &mut tickets, &mut in_flight, run_id, r).await;
                        }
                        // A frame of another build: refused, the run goes on.
                        Err(_) => { stats.malformed.fetch_add(1, Ordering::Relaxed); }
                    }
                }
                m = hello.next() => {
                    let Some(m) = m else { continue };
                    let Ok(h) = Hello::decode(&m.payload) else { continue };
                    let counter = if h.fingerprint == fingerprint {
                        workers.insert(h.worker, Seen { at: Instant::now(), calls: h.calls });
                        &stats.workers_registered
                    } else {
                        &stats.workers_refused
                    };
                    counter.fetch_add(1, Ordering::Relaxed);
                    if let Some(reply) = m.reply {
                        let body = format!("{fingerprint} {run_id}");
                        let _ = client.publish(reply, body.into()).await;
                    }
                }
                mut d = local.next(), if !local.idle() => {
                    local.finish(&mut d);
                    match d.result {
                        Ok(r) => {
                            if !matches!(engine.report(d.batch, r), rayorch_runtime::spi::ReportOutcome::Rejected)
                                && let Ok(mut m) = stats.per_worker.lock()
                            {
                                let name = self.plan.calls()[d.call].name.to_string();
                                *m.entry(("owner".to_string(), name)).or_default() += d.grains as u64;
                            }
                        }
                        Err(e) => break Err(e),
                    }
                }
                item = source.next(), if want_source => match item {
                    Some((k, _)) if done.contains(&k) => journal_skipped += 1,
                    Some((k, v)) => engine.admit(k, v)?,
                    None => exhausted = true,
                },
                _ = tokio::time::sleep_until(deadline.unwrap_or_else(|| Instant::now() + tick)) => {}
            }
            // Leases: a batch nobody claimed, heartbeat or reported in time
            // goes back to the engine as a failed attempt (its recovery
            // policy decides); any later report of it is refused.
            let now = Instant::now();
            let expired: Vec<u64> = tickets
                .iter()
                .filter(|(_, t)| due(t) <= now)
                .map(|(&k, _)| k)
                .collect();
            for k in expired {
                if let Some(t) = tickets.remove(&k) {
                    in_flight[t.call] -= 1;
                    stats.lease_expired.fetch_add(1, Ordering::Relaxed);
                    let msg = format!(
                        "no worker reported this batch of Call `{}` within the owner lease of {:?} (worker lost, or its report lost); check the workers' logs",
                        self.plan.calls()[t.call].name,
                        cfg.lease
                    );
                    engine.report(t.batch, Err(AttemptError::Failed(msg)));
                }
            }
        };
        let _ = client
            .publish(cfg.done_subject(), run_id.to_string().into())
            .await;
        let _ = client.flush().await;
        if result.is_ok() {
            if let Some(j) = journal.as_mut() {
                j.commit(&mut sink, true)?;
            }
            self.teardown(&js).await;
        }
        let closed = sink.close().map_err(|e| RunError::Sink(e.to_string()));
        result?;
        closed?;
        let per_worker = stats.per_worker.lock().map(|m| m.clone()).unwrap_or_default();
        let calls = (0..calls).map(|c| engine.call_stats(c).clone()).collect();
        Ok(OwnerSummary {
            roots,
            per_worker,
            calls,
            journal_skipped,
        })
    }

    /// Commit (or refuse) one report.
    async fn report(
        &self,
        engine: &mut Engine,
        tickets: &mut HashMap<u64, Ticket>,
        in_flight: &mut [usize],
        run_id: u64,
        r: Report,
    ) {
        let stats = &self.stats;
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
        let fresh = match tickets.get(&r.claim.ticket) {
            _ if r.claim.run != run_id => {
                stats.stale_unknown.fetch_add(1, Ordering::Relaxed);
                false
            }
            None => {
                stats.stale_unknown.fetch_add(1, Ordering::Relaxed);
                false
            }
            Some(t) if r.claim.delivered < t.claimed => {
                stats.stale_fenced.fetch_add(1, Ordering::Relaxed);
                false
            }
            Some(_) => true,
        };
        if !fresh {
            self.payloads.release(&outputs).await;
            return;
        }
        let Some(t) = tickets.remove(&r.claim.ticket) else {
            return;
        };
        in_flight[t.call] -= 1;
        let result = self.decode_result(r.result).await;
        self.payloads.release(&outputs).await;
        self.payloads.release(&t.slots).await;
        match engine.report(t.batch, result) {
            rayorch_runtime::spi::ReportOutcome::Rejected => {
                stats.engine_rejected.fetch_add(1, Ordering::Relaxed);
            }
            _ => {
                stats.batches_committed.fetch_add(1, Ordering::Relaxed);
                if r.claim.delivered > 1 {
                    stats.redelivered_commits.fetch_add(1, Ordering::Relaxed);
                }
                if let Ok(mut m) = stats.per_worker.lock() {
                    let name = self.plan.calls()[t.call].name.to_string();
                    *m.entry((r.claim.worker, name)).or_default() += t.grains as u64;
                }
            }
        }
    }

    async fn decode_result(&self, r: Result<Vec<WireOutcome>, (bool, String)>) -> AttemptResult {
        let outs = match r {
            Ok(o) => o,
            Err((true, m)) => return Err(AttemptError::Contract(m)),
            Err((false, m)) => return Err(AttemptError::Failed(m)),
        };
        let mut res = Vec::with_capacity(outs.len());
        for o in outs {
            res.push(match o {
                WireOutcome::Ok(slots) => {
                    let mut vals = Vec::with_capacity(slots.len());
                    for s in &slots {
                        match self.payloads.decode_slot(s).await {
                            Ok(Some(v)) => vals.push(v),
                            Ok(None) => {
                                return Err(AttemptError::Contract(
                                    "a report carried an empty output slot".into(),
                                ));
                            }
                            // Decoding is deterministic: a retry would fail again.
                            Err(e) => return Err(AttemptError::Contract(e.to_string())),
                        }
                    }
                    Outcome::Ok(vals)
                }
                WireOutcome::Record(m) => Outcome::RecordFailure(Cause::new(m)),
                WireOutcome::Group(m) => Outcome::GroupFailure(Cause::new(m)),
            });
        }
        Ok(res)
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
        let _ = js.delete_object_store(cfg.bucket()).await;
        let store = js
            .create_object_store(object_store::Config {
                bucket: cfg.bucket(),
                storage,
                ..Default::default()
            })
            .await
            .map_err(DistError::nats_any("create the payload bucket"))?;
        self.payloads.store = Arc::new(JetStreamObjects(store));
        Ok(())
    }

    async fn teardown(&self, js: &jetstream::Context) {
        for c in 0..self.plan.calls().len() {
            let _ = js.delete_stream(self.cfg.stream(c)).await;
        }
        let _ = js.delete_object_store(self.cfg.bucket()).await;
    }
}

/// Publish one batch, retrying while the broker is unreachable (for
/// `owner_wait`: it restarts, or the network heals). The message id makes
/// JetStream drop a copy whose first publish did land (its dedup window).
async fn publish_batch(
    js: &jetstream::Context,
    cfg: &DistConfig,
    call: usize,
    id: String,
    bytes: Vec<u8>,
) -> Result<(), DistError> {
    let start = Instant::now();
    loop {
        let msg = jetstream::message::PublishMessage::build()
            .payload(bytes.clone().into())
            .message_id(&id);
        let sent = match js.send_publish(cfg.call_subject(call), msg).await {
            Ok(ack) => ack.await.map(|_| ()),
            Err(e) => Err(e),
        };
        match sent {
            Ok(()) => return Ok(()),
            // Permanent: retrying cannot help.
            Err(e) if e.kind() == jetstream::context::PublishErrorKind::MaxPayloadExceeded => {
                return Err(DistError::Nats {
                    what: format!(
                        "publish a batch of Call {call} ({} bytes; lower DistConfig::inline_total or the batch size)",
                        bytes.len()
                    ),
                    cause: e.to_string(),
                });
            }
            Err(e) if start.elapsed() > cfg.owner_wait => {
                let cause = e.to_string();
                return Err(DistError::Nats {
                    what: format!("publish a batch of Call {call}"),
                    cause,
                });
            }
            Err(_) => tokio::time::sleep(std::time::Duration::from_millis(250)).await,
        }
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
