//! `/metrics` of a real run, scraped over HTTP while it runs and after it
//! ended: the final counts are the `RunSummary`'s, the live ones never
//! exceed them, and the live page loads in a real headless browser (Chromium)
//! and shows the run's own counts.

mod common;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rayorch::sink::Callback;
use rayorch::{Call, Plan, RootOutcome, RunSummary, Runner};
use rayorch_kit::watch::Watch;

/// Documents of `n` pages; page 3 of document 5 fails as a record; the
/// OCR Call sleeps `ms` per batch so the run lasts long enough to scrape,
/// and after its first 4 batches waits while `hold` is set (the browser
/// test looks at the page while the run is surely live).
fn plan(ms: u64, hold: Arc<AtomicBool>) -> Plan {
    let batches = Arc::new(AtomicU64::new(0));
    let render = Call::map("render", |(doc, n): (u64, u32)| {
        (0..n).map(|p| (doc, p)).collect::<Vec<_>>()
    });
    let ocr = Call::batch("ocr", move |pages: Vec<(u64, u32)>| {
        std::thread::sleep(Duration::from_millis(ms));
        if batches.fetch_add(1, Ordering::SeqCst) >= 4 {
            while hold.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        Ok(pages
            .into_iter()
            .map(|(doc, p)| common::read_page(doc, p))
            .collect())
    });
    common::docs_plan(render, ocr)
}

fn roots() -> Vec<(u64, (u64, u32))> {
    (0..24u64).map(|k| (k, (k, 1 + (k % 7) as u32))).collect()
}

fn get(addr: SocketAddr, path: &str) -> String {
    let mut c = TcpStream::connect(addr).unwrap();
    write!(c, "GET {path} HTTP/1.1\r\nHost: test\r\n\r\n").unwrap();
    let mut out = String::new();
    c.read_to_string(&mut out).unwrap();
    let (head, body) = out.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    body.to_string()
}

/// `name{labels}` → value, from a Prometheus text exposition.
fn parse(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| {
            let (k, v) = l.rsplit_once(' ')?;
            Some((k.to_string(), v.parse().ok()?))
        })
        .collect()
}

fn value(m: &BTreeMap<String, f64>, name: &str, labels: &[(&str, &str)]) -> f64 {
    let hits: Vec<f64> = m
        .iter()
        .filter(|(k, _)| {
            let (n, rest) = k.split_once('{').unwrap_or((k, ""));
            n == name && labels.iter().all(|(l, v)| rest.contains(&format!("{l}=\"{v}\"")))
        })
        .map(|(_, v)| *v)
        .collect();
    assert_eq!(hits.len(), 1, "{name} {labels:?}: {hits:?}");
    hits[0]
}

fn run_watched(watch: &Watch, ms: u64, hold: Arc<AtomicBool>) -> RunSummary {
    let plan = plan(ms, hold);
    Runner::new(&plan)
        .window(4)
        .observe(watch.observer())
        .run(roots(), Callback(|_: &RootOutcome| {}))
        .unwrap()
}

/// Compare the final scrape with the summary, family by family; returns
/// the families compared, so a test can check that none was left out.
fn check_final(m: &BTreeMap<String, f64>, s: &RunSummary) -> std::collections::BTreeSet<String> {
    let seen = std::cell::RefCell::new(std::collections::BTreeSet::new());
    let at = |name: &str, labels: &[(&str, &str)]| {
        seen.borrow_mut().insert(name.to_string());
        value(m, name, labels)
    };
    let eq = |name: &str, labels: &[(&str, &str)], want: u64| {
        assert_eq!(at(name, labels), want as f64, "{name} {labels:?}");
    };
    let close = |name: &str, labels: &[(&str, &str)], want: f64| {
        let got = at(name, labels);
        assert!(
            (got - want).abs() <= 1e-6 * want.abs().max(1.0),
            "{name} {labels:?}: {got} vs {want}"
        );
    };
    eq("rayorch_roots_total", &[("outcome", "present")], s.present);
    eq("rayorch_roots_total", &[("outcome", "failed")], s.failed);
    eq("rayorch_roots_total", &[("outcome", "dropped")], s.dropped);
    eq("rayorch_roots_total", &[("outcome", "suppressed")], s.suppressed);
    eq("rayorch_roots_duplicate_keys_total", &[], s.duplicate_keys);
    eq("rayorch_roots_abandoned_total", &[], s.abandoned);
    eq("rayorch_roots_journal_skipped_total", &[], s.journal_skipped);
    eq("rayorch_journal_commits_total", &[], s.journal_commits);
    eq("rayorch_loop_wakeups_total", &[], s.loop_wakeups);
    eq("rayorch_driver_wakeups_total", &[], s.loop_wakeups);
    eq("rayorch_rejected_reports_total", &[], s.rejected_reports);
    eq("rayorch_backpressure_holds_total", &[], s.backpressure_holds);
    for c in &s.calls {
        let call = [("call", c.name.as_str())];
        eq("rayorch_call_batches_total", &call, c.rpcs);
        eq("rayorch_call_grains_dispatched_total", &call, c.grains_dispatched);
        eq("rayorch_call_grains_committed_total", &call, c.committed);
        eq("rayorch_call_retries_total", &call, c.requeued);
        eq("rayorch_call_record_attempts_total", &call, c.record_attempts);
        eq("rayorch_call_shape_key_panics_total", &call, c.shape_key_panics);
        eq("rayorch_call_record_retries_total", &call, c.record_retries);
        eq(
            "rayorch_call_record_deadline_misses_total",
            &call,
            c.record_deadline_misses,
        );
        eq("rayorch_call_attempt_failures_total", &call, c.attempt_failures);
        for (kind, &n) in &c.failed_grains {
            eq(
                "rayorch_call_failed_grains_total",
                &[("call", &c.name), ("kind", kind.as_str())],
                n,
            );
        }
        for (when, n) in [
            ("before_dispatch", c.suppressed_before_dispatch),
            ("in_flight", c.suppressed_in_flight),
        ] {
            eq(
                "rayorch_call_suppressed_grains_total",
                &[("call", &c.name), ("when", when)],
                n,
            );
        }
        eq("rayorch_call_stale_reports_total", &call, c.stale_grains);
        eq("rayorch_call_replicas_replaced_total", &call, c.replicas_replaced);
        eq("rayorch_call_threads_abandoned_total", &call, c.threads_abandoned);
        eq(
            "rayorch_call_mixed_parent_batches_total",
            &call,
            c.mixed_parent_batches,
        );
        close("rayorch_call_batch_fill_ratio", &call, c.fill);
        if let Some(w) = c.mean_wait_s {
            close("rayorch_call_mean_wait_seconds", &call, w);
        }
        for k in &c.batches_by_key {
            let key = k.key.map_or_else(|| "other".to_string(), |k| k.to_string());
            eq(
                "rayorch_call_key_batches_total",
                &[("call", &c.name), ("key", &key)],
                k.batches,
            );
            eq(
                "rayorch_call_key_grains_total",
                &[("call", &c.name), ("key", &key)],
                k.grains,
            );
        }
        eq("rayorch_call_batch_duration_seconds_count", &call, c.rpcs);
        eq("rayorch_call_batch_grains_count", &call, c.rpcs);
        close("rayorch_call_batch_grains_sum", &call, c.grains_dispatched as f64);
        close("rayorch_call_batch_duration_seconds_sum", &call, c.busy_s);
        // The levels: nothing left at the end.
        for level in [
            "rayorch_call_queue_ready_grains",
            "rayorch_call_queue_recovery_grains",
            "rayorch_call_in_flight_grains",
            "rayorch_call_busy_replicas",
            "rayorch_call_backlog_seconds",
            "rayorch_call_backlog_replica_seconds",
        ] {
            assert_eq!(at(level, &call), 0.0, "{level} {call:?}");
        }
        eq("rayorch_call_replicas", &call, c.replicas as u64);
    }
    for d in &s.domains {
        let dom = [("domain", d.domain)];
        eq("rayorch_domain_published_total", &dom, d.published);
        eq("rayorch_domain_done_total", &dom, d.done);
        eq("rayorch_domain_failed_total", &dom, d.failed);
        eq("rayorch_domain_suppressed_total", &dom, d.suppressed);
    }
    for f in &s.failures {
        eq(
            "rayorch_failures_total",
            &[
                ("domain", &f.domain),
                ("level", f.level.as_str()),
                ("kind", f.kind.as_str()),
            ],
            f.count,
        );
    }
    assert_eq!(at("rayorch_run_finished", &[]), 1.0);
    // The last snapshot is taken as the run ends, a moment before its
    // summary: its wall time is at most the summary's.
    let wall = at("rayorch_run_wall_seconds", &[]);
    assert!(wall > 0.0 && wall <= s.wall_s, "{wall} vs {}", s.wall_s);
    assert_eq!(at("rayorch_window_roots", &[]), 0.0);
    assert_eq!(at("rayorch_window_children", &[]), 0.0);
    assert_eq!(at("rayorch_journal_lag_roots", &[]), 0.0);
    assert!(at("rayorch_window_roots_limit", &[]) > 0.0);
    if m.keys().any(|k| k == "rayorch_window_children_limit") {
        assert!(at("rayorch_window_children_limit", &[]) > 0.0);
    }
    seen.into_inner()
}

/// Every metric family of a scrape, by name (histograms' `_bucket` lines
/// under their `_count`/`_sum` names).
fn families(m: &BTreeMap<String, f64>) -> std::collections::BTreeSet<String> {
    m.keys()
        .map(|k| k.split_once('{').map_or(k.as_str(), |(n, _)| n).to_string())
        .filter(|n| !n.ends_with("_bucket"))
        .collect()
}

#[test]
fn metrics_scraped_during_and_after_a_run_end_at_the_run_summary() {
    let watch = Watch::with_interval(Duration::from_millis(20));
    let server = watch.serve(SocketAddr::from((Ipv4Addr::LOCALHOST, 0))).unwrap();
    let addr = server.addr();
    let done = Arc::new(AtomicBool::new(false));
    let scrapes: Arc<Mutex<Vec<BTreeMap<String, f64>>>> = Arc::default();
    let scraper = {
        let (done, scrapes) = (done.clone(), scrapes.clone());
        std::thread::spawn(move || {
            while !done.load(Ordering::SeqCst) {
                scrapes.lock().unwrap().push(parse(&get(addr, "/metrics")));
                std::thread::sleep(Duration::from_millis(15));
            }
        })
    };
    let summary = run_watched(&watch, 30, Arc::default());
    done.store(true, Ordering::SeqCst);
    scraper.join().unwrap();
    assert!(watch.finished());
    assert_eq!(summary.suppressed, 1, "document 5 fails by its page: {summary:?}");
    assert_eq!(summary.present, 23);
    let last = parse(&get(addr, "/metrics"));
    let compared = check_final(&last, &summary);
    let left: Vec<_> = families(&last).difference(&compared).cloned().collect();
    assert!(
        left.is_empty(),
        "families not compared with the summary: {left:?}"
    );

    // During the run: some scrape saw work under way (a queue or a busy
    // replica) and an unfinished run; every count only grew and never
    // passed the final one.
    let scrapes = scrapes.lock().unwrap();
    let live: Vec<_> = scrapes
        .iter()
        .filter(|m| m.get("rayorch_run_finished") == Some(&0.0))
        .collect();
    assert!(
        !live.is_empty(),
        "no scrape during the run ({} scrapes)",
        scrapes.len()
    );
    let ocr = [("call", "ocr")];
    assert!(
        live.iter()
            .any(|m| value(m, "rayorch_call_busy_replicas", &ocr) > 0.0
                || value(m, "rayorch_call_queue_ready_grains", &ocr) > 0.0),
        "no scrape saw the OCR Call at work"
    );
    let committed = |m: &BTreeMap<String, f64>| value(m, "rayorch_call_grains_committed_total", &ocr);
    for w in live.windows(2) {
        assert!(committed(w[0]) <= committed(w[1]));
    }
    let final_committed = committed(&last);
    assert!(live.iter().all(|m| committed(m) <= final_committed));
    // Replicas and the scale signal are there for the autoscaler.
    assert_eq!(value(&last, "rayorch_call_replicas", &ocr), 2.0);
    assert_eq!(value(&last, "rayorch_call_backlog_seconds", &ocr), 0.0);
    assert!(
        live.iter()
            .any(|m| m.keys().any(|k| k.starts_with("rayorch_call_backlog_seconds{")))
    );
}

/// A run with every kind of Grain failure a stage can cause: a record
/// failure, a group failure, an `Err` and a panic from a batch stage
/// (bisected down to their record), and per-record calls that error and
/// time out past their retries. After it, every metric family agrees with
/// the summary, and per Call the failed Grains by kind add up to the
/// Domain's `grain failed` failures.
#[test]
fn after_a_run_with_every_failure_kind_every_metric_family_agrees_with_the_summary() {
    use rayorch::{AsyncRecordStage, Cause, FailureKind, FailureLevel, Outcome, RecordResult, StageContext};

    struct Embed;
    impl AsyncRecordStage for Embed {
        type In = u64;
        type Out = u64;
        async fn run_one(self: Arc<Self>, text: u64, _cx: StageContext) -> RecordResult<u64> {
            match text {
                6000 => Err("model server: HTTP 503".into()),
                7000 => std::future::pending().await,
                _ => Ok(Outcome::Ok(text + 1)),
            }
        }
    }

    let render = Call::map("render", |(doc, n): (u64, u32)| {
        (0..n).map(|p| (doc, p)).collect::<Vec<_>>()
    });
    let ocr = Call::batch("ocr", |pages: Vec<(u64, u32)>| {
        let mut out = Vec::with_capacity(pages.len());
        for (doc, p) in pages {
            out.push(match (doc, p) {
                (1, 0) => Outcome::RecordFailure(Cause::new("unreadable page")),
                (2, 1) => Outcome::GroupFailure(Cause::new("the document is encrypted")),
                (3, 2) => return Err("the OCR model ran out of memory".into()),
                (4, 1) => panic!("a bug in the OCR stage"),
                _ => Outcome::Ok(doc * 1000 + u64::from(p)),
            });
        }
        Ok(out)
    })
    .batch_size(4)
    .replicas(2);
    let embed = Call::new_async_records("embed", || Ok(Embed))
        .batch_size(4)
        .record_timeout(Duration::from_millis(200))
        .record_retries(1)
        .record_backoff(Duration::from_millis(1));
    let (plan, _) = Plan::build(|b| {
        let docs = b.source::<common::Doc, (u64, u32)>();
        let pages = rayorch::expand::<common::Page, _, _>(render.apply(docs));
        b.output(rayorch::reduce(embed.apply(ocr.apply(pages))))
    })
    .unwrap();
    let watch = Watch::with_interval(Duration::from_millis(20));
    let server = watch.serve(SocketAddr::from((Ipv4Addr::LOCALHOST, 0))).unwrap();
    let summary = Runner::new(&plan)
        .window(4)
        .observe(watch.observer())
        .run((0..10u64).map(|k| (k, (k, 4u32))), Callback(|_: &RootOutcome| {}))
        .unwrap();
    assert!(watch.finished());
    let last = parse(&get(server.addr(), "/metrics"));
    let compared = check_final(&last, &summary);
    let left: Vec<_> = families(&last).difference(&compared).cloned().collect();
    assert!(
        left.is_empty(),
        "families not compared with the summary: {left:?}"
    );

    // Every kind happened, where it should.
    let call = |n: &str| {
        summary
            .calls
            .iter()
            .find(|c| c.name == n)
            .unwrap()
            .failed_grains
            .clone()
    };
    use FailureKind::*;
    assert_eq!(
        call("ocr"),
        BTreeMap::from([(Record, 1), (Group, 1), (Error, 1), (Panic, 1)]),
        "{summary:?}"
    );
    assert_eq!(
        call("embed"),
        BTreeMap::from([(Error, 1), (Timeout, 1)]),
        "{summary:?}"
    );
    // Per Call, by kind, adds up to the Domain's Grains failed.
    let mut by_kind: BTreeMap<FailureKind, u64> = BTreeMap::new();
    for c in &summary.calls {
        for (k, n) in &c.failed_grains {
            *by_kind.entry(*k).or_default() += n;
        }
    }
    let grain_failed: BTreeMap<FailureKind, u64> = summary
        .failures
        .iter()
        .filter(|f| f.level == FailureLevel::GrainFailed)
        .map(|f| (f.kind, f.count))
        .collect();
    assert_eq!(by_kind, grain_failed, "{:?}", summary.failures);
    for (k, n) in &by_kind {
        let scraped: f64 = summary
            .calls
            .iter()
            .filter(|c| c.failed_grains.contains_key(k))
            .map(|c| {
                value(
                    &last,
                    "rayorch_call_failed_grains_total",
                    &[("call", &c.name), ("kind", k.as_str())],
                )
            })
            .sum();
        assert_eq!(scraped, *n as f64, "{k}");
    }
    assert_eq!(summary.call("embed").unwrap().record_deadline_misses, 2);
    assert_eq!(summary.failed + summary.suppressed, 6, "{summary:?}");
}

struct Release(Arc<AtomicBool>);

impl Drop for Release {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

/// Chromium, if this machine has it (scripts/test installs it).
fn chromium() -> PathBuf {
    for c in ["chromium", "chromium-browser", "google-chrome"] {
        if let Ok(o) = Command::new("which").arg(c).output()
            && o.status.success()
        {
            return PathBuf::from(String::from_utf8_lossy(&o.stdout).trim());
        }
    }
    panic!(
        "no Chromium on this machine: the live page's browser test needs one (apt install chromium; scripts/test does)"
    );
}

/// The DOM after the page's script ran (headless, its own profile).
fn dump_dom(browser: &PathBuf, url: &str, screenshot: Option<&PathBuf>) -> String {
    let profile = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(browser);
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
    ])
    .arg(format!("--user-data-dir={}", profile.path().display()))
    .arg("--virtual-time-budget=4000")
    .arg("--window-size=1280,1700");
    match screenshot {
        Some(p) => cmd.arg(format!("--screenshot={}", p.display())),
        None => cmd.arg("--dump-dom"),
    };
    let out = cmd.arg(url).output().unwrap();
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The text of the first element carrying `attr` (e.g. `data-root="present"`)
/// inside the row carrying `row` (or anywhere when `row` is empty).
fn text_at(dom: &str, row: &str, attr: &str) -> String {
    let from = if row.is_empty() {
        0
    } else {
        dom.find(row).unwrap_or_else(|| panic!("no {row} in the page"))
    };
    let at = from
        + dom[from..]
            .find(attr)
            .unwrap_or_else(|| panic!("no {attr} after {row}"));
    let start = at + dom[at..].find('>').unwrap() + 1;
    let end = start + dom[start..].find('<').unwrap();
    dom[start..end].to_string()
}

#[test]
fn the_live_page_shows_the_runs_counts_in_a_real_browser() {
    let browser = chromium();
    let watch = Watch::with_interval(Duration::from_millis(20));
    let server = watch.serve(SocketAddr::from((Ipv4Addr::LOCALHOST, 0))).unwrap();
    let url = server.url();
    // During the run (held after 4 OCR batches): the page loads and says
    // the run is running, with work done.
    let hold = Arc::new(AtomicBool::new(true));
    let during = {
        let (watch, browser, url, hold) = (watch.clone(), browser.clone(), url.clone(), hold.clone());
        std::thread::spawn(move || {
            while watch.state_json()["snapshot"]["summary"]["calls"][1]["committed"]
                .as_u64()
                .unwrap_or(0)
                == 0
            {
                std::thread::sleep(Duration::from_millis(10));
            }
            // Released however this thread ends, so a failing browser
            // fails the test instead of holding the run forever.
            let _release = Release(hold);
            dump_dom(&browser, &url, None)
        })
    };
    let summary = run_watched(&watch, 10, hold);
    let dom = during.join().unwrap();
    assert!(
        dom.contains("data-rendered=\"running\""),
        "the page during the run: {dom}"
    );
    assert!(dom.contains("data-call=\"ocr\""));

    // After: every figure the page shows is the run's own.
    let dom = dump_dom(&browser, &url, None);
    assert!(dom.contains("data-rendered=\"finished\""), "{dom}");
    for (k, v) in [("present", summary.present), ("suppressed", summary.suppressed)] {
        assert_eq!(text_at(&dom, "", &format!("data-root=\"{k}\"")), v.to_string());
    }
    for d in &summary.domains {
        let row = format!("data-domain=\"{}\"", d.domain);
        assert_eq!(
            text_at(&dom, &row, "data-f=\"done\""),
            d.done.to_string(),
            "{}",
            d.domain
        );
        assert_eq!(
            text_at(&dom, &row, "data-f=\"failed\""),
            d.failed.to_string(),
            "{}",
            d.domain
        );
    }
    let ocr = summary.call("ocr").unwrap();
    assert_eq!(
        text_at(&dom, "data-call=\"ocr\"", "data-f=\"committed\""),
        ocr.committed.to_string()
    );
    assert_eq!(
        text_at(&dom, "data-call=\"ocr\"", "data-f=\"batches\""),
        ocr.rpcs.to_string()
    );
    let batches: u64 = summary.calls.iter().map(|c| c.rpcs).sum();
    assert!(
        dom.contains(&format!("data-batches=\"{batches}\"")),
        "the timeline draws every batch"
    );
    // The failure with its cause and origin.
    let row = "data-failure-key=\"5\"";
    assert!(text_at(&dom, row, "data-f=\"cause\"").contains("page 3 of document 5 is unreadable"));
    assert!(
        dom[dom.find(row).unwrap()..].contains("Doc 5 / Page 3"),
        "origin entity shown"
    );

    let shot = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("watch-page.png");
    let _ = std::fs::remove_file(&shot);
    dump_dom(&browser, &url, Some(&shot));
    let png = std::fs::read(&shot).unwrap();
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 10_000,
        "screenshot at {}",
        shot.display()
    );
    eprintln!("screenshot of the live page: {}", shot.display());
}
