//! §D on the JetStream backend: the randomized contract's programs (plain,
//! with GroupFailures, with `Abort`) through `rayorch::dist` — the owner
//! and 1–3 worker tasks of this process over a real nats-server — against
//! the reference evaluator, and its GroupFailure envelope where it applies.
//!
//! Each program runs once, under a drawn distributed setup: how many
//! workers, which Calls the owner runs itself (`Owner::local_calls`, on the
//! runtime's replica pool), the admission window and credits per slot, a
//! worker task aborted mid-run (its batches come back through JetStream's
//! redelivery; a new worker joins), and stalls: async retrying Calls get a
//! timeout and hang past it on some attempts (`Fx::stall`), which their
//! retries absorb. Async stages, panics in and before the future, Record
//! and Group failures and Isolate/Abort recovery come with the programs.
//! Async sleeps are real here (at most 3 ms a batch).
//!
//! Volume per CI run: 48 programs × 1 distributed run each
//! (`PROPTEST_CASES` overrides), about 30 s of test time on this 2-core
//! machine; the soak figure is in the test's output and the commit.

use super::*;

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use proptest::test_runner::TestRunner;
use rayorch::dist::server::NatsServer;
use rayorch::dist::{Codecs, DistError, Owner, WorkerSummary};
use tokio::task::JoinHandle;

/// A run that gives no answer in this long hangs (and fails the case).
const HUNG: Duration = Duration::from_secs(120);

/// Every type a program's Calls take or return. A kept failure crosses as
/// its message (the hash reads only which children failed).
fn codecs() -> Codecs {
    type Kept = Vec<Result<i64, Cause>>;
    Codecs::new()
        .json::<i64>()
        .json::<bool>()
        .json::<Vec<i64>>()
        .custom::<Kept>(
            "kept",
            |xs| {
                let wire: Vec<Result<i64, &str>> = xs
                    .iter()
                    .map(|x| x.as_ref().copied().map_err(Cause::message))
                    .collect();
                serde_json::to_vec(&wire).unwrap_or_default()
            },
            |b| {
                let wire: Vec<Result<i64, String>> = serde_json::from_slice(b).map_err(|e| e.to_string())?;
                Ok(wire.into_iter().map(|x| x.map_err(Cause::new)).collect())
            },
        )
}

/// How one program runs on the distributed backend.
#[derive(Clone, Debug)]
struct Setup {
    /// Worker tasks at the start; each serves every Call the owner does
    /// not, one slot each.
    workers: usize,
    /// The owner runs the Calls whose id is this modulo 3 itself.
    owner_runs: Option<usize>,
    /// Abort worker task 0 once this many batches committed, and start a
    /// new worker.
    kill_after: Option<u64>,
    /// Async retrying Calls stall (`Fx::stall`).
    stall: bool,
    window: usize,
    credits: usize,
}

fn setup() -> impl Strategy<Value = Setup> {
    (
        1..=3usize,
        prop::option::weighted(0.4, 0..3usize),
        prop::option::weighted(0.4, 1..=8u64),
        prop::bool::weighted(0.5),
        1..=16usize,
        1..=3usize,
    )
        .prop_map(
            |(workers, owner_runs, kill_after, stall, window, credits)| Setup {
                workers,
                owner_runs,
                kill_after,
                stall,
                window,
                credits,
            },
        )
}

/// Every Fx of a program, to change.
fn fxs_mut(prog: &mut Program) -> Vec<&mut Fx> {
    let mut v = Vec::new();
    for op in &mut prog.ops {
        match op {
            Op::Map { f, .. } | Op::Filter { f, .. } | Op::Binary { f, .. } => v.push(f),
            Op::Broadcast { .. } => {}
            Op::Expand { fa, b, .. } | Op::Reduce { fa, b, .. } => {
                v.push(fa);
                v.extend(b.as_mut().map(|(_, f)| f));
            }
        }
    }
    v
}

/// What the sample covered (printed; the guard at the end asserts the
/// distributed faults happened).
#[derive(Debug, Default)]
struct Tally {
    programs: AtomicU64,
    roots: AtomicU64,
    owner_local: AtomicU64,
    workers_killed: AtomicU64,
    /// Runs in which a stalled Call timed out at least once.
    stalls_timed_out: AtomicU64,
    aborted: AtomicU64,
    /// Roots with more than one allowed output (the GroupFailure envelope).
    envelope_roots: AtomicU64,
    /// Workers that joined after their run had ended (no owner answered).
    late_workers: AtomicU64,
}

/// Worker tasks of finished runs: each must end `Ok` (checked at the end)
/// or, where it joined after its run had ended, find no owner (a run whose
/// roots all end before a remote Call, or whose Calls the owner runs
/// itself, needs no worker; a replacement may start as the run ends).
/// Each with its job and setup, named if it does not end.
type Ended = Mutex<Vec<(String, JoinHandle<Result<WorkerSummary, DistError>>)>>;

static JOBS: AtomicU64 = AtomicU64::new(0);

/// Run `prog` over `inputs` on the JetStream backend under `setup` and
/// compare with the reference.
async fn run_case(
    url: &str,
    prog: &Program,
    inputs: &[i64],
    setup: &Setup,
    tally: &Tally,
    ended: &Ended,
) -> Result<(), TestCaseError> {
    let mut prog = prog.clone();
    let mut stalled = Vec::new();
    for f in fxs_mut(&mut prog) {
        if setup.stall
            && matches!(f.exec, Exec::Async { .. })
            && matches!(f.rec, Rec::RetryBatch | Rec::RetryTail)
        {
            f.stall = true;
            stalled.push(format!("c{}", f.id));
        }
    }
    let (plan, outs) = build(&prog);
    let want = reference(&prog, inputs);
    let job = format!("rd{}", JOBS.fetch_add(1, Ordering::Relaxed));
    let ctx = || format!("program:\n{prog}\nroots: {inputs:?}\ndistributed: {setup:?}");
    let mut cfg = common::dist::config(url, &job);
    cfg.window = setup.window;
    cfg.credits_per_slot = setup.credits;
    let (mut local, mut remote) = (Vec::new(), Vec::new());
    for f in prog.fxs() {
        match setup.owner_runs {
            Some(r) if f.id % 3 == r => local.push(format!("c{}:{}", f.id, 1 + f.id % 2)),
            _ => remote.push(format!("c{}", f.id)),
        }
    }
    let codecs = codecs();
    // A worker that joins after its run ended waits 5 s for an owner (not
    // the default minute).
    let mut wcfg = cfg.clone();
    wcfg.owner_wait = Duration::from_secs(5);
    let start = {
        let (plan, cfg, remote) = (plan.clone(), wcfg, remote.join(","));
        move |codecs: &Codecs| common::dist::worker_task(&plan, codecs, cfg.clone(), remote.clone())
    };
    let mut workers: Vec<_> = (0..setup.workers).map(|_| start(&codecs)).collect();
    let mut owner = Owner::new(&plan, codecs.clone(), cfg.clone()).local_calls(&local.join(","));
    let stats = owner.stats();
    // The kill: once `k` batches committed, worker 0 is aborted and a new
    // worker joins.
    let killer = setup.kill_after.map(|k| {
        let victim = workers[0].abort_handle();
        let replacement = start.clone();
        let codecs = codecs.clone();
        let stats = stats.clone();
        tokio::spawn(async move {
            while stats.batches_committed.load(Ordering::Relaxed) < k {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            victim.abort();
            // The new worker's handle (not awaited here: it serves the run).
            Some(replacement(&codecs))
        })
    });
    let source = futures::stream::iter(inputs.iter().enumerate().map(|(k, &x)| (k as u64, x)));
    let mut outcomes = Vec::new();
    let run = owner.run(source, |o| outcomes.push(o.clone()));
    let result = tokio::time::timeout(HUNG, run).await;
    // The killer stops only at its sleep: it has either killed and replaced
    // worker 0, or done nothing.
    let mut killed = false;
    if let Some(killer) = killer {
        killer.abort();
        if let Ok(Some(replacement)) = killer.await {
            workers.swap_remove(0);
            ended
                .lock()
                .unwrap()
                .push((format!("{job} (the replacement) {setup:?}"), replacement));
            killed = true;
        }
    }
    ended
        .lock()
        .unwrap()
        .extend(workers.into_iter().map(|w| (format!("{job} {setup:?}"), w)));
    let Ok(result) = result else {
        return Err(TestCaseError::fail(format!(
            "the run gave no answer in {HUNG:?}\n{}",
            ctx()
        )));
    };
    tally.programs.fetch_add(1, Ordering::Relaxed);
    tally.roots.fetch_add(inputs.len() as u64, Ordering::Relaxed);
    tally
        .owner_local
        .fetch_add(u64::from(!local.is_empty()), Ordering::Relaxed);
    tally
        .workers_killed
        .fetch_add(u64::from(killed), Ordering::Relaxed);
    let envelope = want
        .allowed
        .iter()
        .filter(|a| a.as_ref().is_none_or(|a| a.len() > 1));
    tally
        .envelope_roots
        .fetch_add(envelope.count() as u64, Ordering::Relaxed);
    let got = match result {
        Ok(summary) => {
            prop_assert_eq!(summary.roots, inputs.len() as u64, "{}", ctx());
            let timed_out = summary
                .calls
                .iter()
                .any(|c| stalled.contains(&c.name) && c.attempt_failures > 0);
            tally
                .stalls_timed_out
                .fetch_add(u64::from(timed_out), Ordering::Relaxed);
            Ok(outcomes)
        }
        Err(DistError::Run(e)) => {
            tally.aborted.fetch_add(1, Ordering::Relaxed);
            Err(e)
        }
        Err(e) => return Err(TestCaseError::fail(format!("the owner failed: {e}\n{}", ctx()))),
    };
    expect(inputs, &outs, &want, got, &ctx)
}

/// Programs of every mix: plain (async panics included), with
/// GroupFailures, with `Abort`.
fn dist_programs() -> impl Strategy<Value = Program> {
    prop_oneof![
        program(SIM),
        program(Gen { group: true, ..SIM }),
        program(Gen { abort: true, ..SIM }),
    ]
}

#[test]
fn the_contract_holds_on_the_jetstream_backend() {
    quiet_poison_panics();
    let server = NatsServer::start().unwrap();
    let url = server.url();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (tally, ended) = (Tally::default(), Ended::default());
    // Each shrinking step is a distributed run: a failure shrinks a little.
    let mut runner = TestRunner::new(ProptestConfig {
        max_shrink_iters: 64,
        ..config(48)
    });
    let strategy = (
        dist_programs(),
        prop::collection::vec(0..1000i64, 1..=30),
        setup(),
    );
    let result = runner.run(&strategy, |(prog, inputs, setup)| {
        rt.block_on(run_case(&url, &prog, &inputs, &setup, &tally, &ended))
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    // Every worker not aborted served until its owner ended the run.
    let workers = std::mem::take(&mut *ended.lock().unwrap());
    rt.block_on(async {
        for (of, w) in workers {
            match tokio::time::timeout(HUNG, w).await {
                Ok(Ok(Ok(_))) => {}
                Ok(Ok(Err(DistError::NoOwner { .. }))) => {
                    tally.late_workers.fetch_add(1, Ordering::Relaxed);
                }
                Ok(Ok(Err(e))) => panic!("a worker of {of} failed: {e}"),
                Ok(Err(e)) => panic!("a worker task of {of} ended: {e}"),
                Err(_) => panic!("a worker of {of} did not end after its run"),
            }
        }
    });
    eprintln!("§D on JetStream: {tally:?}");
    if cases(48) >= 32 {
        let n = |c: &AtomicU64| c.load(Ordering::Relaxed);
        assert!(
            n(&tally.workers_killed) > 0 && n(&tally.stalls_timed_out) > 0 && n(&tally.owner_local) > 0,
            "the sample must kill workers, time out stalled attempts and run Calls in the owner: {tally:?}"
        );
    }
}
