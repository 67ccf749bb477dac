//! `forward` with four source Ports (at most three).

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
    fn forward(
        &self,
        a: Port<Pdf, String>,
        b: Port<Pdf, String>,
        c: Port<Pdf, String>,
        d: Port<Pdf, String>,
    ) -> Port<Pdf, String> {
        let _ = (b, c, d);
        self.ocr(a)
    }
}

fn main() {}
