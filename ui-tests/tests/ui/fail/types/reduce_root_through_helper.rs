//! `reduce!` of a root Port the macro cannot follow: rustc reports it.

use rayorch::prelude::*;
use ui_tests::MapCall;

#[derive(Domain)]
struct Pdf;

#[derive(Domain)]
#[domain(parent = Pdf)]
struct Page;

struct P {
    pages: MapCall<String, Vec<String>>,
    ocr: MapCall<String, String>,
    pair: MapCall<(String, Vec<String>), String>,
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
