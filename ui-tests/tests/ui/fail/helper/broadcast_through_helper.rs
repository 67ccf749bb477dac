//! A `broadcast!` whose value comes from a helper method: the macro's walk
//! cannot see its Domain, and rustc reports the rule instead.

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
        let line = expand!(self.pages(page) => Line);
        let down = broadcast!(self.text_of(line), like = page);
        let _ = reduce!(self.ocr(line));
        reduce!(self.ocr(down))
    }

    fn text_of(&self, line: Port<Line, String>) -> Port<Line, String> {
        self.ocr(line)
    }
}

fn main() {}
