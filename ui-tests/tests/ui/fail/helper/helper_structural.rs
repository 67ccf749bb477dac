//! `expand!` in a helper method of the `#[pipeline]` impl is rewritten like `forward`; its Domain mistakes are still reported.

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
    fn forward(&self, pdfs: Port<Pdf, String>) -> Port<Pdf, Vec<String>> {
        reduce!(self.ocr(self.page_of(pdfs)))
    }

    fn page_of(&self, pdfs: Port<Pdf, String>) -> Port<Page, String> {
        expand!(self.pages(pdfs) => Line)
    }
}

fn main() {}
