//! Scale-out benchmark: a long-tailed document workload with simulated GPU
//! OCR (sleep `a + b·n` per batch of n pages) through 1 owner + K worker
//! processes on loopback, against the single-process runner with the same
//! number of OCR slots; plus the control-plane CPU cost per grain (owner and
//! nats-server, from `/proc/<pid>/stat`) at several batch sizes with zero
//! stage cost, and the spread of one 427-page document over the workers.
//!
//! `cargo bench -p rayorch-dist --bench dist_longtail -- [--docs N] [--workers 2,4]`
//!
//! LB is the OCR lower bound `(⌈P/B⌉·a + b·P) / K` for P pages on K slots;
//! `lb/wall` near 1 means the slots never idled. Prints one JSON line per
//! measurement with `/proc/loadavg` (the machine is shared: compare ratios
//! taken within one run, not absolute figures).

use std::time::{Duration, Instant};

use futures::StreamExt;
use rayorch_dist::server::NatsServer;
use rayorch_dist::{Codecs, DistConfig, Owner, Storage};
use rayorch_runtime::sink::Callback;
use rayorch_runtime::{Call, Outcome, Output, Plan, RootOutcome, Runner, expand, reduce};

rayorch_runtime::domain!(Doc);
rayorch_runtime::domain!(Page: Doc);

const A: f64 = 0.020;
const B_PER_PAGE: f64 = 0.002;

/// Docs (key, pages): 70 % 1–10, 25 % 10–49, 5 % 50–249 pages, and doc 0
/// with 427 (the paper's largest PDF). A fixed LCG, so every run is the same.
fn workload(n: usize) -> Vec<(u64, u32)> {
    let mut s = 0x2545_f491_4f6c_dd1du64;
    let mut next = |m: u32| {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((s >> 33) % u64::from(m)) as u32
    };
    let mut docs = vec![(0, 427)];
    for k in 1..n as u64 {
        let pages = match next(100) {
            0..70 => 1 + next(10),
            70..95 => 10 + next(40),
            _ => 50 + next(200),
        };
        docs.push((k, pages));
    }
    docs
}

fn plan(batch: usize, costs: bool, replicas: usize) -> (Plan, Output<Vec<u64>>) {
    let render = Call::map("render", |d: (u64, u32)| {
        (0..d.1).map(|i| (d.0 << 32) | u64::from(i)).collect::<Vec<u64>>()
    });
    let ocr = Call::batch("ocr", move |pages: Vec<u64>| {
        if costs {
            std::thread::sleep(Duration::from_secs_f64(A + B_PER_PAGE * pages.len() as f64));
        }
        Ok(pages
            .into_iter()
            .map(|p| Outcome::Ok(p.wrapping_mul(31)))
            .collect())
    })
    .batch_size(batch)
    .replicas(replicas);
    Plan::build(|b| {
        let docs = b.source::<Doc, (u64, u32)>();
        b.output(reduce(ocr.apply(expand::<Page, _, _>(render.apply(docs)))))
    })
    .unwrap()
}

/// [`plan`] with pages of `kb` KiB each (the payload-route arms): render
/// makes `"<id>:xxx…"` strings, OCR reads the id back. Over the 256 KiB
/// inline limit, every page crosses as a stored payload: the worker that
/// rendered it writes it, the one that runs its OCR reads it.
fn payload_plan(batch: usize, kb: usize, replicas: usize) -> (Plan, Output<Vec<u64>>) {
    let render = Call::map("render", move |d: (u64, u32)| {
        (0..d.1)
            .map(|i| {
                let mut page = format!("{}:", (d.0 << 32) | u64::from(i));
                page.extend(std::iter::repeat_n('x', kb << 10));
                page
            })
            .collect::<Vec<String>>()
    });
    let ocr = Call::batch("ocr", move |pages: Vec<String>| {
        std::thread::sleep(Duration::from_secs_f64(A + B_PER_PAGE * pages.len() as f64));
        Ok(pages
            .into_iter()
            .map(|p| {
                let id = p.split(':').next().and_then(|id| id.parse::<u64>().ok());
                Outcome::Ok(id.unwrap_or(u64::MAX).wrapping_mul(31))
            })
            .collect())
    })
    .batch_size(batch)
    .replicas(replicas);
    Plan::build(|b| {
        let docs = b.source::<Doc, (u64, u32)>();
        b.output(reduce(ocr.apply(expand::<Page, _, _>(render.apply(docs)))))
    })
    .unwrap()
}

/// Where the payload arms keep large payloads: the broker's bucket, or the
/// S3 server at this endpoint (`rayorch_kit::store::payloads`).
#[derive(Clone, Default)]
struct Payloads {
    /// KiB per page; 0: the plain plan, pages are numbers.
    kb: usize,
    /// The S3 endpoint; `None`: the broker's bucket.
    s3: Option<String>,
}

impl Payloads {
    fn plan(&self, batch: usize, costs: bool) -> (Plan, Output<Vec<u64>>) {
        match self.kb {
            0 => plan(batch, costs, 1),
            kb => payload_plan(batch, kb, 1),
        }
    }

    /// `cfg` with these payloads' store.
    fn config(&self, mut cfg: DistConfig) -> DistConfig {
        if let Some(endpoint) = &self.s3 {
            let opts = rayorch_kit::store::testing::S3Server::options(endpoint);
            let store =
                rayorch_kit::store::payloads::ObjectPayloads::new("s3://payloads/bench/", &cfg.job, opts);
            cfg.payloads = Some(store.unwrap().shared());
        }
        cfg
    }

    /// The worker's command-line arguments for these payloads.
    fn args(&self) -> [String; 2] {
        [self.kb.to_string(), self.s3.clone().unwrap_or_else(|| "-".into())]
    }

    fn from_args(kb: &str, s3: &str) -> Payloads {
        Payloads {
            kb: kb.parse().unwrap(),
            s3: (s3 != "-").then(|| s3.to_string()),
        }
    }
}

fn codecs() -> Codecs {
    Codecs::new()
        .json::<(u64, u32)>()
        .json::<Vec<u64>>()
        .json::<u64>()
        .json::<Vec<String>>()
        .json::<String>()
}

fn config(url: &str, job: &str) -> DistConfig {
    let mut c = DistConfig::new(url, job).ack_wait(Duration::from_secs(10));
    // A loopback broker the bench started itself.
    c.security = rayorch_dist::Security::insecure();
    c.storage = Storage::Memory;
    c.window = 256;
    // The credit window (batches per worker slot published and undecided):
    // BENCH_CREDITS, else the default.
    if let Some(n) = std::env::var("BENCH_CREDITS").ok().and_then(|v| v.parse().ok()) {
        c.credits_per_slot = n;
    }
    c
}

/// utime + stime of a process, in seconds.
fn cpu_s(pid: u32) -> f64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let rest = s.rsplit_once(") ").map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|x| x.parse::<f64>().ok()).unwrap_or(0.0);
    // Fields 14 and 15 of stat; `rest` starts at field 3. Clock ticks are 100/s on Linux.
    (ticks(11) + ticks(12)) / 100.0
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .trim()
        .to_string()
}

fn lb(docs: &[(u64, u32)], batch: usize, slots: usize) -> f64 {
    let p: f64 = docs.iter().map(|d| f64::from(d.1)).sum();
    ((p / batch as f64).ceil() * A + B_PER_PAGE * p) / slots as f64
}

fn check(o: &RootOutcome, out: Output<Vec<u64>>, docs: &[(u64, u32)]) -> bool {
    let pages = docs[o.key as usize].1;
    o.get(out).present()
        == Some(
            (0..pages)
                .map(|i| ((o.key << 32) | u64::from(i)).wrapping_mul(31))
                .collect(),
        )
}

/// The single-process runner with `slots` OCR replicas: wall seconds.
fn local(docs: &[(u64, u32)], batch: usize, slots: usize) -> f64 {
    local_plan(docs, plan(batch, true, slots))
}

/// The single-process runner of `plan` (with its OCR replicas): wall seconds.
fn local_plan(docs: &[(u64, u32)], (plan, out): (Plan, Output<Vec<u64>>)) -> f64 {
    let t = Instant::now();
    let mut ok = 0;
    Runner::new(&plan)
        .window(256)
        .run(
            docs.iter().map(|&(k, p)| (k, (k, p))),
            Callback(|o: &RootOutcome| ok += usize::from(check(o, out, docs))),
        )
        .unwrap();
    assert_eq!(ok, docs.len(), "every local root correct");
    t.elapsed().as_secs_f64()
}

struct DistRun {
    wall_s: f64,
    owner_cpu_s: f64,
    broker_cpu_s: f64,
    grains: u64,
    per_worker: Vec<u64>,
    bytes: [u64; 4],
}

/// 1 owner (this process) + `workers` worker processes, each with one OCR
/// and one render slot.
fn dist(docs: &[(u64, u32)], batch: usize, workers: usize, costs: bool, job: &str, rtt: Duration) -> DistRun {
    dist_with(docs, batch, workers, costs, job, rtt, &Payloads::default())
}

/// [`dist`] with pages and payload store as `payloads` says.
fn dist_with(
    docs: &[(u64, u32)],
    batch: usize,
    workers: usize,
    costs: bool,
    job: &str,
    rtt: Duration,
    payloads: &Payloads,
) -> DistRun {
    let server = NatsServer::start().unwrap();
    // Every process reaches the broker through a proxy adding `rtt` per
    // round trip (none at 0).
    let proxy = (!rtt.is_zero()).then(|| {
        let target = ([127, 0, 0, 1], server.port()).into();
        rayorch_dist::server::DelayProxy::start(([127, 0, 0, 1], 0).into(), target, rtt).unwrap()
    });
    let url = proxy
        .as_ref()
        .map_or_else(|| server.url(), |p| format!("nats://{}", p.addr()));
    let exe = std::env::current_exe().unwrap();
    let mut children: Vec<_> = (0..workers)
        .map(|_| {
            std::process::Command::new(&exe)
                .args(["--worker", &url, job, &batch.to_string(), &costs.to_string()])
                .args(payloads.args())
                .spawn()
                .unwrap()
        })
        .collect();
    let (plan, out) = payloads.plan(batch, costs);
    let mut owner = Owner::new(&plan, codecs(), payloads.config(config(&url, job)));
    let stats = owner.stats();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (cpu0, bcpu0) = (cpu_s(std::process::id()), cpu_s(server.pid()));
    let t = Instant::now();
    let mut ok = 0;
    let source = futures::stream::iter(docs.iter().map(|&(k, p)| (k, (k, p)))).boxed();
    let summary = rt
        .block_on(owner.run(source, |o| ok += usize::from(check(o, out, docs))))
        .unwrap();
    let wall_s = t.elapsed().as_secs_f64();
    let (owner_cpu_s, broker_cpu_s) = (cpu_s(std::process::id()) - cpu0, cpu_s(server.pid()) - bcpu0);
    assert_eq!(ok, docs.len(), "every distributed root correct");
    for c in &mut children {
        let _ = c.wait();
    }
    let grains = stats.grains_published.load(std::sync::atomic::Ordering::Relaxed);
    DistRun {
        wall_s,
        owner_cpu_s,
        broker_cpu_s,
        grains,
        per_worker: summary
            .per_worker()
            .iter()
            .filter(|((_, c), _)| c == "ocr")
            .map(|(_, n)| *n)
            .collect(),
        bytes: stats.bytes.snapshot(),
    }
}

fn worker_main(args: &[String]) {
    let (url, job) = (&args[0], &args[1]);
    let batch: usize = args[2].parse().unwrap();
    let costs: bool = args[3].parse().unwrap();
    let payloads = Payloads::from_args(&args[4], &args[5]);
    let (plan, _) = payloads.plan(batch, costs);
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(rayorch_dist::worker(
        &plan,
        codecs(),
        payloads.config(config(url, job)),
        "render:1,ocr:1",
    ))
    .unwrap();
}

fn arg<T: std::str::FromStr>(args: &[String], flag: &str, default: T) -> T {
    args.iter()
        .position(|a| a == flag)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--worker") {
        return worker_main(&args[1..]);
    }
    let n_docs: usize = arg(&args, "--docs", 120);
    let batch: usize = arg(&args, "--batch", 16);
    let workers: String = arg(&args, "--workers", "2,4".to_string());
    let rtts: String = arg(&args, "--rtt-ms", "0".to_string());
    let only_longtail = args.iter().any(|a| a == "--longtail-only");
    let docs = workload(n_docs);
    let pages: u64 = docs.iter().map(|d| u64::from(d.1)).sum();
    println!(
        "{}",
        serde_json::json!({"workload": {"docs": docs.len(), "pages": pages, "batch": batch, "a_s": A, "b_s_per_page": B_PER_PAGE}, "loadavg": loadavg()})
    );
    for rtt_ms in rtts.split(',').filter_map(|r| r.parse::<f64>().ok()) {
        let rtt = Duration::from_secs_f64(rtt_ms / 1e3);
        for k in workers.split(',').filter_map(|k| k.parse::<usize>().ok()) {
            let lb = lb(&docs, batch, k);
            let wall_local = local(&docs, batch, k);
            let d = dist(&docs, batch, k, true, &format!("lt{k}"), rtt);
            println!(
                "{}",
                serde_json::json!({
                    "rtt_ms": rtt_ms, "slots": k, "lb_s": lb,
                    "local": {"wall_s": wall_local, "lb_over_wall": lb / wall_local},
                    "dist": {"wall_s": d.wall_s, "lb_over_wall": lb / d.wall_s, "ocr_grains_per_worker": d.per_worker,
                             "owner_cpu_us_per_grain": d.owner_cpu_s * 1e6 / d.grains as f64,
                             "broker_cpu_us_per_grain": d.broker_cpu_s * 1e6 / d.grains as f64,
                             "bytes_inline_stored_fetched_messages": d.bytes},
                    "dist_over_local_lb_over_wall": wall_local / d.wall_s,
                    "loadavg": loadavg(),
                })
            );
        }
    }
    let kb: usize = arg(&args, "--payload-kb", 0);
    if kb > 0 {
        return payload_routes(&docs, batch, &workers, kb);
    }
    if only_longtail {
        return;
    }
    // One 427-page parent alone over 4 workers: how its pages spread.
    let big = vec![(0u64, 427u32)];
    let d = dist(&big, batch, 4, true, "big", Duration::ZERO);
    println!(
        "{}",
        serde_json::json!({"one_427_page_parent": {"workers": 4, "pages_per_worker": d.per_worker, "wall_s": d.wall_s, "lb_s": lb(&big, batch, 4)}, "loadavg": loadavg()})
    );
    // Control-plane cost: zero stage cost, CPU per grain by batch size.
    let many = workload(n_docs * 12);
    for b in [1usize, 8, 64] {
        let d = dist(&many, b, 2, false, &format!("cp{b}"), Duration::ZERO);
        println!(
            "{}",
            serde_json::json!({"control_plane": {"batch": b, "grains": d.grains, "wall_s": d.wall_s,
                "owner_cpu_us_per_grain": d.owner_cpu_s * 1e6 / d.grains as f64,
                "broker_cpu_us_per_grain": d.broker_cpu_s * 1e6 / d.grains as f64}, "loadavg": loadavg()})
        );
    }
}

/// The payload-route arms (`--payload-kb N`): pages of N KiB through the
/// broker's bucket and through an object store (the S3 server from its
/// pinned wheel, on loopback), side by side with the local runner of the
/// same plan, at each slot count; the order of the two distributed arms
/// alternates by slot count.
fn payload_routes(docs: &[(u64, u32)], batch: usize, workers: &str, kb: usize) {
    let s3 = rayorch_kit::store::testing::S3Server::start().unwrap();
    let pages: u64 = docs.iter().map(|d| u64::from(d.1)).sum();
    for (i, k) in workers
        .split(',')
        .filter_map(|k| k.parse::<usize>().ok())
        .enumerate()
    {
        let lb = lb(docs, batch, k);
        let wall_local = local_plan(docs, payload_plan(batch, kb, k));
        let broker = Payloads { kb, s3: None };
        let store = Payloads {
            kb,
            s3: Some(s3.endpoint()),
        };
        let mut arms = [("broker", broker), ("object_store", store)];
        if i % 2 == 1 {
            arms.reverse();
        }
        let mut row = serde_json::json!({
            "payload_kb": kb, "slots": k, "lb_s": lb,
            "local": {"wall_s": wall_local, "lb_over_wall": lb / wall_local},
        });
        for (name, p) in &arms {
            let s3_cpu = cpu_s(s3.pid());
            let d = dist_with(docs, batch, k, true, &format!("pay{name}{k}"), Duration::ZERO, p);
            row[*name] = serde_json::json!({
                "s3_server_cpu_us_per_page": (cpu_s(s3.pid()) - s3_cpu) * 1e6 / pages as f64,
                "wall_s": d.wall_s, "lb_over_wall": lb / d.wall_s,
                "owner_cpu_us_per_grain": d.owner_cpu_s * 1e6 / d.grains as f64,
                "broker_cpu_us_per_grain": d.broker_cpu_s * 1e6 / d.grains as f64,
                "owner_bytes_inline_stored_fetched_messages": d.bytes,
            });
        }
        row["loadavg"] = loadavg().into();
        println!("{row}");
    }
}
