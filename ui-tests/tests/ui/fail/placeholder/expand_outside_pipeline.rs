//! The pseudo-macros outside `#[pipeline]`.

use rayorch::prelude::*;

#[derive(Domain)]
struct Pdf;

#[derive(Domain)]
#[domain(parent = Pdf)]
struct Page;

fn main() {
    let (_plan, _out) = Plan::build(|b| {
        let docs = b.source::<Pdf, Vec<String>>();
        let page = expand!(docs => Page);
        b.output(reduce!(page))
    })
    .unwrap();
}
