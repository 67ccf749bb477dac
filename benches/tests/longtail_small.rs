//! The long-tail benchmark's pipeline is correct on a small workload: every
//! healthy document assembled in page order, no poisoned one emitted, siblings
//! of poisoned documents suppressed, in every scheduler arm.

use rayorch_bench::longtail::{self, Arm, Costs, WorkDoc, Workload};

fn small(fail_largest: usize) -> Workload {
    let pages = [1u32, 40, 3, 2, 17, 1, 25, 5, 9, 60, 2, 4];
    Workload {
        // Fast costs keep the test short; the schedule is what is tested.
        pipeline: Costs {
            render_s_per_page: 0.0001,
            ocr_a: 0.002,
            ocr_b: 0.0001,
            batch: 8,
            workers: 3,
            upload_s: 0.001,
            render_workers: 2,
            upload_workers: 2,
            widths: 0,
            raise: false,
            unexpanded_roots: None,
            backpressure: None,
        },
        fail_largest,
        docs: pages
            .iter()
            .enumerate()
            .map(|(i, &p)| WorkDoc {
                doc_id: i as u64,
                pages: p,
            })
            .collect(),
    }
}

#[test]
fn every_arm_is_correct_on_a_small_workload() {
    for fail in [0, 2] {
        let w = small(fail);
        for arm in [
            Arm::DocStream,
            Arm::Regroup,
            Arm::Unordered,
            Arm::Full,
            Arm::Nearest,
        ] {
            let r = longtail::run(&w, &w.pipeline, arm, 4);
            assert!(
                r.correct,
                "{arm:?} with {fail} poisoned documents is not correct: {r:?}"
            );
            assert_eq!(r.doc_done_s.len(), w.docs.len() - fail, "{arm:?}");
            if fail > 0 {
                assert_eq!(r.trigger_calls, fail as u64, "{arm:?}");
            }
            if arm == Arm::DocStream {
                assert_eq!(
                    r.ocr_mixed_parent_batches, 0,
                    "parent-bound batches never mix documents"
                );
            }
        }
    }
}

#[test]
fn the_full_arm_keeps_poisoned_siblings_out_of_the_udf() {
    let w = small(2);
    let r = longtail::run(&w, &w.pipeline, Arm::Full, 4);
    assert!(r.siblings_not_dispatched > 0, "{r:?}");
    assert_eq!(
        r.udf_page_calls + r.siblings_not_dispatched,
        r.pages,
        "every page is either run once or suppressed before dispatch"
    );
}

#[test]
fn the_shaped_arm_makes_one_model_call_per_ocr_batch_on_mixed_widths() {
    let mut w = small(2);
    w.pipeline.widths = 3;
    let blind = longtail::run(&w, &w.pipeline, Arm::Nearest, 4);
    let shaped = longtail::run(&w, &w.pipeline, Arm::Shaped, 4);
    for r in [&blind, &shaped] {
        assert!(r.correct, "{r:?}");
        assert_eq!(r.doc_done_s.len(), w.docs.len() - 2);
    }
    assert_eq!(shaped.ocr_model_calls, shaped.ocr_batches, "one width per batch");
    assert!(
        blind.ocr_model_calls > blind.ocr_batches,
        "blind batches mix widths: {} calls for {} batches",
        blind.ocr_model_calls,
        blind.ocr_batches
    );
}

#[test]
fn raise_style_failures_lose_no_healthy_document() {
    let mut w = small(2);
    w.pipeline.raise = true;
    for arm in [Arm::Full, Arm::Nearest] {
        let r = longtail::run(&w, &w.pipeline, arm, 4);
        assert!(r.correct, "{arm:?}: {r:?}");
        assert_eq!(
            r.doc_done_s.len(),
            w.docs.len() - 2,
            "{arm:?}: every healthy document"
        );
        assert!(r.trigger_calls >= 2, "each poisoned page raised at least once");
    }
}
