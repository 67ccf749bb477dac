//! `reduce!` in a free function (no `#[pipeline]`): the placeholder says where it works.

use rayorch::prelude::*;

#[derive(Domain)]
struct Pdf;

#[derive(Domain)]
#[domain(parent = Pdf)]
struct Page;

fn gather(page: Port<Page, String>) -> Port<Pdf, Vec<String>> {
    reduce!(page)
}

fn main() {}
