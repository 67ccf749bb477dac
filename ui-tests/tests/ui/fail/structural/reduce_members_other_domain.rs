//! `reduce!` members from another Domain than the reduced Port.

use rayorch::prelude::*;

#[derive(Domain)]
struct Pdf;

#[derive(Domain)]
#[domain(parent = Pdf)]
struct Page;

#[derive(Domain)]
#[domain(parent = Page)]
struct Line;

struct P {
    pages: FnCall<String, Vec<String>>,
    lines: FnCall<String, Vec<String>>,
    keep: FnCall<String, bool>,
    pair: FnCall<(String, Vec<Vec<String>>), String>,
}

#[pipeline]
impl P {
    fn forward(&self, pdfs: Port<Pdf, String>) -> Port<Pdf, String> {
        let pages = self.pages(pdfs);
        let page = expand!(pages => Page);
        let lines = self.lines(page);
        let line = expand!(lines => Line);
        let kept = self.keep(page);
        let per_page = reduce!(line, members = kept);
        let all = reduce!(per_page);
        self.pair(pdfs, all)
    }
}

fn main() {}
