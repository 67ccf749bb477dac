//! The job kit: what a pipeline binary needs around the engine, for any
//! pipeline.
//!
//! | module | what |
//! | --- | --- |
//! | [`progress`] | progress bars per Domain, moved by the run's observer |
//! | [`timeline`] | the stage-window timeline (the paper's Figure 7) as an SVG, from the observer's batch spans |
//! | `parquet` | Parquet outputs over a row schema: one file, or segments that follow the journal (feature `parquet`) |
//! | [`names`] | the names of a run's roots while they are live (named by the source, taken by the sink) |
//! | [`resume`] | start, `--resume` or `--force` a journaled run into an output folder |
//! | [`stop`] | Ctrl-C: drain, then abandon, then exit |
//! | [`malloc`] | glibc keeps freed memory for reuse (no page faults per large block): the first call in a job's `main` |
//! | [`limits`] | a timeout on every Call that parses user bytes or runs a model, as flags a job has only for the kinds of Call it runs (`--parse-timeout-s`, `--document-timeout-s`, `--model-timeout-s`) |
//! | [`check`] | after the run: every root once, the same in each output |
//! | [`job`] | the flags of every job: `--resume`, `--force`, `--limit`, `--no-progress`, `--metrics`, `--otlp`, `--expected` |
//! | [`expect`] | which inputs a run expects to fail (`--expected DIR`), and a caller's hook on each ended root (a test's scoring) |
//! | [`outcome`] | one meaning in every job of a failure line's `outcome` and of the exit status |
//! | `watch` | Prometheus metrics, a live page and the scale signal on `--metrics ADDR` (feature `watch`) |
//! | [`otlp`] | the run's batch and root spans posted to an OpenTelemetry collector over OTLP/HTTP (the exporter: feature `otlp`) |
//! | [`role`] | local, owner, worker or broker from one command line (the distributed roles: feature `dist`) |
//! | [`store`] | inputs from object storage: `s3://`, `gs://`, `az://`, `http(s)://` URLs and patterns, listed as a stream and fetched by a Call (the clients: feature `store`); input lists (`store::input_list`), Parquet shards (`store::shards`) and WebDataset tars (`store::tars`), local or in a store, read as the run goes with each row's metadata |
//!
//! Failure lines are the runtime's ([`rayorch::sink::FailuresSink`],
//! [`rayorch::sink::FailureLine`]); the document jobs (`rayorch-doc`) and
//! the video job (`rayorch-video`) are built on this kit.

pub mod check;
pub mod expect;
pub mod job;
pub mod limits;
pub mod malloc;
pub mod names;
pub mod otlp;
pub mod outcome;
#[cfg(feature = "parquet")]
pub mod parquet;
pub mod progress;
pub mod resume;
pub mod role;
pub mod stop;
pub mod store;
pub mod timeline;
#[cfg(feature = "watch")]
pub mod watch;
