//! `#[pipeline]` on a trait impl block.

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

trait Build {
    fn forward(&self, pdfs: Port<Pdf, String>) -> Port<Pdf, String>;
}

#[pipeline]
impl Build for P {
    fn forward(&self, pdfs: Port<Pdf, String>) -> Port<Pdf, String> {
        self.ocr(pdfs)
    }
}

fn main() {}
