//! `forward` returning a Port of a child Domain.

use rayorch::prelude::*;

#[derive(Domain)]
struct Pdf;

#[derive(Domain)]
#[domain(parent = Pdf)]
struct Page;

struct P {
    pages: FnCall<String, Vec<String>>,
    ocr: FnCall<String, String>,
    pair: FnCall<(String, Vec<String>), String>,
}

#[pipeline]
impl P {
    fn forward(&self, pdfs: Port<Pdf, String>) -> Port<Page, String> {
        let pages = self.pages(pdfs);
        let page = expand!(pages => Page);
        self.ocr(page)
    }
}

fn main() {}
