//! A source Port in a child Domain.

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
    fn forward(&self, page: Port<Page, String>) -> Port<Page, String> {
        self.ocr(page)
    }
}

fn main() {}
