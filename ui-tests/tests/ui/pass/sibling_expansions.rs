//! Two sibling expansions of one Domain (Page → Line and Page → Figure),
//! each reduced back into Page and merged by one two-input Call.

use rayorch::Item;
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

struct Layout {
    pages: FnCall<String, Vec<String>>,
    lines: FnCall<String, Vec<String>>,
    figures: FnCall<String, Vec<String>>,
    read: FnCall<String, String>,
    caption: FnCall<String, String>,
    merge: FnCall<(Vec<String>, Vec<String>), String>,
}

#[pipeline]
impl Layout {
    fn forward(&self, pdfs: Port<Pdf, String>) -> Port<Pdf, Vec<String>> {
        let pages = self.pages(pdfs);
        let page = expand!(pages => Page);
        let line = expand!(self.lines(page) => Line);
        let figure = expand!(self.figures(page) => Figure);
        let text = reduce!(self.read(line));
        let captions = reduce!(self.caption(figure));
        let merged = self.merge(text, captions);
        reduce!(merged)
    }
}

fn split(s: &str, on: char) -> Vec<String> {
    s.split(on).filter(|x| !x.is_empty()).map(String::from).collect()
}

fn main() {
    let p = Layout {
        pages: Call::map("pages", |d: String| split(&d, '|')),
        lines: Call::map("lines", |p: String| split(p.split('/').next().unwrap_or(""), ' ')),
        figures: Call::map("figures", |p: String| {
            split(p.split('/').nth(1).unwrap_or(""), ' ')
        }),
        read: Call::map("read", |l: String| l.to_uppercase()),
        caption: Call::map("caption", |f: String| format!("fig:{f}")),
        merge: Call::map("merge", |(ls, fs): (Vec<String>, Vec<String>)| {
            format!("{} [{}]", ls.join(" "), fs.join(","))
        }),
    };
    let (out, roots) = ui_tests::run(&p, vec!["a b/x|c/".to_string(), "/y z".to_string()]);
    let got: Vec<_> = roots.iter().map(|r| r.get(out)).collect();
    assert_eq!(
        got,
        vec![
            Item::Present(vec!["A B [fig:x]".to_string(), "C []".to_string()]),
            Item::Present(vec![" [fig:y,fig:z]".to_string()]),
        ]
    );
}
