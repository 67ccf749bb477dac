//! CONFORMANCE.md §D: the contract, randomized.
//!
//! A proptest strategy draws programs over the Domain chain `L0 > L1 > L2 >
//! L3`: 1–3 expansion levels; per-record Calls that fail on some values;
//! filters; broadcasts from any ancestor; two-input Calls with optional
//! inputs; plain and aligned expands (empty lists, mismatched lengths);
//! plain, member-masked and aligned reduces; random reservation policies
//! (some with shape keys and batch delays),
//! batch sizes, replica counts and recovery policies per Call (RetryBatch,
//! RetryTail, Isolate, Abort); blocking stages and async ones whose futures
//! sleep a drawn amount of tokio time and yield; records that poison their
//! whole batch (an `Err`, a panic, or an async stage's panic before its
//! future exists). With them come 1–30 roots and a schedule seed. Each
//! program is an AST (this file) interpreted twice: into a `Plan::build`
//! closure (`randomized/typed.rs`), and by the sequential reference
//! evaluator (`randomized/reference.rs`), written from DESIGN.md's
//! "Runtime contract" and CONFORMANCE.md §A and §C alone; it calls no engine
//! code. The generator and its coverage guard are in
//! `randomized/generator.rs`, the comparison in `harness.rs` beside it.
//! Async stages run on paused tokio time in every executor, so no run waits
//! on the wall clock.
//!
//! Volume per `cargo test --test contract randomized::` (`PROPTEST_CASES`
//! overrides the program counts):
//! - `same_final_items_under_every_schedule`: 1,024 programs × 9 schedules
//!   (sequential, then 8 fault-injecting `SimConfig::random`) = 9,216 runs.
//! - `group_failure_stays_in_its_envelope`: 512 programs × (1 + 6) = 3,584 runs.
//! - `abort_ends_the_run_when_a_poisoned_record_reaches_it`: 384 programs ×
//!   (1 + 4) = 1,920 runs.
//! - `threaded_runner_agrees_with_the_reference`: 256 programs (plain, with
//!   GroupFailures, with Abort) × 1 run of the production `Runner`
//!   (`run_async` on a current-thread runtime with paused time, or one in
//!   four through `Runner::run`).
//!
//! 14,976 (program × schedule) runs in about 5 s of CPU time on this 2-core
//! machine (`/usr/bin/time -v` of the test binary: 4.7 s user, 5.3 s wall
//! at load average 2.4), plus the build.
//! A failure prints the program listing, the roots, the schedule seed and its
//! `SimConfig`; proptest shrinks the program and the roots first.

use crate::common;
mod dist;
mod generator;
mod harness;
mod reference;
mod typed;

use generator::*;
use harness::*;
use reference::*;
use typed::*;

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fmt;
use std::sync::Once;
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use rayorch::sim::{self, SimConfig};
use rayorch::sink::Callback;
use rayorch::spi::StageKind;
use rayorch::{
    Call, Cause, ChildOf, Data, DescendantOf, Domain, Inputs, Item, Outcome, Output, Plan, Port, Recovery,
    Reservation, RootOutcome, RunError, Runner, StageResult, broadcast, domain, expand, expand_aligned,
    filter, reduce, reduce_aligned, reduce_members,
};

domain!(L0);
domain!(L1: L0);
domain!(L2: L1);
domain!(L3: L2);

/// The engine's cause for an aligned expansion whose lists differ in length
/// starts with this; the rest (the lengths, the advice) is free text.
const MISMATCH: &str = "cardinality mismatch";

/// The timeout of a stalling Call (`Fx::stall`).
const STALL_TIMEOUT: Duration = Duration::from_millis(250);

// ---- the program AST ---------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fail {
    Never,
    /// `RecordFailure` when the judged value is `r` modulo `m`.
    Record {
        m: i64,
        r: i64,
    },
    /// `GroupFailure` when the judged value is `r` modulo `m`.
    Group {
        m: i64,
        r: i64,
    },
}

/// How a Call recovers from a whole-attempt failure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Rec {
    RetryBatch,
    RetryTail,
    Isolate,
    Abort,
}

/// How a poisoned batch fails: the attempt's error text, as the engine
/// records it, differs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum How {
    /// The stage returns `Err` for the whole batch.
    Err,
    /// The stage panics (an async stage: inside its future).
    Panic,
    /// An async stage panics in the synchronous part of `run`, before it
    /// returns its future.
    PanicEarly,
}

/// A physical failure: every attempt whose batch holds a record whose judged
/// value is `r` modulo `m` fails as a whole. Only on `Isolate` Calls (which
/// bisect down to the record and fail it alone) and `Abort` Calls (which end
/// the run); a retrying Call would fail its innocent batch-mates too, and
/// which ones depends on the schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Poison {
    m: i64,
    r: i64,
    how: How,
}

/// Where a Call's stage runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Exec {
    Blocking,
    /// An `AsyncStage` whose future sleeps `(base * (len + 1)) % 3000` µs of
    /// tokio time per batch of `len` records (and yields once when `base` is
    /// odd), with up to `concurrency` batches in flight per replica.
    Async {
        base: u32,
        concurrency: usize,
    },
}

/// One Call's user code and configuration. `p` and `q` parameterize the
/// function; what they mean depends on how the Call is used (see `Fx::arith`,
/// `keep`, `list`, `hash`).
#[derive(Clone, Copy, Debug)]
struct Fx {
    id: usize,
    p: i64,
    q: i64,
    fail: Fail,
    res: Reservation,
    batch: usize,
    rec: Rec,
    poison: Option<Poison>,
    exec: Exec,
    /// The Call's own pool size (the random sim schedules draw their own).
    replicas: usize,
    /// A shape key (`value mod n`) on a Call with one `i64` input; batches
    /// then hold one key each.
    shape: Option<i64>,
    /// A batch delay (µs) with preferred sizes, on any Call.
    delay_us: Option<u64>,
    /// Set only by the distributed property (`randomized/dist.rs`), on async
    /// retrying Calls: the Call gets a timeout ([`STALL_TIMEOUT`]) and its
    /// 2nd and 6th attempts hang past it; retries absorb both.
    stall: bool,
}

/// What user code returns, kept apart from `rayorch::Outcome` so that the
/// reference evaluator does not lean on engine types.
enum Res<T> {
    Ok(T),
    Record(String),
    Group(String),
    /// The record poisons its whole batch; the text is the stage's error
    /// (or panic) message.
    Poison(String),
}

impl Fx {
    fn judge<T>(&self, k: i64, ok: T) -> Res<T> {
        if let Some(Poison { m, r, .. }) = self.poison
            && k.rem_euclid(m) == r
        {
            return Res::Poison(format!("c{} is poisoned by {k}", self.id));
        }
        match self.fail {
            Fail::Record { m, r } if k.rem_euclid(m) == r => Res::Record(format!("c{} rejects {k}", self.id)),
            Fail::Group { m, r } if k.rem_euclid(m) == r => {
                Res::Group(format!("c{} dooms its group at {k}", self.id))
            }
            _ => Res::Ok(ok),
        }
    }

    /// The cause the engine records for an attempt failed by `poison`: the
    /// executors' text for a panic, else the stage's error text.
    fn attempt_error(&self, poison: &str) -> String {
        match self.poison.map(|p| p.how) {
            Some(How::Panic | How::PanicEarly) => format!("stage panicked: {poison}"),
            _ => poison.to_string(),
        }
    }

    fn arith(&self, x: i64) -> Res<i64> {
        self.judge(x, (x * self.p + self.q).rem_euclid(1000))
    }

    /// Distinct sentinels for a missing optional input, so that "passed as
    /// missing" is visible in the result.
    fn binary(&self, a: Option<i64>, b: Option<i64>) -> Res<i64> {
        self.arith(a.unwrap_or(1000) * 31 + b.unwrap_or(2000))
    }

    fn keep(&self, x: i64) -> Res<bool> {
        self.judge(x, x.rem_euclid(self.p) != self.q)
    }

    /// `p` is the longest list; lengths 0 (an empty, terminal Expansion) are common.
    fn list(&self, x: i64) -> Res<Vec<i64>> {
        let len = (x / 3 + self.q).rem_euclid(self.p + 1);
        let items = (0..len)
            .map(|i| (x * (i + 2) + self.q * (i + 1) + i).rem_euclid(1000))
            .collect();
        self.judge(x, items)
    }

    /// Polynomial, so a reduce that reorders (or loses, or duplicates) members
    /// changes the result.
    fn hash(&self, xs: &[i64]) -> Res<i64> {
        let h = xs.iter().fold(17 + xs.len() as i64, |h, &x| {
            (h * 131 + x + 1).rem_euclid(1_000_000_007)
        });
        self.judge(h, h)
    }
}

/// Port operands are indices into the per-level port lists, in creation order
/// (`L0.0` is the source). Every op appends its output Port(s) to the list of
/// the level it produces into.
#[derive(Clone, Debug)]
enum Op {
    Map {
        lvl: usize,
        src: usize,
        f: Fx,
    },
    /// `filter(value, f.keep(mask_src))`.
    Filter {
        lvl: usize,
        value: usize,
        mask_src: usize,
        f: Fx,
    },
    Binary {
        lvl: usize,
        a: usize,
        b: usize,
        opt_a: bool,
        opt_b: bool,
        f: Fx,
    },
    Broadcast {
        lvl: usize,
        from: usize,
        src: usize,
        like: usize,
    },
    /// Into level `lvl` from `lvl - 1`: `expand(fa.list(a))`, or with `b`
    /// `expand_aligned((fa.list(a), fb.list(b)))`.
    Expand {
        lvl: usize,
        a: usize,
        fa: Fx,
        b: Option<(usize, Fx)>,
    },
    /// Into level `lvl` from `lvl + 1`: `fa.hash(reduce(a))`, member-masked by
    /// `members`, or with `b` the aligned reduce of `a` and `b`, each hashed.
    Reduce {
        lvl: usize,
        a: usize,
        fa: Fx,
        b: Option<(usize, Fx)>,
        members: Option<usize>,
        /// `reduce_keep_failed` (one input, no members): a failed child is
        /// hashed as [`FAILED_CHILD`] at its ordinal.
        keep_failed: bool,
    },
}

/// What a failed child of a `keep_failed` reduce contributes to the hash:
/// which cause it carries may depend on the schedule (a Suppressed child
/// names whichever failure decided it), its position may not.
const FAILED_CHILD: i64 = -7_777_777;

#[derive(Clone)]
struct Program {
    ops: Vec<Op>,
}

impl Program {
    /// Every Call's user code and configuration.
    fn fxs(&self) -> impl Iterator<Item = &Fx> {
        self.ops.iter().flat_map(|op| {
            let (a, b): (Option<&Fx>, Option<&Fx>) = match op {
                Op::Map { f, .. } | Op::Filter { f, .. } | Op::Binary { f, .. } => (Some(f), None),
                Op::Broadcast { .. } => (None, None),
                Op::Expand { fa, b, .. } | Op::Reduce { fa, b, .. } => (Some(fa), b.as_ref().map(|(_, f)| f)),
            };
            a.into_iter().chain(b)
        })
    }
}

impl fmt::Display for Fx {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "c{}[p={} q={}", self.id, self.p, self.q)?;
        match self.fail {
            Fail::Never => {}
            Fail::Record { m, r } => write!(f, " record-fails k%{m}=={r}")?,
            Fail::Group { m, r } => write!(f, " GROUP-fails k%{m}=={r}")?,
        }
        write!(
            f,
            " {:?} B{} R{} {:?}",
            self.res, self.batch, self.replicas, self.rec
        )?;
        if let Some(Poison { m, r, how }) = self.poison {
            write!(f, " POISON({how:?}) k%{m}=={r}")?;
        }
        if let Exec::Async { base, concurrency } = self.exec {
            write!(f, " async(base {base}us, x{concurrency})")?;
        }
        if self.stall {
            write!(f, " STALLS past {STALL_TIMEOUT:?}")?;
        }
        write!(f, "]")
    }
}

/// Proptest prints the minimal failing input with `Debug`: make that the listing.
impl fmt::Debug for Program {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "\n{self}\n")
    }
}

/// A readable listing, printed with every failure.
impl fmt::Display for Program {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut n = [1usize, 0, 0, 0];
        let mut new = |l: usize| {
            n[l] += 1;
            format!("L{l}.{}", n[l] - 1)
        };
        writeln!(f, "L0.0 = source")?;
        for op in &self.ops {
            match op {
                Op::Map { lvl, src, f: fx } => writeln!(f, "{} = map {fx}(L{lvl}.{src})", new(*lvl))?,
                Op::Filter {
                    lvl,
                    value,
                    mask_src,
                    f: fx,
                } => writeln!(
                    f,
                    "{} = filter(L{lvl}.{value}, keep {fx}(L{lvl}.{mask_src}))",
                    new(*lvl)
                )?,
                Op::Binary {
                    lvl,
                    a,
                    b,
                    opt_a,
                    opt_b,
                    f: fx,
                } => {
                    let o = |x: bool| if x { ".optional()" } else { "" };
                    writeln!(
                        f,
                        "{} = binary {fx}(L{lvl}.{a}{}, L{lvl}.{b}{})",
                        new(*lvl),
                        o(*opt_a),
                        o(*opt_b)
                    )?
                }
                Op::Broadcast { lvl, from, src, like } => writeln!(
                    f,
                    "{} = broadcast(L{from}.{src}, like = L{lvl}.{like})",
                    new(*lvl)
                )?,
                Op::Expand { lvl, a, fa, b } => match b {
                    None => writeln!(f, "{} = expand(list {fa}(L{}.{a}))", new(*lvl), lvl - 1)?,
                    Some((b, fb)) => {
                        let (x, y) = (new(*lvl), new(*lvl));
                        writeln!(
                            f,
                            "({x}, {y}) = expand_aligned(list {fa}(L{p}.{a}), list {fb}(L{p}.{b}))",
                            p = lvl - 1
                        )?
                    }
                },
                Op::Reduce {
                    lvl,
                    a,
                    fa,
                    b,
                    members,
                    keep_failed,
                } => {
                    let c = lvl + 1;
                    let mut m = members
                        .map(|m| format!(", members = L{c}.{m}"))
                        .unwrap_or_default();
                    if *keep_failed {
                        m.push_str(", keep_failed");
                    }
                    match b {
                        None => writeln!(f, "{} = hash {fa}(reduce(L{c}.{a}{m}))", new(*lvl))?,
                        Some((b, fb)) => {
                            let (x, y) = (new(*lvl), new(*lvl));
                            writeln!(
                                f,
                                "({x}, {y}) = (hash {fa}, hash {fb})(reduce_aligned((L{c}.{a}, L{c}.{b}){m}))"
                            )?
                        }
                    }
                }
            }
        }
        write!(f, "outputs: every L0 port, in order")
    }
}

fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn config(default_cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases: cases(default_cases),
        // The failure message carries everything needed to replay; no
        // regression files beside the test.
        failure_persistence: None,
        max_shrink_iters: 2048,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config(1024))]

    /// §D: without GroupFailures, final Items (kind, value, cause) are the
    /// reference's under every schedule, faults included, with blocking and
    /// async stages, retrying and isolating Calls and poisoned records.
    #[test]
    fn same_final_items_under_every_schedule(
        prog in program(SIM),
        inputs in prop::collection::vec(0..1000i64, 1..=30),
        seed in any::<u64>(),
    ) {
        let open = check(&prog, &inputs, seed, 8)?;
        prop_assert_eq!(open, 0, "no schedule freedom without GroupFailures");
    }
}

proptest! {
    #![proptest_config(config(512))]

    /// §D's GroupFailure envelope. What is observable: only root outputs come
    /// back from `sim::run`, and every L0 Port is an output. Sibling Items
    /// below the root are not observable one by one; their effect is, through
    /// every downstream Port, and the reference enumerates all of them: per
    /// (Call, parent) with a GroupFailure, every non-empty subset of the
    /// doomed siblings is Failed and the rest Suppressed with one committed
    /// sibling's cause, and each other sibling is either its failure-free Item
    /// or Suppressed with that cause. The root's outputs must equal one
    /// resulting vector, so Items outside that (Call, parent) must match the
    /// reference exactly, and a reduce over the parent is Suppressed.
    #[test]
    fn group_failure_stays_in_its_envelope(
        prog in program(Gen { group: true, ..SIM }),
        inputs in prop::collection::vec(0..1000i64, 1..=30),
        seed in any::<u64>(),
    ) {
        check(&prog, &inputs, seed, 6)?;
    }
}

proptest! {
    #![proptest_config(config(384))]

    /// `Recovery::Abort` is fail-stop: when an Abort Call runs a poisoned
    /// record (whichever schedule reaches it first) the run ends with
    /// `RunError::Aborted` naming one such Call and the attempt's error, or
    /// (when every such Grain went stale first) completes with the
    /// reference's outputs; when none does, the outputs are the reference's.
    #[test]
    fn abort_ends_the_run_when_a_poisoned_record_reaches_it(
        prog in program(Gen { abort: true, ..SIM }),
        inputs in prop::collection::vec(0..1000i64, 1..=30),
        seed in any::<u64>(),
    ) {
        check(&prog, &inputs, seed, 4)?;
    }
}

proptest! {
    #![proptest_config(config(256))]

    /// The first property with poisoned Isolate Calls free to batch Grains
    /// of several parents.
    #[test]
    fn isolate_across_parents_fails_only_poisoned_records(
        prog in program(Gen { isolate_mixes_parents: true, ..SIM }),
        inputs in prop::collection::vec(0..1000i64, 1..=30),
        seed in any::<u64>(),
    ) {
        check(&prog, &inputs, seed, 8)?;
    }
}

proptest! {
    #![proptest_config(config(256))]

    /// The same comparisons through the production executor (replica
    /// threads, real completion order), with each Call's own batch size,
    /// replica count and async concurrency: three runs in four on a
    /// current-thread runtime with paused time, one in four through
    /// `Runner::run` (multi-thread, real time: async sleeps of up to 3 ms).
    /// Its schedule is not seeded, so a failure here may not replay: the
    /// listing and roots are printed; rerun them under `sim`.
    #[test]
    fn threaded_runner_agrees_with_the_reference(
        prog in runner_programs(),
        inputs in prop::collection::vec(0..1000i64, 1..=30),
        window in 1..=16usize,
        flavour in prop_oneof![3 => Just(Flavour::Paused), 1 => Just(Flavour::MultiThread)],
    ) {
        quiet_poison_panics();
        let (plan, outs) = build(&prog);
        let want = reference(&prog, &inputs);
        let ctx = || format!("program:\n{prog}\nroots: {inputs:?}\nRunner window {window}, {flavour:?}");
        let got = run_threaded(&plan, &inputs, window, flavour, &ctx)?;
        expect(&inputs, &outs, &want, got, &ctx)?;
    }
}

proptest! {
    // A hung case takes its full 60 s; shrinking it would take hours.
    #![proptest_config(ProptestConfig { max_shrink_iters: 0, ..config(64) })]

    /// The threaded Runner with async stages that panic, inside their future
    /// or before returning it. A run that gives no answer within 60 s (it
    /// hangs) fails the property instead of the test binary hanging.
    #[test]
    fn threaded_runner_survives_async_panics(
        prog in program(SIM),
        inputs in prop::collection::vec(0..1000i64, 1..=30),
        window in 1..=16usize,
    ) {
        quiet_poison_panics();
        let (tx, rx) = std::sync::mpsc::channel();
        let (p, x) = (prog.clone(), inputs.clone());
        std::thread::spawn(move || {
            let (plan, outs) = build(&p);
            let want = reference(&p, &x);
            let ctx = || format!("program:\n{p}\nroots: {x:?}\nRunner window {window}");
            let verdict = run_threaded(&plan, &x, window, Flavour::Paused, &ctx)
                .and_then(|got| expect(&x, &outs, &want, got, &ctx));
            let _ = tx.send(verdict);
        });
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(verdict) => verdict?,
            Err(_) => {
                return Err(TestCaseError::fail(format!(
                    "the Runner gave no answer in 60 s\nprogram:\n{prog}\nroots: {inputs:?}\nRunner window {window}"
                )));
            }
        }
    }
}

/// The smallest schedule behind an `Isolate` failure the properties above
/// found: a poisoned Grain shares a retried batch with an innocent one of
/// another root; its root finishes while the batch is in flight (a poisoned
/// sibling failed, so the root's reduce is decided), which leaves the
/// innocent Grain the batch's only live one. Having failed twice, it is
/// taken for the isolated poison and ended Failed with its batch-mate's error,
/// although it never failed alone (fixed: isolation counts the physical batch).
#[test]
fn isolate_never_fails_a_record_that_did_not_fail_alone() {
    let split = Call::map("split", |n: i64| if n == 0 { vec![-1, -2] } else { vec![n] });
    let check = Call::batch("check", |batch: Vec<i64>| match batch.iter().find(|&&x| x < 0) {
        Some(x) => Err(format!("poisoned by {x}").into()),
        None => Ok(batch.into_iter().map(Outcome::Ok).collect()),
    })
    .recovery(Recovery::Isolate)
    // The schedule below is the FIFO one the properties found.
    .reservation(Reservation::Elastic);
    let (plan, out) = Plan::build(|b| {
        let x = b.source::<L0, i64>();
        b.output(reduce(check.apply(expand::<L1, _, _>(split.apply(x)))))
    })
    .unwrap();
    let mut d = common::HandDriver::new(&plan);
    let c = d.call("check");
    d.admit(0, 0i64);
    d.admit(1, 5i64);
    d.settle(&[c]);
    let (p1, p2, a) = (
        common::path(0, &[0]),
        common::path(0, &[1]),
        common::path(1, &[0]),
    );
    d.step(c, 1).unwrap();
    d.step(c, 2).unwrap();
    let mut b3 = d.reserve(c, 1).unwrap();
    let mut b4 = d.reserve(c, 2).unwrap();
    assert_eq!(
        d.dispatches(c),
        vec![
            vec![p1.clone()],
            vec![p2.clone(), a.clone()],
            vec![p1],
            vec![p2, a]
        ],
        "the schedule this test is about"
    );
    let r3 = d.execute(&mut b3);
    d.report(b3.id, r3);
    assert!(d.outcome(0).get(out).cause().is_some(), "root 0 has finished");
    let r4 = d.execute(&mut b4);
    d.report(b4.id, r4);
    d.settle(&[]);
    assert_eq!(d.outcome(1).get(out), Item::Present(vec![5]));
}

/// `common::HandDriver` runs an async stage's future on tokio
/// with paused time: an hour of sleep and a yield cost nothing, and a panic
/// inside the future is an attempt failure that replaces the replica.
#[test]
fn the_hand_driver_runs_async_stages_on_tokio_time() {
    let calls = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let c = calls.clone();
    let slow = common::async_call("slow", move |batch: Vec<i64>| {
        let first = c.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0;
        Box::pin(async move {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            tokio::task::yield_now().await;
            if first {
                panic!("the first attempt explodes inside its future");
            }
            Ok(batch.into_iter().map(|x| Outcome::Ok(x + 1)).collect())
        })
    })
    .recovery(Recovery::RetryBatch(1));
    let (plan, out) = Plan::build(|b| {
        let x = b.source::<L0, i64>();
        b.output(slow.apply(x))
    })
    .unwrap();
    let mut d = common::HandDriver::new(&plan);
    d.admit(0, 41i64);
    let s = d.call("slow");
    d.settle(&[]);
    assert_eq!(d.dispatches(s).len(), 2, "the panicked attempt was retried");
    assert_eq!(d.outcome(0).get(out), Item::Present(42));
}
