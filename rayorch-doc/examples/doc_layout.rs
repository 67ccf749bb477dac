//! Documents by layout: pages → regions → lines, each region read by its
//! own model, gathered back in reading order as Markdown
//! (`rayorch_doc::layout`).
//!
//! `cargo run --example doc_layout` runs the generated layout corpus, its
//! scanned twin and the bundled samples; `-- --help` lists the knobs.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    match rayorch_doc::layout::run(rayorch_doc::layout::cli::Args::parse()) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
