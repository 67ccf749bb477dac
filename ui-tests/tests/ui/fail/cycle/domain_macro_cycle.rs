//! `domain!` Domains that form a cycle of three.

rayorch::domain!(X: Z);
rayorch::domain!(Y: X);
rayorch::domain!(Z: Y);

fn main() {}
