//! The builder API (no `#[pipeline]`): a Call applied to Ports of two Domains is one error.

use rayorch::prelude::*;

#[derive(Domain)]
struct Pdf;

#[derive(Domain)]
#[domain(parent = Pdf)]
struct Page;

fn main() {
    let pages: FnCall<String, Vec<String>> = Call::map("pages", |s: String| vec![s]);
    let pair: FnCall<(String, String), String> = Call::map("pair", |(a, b): (String, String)| a + &b);
    let _ = Plan::build(|b| {
        let pdfs: Port<Pdf, String> = b.source();
        let page: Port<Page, String> = rayorch::expand(pages.apply(pdfs));
        let joined = pair.apply((pdfs, page));
        b.output(joined);
    });
}
