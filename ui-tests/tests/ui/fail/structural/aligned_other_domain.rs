//! `expand_aligned!` and `reduce_aligned!` of Ports of two Domains.

use rayorch::prelude::*;

#[derive(Domain)]
struct Pdf;

#[derive(Domain)]
#[domain(parent = Pdf)]
struct Page;

#[derive(Domain)]
#[domain(parent = Page)]
struct Line;

struct P {
    pages: FnCall<String, Vec<String>>,
    pair: FnCall<(Vec<String>, Vec<String>), String>,
}

#[pipeline]
impl P {
    fn forward(&self, pdfs: Port<Pdf, String>) -> Port<Pdf, String> {
        let pages = self.pages(pdfs);
        let page = expand!(pages => Page);
        let (a, b) = expand_aligned!((pages, page) => Line);
        let (x, y) = reduce_aligned!((page, a));
        self.pair(x, y)
    }
}

fn main() {}
