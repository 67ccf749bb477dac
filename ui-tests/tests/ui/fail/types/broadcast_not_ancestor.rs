//! `broadcast!` from a sibling Domain, not an ancestor.

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
    lines: FnCall<String, Vec<String>>,
    figures: FnCall<String, Vec<String>>,
    pair: FnCall<(String, String), String>,
    join: FnCall<(String, Vec<String>), String>,
}

#[pipeline]
impl P {
    fn forward(&self, pdfs: Port<Pdf, String>) -> Port<Pdf, String> {
        let pages = self.pages(pdfs);
        let page = expand!(pages => Page);
        let lines = self.lines(page);
        let line = expand!(lines => Line);
        let figures = self.figures(page);
        let figure = expand!(figures => Figure);
        let caption = broadcast!(line, like = figure);
        let both = self.pair(figure, caption);
        let per_page = reduce!(both);
        let _lines = reduce!(line);
        let text = self.join(page, per_page);
        let all = reduce!(text);
        self.join(pdfs, all)
    }
}

fn main() {}
