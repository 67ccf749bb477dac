//! The job's command line run: inputs, outputs, journal, progress, Ctrl-C,
//! and the role of this process (local, owner, worker or broker).
//!
//! Outputs in `--out` (default `target/doc_ocr`): `documents.jsonl`,
//! `documents.parquet/` (one segment per journal commit), `failures.jsonl`,
//! `summary.json`, `timeline.svg`, and the run's journal `journal.redb`.
//! Ctrl-C once: no new documents, those in flight finish and everything is
//! closed properly; twice: in-flight work is abandoned (reported as
//! failures). Either way (and after a crash or `kill -9`) `--resume`
//! continues the run: finished documents are kept, each exactly once, and
//! the others run; a run into an `--out` holding a journal needs
//! `--resume` or `--force` (start over). The exit status says whether any
//! document failed (`cli::EXIT_CODES`).
//!
//! Inputs are local files (discovered before the run, keyed by their place
//! in that list) and, with `--features store`, objects in object storage,
//! listed while the run goes (`rayorch_kit::store`: a root's key is a
//! function of its URL; each input's first page of listing is checked
//! before any output is touched). The journal of a run with object-store
//! inputs is tied to the inputs as written (a prefix's listing is not read
//! ahead to digest it): a `--resume` over the same inputs skips the
//! documents already written and runs the others, objects added since
//! among them. Names live while their documents do (`RootNames`).
//!
//! `--out` may be an object-store URL (`s3://bucket/prefix/`, `gs://`,
//! `az://`, or `file:///folder/` for the same layout on a local disk;
//! feature `store`): the outputs are then committed there exactly once as
//! immutable segments with one commit record per commit (`bucket`), the
//! records are the run's journal (no local state at all), and `--resume`
//! on any machine continues from them. `summary.json` and `timeline.svg`
//! go to `runs/<writer>/` beside them.

use std::path::Path;
use std::sync::Arc;

use clap::Parser;
use rayorch::Runner;
use rayorch_kit::expect::{Expected, Inspect};
use rayorch_kit::job::{Driven, Opened};
use rayorch_kit::names::RootNames;
use rayorch_kit::progress::Progress;
use rayorch_kit::resume;
use rayorch_kit::timeline::{self, SpanLog};
use rayorch_kit::watch;

use super::cli::Args;
use super::outputs::Outputs;
use super::{Line, OcrJob, Page, Pdf, embedding_dim, machine_cores};
use crate::document::Document;
use crate::inputs;
use rayorch_models::layout::markdown::LayoutDocument;

type Error = rayorch::BoxError;

/// Run the job with these command-line words (tests run it in-process);
/// `Ok` carries the exit status (see `cli::EXIT_CODES`).
pub fn run_from<T: Into<std::ffi::OsString> + Clone>(argv: impl IntoIterator<Item = T>) -> Result<u8, Error> {
    run(Args::try_parse_from(argv)?)
}

/// Run the job; `Ok` carries the exit status (see `cli::EXIT_CODES`).
pub fn run(args: Args) -> Result<u8, Error> {
    run_inspected(args, None)
}

/// Run the job, showing each document this process writes (or each
/// failure) to `inspect` as it is written: how a test or the demo scores
/// the outputs against truth (`rayorch_testdata::score`). A worker or
/// broker writes nothing and never calls it.
pub fn run_inspected(args: Args, inspect: Option<Inspect<Document>>) -> Result<u8, Error> {
    if args.layout {
        // The layout plan; `inspect` sees each document as its record.
        let inspect = inspect.map(|mut inspect| -> Inspect<LayoutDocument> {
            Box::new(move |name, doc| inspect(name, doc.map(Document::from_layout).as_ref()))
        });
        return crate::layout::run_as(args.layout_args(), inspect, &LAYOUT_MODE);
    }
    let role = args.dist.role_in_this_build(REBUILD)?;
    #[cfg(feature = "dist")]
    let code = super::dist::run_role(&args, role, inspect);
    #[cfg(not(feature = "dist"))]
    let code = {
        debug_assert_eq!(
            role,
            rayorch_kit::role::Role::Local,
            "the other roles need `dist`"
        );
        run_local(&args, inspect)
    };
    code
}

/// The whole job in this process.
pub(super) fn run_local(args: &Args, inspect: Option<Inspect<Document>>) -> Result<u8, Error> {
    run_here(args, inspect, |here, outputs| {
        let runner = Runner::new(here.plan)
            .window(here.args.window)
            .window_children(here.args.window_pages)
            .backpressure(here.args.backpressure)
            .observe(here.observer);
        let k = here.cfg.knobs;
        here.progress.println(format!(
            "doc_ocr: {}, window {}, {} ONNX thread(s) per replica, replicas read {} detect {} recognize {} embed {}, outputs in {}",
            here.opened.roots.describe("documents"),
            here.args.window,
            k.threads,
            k.render_replicas,
            k.detect_replicas,
            k.recognize_replicas,
            k.embed_replicas,
            here.args.out.display()
        ));
        Ok(Ran {
            driven: here.opened.drive(runner, "documents", outputs)?,
            distributed: None,
        })
    })
}

/// `doc_ocr --layout`: the layout plan run by this command.
const LAYOUT_MODE: crate::layout::Program = crate::layout::Program {
    name: "doc_ocr --layout",
    command: "cargo run --release --example doc_ocr --",
    rebuild_store: REBUILD_STORE,
};

/// The job's build command with the `dist` feature (what a default build
/// names when refusing `--nats` or `--serve-nats`).
pub(super) const REBUILD: &str = "cargo run --release --features dist --example doc_ocr --";

/// The job's build command with the `store` feature (what a default build
/// names when refusing a URL input).
const REBUILD_STORE: &str = "cargo run --release --features store --example doc_ocr --";

/// What a run needs, prepared by [`run_here`] for its run step: in this
/// process ([`run`]) or as the owner of a distributed run (`dist`).
pub(super) struct Here<'a> {
    pub(super) args: &'a Args,
    pub(super) cfg: &'a super::OcrConfig,
    /// The roots, the local journal (`None`: the outputs are at a URL,
    /// whose commit records are the journal) and the inputs' digest.
    pub(super) opened: &'a Opened<rayorch_models::PdfFile>,
    pub(super) plan: &'a rayorch::Plan,
    pub(super) observer: JobObserver,
    pub(super) progress: &'a Arc<Progress>,
}

/// The observer every run of the job reports to: progress bars, the
/// timeline's spans, and the live page when `--metrics` is given.
pub(super) type JobObserver = (
    rayorch_kit::progress::ProgressObserver,
    (SpanLog, Option<watch::WatchObserver>),
);

/// What a run step hands back to the report.
pub(super) struct Ran {
    /// The runner's summary, and whether Ctrl-C stopped the run.
    pub(super) driven: Driven,
    /// A distributed run's part of the report.
    pub(super) distributed: Option<Distributed>,
}

/// A distributed run's part of the report.
pub(super) struct Distributed {
    /// The job's name on the broker.
    pub(super) job: String,
    /// What crossed the broker for the owner (`summary.json`'s `owner_bytes`).
    pub(super) owner_bytes: serde_json::Value,
    /// Which worker ran how many Grains of each Call (for the console).
    pub(super) workers: String,
}

/// The documents, outputs and journal of a run in this process, run by
/// `step`: the whole job, or the owner of a distributed one.
pub(super) fn run_here(
    args: &Args,
    inspect: Option<Inspect<Document>>,
    step: impl FnOnce(Here<'_>, &mut Outputs) -> Result<Ran, Error>,
) -> Result<u8, Error> {
    // First: a bad --otlp fails before any output is touched.
    let traces = rayorch_kit::otlp::job_traces(args.run.otlp.as_deref(), "doc_ocr")?;
    let bucket_url = output_url(args)?;
    let (files, urls) = inputs::split(&args.inputs, &args.run, REBUILD_STORE)?;
    let expected = match &args.expected_dir() {
        Some(d) => Expected::read(d)?,
        None => Expected::none(),
    };
    let assets = rayorch_models::assets::ensure()?;
    let dim = embedding_dim(&assets.embed_dir)?;
    let cfg = args.config(machine_cores());
    let job = OcrJob::new(&cfg, &assets);
    let (plan, out) = job.plan()?;

    let progress = Progress::new(!args.run.no_progress)
        .root::<Pdf>("documents", files.len() as u64)
        .domain::<Page>("pages")
        .domain::<Line>("lines")
        .shared();
    let names = RootNames::new();
    let mut opened = inputs::open_run(
        &args.out,
        bucket_url.as_deref(),
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
            dim,
            progress.clone(),
            expected,
            args.run.resume,
        )?,
        #[cfg(feature = "store")]
        Some(bucket) => Outputs::to_bucket(bucket, out, names.clone(), dim, progress.clone(), expected),
        #[cfg(not(feature = "store"))]
        Some(never) => match never {},
    }
    .inspected(inspect);

    let spans = SpanLog::default();
    let (watch, _server) = watch::serve(args.run.metrics, &progress)?;
    let observer = (progress.observer(), (spans.clone(), watch));
    let here = Here {
        args,
        cfg: &cfg,
        opened: &opened,
        plan: &plan,
        observer,
        progress: &progress,
    };
    let Ran {
        driven: Driven { summary, interrupted },
        distributed,
    } = step(here, &mut outputs)?;
    progress.finish();
    if let Some(t) = traces {
        println!("{}", t.finish());
    }

    let pages_per_s = outputs.pages.pages_written as f64 / summary.wall_s.max(1e-9);
    let figures = OcrFigures {
        pages: &outputs.pages,
        pages_per_s,
        first_outcome_s: summary.first_root_s,
        first_present_s: summary.first_present_s,
        first_text_document_s: outputs.first_text_s,
        threads_per_session: cfg.knobs.threads,
        replicas: Replicas {
            read: cfg.knobs.render_replicas,
            detect: cfg.knobs.detect_replicas,
            recognize: cfg.knobs.recognize_replicas,
            embed: cfg.knobs.embed_replicas,
        },
        window: args.window,
        window_pages: args.window_pages,
        backpressure: args.backpressure,
        recognition: job.recognized.figures(),
    };
    let (mut json, exit_status) = opened.report(&outputs.tally, &names, &summary, interrupted, figures)?;
    if let Some(d) = &distributed {
        json["job"]["distributed"] = serde_json::json!(d.job);
        json["owner_bytes"] = d.owner_bytes.clone();
    }
    let title = format!(
        "doc_ocr: {} documents, {} pages in {:.1} s",
        outputs.tally.written, outputs.pages.pages_written, summary.wall_s
    );
    let svg = timeline::svg(
        &summary,
        &spans.spans(),
        outputs.tally.written_at.times(),
        "documents written",
        &title,
    );
    let check = match &bucket_url {
        None => {
            rayorch_kit::check::write_json(&args.out, "summary.json", &json)?;
            std::fs::write(args.out.join("timeline.svg"), svg)?;
            exactly_once(&args.out)?
        }
        #[cfg(feature = "store")]
        Some(url) => bucket_report(url, &mut outputs, &mut json, svg)?,
        #[cfg(not(feature = "store"))]
        Some(_) => unreachable!("output_url refuses URLs without `store`"),
    };

    println!(
        "\n{} written, {} failed, {} pages in {:.2} s ({:.2} pages/s); first outcome after {:.2} s, first document with text after {:.2} s",
        outputs.tally.written,
        outputs.tally.failed,
        outputs.pages.pages_written,
        summary.wall_s,
        pages_per_s,
        summary.first_root_s.unwrap_or(f64::NAN),
        outputs.first_text_s.unwrap_or(f64::NAN)
    );
    if let Some(line) = outputs.pages.line() {
        println!("{line}");
    }
    print!("{}", summary.calls_table());
    let rec = job.recognized.figures();
    if rec.model_calls > 0 {
        println!(
            "recognition: {} model calls, {:.1}% of their input columns padding",
            rec.model_calls,
            100.0 * rec.padded_share
        );
    }
    if let Some(d) = &distributed {
        print!("{}", d.workers);
    }
    println!("outputs in {}", args.out.display());
    println!("{check}");
    if interrupted || summary.cancelled {
        println!(
            "interrupted: continue this run with\n  {}",
            resume::resume_command("cargo run --release --example doc_ocr --")
        );
    }
    if let Some(e) = opened.roots.listing_error() {
        // The run broke off: what was listed is written; the rest is not.
        println!(
            "the listing stopped early: {e}\ncontinue this run with\n  {}",
            resume::resume_command("cargo run --release --features store --example doc_ocr --")
        );
    }
    Ok(exit_status)
}

/// The OCR job's own figures in `summary.json`'s `job` (beside every
/// job's, `rayorch_kit::job::RunReport`).
#[derive(serde::Serialize)]
struct OcrFigures<'a> {
    /// Pages written, by source and reason.
    #[serde(flatten)]
    pages: &'a crate::document::PageTally,
    pages_per_s: f64,
    first_outcome_s: Option<f64>,
    first_present_s: Option<f64>,
    /// When the first document with a page was written.
    first_text_document_s: Option<f64>,
    threads_per_session: usize,
    replicas: Replicas,
    window: usize,
    window_pages: usize,
    backpressure: usize,
    /// This process's recognition replicas (a distributed run's workers
    /// count their own).
    recognition: rayorch_models::ocr::RecognizeFigures,
}

/// Replicas of the model Calls (`summary.json`).
#[derive(serde::Serialize)]
struct Replicas {
    read: usize,
    detect: usize,
    recognize: usize,
    embed: usize,
}

/// Check that the outputs hold each document once, the same ones in
/// `documents.jsonl` and `documents.parquet`.
fn exactly_once(dir: &Path) -> Result<String, Error> {
    // Keys only: the check's memory is 8 bytes a document, not the outputs.
    let lines = rayorch_kit::check::jsonl_keys(&dir.join("documents.jsonl"))?;
    let rows = rayorch_kit::parquet::read_u64_column(&dir.join("documents.parquet"), "key")?;
    let n = rayorch_kit::check::once_in_both(("documents.jsonl", lines), ("documents.parquet", rows))?;
    Ok(format!(
        "documents.jsonl and documents.parquet: {n} documents, each once, the same in both"
    ))
}

/// `--out` as an object-store URL (`None`: a local folder). A build without
/// `store` refuses a URL, naming the rebuild.
fn output_url(args: &Args) -> Result<Option<String>, Error> {
    let url = rayorch_kit::store::output_url(&args.out, cfg!(feature = "store"), REBUILD_STORE)?;
    if let Some(out) = &url
        && (args.dist.nats.is_some() || args.dist.serve_nats.is_some())
    {
        return Err(format!(
            "--out {out}: a distributed run writes its outputs to a local folder for now; give a folder, or run in one process"
        )
        .into());
    }
    Ok(url)
}

/// The report's end for outputs at `url` (`RowCommits::report`).
#[cfg(feature = "store")]
fn bucket_report(
    url: &str,
    outputs: &mut Outputs,
    json: &mut serde_json::Value,
    svg: String,
) -> Result<String, Error> {
    let bucket = outputs
        .bucket()
        .ok_or("the outputs at a URL were not a bucket's")?;
    Ok(bucket.report(url, "documents", json, Some(svg))?)
}
