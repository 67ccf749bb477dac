//! Inputs from object storage against the same files on local disk
//! (BENCHMARKS.md, "Inputs from object storage").
//!
//! 1. The OCR job end to end: `BENCH_DOCS` one-page text PDFs (default
//!    1,000; each page read from its text layer, the cheapest per-page
//!    path, so the store is as exposed as it can be), in a bucket of a
//!    local SeaweedFS S3 server and in a local folder. `doc_ocr` runs over
//!    each, alternating, `BENCH_ROUNDS` rounds (default 3), each in a child
//!    process with the server's credentials in its environment (as a user
//!    runs it). Reported: time to the first written document and pages/s
//!    (the job's `summary.json`), peak RSS (the child's `VmHWM`), and the
//!    store/local ratios, medians of the rounds.
//! 2. The listing alone: the kit's streaming listing and fetch Call over
//!    1,000 and 10,000 small objects, each in a child process: peak RSS
//!    and objects/s (the listing must hold a page of names, not the
//!    listing).
//!
//! 3. Outputs to object storage (BENCHMARKS.md, "Outputs on object
//!    storage"): the same job over the local files, writing its outputs to
//!    `s3://bench/out-N/` (committed segments, `--out URL`) and to a local
//!    folder, alternating; reported: the child's wall time, pages/s and
//!    the objects the outputs made.
//! 4. Parquet shards (BENCHMARKS.md, "Parquet shards"): the same PDFs as
//!    the rows of one shard in the bucket (bytes column `pdf`, key column
//!    `id`, 64 rows per row group), read with `--input-parquet`, against
//!    the local folder, alternating; then the peak RSS of the job over a
//!    shard of `BENCH_DOCS` rows against one of ten times as many.
//!
//! `cargo bench -p rayorch-doc --features store --bench store_inputs`
//! (env `BENCH_DOCS`, `BENCH_ROUNDS`, `BENCH_FETCH` the job's
//! `--fetch-concurrency`, default the job's; `BENCH_LISTING`, default
//! `1000,10000`; `BENCH_PARTS`, default `inputs,listing,outputs,shards`). The
//! machine's load is printed before and after.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use futures::StreamExt;
use rayorch::sink::Callback;
use rayorch::{Call, Plan, RootOutcome, Runner, domain};
use rayorch_kit::store::testing::S3Server;
use rayorch_kit::store::{Fetch, Fetched, Object, Stores, list};
use rayorch_testdata::pdfgen::text_pdf;

domain!(Obj);

fn env_num(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// This process's peak resident set, KiB (`VmHWM`).
fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .trim()
        .to_string()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// In a child: run what `BENCH_STORE_CHILD` says and print one JSON line.
fn child(what: &str) {
    let spec: serde_json::Value = serde_json::from_str(what).unwrap();
    match spec["kind"].as_str().unwrap() {
        "job" => {
            let argv: Vec<String> = serde_json::from_value(spec["argv"].clone()).unwrap();
            let code = rayorch_doc::ocr::run_from(argv).unwrap();
            println!(
                "BENCH {}",
                serde_json::json!({"exit": code, "peak_rss_kib": peak_rss_kib()})
            );
        }
        _ => {
            let prefix = spec["prefix"].as_str().unwrap().to_string();
            let stores = Stores::new(rayorch_kit::store::StoreOptions::default());
            let s2 = stores.clone();
            let fetch = Call::new_async_records("fetch", move || Ok(Fetch::new(s2.clone())))
                .batch_size(16)
                .concurrency(16);
            let size = Call::map("size", |f: Fetched| f.bytes.len() as u64);
            let (plan, out) = Plan::build(|b| {
                let objects = b.source::<Obj, Object>();
                b.output(size.apply(fetch.apply(objects)))
            })
            .unwrap();
            let roots = list(stores, vec![prefix], |_| true).map(|r| {
                let o = r.unwrap();
                (o.key(), o)
            });
            let (mut n, mut bytes) = (0u64, 0u64);
            let t = Instant::now();
            Runner::new(&plan)
                .window(64)
                .run_stream(
                    roots,
                    Callback(|o: &RootOutcome| {
                        n += 1;
                        bytes += o.get(out).present().unwrap_or(0);
                    }),
                )
                .unwrap();
            let s = t.elapsed().as_secs_f64();
            println!(
                "BENCH {}",
                serde_json::json!({"objects": n, "bytes": bytes, "objects_per_s": n as f64 / s, "peak_rss_kib": peak_rss_kib()})
            );
        }
    }
}

/// Run a child with `spec` and the server's environment; its JSON line.
fn run_child(s3: &S3Server, spec: serde_json::Value) -> serde_json::Value {
    let out = Command::new(std::env::current_exe().unwrap())
        .envs(s3.env())
        .env("BENCH_STORE_CHILD", spec.to_string())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("BENCH "))
        .unwrap_or_else(|| {
            panic!(
                "the child printed no result:\n{stdout}\n{}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
    serde_json::from_str(line).unwrap()
}

/// One run of the job over `input` (inputs and flags, split at spaces)
/// into `out` (a folder, emptied first, or an `s3://` URL): (first written
/// s, pages/s, peak RSS MiB, the child's wall s, its summary).
fn job(
    s3: &S3Server,
    input: &str,
    out: &str,
    fetch: Option<usize>,
) -> (f64, f64, f64, f64, serde_json::Value) {
    let url = out.starts_with("s3://");
    if !url {
        let _ = std::fs::remove_dir_all(out);
    }
    let mut argv = vec![
        "doc_ocr".to_string(),
        "--no-progress".into(),
        "--out".into(),
        out.to_string(),
    ];
    argv.extend(input.split(' ').map(str::to_string));
    if let Some(f) = fetch {
        argv.extend(["--fetch-concurrency".into(), f.to_string()]);
    }
    let t = Instant::now();
    let r = run_child(s3, serde_json::json!({"kind": "job", "argv": argv}));
    let wall = t.elapsed().as_secs_f64();
    assert_eq!(r["exit"], 0, "{r}");
    let text = if url {
        let runs = s3.list(&format!("{}runs/", out)).unwrap();
        let at = runs.iter().find(|u| u.ends_with("/summary.json")).unwrap();
        String::from_utf8(s3.get(at).unwrap()).unwrap()
    } else {
        std::fs::read_to_string(Path::new(out).join("summary.json")).unwrap()
    };
    let summary: serde_json::Value = serde_json::from_str(&text).unwrap();
    let job = &summary["job"];
    (
        job["first_written_s"].as_f64().unwrap(),
        job["pages_per_s"].as_f64().unwrap(),
        r["peak_rss_kib"].as_f64().unwrap() / 1024.0,
        wall,
        summary,
    )
}

fn main() {
    if let Ok(what) = std::env::var("BENCH_STORE_CHILD") {
        return child(&what);
    }
    let (docs, rounds) = (env_num("BENCH_DOCS", 1000), env_num("BENCH_ROUNDS", 3));
    let fetch: Option<usize> = std::env::var("BENCH_FETCH").ok().and_then(|v| v.parse().ok());
    let s3 = S3Server::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("local");
    std::fs::create_dir_all(&local).unwrap();
    println!("load before: {}", loadavg());

    // 1. The job over the store and over local files.
    let pdfs: Vec<(String, Vec<u8>)> = (0..docs)
        .map(|i| {
            let text = vec![format!("Document {i} of the corpus"), "A line of its text".into()];
            (format!("d{i:05}.pdf"), text_pdf(&[text], 12.0))
        })
        .collect();
    let t = Instant::now();
    let objects: Vec<(String, &[u8])> = pdfs
        .iter()
        .map(|(n, b)| (format!("s3://bench/docs/{n}"), &b[..]))
        .collect();
    let refs: Vec<(&str, &[u8])> = objects.iter().map(|(u, b)| (u.as_str(), *b)).collect();
    s3.put(&refs).unwrap();
    for (n, b) in &pdfs {
        std::fs::write(local.join(n), b).unwrap();
    }
    println!(
        "{docs} one-page text PDFs uploaded and written locally in {:.1} s; fetch concurrency {}",
        t.elapsed().as_secs_f64(),
        fetch.map_or_else(|| "the job's default".to_string(), |f| f.to_string())
    );
    let parts = std::env::var("BENCH_PARTS").unwrap_or_else(|_| "inputs,listing,outputs,shards".into());
    let (mut store_runs, mut local_runs) = (Vec::new(), Vec::new());
    for round in (0..rounds).filter(|_| parts.contains("inputs")) {
        // Alternate which side goes first.
        for from_store in sides(round) {
            let (input, runs) = if from_store {
                ("s3://bench/docs/".to_string(), &mut store_runs)
            } else {
                (local.display().to_string(), &mut local_runs)
            };
            let out = dir.path().join("out").display().to_string();
            let r = job(&s3, &input, &out, fetch);
            println!(
                "round {round} {:>5}: first document written after {:.2} s, {:.1} pages/s, peak RSS {:.0} MiB",
                if from_store { "store" } else { "local" },
                r.0,
                r.1,
                r.2
            );
            runs.push((r.0, r.1, r.2));
        }
    }
    if parts.contains("inputs") {
        inputs_medians(rounds, &store_runs, &local_runs);
    }
    if parts.contains("outputs") {
        outputs(&s3, &local, dir.path(), rounds);
    }
    if parts.contains("listing") {
        listing(&s3);
    }
    if parts.contains("shards") {
        shards(&s3, &local, dir.path(), &pdfs, rounds);
    }
    println!("load after: {}", loadavg());
}

/// Part 3: the job's outputs to the store against a local folder.
fn outputs(s3: &S3Server, local: &Path, dir: &Path, rounds: usize) {
    s3.put(&[("s3://bench/README", b"outputs")]).unwrap();
    let (mut store, mut disk) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        for to_store in sides(round) {
            let out = match to_store {
                true => format!("s3://bench/out-{round}/"),
                false => dir.join("out").display().to_string(),
            };
            let r = job(s3, &local.display().to_string(), &out, None);
            let objects = match to_store {
                true => s3.list(&format!("{out}data/")).unwrap().len(),
                false => 0,
            };
            println!(
                "round {round} {:>5}: wall {:.2} s, {:.1} pages/s{}",
                if to_store { "store" } else { "local" },
                r.3,
                r.1,
                match to_store {
                    true => format!(
                        ", {} commits, {objects} segment objects, {} bytes",
                        r.4["job"]["outputs"]["commits"], r.4["job"]["outputs"]["segment_bytes"]
                    ),
                    false => String::new(),
                }
            );
            match to_store {
                true => store.push(r.3),
                false => disk.push(r.3),
            }
        }
    }
    let ratios: Vec<f64> = store.iter().zip(&disk).map(|(s, l)| s / l).collect();
    println!(
        "outputs, medians of {rounds}: wall store {:.2} s / local {:.2} s; store/local {:.3} (median of per-round ratios)",
        median(store.clone()),
        median(disk.clone()),
        median(ratios)
    );
}

/// Part 4: the job over Parquet shards in the store against the same PDFs
/// in a local folder, then peak RSS over a shard of 1× and 10× the rows.
fn shards(s3: &S3Server, local: &Path, dir: &Path, pdfs: &[(String, Vec<u8>)], rounds: usize) {
    let shard = |copies: usize| {
        let ids: Vec<String> = (0..copies)
            .flat_map(|c| pdfs.iter().map(move |(n, _)| format!("{c}-{n}")))
            .collect();
        let rows: Vec<rayorch_kit::store::shards::SpecRow> = ids
            .iter()
            .zip(pdfs.iter().cycle())
            .map(|(id, (_, b))| (id.as_str(), Some(&b[..]), Some("en")))
            .collect();
        rayorch_kit::store::shards::shard_of("pdf", &rows, 64).unwrap()
    };
    let one = shard(1);
    println!(
        "shard of {} rows: {:.1} MiB",
        pdfs.len(),
        one.len() as f64 / (1 << 20) as f64
    );
    s3.put(&[("s3://bench/shards/train-0.parquet", &one[..])])
        .unwrap();
    let flags = "--input-parquet s3://bench/shards/ --bytes-column pdf --key-column id";
    let out = dir.join("out").display().to_string();
    let (mut store, mut disk) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        for from_shard in sides(round) {
            let input = match from_shard {
                true => flags.to_string(),
                false => local.display().to_string(),
            };
            let r = job(s3, &input, &out, None);
            println!(
                "round {round} {:>5}: {:.1} pages/s, peak RSS {:.0} MiB",
                if from_shard { "shard" } else { "local" },
                r.1,
                r.2
            );
            match from_shard {
                true => store.push((r.1, r.2)),
                false => disk.push((r.1, r.2)),
            }
        }
    }
    let ratios: Vec<f64> = store.iter().zip(&disk).map(|(s, l)| s.0 / l.0).collect();
    println!(
        "shards, medians of {rounds}: pages/s shard {:.1} / local {:.1} (shard/local {:.3}, median of per-round ratios); peak RSS shard {:.0} / local {:.0} MiB",
        median(store.iter().map(|r| r.0).collect()),
        median(disk.iter().map(|r| r.0).collect()),
        median(ratios),
        median(store.iter().map(|r| r.1).collect()),
        median(disk.iter().map(|r| r.1).collect()),
    );
    let ten = shard(10);
    println!(
        "shard of {} rows: {:.1} MiB",
        pdfs.len() * 10,
        ten.len() as f64 / (1 << 20) as f64
    );
    s3.put(&[("s3://bench/shards10/train-0.parquet", &ten[..])])
        .unwrap();
    let flags10 = "--input-parquet s3://bench/shards10/ --bytes-column pdf --key-column id";
    let small = job(s3, flags, &out, None);
    let big = job(s3, flags10, &out, None);
    println!(
        "peak RSS over {} rows {:.1} MiB, over {} rows {:.1} MiB: {:.3}",
        pdfs.len(),
        small.2,
        pdfs.len() * 10,
        big.2,
        big.2 / small.2
    );
    // The control: the same job over local folders of 1× and 10× the
    // documents (how the job's own memory grows with the run's length).
    let ten_dir = dir.join("local10");
    std::fs::create_dir_all(&ten_dir).unwrap();
    for c in 0..10 {
        for (n, b) in pdfs {
            std::fs::write(ten_dir.join(format!("{c}-{n}")), b).unwrap();
        }
    }
    let small = job(s3, &local.display().to_string(), &out, None);
    let big = job(s3, &ten_dir.display().to_string(), &out, None);
    println!(
        "control, local folders: peak RSS over {} documents {:.1} MiB, over {} {:.1} MiB: {:.3}",
        pdfs.len(),
        small.2,
        pdfs.len() * 10,
        big.2,
        big.2 / small.2
    );
}

/// Which side of an A/B round runs first: `true` first in even rounds.
fn sides(round: usize) -> [bool; 2] {
    let even = round.is_multiple_of(2);
    [even, !even]
}

/// Part 1's medians.
fn inputs_medians(rounds: usize, store_runs: &[(f64, f64, f64)], local_runs: &[(f64, f64, f64)]) {
    let col = |runs: &[(f64, f64, f64)], f: fn(&(f64, f64, f64)) -> f64| median(runs.iter().map(f).collect());
    let first = (col(store_runs, |r| r.0), col(local_runs, |r| r.0));
    let rate = (col(store_runs, |r| r.1), col(local_runs, |r| r.1));
    let ratios: Vec<f64> = store_runs
        .iter()
        .zip(local_runs)
        .map(|(s, l)| s.1 / l.1)
        .collect();
    println!(
        "medians of {rounds}: first document store {:.2} s / local {:.2} s (store/local {:.3}); pages/s store {:.1} / local {:.1} (store/local {:.3}, median of per-round ratios)",
        first.0,
        first.1,
        first.0 / first.1,
        rate.0,
        rate.1,
        median(ratios)
    );
}

/// Part 2: the listing and fetch alone, peak RSS over 1k and 10k objects.
fn listing(s3: &S3Server) {
    let sizes: Vec<usize> = std::env::var("BENCH_LISTING")
        .unwrap_or_else(|_| "1000,10000".into())
        .split(',')
        .filter_map(|v| v.trim().parse().ok())
        .collect();
    let body = vec![b'x'; 2048];
    let mut rss = Vec::new();
    for n in sizes {
        // Each listing is its own prefix; the objects are uploaded once.
        let names: Vec<String> = (0..n)
            .map(|i| format!("s3://bench/list{n}/o{i:06}.bin"))
            .collect();
        let refs: Vec<(&str, &[u8])> = names.iter().map(|u| (u.as_str(), &body[..])).collect();
        let t = Instant::now();
        s3.put(&refs).unwrap();
        let r = run_child(
            s3,
            serde_json::json!({"kind": "listing", "prefix": format!("s3://bench/list{n}/")}),
        );
        assert_eq!(r["objects"], n);
        let mib = r["peak_rss_kib"].as_f64().unwrap() / 1024.0;
        println!(
            "listing + fetch of {n} objects (uploaded in {:.1} s): {:.0} objects/s, peak RSS {mib:.1} MiB",
            t.elapsed().as_secs_f64(),
            r["objects_per_s"].as_f64().unwrap()
        );
        rss.push((n, mib));
    }
    if let (Some(a), Some(b)) = (rss.first(), rss.last())
        && rss.len() > 1
    {
        println!("peak RSS {} vs {} objects: {:.3}", b.0, a.0, b.1 / a.1);
    }
}
