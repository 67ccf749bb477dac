//! The layout job's command line run.

use clap::Parser;
use rayorch::Runner;
use rayorch_kit::names::RootNames;
use rayorch_kit::outcome;

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
    // Inputs and `--out` first: a bad one is refused before the output
    // folder is made.
    let out_url = rayorch_kit::store::output_url_or_no_resume(
        &args.out,
        args.resume,
        cfg!(feature = "store"),
        REBUILD_STORE,
    )?;
    let given = match args.inputs.is_empty() {
        true => None,
        false => Some(inputs::split(&args.inputs, REBUILD_STORE, None)?),
    };
    // The generated corpus goes beside local outputs, or to a temporary
    // folder when they are at a URL.
    let work = match &out_url {
        None => args.out.clone(),
        Some(_) => std::env::temp_dir().join(format!("rayorch-layout-{}", std::process::id())),
    };
    std::fs::create_dir_all(&work)?;
    let mut truth = Vec::new();
    let (files, urls) = if let Some(given) = given {
        given
    } else {
        let mut files = Vec::new();
        for (name, (pages, pdf)) in [
            ("corpus.pdf", rayorch_testdata::layoutgen::corpus()),
            ("scans.pdf", rayorch_testdata::layoutgen::scan_corpus()),
        ] {
            let path = work.join(name);
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
            let outputs =
                Outputs::create(&args.out, out, names, truth, args.dpi).map_err(|e| e.to_string())?;
            (roots, outputs)
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
            (roots, Outputs::to_bucket(bucket, out, names, truth, args.dpi))
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
        "scores": outputs.scores,
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
            let line = bucket.report(url, "documents", &mut json, None)?;
            let _ = std::fs::remove_dir_all(&work);
            Some(line)
        }
        #[cfg(not(feature = "store"))]
        Some(_) => unreachable!("output_url refuses URLs without `store`"),
    };
    println!(
        "\n{} written, {} failed, {} pages in {:.2} s ({:.2} pages/s)",
        outputs.written, outputs.failed, outputs.pages, summary.wall_s, pages_per_s
    );
    print!("{}", summary.calls_table());
    for s in &outputs.scores {
        println!("{s}");
    }
    println!("outputs in {}", args.out.display());
    if let Some(c) = committed {
        println!("{c}");
    }
    if let Some(e) = roots.listing_error() {
        println!("the listing stopped early: {e}");
        return Ok(outcome::exit::BROKE_OFF);
    }
    // The default inputs hold samples broken on purpose: only other
    // failures count.
    let expected = args.inputs.is_empty() && outputs.only_expected_failures();
    Ok(outcome::exit_status(
        false,
        if expected { 0 } else { outputs.failed },
    ))
}
