//! Mistakes with a plan's handles that used to pass silently or surface
//! late (issue 10): an `Output` of another plan, a Runner given roots of
//! the wrong type, and `Callback::new` inferring its closure's argument.

use std::sync::mpsc;

use rayorch::prelude::*;
use rayorch::sim::{self, SimConfig};
use rayorch::spi::Value;
use rayorch::{Item, ItemKind, Output, RunError};

domain!(Doc);

/// `x -> x + add`, one output.
fn plan_adding(add: u32) -> (Plan, Output<u32>) {
    let f = Call::map("add", move |x: u32| x + add);
    Plan::build(|b| {
        let docs = b.source::<Doc, u32>();
        b.output(f.apply(docs))
    })
    .expect("builds")
}

fn foreign_cause(item: &Item<u32>) -> bool {
    item.kind() == ItemKind::Failed
        && item.cause().is_some_and(|c| {
            c.message().contains("this Output (#0) belongs to another plan")
                && c.message().contains("build_plan()/Plan::build")
        })
}

#[test]
fn an_output_of_another_plan_reads_as_failed_not_as_this_plans_value() {
    // Same shape, so the foreign handle's index is valid here.
    let (a, out_a) = plan_adding(1);
    let (_b, out_b) = plan_adding(100);
    let run = sim::run(
        &a,
        [(0u64, std::sync::Arc::new(5u32) as Value)],
        &SimConfig::sequential(),
    )
    .expect("runs");
    let root = run.by_key()[0];
    assert_eq!(root.get(out_a), Item::Present(6));
    let foreign = root.get(out_b);
    assert!(foreign_cause(&foreign), "{foreign:?}");
}

#[test]
fn a_plan_built_on_another_thread_has_its_own_id() {
    let (a, out_a) = plan_adding(1);
    let (_b, out_b) = std::thread::spawn(|| plan_adding(2)).join().unwrap();
    let (tx, rx) = mpsc::channel();
    Runner::new(&a)
        .run([(0u64, 1u32)], rayorch::sink::ChannelSink(tx))
        .expect("runs");
    let root = rx.recv().unwrap();
    assert_eq!(root.get(out_a), Item::Present(2));
    assert!(foreign_cause(&root.get(out_b)));
}

#[test]
fn a_runner_given_the_wrong_root_type_refuses_before_any_work() {
    let ran = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = ran.clone();
    let f = Call::map("len", move |s: String| {
        counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        s.len()
    });
    let (plan, out) = Plan::build(|b| {
        let docs = b.source::<Doc, String>();
        b.output(f.apply(docs))
    })
    .unwrap();
    let mut seen = 0;
    let err = Runner::new(&plan)
        .run([(0u64, "a"), (1, "bc")], Callback::new(|_| seen += 1))
        .expect_err("`&str` roots for a `String` source");
    assert_eq!(
        err,
        RunError::SourceType {
            domain: "Doc",
            expected: std::any::type_name::<String>(),
            given: std::any::type_name::<&str>(),
        }
    );
    let text = err.to_string();
    assert!(text.contains("Domain `Doc`") && text.contains("`&str`"), "{text}");
    assert_eq!((seen, ran.load(std::sync::atomic::Ordering::SeqCst)), (0, 0));
    // The right type runs, with `Callback::new` inferring `&RootOutcome`.
    let mut lens = Vec::new();
    Runner::new(&plan)
        .run(
            [(0u64, "a".to_string()), (1, "bc".to_string())],
            Callback::new(|o| lens.push(o.get(out).present().unwrap())),
        )
        .unwrap();
    lens.sort();
    assert_eq!(lens, vec![1, 2]);
}
