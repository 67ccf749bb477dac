//! `#[pipeline(crate = ray)]` and `#[domain(crate = ray)]` with the crate
//! under another name; the operations may be written `ray::expand!`.

extern crate rayorch as ray;

use ray::{Domain, FnCall, Port, pipeline};

#[derive(Domain)]
#[domain(crate = ray)]
struct Doc;

#[derive(Domain)]
#[domain(parent = Doc, crate = ray)]
struct Word;

struct Lengths {
    split: FnCall<String, Vec<String>>,
    len: FnCall<String, usize>,
}

#[pipeline(crate = ray)]
impl Lengths {
    fn forward(&self, docs: Port<Doc, String>) -> Port<Doc, Vec<usize>> {
        let word = ray::expand!(self.split(docs) => Word);
        ray::reduce!(self.len(word))
    }
}

fn main() {
    let p = Lengths {
        split: ray::Call::map("split", |s: String| s.split(' ').map(String::from).collect::<Vec<_>>()),
        len: ray::Call::map("len", |w: String| w.len()),
    };
    let (out, outcomes) = ui_tests::run(&p, vec!["a bb ccc".to_string()]);
    assert_eq!(outcomes[0].get(out), ray::Item::Present(vec![1, 2, 3]));
}
