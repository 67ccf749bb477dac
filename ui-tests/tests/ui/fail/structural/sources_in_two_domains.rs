//! Several sources in different root Domains.

use rayorch::prelude::*;

#[derive(Domain)]
struct Pdf;

#[derive(Domain)]
#[domain(parent = Pdf)]
struct Page;

#[derive(Domain)]
struct Batch;

struct P {
    pair: FnCall<(String, u32), String>,
}

#[pipeline]
impl P {
    fn forward(&self, docs: Port<Pdf, String>, ids: Port<Batch, u32>) -> Port<Pdf, String> {
        self.pair(docs, ids)
    }
}

fn main() {}
