//! `broadcast!` a root value onto children, `filter!` with a mask computed
//! from both, then `reduce!` the survivors (CONFORMANCE B1's shape).

use rayorch::Item;
use rayorch::prelude::*;

#[derive(Domain)]
struct Doc;

#[derive(Domain)]
#[domain(parent = Doc)]
struct Chunk;

struct Chunks {
    chunk: FnCall<String, Vec<String>>,
    min_len: FnCall<String, usize>,
    long_enough: FnCall<(String, usize), bool>,
    pair: FnCall<(String, Vec<String>), (String, Vec<String>)>,
}

#[pipeline]
impl Chunks {
    fn forward(&self, docs: Port<Doc, String>) -> Port<Doc, (String, Vec<String>)> {
        let chunks = self.chunk(docs);
        let chunk = expand!(chunks => Chunk);
        let threshold = self.min_len(docs);
        let threshold_here = broadcast!(threshold, like = chunk);
        let keep = self.long_enough(chunk, threshold_here);
        let kept = reduce!(filter!(chunk, keep));
        self.pair(docs, kept)
    }
}

fn main() {
    let p = Chunks {
        chunk: Call::map("chunk", |d: String| {
            d.as_bytes()
                .chunks(2)
                .map(|c| String::from_utf8_lossy(c).into_owned())
                .collect::<Vec<_>>()
        }),
        min_len: Call::map("min_len", |_: String| 2usize),
        long_enough: Call::map("long_enough", |(c, t): (String, usize)| c.len() >= t),
        pair: Call::map("pair", |(d, cs): (String, Vec<String>)| (d, cs)),
    };
    let (out, roots) = ui_tests::run(&p, vec!["abcde".to_string(), "xy".to_string()]);
    let got: Vec<_> = roots.iter().map(|r| r.get(out)).collect();
    assert_eq!(
        got,
        vec![
            Item::Present(("abcde".to_string(), vec!["ab".to_string(), "cd".to_string()])),
            Item::Present(("xy".to_string(), vec!["xy".to_string()])),
        ]
    );
}
