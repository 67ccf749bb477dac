//! `#[domain(parent = P)]` where `P` is not a Domain.

use rayorch::prelude::*;

#[derive(Domain)]
struct Pdf;

#[derive(Domain)]
#[domain(parent = Pdf)]
struct Page;

struct NotADomain;

#[derive(Domain)]
#[domain(parent = NotADomain)]
struct Region;

fn main() {}
