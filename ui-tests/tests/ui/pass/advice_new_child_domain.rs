//! The fix `fail/advice/expand_into_own_domain` suggests, applied: declare a
//! child Domain of `Page` and expand into it.

use rayorch::Item;
use rayorch::prelude::*;

#[derive(Domain)]
struct Pdf;

#[derive(Domain)]
#[domain(parent = Pdf)]
struct Page;

#[derive(Domain)]
#[domain(parent = Page)]
struct Part;

struct P {
    pages: FnCall<String, Vec<String>>,
    ocr: FnCall<String, String>,
}

#[pipeline]
impl P {
    fn forward(&self, pdfs: Port<Pdf, String>) -> Port<Pdf, Vec<Vec<String>>> {
        let page = expand!(self.pages(pdfs) => Page);
        let sub = expand!(self.pages(page) => Part);
        reduce!(reduce!(self.ocr(sub)))
    }
}

fn main() {
    let p = P {
        pages: Call::map("pages", |s: String| s.split('/').map(String::from).collect::<Vec<_>>()),
        ocr: Call::map("ocr", |s: String| s.to_uppercase()),
    };
    let (out, outcomes) = ui_tests::run(&p, vec!["a/b".to_string()]);
    assert_eq!(
        outcomes[0].get(out),
        Item::Present(vec![vec!["A".to_string()], vec!["B".to_string()]])
    );
}
