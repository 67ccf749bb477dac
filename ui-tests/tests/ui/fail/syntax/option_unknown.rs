//! Unknown and repeated options, all reported at once at the option's token.

use rayorch::prelude::*;

#[derive(Domain)]
struct Pdf;

#[derive(Domain)]
#[domain(parent = Pdf)]
struct Page;

struct P {
    pages: FnCall<String, Vec<String>>,
    keep: FnCall<String, bool>,
    pair: FnCall<(String, Vec<String>), String>,
}

#[pipeline]
impl P {
    fn forward(&self, pdfs: Port<Pdf, String>) -> Port<Pdf, String> {
        let pages = self.pages(pdfs);
        let page = expand!(pages => Page);
        let keep = self.keep(page);
        let name = broadcast!(pdfs, likes = page);
        let kept = reduce!(name, member = keep);
        let again = reduce!(name, members = keep, members = keep);
        let masked = filter!(name, keep, keep);
        self.pair(pdfs, kept)
    }
}

fn main() {}
