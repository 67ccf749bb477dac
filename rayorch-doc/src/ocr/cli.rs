//! The job's command line.

use std::path::PathBuf;

use clap::Parser;
use rayorch_kit::role::DistArgs;
use rayorch_models::RenderConfig;

use super::{Knobs, OcrConfig};
use crate::layout::cli::LayoutFlags;

/// What `--help` says about the exit status (`rayorch_kit::job::Tally::exit_status`).
pub const EXIT_CODES: &str = "Exit status:
  0    every document was written (with --expected or the bundled samples:
       every document ended as the manifest says, bad samples failing included)
  1    the run could not start or broke off (the message says why)
  2    the command line is wrong
  3    at least one document failed: see failures.jsonl (the others are written)
  130  interrupted by Ctrl-C (what finished is written)";

/// Read a set of PDFs: each page from its text layer when the layer is
/// trustworthy, by OCR otherwise (render, detect lines, recognise them);
/// embed each page, and write each document the moment it is complete.
/// `--layout`: regions, tables, reading order and Markdown instead.
#[derive(Parser, Debug, Clone)]
#[command(name = "doc_ocr", version, about, after_help = EXIT_CODES)]
#[command(group = clap::ArgGroup::new("layout_only")
    .args(LayoutFlags::IDS).multiple(true).requires("layout"))]
#[command(group = clap::ArgGroup::new("page_plan_only")
    .args(Args::PAGE_PLAN_ONLY).multiple(true).conflicts_with("layout"))]
pub struct Args {
    /// PDF files, folders (searched recursively for *.pdf) or glob patterns;
    /// or, in a build with `--features store`, objects in object storage:
    /// `s3://BUCKET/PREFIX/` (every *.pdf below), `s3://BUCKET/a/**/*.pdf`,
    /// `s3://BUCKET/KEY`, likewise `gs://` and `az://`, and `https://…` for
    /// one object (credentials and endpoint from the environment: `AWS_*`,
    /// `AWS_ENDPOINT_URL`, `GOOGLE_*`, `AZURE_*`). Default: the bundled
    /// samples.
    pub inputs: Vec<String>,
    /// Output folder (created if missing; its output files are replaced);
    /// or, in a build with `--features store`, an object-store URL
    /// (`s3://BUCKET/PREFIX/`, `gs://…`, `az://…`, `file:///FOLDER/`): the
    /// outputs are committed there exactly once, as immutable segments
    /// named by commit records, and `--resume` continues from them on any
    /// machine (README: "Outputs on object storage").
    #[arg(short, long, default_value = "target/doc_ocr")]
    pub out: PathBuf,
    /// Outputs at a URL: `--commit-mib`, `--commit-every-s`,
    /// `--at-least-once`.
    #[command(flatten)]
    pub commit: rayorch_kit::store::CommitFlags,
    /// Admission window: at most this many documents in flight.
    #[arg(long, default_value_t = 8)]
    pub window: usize,
    /// Admission window in pages and lines: no new document is admitted
    /// while this many are live. A line counts until its page is reduced,
    /// a page until its document is, so a long document's finished pages
    /// make room for the next documents (a longer one is admitted alone).
    #[arg(long, default_value_t = 4096)]
    pub window_pages: usize,
    /// A Call waits while the Call reading its outputs has this many full
    /// batches queued (render never runs far ahead of detect).
    #[arg(long, default_value_t = 2)]
    pub backpressure: usize,
    /// ONNX Runtime threads per session (per replica). Default: from the
    /// core count (see `Knobs::for_cores`).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Rendering resolution.
    #[arg(long, default_value_t = 150.0)]
    pub dpi: f32,
    /// Largest page in pixels (bigger pages render at a lower DPI).
    #[arg(long, default_value_t = 6_000_000)]
    pub max_pixels: u64,
    /// OCR every page, even one whose text layer passes every check (by
    /// default such a page's text is its layer: exact, and several times
    /// cheaper).
    #[arg(long)]
    pub force_ocr: bool,
    /// Take an OCR'd scan's invisible text layer as it is. By default such
    /// a page is OCR'd as well and its layer kept only if the two agree
    /// (`verified`; `disagrees` otherwise): OCR costs on those pages, but a
    /// layer that lies about its page is caught.
    #[arg(long)]
    pub trust_scan_layers: bool,
    /// Read (text layer, and rendering for the pages OCR reads): replicas.
    /// Default: from the core count.
    #[arg(long)]
    pub render_replicas: Option<usize>,
    /// Read: pages per batch (from any documents).
    #[arg(long, default_value_t = 2)]
    pub render_batch: usize,
    /// Detect: pages per batch.
    #[arg(long, default_value_t = 4)]
    pub detect_batch: usize,
    /// Detect: longest side of the detection input in pixels (0 = the
    /// full page, as the reference pipeline; slower).
    #[arg(long, default_value_t = 960)]
    pub det_max_side: u32,
    /// Detect: turn pages by 90/180/270° and flip upside-down lines
    /// (the line-orientation model); `--no-orientation` skips it.
    #[arg(long)]
    pub no_orientation: bool,
    /// Detect: replicas. Default: from the core count.
    #[arg(long)]
    pub detect_replicas: Option<usize>,
    /// Recognise: line crops per batch (from any pages and documents).
    #[arg(long, default_value_t = 48)]
    pub recognize_batch: usize,
    /// Recognise: replicas. Default: from the core count.
    #[arg(long)]
    pub recognize_replicas: Option<usize>,
    /// Recognition: batches of one padded width (one model call each, as a
    /// GPU wants) instead of any lines (one call per width present). On by
    /// default with `--cuda`; on a CPU it measured no faster (BENCHMARKS.md).
    #[arg(long)]
    pub recognize_by_width: bool,
    /// Embed: page texts per batch.
    #[arg(long, default_value_t = 16)]
    pub embed_batch: usize,
    /// Embed: replicas. Default: from the core count.
    #[arg(long)]
    pub embed_replicas: Option<usize>,
    /// Embed: longest a page text waits for a fuller batch while more
    /// pages are still being read (0: never waits).
    #[arg(long, default_value_t = 1000)]
    pub embed_delay_ms: u64,
    /// Fetch (inputs in object storage): objects read at once. A CPU OCR
    /// job needs few; a document waits for its bytes only once.
    #[arg(long, default_value_t = 8)]
    pub fetch_concurrency: usize,
    /// Fetch: longest one attempt to read an object may take, in seconds
    /// (then it is retried, twice).
    #[arg(long, default_value_t = 120)]
    pub fetch_timeout_s: u64,
    /// Time limit of open and read (no Call of this job takes a whole
    /// document at once: it reads page by page).
    #[command(flatten)]
    pub parse_limit: rayorch_kit::limits::ParseLimit,
    /// Time limit of detect, recognise and embed.
    #[command(flatten)]
    pub model_limit: rayorch_kit::limits::ModelLimit,
    /// Run ONNX models on CUDA device 0 (needs `--features rayorch-models/cuda`
    /// and an onnxruntime-gpu library in ORT_DYLIB_PATH).
    #[arg(long)]
    pub cuda: bool,
    /// `--resume`, `--force`, `--limit`, `--no-progress`, `--metrics`,
    /// `--otlp`, `--expected` (every job's: `rayorch_kit::job`).
    #[command(flatten)]
    pub run: rayorch_kit::job::RunFlags,
    /// Layout mode: find each page's regions (text, titles, tables,
    /// figures, captions, headers and footers), read each with its own
    /// model (the text layer where the page's layer is trustworthy, OCR
    /// lines otherwise, table structure for tables) and write them in
    /// reading order, with a Markdown file per document (`regions.jsonl`,
    /// `regions.parquet/`, `markdown/`; `documents.jsonl` as without it,
    /// no embeddings). The `doc_layout` job's plan; the flags below under
    /// "Layout mode" need it, and the flags of the page plan alone
    /// (`--window-pages`, `--embed-*`, `--render-*`, `--detect-*`,
    /// `--cuda`, distributed runs, …) are refused with it.
    #[arg(long)]
    pub layout: bool,
    /// Layout mode's own flags.
    #[command(flatten, next_help_heading = "Layout mode (with --layout)")]
    pub layout_flags: LayoutFlags,
    /// Distributed runs: `--serve-nats`, `--nats`, `--role`, `--calls`,
    /// `--owner-calls`, `--job`.
    #[command(flatten)]
    pub dist: DistArgs,
}

impl Args {
    /// The job's Calls as these flags configure them on `cores` cores.
    pub fn config(&self, cores: usize) -> OcrConfig {
        OcrConfig {
            render: RenderConfig {
                dpi: self.dpi,
                max_pixels: self.max_pixels,
            },
            force_ocr: self.force_ocr,
            verify_scan_layers: !self.trust_scan_layers,
            det_max_side: self.det_max_side,
            orientation: !self.no_orientation,
            cuda: self.cuda,
            knobs: self.knobs(cores),
            render_batch: self.render_batch,
            detect_batch: self.detect_batch,
            recognize_batch: self.recognize_batch,
            recognize_by_width: self.recognize_by_width || self.cuda,
            embed_batch: self.embed_batch,
            embed_delay: std::time::Duration::from_millis(self.embed_delay_ms),
            fetch_concurrency: self.fetch_concurrency.max(1),
            fetch_timeout: std::time::Duration::from_secs(self.fetch_timeout_s.max(1)),
            timeouts: rayorch_kit::limits::Timeouts::from_flags(
                Some(self.parse_limit),
                None,
                self.model_limit,
            ),
        }
    }

    /// The knobs for `cores` cores, each overridden by its flag when given
    /// (0 counts as 1).
    pub fn knobs(&self, cores: usize) -> Knobs {
        let d = Knobs::for_cores(cores);
        let pick = |flag: Option<usize>, default: usize| flag.map_or(default, |n| n.max(1));
        Knobs {
            threads: pick(self.threads, d.threads),
            render_replicas: pick(self.render_replicas, d.render_replicas),
            detect_replicas: pick(self.detect_replicas, d.detect_replicas),
            recognize_replicas: pick(self.recognize_replicas, d.recognize_replicas),
            embed_replicas: pick(self.embed_replicas, d.embed_replicas),
        }
    }
}

impl Args {
    /// The ids of the flags only the page plan reads (refused with
    /// `--layout`).
    pub const PAGE_PLAN_ONLY: [&str; 21] = [
        "window_pages",
        "trust_scan_layers",
        "backpressure",
        "max_pixels",
        "render_replicas",
        "render_batch",
        "detect_batch",
        "det_max_side",
        "no_orientation",
        "detect_replicas",
        "recognize_replicas",
        "embed_batch",
        "embed_replicas",
        "embed_delay_ms",
        "fetch_concurrency",
        "fetch_timeout_s",
        "parse_timeout_s",
        "cuda",
        "nats",
        "serve_nats",
        "job",
    ];

    /// The layout job's command line these flags give (`--layout`): the
    /// flags both plans read carry over, the layout plan's own come from
    /// `layout_flags`, and every other keeps `doc_layout`'s default.
    pub fn layout_args(&self) -> crate::layout::cli::Args {
        crate::layout::cli::Args {
            inputs: self.inputs.clone(),
            out: self.out.clone(),
            run: self.run.clone(),
            commit: self.commit.clone(),
            window: self.window,
            threads: self.threads.unwrap_or(1).max(1),
            dpi: self.dpi,
            force_ocr: self.force_ocr,
            detect_batch: crate::layout::LayoutSettings::default().detect_batch,
            recognize_batch: self.recognize_batch,
            recognize_by_width: self.recognize_by_width,
            model_limit: self.model_limit,
            layout: self.layout_flags,
        }
    }

    /// The folder whose `manifest.json` says which inputs must fail:
    /// `--expected`, or the bundled samples' when no inputs are given.
    pub fn expected_dir(&self) -> Option<PathBuf> {
        crate::inputs::expected_dir(&self.run, &self.inputs)
    }
}

/// The bundled samples folder.
pub fn samples_dir() -> PathBuf {
    rayorch_models::assets::workspace_root().join("samples")
}
