//! A Port where Rust needs a `bool`.

use rayorch::prelude::*;

#[derive(Domain)]
struct Pdf;

#[derive(Domain)]
#[domain(parent = Pdf)]
struct Page;

struct P {
    keep: FnCall<String, bool>,
    ocr: FnCall<String, String>,
}

#[pipeline]
impl P {
    fn forward(&self, pdfs: Port<Pdf, String>) -> Port<Pdf, String> {
        let keep = self.keep(pdfs);
        if keep {
            return pdfs;
        }
        if !keep || self.keep(pdfs) {}
        self.ocr(pdfs)
    }
}

fn main() {}
