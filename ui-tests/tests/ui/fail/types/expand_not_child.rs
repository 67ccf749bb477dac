//! `expand!` into a Domain that is not a child of the input's Domain.

use rayorch::prelude::*;
use ui_tests::MapCall;

#[derive(Domain)]
struct Pdf;

#[derive(Domain)]
#[domain(parent = Pdf)]
struct Page;

#[derive(Domain)]
#[domain(parent = Page)]
struct Line;

struct P {
    pages: MapCall<String, Vec<String>>,
    ocr: MapCall<String, String>,
    pair: MapCall<(String, Vec<String>), String>,
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
