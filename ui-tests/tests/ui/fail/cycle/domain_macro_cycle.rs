//! `domain!` Domains that name each other as parent.

rayorch::domain!(X: Y);
rayorch::domain!(Y: X);

fn main() {}
