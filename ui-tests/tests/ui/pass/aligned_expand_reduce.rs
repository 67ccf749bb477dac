//! `split!` of a two-field stage, `expand_aligned!`, and `reduce_aligned!`
//! with `members =`.

use rayorch::Item;
use rayorch::prelude::*;

#[derive(Domain)]
struct Doc;

#[derive(Domain)]
#[domain(parent = Doc)]
struct Word;

struct Aligned {
    tokenize: FnCall<String, (Vec<String>, Vec<usize>)>,
    label: FnCall<(String, usize), String>,
    long: FnCall<usize, bool>,
    pair: FnCall<(Vec<String>, Vec<usize>), String>,
}

#[pipeline]
impl Aligned {
    fn forward(&self, docs: Port<Doc, String>) -> Port<Doc, String> {
        let (words, lengths) = split!(self.tokenize(docs));
        let (word, length) = expand_aligned!((words, lengths) => Word);
        let label = self.label(word, length);
        let is_long = self.long(length);
        let kept = filter!(label, is_long);
        let (labels, lens) = reduce_aligned!((label, length), members = kept);
        self.pair(labels, lens)
    }
}

fn main() {
    let p = Aligned {
        tokenize: Call::map("tokenize", |d: String| {
            let words: Vec<String> = d.split(' ').map(String::from).collect();
            let lens = words.iter().map(|w| w.len()).collect();
            (words, lens)
        }),
        label: Call::map("label", |(w, n): (String, usize)| format!("{w}/{n}")),
        long: Call::map("long", |n: usize| n > 1),
        pair: Call::map("pair", |(ls, ns): (Vec<String>, Vec<usize>)| {
            format!("{} {:?}", ls.join(","), ns)
        }),
    };
    let (out, roots) = ui_tests::run(&p, vec!["a bb ccc".to_string(), "x".to_string()]);
    let got: Vec<_> = roots.iter().map(|r| r.get(out)).collect();
    assert_eq!(
        got,
        vec![
            Item::Present("bb/2,ccc/3 [2, 3]".to_string()),
            Item::Present(" []".to_string()),
        ]
    );
}
