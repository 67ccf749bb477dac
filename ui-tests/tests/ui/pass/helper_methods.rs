//! `expand!`, `reduce!` and Calls in a helper method of the `#[pipeline]` impl.

use rayorch::Item;
use rayorch::prelude::*;

#[derive(Domain)]
struct Doc;

#[derive(Domain)]
#[domain(parent = Doc)]
struct Word;

struct Lengths {
    split: FnCall<String, Vec<String>>,
    len: FnCall<String, usize>,
}

#[pipeline]
impl Lengths {
    fn forward(&self, docs: Port<Doc, String>) -> Port<Doc, Vec<usize>> {
        let word = self.words(docs);
        self.lengths(word)
    }

    fn words(&self, docs: Port<Doc, String>) -> Port<Word, String> {
        expand!(self.split(docs) => Word)
    }

    fn lengths(&self, word: Port<Word, String>) -> Port<Doc, Vec<usize>> {
        reduce!(self.len(word))
    }
}

fn main() {
    let p = Lengths {
        split: Call::map("split", |s: String| s.split(' ').map(String::from).collect::<Vec<_>>()),
        len: Call::map("len", |w: String| w.len()),
    };
    let (out, outcomes) = ui_tests::run(&p, vec!["a bb ccc".to_string(), "dd".to_string()]);
    assert_eq!(outcomes[0].get(out), Item::Present(vec![1, 2, 3]));
    assert_eq!(outcomes[1].get(out), Item::Present(vec![2]));
}
