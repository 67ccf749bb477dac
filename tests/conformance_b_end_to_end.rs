//! CONFORMANCE.md §B: end-to-end cases, each named after its checklist number.

mod common;

use common::{run_seq, run_with};
use rayorch::prelude::*;
use rayorch::sim::SimConfig;

domain!(Doc);
domain!(Chunk: Doc);

#[test]
fn b01_expand_broadcast_filter_reduce() {
    let text = Call::map("text", |(d, _): (String, usize)| d);
    let threshold = Call::map("threshold", |(_, t): (String, usize)| t);
    let chunker = Call::map("chunk", |d: String| {
        d.as_bytes()
            .chunks(2)
            .map(|c| String::from_utf8_lossy(c).into_owned())
            .collect::<Vec<_>>()
    });
    let long_enough = Call::map("long_enough", |(c, t): (String, usize)| c.len() >= t);
    let pair = Call::map("pair", |(d, cs): (String, Vec<String>)| (d, cs));
    let (plan, out) = Plan::build(|b| {
        let docs = b.source::<Doc, (String, usize)>();
        let d = text.apply(docs);
        let t = threshold.apply(docs);
        let chunk = expand::<Chunk, _, _>(chunker.apply(d));
        let t_c = broadcast(t, chunk);
        let mask = long_enough.apply((chunk, t_c));
        let kept = reduce(filter(chunk, mask));
        b.output(pair.apply((d, kept)))
    })
    .unwrap();
    let inputs = vec![("abcde".to_string(), 2usize), ("xy".to_string(), 2)];
    let expected = vec![
        Item::Present(("abcde".to_string(), vec!["ab".to_string(), "cd".to_string()])),
        Item::Present(("xy".to_string(), vec!["xy".to_string()])),
    ];
    let (got, _) = run_seq(&plan, out, inputs.clone());
    assert_eq!(got, expected);
    for seed in 0..50 {
        let (got, _) = run_with(
            &plan,
            out,
            inputs.clone(),
            &SimConfig::random(seed).without_faults(),
        );
        assert_eq!(got, expected, "seed {seed}");
    }
}
