//! `#[pipeline]` takes no options.

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

#[pipeline(batch = 4)]
impl P {
    fn forward(&self, pdfs: Port<Pdf, String>) -> Port<Pdf, String> {
        self.ocr(pdfs)
    }
}

fn main() {}
