//! The job over NATS JetStream: one owner process (admission, lineage,
//! outputs, journal) and any number of worker processes running the models,
//! all the same binary with the same flags (see the README, "Several
//! machines").
//!
//! Every value a Call takes or returns travels in `rayorch_models::wire`'s
//! byte formats (pixels raw, floats as bits), so a document's output is the
//! same as in one process: the workers run the same stages on the same
//! bytes. Page handles travel as their file's path and page number; the
//! worker opens the file itself, so workers must see the inputs at the same
//! paths (the owner passes absolute ones).

use std::any::Any;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rayorch::Plan;
use rayorch::spi::{JournalOptions, Value};
use rayorch_dist::{Codecs, DistConfig, Owner, OwnerSummary};
use rayorch_models::output::Document;
use rayorch_models::wire::Wire;
use rayorch_models::{LineText, PageImage, PdfFile, PdfPage, PdfPages, PdfSource, TextLine};

use super::cli::{Args, Knobs};

/// The codecs of every value that crosses between the owner and the workers.
pub fn codecs() -> Codecs {
    fn add<T: Wire + Any + Send + Sync>(c: Codecs) -> Codecs {
        c.custom::<T>(T::TAG, T::to_wire, T::from_wire)
    }
    let c = add::<PdfFile>(Codecs::new());
    let c = add::<PdfPages>(c);
    let c = add::<PdfPage>(c);
    let c = add::<PageImage>(c);
    let c = add::<Vec<TextLine>>(c);
    let c = add::<TextLine>(c);
    let c = add::<LineText>(c);
    let c = add::<Vec<LineText>>(c);
    let c = add::<String>(c);
    let c = add::<Vec<String>>(c);
    let c = add::<Vec<f32>>(c);
    let c = add::<Vec<Vec<f32>>>(c);
    add::<Document>(c)
}

fn config(args: &Args, url: &str) -> DistConfig {
    let mut cfg = DistConfig::new(url, &args.job);
    cfg.window = args.window;
    cfg.window_children = args.window_pages;
    cfg.backpressure = Some(args.backpressure);
    cfg
}

/// `--calls` when none is given: every Call the owner does not run, with
/// this machine's replicas.
pub fn default_calls(plan: &Plan, k: &Knobs, owner_calls: &str) -> String {
    let owner: Vec<&str> = owner_calls
        .split(',')
        .map(|c| c.split(':').next().unwrap_or("").trim())
        .collect();
    let mut names: Vec<&str> = plan.calls().iter().map(|c| &*c.name).collect();
    names.dedup();
    names
        .into_iter()
        .filter(|c| !owner.contains(c))
        .map(|c| {
            let n = match c {
                "render" => k.render_replicas,
                "detect" => k.detect_replicas,
                "recognize" => k.recognize_replicas,
                "embed" => k.embed_replicas,
                _ => 1,
            };
            format!("{c}:{n}")
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// Serve the Calls of this job until the owner ends the run.
pub fn run_worker(args: &Args, url: &str) -> Result<u8, Box<dyn std::error::Error>> {
    let assets = rayorch_models::assets::ensure()?;
    let knobs = args.knobs(super::cli::machine_cores());
    let (plan, _) = super::build_plan(&super::calls(args, &knobs, &assets))?;
    let calls = if args.calls.trim().is_empty() {
        default_calls(&plan, &knobs, &args.owner_calls)
    } else {
        args.calls.clone()
    };
    eprintln!("doc_ocr worker: job `{}` at {url}, serving {calls}", args.job);
    let rt = tokio::runtime::Runtime::new()?;
    let s = rt.block_on(rayorch_dist::worker(&plan, codecs(), config(args, url), &calls))?;
    println!(
        "doc_ocr worker: {} batches, {} grains; the owner ended the run",
        s.batches, s.grains
    );
    Ok(0)
}

/// The documents as the owner sends them: named as given (so outputs match
/// a local run), read from absolute paths (so workers elsewhere find them).
pub fn sources(files: &[PathBuf]) -> Vec<(u64, Value)> {
    files
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let mut f = PdfFile::from_path(p);
            if let Ok(abs) = std::path::absolute(p) {
                f.source = PdfSource::Path(abs);
            }
            (i as u64, Arc::new(f) as Value)
        })
        .collect()
}

/// Run the documents through the workers into `sink`, journaled.
pub fn run_owner(
    args: &Args,
    url: &str,
    plan: &Plan,
    files: &[PathBuf],
    sink: impl rayorch::sink::Sink,
    journal: JournalOptions,
) -> Result<OwnerSummary, Box<dyn std::error::Error>> {
    let mut owner = Owner::new(plan, codecs(), config(args, url))
        .journal(journal)
        .local_calls(&args.owner_calls);
    let source = futures::stream::iter(sources(files));
    let rt = tokio::runtime::Runtime::new()?;
    Ok(rt.block_on(owner.run_into(source, sink))?)
}

/// `--serve-nats PORT`: run the pinned nats-server with JetStream, its store
/// under `dir`, until it exits (Ctrl-C stops it).
pub fn serve_nats(port: u16, dir: &Path) -> Result<u8, Box<dyn std::error::Error>> {
    let bin = rayorch_dist::server::binary()?;
    std::fs::create_dir_all(dir)?;
    eprintln!(
        "nats-server {} with JetStream on port {port} (all interfaces), store {}",
        rayorch_dist::server::VERSION,
        dir.display()
    );
    let status = std::process::Command::new(bin)
        .args(["-js", "-a", "0.0.0.0", "-p", &port.to_string(), "-sd"])
        .arg(dir)
        .status()?;
    Ok(if status.success() { 0 } else { 1 })
}
