//! Two `expand!` into one child Domain (the plan would reject it in `build_plan()`, with no line).

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
    fn forward(&self, pdfs: Port<Pdf, String>) -> Port<Pdf, String> {
        let page = expand!(self.pages(pdfs) => Page);
        let again = expand!(self.pages(pdfs) => Page);
        let a = reduce!(self.ocr(page));
        let b = reduce!(self.ocr(again));
        let _ = b;
        self.pair(pdfs, a)
    }
}

fn main() {}
