//! A two-input Call given a `Pdf` Port and a `Page` Port.

use rayorch::prelude::*;

#[derive(Domain)]
struct Pdf;

#[derive(Domain)]
#[domain(parent = Pdf)]
struct Page;

struct Q {
    pages: FnCall<String, Vec<String>>,
    label: FnCall<(String, String), String>,
    pair: FnCall<(String, Vec<String>), String>,
}

#[pipeline]
impl Q {
    fn forward(&self, pdfs: Port<Pdf, String>) -> Port<Pdf, String> {
        let pages = self.pages(pdfs);
        let page = expand!(pages => Page);
        let text = self.label(pdfs, page);
        let texts = reduce!(text);
        self.pair(pdfs, texts)
    }
}

fn main() {}
