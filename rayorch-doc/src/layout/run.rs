//! The layout job's command line run.

use clap::Parser;
use rayorch::Runner;
use rayorch_kit::expect::{Expected, Inspect};
use rayorch_kit::job::Driven;
use rayorch_kit::names::RootNames;
use rayorch_kit::progress::Progress;
use rayorch_kit::{resume, watch};
use rayorch_models::layout::markdown::LayoutDocument;

use super::cli::Args;
use super::outputs::Outputs;
use super::{LayoutJob, Line, Page, Pdf, Region};
use crate::inputs;

/// Who runs the layout plan: `doc_layout`, or `doc_ocr --layout`.
pub(crate) struct Program {
    /// Its name in messages and traces.
    pub name: &'static str,
    /// The command that runs it (what `--resume` is appended to).
    pub command: &'static str,
    /// Its build command with the `store` feature (what a default build
    /// names when refusing a URL).
    pub rebuild_store: &'static str,
}

/// The `doc_layout` example.
const DOC_LAYOUT: Program = Program {
    name: "doc_layout",
    command: "cargo run --release --example doc_layout --",
    rebuild_store: "cargo run --release --features store --example doc_layout --",
};

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
///
/// The run is journaled as `doc_ocr`'s is (`journal.redb` in `--out`):
/// Ctrl-C once drains (no new documents; those in flight finish), twice
/// abandons, and after either, a crash or `kill -9`, `--resume` continues
/// with every document written exactly once; a run into a folder holding
/// an unfinished journal needs `--resume` or `--force`.
pub fn run_inspected(args: Args, inspect: Option<Inspect<LayoutDocument>>) -> Result<u8, rayorch::BoxError> {
    run_as(args, inspect, &DOC_LAYOUT)
}

/// [`run_inspected`] as `program` (`doc_ocr --layout` names itself).
pub(crate) fn run_as(
    args: Args,
    inspect: Option<Inspect<LayoutDocument>>,
    program: &Program,
) -> Result<u8, rayorch::BoxError> {
    // Flags, inputs and `--out` first: a bad one is refused before the
    // output folder is made.
    let traces = rayorch_kit::otlp::job_traces(args.run.otlp.as_deref(), program.name)?;
    let out_url = rayorch_kit::store::output_url(&args.out, cfg!(feature = "store"), program.rebuild_store)?;
    let (files, urls) = inputs::split(&args.inputs, &args.run, program.rebuild_store)?;
    let expected = match inputs::expected_dir(&args.run, &args.inputs) {
        Some(d) => Expected::read(&d)?,
        None => Expected::none(),
    };
    let assets = rayorch_models::assets::ensure()?;
    let layout_assets = rayorch_models::assets::ensure_layout()?;
    let (plan, out) = LayoutJob::new(&args.settings(), &assets, &layout_assets).plan()?;
    let progress = Progress::new(!args.run.no_progress)
        .root::<Pdf>("documents", files.len() as u64)
        .domain::<Page>("pages")
        .domain::<Region>("regions")
        .domain::<Line>("lines")
        .shared();
    let names = RootNames::new();
    let mut opened = inputs::open_run(
        &args.out,
        out_url.as_deref(),
        &args.run,
        &args.commit,
        (files, urls),
        names.clone(),
    )?;
    let mut outputs = match opened.bucket.take() {
        None => Outputs::create(
            &args.out,
            out,
            names.clone(),
            expected,
            progress.clone(),
            args.run.resume,
        )?,
        #[cfg(feature = "store")]
        Some(bucket) => Outputs::to_bucket(bucket, out, names.clone(), expected, progress.clone()),
        #[cfg(not(feature = "store"))]
        Some(never) => match never {},
    }
    .inspected(inspect);
    progress.println(format!(
        "{}: {}, window {}, text layer {}, outputs in {}",
        program.name,
        opened.roots.describe("documents"),
        args.window,
        if args.force_ocr {
            "ignored (OCR forced)"
        } else {
            "used where usable"
        },
        args.out.display()
    ));
    let (watch, _server) = watch::serve(args.run.metrics, &progress)?;
    let runner = Runner::new(&plan)
        .window(args.window)
        .observe((progress.observer(), watch));
    let Driven { summary, interrupted } = opened.drive(runner, "documents", &mut outputs)?;
    progress.finish();
    if let Some(t) = traces {
        println!("{}", t.finish());
    }
    let pages_per_s = outputs.pages.pages_written as f64 / summary.wall_s.max(1e-9);
    let busy: f64 = summary.calls.iter().map(|m| m.busy_s).sum::<f64>().max(1e-9);
    let figures = LayoutFigures {
        pages: &outputs.pages,
        pages_per_s,
        force_ocr: args.force_ocr,
        busy_share: summary
            .calls
            .iter()
            .map(|m| (m.name.to_string(), m.busy_s / busy))
            .collect(),
    };
    let (json, exit_status) = opened.report(&outputs.tally, &names, &summary, interrupted, figures)?;
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
            Some(bucket.report(url, "documents", &mut { json }, None)?)
        }
        #[cfg(not(feature = "store"))]
        Some(_) => unreachable!("output_url refuses URLs without `store`"),
    };
    println!(
        "\n{} written, {} failed, {} pages in {:.2} s ({:.2} pages/s)",
        outputs.tally.written, outputs.tally.failed, outputs.pages.pages_written, summary.wall_s, pages_per_s
    );
    if let Some(line) = outputs.pages.line() {
        println!("{line}");
    }
    print!("{}", summary.calls_table());
    println!("outputs in {}", args.out.display());
    if let Some(c) = committed {
        println!("{c}");
    }
    if interrupted || summary.cancelled {
        println!(
            "interrupted: continue this run with\n  {}",
            resume::resume_command(program.command)
        );
    }
    if let Some(e) = opened.roots.listing_error() {
        println!("the listing stopped early: {e}");
    }
    Ok(exit_status)
}

/// The layout job's own figures in `summary.json`'s `job` (beside every
/// job's, `rayorch_kit::job::RunReport`).
#[derive(serde::Serialize)]
struct LayoutFigures<'a> {
    /// Pages written, by source and reason.
    #[serde(flatten)]
    pages: &'a crate::document::PageTally,
    pages_per_s: f64,
    force_ocr: bool,
    /// Each Call's share of the busy time of all Calls.
    busy_share: std::collections::BTreeMap<String, f64>,
}
