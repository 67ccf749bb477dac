//! The layout job's command line run.

use clap::Parser;
use rayorch::Runner;
use rayorch_kit::expect::{Expected, Inspect};
use rayorch_kit::names::RootNames;
use rayorch_kit::outcome;
use rayorch_models::layout::markdown::LayoutDocument;

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

/// Run the job; `Ok` carries the exit status (`cli::EXIT_CODES`).
pub fn run(args: Args) -> Result<u8, rayorch::BoxError> {
    run_inspected(args, None)
}

/// Run the job, showing each document to `inspect` as it is written (or
/// each failure): how a test or the demo scores the outputs against truth
/// (`rayorch_testdata::score`).
pub fn run_inspected(args: Args, inspect: Option<Inspect<LayoutDocument>>) -> Result<u8, rayorch::BoxError> {
    // Inputs and `--out` first: a bad one is refused before the output
    // folder is made.
    let out_url = rayorch_kit::store::output_url_or_no_resume(
        &args.out,
        args.resume,
        cfg!(feature = "store"),
        REBUILD_STORE,
    )?;
    let inputs = match args.inputs.is_empty() {
        true => vec![crate::ocr::cli::samples_dir().display().to_string()],
        false => args.inputs.clone(),
    };
    let (files, urls) = inputs::split(&inputs, REBUILD_STORE, None)?;
    let expected = match inputs::expected_dir(&args.expected, &args.inputs) {
        Some(d) => Expected::read(&d)?,
        None => Expected::none(),
    };
    let assets = rayorch_models::assets::ensure()?;
    let layout_assets = rayorch_models::assets::ensure_layout()?;
    let (plan, out) = LayoutJob::new(&args.settings(), &assets, &layout_assets).plan()?;
    let names = RootNames::new();
    let (roots, mut outputs) = match &out_url {
        None => {
            let roots = Roots::new(
                files,
                urls,
                None,
                names.clone(),
                Default::default(),
                inputs::PDF_ROOTS,
            );
            let outputs = Outputs::create(&args.out, out, names, expected).map_err(|e| e.to_string())?;
            (roots, outputs.inspected(inspect))
        }
        #[cfg(feature = "store")]
        Some(url) => {
            let (bucket, done) = rayorch_kit::store::outputs::open_over(
                url,
                args.resume,
                &args.commit,
                "PDF files",
                &files,
                &urls,
            )?;
            let roots = Roots::new(files, urls, None, names.clone(), done, inputs::PDF_ROOTS).skipping_done();
            let outputs = Outputs::to_bucket(bucket, out, names, expected);
            (roots, outputs.inspected(inspect))
        }
        #[cfg(not(feature = "store"))]
        Some(_) => unreachable!("output_url refuses URLs without `store`"),
    };
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
        "documents_unexpected": outputs.unexpected,
        "busy_share": summary.calls.iter().map(|m| (m.name.to_string(), m.busy_s / busy)).collect::<std::collections::BTreeMap<_, _>>(),
    });
    let committed: Option<String> = match &out_url {
        None => {
            rayorch_kit::check::write_json(&args.out, "summary.json", &json)?;
            None
        }
        #[cfg(feature = "store")]
        Some(url) => {
            let bucket = outputs
                .bucket()
                .ok_or("the outputs at a URL were not a bucket's")?;
            Some(bucket.report(url, "documents", &mut json, None)?)
        }
        #[cfg(not(feature = "store"))]
        Some(_) => unreachable!("output_url refuses URLs without `store`"),
    };
    println!(
        "\n{} written, {} failed, {} pages in {:.2} s ({:.2} pages/s)",
        outputs.written, outputs.failed, outputs.pages, summary.wall_s, pages_per_s
    );
    print!("{}", summary.calls_table());
    println!("outputs in {}", args.out.display());
    if let Some(c) = committed {
        println!("{c}");
    }
    if let Some(e) = roots.listing_error() {
        println!("the listing stopped early: {e}");
        return Ok(outcome::exit::BROKE_OFF);
    }
    Ok(outcome::exit_status(false, outputs.unexpected))
}
