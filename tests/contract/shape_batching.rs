//! Shape-aware batches and batch delays (`Call::shape`,
//! `Call::max_batch_delay`, `Call::preferred_batch_sizes`), checked by
//! counts on the engine's own clock (no wall time): a shaped Call's batches
//! hold one key each, no Grain is held for mates past the bound, a small
//! parent still goes first, a delayed Call waits for a fuller batch only
//! while more can come, and whole runs under the simulator and the Runner
//! end with the same outcomes as without any of it.

use crate::common;

use std::collections::HashMap;
use std::time::Duration;

use rayorch::prelude::*;
use rayorch::sim::{self, SimConfig};
use rayorch::sink::Callback;
use rayorch::spi::{Batch, Engine, EngineConfig};
use rayorch::{Output, PlanError, RootOutcome, Runner};

domain!(Doc);
domain!(Page: Doc);

const KEYS: u32 = 3;
const BOUND: Duration = Duration::from_millis(10);

/// Doc(pages) → render → Page → ocr (shape `page % KEYS`, batch `b`) → count.
fn shaped(b: usize, delay: Option<Duration>) -> (Plan, Output<u32>) {
    let render = render().batch_size(4);
    let ocr = Call::map("ocr", |p: u32| p + 1)
        .batch_size(b)
        .shape(|p: &u32| u64::from(p % KEYS));
    let ocr = match delay {
        Some(d) => ocr.max_batch_delay(d),
        None => ocr,
    };
    pages_plan(render, ocr)
}

/// Doc(pages) → `render` → Page → `ocr` → count.
fn pages_plan(render: FnCall<u32, Vec<u32>>, ocr: FnCall<u32, u32>) -> (Plan, Output<u32>) {
    let count = Call::map("count", |v: Vec<u32>| v.iter().sum::<u32>());
    Plan::build(|bld| {
        let doc = bld.source::<Doc, u32>();
        let page = expand::<Page, _, _>(render.apply(doc));
        bld.output(count.apply(reduce(ocr.apply(page))))
    })
    .expect("valid plan")
}

/// `render` without a batch size of its own.
fn render() -> FnCall<u32, Vec<u32>> {
    Call::map("render", |n: u32| (0..n).collect::<Vec<u32>>())
}

/// What `count` gives for a document of `n` pages.
fn want(n: u32) -> u32 {
    (1..=n).sum()
}

fn ms(t: f64) -> Duration {
    Duration::from_micros((t * 1000.0) as u64)
}

/// SplitMix64, for the drawn workloads.
struct Draw(u64);

impl Draw {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) % n
    }
}

/// A discrete-event driver over the engine's clock: roots arrive at given
/// times, every ready batch is reserved at once (replicas without limit, or
/// `ocr_replicas` for the OCR Call), a batch reports `service` later, and
/// time jumps to the next arrival, report or hold deadline.
struct Driver<'p> {
    plan: &'p Plan,
    eng: Engine,
    replicas: Vec<Box<dyn rayorch::spi::Replica + 'p>>,
    /// (report time, batch) in flight.
    flight: Vec<(Duration, Batch)>,
    /// When each root's pages became ready at OCR (its render report).
    ready_at: HashMap<u64, Duration>,
    /// OCR batches: (dispatch time, [(root, page)]).
    ocr_batches: Vec<(Duration, Vec<(u64, u32)>)>,
    finished: Vec<(u64, u32)>,
    ocr: usize,
    ocr_replicas: usize,
}

impl<'p> Driver<'p> {
    fn new(plan: &'p Plan, ocr_replicas: usize) -> Driver<'p> {
        let eng = Engine::new(plan, EngineConfig::default());
        let replicas = plan.calls().iter().map(|c| c.runtime.spawn().unwrap()).collect();
        let ocr = common::call_index(plan, "ocr");
        Driver {
            plan,
            eng,
            replicas,
            flight: Vec::new(),
            ready_at: HashMap::new(),
            ocr_batches: Vec::new(),
            finished: Vec::new(),
            ocr,
            ocr_replicas,
        }
    }

    fn service(&self, c: usize) -> Duration {
        if c == self.ocr { ms(2.0) } else { ms(1.0) }
    }

    /// Run `roots` (arrival, key, pages) to the end; checks every hold.
    fn run(&mut self, mut roots: Vec<(Duration, u64, u32)>) {
        roots.sort();
        let mut next_root = 0;
        let mut now = Duration::ZERO;
        while self.finished.len() < roots.len() {
            self.eng.set_clock(now);
            // Reports due now.
            let (due, later): (Vec<_>, Vec<_>) = self.flight.drain(..).partition(|(t, _)| *t <= now);
            self.flight = later;
            for (_, b) in due {
                let c = b.call;
                if c == common::call_index(self.plan, "render") {
                    for g in &b.grains {
                        let path = self.eng.entity_path(g).expect("live root");
                        self.ready_at.insert(path.root, now);
                    }
                }
                let r = self.replicas[c].run(b.inputs);
                self.eng.report(b.id, r);
            }
            while let Some(o) = self.eng.pop_finished() {
                let Item::Present(v) = &o.items[0] else {
                    panic!("root {} did not succeed: {:?}", o.key, o.items[0])
                };
                self.finished.push((o.key, *v.downcast_ref::<u32>().unwrap()));
            }
            while next_root < roots.len() && roots[next_root].0 <= now && self.eng.can_admit() {
                let (_, key, pages) = roots[next_root];
                self.eng.admit_typed(key, pages).unwrap();
                next_root += 1;
            }
            self.eng.set_source_open(next_root < roots.len());
            self.dispatch(now);
            let next = [
                roots.get(next_root).map(|r| r.0),
                self.flight.iter().map(|(t, _)| *t).min(),
                self.eng.next_hold_deadline().filter(|&t| t > now),
            ]
            .into_iter()
            .flatten()
            .min();
            match next {
                Some(t) => now = t.max(now),
                None => {
                    assert_eq!(self.finished.len(), roots.len(), "nothing left to wait for");
                    break;
                }
            }
        }
        assert_eq!(self.eng.stats().invalid_transitions, 0);
    }

    fn dispatch(&mut self, now: Duration) {
        for c in 0..self.eng.calls() {
            loop {
                let ocr_busy = self.flight.iter().filter(|(_, b)| b.call == self.ocr).count();
                if c == self.ocr && ocr_busy >= self.ocr_replicas {
                    break;
                }
                let max = self.plan.calls()[c].config.batch_size;
                let Some(b) = self.eng.reserve(c, max) else {
                    if let Some(d) = self.eng.hold_deadline(c) {
                        // Held for mates: only Grains younger than the bound.
                        assert!(d > now, "held past its deadline: {d:?} at {now:?}");
                        assert!(d - now <= BOUND, "a hold longer than the bound");
                    }
                    break;
                };
                if c == self.ocr {
                    let grains = b
                        .grains
                        .iter()
                        .map(|g| {
                            let p = self.eng.entity_path(g).expect("live root");
                            (p.root, p.ordinals[0])
                        })
                        .collect();
                    self.ocr_batches.push((now, grains));
                }
                self.flight.push((now + self.service(c), b));
            }
        }
    }
}

#[test]
fn a_shaped_call_batches_one_key_holds_no_grain_past_its_bound_and_lets_small_parents_through() {
    for seed in 0..40 {
        let mut draw = Draw(seed);
        let roots: Vec<(Duration, u64, u32)> = (0..12)
            .map(|k| {
                let at = ms(draw.below(60) as f64 * 0.5);
                let pages = if draw.below(4) == 0 {
                    20 + draw.below(40)
                } else {
                    1 + draw.below(5)
                };
                (at, k, pages as u32)
            })
            .collect();
        let (plan, _) = shaped(4, Some(BOUND));
        let mut d = Driver::new(&plan, usize::MAX);
        d.run(roots.clone());
        for (at, grains) in &d.ocr_batches {
            let keys: Vec<u32> = grains.iter().map(|(_, p)| p % KEYS).collect();
            assert!(
                keys.iter().all(|&k| k == keys[0]),
                "seed {seed}: a batch mixes keys {keys:?}"
            );
            for (root, _) in grains {
                // Replicas without limit: a Grain waits only when held.
                let waited = *at - d.ready_at[root];
                assert!(waited <= BOUND, "seed {seed}: root {root} waited {waited:?}");
            }
        }
        let mixed = d
            .ocr_batches
            .iter()
            .filter(|(_, g)| g.iter().any(|(r, _)| *r != g[0].0))
            .count();
        assert!(seed > 0 || mixed > 0, "batches still mix parents");
        let by_key: HashMap<u64, u32> = roots.iter().map(|&(_, k, n)| (k, n)).collect();
        for (k, v) in &d.finished {
            assert_eq!(*v, want(by_key[k]), "seed {seed}, root {k}");
        }
    }
    // One OCR replica: a 3-page document admitted right after a 40-page one
    // still finishes first (nearest completion inside each key's lane).
    let (plan, _) = shaped(4, Some(BOUND));
    let mut d = Driver::new(&plan, 1);
    d.run(vec![(ms(0.0), 0, 40), (ms(0.0), 1, 3)]);
    let order: Vec<u64> = d.finished.iter().map(|f| f.0).collect();
    assert_eq!(order, vec![1, 0], "the small document first");
    let small_done = d
        .ocr_batches
        .iter()
        .rposition(|(_, g)| g.iter().any(|(r, _)| *r == 1))
        .unwrap();
    assert_eq!(
        small_done,
        KEYS as usize - 1,
        "one batch per key carries it through"
    );
    assert!(
        d.ocr_batches
            .iter()
            .all(|(_, g)| g.len() == 4 || g.iter().all(|(r, _)| *r == 0))
    );
}

#[test]
fn without_a_delay_a_shaped_call_prefers_a_full_key_and_never_holds() {
    let (plan, _) = shaped(4, None);
    let ocr = common::call_index(&plan, "ocr");
    let mut eng = Engine::new(&plan, EngineConfig::default());
    let mut replicas: Vec<_> = plan.calls().iter().map(|c| c.runtime.spawn().unwrap()).collect();
    eng.admit_typed(0, 7u32).unwrap();
    let b = eng.reserve(0, 4).unwrap();
    eng.report(b.id, replicas[0].run(b.inputs));
    // Pages 0..7: key 0 has 0, 3, 6; key 1 has 1, 4; key 2 has 2, 5.
    assert_eq!(eng.queued_shapes(ocr), vec![(0, 3), (1, 2), (2, 2)]);
    let keys_of = |eng: &Engine, b: &Batch| -> Vec<u32> {
        b.grains
            .iter()
            .map(|g| eng.entity_path(g).unwrap().ordinals[0] % KEYS)
            .collect()
    };
    // A batch of 3 is full: the key with three goes first.
    let b = eng.reserve(ocr, 3).unwrap();
    assert_eq!(keys_of(&eng, &b), vec![0, 0, 0]);
    // Nothing is full now; with no delay the oldest key goes at once.
    let b2 = eng.reserve(ocr, 3).unwrap();
    assert_eq!(b2.grains.len(), 2);
    let b3 = eng.reserve(ocr, 3).unwrap();
    assert_eq!(b3.grains.len(), 2);
    assert_ne!(keys_of(&eng, &b2)[0], keys_of(&eng, &b3)[0]);
    assert!(eng.reserve(ocr, 3).is_none());
    assert_eq!(eng.hold_deadline(ocr), None);
    assert_eq!(eng.call_stats(ocr).holds, 0);
}

/// One Call over the root Domain that may wait 10 ms, preferring 4.
fn delayed() -> Plan {
    let embed = Call::map("embed", |x: u32| x * 2)
        .batch_size(8)
        .max_batch_delay(BOUND)
        .preferred_batch_sizes(&[4]);
    Plan::build(|b| {
        let x = b.source::<Doc, u32>();
        b.output(embed.apply(x))
    })
    .unwrap()
    .0
}

#[test]
fn a_delayed_call_waits_for_a_fuller_batch_only_within_its_bound_and_while_more_can_come() {
    let plan = delayed();
    let mut eng = Engine::new(&plan, EngineConfig::default());
    for k in 0..3 {
        eng.admit_typed(k, 1u32).unwrap();
    }
    assert!(eng.reserve(0, 8).is_none(), "three wait for mates");
    assert_eq!(eng.hold_deadline(0), Some(BOUND));
    eng.set_clock(ms(6.0));
    eng.admit_typed(3, 1u32).unwrap();
    assert_eq!(
        eng.reserve(0, 8).map(|b| b.grains.len()),
        Some(4),
        "a preferred size goes at once"
    );
    for k in 4..6 {
        eng.admit_typed(k, 1u32).unwrap();
    }
    assert!(eng.reserve(0, 8).is_none());
    assert_eq!(
        eng.hold_deadline(0),
        Some(ms(16.0)),
        "the oldest one's arrival plus the bound"
    );
    eng.set_clock(ms(15.9));
    assert!(eng.reserve(0, 8).is_none());
    eng.set_clock(ms(16.0));
    assert_eq!(
        eng.reserve(0, 8).map(|b| b.grains.len()),
        Some(2),
        "the bound is reached"
    );
    eng.admit_typed(6, 1u32).unwrap();
    eng.set_source_open(false);
    assert_eq!(
        eng.reserve(0, 8).map(|b| b.grains.len()),
        Some(1),
        "nothing more can come: no wait"
    );
    assert_eq!(eng.call_stats(0).holds, 3);
    // Waits, on the engine's clock: three queued at 0 and one at 6 ms went
    // at 6 ms, two queued at 6 ms went at 16 ms, the last went at once.
    assert_eq!(eng.call_stats(0).queue_wait_us, 3 * 6_000 + 2 * 10_000);
    assert!(
        eng.call_stats(0).key_batches.is_empty(),
        "an unshaped Call counts no keys"
    );
}

#[test]
fn a_delayed_call_waits_while_upstream_work_runs_and_not_after() {
    let (plan, _) = shaped(8, Some(BOUND));
    let ocr = common::call_index(&plan, "ocr");
    let mut eng = Engine::new(&plan, EngineConfig::default());
    let mut replicas: Vec<_> = plan.calls().iter().map(|c| c.runtime.spawn().unwrap()).collect();
    eng.admit_typed(0, 2u32).unwrap();
    eng.admit_typed(1, 2u32).unwrap();
    eng.set_source_open(false);
    let first = eng.reserve(0, 1).unwrap();
    let second = eng.reserve(0, 1).unwrap();
    eng.report(first.id, replicas[0].run(first.inputs));
    assert!(
        eng.reserve(ocr, 8).is_none(),
        "render of root 1 still runs: wait for it"
    );
    eng.report(second.id, replicas[0].run(second.inputs));
    let b = eng.reserve(ocr, 8).expect("nothing more can come: go");
    assert_eq!(b.grains.len(), 2, "pages 0 of both roots share key 0");
    let counted = &eng.call_stats(ocr).key_batches;
    assert_eq!(counted.len(), 1, "{counted:?}");
    assert_eq!((counted[&0].batches, counted[&0].grains), (1, 2));
}

#[test]
fn a_shaped_call_counts_batches_per_key_for_its_first_256_keys_and_the_rest_together() {
    // One document of 300 pages, each page its own key.
    let ocr = Call::map("ocr", |p: u32| p + 1)
        .batch_size(4)
        .shape(|p: &u32| u64::from(*p));
    let (plan, out) = pages_plan(render(), ocr);
    let run = sim::run(&plan, common::keyed([300u32]), &SimConfig::sequential()).unwrap();
    assert_eq!(run.outcomes[0].get(out), Item::Present(want(300)));
    let st = &run.call_stats[common::call_index(&plan, "ocr")];
    assert_eq!(st.rpcs, 300, "one page per key, so one per batch");
    assert_eq!(st.key_batches.len(), 256);
    assert!(st.key_batches.values().all(|k| (k.batches, k.grains) == (1, 1)));
    assert_eq!((st.other_keys.batches, st.other_keys.grains), (44, 44));
}

#[test]
fn a_shape_key_needs_one_required_input() {
    let key = Call::map("pair", |(a, b): (u32, u32)| a + b).shape(|(a, _): &(u32, u32)| u64::from(*a));
    let err = Plan::build(|b| {
        let x = b.source::<Doc, u32>();
        b.output(key.apply((x, x)))
    })
    .unwrap_err();
    assert!(
        err.0
            .iter()
            .any(|e| matches!(e, PlanError::ShapeInputs { call, inputs: 2 } if call == "pair")),
        "{err}"
    );
}

#[test]
fn a_panicking_shape_key_only_moves_its_grain_to_the_last_key() {
    let ocr = Call::map("ocr", |p: u32| p + 1).shape(|p: &u32| {
        assert!(*p != 2, "no key for page 2");
        u64::from(*p)
    });
    let (plan, out) = pages_plan(render(), ocr);
    let run = sim::run(&plan, common::keyed([4u32]), &SimConfig::sequential()).unwrap();
    assert_eq!(run.outcomes[0].get(out), Item::Present(want(4)));
    assert_eq!(
        run.call_stats[common::call_index(&plan, "ocr")].shape_key_panics,
        1
    );
}

#[test]
fn shaped_and_delayed_runs_end_as_plain_ones_under_the_simulator_and_the_runner() {
    let docs = [7u32, 1, 40, 3, 0, 12, 5];
    for delay in [None, Some(BOUND)] {
        let (plan, out) = shaped(4, delay);
        let schedules = (0..12).map(|s| SimConfig {
            record_rpcs: true,
            ..SimConfig::random(s).without_faults()
        });
        for cfg in schedules {
            let run = sim::run(&plan, common::keyed(docs), &cfg).expect("no stall");
            common::assert_clean(&run.stats);
            for o in run.by_key() {
                assert_eq!(
                    o.get(out),
                    Item::Present(want(docs[o.key as usize])),
                    "seed {}",
                    cfg.seed
                );
            }
            let ocr = common::call_index(&plan, "ocr");
            for batch in &run.rpcs[ocr] {
                assert!(
                    batch
                        .iter()
                        .all(|p| p.ordinals[0] % KEYS == batch[0].ordinals[0] % KEYS)
                );
            }
        }
        let mut got = Vec::new();
        let source = docs.iter().enumerate().map(|(k, &n)| (k as u64, n));
        let summary = Runner::new(&plan)
            .run(
                source,
                Callback(|o: &RootOutcome| got.push((o.key, o.get(out).present().unwrap()))),
            )
            .expect("the Runner completes");
        // The Runner's summary: every OCR batch under one of the 3 keys.
        let m = summary.calls.iter().find(|c| c.name == "ocr").unwrap();
        assert!(
            m.batches_by_key
                .iter()
                .all(|k| k.key.is_some_and(|k| k < u64::from(KEYS)))
        );
        let batches: u64 = m.batches_by_key.iter().map(|k| k.batches).sum();
        let grains: u64 = m.batches_by_key.iter().map(|k| k.grains).sum();
        assert_eq!((batches, grains), (m.rpcs, m.grains_dispatched), "{m:?}");
        let wait = m.mean_wait_s.expect("a shaped Call reports its wait");
        assert!((0.0..summary.wall_s).contains(&wait), "{m:?}");
        got.sort_unstable();
        let expected: Vec<(u64, u32)> = docs
            .iter()
            .enumerate()
            .map(|(k, &n)| (k as u64, want(n)))
            .collect();
        assert_eq!(got, expected, "delay {delay:?}");
    }
}
