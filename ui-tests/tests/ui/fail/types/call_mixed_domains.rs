//! A two-input Call given a `Pdf` Port and a `Page` Port.

use rayorch::prelude::*;
use ui_tests::MapCall;

#[derive(Domain)]
struct Pdf;

#[derive(Domain)]
#[domain(parent = Pdf)]
struct Page;

struct Q {
    pages: MapCall<String, Vec<String>>,
    label: MapCall<(String, String), String>,
    pair: MapCall<(String, Vec<String>), String>,
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
