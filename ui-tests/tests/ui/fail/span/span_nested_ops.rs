//! An error inside nested operations points at the innermost offending
//! token: here the child Domain of an `expand!` inside a Call inside a `reduce!`.

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
        // `Line` is not a child of `Pdf`: the caret is on `Line`.
        let wrong = reduce!(self.ocr(expand!(self.pages(pdfs) => Line)));
        let _ = wrong;
        let page = expand!(self.pages(pdfs) => Page);
        let per_page = reduce!(self.ocr(expand!(self.lines(page) => Word)));
        self.pair(pdfs, reduce!(per_page))
    }
}

fn main() {}
