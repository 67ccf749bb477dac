//! Async stages against a real HTTP server on loopback that answers, fails
//! (500), hangs and drops connections: per record (`AsyncRecordStage`) every
//! healthy record is sent exactly once and each bad one at most its retry
//! budget + 1 times; per batch (`AsyncStage`) the same workload re-sends
//! healthy records, because one bad request fails the whole batch.
//!
//! The server and the client are written here over tokio's TCP (minimal
//! HTTP/1.1, one request per connection). Counts come from the server's own
//! log of requests per record. Deadlines are generous (2 s for a record, 1 s
//! for a batch) so that a loaded machine answers every healthy request in
//! time; nothing is asserted about durations.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use rayorch::prelude::*;
use rayorch::spi::StageKind;
use rayorch::{
    AsyncRecordStage, BatchDispatched, BatchFinished, BoxError, Observer, RecordResult, Runner, StageContext,
};

domain!(Doc);
domain!(Rec: Doc);

/// How the server treats a record's requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Good,
    /// 500 on the first request, then 200.
    FailsOnce,
    /// Always 500.
    Fails,
    /// No answer to the first request, then 200.
    HangsOnce,
    /// Never answers.
    Hangs,
    /// Closes the first connection without a word, then 200.
    DropsOnce,
    /// Always closes without a word.
    Drops,
}

use Kind::*;

/// One document's records: every other one healthy, so each batch of 4
/// mixes healthy and bad ones.
const LAYOUT: [Kind; 12] = [
    Good, FailsOnce, Good, Fails, Good, HangsOnce, Good, Hangs, Good, DropsOnce, Good, Drops,
];
const DOCS: u32 = 2;
const RECORDS: u32 = DOCS * LAYOUT.len() as u32;
const RETRIES: u32 = 2;

fn kind(id: u32) -> Kind {
    LAYOUT[id as usize % LAYOUT.len()]
}

/// The HTTP server, on a runtime of its own; stops when dropped.
struct Server {
    addr: SocketAddr,
    sent: Arc<Mutex<HashMap<u32, u32>>>,
    _rt: tokio::runtime::Runtime,
}

impl Server {
    fn start() -> Server {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let listener = rt.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
        let addr = listener.local_addr().unwrap();
        let sent: Arc<Mutex<HashMap<u32, u32>>> = Arc::default();
        let log = sent.clone();
        rt.spawn(async move {
            while let Ok((conn, _)) = listener.accept().await {
                tokio::spawn(answer(conn, log.clone()));
            }
        });
        Server { addr, sent, _rt: rt }
    }

    /// Requests the server received for record `id`.
    fn sent(&self, id: u32) -> u32 {
        self.sent.lock().unwrap().get(&id).copied().unwrap_or(0)
    }
}

async fn answer(mut conn: TcpStream, log: Arc<Mutex<HashMap<u32, u32>>>) {
    let Some(id) = read_request(&mut conn).await else {
        return;
    };
    let nth = {
        let mut log = log.lock().unwrap();
        let n = log.entry(id).or_default();
        *n += 1;
        *n
    };
    match (kind(id), nth) {
        (Hangs, _) | (HangsOnce, 1) => {
            // Never answer: hold the connection until the client gives up.
            let mut buf = [0u8; 64];
            while matches!(conn.read(&mut buf).await, Ok(n) if n > 0) {}
        }
        (Drops, _) | (DropsOnce, 1) => drop(conn),
        (Fails, _) | (FailsOnce, 1) => respond(&mut conn, "500 Internal Server Error", "overloaded").await,
        _ => respond(&mut conn, "200 OK", &(id * 10).to_string()).await,
    }
}

/// The record id of a `GET /rec/{id}` request, once its head is read.
async fn read_request(conn: &mut TcpStream) -> Option<u32> {
    let mut head = Vec::new();
    let mut buf = [0u8; 512];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = conn.read(&mut buf).await.ok().filter(|&n| n > 0)?;
        head.extend_from_slice(&buf[..n]);
    }
    let line = std::str::from_utf8(&head).ok()?.lines().next()?;
    line.strip_prefix("GET /rec/")?.split(' ').next()?.parse().ok()
}

async fn respond(conn: &mut TcpStream, status: &str, body: &str) {
    let reply = format!(
        "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = conn.write_all(reply.as_bytes()).await;
    let _ = conn.shutdown().await;
}

/// A reply other than 200: the client's own error type, which a failed
/// record's cause keeps (`Cause::stage_error`).
#[derive(Debug, PartialEq, Eq)]
struct HttpStatus(String);

impl std::fmt::Display for HttpStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HTTP {}", self.0)
    }
}

impl std::error::Error for HttpStatus {}

/// The client: one request per connection; anything but a 200 is an error.
async fn get(addr: SocketAddr, id: u32) -> Result<u32, BoxError> {
    let mut conn = TcpStream::connect(addr).await?;
    let request = format!("GET /rec/{id} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    conn.write_all(request.as_bytes()).await?;
    let mut reply = Vec::new();
    conn.read_to_end(&mut reply).await?;
    let reply = String::from_utf8(reply)?;
    let (head, body) = reply
        .split_once("\r\n\r\n")
        .ok_or("the connection closed before a response")?;
    match head.split(' ').nth(1) {
        Some("200") => Ok(body.parse()?),
        Some(status) => Err(Box::new(HttpStatus(status.to_string()))),
        None => Err("no status line".into()),
    }
}

/// One request per record.
struct Fetch {
    addr: SocketAddr,
}

impl AsyncRecordStage for Fetch {
    type In = u32;
    type Out = u32;
    async fn run_one(self: Arc<Self>, id: u32, _cx: StageContext) -> RecordResult<u32> {
        Ok(Outcome::Ok(get(self.addr, id).await?))
    }
}

/// The same requests, one batch at a time: the batch's records go out
/// together and any error fails the batch.
struct FetchBatch {
    addr: SocketAddr,
}

impl AsyncStage for FetchBatch {
    type In = u32;
    type Out = u32;
    async fn run(self: Arc<Self>, batch: Vec<u32>, _cx: StageContext) -> StageResult<u32> {
        let replies = futures::future::join_all(batch.iter().map(|&id| get(self.addr, id))).await;
        replies.into_iter().map(|r| r.map(Outcome::Ok)).collect()
    }
}

/// The `fetch` Call's batches: (size, retried Grains) per dispatch, and the
/// attempts that failed as a whole.
#[derive(Clone, Default)]
struct Batches {
    dispatched: Arc<Mutex<Vec<(usize, usize)>>>,
    failed: Arc<Mutex<usize>>,
}

impl Observer for Batches {
    fn batch_dispatched(&mut self, b: &BatchDispatched<'_>) {
        if b.call == "fetch" {
            self.dispatched.lock().unwrap().push((b.size, b.retries));
        }
    }
    fn batch_finished(&mut self, b: &BatchFinished<'_>) {
        if b.call == "fetch" && b.attempt_error.is_some() {
            *self.failed.lock().unwrap() += 1;
        }
    }
}

/// Documents list their records; each record goes through `fetch`; the
/// results come back per document, failures kept at their ordinal. Returns
/// each record's outcome by id.
fn run(
    fetch: Call<impl StageKind<In = u32, Out = u32>>,
    batches: &Batches,
) -> (Vec<Result<u32, Cause>>, rayorch::RunSummary) {
    let n = LAYOUT.len() as u32;
    let list = Call::map("list", move |d: u32| (d * n..(d + 1) * n).collect::<Vec<u32>>());
    let (plan, out) = Plan::build(|b| {
        let docs = b.source::<Doc, u32>();
        let rec = rayorch::expand::<Rec, _, _>(list.apply(docs));
        b.output(rayorch::reduce_keep_failed(fetch.apply(rec)))
    })
    .unwrap();
    let mut docs = Vec::new();
    let summary = Runner::new(&plan)
        .observe(batches.clone())
        .run(
            (0..DOCS).map(|d| (u64::from(d), d)),
            Callback(|o: &RootOutcome| docs.push((o.key, o.get(out)))),
        )
        .unwrap();
    docs.sort_by_key(|(k, _)| *k);
    let records = docs
        .into_iter()
        .flat_map(|(k, item)| match item {
            Item::Present(records) => records,
            other => panic!("document {k}: {other:?}"),
        })
        .collect();
    (records, summary)
}

fn counts(server: &Server) -> Vec<(u32, Kind, u32)> {
    (0..RECORDS).map(|id| (id, kind(id), server.sent(id))).collect()
}

#[test]
fn per_record_async_stages_send_each_healthy_record_once_and_each_bad_one_within_its_budget() {
    let server = Server::start();
    let addr = server.addr;
    let fetch = Call::new_async_records("fetch", move || Ok(Fetch { addr }))
        .batch_size(4)
        .concurrency(8)
        .record_timeout(Duration::from_secs(2))
        .record_retries(RETRIES)
        .record_backoff(Duration::from_millis(50));
    let batches = Batches::default();
    let (got, summary) = run(fetch, &batches);
    eprintln!("per record, (id, kind, requests): {:?}", counts(&server));
    // What the server saw, the summary counts: every request, the retries
    // among them and each wait past the record deadline.
    let requests: u32 = (0..RECORDS).map(|id| server.sent(id)).sum();
    let per_kind = |k: Kind| (0..RECORDS).filter(|&id| kind(id) == k).count() as u64;
    let f = summary.call("fetch").unwrap();
    assert_eq!(f.record_attempts, u64::from(requests), "{f:?}");
    assert_eq!(f.record_retries, u64::from(requests - RECORDS), "{f:?}");
    assert_eq!(
        f.record_deadline_misses,
        per_kind(HangsOnce) + per_kind(Hangs) * u64::from(RETRIES + 1),
        "{f:?}"
    );
    // Failed records by the kind of their last attempt, as the summary's
    // failures count them for the Domain.
    let by_kind = std::collections::BTreeMap::from([
        (FailureKind::Error, per_kind(Fails) + per_kind(Drops)),
        (FailureKind::Timeout, per_kind(Hangs)),
    ]);
    assert_eq!(f.failed_grains, by_kind, "{f:?}");
    let grain_failed: std::collections::BTreeMap<FailureKind, u64> = summary
        .failures
        .iter()
        .filter(|c| c.domain == "Rec" && c.level == rayorch::FailureLevel::GrainFailed)
        .map(|c| (c.kind, c.count))
        .collect();
    assert_eq!(grain_failed, by_kind, "{:?}", summary.failures);

    assert_eq!(got.len(), RECORDS as usize);
    for (id, outcome) in (0..RECORDS).zip(&got) {
        let sent = server.sent(id);
        let k = kind(id);
        match k {
            Good => assert_eq!(sent, 1, "healthy record {id} is sent exactly once"),
            FailsOnce | HangsOnce | DropsOnce => assert_eq!(sent, 2, "record {id} ({k:?})"),
            Fails | Hangs | Drops => assert_eq!(sent, RETRIES + 1, "record {id} ({k:?}): its budget"),
        }
        match (k, outcome) {
            (Good | FailsOnce | HangsOnce | DropsOnce, Ok(v)) => assert_eq!(*v, id * 10),
            (Fails | Hangs | Drops, Err(cause)) => {
                let m = cause.message();
                assert!(m.starts_with("record failed after 3 attempt(s)"), "{m}");
                let what = match k {
                    Fails => "error: HTTP 500",
                    Hangs => "timed out after 2s",
                    _ => "error: the connection closed before a response",
                };
                assert_eq!(m.matches(what).count(), 3, "record {id}: {m}");
                // The same attempts, typed: (kind, message) each.
                let want = match k {
                    Hangs => FailureKind::Timeout,
                    _ => FailureKind::Error,
                };
                let attempts = cause.attempts();
                assert_eq!(attempts.len(), 3, "record {id}: {attempts:?}");
                assert!(
                    attempts
                        .iter()
                        .all(|a| a.kind == want && a.message.contains(what)),
                    "record {id}: {attempts:?}"
                );
                assert_eq!(cause.kind(), Some(want));
                // The stage's own error, from the last attempt: downcast.
                let status = cause.stage_error().and_then(|e| e.downcast_ref::<HttpStatus>());
                match k {
                    Fails => assert_eq!(status, Some(&HttpStatus("500".into())), "record {id}"),
                    Hangs => assert!(cause.stage_error().is_none(), "a timeout has no error"),
                    _ => assert!(cause.stage_error().is_some() && status.is_none(), "record {id}"),
                }
            }
            other => panic!("record {id}: {other:?}"),
        }
    }
    // Batches of 4 mixing healthy and bad records, each sent once and each
    // reporting one outcome per record.
    let dispatched = batches.dispatched.lock().unwrap().clone();
    assert_eq!(dispatched, vec![(4, 0); RECORDS as usize / 4]);
    assert_eq!(*batches.failed.lock().unwrap(), 0);
}

#[test]
fn batch_level_async_stages_resend_healthy_records_when_a_mate_fails() {
    let server = Server::start();
    let addr = server.addr;
    // The default recovery, `Isolate`: retry the batch, then bisect it.
    let fetch = Call::new_async("fetch", move || Ok(FetchBatch { addr }))
        .batch_size(4)
        .concurrency(8)
        .timeout(Duration::from_secs(1));
    let batches = Batches::default();
    let (got, summary) = run(fetch, &batches);
    assert_eq!(
        summary.call("fetch").unwrap().record_attempts,
        0,
        "a batch-level stage counts no record attempts"
    );
    let counts = counts(&server);
    eprintln!("per batch, (id, kind, requests): {counts:?}");

    for (id, outcome) in (0..RECORDS).zip(&got) {
        match kind(id) {
            Fails | Hangs | Drops => assert!(outcome.is_err(), "record {id}: {outcome:?}"),
            _ => assert_eq!(outcome.as_ref().ok(), Some(&(id * 10)), "record {id}"),
        }
        // Bisected down to itself, a failing record keeps its last attempt
        // and, when the stage returned `Err`, that error.
        if kind(id) == Fails
            && let Err(cause) = outcome
        {
            assert_eq!(cause.attempts().len(), 1, "{:?}", cause.attempts());
            let status = cause.stage_error().and_then(|e| e.downcast_ref::<HttpStatus>());
            assert_eq!(status, Some(&HttpStatus("500".into())), "record {id}: {cause}");
        }
    }
    // The cost: healthy records went out again with their failing mates.
    let resent = counts.iter().filter(|(_, k, n)| *k == Good && *n > 1).count();
    assert!(resent > 0, "{counts:?}");
    assert!(*batches.failed.lock().unwrap() > 0);
}
