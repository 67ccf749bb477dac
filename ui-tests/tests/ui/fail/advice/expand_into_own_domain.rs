//! `expand!` from `Page` into `Page`: the advice names a new child Domain (not `#[domain(parent = Page)]` on `Page`).

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
        let page = expand!(self.pages(pdfs) => Page);
        let sub = expand!(self.pages(page) => Page);
        reduce!(self.ocr(sub))
    }
}

fn main() {}
