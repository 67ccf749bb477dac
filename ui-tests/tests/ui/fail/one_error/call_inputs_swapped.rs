//! A two-input Call whose inputs are swapped: one error, at the Call.

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

#[derive(Domain)]
#[domain(parent = Page)]
struct Figure;

struct P {
    pages: MapCall<String, Vec<String>>,
    ocr: MapCall<String, String>,
    pair: MapCall<(String, Vec<String>), String>,
}

#[pipeline]
impl P {
    fn forward(&self, pdfs: Port<Pdf, String>) -> Port<Pdf, String> {
        let pages = self.pages(pdfs);
        self.pair(pages, pdfs)
    }
}

fn main() {}
