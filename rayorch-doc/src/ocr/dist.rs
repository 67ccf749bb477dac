//! The job over NATS JetStream: one owner process (admission, lineage,
//! outputs, journal) and any number of worker processes running the models,
//! all the same binary with the same flags (see the README, "Several
//! machines").
//!
//! Every value a Call takes or returns travels in `rayorch_models::wire`'s
//! byte formats (pixels raw, floats as bits; the [`Document`]'s is in this
//! crate), so a document's output is the same as in one process: the
//! workers run the same stages on the same bytes. Page handles travel as their file's path and page number; the
//! worker opens the file itself, so workers must see the inputs at the same
//! paths (the owner passes absolute ones). A document read from a URL
//! travels as its URL instead (never its bytes): each worker reads the
//! object itself (`rayorch_models::pdf::read_urls_with`, set in
//! [`codecs`]), so a corpus in object storage needs no shared file system;
//! with `--payload-store` the large payloads (page images) go to an
//! object-store prefix too, and the broker carries only their keys. A worker opens only files under
//! the input roots the owner announces (its inputs' folders, or
//! `--input-root`), narrowed by the worker's own `--input-root`; a page of
//! any other file fails as a record naming it (`rayorch_models::wire`).
//!
//! Compiled with the crate's `dist` feature only: a default build of the
//! job carries no NATS client and refuses `--nats`/`--serve-nats` with the
//! command that rebuilds it (`super::run`).

use futures::StreamExt;
use futures::stream::BoxStream;
use std::any::Any;

use rayorch::spi::JournalOptions;
use rayorch_dist::{Codecs, DistConfig, OwnerStats};
use rayorch_kit::expect::Inspect;
use rayorch_kit::job::Driven;
use rayorch_kit::role::{self, Role};
use rayorch_kit::stop;
use rayorch_models::wire::{InputRoots, Wire};
use rayorch_models::{
    LineText, PageImage, PageText, PdfFile, PdfPage, PdfPages, PdfSource, ReadPage, TextLine,
};

use super::cli::Args;
use super::run::{Distributed, Ran, run_here, run_local};
use super::{OcrCall, OcrJob, machine_cores};
use crate::document::Document;

type Error = rayorch::BoxError;

/// The job's build command with what `--nats --payload-store` needs.
const REBUILD_DIST_STORE: &str = "cargo run --release --features dist,store --example doc_ocr --";

/// The Calls a distributed run's owner runs itself by default: the cheap
/// steps next to the data (so it never re-parses a PDF a worker opened).
const OWNER_CALLS: [OcrCall; 7] = [
    OcrCall::Fetch,
    OcrCall::Open,
    OcrCall::Name,
    OcrCall::Layer,
    OcrCall::PageText,
    OcrCall::Text,
    OcrCall::Assemble,
];

/// [`OWNER_CALLS`] in `--owner-calls` syntax, one slot each.
fn owner_calls() -> String {
    OWNER_CALLS.map(|c| format!("{}:1", c.name())).join(",")
}

/// Play `role`: the whole job in this process, the broker, a worker, or
/// the owner (which writes the outputs as a local run does).
pub(super) fn run_role(args: &Args, role: Role, inspect: Option<Inspect<Document>>) -> Result<u8, Error> {
    // TLS and credentials are checked before anything is opened or written.
    if matches!(role, Role::Owner { .. } | Role::Worker { .. }) {
        args.dist.security()?;
    }
    match role {
        Role::Broker { listen } => {
            // The worker credentials it writes may pull every Call's queue:
            // count them in the job's plan.
            let cfg = args.config(machine_cores());
            let (plan, _) = OcrJob::new(&cfg, &rayorch_models::assets::ensure()?).plan()?;
            let job = args.dist.job_name("doc_ocr");
            let out = args.out.join("nats");
            role::serve_nats(&args.dist.broker(listen, &out, &job, plan.calls().len(), super::run::REBUILD))
        }
        Role::Worker { url, calls } => {
            let cfg = args.config(machine_cores());
            let (plan, _) = OcrJob::new(&cfg, &rayorch_models::assets::ensure()?).plan()?;
            let default_owner = owner_calls();
            let owner = args.dist.owner_calls(&default_owner);
            let calls = calls.unwrap_or_else(|| {
                role::default_worker_calls(&plan, owner, |c| OcrCall::named(c).map_or(1, |c| cfg.knobs.replicas_of(c)))
            });
            eprintln!(
                "doc_ocr worker: job `{}` at {url}, serving {calls}",
                args.dist.job_name("doc_ocr")
            );
            let s = role::run_worker(&plan, codecs(), config(args, &url)?, &calls)?;
            println!(
                "doc_ocr worker: {} batches, {} grains, {} payload bytes stored and {} fetched; the owner ended the run",
                s.batches, s.grains, s.stored, s.fetched
            );
            Ok(0)
        }
        // A document from a shard's bytes would cross the broker whole
        // with every page of it: no worker can read it anywhere else.
        Role::Owner { .. } if !args.run.shards.input_tar.is_empty() || args.run.shards.bytes_column.is_some() => Err(
            "documents in a shard's bytes (--input-tar, --input-parquet with --bytes-column) run in one process for now: a distributed run sends each document as its path or URL, which every worker reads itself; give a Parquet column of URLs (--url-column) or run without --nats"
                .into(),
        ),
        // Workers read only under the roots the owner announces, and a
        // list's rows may name anything: the user says where.
        Role::Owner { .. } if args.run.names_inputs() && args.dist.input_roots.is_empty() => Err(
            "--input-list and --input-parquet in a distributed run need --input-root: the folders or URL prefixes their rows name (workers read documents only under the roots the owner announces)"
                .into(),
        ),
        Role::Owner { url } => run_here(args, inspect, |here, outputs| {
            let mut owner = role::owner(
                here.plan,
                codecs(),
                config(args, &url)?,
                JournalOptions::new(
                    here.opened.journal.clone().ok_or("a distributed run keeps a local journal: give --out a folder")?,
                    here.opened.source.clone(),
                ),
                args.dist.owner_calls(&owner_calls()),
            )
            .observe(here.observer);
            let interrupts = stop::on_ctrl_c(owner.cancel_handle(), "documents")?;
            here.progress.println(format!(
                "doc_ocr owner: {}, job `{}` at {url}, window {}, outputs in {}",
                here.opened.roots.describe("documents"),
                args.dist.job_name("doc_ocr"),
                args.window,
                args.out.display()
            ));
            let summary = role::run_owner(&mut owner, sources(here.opened.roots.stream()), outputs)?;
            let stats = owner.stats();
            let workers = workers_table(&summary, &stats);
            Ok(Ran {
                driven: Driven {
                    summary,
                    interrupted: interrupts.pressed(),
                },
                distributed: Some(Distributed {
                    job: args.dist.job_name("doc_ocr"),
                    owner_bytes: owner_bytes(&stats),
                    workers,
                }),
            })
        }),
        Role::Local => run_local(args, inspect),
    }
}

/// What crossed the broker for the owner, and what it had to decode.
fn owner_bytes(stats: &OwnerStats) -> serde_json::Value {
    let [inline, stored, fetched, messages] = stats.bytes.snapshot();
    serde_json::json!({
        "decoded": stats.bytes.decoded.load(std::sync::atomic::Ordering::Relaxed),
        "inline_sent": inline,
        "stored": stored,
        "fetched": fetched,
        "messages": messages,
    })
}

/// A distributed run: which worker ran how many Grains of each Call, and
/// the payload bytes the owner decoded.
fn workers_table(summary: &rayorch::RunSummary, stats: &OwnerStats) -> String {
    use std::fmt::Write;
    let mut t = format!("{:<24} {:<10} {:>8}\n", "worker", "call", "grains");
    for w in &summary.workers {
        let _ = writeln!(t, "{:<24} {:<10} {:>8}", w.worker, w.call, w.grains);
    }
    let _ = writeln!(
        t,
        "the owner decoded {} payload bytes",
        stats.bytes.decoded.load(std::sync::atomic::Ordering::Relaxed)
    );
    t
}

/// The codecs of every value that crosses between the owner and the workers.
pub fn codecs() -> Codecs {
    fn add<T: Wire + Any + Send + Sync>(c: Codecs, roots: &InputRoots) -> Codecs {
        let roots = roots.clone();
        c.custom::<T>(T::TAG, T::to_wire, move |b| T::from_wire_within(b, &roots))
    }
    // A worker decodes documents only under the input roots it is given
    // (every decoder of these codecs shares them).
    // A page of a document the owner read from a URL arrives as that URL:
    // a worker reads the object itself (credentials from its environment).
    #[cfg(feature = "store")]
    {
        let stores = rayorch_kit::store::Stores::new(rayorch_kit::store::StoreOptions::default());
        rayorch_models::pdf::read_urls_with(move |url| {
            rayorch_kit::store::read_blocking(&stores, url).map(|b| std::sync::Arc::from(&b[..]))
        });
    }
    let roots = InputRoots::default();
    let set = roots.clone();
    let mut c = add::<PdfFile>(Codecs::new().input_roots(move |r| set.set(r)), &roots);
    c = add::<PdfPages>(c, &roots);
    c = add::<PdfPage>(c, &roots);
    c = add::<PageImage>(c, &roots);
    c = add::<ReadPage>(c, &roots);
    c = add::<PageText>(c, &roots);
    c = add::<Vec<PageText>>(c, &roots);
    c = add::<Vec<TextLine>>(c, &roots);
    c = add::<TextLine>(c, &roots);
    c = add::<LineText>(c, &roots);
    c = add::<Vec<LineText>>(c, &roots);
    c = add::<String>(c, &roots);
    c = add::<Vec<String>>(c, &roots);
    c = add::<Vec<f32>>(c, &roots);
    c = add::<Vec<Vec<f32>>>(c, &roots);
    c = add::<Document>(c, &roots);
    c
}

/// The broker settings of a run with these flags.
fn config(args: &Args, url: &str) -> Result<DistConfig, Error> {
    let mut cfg = DistConfig::new(url, args.dist.job_name("doc_ocr"));
    cfg.security = args.dist.security()?;
    // An owner announces the folders of its inputs (or its --input-root);
    // a worker narrows them with its own.
    cfg.input_roots = args.dist.input_roots(&args.inputs)?;
    cfg.replicas = args.dist.nats_replicas.max(1);
    cfg.window = args.window;
    cfg.window_children = args.window_pages;
    cfg.backpressure = Some(args.backpressure);
    cfg.payloads = args.dist.payloads(&cfg.job, REBUILD_DIST_STORE)?;
    Ok(cfg)
}

/// The documents as the owner sends them: named as given (so outputs match
/// a local run), a file by its absolute path (so workers elsewhere find
/// it), an object by its URL (each worker reads it itself).
fn sources(roots: BoxStream<'static, (u64, PdfFile)>) -> BoxStream<'static, (u64, PdfFile)> {
    roots
        .map(|(k, mut f)| {
            if let PdfSource::Path(p) = &f.source
                && let Ok(abs) = std::path::absolute(p)
            {
                f.source = PdfSource::Path(abs);
            }
            (k, f)
        })
        .boxed()
}
