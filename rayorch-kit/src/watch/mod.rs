//! Watch a run: Prometheus metrics and a live page, for any pipeline.
//!
//! A [`Watch`] is fed by its observer ([`Watch::observer`], passed to
//! `Runner::observe` or to a distributed owner) and read by an HTTP
//! endpoint ([`Watch::serve`], the jobs' `--metrics ADDR`):
//!
//! | path | what |
//! | --- | --- |
//! | `/metrics` | Prometheus text exposition (every family: [`metrics`]) |
//! | `/` | the live page: one HTML file, inline script and styles, no CDN, no build step |
//! | `/api/state` | the page's data as JSON (also for scripts) |
//!
//! Invariants:
//! - The observer runs on the run loop and only records: a snapshot
//!   every [`Watch::every`] (250 ms by default) becomes metric values and
//!   the page's state under one short lock; batch and root events append to
//!   bounded buffers. Nothing it does waits on a reader.
//! - Counts come from the run's own [`rayorch::Progress`] snapshots, never
//!   recounted here: the last snapshot is taken when the run ends, so after
//!   a run `/metrics` and `/api/state` hold exactly the counts of the
//!   `RunSummary` it returned.
//! - Memory is bounded whatever the run's length: the page keeps the last
//!   [`BATCHES_KEPT`] batches, [`FAILURES_KEPT`] failures and
//!   [`SAMPLES_KEPT`] samples of its time series (halving the resolution
//!   when full), plus one entry per live root.
//! - The server is plain HTTP/1.1 on its own thread (one request per
//!   connection, a read timeout, no keep-alive); a slow or hostile client
//!   holds only its own connection for at most that timeout. It binds
//!   where it is told: loopback unless the job names another address.

pub mod metrics;
mod page;
mod server;

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rayorch::{BatchFinished, Item, Observer, Progress, RootOutcome};
use serde_json::{Value as Json, json};

pub use server::WatchServer;

/// Batches the timeline keeps (the newest).
pub const BATCHES_KEPT: usize = 4096;
/// Failures the page lists (the newest; the counts by kind are complete).
pub const FAILURES_KEPT: usize = 200;
/// Samples per time series before the resolution halves.
pub const SAMPLES_KEPT: usize = 600;
/// Live roots the page lists as the slowest.
const SLOWEST_SHOWN: usize = 10;

/// The live state of one run, shared by its observer and its endpoint.
///
/// Watching one's own pipeline: serve a watch, give its observer to the
/// Runner, keep the server handle alive while the run goes on (a kit
/// without Parquet is enough: `rayorch-kit = { default-features = false,
/// features = ["watch"] }`).
///
/// ```
/// use std::net::{Ipv4Addr, SocketAddr};
/// use rayorch::prelude::*;
/// use rayorch_kit::watch::Watch;
///
/// #[derive(Domain)]
/// struct Doc;
///
/// struct Lengths {
///     len: FnCall<String, usize>,
/// }
///
/// #[pipeline]
/// impl Lengths {
///     fn forward(&self, text: Port<Doc, String>) -> Port<Doc, usize> {
///         self.len(text)
///     }
/// }
///
/// let watch = Watch::new();
/// // Port 0: any free port; `server.url()` says where to look.
/// let server = watch.serve(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))?;
/// println!("live page {} · Prometheus {}metrics", server.url(), server.url());
/// let pipe = Lengths { len: Call::map("length", |s: String| s.len()) };
/// let (plan, _) = pipe.build_plan()?;
/// let roots = (0..3u64).map(|k| (k, format!("document {k}")));
/// let summary = Runner::new(&plan)
///     .observe(watch.observer())
///     .run(roots, Callback(|_: &RootOutcome| {}))?;
/// // After the run the page and `/metrics` hold the summary's counts.
/// assert!(watch.finished());
/// assert!(watch.metrics_text().contains("rayorch_roots_total{outcome=\"present\"} 3"));
/// assert_eq!(summary.present, 3);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Watch {
    shared: Arc<Shared>,
}

struct Shared {
    metrics: metrics::Metrics,
    state: Mutex<State>,
    every: Duration,
}

/// What the page shows, kept between snapshots.
#[derive(Default)]
struct State {
    /// The latest snapshot, as JSON (summary, calls, admission, backend).
    snapshot: Json,
    finished: bool,
    /// The Calls' names, in plan order.
    names: Vec<String>,
    batches: VecDeque<Json>,
    failures: VecDeque<Json>,
    live: HashMap<u64, Duration>,
    samples: VecDeque<Json>,
    /// Keep one snapshot in `stride` as a sample.
    stride: u64,
    seen: u64,
}

impl Default for Watch {
    fn default() -> Watch {
        Watch::new()
    }
}

impl Watch {
    /// A watch taking a snapshot every 250 ms.
    pub fn new() -> Watch {
        Watch::with_interval(Duration::from_millis(250))
    }

    /// A watch taking a snapshot every `every`.
    pub fn with_interval(every: Duration) -> Watch {
        Watch {
            shared: Arc::new(Shared {
                metrics: metrics::Metrics::new(),
                state: Mutex::new(State {
                    stride: 1,
                    ..State::default()
                }),
                every,
            }),
        }
    }

    /// The snapshot interval.
    pub fn every(&self) -> Duration {
        self.shared.every
    }

    /// The observer that feeds this watch (pass it to `Runner::observe`, or
    /// pair it with another observer as a tuple).
    pub fn observer(&self) -> WatchObserver {
        WatchObserver(self.clone())
    }

    /// Serve `/metrics`, the live page and `/api/state` on `addr` (port 0:
    /// any free port; [`WatchServer::addr`] says which). The server stops
    /// when the returned handle is dropped.
    pub fn serve(&self, addr: SocketAddr) -> std::io::Result<WatchServer> {
        WatchServer::start(self.clone(), addr).map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!("cannot serve the watch on {addr}: {e}; give it a free address (port 0 picks one)"),
            )
        })
    }

    /// The Prometheus text exposition of everything recorded so far.
    pub fn metrics_text(&self) -> String {
        self.shared.metrics.render()
    }

    /// The page's data: the latest snapshot with the timeline, the recent
    /// failures, the slowest live roots and the time series.
    pub fn state_json(&self) -> Json {
        let st = self.state();
        let mut slowest: Vec<(&u64, &Duration)> = st.live.iter().collect();
        slowest.sort_by(|a, b| a.1.cmp(b.1).then(a.0.cmp(b.0)));
        let slowest: Vec<Json> = slowest
            .iter()
            .take(SLOWEST_SHOWN)
            .map(|(k, at)| json!({"key": k, "admitted_s": at.as_secs_f64()}))
            .collect();
        json!({
            "finished": st.finished,
            "snapshot": st.snapshot,
            "calls": st.names,
            "batches": st.batches,
            "failures": st.failures,
            "slowest": slowest,
            "live_roots": st.live.len(),
            "samples": st.samples,
        })
    }

    /// Has the run's last snapshot come in?
    pub fn finished(&self) -> bool {
        self.state().finished
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.shared.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A job's `--metrics ADDR`: with an address, a watch served there (its
/// URL printed through `progress`) and its observer; without one, nothing
/// (and no cost: the observer is `None`). Keep the server handle alive for
/// the run.
pub fn serve(
    addr: Option<SocketAddr>,
    progress: &crate::progress::Progress,
) -> std::io::Result<(Option<WatchObserver>, Option<WatchServer>)> {
    let Some(addr) = addr else {
        return Ok((None, None));
    };
    let watch = Watch::new();
    let server = watch.serve(addr)?;
    progress.println(format!(
        "live page {} · Prometheus metrics {}metrics",
        server.url(),
        server.url()
    ));
    if !addr.ip().is_loopback() {
        progress.println(format!(
            "warning: the metrics endpoint listens on {addr}, not loopback: anyone who can reach it sees the run's counts and failure causes"
        ));
    }
    Ok((Some(watch.observer()), Some(server)))
}

/// Feeds a [`Watch`] from the run's events.
pub struct WatchObserver(Watch);

impl Observer for WatchObserver {
    fn progress_every(&self) -> Option<Duration> {
        Some(self.0.shared.every)
    }

    fn batch_finished(&mut self, b: &BatchFinished<'_>) {
        self.0.shared.metrics.batch(b);
        let mut st = self.0.state();
        if st.batches.len() == BATCHES_KEPT {
            st.batches.pop_front();
        }
        st.batches.push_back(json!({
            "call": b.call_index,
            "replica": b.replica,
            "start_s": b.started.as_secs_f64(),
            "duration_s": b.duration.as_secs_f64(),
            "size": b.size,
            "failed": b.attempt_error.is_some() || b.record_failures + b.group_failures > 0,
        }));
    }

    fn root_admitted(&mut self, key: u64, at: Duration) {
        self.0.state().live.insert(key, at);
    }

    fn root_finished(&mut self, o: &RootOutcome, at: Duration) {
        let mut st = self.0.state();
        st.live.remove(&o.key);
        let Some(cause) = o.items.iter().find_map(Item::cause) else {
            return;
        };
        if st.failures.len() == FAILURES_KEPT {
            st.failures.pop_front();
        }
        let origin = cause.origin();
        st.failures.push_back(json!({
            "key": o.key,
            "at_s": at.as_secs_f64(),
            "outcome": format!("{:?}", o.kind()).to_lowercase(),
            "kind": cause.kind().map_or("unknown", |k| k.as_str()),
            "cause": cause.message(),
            "call": origin.map(|x| x.call.to_string()),
            "entity": origin.map(|x| x.entity.clone()),
        }));
    }

    fn progress(&mut self, p: &Progress<'_>) {
        let backlog = self.0.shared.metrics.progress(p);
        let mut st = self.0.state();
        if st.names.is_empty() {
            st.names = p.summary.calls.iter().map(|c| c.name.clone()).collect();
        }
        let calls: Vec<Json> = p
            .calls
            .iter()
            .zip(&backlog)
            .map(|(c, b)| {
                let mut v = serde_json::to_value(c).unwrap_or(Json::Null);
                v["backlog_s"] = b.map_or(Json::Null, |x| json!(finite(x)));
                v
            })
            .collect();
        st.snapshot = json!({
            "summary": p.summary,
            "calls": calls,
            "admission": {
                "roots": p.admission.roots,
                "window": p.admission.window,
                "children": p.admission.children,
                "window_children": (p.admission.window_children != usize::MAX).then_some(p.admission.window_children),
                "journal_lag": p.admission.journal_lag,
            },
            "backend": p.backend,
        });
        st.finished = p.finished;
        st.seen += 1;
        if st.seen.is_multiple_of(st.stride) || p.finished {
            let sample = json!({
                "t": p.summary.wall_s,
                "queued": p.calls.iter().map(|c| c.ready + c.recovery).collect::<Vec<_>>(),
                "busy": p.calls.iter().map(|c| c.in_flight_batches).collect::<Vec<_>>(),
                "replicas": p.calls.iter().map(|c| c.replicas).collect::<Vec<_>>(),
            });
            st.samples.push_back(sample);
            if st.samples.len() > SAMPLES_KEPT {
                // Halve the resolution: keep every other sample, sample half as often.
                let kept: VecDeque<Json> = st.samples.iter().step_by(2).cloned().collect();
                st.samples = kept;
                st.stride *= 2;
            }
        }
    }
}

/// JSON has no infinity: a backlog nobody can work on is written as a very
/// large number.
fn finite(x: f64) -> f64 {
    if x.is_finite() { x } else { f64::MAX }
}

#[cfg(test)]
mod tests;
