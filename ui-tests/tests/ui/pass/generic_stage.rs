//! A pipeline generic over its stage: the impl's generics carry over to the
//! generated `impl Pipeline`.

use rayorch::prelude::*;
use rayorch::{Item};
use rayorch::spi::{StageKind};

#[derive(Domain)]
struct Doc;

#[derive(Domain)]
#[domain(parent = Doc)]
struct Word;

struct Lengths<S: StageKind<In = String, Out = usize>> {
    split: FnCall<String, Vec<String>>,
    measure: Call<S>,
}

#[pipeline]
impl<S> Lengths<S>
where
    S: StageKind<In = String, Out = usize>,
{
    fn forward(&self, docs: Port<Doc, String>) -> Port<Doc, Vec<usize>> {
        let word = expand!(self.split(docs) => Word);
        reduce!(self.measure(word))
    }
}

fn main() {
    let p = Lengths {
        split: Call::map("split", |d: String| {
            d.split(' ').map(String::from).collect::<Vec<_>>()
        }),
        measure: Call::map("measure", |w: String| w.chars().count()),
    };
    let (out, roots) = ui_tests::run(&p, vec!["ab cde".to_string(), String::new()]);
    let got: Vec<_> = roots.iter().map(|r| r.get(out)).collect();
    assert_eq!(got, vec![Item::Present(vec![2, 3]), Item::Present(vec![0])]);
}
