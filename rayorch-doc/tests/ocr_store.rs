//! The OCR job with inputs in object storage (`--features store`), against
//! a real S3 server (SeaweedFS from its pinned wheel, one per test):
//! - a prefix and a named object: each PDF below the prefix is written once
//!   under its URL, a broken one and a missing one are each a failure line
//!   with the URL in the cause, other files are not listed;
//! - a run stopped by `--limit` resumes over the same listing and writes
//!   the rest, nothing twice;
//! - a bucket that does not exist is an error before any output is made;
//! - the layout job reads the same inputs the same way;
//! - an input list in the bucket names objects next to it, and its rows'
//!   fields are written beside each document;
//! - Parquet shards in the bucket, read by byte range: a document per row,
//!   a failure per bad row or unreadable shard, a run cut short resumed
//!   over the same shards; a shard of locations names objects beside it;
//! - a WebDataset tar shard in the bucket: a document per sample;
//! - a shard as pyarrow (the datasets library's writer) writes it: large
//!   binary and string columns, dictionary-encoded strings, lists.
//!
//! The job reads credentials and endpoint from the environment only, and
//! a test may not change its own process's environment: each run of the
//! job is a child process of this test binary (the ignored test
//! `common::child_runs_the_job`, which the others start with the server's
//! environment).

mod common;

use std::path::Path;

use rayorch_kit::store::root_key;
use rayorch_kit::store::testing::S3Server;
use rayorch_testdata::pdfgen::text_pdf;

/// What a child run of the job said: its exit status (`Err`: the error it
/// ended with) and its console.
fn job(s3: &S3Server, out: &Path, args: &[&str]) -> (Result<u8, String>, String) {
    run_child(
        s3,
        out,
        &["doc_ocr", "--no-progress", "--dpi", "10", "--out"],
        args,
    )
}

/// The child's run of `head`, the folder `out`, then `args`.
fn run_child(s3: &S3Server, out: &Path, head: &[&str], args: &[&str]) -> (Result<u8, String>, String) {
    let mut argv: Vec<String> = head.iter().map(|a| a.to_string()).collect();
    argv.push(out.display().to_string());
    argv.extend(args.iter().map(|a| a.to_string()));
    let child = s3.child_test(common::CHILD, &argv).unwrap();
    common::child_result(&child)
}

fn upload(s3: &S3Server, objects: &[(&str, Vec<u8>)]) {
    let refs: Vec<(&str, &[u8])> = objects.iter().map(|(u, b)| (*u, &b[..])).collect();
    s3.put(&refs).unwrap();
}

fn jsonl(path: &Path) -> Vec<serde_json::Value> {
    rayorch_kit::check::jsonl_lines(path).unwrap()
}

/// The run's `summary.json`.
fn summary(out: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap()
}

fn report(title: &str) -> Vec<u8> {
    text_pdf(
        &[vec![format!("{title} first page")], vec!["Second page".into()]],
        12.0,
    )
}

/// (key, name) of each of `names` as a run keys them (their URLs or keys),
/// sorted: what [`written`] returns when exactly these were written.
fn keyed<S: AsRef<str>>(names: impl IntoIterator<Item = S>) -> Vec<(u64, String)> {
    let mut v: Vec<(u64, String)> = names
        .into_iter()
        .map(|n| (root_key(n.as_ref()), n.as_ref().to_string()))
        .collect();
    v.sort();
    v
}

/// (key, name) of each written document, sorted.
fn written(out: &Path) -> Vec<(u64, String)> {
    let mut v: Vec<(u64, String)> = jsonl(&out.join("documents.jsonl"))
        .iter()
        .map(|d| {
            (
                d["key"].as_u64().unwrap(),
                d["name"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    v.sort();
    v
}

#[test]
fn objects_below_a_prefix_are_written_once_under_their_urls_and_bad_ones_are_failure_lines() {
    let s3 = S3Server::start().unwrap();
    upload(
        &s3,
        &[
            ("s3://corpus/docs/a.pdf", report("Alpha")),
            ("s3://corpus/docs/sub/b.pdf", report("Beta")),
            ("s3://corpus/docs/c.PDF", report("Gamma")),
            ("s3://corpus/docs/broken.pdf", b"%PDF-1.4 not really".to_vec()),
            ("s3://corpus/docs/notes.txt", b"not listed".to_vec()),
            ("s3://corpus/other/d.pdf", report("Delta")),
        ],
    );
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let (code, console) = job(&s3, &out, &["s3://corpus/docs/", "s3://corpus/docs/missing.pdf"]);
    assert_eq!(code, Ok(3), "{console}");
    let urls = [
        "s3://corpus/docs/a.pdf",
        "s3://corpus/docs/c.PDF",
        "s3://corpus/docs/sub/b.pdf",
    ];
    assert_eq!(written(&out), keyed(urls), "{console}");
    let docs = jsonl(&out.join("documents.jsonl"));
    let alpha = docs
        .iter()
        .find(|d| d["name"] == "s3://corpus/docs/a.pdf")
        .unwrap();
    assert!(
        alpha["page_texts"][0]
            .as_str()
            .unwrap()
            .contains("Alpha first page"),
        "{alpha}"
    );
    let failures = jsonl(&out.join("failures.jsonl"));
    let cause = |url: &str| {
        failures
            .iter()
            .find(|f| f["name"] == url)
            .map(|f| f["cause"].as_str().unwrap().to_string())
            .unwrap_or_else(|| panic!("no failure line for {url}: {failures:?}"))
    };
    assert_eq!(failures.len(), 2, "{failures:?}");
    assert!(cause("s3://corpus/docs/missing.pdf").contains("s3://corpus/docs/missing.pdf: no such object"));
    assert!(cause("s3://corpus/docs/broken.pdf").contains("s3://corpus/docs/broken.pdf"));
    let summary = summary(&out);
    assert_eq!(summary["job"]["inputs"], 5);
    assert_eq!(summary["job"]["not_started"], serde_json::json!([]));
}

#[test]
fn a_run_cut_short_resumes_over_the_same_listing_and_writes_the_rest_once() {
    let s3 = S3Server::start().unwrap();
    let objects: Vec<(String, Vec<u8>)> = (0..5)
        .map(|i| (format!("s3://resume/in/{i}.pdf"), report(&format!("Report {i}"))))
        .collect();
    let refs: Vec<(&str, Vec<u8>)> = objects.iter().map(|(u, b)| (u.as_str(), b.clone())).collect();
    upload(&s3, &refs);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let (code, console) = job(&s3, &out, &["s3://resume/in/", "--limit", "2"]);
    assert_eq!(code, Ok(0), "{console}");
    assert_eq!(written(&out).len(), 2);
    // A plain run into the folder is refused: its journal is not known to
    // be finished (the listing streams).
    let (refused, _) = job(&s3, &out, &["s3://resume/in/"]);
    assert!(
        refused.as_ref().is_err_and(|e| e.contains("--resume")),
        "{refused:?}"
    );
    let (code, console) = job(&s3, &out, &["s3://resume/in/", "--resume"]);
    assert_eq!(code, Ok(0), "{console}");
    assert_eq!(written(&out), keyed(objects.iter().map(|(u, _)| u)), "{console}");
    let summary = summary(&out);
    assert_eq!(summary["job"]["resumed"], 2);
}

#[test]
fn a_bucket_that_does_not_exist_is_an_error_before_any_output() {
    let s3 = S3Server::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let (code, _) = job(&s3, &out, &["s3://no-such-bucket/docs/"]);
    let e = code.unwrap_err();
    assert!(e.contains("s3://no-such-bucket/docs/: listing failed"), "{e}");
    assert!(!out.exists(), "the output folder was made");
}

#[test]
fn the_layout_job_reads_the_same_inputs() {
    let s3 = S3Server::start().unwrap();
    upload(
        &s3,
        &[
            ("s3://layout/in/a.pdf", report("Alpha")),
            ("s3://layout/in/b.txt", b"no".to_vec()),
        ],
    );
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let (code, console) = run_child(
        &s3,
        &out,
        &["doc_layout", "--dpi", "30", "--out"],
        &["s3://layout/in/", "s3://layout/in/gone.pdf"],
    );
    // A failed document makes the status 3, as in doc_ocr.
    assert_eq!(code, Ok(3), "{console}");
    let docs = jsonl(&out.join("documents.jsonl"));
    assert_eq!(docs.len(), 1, "{console}");
    assert_eq!(docs[0]["name"], "s3://layout/in/a.pdf");
    let failures = jsonl(&out.join("failures.jsonl"));
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert_eq!(failures[0]["name"], "s3://layout/in/gone.pdf");
    assert!(
        failures[0]["cause"].as_str().unwrap().contains("no such object"),
        "{failures:?}"
    );
}

#[test]
fn an_input_list_in_the_bucket_names_objects_beside_it_and_their_fields() {
    let s3 = S3Server::start().unwrap();
    let list = concat!(
        "{\"url\": \"docs/a.pdf\", \"lang\": \"en\"}\n",
        "{\"url\": \"s3://lists/elsewhere/b.pdf\", \"lang\": \"fr\"}\n",
        "{\"lang\": \"it\"}\n",
        "{\"url\": \"docs/gone.pdf\"}",
    );
    upload(
        &s3,
        &[
            ("s3://lists/m/docs/a.pdf", report("Alpha")),
            ("s3://lists/elsewhere/b.pdf", report("Beta")),
            ("s3://lists/m/list.jsonl", list.as_bytes().to_vec()),
        ],
    );
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let (code, console) = job(&s3, &out, &["--input-list", "s3://lists/m/list.jsonl"]);
    assert_eq!(code, Ok(3), "{console}");
    let urls = ["s3://lists/m/docs/a.pdf", "s3://lists/elsewhere/b.pdf"];
    assert_eq!(written(&out), keyed(urls), "{console}");
    let docs = jsonl(&out.join("documents.jsonl"));
    let b = docs.iter().find(|d| d["name"] == urls[1]).unwrap();
    assert_eq!(b["metadata"], serde_json::json!({"lang": "fr"}));
    assert!(
        b["page_texts"][0].as_str().unwrap().contains("Beta first page"),
        "{b}"
    );
    let failures = jsonl(&out.join("failures.jsonl"));
    assert_eq!(failures.len(), 2, "{failures:?}");
    let no_url = failures
        .iter()
        .find(|f| f["name"] == "s3://lists/m/list.jsonl:3")
        .unwrap();
    assert!(
        no_url["cause"].as_str().unwrap().contains("line 3: no `url`"),
        "{no_url}"
    );
    assert!(failures.iter().any(|f| f["name"] == "s3://lists/m/docs/gone.pdf"));
    assert_eq!(summary(&out)["job"]["inputs"], 4);

    // A list that is not there is an error before any output.
    let other = dir.path().join("other");
    let (code, _) = job(&s3, &other, &["--input-list", "s3://lists/m/none.jsonl"]);
    let e = code.unwrap_err();
    assert!(
        e.contains("--input-list s3://lists/m/none.jsonl: no such object"),
        "{e}"
    );
    assert!(!other.exists(), "the output folder was made");
}

#[test]
fn parquet_shards_in_the_bucket_give_a_document_per_row() {
    let s3 = S3Server::start().unwrap();
    let ids: Vec<String> = (0..5).map(|i| format!("r{i}")).collect();
    let pdfs: Vec<Vec<u8>> = (0..5).map(|i| report(&format!("Row {i}"))).collect();
    let rows: Vec<rayorch_kit::store::shards::SpecRow> = ids
        .iter()
        .zip(&pdfs)
        .enumerate()
        .map(|(i, (id, pdf))| (id.as_str(), (i != 2).then_some(&pdf[..]), Some("en")))
        .collect();
    let first = rayorch_kit::store::shards::shard_of("pdf", &rows, 2).unwrap();
    upload(
        &s3,
        &[
            ("s3://shards/train/part-0.parquet", first),
            ("s3://shards/train/part-1.parquet", b"PAR1 cut short".to_vec()),
            ("s3://shards/train/readme.md", b"not a shard".to_vec()),
        ],
    );
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let args = ["--input-parquet", "s3://shards/train/", "--bytes-column", "pdf"];
    let (code, console) = job(&s3, &out, &args);
    assert_eq!(code, Ok(3), "{console}");
    // Without a key column: the shard's URL and the row.
    let shard = "s3://shards/train/part-0.parquet";
    let rows = [0, 1, 3, 4].map(|i| format!("{shard}#{i}"));
    assert_eq!(written(&out), keyed(rows), "{console}");
    let docs = jsonl(&out.join("documents.jsonl"));
    let r3 = docs.iter().find(|d| d["name"] == format!("{shard}#3")).unwrap();
    assert!(
        r3["page_texts"][0].as_str().unwrap().contains("Row 3 first page"),
        "{r3}"
    );
    assert_eq!(r3["metadata"], serde_json::json!({"id": "r3", "lang": "en"}));
    let failures = jsonl(&out.join("failures.jsonl"));
    assert_eq!(failures.len(), 2, "{failures:?}");
    assert!(failures.iter().any(|f| f["name"] == format!("{shard}#2")));
    assert!(
        failures
            .iter()
            .any(|f| f["name"] == "s3://shards/train/part-1.parquet")
    );

    // Keyed by the id column and cut short by --limit: --resume over the
    // same shard list writes the rest, each row once.
    let cut = dir.path().join("cut");
    let by_id = [&args[..], &["--key-column", "id"]].concat();
    let (code, console) = job(&s3, &cut, &[&by_id[..], &["--limit", "2"]].concat());
    assert_eq!(code, Ok(0), "{console}");
    assert_eq!(written(&cut), keyed(["r0", "r1"]), "{console}");
    let (code, console) = job(&s3, &cut, &[&by_id[..], &["--resume"]].concat());
    assert_eq!(code, Ok(3), "{console}");
    assert_eq!(written(&cut), keyed(["r0", "r1", "r3", "r4"]), "{console}");
    assert_eq!(summary(&cut)["job"]["resumed"], 2, "{console}");

    // A column the first shard lacks is refused before any output.
    let other = dir.path().join("other");
    let (code, _) = job(
        &s3,
        &other,
        &["--input-parquet", "s3://shards/train/", "--bytes-column", "doc"],
    );
    let e = code.unwrap_err();
    assert!(
        e.contains("--bytes-column doc: the shard has no such column"),
        "{e}"
    );
    assert!(!other.exists(), "the output folder was made");
}

#[test]
fn a_webdataset_shard_in_the_bucket_gives_a_document_per_sample() {
    let s3 = S3Server::start().unwrap();
    let (a, b) = (report("Alpha"), report("Beta"));
    let big_image = vec![0u8; 3 << 20];
    let shard = rayorch_kit::store::tars::tar_of(&[
        ("0001.pdf", &a),
        ("0001.json", br#"{"lang": "en"}"#),
        ("0001.jpg", &big_image),
        ("0002.pdf", &b),
    ])
    .unwrap();
    upload(&s3, &[("s3://wds/train/shard-0000.tar", shard)]);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let (code, console) = job(&s3, &out, &["--input-tar", "s3://wds/train/"]);
    assert_eq!(code, Ok(0), "{console}");
    let url = "s3://wds/train/shard-0000.tar";
    let samples = ["0001", "0002"].map(|k| format!("{url}#{k}"));
    assert_eq!(written(&out), keyed(samples), "{console}");
    let docs = jsonl(&out.join("documents.jsonl"));
    let first = docs.iter().find(|d| d["name"] == format!("{url}#0001")).unwrap();
    assert_eq!(first["metadata"], serde_json::json!({"lang": "en"}));
    assert!(
        first["page_texts"][0]
            .as_str()
            .unwrap()
            .contains("Alpha first page"),
        "{first}"
    );
}

#[test]
fn a_parquet_shard_of_locations_names_objects_beside_it() {
    let s3 = S3Server::start().unwrap();
    let shard = rayorch_kit::store::shards::locations_shard_of(
        "url",
        &[
            ("a", "docs/a.pdf"),
            ("b", "s3://elsewhere/b.pdf"),
            ("c", "docs/none.pdf"),
        ],
    )
    .unwrap();
    upload(
        &s3,
        &[
            ("s3://locs/m/docs/a.pdf", report("Alpha")),
            ("s3://elsewhere/b.pdf", report("Beta")),
            ("s3://locs/m/index.parquet", shard),
        ],
    );
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let args = [
        "--input-parquet",
        "s3://locs/m/index.parquet",
        "--url-column",
        "url",
        "--key-column",
        "id",
    ];
    let (code, console) = job(&s3, &out, &args);
    assert_eq!(code, Ok(3), "{console}");
    // Keyed and named by the key column; the location is fetched.
    assert_eq!(written(&out), keyed(["a", "b"]), "{console}");
    let docs = jsonl(&out.join("documents.jsonl"));
    let a = docs.iter().find(|d| d["name"] == "a").unwrap();
    assert!(
        a["page_texts"][0].as_str().unwrap().contains("Alpha first page"),
        "{a}"
    );
    assert_eq!(a["metadata"], serde_json::json!({"url": "docs/a.pdf"}));
    let failures = jsonl(&out.join("failures.jsonl"));
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert!(
        failures[0]["cause"]
            .as_str()
            .unwrap()
            .contains("s3://locs/m/docs/none.pdf: no such object")
    );
}

#[test]
fn a_shard_written_by_pyarrow_is_read_with_its_types() {
    let s3 = S3Server::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.pdf"), dir.path().join("b.pdf"));
    std::fs::write(&a, report("Alpha")).unwrap();
    std::fs::write(&b, report("Beta")).unwrap();
    let shard = dir.path().join("train-00000-of-00001.parquet");
    let script = format!(
        r#"
import pyarrow as pa, pyarrow.parquet as pq
docs = [open(p, 'rb').read() for p in [{a:?}, {b:?}]]
t = pa.table({{
    'id': pa.array(['x1', 'x2', 'x3'], pa.large_string()),
    'pdf': pa.array(docs + [None], pa.large_binary()),
    'lang': pa.array(['en', 'de', 'en']).dictionary_encode(),
    'pages': pa.array([2, 2, 0], pa.int64()),
    'score': pa.array([0.5, None, 1.0], pa.float32()),
    'tags': pa.array([['a', 'b'], [], None], pa.list_(pa.string())),
}})
pq.write_table(t, {shard:?}, row_group_size=2)
"#
    );
    let pyarrow = rayorch_kit::store::testing::pyarrow().unwrap();
    let py = std::process::Command::new(std::env::var("RAYORCH_PYTHON").unwrap_or_else(|_| "python3".into()))
        .arg("-c")
        .arg(&script)
        .env("PYTHONPATH", &pyarrow)
        .output()
        .unwrap();
    assert!(py.status.success(), "{}", String::from_utf8_lossy(&py.stderr));
    upload(
        &s3,
        &[(
            "s3://datasets/data/train-00000-of-00001.parquet",
            std::fs::read(&shard).unwrap(),
        )],
    );
    let out = dir.path().join("out");
    let args = [
        "--input-parquet",
        "s3://datasets/data/*.parquet",
        "--bytes-column",
        "pdf",
        "--key-column",
        "id",
    ];
    let (code, console) = job(&s3, &out, &args);
    assert_eq!(code, Ok(3), "x3 has no bytes: {console}");
    assert_eq!(written(&out), keyed(["x1", "x2"]), "{console}");
    let docs = jsonl(&out.join("documents.jsonl"));
    let x1 = docs.iter().find(|d| d["name"] == "x1").unwrap();
    assert!(
        x1["page_texts"][0].as_str().unwrap().contains("Alpha first page"),
        "{x1}"
    );
    let meta = &x1["metadata"];
    assert_eq!(
        (&meta["lang"], &meta["pages"], &meta["score"]),
        (&"en".into(), &2.into(), &0.5.into()),
        "{meta}"
    );
    assert!(
        meta["tags"]
            .as_str()
            .is_some_and(|t| t.contains('a') && t.contains('b')),
        "{meta}"
    );
    let x2 = docs.iter().find(|d| d["name"] == "x2").unwrap();
    assert!(x2["metadata"].get("score").is_none(), "a null is left out: {x2}");
    let failures = jsonl(&out.join("failures.jsonl"));
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert!(
        failures[0]["cause"].as_str().unwrap().contains("`pdf` is null"),
        "{failures:?}"
    );
}

/// A started child run of the job, killed if the test gives up on it.
#[cfg(feature = "dist")]
struct Running(Option<std::process::Child>);

#[cfg(feature = "dist")]
impl Running {
    /// Its result and console, waiting at most `limit` (a hung run fails
    /// the test instead of hanging it).
    fn finish(&mut self, what: &str, limit: std::time::Duration) -> (Result<u8, String>, String) {
        let mut child = self.0.take().unwrap();
        let start = std::time::Instant::now();
        while child.try_wait().unwrap().is_none() {
            if start.elapsed() > limit {
                let _ = child.kill();
                let out = child.wait_with_output().unwrap();
                panic!(
                    "{what} did not end within {limit:?}:\n{}\n{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        common::child_result(&child.wait_with_output().unwrap())
    }
}

#[cfg(feature = "dist")]
impl Drop for Running {
    fn drop(&mut self) {
        if let Some(c) = &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A distributed run with nothing shared but the broker and the store: the
/// owner and two workers are processes in folders of their own, the inputs
/// a prefix in the bucket (each document travels as its URL; a worker
/// reads the object itself), the page images through a payload prefix in
/// the same store (`--payload-store`) instead of the broker. It writes
/// what one process writes over the same inputs: the same documents, page
/// texts and failures, each once, with recognition on the workers and the
/// images in the store.
#[cfg(feature = "dist")]
#[test]
fn a_distributed_run_over_the_bucket_shares_no_folder_and_writes_what_one_process_writes() {
    let s3 = S3Server::start().unwrap();
    upload(
        &s3,
        &[
            ("s3://corpus/docs/a.pdf", report("Alpha")),
            ("s3://corpus/docs/b.pdf", report("Beta")),
            ("s3://corpus/docs/broken.pdf", b"%PDF-1.4 not really".to_vec()),
        ],
    );
    let nats = rayorch_dist::server::NatsServer::start().unwrap();
    let url = nats.url();
    let folders: Vec<tempfile::TempDir> = (0..4).map(|_| tempfile::tempdir().unwrap()).collect();
    // 72 dpi: each page image (~1.4 MB) is over the inline limit, so it
    // goes through the payload store.
    let flags = ["--dpi", "72", "--force-ocr", "--nats", &url, "--insecure"];
    let store = ["--payload-store", "s3://payloads/runs/"];
    let start = |argv: Vec<&str>, dir: &Path| {
        let argv: Vec<String> = argv.into_iter().map(String::from).collect();
        let mut c = s3.child_command(common::CHILD, &argv).unwrap();
        Running(Some(c.current_dir(dir).spawn().unwrap()))
    };
    let mut workers: Vec<Running> = folders[1..3]
        .iter()
        .map(|d| {
            let mut argv = vec!["doc_ocr"];
            argv.extend(flags);
            argv.extend(store);
            argv.extend(["--role", "worker", "--threads", "1"]);
            start(argv, d.path())
        })
        .collect();
    let dist = folders[0].path().join("out");
    let dist_out = dist.display().to_string();
    let mut owner = vec!["doc_ocr", "--no-progress", "--out", &dist_out];
    owner.extend(flags);
    owner.extend(store);
    owner.push("s3://corpus/docs/");
    let limit = std::time::Duration::from_secs(600);
    let (code, console) = start(owner, folders[0].path()).finish("the owner", limit);
    assert_eq!(code, Ok(3), "one document fails (exit 3): {console}");
    let mut stored = 0;
    for (i, w) in workers.iter_mut().enumerate() {
        let (code, console) = w.finish("a worker", limit);
        assert_eq!(code, Ok(0), "worker {i} ends with the run: {console}");
        let line = console
            .lines()
            .find_map(|l| l.split_once("doc_ocr worker: ").map(|(_, said)| said))
            .unwrap_or_else(|| panic!("worker {i} said what it ran: {console}"));
        let n = line
            .split(" grains, ")
            .nth(1)
            .and_then(|r| r.split(' ').next())
            .unwrap();
        stored += n.parse::<u64>().unwrap();
    }
    // Four page images of ~1.4 MB, at least, through the store.
    assert!(
        stored > 4_000_000,
        "page images went through the payload store: {stored} bytes"
    );

    let local = folders[3].path().join("out");
    let (code, console) = run_child(
        &s3,
        &local,
        &["doc_ocr", "--no-progress", "--out"],
        &[
            "--dpi",
            "72",
            "--force-ocr",
            "--threads",
            "1",
            "s3://corpus/docs/",
        ],
    );
    assert_eq!(code, Ok(3), "{console}");

    let docs = |out: &Path| {
        let mut v = jsonl(&out.join("documents.jsonl"));
        v.sort_by_key(|d| d["key"].as_u64());
        v
    };
    let (one, many) = (docs(&local), docs(&dist));
    assert_eq!(
        written(&dist),
        keyed(["s3://corpus/docs/a.pdf", "s3://corpus/docs/b.pdf"])
    );
    assert_eq!(written(&local), written(&dist));
    for (x, y) in one.iter().zip(&many) {
        for field in ["name", "pages", "markdown", "page_texts", "page_sources"] {
            assert_eq!(x[field], y[field], "{}: {field}", x["name"]);
        }
    }
    let failed = |out: &Path| {
        jsonl(&out.join("failures.jsonl"))
            .iter()
            .map(|f| f["name"].as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(failed(&dist), ["s3://corpus/docs/broken.pdf"]);
    assert_eq!(failed(&local), failed(&dist));

    let s = summary(&dist);
    let recognized: Vec<&str> = s["workers"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["call"] == "recognize")
        .map(|r| r["worker"].as_str().unwrap())
        .collect();
    assert!(
        !recognized.is_empty() && !recognized.contains(&"owner"),
        "recognition ran on the workers: {recognized:?}"
    );
    // The workers' folders hold nothing the run wrote.
    for d in &folders[1..3] {
        assert_eq!(
            std::fs::read_dir(d.path()).unwrap().count(),
            0,
            "{}",
            d.path().display()
        );
    }
}
