//! `self.name(..)` where field `name` is not a `Call<_>`.

use rayorch::prelude::*;

#[derive(Domain)]
struct Pdf;

#[derive(Domain)]
#[domain(parent = Pdf)]
struct Page;

struct P {
    ocr: FnCall<String, String>,
    lang: String,
}

#[pipeline]
impl P {
    fn forward(&self, pdfs: Port<Pdf, String>) -> Port<Pdf, String> {
        let text = self.ocr(pdfs);
        self.lang(text)
    }
}

fn main() {}
