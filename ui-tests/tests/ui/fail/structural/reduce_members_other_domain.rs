//! `reduce!` members from another Domain than the reduced Port.

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

struct P {
    pages: MapCall<String, Vec<String>>,
    lines: MapCall<String, Vec<String>>,
    keep: MapCall<String, bool>,
    pair: MapCall<(String, Vec<Vec<String>>), String>,
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
