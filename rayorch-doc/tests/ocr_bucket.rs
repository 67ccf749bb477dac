//! The OCR job with its outputs in object storage (`--out s3://…`,
//! `--features store`), against a real S3 server (SeaweedFS from its pinned
//! wheel): a run `kill -9`ed at several points and resumed from a fresh
//! temporary directory, with nothing but the URL, holds every document
//! exactly once across its committed segments, with the text of an
//! uninterrupted run, and no segment that no record names; a plain run into
//! a URL holding commits is refused, as is `--force`.
//!
//! Each run of the job is a child process of this test binary (the ignored
//! test `common::child_runs_the_job`): the job reads the server's address and
//! credentials from its environment, which a test may not set in its own.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rayorch_kit::store::commits::Committed;
use rayorch_kit::store::outputs::read_committed;
use rayorch_kit::store::testing::S3Server;
use rayorch_testdata::pdfgen::text_pdf;

const DOCS: usize = 10;

/// The job's command line over the corpus, into `out`, then `args`.
fn argv(out: &str, args: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = [
        "doc_ocr",
        "--no-progress",
        "--dpi",
        "10",
        "--window",
        "2",
        "s3://corpus/docs/",
        "--out",
        out,
    ]
    .iter()
    .map(|a| a.to_string())
    .collect();
    v.extend(args.iter().map(|a| a.to_string()));
    v
}

/// Start the job in a child process (from `cwd`, a folder of its own).
fn spawn(s3: &S3Server, argv: &[String], cwd: &Path) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            common::CHILD,
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .envs(s3.env())
        .env("RAYORCH_TEST_ARGV", serde_json::to_string(argv).unwrap())
        .current_dir(cwd)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Run the job to its end: its exit status (`Err`: the error it ended
/// with) and its console.
fn run(s3: &S3Server, argv: &[String]) -> (Result<u8, String>, String) {
    let cwd = tempfile::tempdir().unwrap();
    let out = spawn(s3, argv, cwd.path()).wait_with_output().unwrap();
    common::child_result(&out)
}

fn committed(s3: &S3Server, prefix: &str) -> Committed {
    read_committed(&format!("s3://out/{prefix}/"), &S3Server::options(&s3.endpoint())).unwrap()
}

/// key → page texts of every document in the committed JSONL segments
/// (panics on a document in two of them).
fn documents(s3: &S3Server, prefix: &str) -> BTreeMap<u64, serde_json::Value> {
    let mut docs = BTreeMap::new();
    for seg in committed(s3, prefix).segments("documents.jsonl") {
        let bytes = s3.get(&format!("s3://out/{prefix}/{seg}")).unwrap();
        for line in String::from_utf8(bytes).unwrap().lines() {
            let d: serde_json::Value = serde_json::from_str(line).unwrap();
            let k = d["key"].as_u64().unwrap();
            assert!(
                docs.insert(k, d["page_texts"].clone()).is_none(),
                "document {k} is in two segments"
            );
        }
    }
    docs
}

/// Every segment object under the prefix's `data/` (relative keys).
fn data_objects(s3: &S3Server, prefix: &str) -> BTreeSet<String> {
    let base = format!("s3://out/{prefix}/");
    s3.list(&format!("{base}data/"))
        .unwrap()
        .into_iter()
        .map(|u| u.strip_prefix(&base).unwrap().to_string())
        .collect()
}

fn corpus(s3: &S3Server) {
    let objects: Vec<(String, Vec<u8>)> = (0..DOCS)
        .map(|i| {
            let pdf = text_pdf(
                &[
                    vec![format!("Report {i} first page")],
                    vec![format!("Page two of {i}")],
                ],
                12.0,
            );
            (format!("s3://corpus/docs/{i:02}.pdf"), pdf)
        })
        .collect();
    let refs: Vec<(&str, &[u8])> = objects.iter().map(|(u, b)| (u.as_str(), &b[..])).collect();
    s3.put(&refs).unwrap();
    // The output bucket exists once something is in it.
    s3.put(&[("s3://out/README", b"outputs")]).unwrap();
}

#[test]
fn a_run_killed_at_any_point_resumes_from_the_bucket_alone_with_each_document_once() {
    let s3 = S3Server::start().unwrap();
    corpus(&s3);
    // The reference: one uninterrupted run.
    let (code, console) = run(&s3, &argv("s3://out/reference/", &[]));
    assert_eq!(code, Ok(0), "{console}");
    let reference = documents(&s3, "reference");
    assert_eq!(reference.len(), DOCS, "{console}");
    assert!(
        console.contains(&format!("{DOCS} documents in 1 commit records, each once")),
        "{console}"
    );

    let mut killed_mid_run = 0;
    for (i, kill_after) in [1usize, 4, 7].into_iter().enumerate() {
        let prefix = format!("killed-{i}");
        let url = format!("s3://out/{prefix}/");
        // A commit after every document, so that a kill lands between them.
        let args = argv(&url, &["--commit-every-s", "0"]);
        let cwd = tempfile::tempdir().unwrap();
        let mut child = spawn(&s3, &args, cwd.path());
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let n = committed(&s3, &prefix).records.len();
            if n >= kill_after || child.try_wait().unwrap().is_some() {
                break;
            }
            assert!(Instant::now() < deadline, "no commit after 120 s");
            std::thread::sleep(Duration::from_millis(10));
        }
        let finished = child.try_wait().unwrap().is_some();
        let _ = child.kill(); // SIGKILL
        let _ = child.wait();
        let before = committed(&s3, &prefix).roots().len();
        killed_mid_run += usize::from(!finished && before < DOCS);
        eprintln!(
            "kill after {kill_after} commits: {before} documents committed, the job had ended: {finished}"
        );

        // Resume from another empty folder: the URL is all it has.
        let (code, console) = run(&s3, &argv(&url, &["--resume", "--commit-every-s", "0"]));
        assert_eq!(code, Ok(0), "kill after {kill_after}: {console}");
        let docs = documents(&s3, &prefix);
        assert_eq!(
            docs, reference,
            "kill after {kill_after}: the text of an uninterrupted run"
        );
        let c = committed(&s3, &prefix);
        assert_eq!(c.roots().len(), DOCS);
        // No segment that no record names is left (a killed writer's
        // uncommitted ones went with the resume's first commit).
        let named: BTreeSet<String> = c
            .records
            .iter()
            .flat_map(|r| r.segments.iter().map(|s| s.key.clone()))
            .collect();
        assert_eq!(data_objects(&s3, &prefix), named, "kill after {kill_after}");
        assert!(
            console.contains(&format!("{DOCS} documents in")),
            "kill after {kill_after}: {console}"
        );
    }
    assert!(
        killed_mid_run > 0,
        "every run ended before its kill: nothing was tested"
    );

    // A plain run into a URL holding commits is refused, and so is --force.
    let (refused, _) = run(&s3, &argv("s3://out/reference/", &[]));
    assert!(
        refused.as_ref().is_err_and(|e| e.contains("--resume")),
        "{refused:?}"
    );
    let (forced, _) = run(&s3, &argv("s3://out/reference/", &["--force"]));
    assert!(
        forced.as_ref().is_err_and(|e| e.contains("never deleted")),
        "{forced:?}"
    );
    assert_eq!(
        committed(&s3, "reference").records.len(),
        1,
        "nothing was written"
    );
}

/// The README's recipe for reading committed rows, run as written (on a
/// `file://` output: the same layout as in a bucket) with the pinned
/// pyarrow: it reads exactly the documents the commit records name.
#[test]
fn the_readme_recipe_reads_exactly_the_committed_rows() {
    let readme = include_str!("../../README.md");
    let start = readme.find("```python\n").expect("the README has the recipe") + "```python\n".len();
    let recipe = &readme[start..start + readme[start..].find("```").unwrap()];
    assert!(recipe.contains("s3://bucket/results"), "{recipe}");

    let dir = tempfile::tempdir().unwrap();
    let url = format!("file://{}/results", dir.path().display());
    // Two commits (one per document after the first), over the samples.
    let samples = rayorch_doc::ocr::cli::samples_dir().display().to_string();
    let argv = [
        "doc_ocr",
        samples.as_str(),
        "--no-progress",
        "--dpi",
        "10",
        "--limit",
        "4",
        "--commit-every-s",
        "0",
        "--out",
        url.as_str(),
    ];
    rayorch_doc::ocr::run_from(argv).unwrap();
    let committed = read_committed(&format!("{url}/"), &Default::default()).unwrap();
    // The keys the JSONL segments hold are the rows the Parquet ones do.
    let mut want: Vec<u64> = Vec::new();
    for seg in committed.segments("documents.jsonl") {
        let text = std::fs::read_to_string(dir.path().join("results").join(&seg)).unwrap();
        want.extend(text.lines().map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["key"]
                .as_u64()
                .unwrap()
        }));
    }
    want.sort_unstable();
    assert!(!want.is_empty() && committed.records.len() > 1, "{committed:?}");

    let script = format!(
        "{}\nprint(sorted(table.column('key').to_pylist()))\n",
        recipe.replace("s3://bucket/results", &url)
    );
    let pyarrow = rayorch_kit::store::testing::pyarrow().unwrap();
    let out = Command::new(std::env::var("RAYORCH_PYTHON").unwrap_or_else(|_| "python3".into()))
        .arg("-c")
        .arg(&script)
        .env("PYTHONPATH", &pyarrow)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{script}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let keys: Vec<u64> = serde_json::from_str(String::from_utf8_lossy(&out.stdout).trim()).unwrap();
    assert_eq!(keys, want);
}

/// The layout job commits the same way: documents (with their Markdown),
/// regions and region rows per commit; a plain rerun is refused and a
/// resume finds nothing left.
#[test]
fn the_layout_job_commits_its_outputs_once_and_resumes_from_them() {
    let s3 = S3Server::start().unwrap();
    corpus(&s3);
    let layout = |extra: &[&str]| {
        let mut argv: Vec<String> = [
            "doc_layout",
            "--dpi",
            "40",
            "--commit-every-s",
            "0",
            "--out",
            "s3://out/layout/",
            "s3://corpus/docs/",
        ]
        .iter()
        .map(|a| a.to_string())
        .collect();
        argv.extend(extra.iter().map(|a| a.to_string()));
        run(&s3, &argv)
    };
    let (code, console) = layout(&[]);
    assert_eq!(code, Ok(0), "{console}");
    assert!(
        console.contains(&format!("{DOCS} documents in {DOCS} commit records, each once")),
        "{console}"
    );
    let c = committed(&s3, "layout");
    let kinds: BTreeSet<&str> = c
        .records
        .iter()
        .flat_map(|r| r.segments.iter().map(|s| s.kind.as_str()))
        .collect();
    assert_eq!(
        kinds,
        ["documents.jsonl", "regions.jsonl", "regions.parquet"].into(),
        "{c:?}"
    );
    let seg = &c.segments("documents.jsonl")[0];
    let line = String::from_utf8(s3.get(&format!("s3://out/layout/{seg}")).unwrap()).unwrap();
    let doc: serde_json::Value = serde_json::from_str(line.trim()).unwrap();
    let name = doc["name"].as_str().unwrap();
    assert!(
        doc["markdown"]
            .as_str()
            .unwrap()
            .starts_with(&format!("# {name}")),
        "the Markdown is in the line: {doc}"
    );

    let (refused, _) = layout(&[]);
    assert!(
        refused.as_ref().is_err_and(|e| e.contains("--resume")),
        "{refused:?}"
    );
    let (code, console) = layout(&["--resume"]);
    assert_eq!(code, Ok(0), "{console}");
    assert!(console.contains("(this run: 0 commits, 0 documents"), "{console}");
}

/// Two resumes of one killed run, started together: the store gives each
/// commit number to one of them, so every document is committed once (with
/// the text of an uninterrupted run); a resume that loses a number stops
/// with an error that says another process writes the run.
#[test]
fn two_resumes_at_once_commit_each_document_once() {
    let s3 = S3Server::start().unwrap();
    corpus(&s3);
    let (code, console) = run(&s3, &argv("s3://out/reference/", &[]));
    assert_eq!(code, Ok(0), "{console}");
    let reference = documents(&s3, "reference");
    let url = "s3://out/raced/";
    let cwd = tempfile::tempdir().unwrap();
    let mut first = spawn(&s3, &argv(url, &["--commit-every-s", "0"]), cwd.path());
    while committed(&s3, "raced").records.len() < 2 && first.try_wait().unwrap().is_none() {
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = first.kill();
    let _ = first.wait();
    let resume = argv(url, &["--resume", "--commit-every-s", "0"]);
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let racers = [spawn(&s3, &resume, a.path()), spawn(&s3, &resume, b.path())];
    let results: Vec<(Result<u8, String>, String)> = racers
        .into_iter()
        .map(|c| common::child_result(&c.wait_with_output().unwrap()))
        .collect();
    for (r, console) in &results {
        match r {
            Ok(code) => assert_eq!(*code, 0, "{console}"),
            Err(e) => assert!(e.contains("another process"), "{e}"),
        }
    }
    assert!(results.iter().any(|(r, _)| r.is_ok()), "{results:?}");
    assert_eq!(
        documents(&s3, "raced"),
        reference,
        "each document once, with its text"
    );
    eprintln!(
        "the two resumes ended: {:?}",
        results.iter().map(|(r, _)| r.clone()).collect::<Vec<_>>()
    );
}
