//! The builder forms that the placeholder macros' errors suggest (outside a
//! `#[pipeline]` impl block), written as suggested: each compiles, and the
//! plan builds and runs.

use rayorch::Item;
use rayorch::prelude::*;
use rayorch::sim::{self, SimConfig};

#[derive(Domain)]
struct Pdf;

#[derive(Domain)]
#[domain(parent = Pdf)]
struct Page;

#[derive(Domain)]
#[domain(parent = Pdf)]
struct Part;

fn main() {
    let pages: FnCall<String, Vec<String>> = Call::map("pages", |s: String| {
        s.split('/').map(String::from).collect::<Vec<_>>()
    });
    let both: FnCall<String, (String, usize)> = Call::map("both", |s: String| {
        let n = s.len();
        (s, n)
    });
    let keep: FnCall<String, bool> = Call::map("keep", |s: String| !s.is_empty());
    let (plan, out) = Plan::build(|b| {
        let x = b.source::<Pdf, String>();
        let lists = pages.apply(x);
        let page = rayorch::expand::<Page, _, _>(lists);
        let (a, c) = rayorch::expand_aligned::<Part, _, _, _>((lists, lists));
        let (text, len) = both.apply_split(page);
        let title = rayorch::broadcast(x, text);
        let kept = rayorch::filter(text, keep.apply(title));
        let (t, _) = rayorch::reduce_aligned((a, c), None::<rayorch::Port<_, ()>>);
        (
            b.output(rayorch::reduce(kept)),
            b.output(rayorch::reduce(len)),
            b.output(t),
        )
    })
    .expect("the plan builds");
    let input = std::sync::Arc::new("p/q".to_string()) as rayorch::spi::Value;
    let run = sim::run(&plan, [(0, input)], &SimConfig::sequential()).expect("the run completes");
    let pq = vec!["p".to_string(), "q".to_string()];
    assert_eq!(run.outcomes[0].get(out.0), Item::Present(pq.clone()));
    assert_eq!(run.outcomes[0].get(out.1), Item::Present(vec![1, 1]));
    assert_eq!(run.outcomes[0].get(out.2), Item::Present(pq));
}
