//! `reduce!` of a root Port the macro cannot follow: rustc reports it.

use rayorch::prelude::*;

#[derive(Domain)]
struct Pdf;

#[derive(Domain)]
#[domain(parent = Pdf)]
struct Page;

struct P {
    pages: FnCall<String, Vec<String>>,
    ocr: FnCall<String, String>,
    pair: FnCall<(String, Vec<String>), String>,
}

fn same<D, T>(p: Port<D, T>) -> Port<D, T> {
    p
}

#[pipeline]
impl P {
    fn forward(&self, pdfs: Port<Pdf, String>) -> Port<Pdf, String> {
        let all = reduce!(same(pdfs));
        self.pair(pdfs, all)
    }
}

fn main() {}
