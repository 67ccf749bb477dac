//! Peak memory against run length (issue 44 item 1): `N` tiny roots, each
//! split into two pages and gathered back, through the threaded Runner
//! with a journal-less callback sink; prints the process's peak RSS
//! (`VmHWM`). Run it once per size, each in a fresh process:
//!
//! ```sh
//! for n in 10000 100000 1000000; do
//!   cargo run -q -p rayorch-bench --example roots_rss -- $n
//! done
//! ```
//!
//! `--unique-keys` keeps the run-wide key set (the opt-in that grows).

use rayorch::prelude::*;
use rayorch::sink::Callback;
use rayorch::{RootOutcome, Runner};

domain!(Doc);
domain!(Page: Doc);

fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let n: u64 = args.iter().find_map(|a| a.parse().ok()).unwrap_or(100_000);
    let unique = args.iter().any(|a| a == "--unique-keys");
    let split = Call::map("split", |x: u64| vec![x, x + 1]).batch_size(64);
    let add = Call::map("add", |p: u64| p + 1).batch_size(64);
    let (plan, out) = Plan::build(|b| {
        let docs = b.source::<Doc, u64>();
        b.output(reduce(add.apply(expand::<Page, _, _>(split.apply(docs)))))
    })
    .expect("the plan builds");
    let before = peak_rss_kib();
    let mut present = 0u64;
    let summary = Runner::new(&plan)
        .window(64)
        .unique_keys(unique)
        .run(
            (0..n).map(|k| (k, k)),
            Callback::new(|o: &RootOutcome| present += u64::from(o.get(out).present().is_some())),
        )
        .expect("the run ends");
    assert_eq!(present, n);
    println!(
        "roots {n:>9}  unique_keys {unique:<5}  peak RSS {:>7} KiB (before the run {before} KiB)  wall {:.2} s",
        peak_rss_kib(),
        summary.wall_s
    );
}
