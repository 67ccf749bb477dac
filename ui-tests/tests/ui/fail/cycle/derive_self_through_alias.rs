//! A Domain that is its own parent through a path (`self::Page`): caught by
//! the cycle check, where the derive's own-name test cannot see it.

use rayorch::Domain;

#[derive(Domain)]
#[domain(parent = self::Page)]
struct Page;

fn main() {}
