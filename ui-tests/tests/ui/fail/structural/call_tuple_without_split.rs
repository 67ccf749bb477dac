//! A tuple pattern on a Call without `split!`.

use rayorch::prelude::*;

#[derive(Domain)]
struct Pdf;

#[derive(Domain)]
#[domain(parent = Pdf)]
struct Page;

struct P {
    both: FnCall<String, (String, usize)>,
    pair: FnCall<(String, usize), String>,
}

#[pipeline]
impl P {
    fn forward(&self, pdfs: Port<Pdf, String>) -> Port<Pdf, String> {
        let (text, len) = self.both(pdfs);
        self.pair(text, len)
    }
}

fn main() {}
