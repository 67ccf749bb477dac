//! Long-tail benchmark: the paper's MinerU-shaped workload, simulated costs,
//! through the real runtime; the scheduler ablation, the reservation-policy
//! latency comparison, and the failure study.
//!
//! `cargo bench -p rayorch-bench --bench longtail -- [--workload NAME|FILE] [--arm ARM|all|policies|watch|shape]
//!  [--runs N] [--window N] [--workers K] [--batch B] [--fail-largest N] [--ocr-a S] [--ocr-b S]
//!  [--render-s-per-page S] [--upload-s S] [--render-workers R] [--upload-workers U]
//!  [--widths K] [--raise] [--unexpanded-roots K] [--backpressure N] [--emit FILE]`
//!
//! Workloads are generated in the repository (`src/workload.rs`): `mineru-N`
//! (seed 7: `mineru-200`, `mineru-1000`, `mineru-3689` are the reference
//! files), `failure-N` (the 99 largest poisoned), `small-after-big` (a
//! 1,200-page document then a 5-page one, all pages published at once, in
//! that order: render costs 0 on one replica), or a
//! path to any `multigrain-workload/v1` file. `--render-s-per-page 0` makes
//! every document publish all its pages at once. `--emit FILE` writes the
//! generated workload and exits.
//!
//! Arms: doc-stream (ParentBound), regroup (flat engine), unordered, full
//! (FIFO, `Elastic`), nearest (`NearestCompletion`); `all` runs the five,
//! `policies` the four rayorch policies; `shape` runs nearest and shaped
//! (nearest with the OCR Call keyed by page width) on a mixed-width
//! workload (`--widths K`: each page one of K widths, an OCR batch paying
//! `a` per width present). `--raise`: a poisoned page makes its whole OCR
//! batch return `Err` (default recovery) instead of a `GroupFailure`.
//! Each run goes through every arm in
//! turn, so ratios between arms are taken within one run. Prints one JSON
//! line per arm and run, then a `summary` line per arm (medians over runs)
//! and a `ratio` line per arm against `full` (median of per-run ratios),
//! each with `/proc/loadavg` at the start and the end.

use rayorch_bench::longtail::{self, Arm, Dist, Report, WorkDoc, Workload};
use rayorch_bench::workload;

fn loadavg() -> serde_json::Value {
    match std::fs::read_to_string("/proc/loadavg") {
        Ok(s) => serde_json::Value::String(s.trim().to_string()),
        // Not every OS has it; say so instead of inventing a figure.
        Err(_) => serde_json::Value::Null,
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The named workload, generated here, or a file.
fn workload(name: &str) -> (Workload, Option<String>) {
    if name == "small-after-big" {
        let mut w = Workload::parse(
            &workload::generate(&workload::GenSpec::named("mineru-1").expect("named")),
            name,
        );
        w.pipeline.render_s_per_page = 0.0;
        // One render replica: the big document publishes its pages first,
        // every run (two replicas would race the two renders).
        w.pipeline.render_workers = 1;
        w.docs = vec![
            WorkDoc {
                doc_id: 0,
                pages: 1200,
            },
            WorkDoc { doc_id: 1, pages: 5 },
        ];
        return (w, None);
    }
    if let Some(g) = workload::GenSpec::named(name) {
        let text = workload::generate(&g);
        return (Workload::parse(&text, name), Some(text));
    }
    (Workload::load(name), None)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
    let get = |k: &str| {
        args.iter()
            .position(|a| a == k)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let num = |k: &str| {
        get(k).map(|v| {
            v.parse::<f64>()
                .unwrap_or_else(|_| panic!("{k} takes a number, got {v}"))
        })
    };
    let name = get("--workload").unwrap_or_else(|| "mineru-200".into());
    let (mut w, text) = workload(&name);
    if let Some(out) = get("--emit") {
        let text = text.unwrap_or_else(|| panic!("--emit writes generated workloads; {name} is not one"));
        std::fs::write(&out, text).unwrap_or_else(|e| panic!("write {out}: {e}"));
        eprintln!("wrote {out}");
        return;
    }
    let mut c = w.pipeline.clone();
    if let Some(v) = num("--fail-largest") {
        w.fail_largest = v as usize;
    }
    if let Some(v) = num("--workers") {
        c.workers = v as usize;
    }
    if let Some(v) = num("--batch") {
        c.batch = v as usize;
    }
    if let Some(v) = num("--ocr-a") {
        c.ocr_a = v;
    }
    if let Some(v) = num("--ocr-b") {
        c.ocr_b = v;
    }
    if let Some(v) = num("--render-s-per-page") {
        c.render_s_per_page = v;
    }
    if let Some(v) = num("--upload-s") {
        c.upload_s = v;
    }
    if let Some(v) = num("--render-workers") {
        c.render_workers = v as usize;
    }
    if args.iter().any(|a| a == "--raise") {
        c.raise = true;
    }
    if let Some(v) = num("--widths") {
        c.widths = v as u64;
    }
    if let Some(v) = num("--upload-workers") {
        c.upload_workers = v as usize;
    }
    if let Some(v) = num("--unexpanded-roots") {
        c.unexpanded_roots = Some(v as usize);
    }
    if let Some(v) = num("--backpressure") {
        c.backpressure = Some(v as usize);
    }
    let window = num("--window").map_or(64, |v| v as usize);
    let runs = num("--runs").map_or(1, |v| v as usize).max(1);
    let arms: Vec<Arm> = match get("--arm").as_deref() {
        None | Some("full") => vec![Arm::Full],
        Some("all") => vec![
            Arm::DocStream,
            Arm::Regroup,
            Arm::Unordered,
            Arm::Full,
            Arm::Nearest,
        ],
        Some("policies") => vec![Arm::DocStream, Arm::Unordered, Arm::Full, Arm::Nearest],
        Some("watch") => vec![Arm::Full, Arm::Watched],
        Some("shape") => vec![Arm::Nearest, Arm::Shaped],
        Some(a) => vec![Arm::parse(a).unwrap_or_else(|| panic!("unknown --arm {a}"))],
    };
    let load_start = loadavg();
    let mut reports: Vec<Vec<Report>> = vec![Vec::new(); arms.len()];
    for _ in 0..runs {
        for (i, &arm) in arms.iter().enumerate() {
            let r = longtail::run(&w, &c, arm, window);
            let mut j = r.to_json(&c, window);
            j["workload"] = serde_json::json!(name);
            j["loadavg_end"] = loadavg();
            println!("{j}");
            reports[i].push(r);
        }
    }
    let load_end = loadavg();
    let stat = |rs: &[Report], f: &dyn Fn(&Report) -> Option<f64>| -> serde_json::Value {
        let v: Vec<f64> = rs.iter().filter_map(f).collect();
        if v.len() == rs.len() {
            serde_json::json!(median(v))
        } else {
            serde_json::Value::Null
        }
    };
    type Pick = fn(&Dist) -> f64;
    let picks: [(&str, Pick); 5] = [
        ("first", |d| d.first),
        ("mean", |d| d.mean),
        ("p50", |d| d.p50),
        ("p90", |d| d.p90),
        ("p99", |d| d.p99),
    ];
    let dists = |rs: &[Report], which: fn(&Report) -> Option<Dist>| -> serde_json::Value {
        picks
            .iter()
            .map(|(k, f)| (k.to_string(), stat(rs, &|r| which(r).map(|d| f(&d)))))
            .collect::<serde_json::Map<_, _>>()
            .into()
    };
    for (i, &arm) in arms.iter().enumerate() {
        let rs = &reports[i];
        let s = serde_json::json!({
            "summary": arm.name(), "workload": name, "runs": runs, "window": window,
            "wall_s": stat(rs, &|r| Some(r.wall_s)),
            "lb_over_wall": stat(rs, &|r| Some(r.lb_s / r.wall_s)),
            "ocr_batch_mean": stat(rs, &|r| Some(r.ocr_batch_mean)),
            "ocr_model_calls": stat(rs, &|r| Some(r.ocr_model_calls as f64)),
            "completion_s": dists(rs, Report::completion),
            "latency_s": dists(rs, Report::latency),
            "after_publish_s": dists(rs, Report::after_publish),
            "correct": rs.iter().all(|r| r.correct),
            "loadavg_start": load_start, "loadavg_end": load_end,
        });
        println!("{s}");
        eprintln!(
            "{:>10}: median wall {:.2} s, lb/wall {}, mean latency {} s ({runs} run(s), {name}, window {window})",
            arm.name(),
            s["wall_s"].as_f64().unwrap_or(f64::NAN),
            s["lb_over_wall"],
            s["latency_s"]["mean"]
        );
    }
    // Ratios against FIFO (else nearest), per run, then the median: the
    // load moves both arms.
    let base = [Arm::Full, Arm::Nearest].into_iter().find(|b| arms.contains(b));
    if let Some((f, base)) = base.and_then(|b| Some((arms.iter().position(|&a| a == b)?, b))) {
        for (i, &arm) in arms.iter().enumerate().filter(|(_, a)| **a != base) {
            let ratio = |g: &dyn Fn(&Report) -> Option<f64>| -> serde_json::Value {
                let v: Option<Vec<f64>> = reports[i]
                    .iter()
                    .zip(&reports[f])
                    .map(|(a, b)| Some(g(a)? / g(b)?))
                    .collect();
                v.map_or(serde_json::Value::Null, |v| serde_json::json!(median(v)))
            };
            let mut lat = serde_json::Map::new();
            let mut comp = serde_json::Map::new();
            for (k, p) in picks {
                lat.insert(k.into(), ratio(&|r| r.latency().map(|d| p(&d))));
                comp.insert(k.into(), ratio(&|r| r.completion().map(|d| p(&d))));
            }
            let s = serde_json::json!({
                "ratio": format!("{}/{}", arm.name(), base.name()), "workload": name, "runs": runs, "window": window,
                "wall": ratio(&|r| Some(r.wall_s)),
                "latency": lat, "completion": comp,
                "loadavg_start": load_start, "loadavg_end": load_end,
            });
            println!("{s}");
        }
    }
}
