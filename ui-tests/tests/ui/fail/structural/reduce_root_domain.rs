//! `reduce!` of a Port already in the root Domain.

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

#[pipeline]
impl P {
    fn forward(&self, pdfs: Port<Pdf, String>) -> Port<Pdf, String> {
        let all = reduce!(pdfs);
        self.pair(pdfs, all)
    }
}

fn main() {}
