//! Invalid plans: `Plan::build` returns every problem as a `PlanError` that
//! names the offending Port or Call, and never panics.

use rayorch::prelude::*;
use rayorch::{PlanError, PlanErrors};

domain!(Doc);
domain!(Page: Doc);

/// The errors of a plan that must be rejected.
fn rejected<R>(r: Result<(Plan, R), PlanErrors>) -> Vec<PlanError> {
    match r {
        Ok(_) => panic!("the plan must be rejected"),
        Err(PlanErrors(errors)) => {
            assert!(!errors.is_empty());
            errors
        }
    }
}

fn text(errors: &[PlanError]) -> String {
    PlanErrors(errors.to_vec()).to_string()
}

/// An unused Call: its Grains would run for nothing.
#[test]
fn unused_call_is_named() {
    let used = Call::map("used", |x: u32| x);
    let dead = Call::map("dead_end", |x: u32| x + 1);
    let errors = rejected(Plan::build(|b| {
        let docs = b.source::<Doc, u32>();
        dead.apply(docs);
        b.output(used.apply(docs))
    }));
    assert_eq!(
        errors,
        vec![PlanError::Unused {
            node: "Call `dead_end`".into()
        }]
    );
    assert!(text(&errors).contains("`dead_end`"), "{}", text(&errors));

    // A child-Domain Call that is never reduced back to the root is unused too.
    let split = Call::map("split", |n: u32| (0..n).collect::<Vec<u32>>());
    let ocr = Call::map("page_ocr", |p: u32| p);
    let errors = rejected(Plan::build(|b| {
        let docs = b.source::<Doc, u32>();
        ocr.apply(expand::<Page, _, _>(split.apply(docs)));
        b.output(docs)
    }));
    assert!(
        errors.contains(&PlanError::Unused {
            node: "Call `page_ocr`".into()
        }),
        "{errors:?}"
    );
}

/// A second expansion into one Domain.
#[test]
fn second_expansion_into_one_domain() {
    let split = Call::map("split", |n: u32| (0..n).collect::<Vec<u32>>());
    let again = Call::map("split_again", |n: u32| (0..n).collect::<Vec<u32>>());
    let errors = rejected(Plan::build(|b| {
        let docs = b.source::<Doc, u32>();
        let first = reduce(expand::<Page, _, _>(split.apply(docs)));
        let second = reduce(expand::<Page, _, _>(again.apply(docs)));
        (b.output(first), b.output(second))
    }));
    assert!(
        errors
            .iter()
            .any(|e| matches!(e, PlanError::SecondExpansion { domain: "Page", .. })),
        "{errors:?}"
    );
    assert!(text(&errors).contains("`Page`"), "{}", text(&errors));
}

/// No output.
#[test]
fn no_output() {
    let work = Call::map("work", |x: u32| x);
    let errors = rejected(Plan::build(|b| {
        let docs = b.source::<Doc, u32>();
        work.apply(docs);
    }));
    assert!(errors.contains(&PlanError::NoOutput), "{errors:?}");
    assert!(
        errors.contains(&PlanError::Unused {
            node: "Call `work`".into()
        }),
        "{errors:?}"
    );
}

/// No source.
#[test]
fn no_source() {
    assert_eq!(rejected(Plan::build(|_| ())), vec![PlanError::NoSource]);
}

/// A Port from another build.
#[test]
fn port_from_another_build() {
    let (_, leaked) = Plan::build(|b| {
        let docs = b.source::<Doc, u32>();
        b.output(docs);
        docs
    })
    .unwrap();
    let work = Call::map("work", |x: u32| x);
    let errors = rejected(Plan::build(|b| {
        let docs = b.source::<Doc, u32>();
        (b.output(work.apply(leaked)), b.output(docs))
    }));
    assert!(
        errors.contains(&PlanError::ForeignPort {
            op: "Call `work`".into()
        }),
        "{errors:?}"
    );
    assert!(text(&errors).contains("`work`"), "{}", text(&errors));

    let errors = rejected(Plan::build(|b| {
        b.source::<Doc, u32>();
        b.output(leaked)
    }));
    assert!(
        errors.contains(&PlanError::ForeignPort { op: "output".into() }),
        "{errors:?}"
    );

    // A Port derived outside any build is foreign to every build.
    let stray = work.apply(leaked);
    let errors = rejected(Plan::build(|b| {
        b.source::<Doc, u32>();
        b.output(stray)
    }));
    assert!(
        errors.contains(&PlanError::ForeignPort { op: "output".into() }),
        "{errors:?}"
    );
}

/// Two sources.
#[test]
fn two_sources() {
    let errors = rejected(Plan::build(|b| {
        let docs = b.source::<Doc, u32>();
        let more = b.source::<Doc, String>();
        (b.output(docs), b.output(more))
    }));
    let second = errors
        .iter()
        .find_map(|e| match e {
            PlanError::SecondSource { port } => Some(port.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no SecondSource in {errors:?}"));
    assert!(second.contains("source(Doc)"), "names the Port: {second}");
}

/// Every mistake is reported at once, and a build nested in a build is an error.
#[test]
fn errors_are_collected_not_raised() {
    let dead = Call::map("dead_end", |x: u32| x);
    let errors = rejected(Plan::build(|b| {
        let docs = b.source::<Doc, u32>();
        b.source::<Doc, u32>();
        dead.apply(docs);
    }));
    assert!(errors.contains(&PlanError::NoOutput), "{errors:?}");
    assert!(errors.iter().any(|e| matches!(e, PlanError::SecondSource { .. })));
    assert!(errors.contains(&PlanError::Unused {
        node: "Call `dead_end`".into()
    }));

    let (outer, inner) = Plan::build(|b| {
        let docs = b.source::<Doc, u32>();
        let inner = Plan::build(|b| {
            let d = b.source::<Doc, u32>();
            b.output(d)
        })
        .map(|_| ());
        b.output(docs);
        inner
    })
    .unwrap();
    assert_eq!(inner, Err(PlanErrors(vec![PlanError::NestedBuild])));
    assert_eq!(outer.outputs(), 1);
}

/// The line of this file that holds `marker` (1-based), as rustc counts it.
fn line_of(marker: &str) -> usize {
    let source = include_str!("errors.rs");
    let found = source
        .lines()
        .position(|l| l.contains(marker) && !l.contains("line_of("));
    found.expect("marker in this file") + 1
}

/// A mistake `#[pipeline]` cannot see (two `expand!` into one Domain, in two
/// helper methods): the `PlanError` names the line of each `expand!`.
#[test]
fn second_expansion_names_the_user_lines() {
    struct Twice {
        split: FnCall<String, Vec<String>>,
        join: FnCall<(Vec<String>, Vec<String>), String>,
    }
    #[pipeline]
    impl Twice {
        fn forward(&self, docs: Port<Doc, String>) -> Port<Doc, String> {
            let a = self.gather(self.first(docs));
            let b = self.gather(self.second(docs));
            self.join(a, b)
        }
        fn first(&self, docs: Port<Doc, String>) -> Port<Page, String> {
            expand!(self.split(docs) => Page) // FIRST EXPANSION
        }
        fn second(&self, docs: Port<Doc, String>) -> Port<Page, String> {
            expand!(self.split(docs) => Page) // SECOND EXPANSION
        }
        fn gather(&self, page: Port<Page, String>) -> Port<Doc, Vec<String>> {
            reduce!(page)
        }
    }
    let p = Twice {
        split: Call::map("split", |s: String| vec![s]),
        join: Call::map("join", |(a, b): (Vec<String>, Vec<String>)| {
            a.concat() + &b.concat()
        }),
    };
    let errors = rejected(p.build_plan());
    let (first, second) = errors
        .iter()
        .find_map(|e| match e {
            PlanError::SecondExpansion { first, second, .. } => Some((first.clone(), second.clone())),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no SecondExpansion in {errors:?}"));
    let at = |marker| format!("tests/plan/errors.rs:{}:", line_of(marker));
    assert!(first.contains(&at("FIRST EXPANSION")), "{first}");
    assert!(second.contains(&at("SECOND EXPANSION")), "{second}");
    assert!(text(&errors).contains(&at("SECOND EXPANSION")));
}

/// The builder API names the line too.
#[test]
fn builder_operations_name_their_line() {
    let split = Call::map("split", |s: String| vec![s]);
    let errors = rejected(Plan::build(|b| {
        let docs = b.source::<Doc, String>();
        let lists = split.apply(docs);
        let page: Port<Page, String> = rayorch::expand(lists); // BUILDER EXPAND
        let again: Port<Page, String> = rayorch::expand(lists); // BUILDER AGAIN
        let _ = (page, again);
        b.output(docs)
    }));
    let text = text(&errors);
    assert!(
        text.contains(&format!("plan/errors.rs:{}:", line_of("BUILDER EXPAND"))),
        "{text}"
    );
    assert!(
        text.contains(&format!("plan/errors.rs:{}:", line_of("BUILDER AGAIN"))),
        "{text}"
    );
}

/// Failure texts name a stage by the name its author gave it: `BatchFn` for
/// a closure Call (not its ~300-character boxed type), the struct's own name
/// for a `Stage`, without its module path or generic arguments.
#[test]
fn stage_names_are_the_users_names() {
    struct Upper<T>(std::marker::PhantomData<T>);
    impl<T: Send + 'static> Stage for Upper<T> {
        type In = String;
        type Out = String;
        fn run(&mut self, batch: Vec<String>, _: &rayorch::StageContext) -> StageResult<String> {
            Ok(batch.into_iter().map(|s| Outcome::Ok(s.to_uppercase())).collect())
        }
    }
    let len = Call::map("len", |s: String| s.len());
    let upper = Call::new("upper", || Ok(Upper::<Vec<u8>>(std::marker::PhantomData)));
    let (plan, _) = Plan::build(|b| {
        let docs = b.source::<Doc, String>();
        b.output(len.apply(upper.apply(docs)))
    })
    .expect("a valid plan");
    let names: Vec<&str> = plan.calls().iter().map(|c| c.runtime.stage_name()).collect();
    assert_eq!(names, ["Upper", "BatchFn"]);
}
