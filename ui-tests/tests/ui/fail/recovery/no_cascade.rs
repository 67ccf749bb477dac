//! After a structural error, code using the pipeline reports nothing else.

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

#[pipeline]
impl P {
    fn forward(&self, pdfs: Port<Pdf, String>) -> Port<Pdf, String> {
        let all = reduce!(pdfs, members = pdfs, bogus = 1);
        self.pair(pdfs, all)
    }
}

fn main() {
    let p = P {
        pages: Call::map("pages", |d: String| vec![d]),
        ocr: Call::map("ocr", |d: String| d),
        pair: Call::map("pair", |(d, _): (String, Vec<String>)| d),
    };
    let (_plan, out): (Plan, rayorch::Output<String>) = p.build_plan().unwrap();
    let _ = out;
    let _: fn(&P, Port<Pdf, String>) -> Port<Pdf, String> = P::forward;
}
