//! `broadcast!` of a Port to its own Domain.

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
        let same = broadcast!(self.ocr(page), like = page);
        reduce!(self.ocr(same))
    }
}

fn main() {}
