//! A `forward` whose signature cannot describe a plan.

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
    async fn forward(self, pdfs: String) {
        let _ = pdfs;
    }
}

fn main() {}
