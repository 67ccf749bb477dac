//! `crate = ..` given twice in `#[domain]`.

extern crate rayorch as ray;

#[derive(ray::Domain)]
#[domain(crate = ray, crate = ray)]
struct Pdf;

fn main() {}
