//! `x.optional()`: a filtered-away input arrives as `None` instead of
//! dropping the Call's output.

use rayorch::Item;
use rayorch::prelude::*;

#[derive(Domain)]
struct Doc;

struct Describe {
    len: FnCall<String, usize>,
    is_long: FnCall<usize, bool>,
    describe: FnCall<(String, Option<usize>), String>,
}

#[pipeline]
impl Describe {
    fn forward(&self, docs: Port<Doc, String>) -> Port<Doc, String> {
        let n = self.len(docs);
        let long = filter!(n, self.is_long(n));
        self.describe(docs, long.optional())
    }
}

fn main() {
    let p = Describe {
        len: Call::map("len", |d: String| d.len()),
        is_long: Call::map("is_long", |n: usize| n > 3),
        describe: Call::map("describe", |(d, n): (String, Option<usize>)| format!("{d}:{n:?}")),
    };
    let (out, roots) = ui_tests::run(&p, vec!["abcdef".to_string(), "ab".to_string()]);
    let got: Vec<_> = roots.iter().map(|r| r.get(out)).collect();
    assert_eq!(
        got,
        vec![
            Item::Present("abcdef:Some(6)".to_string()),
            Item::Present("ab:None".to_string()),
        ]
    );
}
