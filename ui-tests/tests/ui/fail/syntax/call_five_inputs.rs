//! A Call applied to five Ports (at most four).

use rayorch::prelude::*;
use ui_tests::MapCall;

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
    pages: MapCall<String, Vec<String>>,
    ocr: MapCall<String, String>,
    pair: MapCall<(String, Vec<String>), String>,
}

#[pipeline]
impl P {
    fn forward(&self, pdfs: Port<Pdf, String>) -> Port<Pdf, String> {
        self.ocr(pdfs, pdfs, pdfs, pdfs, pdfs)
    }
}

fn main() {}
