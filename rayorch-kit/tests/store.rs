//! Object-storage inputs against a real S3 server (SeaweedFS from its
//! pinned wheel, started per test): listing by prefix and by pattern, a
//! missing object, the fetch Call in a run, a fault proxy (503 SlowDown,
//! stalls, cuts mid-body), a server restarted mid-run, and a journaled run
//! resumed over the same listing, and a server whose disk has little room
//! (a tmpfs this test mounts: root). `--features store` (scripts/test).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use rayorch::sink::Callback;
use rayorch::{Call, FailureKind, Item, Plan, RootOutcome, RunSummary, Runner, domain};
use rayorch_kit::store::testing::{FaultProxy, Faults, S3Server};
use rayorch_kit::store::{Fetch, Fetched, Object, StoreError, StoreOptions, Stores, list, root_key};

domain!(Doc);

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn is_pdf(name: &str) -> bool {
    name.to_ascii_lowercase().ends_with(".pdf")
}

/// A body that says which object it is, `size` bytes long.
fn body(key: &str, size: usize) -> Vec<u8> {
    let mut b = format!("%PDF-1.4 {key} ").into_bytes();
    b.resize(size.max(b.len()), b'.');
    b
}

/// Upload `keys` into `bucket` (each body from [`body`]).
fn upload(server: &S3Server, bucket: &str, keys: &[&str], size: usize) {
    let objects: Vec<(String, Vec<u8>)> = keys
        .iter()
        .map(|k| (format!("s3://{bucket}/{k}"), body(k, size)))
        .collect();
    let refs: Vec<(&str, &[u8])> = objects.iter().map(|(u, b)| (u.as_str(), &b[..])).collect();
    server.put(&refs).unwrap();
}

fn listed(opts: StoreOptions, inputs: &[&str]) -> Result<Vec<String>, StoreError> {
    let stores = Stores::new(opts);
    let inputs = inputs.iter().map(|s| s.to_string()).collect();
    rt().block_on(async {
        let items: Vec<_> = list(stores, inputs, is_pdf).collect().await;
        items.into_iter().map(|r| r.map(|o| o.url.to_string())).collect()
    })
}

/// What a run made of each root: its bytes, or its failure's kind and cause.
type Results = BTreeMap<u64, Result<Vec<u8>, (Option<FailureKind>, String)>>;

/// The failed roots of `results` (for assertion messages: bytes are long).
fn failures(results: &Results) -> Vec<&(Option<FailureKind>, String)> {
    results.values().filter_map(|r| r.as_ref().err()).collect()
}

/// Run `fetch` over the listing of `inputs`, through `opts`' endpoint.
fn run(
    opts: StoreOptions,
    inputs: &[&str],
    retries: u32,
    journal: Option<&std::path::Path>,
) -> (RunSummary, Results) {
    let stores = Stores::new(opts);
    let s2 = stores.clone();
    let fetch = Call::new_async_records("fetch", move || Ok(Fetch::new(s2.clone())))
        .batch_size(4)
        .concurrency(8)
        .record_timeout(Duration::from_secs(20))
        .record_retries(retries)
        .record_backoff(Duration::from_millis(20));
    let bytes = Call::map("bytes", |f: Fetched| f.bytes.to_vec());
    let (plan, out) = Plan::build(|b| {
        let objects = b.source::<Doc, Object>();
        b.output(bytes.apply(fetch.apply(objects)))
    })
    .unwrap();
    let inputs: Vec<String> = inputs.iter().map(|s| s.to_string()).collect();
    let roots = list(stores, inputs, is_pdf).map(|r| {
        let o = r.expect("the listing holds");
        (o.key(), o)
    });
    let results = Arc::new(Mutex::new(Results::new()));
    let r2 = results.clone();
    let mut runner = Runner::new(&plan).window(6);
    if let Some(j) = journal {
        runner = runner.journal(j);
    }
    let summary = runner
        .run_stream(
            roots,
            Callback(move |o: &RootOutcome| {
                let got = match o.get(out) {
                    Item::Present(b) => Ok(b),
                    other => Err((
                        other.cause().and_then(|c| c.kind()),
                        other.cause().map(|c| c.to_string()).unwrap_or_default(),
                    )),
                };
                assert!(
                    r2.lock().unwrap().insert(o.key, got).is_none(),
                    "root {} twice",
                    o.key
                );
            }),
        )
        .unwrap();
    let results = std::mem::take(&mut *results.lock().unwrap());
    (summary, results)
}

#[test]
fn listing_by_prefix_and_pattern_streams_the_right_objects_in_key_order() {
    let s3 = S3Server::start().unwrap();
    upload(
        &s3,
        "corpus",
        &[
            "a/1.pdf",
            "a/2.PDF",
            "a/sub/3.pdf",
            "a/notes.txt",
            "b/4.pdf",
            "ab/5.pdf",
        ],
        64,
    );
    let opts = || S3Server::options(&s3.endpoint());
    let u = |k: &str| format!("s3://corpus/{k}");
    // A prefix: every PDF below it (any depth), nothing else.
    assert_eq!(
        listed(opts(), &["s3://corpus/a/"]).unwrap(),
        [u("a/1.pdf"), u("a/2.PDF"), u("a/sub/3.pdf")]
    );
    // The same prefix without its slash is not `ab/`.
    assert_eq!(
        listed(opts(), &["s3://corpus/a"]).unwrap(),
        [u("a/1.pdf"), u("a/2.PDF"), u("a/sub/3.pdf")]
    );
    // Patterns: `*` within a segment, `**` across.
    assert_eq!(listed(opts(), &["s3://corpus/a/*.pdf"]).unwrap(), [u("a/1.pdf")]);
    assert_eq!(
        listed(opts(), &["s3://corpus/**/*.pdf"]).unwrap(),
        [u("a/1.pdf"), u("a/sub/3.pdf"), u("ab/5.pdf"), u("b/4.pdf")]
    );
    // A named object whatever its type; a missing one is still yielded
    // (its fetch fails); the whole bucket.
    assert_eq!(
        listed(opts(), &["s3://corpus/a/notes.txt", "s3://corpus/gone.pdf"]).unwrap(),
        [u("a/notes.txt"), u("gone.pdf")]
    );
    assert_eq!(listed(opts(), &["s3://corpus"]).unwrap().len(), 5);
    // A bucket that does not exist: a listing error naming the input.
    let e = listed(opts(), &["s3://no-such-bucket/x/"]).unwrap_err();
    assert!(
        matches!(&e, StoreError::List { input, .. } if input == "s3://no-such-bucket/x/"),
        "{e}"
    );
}

#[test]
fn a_run_fetches_every_object_once_and_a_missing_one_is_its_own_failure() {
    let s3 = S3Server::start().unwrap();
    // Keys as people name files: a listed key is fetched by the key it was
    // listed under, whatever characters it holds.
    let mut keys: Vec<String> = (0..12).map(|i| format!("docs/{i:02}.pdf")).collect();
    keys.extend([
        "docs/report~v2 [final] #3.pdf".to_string(),
        "docs/50% off.pdf".to_string(),
    ]);
    let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
    upload(&s3, "runs", &refs, 3000);
    let (summary, results) = run(
        S3Server::options(&s3.endpoint()),
        &["s3://runs/docs/", "s3://runs/docs/missing.pdf"],
        2,
        None,
    );
    assert_eq!(
        (
            summary.roots,
            summary.present,
            summary.failed + summary.suppressed
        ),
        (15, 14, 1),
        "{:?}",
        failures(&results)
    );
    for k in &keys {
        assert!(
            results[&root_key(&format!("s3://runs/{k}"))] == Ok(body(k, 3000)),
            "{k}"
        );
    }
    let (kind, cause) = results[&root_key("s3://runs/docs/missing.pdf")]
        .clone()
        .unwrap_err();
    assert_eq!(kind, Some(FailureKind::Record));
    assert!(
        cause.contains("s3://runs/docs/missing.pdf: no such object"),
        "{cause}"
    );
}

#[test]
fn slow_downs_stalls_and_cut_bodies_cost_retries_not_documents() {
    let s3 = S3Server::start().unwrap();
    let keys: Vec<String> = (0..30).map(|i| format!("f/{i:02}.pdf")).collect();
    let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
    upload(&s3, "faulty", &refs, 20_000);
    let proxy = FaultProxy::start(
        s3.addr(),
        Faults {
            slow_down_every: 3,
            stall_every: 7,
            stall: Duration::from_millis(1500),
            cut_every: 5,
        },
    )
    .unwrap();
    let mut opts = S3Server::options(&proxy.endpoint());
    opts.backoff = Duration::from_millis(10);
    opts.request_timeout = Duration::from_secs(1);
    let (summary, results) = run(opts, &["s3://faulty/f/"], 4, None);
    let c = proxy.counts();
    assert!(c.slow_downs >= 5 && c.stalls >= 2 && c.cuts >= 3, "{c:?}");
    assert_eq!(
        (
            summary.roots,
            summary.present,
            summary.failed + summary.suppressed
        ),
        (30, 30, 0),
        "{:?}",
        failures(&results)
    );
    for k in &keys {
        assert!(
            results[&root_key(&format!("s3://faulty/{k}"))] == Ok(body(k, 20_000)),
            "{k}"
        );
    }
    // An object that stays unreadable past the budget is one failure line,
    // its attempts in the cause; the listing (from the server) is fine.
    let always = FaultProxy::start(
        s3.addr(),
        Faults {
            slow_down_every: 1,
            ..Faults::default()
        },
    )
    .unwrap();
    let mut opts = S3Server::options(&always.endpoint());
    opts.max_retries = 1;
    opts.backoff = Duration::from_millis(5);
    let stores = Stores::new(opts);
    let s2 = stores.clone();
    let fetch = Call::new_async_records("fetch", move || Ok(Fetch::new(s2.clone())))
        .record_retries(1)
        .record_backoff(Duration::from_millis(5));
    let (plan, out) = Plan::build(|b| {
        let objects = b.source::<Doc, Object>();
        b.output(fetch.apply(objects))
    })
    .unwrap();
    let one = Object::new("s3://faulty/f/00.pdf");
    let mut got = None;
    Runner::new(&plan)
        .run(
            [(one.key(), one)],
            Callback(|o: &RootOutcome| got = o.get(out).cause().map(|c| (c.kind(), c.to_string()))),
        )
        .unwrap();
    let (kind, cause) = got.expect("the root failed");
    assert_eq!(kind, Some(FailureKind::Error));
    assert!(
        cause.contains("s3://faulty/f/00.pdf") && cause.contains("503"),
        "{cause}"
    );
}

#[test]
fn a_server_killed_mid_run_and_back_loses_no_document() {
    let s3 = Arc::new(Mutex::new(S3Server::start().unwrap()));
    let keys = {
        let s = s3.lock().unwrap();
        let keys: Vec<String> = (0..40).map(|i| format!("r/{i:02}.pdf")).collect();
        let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
        upload(&s, "restart", &refs, 5000);
        keys
    };
    // The proxy stalls every request a little, so the run is still going
    // when the server dies 300 ms in.
    let s = s3.lock().unwrap();
    let proxy = FaultProxy::start(
        s.addr(),
        Faults {
            stall_every: 1,
            stall: Duration::from_millis(40),
            ..Faults::default()
        },
    )
    .unwrap();
    drop(s);
    let killer = {
        let s3 = s3.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            s3.lock().unwrap().restart(Duration::from_millis(700)).unwrap();
        })
    };
    let mut opts = S3Server::options(&proxy.endpoint());
    opts.backoff = Duration::from_millis(50);
    let (summary, results) = run(opts, &["s3://restart/r/"], 4, None);
    killer.join().unwrap();
    // Requests met the server down, and still every document came through.
    assert!(proxy.counts().unreachable > 0, "{:?}", proxy.counts());
    assert_eq!(
        (summary.present, summary.failed + summary.suppressed),
        (40, 0),
        "{:?}",
        failures(&results)
    );
    for k in &keys {
        assert!(
            results[&root_key(&format!("s3://restart/{k}"))] == Ok(body(k, 5000)),
            "{k}"
        );
    }
}

#[test]
fn a_journaled_run_resumes_over_the_same_listing_in_any_order() {
    let s3 = S3Server::start().unwrap();
    let keys: Vec<String> = (0..10).map(|i| format!("j/{i}.pdf")).collect();
    let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
    upload(&s3, "journal", &refs, 100);
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("journal.redb");
    let opts = || S3Server::options(&s3.endpoint());
    // First run: half the objects (by name), then the whole prefix.
    let (first, _) = run(opts(), &["s3://journal/j/[0-4].pdf"], 2, Some(&journal));
    assert_eq!(first.present, 5);
    let (second, results) = run(opts(), &["s3://journal/j/"], 2, Some(&journal));
    assert_eq!((second.journal_skipped, second.present), (5, 5));
    let done: Vec<u64> = results.keys().copied().collect();
    let mut want: Vec<u64> = (5..10)
        .map(|i| root_key(&format!("s3://journal/j/{i}.pdf")))
        .collect();
    want.sort();
    assert_eq!(done, want);
}

#[test]
fn the_first_object_is_done_before_a_long_listing_reads_its_last_page() {
    let s3 = S3Server::start().unwrap();
    // Three pages of listing (S3 lists 1,000 keys a page).
    let keys: Vec<String> = (0..2500).map(|i| format!("long/{i:05}.pdf")).collect();
    let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
    upload(&s3, "stream", &refs, 16);
    // A proxy without faults counts the listing's page requests.
    let proxy = FaultProxy::start(s3.addr(), Faults::default()).unwrap();
    let stores = Stores::new(S3Server::options(&proxy.endpoint()));
    let s2 = stores.clone();
    let fetch = Call::new_async_records("fetch", move || Ok(Fetch::new(s2.clone()))).concurrency(4);
    let (plan, out) = Plan::build(|b| {
        let objects = b.source::<Doc, Object>();
        b.output(fetch.apply(objects))
    })
    .unwrap();
    let roots = list(stores, vec!["s3://stream/long/".into()], is_pdf).map(|r| {
        let o = r.unwrap();
        (o.key(), o)
    });
    let mut pages_at_first = None;
    let mut n = 0;
    let summary = Runner::new(&plan)
        .window(8)
        .run_stream(
            roots,
            Callback(|o: &RootOutcome| {
                assert!(o.get(out).present().is_some());
                pages_at_first.get_or_insert_with(|| proxy.counts().lists);
                n += 1;
            }),
        )
        .unwrap();
    assert_eq!((summary.present, n), (2500, 2500));
    // The whole listing took three pages; the first object was done after
    // the first (an eager listing would have read all three).
    assert_eq!(proxy.counts().lists, 3);
    assert_eq!(pages_at_first, Some(1));
}

/// A one-file HTTP server on loopback: `GET /docs/a.pdf` answers `body`,
/// anything else 404. Its address.
fn one_file_server(body: Vec<u8>) -> std::net::SocketAddr {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let mut reader = BufReader::new(conn.try_clone().unwrap());
            let mut request = String::new();
            let _ = reader.read_line(&mut request);
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
            }
            let found = request.starts_with("GET /docs/a.pdf ");
            let head = if found {
                format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nLast-Modified: Sun, 06 Dec 2026 00:00:00 GMT\r\nETag: \"a\"\r\nConnection: close\r\n\r\n",
                    body.len()
                )
            } else {
                "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_string()
            };
            let _ = conn.write_all(head.as_bytes());
            if found {
                let _ = conn.write_all(&body);
            }
        }
    });
    addr
}

#[test]
fn an_http_object_is_one_root_fetched_by_its_url() {
    let addr = one_file_server(body("a.pdf", 1000));
    let (a, missing) = (
        format!("http://{addr}/docs/a.pdf"),
        format!("http://{addr}/docs/missing.pdf"),
    );
    assert_eq!(
        listed(StoreOptions::default(), &[&a, &missing]).unwrap(),
        [a.clone(), missing.clone()]
    );
    let (summary, results) = run(StoreOptions::default(), &[&a, &missing], 1, None);
    assert_eq!((summary.present, summary.failed + summary.suppressed), (1, 1));
    assert!(results[&root_key(&a)] == Ok(body("a.pdf", 1000)));
    let (kind, cause) = results[&root_key(&missing)].clone().unwrap_err();
    assert_eq!(kind, Some(FailureKind::Record));
    assert!(cause.contains(&format!("{missing}: no such object")), "{cause}");
}

/// A distributed run's payloads in the store (`--payload-store`): each key
/// lands under `<prefix>/<job>/`, reads back byte for byte, a read bounded
/// below the object's size is refused as too large (nothing read), and a
/// missing or deleted key reads as gone (the engine's final, not-retried
/// answer).
#[cfg(feature = "dist")]
#[test]
fn payloads_live_under_the_jobs_prefix_and_read_back_bounded() {
    use rayorch_dist::{GONE, TOO_LARGE};
    use rayorch_kit::store::payloads::ObjectPayloads;

    let s3 = S3Server::start().unwrap();
    s3.put(&[("s3://payloads/keep.txt", b"other")]).unwrap();
    let p = ObjectPayloads::new(
        "s3://payloads/runs/",
        "doc_ocr",
        S3Server::options(&s3.endpoint()),
    )
    .unwrap();
    assert_eq!(p.url(), "s3://payloads/runs/doc_ocr/");
    let shared = p.shared();
    assert_eq!(shared.url, "s3://payloads/runs/doc_ocr/");
    let store = shared.store;
    let bytes: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
    rt().block_on(async {
        store.put("7-3-in0".into(), bytes.clone()).await.unwrap();
        assert_eq!(store.get("7-3-in0".into(), 100_000).await.unwrap(), bytes);
        let e = store.get("7-3-in0".into(), 99_999).await.unwrap_err();
        assert!(e.starts_with(TOO_LARGE) && e.contains("100000 bytes"), "{e}");
        let e = store.get("7-9-in0".into(), 10).await.unwrap_err();
        assert!(e.starts_with(GONE), "{e}");
    });
    assert_eq!(
        s3.list("s3://payloads/").unwrap(),
        ["s3://payloads/keep.txt", "s3://payloads/runs/doc_ocr/7-3-in0"]
    );
    rt().block_on(async {
        store.delete("7-3-in0".into()).await.unwrap();
        let e = store.get("7-3-in0".into(), 100_000).await.unwrap_err();
        assert!(e.starts_with(GONE), "{e}");
    });
    assert!(
        ObjectPayloads::new("https://example.org/x/", "j", StoreOptions::default())
            .is_err_and(|e| e.to_string().contains("--payload-store takes a bucket prefix")),
        "an HTTP origin cannot take writes"
    );
}

/// A tmpfs of `mb` MiB mounted on a fresh folder, unmounted on drop.
struct SmallDisk(std::path::PathBuf);

impl SmallDisk {
    fn mount(mb: u32) -> SmallDisk {
        let dir = std::env::temp_dir().join(format!("rayorch-small-disk-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let out = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={mb}m"), "tmpfs"])
            .arg(&dir)
            .output()
            .expect("`mount` runs");
        assert!(
            out.status.success(),
            "this test mounts a tmpfs and needs root: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        SmallDisk(dir)
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// On a disk with room for one 64 MiB volume the server, left to size
/// itself, makes one volume and every bucket after the first waits for
/// writes that never come (a CI host with a nearly full disk saw exactly
/// this). Started the way the tests start it, a dozen buckets take writes.
#[test]
fn a_server_on_a_disk_with_little_room_takes_writes_into_many_buckets() {
    let disk = SmallDisk::mount(96);
    let s3 = S3Server::start_in(&disk.0).unwrap();
    let buckets: Vec<String> = (0..12).map(|i| format!("bucket-{i:02}")).collect();
    for b in &buckets {
        let url = format!("s3://{b}/doc.pdf");
        s3.put(&[(url.as_str(), body(b, 4096).as_slice())]).unwrap();
    }
    for b in &buckets {
        assert_eq!(s3.get(&format!("s3://{b}/doc.pdf")).unwrap(), body(b, 4096));
    }
    drop(s3);
}
