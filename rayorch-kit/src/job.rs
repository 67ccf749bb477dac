//! What every job's command line has, whatever its pipeline: how a run
//! starts (`--resume`, `--force`), how much it takes (`--limit`), what it
//! shows (`--no-progress`, `--metrics`, `--otlp`) and which inputs it
//! expects to fail (`--expected`). A job flattens [`RunFlags`] into its
//! own arguments (`#[command(flatten)] pub run: RunFlags`), so the same flag
//! means the same in `doc_ocr`, `doc_layout` and `video_index`.
//!
//! ```
//! use clap::Parser;
//! #[derive(Parser)]
//! struct Args {
//!     inputs: Vec<String>,
//!     #[command(flatten)]
//!     run: rayorch_kit::job::RunFlags,
//! }
//! let a = Args::parse_from(["job", "a.pdf", "--resume", "--limit", "3"]);
//! assert!(a.run.resume && !a.run.force);
//! assert_eq!(a.run.limit, Some(3));
//! assert!(Args::try_parse_from(["job", "--resume", "--force"]).is_err());
//! ```

use std::net::SocketAddr;
use std::path::PathBuf;

use crate::resume::Start;

/// The flags of every job (see the module note).
#[derive(clap::Args, Clone, Debug, Default)]
pub struct RunFlags {
    /// Continue the interrupted run journaled in `--out` (same inputs), or
    /// committed at `--out`'s URL: finished inputs are kept, each exactly
    /// once, and the others run.
    #[arg(long, conflicts_with = "force")]
    pub resume: bool,
    /// Start over in an `--out` that holds a journaled run (its outputs and
    /// journal are replaced).
    #[arg(long)]
    pub force: bool,
    /// Process at most this many inputs: the first ones in input order
    /// (files, then input-list rows, Parquet shard rows, tar samples and
    /// listed objects), counted before `--resume` skips those already
    /// written, so a resumed run with the same limit finishes the same
    /// inputs.
    #[arg(long)]
    pub limit: Option<usize>,
    /// No progress bars (one line per input instead).
    #[arg(long)]
    pub no_progress: bool,
    /// Serve Prometheus metrics (`/metrics`) and the live page (`/`) on this
    /// address while the job runs, e.g. `127.0.0.1:9184` (see
    /// `rayorch_kit::watch` for the metrics).
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<SocketAddr>,
    /// Post the run's traces (a span per batch and per input) to this
    /// OpenTelemetry collector over OTLP/HTTP, e.g. `http://localhost:4318`
    /// (needs a build with `--features otlp`; see `rayorch_kit::otlp`).
    #[arg(long, value_name = "URL")]
    pub otlp: Option<String>,
    /// Which inputs must fail (and how many parts the others have): the
    /// `manifest.json` in this folder (`rayorch_kit::expect`); an input
    /// that ends otherwise makes the exit status 3. Default: the bundled
    /// samples' manifest when a job runs them (no inputs given).
    #[arg(long, value_name = "DIR")]
    pub expected: Option<PathBuf>,
    /// Inputs from lists (`--input-list`, `--url-field`).
    #[command(flatten)]
    pub lists: crate::store::ListFlags,
    /// Inputs from Parquet shards (`--input-parquet`, `--bytes-column`,
    /// `--url-column`, `--key-column`).
    #[command(flatten)]
    pub shards: crate::store::shards::ShardFlags,
}

impl RunFlags {
    /// Do the flags name inputs of their own (input lists, shards)?
    pub fn names_inputs(&self) -> bool {
        !(self.lists.input_lists.is_empty()
            && self.shards.input_parquet.is_empty()
            && self.shards.input_tar.is_empty())
    }

    /// How the run starts in its output folder.
    pub fn start(&self) -> Start {
        Start::from_flags(self.resume, self.force)
    }
}

/// The outputs at a URL a run writes to (`store`'s
/// `BucketOutputs`; a build without `store` never has one).
#[cfg(feature = "store")]
pub type Bucket = crate::store::outputs::BucketOutputs;

/// The outputs at a URL a run writes to (a build without `store` never
/// has one: URLs are refused before a run opens).
#[cfg(not(feature = "store"))]
#[derive(Debug)]
pub enum Bucket {}

/// A job's inputs, discovered (`rayorch_kit::store::split`): local files
/// keyed by their place in `files`, then the objects of `urls`.
pub struct JobInputs<T> {
    /// Local files.
    pub files: Vec<PathBuf>,
    /// Object-store inputs (URLs and patterns).
    pub urls: Vec<String>,
    /// Input lists and Parquet shards.
    pub streamed: crate::store::Streamed,
    /// What they are, plural ("PDF files"): the journal's source names it.
    pub what: &'static str,
    /// How a root is made from a path or URL.
    pub kind: crate::store::RootKind<T>,
}

/// A run opened in its outputs: its roots (what earlier runs finished is
/// skipped), and where it journals.
pub struct Opened<T> {
    /// The run's roots.
    pub roots: crate::store::Roots<T>,
    /// The local journal (`None`: the outputs are at a URL, whose commit
    /// records are the journal).
    pub journal: Option<PathBuf>,
    /// The inputs' digest the journal (or the commits) are tied to.
    pub source: String,
    /// Roots earlier runs committed at the URL (skipped by the source).
    pub committed_before: u64,
    /// The outputs at the URL, for the job's sink (`None`: a local folder).
    pub bucket: Option<Bucket>,
}

/// How a run in this process went ([`Opened::drive`]).
pub struct Driven {
    /// The runner's summary.
    pub summary: rayorch::RunSummary,
    /// Whether Ctrl-C stopped the run.
    pub interrupted: bool,
}

impl<T: rayorch::Data> Opened<T> {
    /// Run `runner` (the job's plan, window and observer) over the roots
    /// into `sink`, in this process: journaled in the local journal when
    /// the run has one (outputs at a URL keep their commit records, which
    /// the sink writes, as the journal); Ctrl-C once drains, twice
    /// abandons (`crate::stop`; `what` names the inputs in its message).
    pub fn drive(
        &self,
        runner: rayorch::Runner<'_>,
        what: &'static str,
        sink: impl rayorch::sink::Sink,
    ) -> Result<Driven, rayorch::BoxError> {
        let runner = match &self.journal {
            Some(j) => runner.journal(j).journal_source(self.source.clone()),
            None => runner,
        };
        let interrupts = crate::stop::on_ctrl_c(runner.cancel_handle(), what)?;
        let summary = runner.run_stream(self.roots.stream(), sink)?;
        Ok(Driven {
            summary,
            interrupted: interrupts.pressed(),
        })
    }
}

impl<T: Send + 'static> Opened<T> {
    /// The run's `summary.json`: the runner's `summary` with the
    /// [`RunReport`] (what the sink's `tally` counted, the job's
    /// `figures`) under `job`; and the exit status.
    pub fn report<X: serde::Serialize>(
        &self,
        tally: &Tally,
        names: &crate::names::RootNames,
        summary: &rayorch::RunSummary,
        interrupted: bool,
        figures: X,
    ) -> Result<(serde_json::Value, u8), rayorch::BoxError> {
        let listing_error = self.roots.listing_error();
        let report = RunReport {
            inputs: self.roots.yielded(),
            written: tally.written,
            failed: tally.failed,
            unexpected: tally.unexpected,
            interrupted,
            resumed: summary.journal_skipped + self.committed_before,
            not_started: names.remaining(),
            first_written_s: tally.written_at.first(),
            written_at_s: tally.written_at.times().to_vec(),
            exit_status: match listing_error {
                Some(_) => crate::outcome::exit::BROKE_OFF,
                None => tally.exit_status(interrupted),
            },
            listing_error,
            figures,
        };
        let mut json = serde_json::to_value(summary)?;
        json["job"] = serde_json::to_value(&report)?;
        Ok((json, report.exit_status))
    }
}

/// Open a run over `inputs` into `out` (a folder; or `url`, its
/// object-store form: see `rayorch_kit::store::output_url`), starting as
/// `flags` say: a fresh run, `--resume` (finished roots skipped), or
/// `--force`. A folder holding a journaled run over other inputs, or an
/// unfinished one without `--resume`/`--force`, is refused with what to do
/// (`rayorch_kit::resume::prepare`); nothing is written before.
pub fn open_run<T: Send + 'static>(
    out: &std::path::Path,
    url: Option<&str>,
    flags: &RunFlags,
    commit: &crate::store::CommitFlags,
    inputs: JobInputs<T>,
    names: std::sync::Arc<crate::names::RootNames>,
) -> Result<Opened<T>, rayorch::BoxError> {
    let JobInputs {
        files,
        urls,
        streamed,
        what,
        kind,
    } = inputs;
    let local: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
    let listed = streamed.describe();
    let source = match (urls.is_empty(), streamed.is_empty()) {
        (true, true) => crate::resume::source_digest(what, &local),
        (false, true) => crate::resume::source_digest(
            &format!("{what} and object-store inputs"),
            &[&local[..], &urls[..]].concat(),
        ),
        _ => crate::resume::source_digest(
            &format!("{what}, input lists or shards, and object-store inputs"),
            &[&local[..], &listed[..], &urls[..]].concat(),
        ),
    };
    let limit = flags.limit;
    match url {
        None => {
            let journal = out.join("journal.redb");
            // A listing, a list or a shard streams: its journal is never
            // known to be finished.
            let finite = (urls.is_empty() && streamed.is_empty())
                .then_some(files.len().min(limit.unwrap_or(usize::MAX)));
            let done = crate::resume::prepare(out, &journal, flags.start(), finite, &source)?;
            Ok(Opened {
                roots: crate::store::Roots::new(files, (streamed, urls), limit, names, done, kind),
                journal: Some(journal),
                source,
                committed_before: 0,
                bucket: None,
            })
        }
        #[cfg(feature = "store")]
        Some(url) => {
            let (bucket, done) = crate::store::outputs::open_for(url, flags.start(), commit, &source)?;
            Ok(Opened {
                committed_before: done.len() as u64,
                roots: crate::store::Roots::new(files, (streamed, urls), limit, names, done, kind)
                    .skipping_done(),
                journal: None,
                source,
                bucket: Some(bucket),
            })
        }
        #[cfg(not(feature = "store"))]
        Some(url) => {
            let _ = commit;
            Err(format!(
                "--out {url}: this binary was built without object-storage outputs (the `store` feature)"
            )
            .into())
        }
    }
}

/// How a run's inputs ended, as its sink counts them: the figures every
/// job reports ([`RunReport`]). An input that ends otherwise than
/// `expected` says is also counted as unexpected (the exit status).
#[derive(Debug, Default)]
pub struct Tally {
    /// Inputs written.
    pub written: usize,
    /// Inputs that failed.
    pub failed: usize,
    /// Inputs that ended otherwise than expected (no expectation: every
    /// failed one).
    pub unexpected: usize,
    /// When inputs were written, seconds since the sink was made (a
    /// bounded, even sample past a thousand: see [`crate::timeline::Ticks`]).
    pub written_at: crate::timeline::Ticks,
    expected: crate::expect::Expected,
}

impl Tally {
    /// A tally judging each input against `expected`.
    ///
    /// ```
    /// use rayorch_kit::expect::Expected;
    /// use rayorch_kit::job::Tally;
    /// let mut t = Tally::expecting(Expected::failing(["bad.pdf"]));
    /// t.written("/in/a.pdf", 3, 0.5);
    /// t.failed("/in/bad.pdf");
    /// t.failed("/in/c.pdf");
    /// assert_eq!((t.written, t.failed, t.unexpected), (1, 2, 1));
    /// assert_eq!(t.written_at.times(), [0.5]);
    /// ```
    pub fn expecting(expected: crate::expect::Expected) -> Tally {
        Tally {
            expected,
            ..Tally::default()
        }
    }

    /// Count `name` written with `parts` parts (pages, clips), `t` seconds
    /// into the run.
    pub fn written(&mut self, name: &str, parts: usize, t: f64) {
        self.written += 1;
        self.written_at.push(t);
        self.unexpected += usize::from(!self.expected.as_expected(name, Some(parts)));
    }

    /// Count `name` failed.
    pub fn failed(&mut self, name: &str) {
        self.failed += 1;
        self.unexpected += usize::from(!self.expected.as_expected(name, None));
    }

    /// The process exit status after the run (`crate::outcome::exit`): 130
    /// when interrupted, 3 when an input ended unexpectedly, else 0.
    pub fn exit_status(&self, interrupted: bool) -> u8 {
        crate::outcome::exit_status(interrupted, self.unexpected)
    }
}

/// What every job's `summary.json` says under `job`: the same fields in
/// every job, then the job's own `figures` (flattened beside them).
#[derive(Debug, serde::Serialize)]
pub struct RunReport<X: serde::Serialize> {
    /// Inputs the source yielded (files and listed objects, at most
    /// `--limit`).
    pub inputs: u64,
    /// Inputs written by this run.
    pub written: usize,
    /// Inputs that failed in this run.
    pub failed: usize,
    /// Inputs that ended otherwise than `--expected` says (every failed
    /// one without it).
    pub unexpected: usize,
    /// Whether Ctrl-C stopped the run.
    pub interrupted: bool,
    /// Inputs earlier runs finished (journal or commit records), skipped.
    pub resumed: u64,
    /// Inputs named and never ended (an interrupted or broken-off run's).
    pub not_started: Vec<String>,
    /// Why listing object-store inputs stopped early, if it did.
    pub listing_error: Option<String>,
    /// When the first input was written, seconds.
    pub first_written_s: Option<f64>,
    /// When inputs were written, seconds (a bounded sample).
    pub written_at_s: Vec<f64>,
    /// The exit status the run ends with.
    pub exit_status: u8,
    /// The job's own figures.
    #[serde(flatten)]
    pub figures: X,
}
