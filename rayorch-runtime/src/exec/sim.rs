//! A deterministic, seeded executor for tests: the schedule is the variable.
//!
//! It drives the [`Engine`] exactly as a real executor would (admit, reserve,
//! run, report) but chooses every scheduling decision from a seeded RNG:
//! which Call dispatches next, the batch size (1..=B), how many replicas a
//! Call has, which in-flight batch completes next, whether an attempt crashes
//! after running, whether a report arrives twice, and whether an attempt is
//! "timed out" so that its real report arrives late and must be refused.
//! Stages run synchronously at dispatch; their reports are delivered later,
//! in random order. The same seed always yields the same run.

use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::engine::{BatchId, CallStats, Engine, EngineConfig, EngineStats, EntityPath, RootOutcome};
use crate::error::RunError;
use crate::exec::stage::{AttemptError, AttemptResult, Replica, panic_text};
use crate::plan::Plan;
use crate::value::Value;

/// How the simulated schedule is drawn.
#[derive(Clone, Debug)]
pub struct SimConfig {
    /// RNG seed.
    pub seed: u64,
    /// Draw each batch size from 1..=B instead of always B.
    pub random_batches: bool,
    /// Override every Call's batch size B.
    pub batch_size: Option<usize>,
    /// Replicas per Call: drawn from 1..=this when set, else the Call's own.
    pub max_replicas: Option<usize>,
    /// Complete in-flight batches in random order (else oldest first), and
    /// interleave dispatches and completions at random.
    pub random_order: bool,
    /// Probability that an attempt crashes after running its stage.
    pub crash_rate: f64,
    /// Probability that an attempt is declared timed out and its real report
    /// is delivered later (it must be refused by the commit gate).
    pub timeout_rate: f64,
    /// Probability that a report is delivered twice.
    pub duplicate_rate: f64,
    /// Admission window.
    pub window: usize,
    /// Record the Entity paths of every batch.
    pub record_rpcs: bool,
}

impl SimConfig {
    /// Plain sequential execution: batches of B, the Calls' replica counts,
    /// oldest batch first, no faults.
    pub fn sequential() -> SimConfig {
        SimConfig {
            seed: 1,
            random_batches: false,
            batch_size: None,
            max_replicas: None,
            random_order: false,
            crash_rate: 0.0,
            timeout_rate: 0.0,
            duplicate_rate: 0.0,
            window: 1 << 20,
            record_rpcs: true,
        }
    }

    /// A fully random legal schedule for `seed`, with faults that retries absorb.
    pub fn random(seed: u64) -> SimConfig {
        let mut rng = Rng::new(seed);
        SimConfig {
            seed,
            random_batches: true,
            batch_size: Some(1 + rng.below(64) as usize),
            max_replicas: Some(1 + rng.below(8) as usize),
            random_order: true,
            crash_rate: 0.05,
            timeout_rate: 0.03,
            duplicate_rate: 0.05,
            window: 1 + rng.below(16) as usize,
            record_rpcs: false,
        }
    }

    /// The same schedule without crashes, timeouts and duplicates: for plans
    /// whose Calls keep the default `Isolate` recovery, which (rightly) fails a
    /// record that crashes twice.
    pub fn without_faults(mut self) -> SimConfig {
        self.crash_rate = 0.0;
        self.timeout_rate = 0.0;
        self.duplicate_rate = 0.0;
        self
    }
}

/// What a simulated run produced.
#[derive(Debug)]
pub struct SimRun {
    /// Root outcomes in completion order.
    pub outcomes: Vec<RootOutcome>,
    /// Per Call, the Entity paths of each dispatched batch (when recorded).
    pub rpcs: Vec<Vec<Vec<EntityPath>>>,
    /// Per Call, how many times its stage ran.
    pub stage_runs: Vec<u64>,
    /// Engine counters.
    pub stats: EngineStats,
    /// Per-Call counters.
    pub call_stats: Vec<CallStats>,
}

impl SimRun {
    /// Outcomes sorted by root key.
    pub fn by_key(&self) -> Vec<&RootOutcome> {
        let mut v: Vec<&RootOutcome> = self.outcomes.iter().collect();
        v.sort_by_key(|o| o.key);
        v
    }
}

/// SplitMix64: small, fast, and good enough for schedules.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// Seeded generator.
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x2545_f491_4f6c_dd1d)
    }

    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && ((self.next_u64() >> 11) as f64 / (1u64 << 53) as f64) < p
    }
}

struct InFlight {
    id: BatchId,
    call: usize,
    replica: usize,
    result: AttemptResult,
}

/// Run `plan` over `inputs` (root key, value) under the schedule `cfg`.
pub fn run(
    plan: &Plan,
    inputs: impl IntoIterator<Item = (u64, Value)>,
    cfg: &SimConfig,
) -> Result<SimRun, RunError> {
    let mut rng = Rng::new(cfg.seed);
    let mut eng = Engine::new(
        plan,
        EngineConfig {
            window: cfg.window.max(1),
            seed: cfg.seed,
        },
    );
    let calls = plan.calls();
    let replica_count: Vec<usize> = calls
        .iter()
        .map(|c| match cfg.max_replicas {
            Some(m) => 1 + rng.below(m as u64) as usize,
            None => c.config.replicas,
        })
        .collect();
    let mut replicas: Vec<Vec<Option<Box<dyn Replica>>>> = replica_count
        .iter()
        .map(|&n| (0..n).map(|_| None).collect())
        .collect();
    let mut busy: Vec<Vec<bool>> = replica_count.iter().map(|&n| vec![false; n]).collect();
    let mut rpcs: Vec<Vec<Vec<EntityPath>>> = vec![Vec::new(); calls.len()];
    let mut stage_runs = vec![0u64; calls.len()];
    let mut flight: Vec<InFlight> = Vec::new();
    let mut late: Vec<(BatchId, AttemptResult)> = Vec::new();
    let mut outcomes = Vec::new();
    let mut inputs = inputs.into_iter().peekable();

    loop {
        while eng.can_admit() && inputs.peek().is_some() {
            let (key, v) = inputs.next().expect("peeked");
            eng.admit(key, v)?;
        }
        while let Some(o) = eng.pop_finished() {
            outcomes.push(o);
        }
        if let Some(e) = eng.aborted() {
            return Err(e.clone());
        }
        let dispatchable: Vec<usize> = (0..calls.len())
            .filter(|&c| eng.may_have_ready(c) && busy[c].iter().any(|b| !b))
            .collect();
        let complete =
            !flight.is_empty() && (dispatchable.is_empty() || (cfg.random_order && rng.chance(0.5)));
        if complete {
            let i = if cfg.random_order {
                rng.below(flight.len() as u64) as usize
            } else {
                0
            };
            let f = flight.remove(i);
            busy[f.call][f.replica] = false;
            if f.result.is_ok() && rng.chance(cfg.timeout_rate) {
                eng.report(f.id, Err(AttemptError::Failed("simulated timeout".into())));
                late.push((f.id, f.result));
            } else {
                let dup = rng.chance(cfg.duplicate_rate).then(|| f.result.clone());
                eng.report(f.id, f.result);
                if let Some(d) = dup {
                    eng.report(f.id, d);
                }
            }
            if !late.is_empty() && rng.chance(0.3) {
                let (id, r) = late.swap_remove(rng.below(late.len() as u64) as usize);
                eng.report(id, r);
            }
            continue;
        }
        if let Some(&c) = dispatchable.get(if cfg.random_order {
            rng.below(dispatchable.len().max(1) as u64) as usize
        } else {
            0
        }) {
            let b = cfg.batch_size.unwrap_or(calls[c].config.batch_size).max(1);
            let size = if cfg.random_batches {
                1 + rng.below(b as u64) as usize
            } else {
                b
            };
            let Some(batch) = eng.reserve(c, size) else {
                continue;
            };
            if cfg.record_rpcs {
                rpcs[c].push(batch.grains.iter().filter_map(|g| eng.entity_path(g)).collect());
            }
            let r = busy[c].iter().position(|b| !b).expect("a free replica");
            if replicas[c][r].is_none() {
                let rep = calls[c].runtime.spawn().map_err(|e| RunError::ReplicaInit {
                    call: calls[c].name.to_string(),
                    cause: e.to_string(),
                })?;
                replicas[c][r] = Some(rep);
            }
            stage_runs[c] += 1;
            let rep = replicas[c][r].as_mut().expect("spawned");
            let mut result = match catch_unwind(AssertUnwindSafe(|| rep.run(batch.inputs))) {
                Ok(r) => r,
                Err(p) => {
                    replicas[c][r] = None; // a panicked replica is replaced
                    Err(AttemptError::Failed(format!(
                        "stage panicked: {}",
                        panic_text(&p)
                    )))
                }
            };
            if rng.chance(cfg.crash_rate) {
                replicas[c][r] = None;
                result = Err(AttemptError::Failed("simulated replica crash".into()));
            }
            busy[c][r] = true;
            flight.push(InFlight {
                id: batch.id,
                call: c,
                replica: r,
                result,
            });
            continue;
        }
        // Nothing in flight and nothing dispatchable.
        for (id, r) in late.drain(..) {
            eng.report(id, r);
        }
        if eng.live_roots() == 0 && inputs.peek().is_none() {
            break;
        }
        if let Some(s) = eng.stall() {
            return Err(RunError::Stalled(s));
        }
    }
    Ok(SimRun {
        outcomes,
        rpcs,
        stage_runs,
        stats: eng.stats().clone(),
        call_stats: (0..calls.len()).map(|c| eng.call_stats(c).clone()).collect(),
    })
}
