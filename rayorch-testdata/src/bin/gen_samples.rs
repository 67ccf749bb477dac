//! Write the bundled sample documents and their known text, or long
//! generated documents for load and memory runs.
//!
//! `cargo run -p rayorch-testdata --bin gen-samples [DIR]` (default:
//! `<workspace>/samples`) writes every file of `rayorch_testdata::pdfgen::samples()`,
//! `expected/<name>.txt` (pages separated by a form feed line) and
//! `manifest.json` (kind and page texts of each file). The output is
//! deterministic; a test checks the committed files against it.
//!
//! `gen-samples --pages P [--count N] [--text] DIR` writes instead `N`
//! (default 1) documents of `P` letter pages each, `long-<P>p-<i>.pdf`:
//! blank pages, or one short line per page with `--text`
//! (`rayorch_testdata::pdfgen::long_pdf`).

use std::path::PathBuf;
use std::process::ExitCode;

fn long(args: &[String]) -> Result<String, String> {
    let (mut pages, mut count, mut text, mut dir) = (None, 1usize, false, None);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut num = |name: &str| -> Result<usize, String> {
            it.next()
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| format!("{name} needs a number"))
        };
        match a.as_str() {
            "--pages" => pages = Some(num("--pages")?),
            "--count" => count = num("--count")?,
            "--text" => text = true,
            d if !d.starts_with("--") && dir.is_none() => dir = Some(PathBuf::from(d)),
            other => {
                return Err(format!(
                    "unknown argument {other}; usage: gen-samples --pages P [--count N] [--text] DIR"
                ));
            }
        }
    }
    let pages = pages.ok_or("--pages P is required with --count/--text")?;
    let dir = dir.ok_or("give the output folder: gen-samples --pages P [--count N] [--text] DIR")?;
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let pdf = rayorch_testdata::pdfgen::long_pdf(pages, text);
    for i in 0..count {
        let path = dir.join(format!("long-{pages}p-{i:03}.pdf"));
        std::fs::write(&path, &pdf).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(format!(
        "wrote {count} documents of {pages} pages ({} bytes each) to {}",
        pdf.len(),
        dir.display()
    ))
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = if args.iter().any(|a| a.starts_with("--")) {
        long(&args)
    } else {
        let dir = args
            .first()
            .map(PathBuf::from)
            .unwrap_or_else(|| rayorch_models::assets::workspace_root().join("samples"));
        rayorch_testdata::pdfgen::write_samples(&dir)
            .map(|n| format!("wrote {n} sample files to {}", dir.display()))
            .map_err(|e| e.to_string())
    };
    match result {
        Ok(msg) => {
            println!("{msg}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
