//! Pdf → Page → Line and back up with two `reduce!`s.

use rayorch::prelude::*;
use rayorch::{Call, Item};

#[derive(Domain)]
struct Pdf;

#[derive(Domain)]
#[domain(parent = Pdf)]
struct Page;

#[derive(Domain)]
#[domain(parent = Page)]
struct Line;

struct DocPipeline {
    pages: FnCall<String, Vec<String>>,
    lines: FnCall<String, Vec<String>>,
    shout: FnCall<String, String>,
    join: FnCall<Vec<String>, String>,
    count: FnCall<(String, Vec<String>), (String, usize)>,
}

#[pipeline]
impl DocPipeline {
    fn forward(&self, pdfs: Port<Pdf, String>) -> Port<Pdf, (String, usize)> {
        let pages = self.pages(pdfs);
        let page = expand!(pages => Page);
        let lines = self.lines(page);
        let line = expand!(lines => Line);
        let loud = self.shout(line);
        let per_page = reduce!(loud);
        let text = self.join(per_page);
        let texts = reduce!(text);
        self.count(pdfs, texts)
    }
}

fn main() {
    let p = DocPipeline {
        pages: Call::map("pages", |d: String| {
            d.split('|').map(String::from).collect::<Vec<_>>()
        }),
        lines: Call::map("lines", |p: String| {
            p.split('/').map(String::from).collect::<Vec<_>>()
        }),
        shout: Call::map("shout", |l: String| l.to_uppercase()),
        join: Call::map("join", |ls: Vec<String>| ls.join(" ")),
        count: Call::map("count", |(d, ps): (String, Vec<String>)| (d, ps.len())),
    };
    let (out, roots) = ui_tests::run(&p, vec!["a/b|c".to_string(), "d".to_string()]);
    let got: Vec<_> = roots.iter().map(|r| r.get(out)).collect();
    assert_eq!(
        got,
        vec![
            Item::Present(("a/b|c".to_string(), 2)),
            Item::Present(("d".to_string(), 1)),
        ]
    );
}
