//! `forward` written without `#[pipeline]` on its impl block: each operation
//! says to add `#[pipeline]` (one error per operation; a Call applied as
//! `self.ocr(x)` is rustc's own error, since the field is not a method).

use rayorch::prelude::*;

#[derive(Domain)]
struct Pdf;

#[derive(Domain)]
#[domain(parent = Pdf)]
struct Page;

struct P {
    pages: FnCall<String, Vec<String>>,
}

impl P {
    fn forward(&self, pages: Port<Pdf, Vec<String>>) -> Port<Pdf, Vec<String>> {
        let page = expand!(pages => Page);
        reduce!(page)
    }
}

fn main() {}
