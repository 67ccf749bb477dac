//! `#[domain(parent = String)]`: the advice is to name a Domain of this crate
//! (not `rayorch::domain!(String)`, which the orphan rule forbids).

use rayorch::Domain;

#[derive(Domain)]
#[domain(parent = String)]
struct Page;

fn main() {}
