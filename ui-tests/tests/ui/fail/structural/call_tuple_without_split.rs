//! A tuple pattern on a Call without `split!`.

use rayorch::prelude::*;
use ui_tests::MapCall;

#[derive(Domain)]
struct Pdf;

#[derive(Domain)]
#[domain(parent = Pdf)]
struct Page;

struct P {
    both: MapCall<String, (String, usize)>,
    pair: MapCall<(String, usize), String>,
}

#[pipeline]
impl P {
    fn forward(&self, pdfs: Port<Pdf, String>) -> Port<Pdf, String> {
        let (text, len) = self.both(pdfs);
        self.pair(text, len)
    }
}

fn main() {}
