//! `expand!` into a Domain that is not a child of the input's Domain.

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
    ocr: FnCall<String, String>,
    pair: FnCall<(String, Vec<String>), String>,
}

#[pipeline]
impl P {
    fn forward(&self, pdfs: Port<Pdf, String>) -> Port<Pdf, String> {
        let pages = self.pages(pdfs);
        let line = expand!(pages => Line);
        let lines = reduce!(line);
        self.pair(pdfs, lines)
    }
}

fn main() {}
