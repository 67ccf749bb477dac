//! Command line and input discovery.

use std::path::{Path, PathBuf};

use clap::Parser;

/// OCR a set of PDFs: render, detect lines, recognise them, embed each page,
/// and write each document the moment it is complete.
#[derive(Parser, Debug, Clone)]
#[command(name = "doc_ocr", version, about)]
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
    /// ONNX Runtime threads per session (per replica).
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Rendering resolution.
    #[arg(long, default_value_t = 150.0)]
    pub dpi: f32,
    /// Largest page in pixels (bigger pages render at a lower DPI).
    #[arg(long, default_value_t = 6_000_000)]
    pub max_pixels: u64,
    /// Render: replicas (one document per batch).
    #[arg(long, default_value_t = 1)]
    pub render_replicas: usize,
    /// Detect: pages per batch.
    #[arg(long, default_value_t = 4)]
    pub detect_batch: usize,
    /// Detect: replicas.
    #[arg(long, default_value_t = 1)]
    pub detect_replicas: usize,
    /// Recognise: line crops per batch (from any pages and documents).
    #[arg(long, default_value_t = 48)]
    pub recognize_batch: usize,
    /// Recognise: replicas.
    #[arg(long, default_value_t = 1)]
    pub recognize_replicas: usize,
    /// Embed: page texts per batch.
    #[arg(long, default_value_t = 16)]
    pub embed_batch: usize,
    /// Embed: replicas.
    #[arg(long, default_value_t = 1)]
    pub embed_replicas: usize,
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
pub fn discover(inputs: &[String]) -> Result<Vec<PathBuf>, String> {
    let mut files = Vec::new();
    for input in inputs {
        let p = Path::new(input);
        if p.is_dir() {
            walk(p, &mut files).map_err(|e| format!("{input}: {e}"))?;
        } else if p.is_file() {
            files.push(p.to_path_buf());
        } else {
            let matches: Vec<PathBuf> = glob::glob(input)
                .map_err(|e| format!("{input}: not a file, folder or valid glob pattern ({e})"))?
                .filter_map(Result::ok)
                .filter(|m| m.is_file())
                .collect();
            if matches.is_empty() {
                return Err(format!(
                    "{input}: no such file or folder, and no file matches it as a pattern"
                ));
            }
            files.extend(matches);
        }
    }
    let mut seen = std::collections::HashSet::new();
    files.retain(|f| seen.insert(f.clone()));
    Ok(files)
}
