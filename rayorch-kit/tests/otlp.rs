//! A run's spans, posted over OTLP/HTTP to a collector written here (a
//! loopback HTTP/1.1 listener that decodes each request with the generated
//! OTLP messages): one span per root and per batch, with their fields as
//! attributes, each batch linked to the roots it served, counted against the
//! run's `RunSummary`; and a collector that refuses or is not there costs the
//! run nothing and is reported, not hidden.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message as _;
use rayorch::sink::Callback;
use rayorch::{Call, Cause, Outcome, Plan, RootOutcome, RunSummary, Runner};
use rayorch_kit::otlp::{Otlp, OtlpConfig};

/// Documents of 1–7 pages; document 7 cannot be rendered (a failed root);
/// page 3 of document 5 fails as a record (its document is suppressed by the
/// reduce).
fn plan() -> Plan {
    let render = Call::per_record("render", |(doc, n): (u64, u32)| match doc {
        7 => Outcome::RecordFailure(Cause::new("document 7 is not a PDF")),
        _ => Outcome::Ok((0..n).map(|p| (doc, p)).collect::<Vec<_>>()),
    });
    let ocr = Call::batch("ocr", |pages: Vec<(u64, u32)>| {
        Ok(pages
            .into_iter()
            .map(|(doc, p)| common::read_page(doc, p))
            .collect())
    });
    common::docs_plan(render, ocr)
}

fn run(otlp: &Otlp) -> RunSummary {
    let plan = plan();
    let roots: Vec<(u64, (u64, u32))> = (0..24u64).map(|k| (k, (k, 1 + (k % 7) as u32))).collect();
    tracing::dispatcher::with_default(otlp.dispatch(), || {
        // A run on a thread without a subscriber reaches every span's
        // callsite first; this run's spans are exported all the same.
        std::thread::scope(|s| {
            s.spawn(|| {
                Runner::new(&plan)
                    .run([(99u64, (99u64, 2u32))], Callback(|_: &RootOutcome| {}))
                    .unwrap()
            });
        });
        Runner::new(&plan)
            .window(6)
            .run(roots, Callback(|_: &RootOutcome| {}))
            .unwrap()
    })
}

/// What the collector answers.
#[derive(Clone, Copy)]
enum Answer {
    Accept,
    Unavailable,
}

/// A loopback OTLP/HTTP collector: every request body decoded, in order.
struct Collector {
    url: String,
    requests: Arc<Mutex<Vec<ExportTraceServiceRequest>>>,
}

impl Collector {
    fn start(answer: Answer) -> Collector {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let got = requests.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let got = got.clone();
                std::thread::spawn(move || serve(conn, answer, &got));
            }
        });
        Collector { url, requests }
    }

    fn spans(&self) -> (Vec<Span>, BTreeSet<String>) {
        let mut spans = Vec::new();
        let mut services = BTreeSet::new();
        for req in self.requests.lock().unwrap().iter() {
            for rs in &req.resource_spans {
                let resource = rs
                    .resource
                    .as_ref()
                    .map(|r| r.attributes.as_slice())
                    .unwrap_or(&[]);
                services.extend(attr(resource, "service.name").map(|v| text(&v)));
                spans.extend(rs.scope_spans.iter().flat_map(|s| s.spans.iter().cloned()));
            }
        }
        (spans, services)
    }
}

/// One connection: requests until the client closes it (keep-alive).
fn serve(conn: TcpStream, answer: Answer, got: &Mutex<Vec<ExportTraceServiceRequest>>) {
    let mut out = conn.try_clone().unwrap();
    let mut r = BufReader::new(conn);
    loop {
        let mut head = Vec::new();
        loop {
            let mut line = String::new();
            if r.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            if line == "\r\n" {
                break;
            }
            head.push(line.to_ascii_lowercase());
        }
        assert!(head[0].starts_with("post /v1/traces "), "{head:?}");
        assert!(
            head.iter()
                .any(|h| h.starts_with("content-type: application/x-protobuf")),
            "{head:?}"
        );
        let len: usize = head
            .iter()
            .find_map(|h| h.strip_prefix("content-length:"))
            .expect("a Content-Length")
            .trim()
            .parse()
            .unwrap();
        let mut body = vec![0; len];
        r.read_exact(&mut body).unwrap();
        let status = match answer {
            Answer::Accept => {
                got.lock()
                    .unwrap()
                    .push(ExportTraceServiceRequest::decode(&body[..]).unwrap());
                "200 OK"
            }
            Answer::Unavailable => "503 Service Unavailable",
        };
        let reply =
            format!("HTTP/1.1 {status}\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n");
        if out.write_all(reply.as_bytes()).is_err() {
            return;
        }
    }
}

fn attr(attrs: &[KeyValue], key: &str) -> Option<AnyValue> {
    attrs.iter().find(|a| a.key == key).and_then(|a| a.value.clone())
}

fn text(v: &AnyValue) -> String {
    match &v.value {
        Some(any_value::Value::StringValue(s)) => s.clone(),
        Some(any_value::Value::IntValue(i)) => i.to_string(),
        Some(any_value::Value::BoolValue(b)) => b.to_string(),
        other => format!("{other:?}"),
    }
}

fn field(s: &Span, key: &str) -> String {
    attr(&s.attributes, key)
        .map(|v| text(&v))
        .unwrap_or_else(|| panic!("span {} has no {key}: {:?}", s.name, s.attributes))
}

fn config(url: &str) -> OtlpConfig {
    let mut c = OtlpConfig::new(url, "otlp-test");
    c.delay = Duration::from_millis(50);
    c.batch = 16;
    c.timeout = Duration::from_secs(2);
    c
}

#[test]
fn every_root_and_batch_reaches_the_collector_linked_and_counted() {
    let collector = Collector::start(Answer::Accept);
    let otlp = Otlp::new(config(&collector.url)).unwrap();
    assert_eq!(otlp.url(), format!("{}/v1/traces", collector.url));
    let summary = run(&otlp);
    let report = otlp.shutdown();
    let (spans, services) = collector.spans();
    assert!(report.complete(), "{report}");
    assert_eq!(report.exported, spans.len() as u64, "{report}");
    assert_eq!(
        (report.failed, report.dropped, report.last_error.clone()),
        (0, 0, None)
    );
    assert!(
        collector.requests.lock().unwrap().len() > 1,
        "posted in several requests of at most 16 spans"
    );
    assert_eq!(services, BTreeSet::from(["otlp-test".to_string()]));

    let roots: Vec<&Span> = spans.iter().filter(|s| s.name == "root").collect();
    let batches: Vec<&Span> = spans.iter().filter(|s| s.name == "batch").collect();
    assert_eq!(
        roots.len() + batches.len(),
        spans.len(),
        "only rayorch's spans are exported"
    );
    assert_eq!(roots.len() as u64, summary.roots);
    let outcome: BTreeMap<String, String> = roots
        .iter()
        .map(|s| (field(s, "key"), field(s, "outcome")))
        .collect();
    assert_eq!(outcome.len(), 24, "one span per root key");
    assert_eq!(outcome["5"], "suppressed", "document 5 lost page 3");
    assert_eq!(outcome["7"], "suppressed", "document 7 was not rendered");
    assert_eq!(outcome.values().filter(|o| *o == "present").count(), 22);
    // The two lost documents, and only they, carry OpenTelemetry's error
    // status, with their cause.
    let errors: BTreeMap<String, String> = roots
        .iter()
        .filter_map(|s| Some((field(s, "key"), s.status.clone()?)))
        .filter(|(_, st)| st.code == 2)
        .map(|(k, st)| (k, st.message))
        .collect();
    assert_eq!(errors.keys().collect::<Vec<_>>(), ["5", "7"]);
    assert!(
        errors["5"].contains("page 3 of document 5 is unreadable"),
        "{errors:?}"
    );
    assert!(errors["7"].contains("document 7 is not a PDF"), "{errors:?}");

    let total: u64 = summary.calls.iter().map(|c| c.rpcs).sum();
    assert_eq!(batches.len() as u64, total, "one span per batch");
    let ocr: Vec<&&Span> = batches.iter().filter(|s| field(s, "call") == "ocr").collect();
    let m = summary.call("ocr").unwrap();
    assert_eq!(ocr.len() as u64, m.rpcs);
    let grains: u64 = ocr.iter().map(|s| field(s, "size").parse::<u64>().unwrap()).sum();
    assert_eq!(grains, m.grains_dispatched);
    let mixed: Vec<&&&Span> = ocr
        .iter()
        .filter(|s| field(s, "parents_mixed") == "true")
        .collect();
    assert_eq!(mixed.len() as u64, m.mixed_parent_batches);
    assert!(
        m.mixed_parent_batches > 0,
        "the window mixes documents in a batch"
    );
    assert!(
        ocr.iter()
            .all(|s| ["0", "1"].contains(&field(s, "replica").as_str()))
    );
    assert!(batches.iter().all(|s| field(s, "outcome") == "reported"));

    // Each batch links to the spans of the roots it served: one root for a
    // batch of one document, two or more for a mixed one.
    let root_ids: BTreeSet<&[u8]> = roots.iter().map(|s| s.span_id.as_slice()).collect();
    for b in &batches {
        assert!(!b.links.is_empty(), "batch without its roots: {b:?}");
        assert!(
            b.links.iter().all(|l| root_ids.contains(l.span_id.as_slice())),
            "{b:?}"
        );
    }
    assert!(mixed.iter().all(|b| b.links.len() >= 2));
    assert!(
        ocr.iter()
            .filter(|s| field(s, "parents_mixed") == "false")
            .all(|b| b.links.len() == 1)
    );
}

#[test]
fn a_refusing_or_absent_collector_costs_the_run_nothing_and_is_reported() {
    let expected = {
        let collector = Collector::start(Answer::Accept);
        run(&Otlp::new(config(&collector.url)).unwrap())
    };
    let refusing = Collector::start(Answer::Unavailable);
    let absent = {
        let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    for url in [refusing.url.clone(), absent] {
        let otlp = Otlp::new(config(&url)).unwrap();
        let summary = run(&otlp);
        assert_eq!(summary.roots, expected.roots);
        assert_eq!(summary.calls.len(), expected.calls.len());
        let report = otlp.shutdown();
        assert!(!report.complete(), "{report}");
        assert!(report.ended > 0 && report.exported == 0, "{report}");
        assert_eq!(report.failed + report.dropped, report.ended, "{report}");
        assert!(report.failed > 0, "{report}");
        let e = report.last_error.clone().unwrap();
        let shown = report.to_string();
        assert!(shown.contains(&url) && shown.contains(&e), "{shown}");
    }
}
