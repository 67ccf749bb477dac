//! Worker mode: the same pipeline binary, serving some Calls' work queues.
//!
//! A worker builds the plan, says hello to the owner (which answers with its
//! fingerprint: a mismatch is [`DistError::FingerprintMismatch`]), then runs
//! one task per slot: take a batch, claim it, run it on the slot's stage
//! instance (blocking stages on tokio's blocking pool, async ones inline),
//! report, ack. Each slot's puller fetches the next batch while the current
//! one runs (one batch waits at most, unclaimed, kept alive by progress
//! acks), so the pull round trip is not paid between batches. While a batch runs the slot sends JetStream progress acks and
//! claim heartbeats every `ack_wait`/3, so a long batch is never redelivered
//! and the owner's lease never expires under it. A worker stops when the
//! owner announces the end of the run. That announcement is a plain NATS
//! message, delivered at most once: a worker that missed it (its connection
//! was down just then) finds its queues gone, since the owner removes them
//! after a run that succeeded, and once pulls have failed for `owner_wait`
//! with no owner answering for the run, it stops as if it had heard the end.
//!
//! The report is published (and flushed) before the ack: a worker that dies
//! between the two leaves the batch to be redelivered, never lost. The
//! opposite order loses the batch at the broker; the owner's lease catches
//! it (the ack-then-crash fault of the `fault-injection` feature tests
//! exactly that).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use async_nats::jetstream::{self, AckKind, consumer::PullConsumer};
use futures::StreamExt;
use rayorch_runtime::spi::{
    AttemptError, AttemptResult, BatchInputs, ErasedCall, StageBox, Value, run_attempt, split_output,
};
use rayorch_runtime::{Cause, Outcome, Plan, RunError};

use crate::DistConfig;
use crate::binding::{Claimer, Opening};
use crate::codec::Codecs;
use crate::error::DistError;
#[cfg(feature = "fault-injection")]
use crate::fault::{Fault, Injector};
use crate::messages::{BatchMsg, Claim, Ctl, Hello, Report, Slot, WireFailure, WireOutcome};
use crate::payload_store::{JetStreamObjects, PayloadStore, Payloads, WireBytes};

/// What a worker did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkerSummary {
    /// Batches run.
    pub batches: u64,
    /// Grains in them.
    pub grains: u64,
    /// Payload bytes this worker wrote to the payload store (values too
    /// large to travel inline).
    pub stored: u64,
    /// Payload bytes it read from the store.
    pub fetched: u64,
}

/// Parse `--calls` (`ocr:2,detect:1`; a bare name means 1 slot; empty means
/// every Call with 1 slot) into (Call index, slots). A Call applied twice in
/// the plan (one pool) is served at each place it is applied.
pub fn parse_calls(plan: &Plan, calls: &str) -> Result<Vec<(usize, u32)>, DistError> {
    let specs = plan.calls();
    if calls.trim().is_empty() {
        return Ok((0..specs.len()).map(|c| (c, 1)).collect());
    }
    let names = || {
        specs
            .iter()
            .map(|s| s.name.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut out = Vec::new();
    for part in calls.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (name, n) = match part.split_once(':') {
            Some((name, n)) => {
                let n = n.parse::<u32>().ok().filter(|&n| n > 0).ok_or_else(|| {
                    DistError::Calls(format!(
                        "--calls `{part}`: the slot count must be a positive number"
                    ))
                })?;
                (name, n)
            }
            None => (part, 1),
        };
        let before = out.len();
        out.extend(
            specs
                .iter()
                .enumerate()
                .filter(|(_, s)| &*s.name == name)
                .map(|(c, _)| (c, n)),
        );
        if out.len() == before {
            return Err(DistError::Calls(format!(
                "--calls names `{name}`, which this plan does not have; its Calls are: {}",
                names()
            )));
        }
    }
    Ok(out)
}

struct Shared {
    plan: Plan,
    client: async_nats::Client,
    payloads: Payloads,
    cfg: DistConfig,
    id: String,
    /// Derives the opening of each delivery it claims (`binding`).
    claimer: Claimer,
    /// The owner run this worker serves (a restarted owner starts a new run;
    /// the worker re-registers and adopts it: [`rejoin`]).
    run: AtomicU64,
    hello: Hello,
    #[cfg_attr(
        not(feature = "fault-injection"),
        expect(dead_code, reason = "only fault injection reads it")
    )]
    faults: Faults,
    stop: AtomicBool,
    batches: AtomicU64,
    grains: AtomicU64,
}

/// Serve `calls` of `plan` for the owner of `cfg.job` until it ends the run.
pub async fn worker(
    plan: &Plan,
    codecs: Codecs,
    cfg: DistConfig,
    calls: &str,
) -> Result<WorkerSummary, DistError> {
    run_worker(plan, codecs, cfg, calls, Faults::none()).await
}

/// [`worker`] with a fault injected (the fault-tolerance tests; feature
/// `fault-injection`).
#[cfg(feature = "fault-injection")]
pub async fn worker_with_fault(
    plan: &Plan,
    codecs: Codecs,
    cfg: DistConfig,
    calls: &str,
    fault: Option<Fault>,
) -> Result<WorkerSummary, DistError> {
    run_worker(plan, codecs, cfg, calls, Injector::new(fault)).await
}

/// What a worker injects: the fault of [`worker_with_fault`].
#[cfg(feature = "fault-injection")]
type Faults = Injector;
/// What a worker injects without the `fault-injection` feature: nothing.
#[cfg(not(feature = "fault-injection"))]
struct Faults;

#[cfg(not(feature = "fault-injection"))]
impl Faults {
    fn none() -> Faults {
        Faults
    }
}

async fn run_worker(
    plan: &Plan,
    codecs: Codecs,
    cfg: DistConfig,
    calls: &str,
    faults: Faults,
) -> Result<WorkerSummary, DistError> {
    cfg.check()?;
    let serve = parse_calls(plan, calls)?;
    let client = cfg
        .security
        .connect(&cfg.url, cfg.security.options(&cfg.url).await?)
        .await?;
    let id = format!(
        "{}-{}",
        std::env::var("HOSTNAME").unwrap_or_else(|_| "worker".into()),
        std::process::id()
    );
    let hello = Hello {
        worker: id.clone(),
        fingerprint: plan.fingerprint(),
        calls: serve.iter().map(|&(c, n)| (c as u32, n)).collect(),
    };
    let mut done = client
        .subscribe(cfg.done_subject())
        .await
        .map_err(DistError::nats_any("subscribe"))?;
    let (run, announced, owner_store) = hello_roots(&client, &cfg, &hello).await?;
    let own_store = cfg.payloads.as_ref().map_or("", |p| p.url.as_str());
    if owner_store != own_store {
        let named = |s: &str| match s {
            "" => "the broker's object store".to_string(),
            url => url.to_string(),
        };
        return Err(DistError::PayloadStoreMismatch {
            job: cfg.job.clone(),
            owner: named(&owner_store),
            worker: named(own_store),
        });
    }
    codecs.apply_input_roots(&narrow_roots(&announced, &cfg.input_roots)?)?;
    let js = jetstream::new(client.clone());
    let (store, consumers) = match open_queues(&js, &cfg, &serve).await {
        Ok(q) => q,
        // The owner removes its queues when its run ends: a worker that
        // joined just then finds them gone. If no owner answers for that
        // run any more, there is nothing to serve; else the error stands.
        Err(e) => {
            return match current_run(&client, &cfg, &hello).await {
                Some(now) if now == run => Err(e),
                _ => Ok(WorkerSummary::default()),
            };
        }
    };
    let sh = Arc::new(Shared {
        plan: plan.clone(),
        client: client.clone(),
        payloads: Payloads {
            codecs,
            store,
            inline_max: cfg.inline_max,
            cap: cfg.payload_cap,
            bytes: Arc::new(WireBytes::default()),
            retry_for: cfg.owner_wait,
            attempt: cfg.ack_wait * 2,
        },
        cfg: cfg.clone(),
        id,
        claimer: Claimer::new()?,
        run: AtomicU64::new(run),
        hello: hello.clone(),
        faults,
        stop: AtomicBool::new(false),
        batches: AtomicU64::new(0),
        grains: AtomicU64::new(0),
    });
    let mut tasks = tokio::task::JoinSet::new();
    for (&(c, n), consumer) in serve.iter().zip(consumers) {
        for replica in 0..n as usize {
            let rt = plan.calls()[c].runtime.clone();
            let name = plan.calls()[c].name.to_string();
            let limit = plan.calls()[c].config.timeout;
            tasks.spawn(slot(sh.clone(), rt, name, limit, replica, consumer.clone()));
        }
    }
    // Heartbeats keep the owner's credits for this worker alive.
    let beat = AbortOnDrop({
        let sh = sh.clone();
        let body = Ctl::Beat(hello).encode();
        tokio::spawn(async move {
            loop {
                let _ = sh.client.publish(sh.cfg.ctl_subject(), body.clone().into()).await;
                tokio::time::sleep(sh.cfg.ack_wait / 3).await;
            }
        })
    });
    let result = loop {
        tokio::select! {
            m = done.next() => {
                #[cfg(feature = "fault-injection")]
                if sh.faults.deaf() {
                    continue;
                }
                // Only the end of the run we joined stops us.
                let run = sh.run.load(Ordering::Relaxed);
                if m.is_none_or(|m| m.payload.as_ref() == run.to_string().as_bytes()) {
                    sh.stop.store(true, Ordering::Relaxed);
                }
            }
            t = tasks.join_next() => match t {
                None => break Ok(()),
                Some(Ok(Ok(()))) => {}
                Some(Ok(Err(e))) => break Err(e),
                Some(Err(e)) => break Err(DistError::Run(RunError::Stalled(format!("a worker slot task ended: {e}")))),
            },
        }
    };
    drop(beat);
    tasks.abort_all();
    result?;
    let [_, stored, fetched, _] = sh.payloads.bytes.snapshot();
    Ok(WorkerSummary {
        batches: sh.batches.load(Ordering::Relaxed),
        grains: sh.grains.load(Ordering::Relaxed),
        stored,
        fetched,
    })
}

/// The run's payload store (its bucket on the broker, or the store outside
/// it that the run shares) and a consumer per Call served, as the owner
/// made them before it answered the worker's hello.
async fn open_queues(
    js: &jetstream::Context,
    cfg: &DistConfig,
    serve: &[(usize, u32)],
) -> Result<(Arc<dyn PayloadStore>, Vec<PullConsumer>), DistError> {
    let store: Arc<dyn PayloadStore> = match &cfg.payloads {
        Some(shared) => shared.store.clone(),
        None => Arc::new(JetStreamObjects(
            js.get_object_store(cfg.bucket())
                .await
                .map_err(DistError::nats_any("open the payload bucket"))?,
        )),
    };
    let mut consumers = Vec::with_capacity(serve.len());
    for &(c, _) in serve {
        let stream = js
            .get_stream(cfg.stream(c))
            .await
            .map_err(DistError::nats_any(format!("open stream {}", cfg.stream(c))))?;
        consumers.push(
            stream
                .get_consumer(&format!("c{c}"))
                .await
                .map_err(DistError::nats_any("open the Call's consumer"))?,
        );
    }
    Ok((store, consumers))
}

/// Register with the owner (retrying until it answers) and check the plan.
async fn say_hello(client: &async_nats::Client, cfg: &DistConfig, h: &Hello) -> Result<u64, DistError> {
    hello_roots(client, cfg, h).await.map(|(run, _, _)| run)
}

/// Say hello; the owner's run id and the input roots it announces.
async fn hello_roots(
    client: &async_nats::Client,
    cfg: &DistConfig,
    h: &Hello,
) -> Result<(u64, Vec<String>, String), DistError> {
    let start = tokio::time::Instant::now();
    loop {
        match client.request(cfg.hello_subject(), h.encode().into()).await {
            Ok(m) => {
                let text = String::from_utf8_lossy(&m.payload).to_string();
                // `fingerprint run`, the roots as a JSON list on the next
                // line, then the URL of the payload store (empty: the
                // broker's bucket).
                let mut lines = text.splitn(3, '\n');
                let first = lines.next().unwrap_or_default();
                let roots: Vec<String> =
                    serde_json::from_str(lines.next().unwrap_or("[]")).unwrap_or_default();
                let store = lines.next().unwrap_or_default().to_string();
                let (fp, run) = first.split_once(' ').unwrap_or((first, "0"));
                if fp != h.fingerprint {
                    return Err(DistError::FingerprintMismatch {
                        job: cfg.job.clone(),
                        worker: h.fingerprint.clone(),
                        owner: fp.to_string(),
                    });
                }
                return Ok((run.parse().unwrap_or(0), roots, store));
            }
            Err(_) if start.elapsed() < cfg.owner_wait => {
                tokio::time::sleep(Duration::from_millis(100)).await
            }
            Err(_) => {
                return Err(DistError::NoOwner {
                    job: cfg.job.clone(),
                    url: cfg.url.clone(),
                    waited_s: start.elapsed().as_secs_f64(),
                });
            }
        }
    }
}

/// The input roots a worker may read: its own (`DistConfig::input_roots`)
/// that lie under one the owner announced, or the owner's when it gave
/// none. An own root outside all of the owner's is dropped; if that leaves
/// none, the worker refuses to start.
fn narrow_roots(announced: &[String], own: &[String]) -> Result<Vec<String>, DistError> {
    if own.is_empty() {
        return Ok(announced.to_vec());
    }
    let kept: Vec<String> = own
        .iter()
        .filter(|r| announced.iter().any(|a| under(r, a)))
        .cloned()
        .collect();
    if kept.is_empty() {
        return Err(DistError::Security(format!(
            "none of this worker's input roots {own:?} lies under the roots the owner announced {announced:?}: give --input-root folders (or URL prefixes) inside the owner's"
        )));
    }
    Ok(kept)
}

/// Is `path` `root` or below it (whole path components, or a URL prefix
/// ending in `/`)?
fn under(path: &str, root: &str) -> bool {
    let root = root.trim_end_matches('/');
    path == root || path.strip_prefix(root).is_some_and(|rest| rest.starts_with('/'))
}

/// One slot: run the batches its puller hands over, report, ack; until the
/// puller stops (end of the run, or the broker unreachable for `owner_wait`).
async fn slot(
    sh: Arc<Shared>,
    rt: Arc<dyn ErasedCall>,
    call: String,
    limit: Option<Duration>,
    replica: usize,
    consumer: PullConsumer,
) -> Result<(), DistError> {
    let mut stage = Some(spawn_stage(&rt, &call).await?);
    let (tx, mut rx) = tokio::sync::mpsc::channel(1);
    let mut puller = AbortOnDrop(tokio::spawn(pull(sh.clone(), call.clone(), consumer, tx)));
    while let Some(m) = rx.recv().await {
        if stage.is_none() {
            stage = Some(spawn_stage(&rt, &call).await?);
        }
        run_one(&sh, &rt, &call, limit, replica, &mut stage, m).await?;
    }
    match (&mut puller.0).await {
        Ok(r) => r,
        Err(e) => Err(DistError::Run(RunError::Stalled(format!(
            "a puller of `{call}` ended: {e}"
        )))),
    }
}

/// A slot's puller: fetches the slot's next batch while the current one
/// runs, so the pull's round trip to the broker is off the slot's critical
/// path. At most one batch waits (the channel has one place, reserved before
/// each fetch); while it waits longer than `ack_wait`/3, the puller keeps it
/// alive ([`keep_alive`]), as the slot does for the batch it runs. If this
/// worker dies, the broker redelivers the waiting batch after `ack_wait`.
async fn pull(
    sh: Arc<Shared>,
    call: String,
    consumer: PullConsumer,
    tx: tokio::sync::mpsc::Sender<jetstream::Message>,
) -> Result<(), DistError> {
    // Since when pulls have been failing (the broker restarting, or the
    // network to it down): tolerated for `owner_wait`.
    let mut failing: Option<tokio::time::Instant> = None;
    let mut waiting: Option<jetstream::Message> = None;
    while !sh.stop.load(Ordering::Relaxed) {
        let permit = loop {
            tokio::select! {
                p = tx.reserve() => break p,
                () = tokio::time::sleep(sh.cfg.ack_wait / 3) => {
                    if let Some(m) = &waiting {
                        keep_alive(&sh, m).await;
                    }
                }
            }
        };
        // The slot has gone (its worker is stopping).
        let Ok(permit) = permit else { break };
        waiting = None;
        if sh.stop.load(Ordering::Relaxed) {
            break;
        }
        let mut msgs = match consumer
            .fetch()
            .max_messages(1)
            .expires(Duration::from_millis(500))
            .messages()
            .await
        {
            Ok(m) => m,
            // The run ended and the owner removed the stream.
            Err(_) if sh.stop.load(Ordering::Relaxed) => break,
            Err(e) => match pull_failed(&sh, &call, &mut failing, e.to_string()).await {
                Some(end) => return end,
                None => continue,
            },
        };
        let mut permit = Some(permit);
        // The broker's refusal of the pull (the Call's queue is gone: the
        // owner removed it at the end of the run, or is making it anew): a
        // failing pull, never an empty one retried at once.
        let mut refused = None;
        while let Some(m) = msgs.next().await {
            let m = match m {
                Ok(m) => m,
                Err(e) => {
                    refused = Some(e.to_string());
                    continue;
                }
            };
            match permit.take() {
                Some(p) => {
                    waiting = Some(m.clone());
                    p.send(m);
                }
                // More than asked for: hand it back at once.
                None => {
                    let _ = m.ack_with(AckKind::Nak(None)).await;
                }
            }
        }
        match refused {
            None => failing = None,
            Some(_) if sh.stop.load(Ordering::Relaxed) => break,
            Some(cause) => {
                if let Some(end) = pull_failed(&sh, &call, &mut failing, cause).await {
                    return end;
                }
            }
        }
    }
    Ok(())
}

/// A pull of `call` failed with `cause`: `None` to pull again after a short
/// pause, or how the puller ends. Failures are tolerated for `owner_wait`
/// (the broker restarting, the network to it down, an owner making its
/// queues anew); past that, if no owner answers for the run any more, the
/// run has ended and this worker missed the announcement (the owner
/// removes a finished run's queues): it stops as if it had heard it. Else
/// the failure is the worker's error.
async fn pull_failed(
    sh: &Arc<Shared>,
    call: &str,
    failing: &mut Option<tokio::time::Instant>,
    cause: String,
) -> Option<Result<(), DistError>> {
    let since = *failing.get_or_insert_with(tokio::time::Instant::now);
    if since.elapsed() <= sh.cfg.owner_wait {
        tokio::time::sleep(Duration::from_millis(250)).await;
        return None;
    }
    if current_run(&sh.client, &sh.cfg, &sh.hello).await.is_none() {
        sh.stop.store(true, Ordering::Relaxed);
        return Some(Ok(()));
    }
    Some(Err(DistError::Nats {
        what: format!(
            "pull from Call `{call}` (failing for {:.0} s)",
            since.elapsed().as_secs_f64()
        ),
        cause,
    }))
}

/// Keeps a batch fetched ahead alive while it waits behind a long one: a
/// progress ack (the broker would redeliver it after `ack_wait`) and a claim
/// (the owner's lease on it runs until a claim; the slot claims it again
/// when it starts it, which the owner takes as a refresh). The claim is
/// counted in no fault injection: faults count the slot's claims.
async fn keep_alive(sh: &Shared, m: &jetstream::Message) {
    let _ = m.ack_with(AckKind::Progress).await;
    let Ok(bm) = BatchMsg::decode(&m.payload) else {
        return;
    };
    let (claim, _) = claim_of(sh, &bm, delivered(m));
    let _ = sh
        .client
        .publish(sh.cfg.ctl_subject(), Ctl::Claim(claim).encode().into())
        .await;
}

/// JetStream's delivery count of this copy (1 = first delivery).
fn delivered(m: &jetstream::Message) -> u64 {
    m.info().map(|i| i.delivered.max(1) as u64).unwrap_or(1)
}

/// This worker's claim of copy `delivered` of batch `bm`, and the opening
/// its report reveals.
fn claim_of(sh: &Shared, bm: &BatchMsg, delivered: u64) -> (Claim, Opening) {
    let (opening, seal, proof) = sh.claimer.claim(&bm.key, bm.run, bm.ticket, delivered);
    let claim = Claim {
        run: bm.run,
        ticket: bm.ticket,
        delivered,
        worker: sh.id.clone(),
        seal,
        proof,
    };
    (claim, opening)
}

async fn run_one(
    sh: &Arc<Shared>,
    rt: &Arc<dyn ErasedCall>,
    call: &str,
    limit: Option<Duration>,
    replica: usize,
    stage: &mut Option<StageBox>,
    m: jetstream::Message,
) -> Result<(), DistError> {
    let delivered = delivered(&m);
    let bm = match BatchMsg::decode(&m.payload) {
        Ok(b) if b.run == sh.run.load(Ordering::Relaxed) => b,
        Ok(b) => match rejoin(sh).await {
            Some(run) if run == b.run => b,
            // An older run's batch (the owner started a new one): drop it.
            Some(_) => {
                let _ = m.ack_with(AckKind::Term).await;
                return Ok(());
            }
            // No owner answers: leave it to be redelivered.
            None => {
                let _ = m.ack_with(AckKind::Nak(Some(sh.cfg.ack_wait))).await;
                return Ok(());
            }
        },
        // Not a batch of this build: drop it for good.
        Err(_) => {
            let _ = m.ack_with(AckKind::Term).await;
            return Ok(());
        }
    };
    let (claim, opening) = claim_of(sh, &bm, delivered);
    let claim_frame = Ctl::Claim(claim.clone()).encode();
    let ctl = sh.cfg.ctl_subject();
    sh.client
        .publish(ctl.clone(), claim_frame.clone().into())
        .await
        .map_err(DistError::nats_any("publish a claim"))?;
    #[cfg(feature = "fault-injection")]
    let fault = sh.faults.after_claim(&sh.client).await;
    // Progress acks and claim heartbeats while the batch runs; owned by
    // this attempt: whatever ends it (a report, an error, the slot task
    // dropped) stops them, so no lease outlives its batch.
    let beat = AbortOnDrop({
        let (m, sh, ctl, frame) = (m.clone(), sh.clone(), ctl.clone(), claim_frame);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(sh.cfg.ack_wait / 3).await;
                let _ = m.ack_with(AckKind::Progress).await;
                let _ = sh.client.publish(ctl.clone(), frame.clone().into()).await;
            }
        })
    });
    let result = execute(sh, rt, limit, replica, stage, &bm).await;
    drop(beat);
    let grains = (bm.slots.len() / (bm.arity.max(1) as usize)) as u64;
    sh.batches.fetch_add(1, Ordering::Relaxed);
    sh.grains.fetch_add(grains, Ordering::Relaxed);
    #[cfg(feature = "fault-injection")]
    Injector::before_report(fault, &m).await;
    let wire = encode_result(sh, call, &bm, &claim, result).await;
    let frame = Ctl::Report(Report {
        claim,
        opening,
        result: wire,
    })
    .encode();
    publish_report(sh, ctl, frame).await?;
    // A late ack of a redelivered batch is harmless: the owner's fence
    // already decided the report.
    let _ = m.ack().await;
    Ok(())
}

/// Publish a report and flush it, retrying while the broker is unreachable
/// (for `owner_wait`): the client reconnects by itself, and a report that
/// arrives twice is refused by the owner's fence.
async fn publish_report(sh: &Arc<Shared>, ctl: String, frame: Vec<u8>) -> Result<(), DistError> {
    let start = tokio::time::Instant::now();
    loop {
        let sent = match sh.client.publish(ctl.clone(), frame.clone().into()).await {
            Ok(()) => sh.client.flush().await.map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        match sent {
            Ok(()) => return Ok(()),
            Err(cause) if start.elapsed() > sh.cfg.owner_wait => {
                return Err(DistError::Nats {
                    what: "publish a report".into(),
                    cause,
                });
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(250)).await,
        }
    }
}

/// A batch of another owner run arrived: ask the owner which run is
/// current and adopt it (the owner restarted and resumed from its journal).
/// `None` when no owner answers.
async fn rejoin(sh: &Arc<Shared>) -> Option<u64> {
    let run = current_run(&sh.client, &sh.cfg, &sh.hello).await?;
    sh.run.store(run, Ordering::Relaxed);
    Some(run)
}

/// The owner's current run, asked again and waited for one ack wait only
/// (not `owner_wait`): `None` when no owner answers by then.
async fn current_run(client: &async_nats::Client, cfg: &DistConfig, hello: &Hello) -> Option<u64> {
    let mut quick = cfg.clone();
    quick.owner_wait = cfg.ack_wait;
    say_hello(client, &quick, hello).await.ok()
}

async fn execute(
    sh: &Arc<Shared>,
    rt: &Arc<dyn ErasedCall>,
    limit: Option<Duration>,
    replica: usize,
    stage: &mut Option<StageBox>,
    bm: &BatchMsg,
) -> AttemptResult {
    let arity = bm.arity as usize;
    if arity == 0 {
        let inputs = BatchInputs::from_slots(0, Vec::new())
            .ok_or_else(|| AttemptError::Contract("a batch message of arity 0 carries slots".into()))?;
        return run_attempt(rt, stage, replica, inputs, limit).await;
    }
    // A value its codec refuses (a document outside this worker's input
    // roots, bytes another build wrote) fails its own Grain, as a record,
    // on every retry alike; the batch's other Grains run. Anything else
    // (the payload store unreachable) fails the attempt, which is retried.
    let mut values = Vec::with_capacity(bm.slots.len());
    let mut refused: Vec<Option<Cause>> = Vec::with_capacity(bm.slots.len() / arity);
    for grain in bm.slots.chunks(arity) {
        let mut vs = Vec::with_capacity(arity);
        let mut bad = None;
        for s in grain {
            match sh.payloads.decode_slot(s).await {
                Ok(v) => vs.push(v),
                Err(DistError::Wire { what: "value", cause }) => {
                    bad = Some(Cause::new(cause).with_code("input.refused"));
                    break;
                }
                Err(e) => return Err(AttemptError::Failed(e.to_string())),
            }
        }
        if bad.is_none() {
            values.extend(vs);
        }
        refused.push(bad);
    }
    let inputs = BatchInputs::from_slots(arity, values).ok_or_else(|| {
        AttemptError::Contract("a batch message's slot count is not a multiple of its arity".into())
    })?;
    if refused.iter().all(Option::is_none) {
        // A panic is this attempt's failure (the instance is lost and the
        // slot makes a fresh one): a poison record never takes the worker
        // down. The Call's timeout holds here as in the owner: a hung
        // attempt is given up.
        return run_attempt(rt, stage, replica, inputs, limit).await;
    }
    let good = refused.iter().filter(|r| r.is_none()).count();
    let mut ran = if good == 0 {
        Vec::new()
    } else {
        run_attempt(rt, stage, replica, inputs, limit).await?
    }
    .into_iter();
    if ran.len() != good {
        return Err(AttemptError::Contract(format!(
            "the stage returned {} outcomes for {good} inputs",
            ran.len()
        )));
    }
    Ok(refused
        .into_iter()
        .map(|r| match r {
            Some(cause) => Outcome::RecordFailure(cause),
            None => ran
                .next()
                .unwrap_or_else(|| Outcome::RecordFailure(Cause::new("no outcome"))),
        })
        .collect())
}

/// Aborts a task when dropped: a worker future aborted or dropped mid-run
/// takes its heartbeat and pullers with it (its slots are a `JoinSet`,
/// which does the same).
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Make one stage instance on the blocking pool.
async fn spawn_stage(rt: &Arc<dyn ErasedCall>, call: &str) -> Result<StageBox, DistError> {
    let r = rt.clone();
    let made = tokio::task::spawn_blocking(move || {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            r.spawn_stage().map_err(|e| e.to_string())
        }))
        .unwrap_or_else(|p| {
            Err(format!(
                "the factory panicked: {}",
                rayorch_runtime::spi::panic_text(&p)
            ))
        })
    })
    .await
    .unwrap_or_else(|e| Err(format!("the stage factory panicked: {e}")));
    made.map_err(|cause| {
        DistError::Run(RunError::ReplicaFactory {
            call: call.to_string(),
            stage: rt.stage_name(),
            cause,
        })
    })
}

async fn encode_result(
    sh: &Arc<Shared>,
    call: &str,
    bm: &BatchMsg,
    claim: &Claim,
    result: AttemptResult,
) -> Result<Vec<WireOutcome>, (WireFailure, String)> {
    let outs = result.map_err(|e| (WireFailure::of(&e), e.message().to_string()))?;
    let mut wire = Vec::with_capacity(outs.len());
    // Output keys name this worker's claim (its seal), not only the
    // delivery: two workers that ran one delivery (should a broker ever
    // hand a batch out twice under one delivery count) never share an
    // object, so the one whose report is refused as stale deletes only its
    // own, never the committed report's.
    let delivered = claim.delivered;
    let claimer: String = claim.seal[..6].iter().map(|b| format!("{b:02x}")).collect();
    let mut budget = sh.cfg.inline_total;
    // A value we cannot encode or that is too large fails the same way on
    // every retry: a contract error, not retried.
    let encode = async |v: &Value, key: String, budget: &mut usize| {
        sh.payloads
            .encode_slot(call, "outputs", Some(v), || key, budget)
            .await
            .map_err(|e| (WireFailure::Contract, e.to_string()))
    };
    for (i, o) in outs.into_iter().enumerate() {
        wire.push(match o {
            Outcome::Ok(vals) => {
                let mut slots = Vec::with_capacity(vals.len());
                for (j, v) in vals.into_iter().enumerate() {
                    let key = format!("{}-{}-d{delivered}-{claimer}-out{i}-{j}", bm.run, bm.ticket);
                    // An output the owner expands without reading it goes
                    // split, one slot per element.
                    if bm.split.get(j).copied().unwrap_or(false)
                        && let Some(items) = split_output(&sh.plan, bm.call as usize, j, v.clone())
                    {
                        let mut list = Vec::with_capacity(items.len());
                        for (k, x) in items.iter().enumerate() {
                            list.push(encode(x, format!("{key}-{k}"), &mut budget).await?);
                        }
                        slots.push(Slot::List(list));
                    } else {
                        slots.push(encode(&v, key, &mut budget).await?);
                    }
                }
                WireOutcome::Ok(slots)
            }
            Outcome::RecordFailure(c) => WireOutcome::Record(c.message().to_string(), stage_code(&c)),
            Outcome::GroupFailure(c) => WireOutcome::Group(c.message().to_string(), stage_code(&c)),
        });
    }
    Ok(wire)
}

/// The code a stage gave its failure's cause, to travel with its message
/// (a fresh cause has no kind yet, so this is the stage's own code).
fn stage_code(c: &rayorch_runtime::Cause) -> Option<String> {
    c.code().map(String::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_narrows_the_owners_roots_and_never_widens_them() {
        let owner = ["/data/pdfs".to_string(), "s3://b/corpus/".to_string()];
        assert_eq!(narrow_roots(&owner, &[]).unwrap(), owner);
        let own = [
            "/data/pdfs/2026".to_string(),
            "/data/pdfs-old".to_string(),
            "s3://b/corpus/x".to_string(),
        ];
        assert_eq!(
            narrow_roots(&owner, &own).unwrap(),
            ["/data/pdfs/2026", "s3://b/corpus/x"],
            "a sibling with a common prefix is not inside"
        );
        let e = narrow_roots(&owner, &["/etc".to_string()]).unwrap_err();
        assert!(e.to_string().contains("/etc"), "{e}");
        assert!(
            narrow_roots(&[], &["/data".to_string()]).is_err(),
            "an owner with no roots lets no path in"
        );
    }
}
