//! Write the bundled sample documents and their known text.
//!
//! `cargo run -p rayorch-models --bin gen-samples [DIR]` (default:
//! `<workspace>/samples`) writes every file of `rayorch_models::pdfgen::samples()`,
//! `expected/<name>.txt` (pages separated by a form feed line) and
//! `manifest.json` (kind and page texts of each file). The output is
//! deterministic; a test checks the committed files against it.

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let dir = std::env::args_os()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| rayorch_models::assets::workspace_root().join("samples"));
    match rayorch_models::pdfgen::write_samples(&dir) {
        Ok(n) => {
            println!("wrote {n} sample files to {}", dir.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
