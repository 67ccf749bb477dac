//! Engine tests that need its private state: corrupted counters and
//! impossible transitions, which no public call can provoke.

use super::*;
use crate::engine::grain::Transition;
use crate::{Call, Plan, domain, expand, reduce};

domain!(Doc);
domain!(Page: Doc);

/// Doc → `n` pages, each OCRed (`+ 1`), gathered back.
pub(crate) fn split_ocr() -> (Plan, crate::Output<Vec<u32>>) {
    let split = Call::map("split", |n: u32| (0..n).collect::<Vec<u32>>());
    let ocr = Call::map("ocr", |x: u32| x + 1);
    Plan::build(|b| {
        let d = b.source::<Doc, u32>();
        b.output(reduce(ocr.apply(expand::<Page, _, _>(split.apply(d)))))
    })
    .unwrap()
}

#[test]
fn a_broken_counter_is_reported_as_a_stall_not_a_hang() {
    let (plan, _) = split_ocr();
    let mut eng = Engine::new(&plan, EngineConfig::default());
    eng.admit_typed(7, 2u32).unwrap();
    assert_eq!(eng.stall(), None, "split is ready");
    for c in 0..2 {
        let b = eng.reserve(c, 8).unwrap();
        let out = plan.calls()[c].runtime.spawn().unwrap().run(b.inputs);
        eng.report(b.id, out);
        if c == 0 {
            // Corrupt the reduce's counter so the root can never complete.
            eng.core.reduces.recs[0][0].pending += 1;
        }
    }
    assert!(eng.pop_finished().is_none());
    let stall = eng.stall().expect("stall must be detected");
    assert!(stall.contains("roots [7]"), "{stall}");
}

/// Seal the ready `split` Grain of root 7 as if it were still waiting (the
/// kind of bug that used to be skipped and surface later as a stall).
fn provoke_invalid_seal(eng: &mut Engine) {
    eng.admit_typed(7, 2u32).unwrap();
    let Engine { plan, core } = eng;
    core.seal(plan, 0, 0, Transition::Decide, Item::Dropped);
    assert!(eng.reserve(0, 8).is_none(), "a stopped run reserves nothing");
}

#[test]
fn an_invalid_transition_ends_the_run_with_a_typed_error() {
    let (plan, _) = split_ocr();
    let mut eng = Engine::new(&plan, EngineConfig::default());
    eng.core.assert_transitions = false; // the release-build path
    provoke_invalid_seal(&mut eng);
    assert_eq!(eng.stats().invalid_transitions, 1);
    match eng.aborted() {
        Some(RunError::InvalidTransition {
            call,
            entity,
            transition,
        }) => {
            assert_eq!(call, "split");
            assert_eq!(entity, "Doc 7");
            assert!(transition.contains("Decide from Ready"), "{transition}");
        }
        other => panic!("expected InvalidTransition, got {other:?}"),
    }
    let msg = eng.aborted().unwrap().to_string();
    assert!(msg.contains("Call `split` on Doc 7"), "{msg}");
    assert!(!eng.can_admit());
    assert!(matches!(
        eng.admit_typed(8, 1u32),
        Err(RunError::InvalidTransition { .. })
    ));
    assert_eq!(eng.stall(), None, "a stopped run is not reported as stalled");
}

#[test]
#[cfg(debug_assertions)]
#[should_panic(expected = "invalid Grain transition Decide from Ready")]
fn an_invalid_transition_fails_a_debug_assertion() {
    let (plan, _) = split_ocr();
    let mut eng = Engine::new(&plan, EngineConfig::default());
    provoke_invalid_seal(&mut eng);
}
