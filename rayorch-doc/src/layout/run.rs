//! The layout job's command line run.

use clap::Parser;
use rayorch::Runner;
use rayorch_kit::names::RootNames;

use super::LayoutJob;
use super::cli::Args;
use super::outputs::Outputs;
use crate::inputs::{self, Roots};

/// The job's build command with the `store` feature (what a default build
/// names when refusing a URL input).
const REBUILD_STORE: &str = "cargo run --release --features store --example doc_layout --";

/// Run the job with these command-line words (tests run it in-process).
pub fn run_from<T: Into<std::ffi::OsString> + Clone>(
    argv: impl IntoIterator<Item = T>,
) -> Result<u8, rayorch::BoxError> {
    run(Args::try_parse_from(argv)?)
}

/// Run the job; `Ok` carries the exit status: 0 when every document was
/// written (or, on the default inputs, only the samples broken on purpose
/// failed), 1 otherwise.
pub fn run(args: Args) -> Result<u8, rayorch::BoxError> {
    // Inputs first: a bad one is refused before the output folder is made.
    let given = match args.inputs.is_empty() {
        true => None,
        false => Some(inputs::split(&args.inputs, REBUILD_STORE, None)?),
    };
    std::fs::create_dir_all(&args.out)?;
    let mut truth = Vec::new();
    let (files, urls) = if let Some(given) = given {
        given
    } else {
        let mut files = Vec::new();
        for (name, (pages, pdf)) in [
            ("corpus.pdf", rayorch_testdata::layoutgen::corpus()),
            ("scans.pdf", rayorch_testdata::layoutgen::scan_corpus()),
        ] {
            let path = args.out.join(name);
            std::fs::write(&path, pdf)?;
            truth.push((path.display().to_string(), pages));
            files.push(path);
        }
        let samples = rayorch_models::assets::workspace_root().join("samples");
        let mut s: Vec<_> = std::fs::read_dir(&samples)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "pdf"))
            .collect();
        s.sort();
        files.extend(s);
        (files, Vec::new())
    };
    let assets = rayorch_models::assets::ensure()?;
    let layout_assets = rayorch_models::assets::ensure_layout()?;
    let (plan, out) = LayoutJob::new(&args.settings(), &assets, &layout_assets).plan()?;
    let names = RootNames::new();
    let roots = Roots::new(
        files,
        urls,
        None,
        names.clone(),
        Default::default(),
        inputs::PDF_ROOTS,
    );
    let mut outputs = Outputs::create(&args.out, out, names, truth, args.dpi).map_err(|e| e.to_string())?;
    eprintln!(
        "doc_layout: {}, window {}, text layer {}, outputs in {}",
        roots.describe("documents"),
        args.window,
        if args.force_ocr {
            "ignored (OCR forced)"
        } else {
            "used where usable"
        },
        args.out.display()
    );
    let runner = Runner::new(&plan).window(args.window);
    let summary = runner.run_stream(roots.stream(), &mut outputs)?;
    let pages_per_s = outputs.pages as f64 / summary.wall_s.max(1e-9);
    let busy: f64 = summary.calls.iter().map(|m| m.busy_s).sum::<f64>().max(1e-9);
    let mut json = serde_json::to_value(&summary)?;
    json["job"] = serde_json::json!({
        "documents": roots.yielded(),
        "listing_error": roots.listing_error(),
        "documents_written": outputs.written,
        "documents_failed": outputs.failed,
        "pages_written": outputs.pages,
        "pages_per_s": pages_per_s,
        "force_ocr": args.force_ocr,
        "scores": outputs.scores,
        "busy_share": summary.calls.iter().map(|m| (m.name.to_string(), m.busy_s / busy)).collect::<std::collections::BTreeMap<_, _>>(),
    });
    rayorch_kit::check::write_json(&args.out, "summary.json", &json)?;
    println!(
        "\n{} written, {} failed, {} pages in {:.2} s ({:.2} pages/s)",
        outputs.written, outputs.failed, outputs.pages, summary.wall_s, pages_per_s
    );
    print!("{}", summary.calls_table());
    for s in &outputs.scores {
        println!("{s}");
    }
    println!("outputs in {}", args.out.display());
    if let Some(e) = roots.listing_error() {
        println!("the listing stopped early: {e}");
        return Ok(1);
    }
    let ok = outputs.failed == 0 || (args.inputs.is_empty() && outputs.only_expected_failures());
    Ok(if ok { 0 } else { 1 })
}
