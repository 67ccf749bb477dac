//! A stage input mismatch four operations deep points at the argument of the
//! inner Call.

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
struct Word;

struct P {
    pages: FnCall<String, Vec<String>>,
    lines: FnCall<String, Vec<String>>,
    ocr: FnCall<String, String>,
    pair: FnCall<(String, Vec<Vec<String>>), String>,
}

#[pipeline]
impl P {
    fn forward(&self, pdfs: Port<Pdf, String>) -> Port<Pdf, String> {
        // The stage takes `String`, the Port carries `Vec<String>`: the caret
        // is on the argument of the inner Call.
        let page = expand!(self.pages(pdfs) => Page);
        let per_page = reduce!(self.ocr(expand!(self.lines(self.ocr(self.lines(page))) => Word)));
        self.pair(pdfs, reduce!(per_page))
    }
}

fn main() {}
