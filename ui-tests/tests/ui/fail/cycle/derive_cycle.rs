//! Two Domains that name each other as parent: rejected where they are declared.

use rayorch::Domain;

#[derive(Domain)]
#[domain(parent = B)]
struct A;

#[derive(Domain)]
#[domain(parent = A)]
struct B;

fn main() {}
