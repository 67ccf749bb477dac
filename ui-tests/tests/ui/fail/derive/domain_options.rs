//! `#[derive(Domain)]` with an unknown option, a repeated and a self parent.

use rayorch::prelude::*;

#[derive(Domain)]
struct Pdf;

#[derive(Domain)]
#[domain(parent = Pdf)]
struct Page;

#[derive(Domain)]
#[domain(parent = Pdf, name = "page", parent = Pdf)]
struct Region;

#[derive(Domain)]
#[domain(parent = Cycle)]
struct Cycle;

#[derive(Domain)]
#[domain]
struct Bare;

fn main() {}
