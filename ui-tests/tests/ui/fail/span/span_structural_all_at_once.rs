//! Structural mistakes are all reported in one pass, each at its own token.

use rayorch::prelude::*;

#[derive(Domain)]
struct Pdf;

#[derive(Domain)]
#[domain(parent = Pdf)]
struct Page;

struct P {
    pages: FnCall<String, Vec<String>>,
    keep: FnCall<String, bool>,
    pair: FnCall<(String, Vec<String>), String>,
}

#[pipeline]
impl P {
    fn forward(&self, pdfs: Port<Pdf, String>) -> Port<Pdf, String> {
        let pages = self.pages(pdfs);
        let page = expand!(pages => Page);
        let keep = self.keep(page);
        let roots = reduce!(pdfs);
        let texts = reduce!(page, members = self.keep(pdfs));
        while keep {}
        let (a, b) = self.pair(pdfs, texts);
        let _ = (roots, a, b, reduce!(x, member = keep));
        self.pair(pdfs, texts)
    }
}

fn main() {}
