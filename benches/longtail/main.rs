//! Long-tail benchmark: the paper's MinerU-shaped workload, simulated costs,
//! through the real runtime; the scheduler ablation and the failure study.
//!
//! `cargo bench --bench longtail -- [--workload FILE] [--arm full|doc-stream|unordered|regroup|all]
//!  [--runs N] [--window N] [--workers K] [--batch B] [--fail-largest N] [--ocr-a S] [--ocr-b S]
//!  [--render-s-per-page S] [--upload-s S] [--render-workers R] [--upload-workers U]`
//!
//! Prints one JSON line per run (fields in `sim::Report::to_json`), then the
//! median wall time and lb/wall per arm.

mod sim;

use sim::{Arm, Workload};

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
    let default = format!(
        "{}/../shared/workloads/mineru-200.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let path = get("--workload").unwrap_or(default);
    let mut w = Workload::load(&path);
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
    if let Some(v) = num("--upload-workers") {
        c.upload_workers = v as usize;
    }
    let window = num("--window").map_or(64, |v| v as usize);
    let runs = num("--runs").map_or(1, |v| v as usize);
    let arms: Vec<Arm> = match get("--arm").as_deref() {
        None | Some("full") => vec![Arm::Full],
        Some("all") => vec![Arm::DocStream, Arm::Regroup, Arm::Unordered, Arm::Full],
        Some(a) => vec![Arm::parse(a).unwrap_or_else(|| panic!("unknown --arm {a}"))],
    };
    let mut medians = Vec::new();
    for arm in arms {
        let mut walls = Vec::new();
        let mut lbw = Vec::new();
        for _ in 0..runs {
            let r = sim::run(&w, &c, arm, window);
            println!("{}", r.to_json(&c, window));
            walls.push(r.wall_s);
            lbw.push(r.lb_s / r.wall_s);
        }
        walls.sort_by(f64::total_cmp);
        lbw.sort_by(f64::total_cmp);
        medians.push((arm.name(), walls[walls.len() / 2], lbw[lbw.len() / 2]));
    }
    for (arm, wall, lbw) in medians {
        eprintln!("{arm:>10}: median wall {wall:.2} s, lb/wall {lbw:.3} ({runs} run(s), {path})");
    }
}
