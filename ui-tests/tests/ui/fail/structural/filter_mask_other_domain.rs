//! A `filter!` mask from another Domain.

use rayorch::prelude::*;
use ui_tests::MapCall;

#[derive(Domain)]
struct Pdf;

#[derive(Domain)]
#[domain(parent = Pdf)]
struct Page;

struct P {
    pages: MapCall<String, Vec<String>>,
    keep: MapCall<String, bool>,
    pair: MapCall<(String, Vec<String>), String>,
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
