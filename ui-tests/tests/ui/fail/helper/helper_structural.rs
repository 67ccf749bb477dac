//! `expand!` in a helper method of the `#[pipeline]` impl is rewritten like `forward`; its Domain mistakes are still reported.

use rayorch::prelude::*;

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
    pages: FnCall<String, Vec<String>>,
    ocr: FnCall<String, String>,
    pair: FnCall<(String, Vec<String>), String>,
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
