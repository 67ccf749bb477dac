//! Command line of the layout job.

use std::path::PathBuf;

use clap::Parser;

use super::LayoutSettings;

/// What `--help` says about the exit status (`rayorch_kit::outcome`).
pub const EXIT_CODES: &str = "Exit status:
  0    every document was written (with --expected or the bundled samples:
       every document ended as the manifest says, bad samples failing included)
  1    the run could not start or broke off (the message says why)
  2    the command line is wrong
  3    at least one document failed: see failures.jsonl (the others are written)
  130  interrupted by Ctrl-C (what finished is written; --resume continues)";

/// Documents to Markdown: render, find layout regions, read each region with
/// its own model (OCR lines, table structure, or the PDF's own text layer),
/// and gather regions back in reading order.
#[derive(Parser, Debug, Clone)]
#[command(name = "doc_layout", version, about, after_help = EXIT_CODES)]
pub struct Args {
    /// PDF files, folders (searched recursively for *.pdf) or glob
    /// patterns; or, in a build with `--features store`, objects in object
    /// storage (`s3://BUCKET/PREFIX/`, `s3://BUCKET/a/**/*.pdf`, `gs://`,
    /// `az://`, `https://…`; credentials from the environment, as
    /// `doc_ocr`). Default: the bundled samples (the example adds the
    /// generated layout corpus, scored against its truth).
    pub inputs: Vec<String>,
    /// Output folder (created if missing; a run into a folder that holds a
    /// journaled run needs `--resume` or `--force`);
    /// or, in a build with `--features store`, an object-store URL
    /// (`s3://BUCKET/PREFIX/`, `file:///FOLDER/`, …) where the outputs are
    /// committed exactly once (as `doc_ocr`'s; the Markdown is in
    /// `documents.jsonl`, no file per document).
    #[arg(short, long, default_value = "target/doc_layout")]
    pub out: PathBuf,
    /// `--resume`, `--force`, `--limit`, `--no-progress`, `--metrics`,
    /// `--otlp`, `--expected` (every job's: `rayorch_kit::job`).
    #[command(flatten)]
    pub run: rayorch_kit::job::RunFlags,
    /// Outputs at a URL: `--commit-mib`, `--commit-every-s`,
    /// `--at-least-once`.
    #[command(flatten)]
    pub commit: rayorch_kit::store::CommitFlags,
    /// Admission window: at most this many documents in flight.
    #[arg(long, default_value_t = 8)]
    pub window: usize,
    /// ONNX Runtime threads per session (per replica).
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Rendering resolution.
    #[arg(long, default_value_t = 150.0)]
    pub dpi: f32,
    /// Ignore the PDFs' text layers: OCR every page.
    #[arg(long)]
    pub force_ocr: bool,
    /// Region line detection: regions per batch.
    #[arg(long, default_value_t = 16)]
    pub detect_batch: usize,
    /// Recognition: line crops per batch (from any regions, pages, documents).
    #[arg(long, default_value_t = 48)]
    pub recognize_batch: usize,
    /// Recognition: batches of one padded width (one model call each)
    /// instead of any lines (one call per width present).
    #[arg(long)]
    pub recognize_by_width: bool,
    /// Time limit of the model Calls.
    #[command(flatten)]
    pub model_limit: rayorch_kit::limits::ModelLimit,
    /// The layout model's and the table model's flags, and render's limit.
    #[command(flatten)]
    pub layout: LayoutFlags,
}

/// The flags of the layout plan that no other plan has: `doc_layout`'s,
/// and `doc_ocr --layout`'s (which refuses them without `--layout`).
#[derive(clap::Args, Debug, Clone, Copy)]
pub struct LayoutFlags {
    /// Layout: pages per batch (from any documents). Also the batch of the
    /// upright pass.
    #[arg(long, default_value_t = 4)]
    pub layout_batch: usize,
    /// Layout: pages stacked into one model call (at most `--layout-batch`).
    /// 1 on the CPU, where stacking costs CPU time and memory; larger on
    /// an accelerator.
    #[arg(long, default_value_t = 1)]
    pub layout_stack: usize,
    /// Table structure: regions per batch (only tables reach the model).
    #[arg(long, default_value_t = 8)]
    pub table_batch: usize,
    /// Replicas of the upright, region detection and recognition Calls.
    #[arg(long, default_value_t = 1)]
    pub replicas: usize,
    /// Replicas of the layout Call (each its own ONNX Runtime session).
    #[arg(long, default_value_t = 1)]
    pub layout_replicas: usize,
    /// Time limit of render (a whole document at once; no Call of the
    /// layout plan parses one page alone).
    #[command(flatten)]
    pub whole_limit: rayorch_kit::limits::WholeLimit,
}

impl LayoutFlags {
    /// The ids of these flags (what `doc_ocr` requires `--layout` for).
    pub const IDS: [&str; 6] = [
        "layout_batch",
        "layout_stack",
        "table_batch",
        "replicas",
        "layout_replicas",
        "document_timeout_s",
    ];
}

impl Args {
    /// The job's Calls as these flags configure them.
    pub fn settings(&self) -> LayoutSettings {
        LayoutSettings {
            threads: self.threads,
            dpi: self.dpi,
            force_ocr: self.force_ocr,
            layout_batch: self.layout.layout_batch,
            layout_stack: self.layout.layout_stack,
            detect_batch: self.detect_batch,
            recognize_batch: self.recognize_batch,
            recognize_by_width: self.recognize_by_width,
            table_batch: self.layout.table_batch,
            replicas: self.layout.replicas,
            layout_replicas: self.layout.layout_replicas,
            timeouts: rayorch_kit::limits::Timeouts::from_flags(
                None,
                Some(self.layout.whole_limit),
                self.model_limit,
            ),
        }
    }
}
