//! A `filter!` mask from another Domain.

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
        let keep_pdf = self.keep(pdfs);
        let kept = filter!(page, keep_pdf);
        let all = reduce!(kept);
        self.pair(pdfs, all)
    }
}

fn main() {}
