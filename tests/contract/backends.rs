//! What the run loop decides is the same on every backend: here duplicate
//! root keys, through the threaded `Runner`, the seeded simulator
//! (`rayorch::sim`, sequential and random schedules) and the JetStream
//! owner (`rayorch::dist`, one worker task, a real nats-server). A repeated
//! key is one root's failure naming the key; the first root with that key
//! and every other root run as if it were not there.

use std::collections::BTreeMap;
use std::sync::Arc;

use rayorch::dist::{Codecs, Owner};
use rayorch::sim::{self, SimConfig};
use rayorch::sink::Callback;
use rayorch::spi::Value;
use rayorch::{
    Call, Cause, ItemKind, Outcome, Output, Plan, RootOutcome, RunSummary, Runner, domain, expand, reduce,
};

use crate::common;

domain!(Doc);
domain!(Page: Doc);

/// Words become pages; a page `"bad"` is a RecordFailure, which suppresses
/// its doc.
fn plan() -> (Plan, Output<Vec<usize>>) {
    let split = Call::map("split", |d: String| {
        d.split(' ').map(String::from).collect::<Vec<_>>()
    });
    let len = Call::per_record("len", |w: String| match w.as_str() {
        "bad" => Outcome::RecordFailure(Cause::new("a bad page")),
        _ => Outcome::Ok(w.len()),
    })
    .batch_size(3);
    Plan::build(|b| {
        let docs = b.source::<Doc, String>();
        b.output(reduce(len.apply(expand::<Page, _, _>(split.apply(docs)))))
    })
    .unwrap()
}

/// Key 1 comes three times, key 4 twice (the second time after its first
/// root may have finished); key 5 fails as a record.
fn roots() -> Vec<(u64, String)> {
    [
        (0, "a bb"),
        (1, "ccc dd e"),
        (2, "ffff"),
        (1, "never run"),
        (4, "g hh"),
        (5, "ok bad"),
        (1, "nor this"),
        (3, "i"),
        (4, "nor this one"),
    ]
    .map(|(k, d)| (k, d.to_string()))
    .to_vec()
}

/// Per key, every outcome handed out (kind, value, cause), sorted: the
/// order in which a backend hands them out is its own.
type PerKey = BTreeMap<u64, Vec<Ended>>;

/// How one root ended: kind, value, cause.
type Ended = (ItemKind, Option<Vec<usize>>, Option<String>);

fn per_key<'a>(outcomes: impl IntoIterator<Item = &'a RootOutcome>, out: Output<Vec<usize>>) -> PerKey {
    let mut m = PerKey::new();
    for o in outcomes {
        let item = o.get(out);
        let cause = item.cause().map(|c| c.message().to_string());
        m.entry(o.key)
            .or_default()
            .push((item.kind(), item.present(), cause));
    }
    m.values_mut().for_each(|v| sort(v));
    m
}

/// `ItemKind` has no order of its own: by its name.
fn sort(v: &mut [Ended]) {
    v.sort_by_key(|(kind, value, cause)| (format!("{kind:?}"), value.clone(), cause.clone()));
}

/// The summary counts the loop writes: roots, present, failed, suppressed,
/// duplicate keys.
fn counts(s: &RunSummary) -> [u64; 5] {
    [s.roots, s.present, s.failed, s.suppressed, s.duplicate_keys]
}

/// The same counts from a run's outcomes (the simulator returns outcomes
/// and engine counters, no summary).
fn counts_of(m: &PerKey) -> [u64; 5] {
    let all: Vec<_> = m.values().flatten().collect();
    let n = |k: ItemKind| all.iter().filter(|(kind, ..)| *kind == k).count() as u64;
    let duplicates = all
        .iter()
        .filter(|(_, _, c)| {
            c.as_deref()
                .is_some_and(|c| c.contains("was already given to this run"))
        })
        .count() as u64;
    [
        all.len() as u64,
        n(ItemKind::Present),
        n(ItemKind::Failed),
        n(ItemKind::Suppressed),
        duplicates,
    ]
}

/// What every backend must give.
fn check(m: &PerKey, backend: &str) {
    let dup = |k: u64| {
        (
            ItemKind::Failed,
            None,
            Some(format!(
                "root key {k} was already given to this run; this root was not run: give each root a unique key"
            )),
        )
    };
    let present = |v: &[usize]| (ItemKind::Present, Some(v.to_vec()), None);
    let mut want = PerKey::new();
    want.insert(0, vec![present(&[1, 2])]);
    want.insert(1, vec![dup(1), dup(1), present(&[3, 2, 1])]);
    want.insert(2, vec![present(&[4])]);
    want.insert(3, vec![present(&[1])]);
    want.insert(4, vec![dup(4), present(&[1, 2])]);
    want.insert(
        5,
        vec![(ItemKind::Suppressed, None, Some("a bad page".to_string()))],
    );
    want.values_mut().for_each(|v| sort(v));
    assert_eq!(m, &want, "{backend}");
}

#[test]
fn duplicate_keys_end_the_same_under_runner_sim_and_the_distributed_owner() {
    let (plan, out) = plan();
    let want_counts = [9, 5, 3, 1, 3];

    let mut local = Vec::new();
    let summary = Runner::new(&plan)
        .window(3)
        .unique_keys(true)
        .run(roots(), Callback(|o: &RootOutcome| local.push(o.clone())))
        .unwrap();
    let local = per_key(&local, out);
    check(&local, "Runner");
    assert_eq!(counts(&summary), want_counts, "Runner: {summary:?}");

    let erased: Vec<(u64, Value)> = roots()
        .into_iter()
        .map(|(k, d)| (k, Arc::new(d) as Value))
        .collect();
    for cfg in [
        SimConfig::sequential(),
        SimConfig::random(7),
        SimConfig::random(8),
    ] {
        let run = sim::run(&plan, erased.clone(), &cfg).unwrap();
        let simulated = per_key(&run.outcomes, out);
        check(&simulated, &format!("sim {cfg:?}"));
        assert_eq!(counts_of(&simulated), want_counts, "sim {cfg:?}");
    }

    let codecs = Codecs::new()
        .json::<String>()
        .json::<Vec<String>>()
        .json::<usize>();
    let (summary, outcomes) =
        common::dist::run_with_one_worker(&plan, codecs, "dupkeys", roots(), |o| o.unique_keys(true));
    let summary = summary.unwrap();
    let distributed = per_key(&outcomes, out);
    check(&distributed, "Owner");
    assert_eq!(counts(&summary), want_counts, "Owner: {summary:?}");
    assert_eq!(distributed, local, "the Owner hands out what the Runner does");
}

/// An erased source (the simulator's, the owner's `run_values_into`) can
/// hold a root of another type than the plan's source takes: that root
/// fails alone (kind `source`, naming the type), the others run.
#[test]
fn a_root_of_the_wrong_type_fails_alone_on_an_erased_source() {
    let (plan, out) = plan();
    let roots: Vec<(u64, Value)> = vec![
        (0, Arc::new("a bb".to_string())),
        (1, Arc::new(7u32)),
        (2, Arc::new("ffff".to_string())),
    ];
    for cfg in [SimConfig::sequential(), SimConfig::random(3)] {
        let run = sim::run(&plan, roots.clone(), &cfg).unwrap();
        let got = per_key(&run.outcomes, out);
        assert_eq!(
            got[&0],
            vec![(ItemKind::Present, Some(vec![1, 2]), None)],
            "{cfg:?}"
        );
        assert_eq!(got[&2], vec![(ItemKind::Present, Some(vec![4]), None)], "{cfg:?}");
        let (kind, _, cause) = &got[&1][0];
        assert_eq!(*kind, ItemKind::Failed);
        let cause = cause.as_deref().unwrap();
        assert!(
            cause.contains("takes `alloc::string::String`") && cause.contains("another type"),
            "{cause}"
        );
        let o = run.outcomes.iter().find(|o| o.key == 1).unwrap();
        assert_eq!(
            o.get(out).cause().and_then(|c| c.kind()),
            Some(rayorch::FailureKind::Source)
        );
    }
}

/// The owner's typed entry checks the roots' type against the plan before
/// it connects or runs anything, as the `Runner` does.
#[test]
fn the_owner_refuses_roots_of_another_type_before_it_connects() {
    let (plan, _) = plan();
    // Nothing listens there: a check after connecting would fail otherwise.
    let cfg = common::dist::config("nats://127.0.0.1:9", "typed");
    let mut owner = Owner::new(&plan, Codecs::new(), cfg);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let r = rt.block_on(owner.run(futures::stream::iter([(0u64, 5u32)]), |_| {}));
    match r {
        Err(rayorch::dist::DistError::Run(rayorch::RunError::SourceType { expected, given, .. })) => {
            assert!(
                expected.contains("String") && given == "u32",
                "{expected} {given}"
            );
        }
        other => panic!("expected a source type error, got {other:?}"),
    }
}
