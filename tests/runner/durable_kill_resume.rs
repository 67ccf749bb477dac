//! Durable runs across a crash (issue 12, items 2 and 3): a child process
//! (this test binary, re-executed with `DURABLE_CHILD_DIR` set) runs a
//! journaled pipeline into a JSONL sink and a failures sink; the parent kills
//! it at a kill point, resumes it, and compares the final outputs with an
//! uninterrupted run: same roots, same values, same failures and causes, no
//! duplicate, no loss, and a journal holding exactly the roots written.
//!
//! Kill points are `(kind, n)`: the n-th time the child reaches a point of
//! that kind, it prints `POINT kind n` and waits to be killed. Kinds: a stage
//! batch starting, a stage mid-batch (half its records computed), the sink
//! before and after writing a root, the sink with half a line written, before
//! the sinks' sync (number 1 is before the journal's first commit) and after
//! it (between the outputs' fsync and the journal commit). 24 seeded points
//! (a fixed-seed xorshift picks them; the first two are fixed) plus two
//! SIGINT runs (graceful stop: the run commits what it delivered and exits 0)
//! and two double kills (the resume is itself killed, then resumed again).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use rayorch::journal::{FsyncPolicy, JournalState};
use rayorch::prelude::*;
use rayorch::sink::{FailuresSink, JsonlSink, Sink};
use rayorch::{BoxError, ItemKind, Output, RunSummary};

domain!(Doc);
domain!(Word: Doc);

const ROOTS: u64 = 40;
const KINDS: [&str; 7] = [
    "batch-start",
    "batch-mid",
    "sink-before",
    "sink-after",
    "half-line",
    "sync-before",
    "sync-after",
];

/// Doc k: suppressed when k % 11 == 5 (`split` fails); else its words
/// k*10+i, one to three; a word x with x % 7 == 3 fails, which suppresses its
/// Doc; a Doc whose first square is 1 mod 13 fails in `finish`.
fn plan() -> (Plan, Output<Vec<u64>>) {
    let split = Call::per_record("split", |k: u64| {
        if k % 11 == 5 {
            Outcome::RecordFailure(format!("doc {k} cannot be split").into())
        } else {
            Outcome::Ok((0..k % 3 + 1).map(|i| k * 10 + i).collect::<Vec<_>>())
        }
    });
    let square = Call::batch("square", |xs: Vec<u64>| {
        point("batch-start");
        let half = xs.len() / 2;
        let mut out = Vec::with_capacity(xs.len());
        for (i, x) in xs.into_iter().enumerate() {
            if i == half {
                point("batch-mid");
            }
            out.push(if x % 7 == 3 {
                Outcome::RecordFailure(format!("word {x} is unlucky").into())
            } else {
                Outcome::Ok(x * x)
            });
        }
        Ok(out)
    })
    .batch_size(4)
    .replicas(2);
    let finish = Call::per_record("finish", |v: Vec<u64>| {
        if v.first().is_some_and(|x| x % 13 == 1) {
            Outcome::RecordFailure(format!("doc starting {v:?} fails to finish").into())
        } else {
            Outcome::Ok(v)
        }
    });
    Plan::build(|b| {
        let docs = b.source::<Doc, u64>();
        let words = rayorch::expand::<Word, _, _>(split.apply(docs));
        b.output(finish.apply(rayorch::reduce(square.apply(words))))
    })
    .unwrap()
}

// ---- the child ----

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Kill,
    Interrupt,
}

struct Target {
    kind: &'static str,
    n: u64,
    mode: Mode,
}

static TARGET: OnceLock<Option<Target>> = OnceLock::new();
static COUNTS: [AtomicU64; 7] = [const { AtomicU64::new(0) }; 7];
static INTERRUPTED: AtomicBool = AtomicBool::new(false);
static OUT: Mutex<()> = Mutex::new(());

fn say(line: &str) {
    let _guard = OUT.lock().unwrap();
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}").unwrap();
    out.flush().unwrap();
}

/// Count a point; at the target, report it and wait (for the kill, or for
/// the interrupt to be handled). Returns whether this was the target.
fn point(kind: &'static str) -> bool {
    let i = KINDS.iter().position(|k| *k == kind).unwrap();
    let n = COUNTS[i].fetch_add(1, Ordering::SeqCst) + 1;
    let Some(Some(t)) = TARGET.get() else { return false };
    if t.kind != kind || t.n != n {
        return false;
    }
    say(&format!("POINT {kind} {n}"));
    match t.mode {
        Mode::Kill => loop {
            std::thread::sleep(Duration::from_secs(1));
        },
        Mode::Interrupt => {
            while !INTERRUPTED.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }
    true
}

/// The run's real sinks, with kill points around them.
struct Points<S> {
    inner: S,
    jsonl: PathBuf,
}

impl<S: Sink> Sink for Points<S> {
    fn root(&mut self, o: &RootOutcome) -> Result<(), BoxError> {
        point("sink-before");
        if o.kind() == ItemKind::Present
            && TARGET
                .get()
                .is_some_and(|t| t.as_ref().is_some_and(|t| t.kind == "half-line"))
        {
            // What a write cut short by the crash leaves: half a line.
            let count = COUNTS[4].load(Ordering::SeqCst) + 1;
            if TARGET.get().unwrap().as_ref().unwrap().n == count {
                let mut f = std::fs::OpenOptions::new().append(true).open(&self.jsonl)?;
                f.write_all(format!("{{\"key\":{},\"value\":[1,", o.key).as_bytes())?;
            }
            point("half-line");
        }
        self.inner.root(o)?;
        point("sink-after");
        Ok(())
    }
    fn close(&mut self) -> Result<(), BoxError> {
        self.inner.close()
    }
    fn sync(&mut self, durable: bool, positions: &mut Vec<u64>) -> Result<(), BoxError> {
        point("sync-before");
        self.inner.sync(durable, positions)?;
        point("sync-after");
        Ok(())
    }
    fn truncate_to(&mut self, positions: &mut &[u64]) -> Result<(), BoxError> {
        self.inner.truncate_to(positions)
    }
}

fn run_into(dir: &Path, interruptible: bool) -> RunSummary {
    let (plan, out) = plan();
    let runner = Runner::new(&plan)
        .window(4)
        .journal(dir.join("run.journal"))
        .journal_source(format!("0..{ROOTS}"))
        .fsync(FsyncPolicy::EveryWakeup);
    if interruptible {
        let cancel = runner.cancel_handle();
        ctrlc::set_handler(move || {
            cancel.cancel();
            INTERRUPTED.store(true, Ordering::SeqCst);
        })
        .unwrap();
    }
    let jsonl = dir.join("out.jsonl");
    let sink = Points {
        inner: (
            JsonlSink::open(&jsonl, out).unwrap(),
            FailuresSink::open(dir.join("failures.jsonl")).unwrap(),
        ),
        jsonl,
    };
    runner.run((0..ROOTS).map(|k| (k, k)), sink).unwrap()
}

/// The child's entry point (a plain run in-process when not a child).
#[test]
fn child() {
    let Ok(dir) = std::env::var("DURABLE_CHILD_DIR") else {
        // Not a child: one uninterrupted run must be complete on its own.
        let dir = scratch("plain");
        TARGET.set(None).ok();
        let s = run_into(&dir, false);
        assert_eq!((s.roots, s.journal_skipped), (ROOTS, 0));
        let o = outputs(&dir);
        assert_eq!(o.values.len() + o.failures.len(), ROOTS as usize);
        return;
    };
    let target = std::env::var("DURABLE_CHILD_TARGET").ok().map(|t| {
        let mut it = t.split(':');
        let name = it.next().unwrap();
        let kind = KINDS.iter().find(|k| **k == name).unwrap();
        let n = it.next().unwrap().parse().unwrap();
        let mode = if it.next() == Some("int") {
            Mode::Interrupt
        } else {
            Mode::Kill
        };
        Target { kind, n, mode }
    });
    TARGET.set(target).ok();
    let s = run_into(Path::new(&dir), true);
    say(&format!(
        "DONE roots={} skipped={} cancelled={}",
        s.roots, s.journal_skipped, s.cancelled
    ));
}

// ---- the parent ----

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rayorch-durable-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Run the child into `dir`, interrupted at `target` (`kind:n[:int]`) when
/// given; returns whether the target was reached.
fn spawn(dir: &Path, target: Option<&str>) -> bool {
    // The test's name in this binary: its module path without the crate.
    let child_test = format!("{}::child", module_path!().split_once("::").unwrap().1);
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", &child_test, "--nocapture", "--test-threads=1"])
        .env("DURABLE_CHILD_DIR", dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    if let Some(t) = target {
        cmd.env("DURABLE_CHILD_TARGET", t);
    }
    let mut child = cmd.spawn().unwrap();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let mut reached = false;
    let mut done = false;
    for line in stdout.lines() {
        let line = line.unwrap();
        // libtest prints "test child ... " before the first of them.
        if line.contains("POINT ") && !reached {
            reached = true;
            if target.is_some_and(|t| t.ends_with(":int")) {
                let st = Command::new("kill")
                    .args(["-INT", &child.id().to_string()])
                    .status()
                    .unwrap();
                assert!(st.success());
            } else {
                child.kill().unwrap();
            }
        }
        done |= line.contains("DONE ");
    }
    let status = child.wait().unwrap();
    if reached && target.is_some_and(|t| !t.ends_with(":int")) {
        assert!(
            !status.success() && !done,
            "{target:?}: the child outlived SIGKILL"
        );
    } else {
        assert!(status.success() && done, "{target:?}: the child failed: {status}");
    }
    reached
}

#[derive(Debug, PartialEq)]
struct Outputs {
    values: BTreeMap<u64, serde_json::Value>,
    failures: BTreeMap<u64, serde_json::Value>,
}

/// Parse both files, refusing a duplicate key or a torn line.
fn outputs(dir: &Path) -> Outputs {
    let read = |name: &str| {
        let text = std::fs::read_to_string(dir.join(name)).unwrap();
        assert!(text.is_empty() || text.ends_with('\n'), "{name}: torn last line");
        let mut map = BTreeMap::new();
        for line in text.lines() {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            let key = v["key"].as_u64().unwrap();
            assert!(map.insert(key, v).is_none(), "{name}: key {key} written twice");
        }
        map
    };
    Outputs {
        values: read("out.jsonl"),
        failures: read("failures.jsonl"),
    }
}

fn check(dir: &Path, reference: &Outputs, what: &str) {
    let got = outputs(dir);
    assert_eq!(
        &got, reference,
        "{what}: outputs differ from the uninterrupted run"
    );
    let journal = JournalState::read(dir.join("run.journal")).unwrap().unwrap();
    let keys: Vec<u64> = journal.roots.keys().copied().collect();
    let mut written: Vec<u64> = got.values.keys().chain(got.failures.keys()).copied().collect();
    written.sort_unstable();
    assert_eq!(keys, written, "{what}: journal and outputs disagree");
    for (k, r) in &journal.roots {
        let expect = got
            .failures
            .get(k)
            .map_or("present", |f| f["outcome"].as_str().unwrap());
        assert_eq!(r.outcome, expect, "{what}: root {k}");
    }
}

/// xorshift64*: the kill points are the same on every run of this test.
fn seeded_points(count: usize) -> Vec<String> {
    let mut s: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = |bound: u64| {
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        s.wrapping_mul(0x2545_f491_4f6c_dd1d) % bound
    };
    // Upper bounds well under an uninterrupted run's counts (40 roots,
    // window 4: >= 10 commits, >= 9 batches, 25 present roots).
    let bounds = [6, 6, 30, 30, 15, 8, 8];
    let mut points = vec!["sync-before:1".to_string(), "sync-after:1".to_string()];
    while points.len() < count {
        let k = next(KINDS.len() as u64) as usize;
        let n = next(bounds[k]) + 1;
        let p = format!("{}:{n}", KINDS[k]);
        if !points.contains(&p) {
            points.push(p);
        }
    }
    points
}

#[test]
fn killed_and_interrupted_runs_resume_to_the_uninterrupted_outputs() {
    if std::env::var("DURABLE_CHILD_DIR").is_ok() {
        return; // only the parent runs the scenarios
    }
    let base = scratch("reference");
    assert!(!spawn(&base, None));
    let reference = outputs(&base);
    // The reference has all three terminal kinds.
    let kinds: Vec<&str> = reference
        .failures
        .values()
        .map(|f| f["outcome"].as_str().unwrap())
        .collect();
    assert!(
        kinds.contains(&"failed") && kinds.contains(&"suppressed"),
        "{kinds:?}"
    );
    assert_eq!(reference.values.len() + reference.failures.len(), ROOTS as usize);

    let mut scenarios: Vec<Vec<String>> = seeded_points(24).into_iter().map(|p| vec![p]).collect();
    scenarios.push(vec!["sink-after:7:int".into()]);
    scenarios.push(vec!["batch-mid:3:int".into()]);
    scenarios.push(vec!["sink-before:12".into(), "sink-after:3".into()]);
    scenarios.push(vec!["batch-start:4".into(), "half-line:2".into()]);
    for (i, kills) in scenarios.iter().enumerate() {
        let dir = scratch(&format!("s{i}"));
        for t in kills {
            assert!(spawn(&dir, Some(t)), "{kills:?}: kill point {t} was not reached");
        }
        assert!(!spawn(&dir, None));
        check(&dir, &reference, &format!("{kills:?}"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
    std::fs::remove_dir_all(&base).unwrap();
}

#[test]
fn changed_plan_or_source_is_refused_unless_forced() {
    if std::env::var("DURABLE_CHILD_DIR").is_ok() {
        return;
    }
    let dir = scratch("mismatch");
    let (plan, out) = plan();
    let path = dir.join("run.journal");
    let sink = || JsonlSink::open(dir.join("out.jsonl"), out).unwrap();
    Runner::new(&plan)
        .journal(&path)
        .journal_source("a")
        .run([(1u64, 1u64)], sink())
        .unwrap();
    let err = Runner::new(&plan)
        .journal(&path)
        .journal_source("b")
        .run([(2u64, 2u64)], sink())
        .unwrap_err();
    assert!(
        matches!(err, rayorch::RunError::JournalMismatch { what: "source", .. }),
        "{err}"
    );
    let other = Call::map("other", |x: u64| vec![x]);
    let (plan2, out2) = Plan::build(|b| {
        let docs = b.source::<Doc, u64>();
        b.output(other.apply(docs))
    })
    .unwrap();
    let err = Runner::new(&plan2)
        .journal(&path)
        .journal_source("a")
        .run(
            [(2u64, 2u64)],
            JsonlSink::open(dir.join("out.jsonl"), out2).unwrap(),
        )
        .unwrap_err();
    assert!(
        matches!(
            err,
            rayorch::RunError::JournalMismatch {
                what: "plan fingerprint",
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("journal_force"), "{err}");
    let s = Runner::new(&plan)
        .journal(&path)
        .journal_source("b")
        .journal_force(true)
        .run([(1u64, 1u64), (2, 2)], sink())
        .unwrap();
    assert_eq!((s.journal_skipped, s.present), (1, 1));
    assert_eq!(JournalState::read(&path).unwrap().unwrap().source, "b");
    std::fs::remove_dir_all(&dir).unwrap();
}
