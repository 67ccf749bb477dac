//! `forward` with four source Ports (at most three).

use rayorch::prelude::*;

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
    pages: FnCall<String, Vec<String>>,
    ocr: FnCall<String, String>,
    pair: FnCall<(String, Vec<String>), String>,
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
