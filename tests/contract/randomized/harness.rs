//! Running a program under the executors and comparing with the reference.

use super::*;

pub(crate) fn cause_is(got: &Cause, want: &str) -> bool {
    got.message() == want || (want == MISMATCH && got.message().starts_with(MISMATCH))
}

pub(crate) fn matches(got: &Item<i64>, want: &R<i64>) -> bool {
    match (got, want) {
        (Item::Present(a), R::Present(b)) => a == b,
        (Item::Dropped, R::Dropped) => true,
        (Item::Failed(c), R::Failed(m)) => cause_is(c, m),
        (Item::Suppressed(c), R::Suppressed(ms)) => ms.iter().any(|m| cause_is(c, m)),
        _ => false,
    }
}

pub(crate) fn schedules(seed: u64, random: usize) -> Vec<SimConfig> {
    std::iter::once(SimConfig::sequential())
        .chain((0..random as u64).map(|i| SimConfig::random(seed.wrapping_add(i))))
        .collect()
}

/// What the reference allows for a program over some roots.
pub(crate) struct Expected {
    /// Per root, its allowed output vectors (`None`: too many GroupFailure
    /// resolutions to enumerate; such roots, about one in 3,000 in the
    /// envelope property, are not compared).
    pub(crate) allowed: Vec<Allowed>,
    /// The names of the Abort Calls that run a poisoned record: when there is
    /// one, the run must end with `RunError::Aborted` naming one of them.
    pub(crate) aborts: BTreeSet<String>,
}

pub(crate) fn reference(prog: &Program, inputs: &[i64]) -> Expected {
    let mut aborts = BTreeSet::new();
    let allowed = inputs
        .iter()
        .map(|&x| {
            let (allowed, a) = allowed_outputs(prog, x, 4096);
            aborts.extend(a.into_iter().map(|id| format!("c{id}")));
            allowed
        })
        .collect();
    Expected { allowed, aborts }
}

/// Every root comes back exactly once and its outputs are one of the allowed
/// vectors.
pub(crate) fn compare(
    inputs: &[i64],
    outs: &[Output<i64>],
    allowed: &[Allowed],
    outcomes: &[RootOutcome],
    ctx: &dyn Fn() -> String,
) -> Result<(), TestCaseError> {
    let mut keys: Vec<u64> = outcomes.iter().map(|o| o.key).collect();
    keys.sort_unstable();
    prop_assert_eq!(
        keys,
        (0..inputs.len() as u64).collect::<Vec<_>>(),
        "every root exactly once\n{}",
        ctx()
    );
    for o in outcomes {
        let Some(allowed) = &allowed[o.key as usize] else {
            continue;
        };
        let got: Vec<Item<i64>> = outs.iter().map(|&h| o.get(h)).collect();
        let ok = allowed
            .iter()
            .any(|want| want.len() == got.len() && got.iter().zip(want).all(|(g, w)| matches(g, w)));
        if !ok {
            let first_diff = allowed
                .iter()
                .map(|want| {
                    got.iter()
                        .zip(want)
                        .enumerate()
                        .find(|(_, (g, w))| !matches(g, w))
                        .map(|(i, (g, w))| format!("output L0.{i}: engine {g:?}, reference {w:?}"))
                        .unwrap_or_default()
                })
                .take(4)
                .collect::<Vec<_>>();
            return Err(TestCaseError::fail(format!(
                "root {} (input {}): engine outputs\n  {got:?}\nare none of the {} allowed; first differences: {first_diff:#?}\n{}",
                o.key,
                inputs[o.key as usize],
                allowed.len(),
                ctx()
            )));
        }
    }
    Ok(())
}

/// A run's result against the reference: the typed abort error when an
/// Abort Call runs a poisoned record, else every root exactly once with one
/// of its allowed output vectors.
pub(crate) fn expect(
    inputs: &[i64],
    outs: &[Output<i64>],
    want: &Expected,
    got: Result<Vec<RootOutcome>, RunError>,
    ctx: &dyn Fn() -> String,
) -> Result<(), TestCaseError> {
    match got {
        Err(RunError::Aborted { call, entity, cause }) if !want.aborts.is_empty() => {
            prop_assert!(
                want.aborts.contains(&call),
                "aborted by `{call}` (on {entity}), but only {:?} run a poisoned record\n{}",
                want.aborts,
                ctx()
            );
            prop_assert!(
                cause.contains(&format!("{call} is poisoned by ")),
                "abort cause `{cause}` is not the poisoned attempt's error\n{}",
                ctx()
            );
            Ok(())
        }
        Err(e) => Err(TestCaseError::fail(format!(
            "run failed: {e}\nexpected {}\n{}",
            match want.aborts.is_empty() {
                true => "a complete run".to_string(),
                false => format!("an abort by one of {:?}", want.aborts),
            },
            ctx()
        ))),
        // A poisoned Grain of an Abort Call can go stale before its attempt
        // reports (a sibling's failure decided everything its root waited
        // for); that report is refused like any stale one and the run goes
        // on. The outputs are then the reference's, and no Grain of an Abort
        // Call ended Failed (`check` asserts that from the engine's counters).
        Ok(outcomes) => compare(inputs, outs, &want.allowed, &outcomes, ctx),
    }
}

/// Run `prog` over `inputs` under the sequential schedule and `random` random
/// ones starting at `seed`, and compare each run with the reference. Returns
/// how many roots had more than one allowed output vector.
pub(crate) fn check(
    prog: &Program,
    inputs: &[i64],
    seed: u64,
    random: usize,
) -> Result<usize, TestCaseError> {
    quiet_poison_panics();
    let (plan, outs) = build(prog);
    let want = reference(prog, inputs);
    // Only Isolate ends a Grain Failed on attempt failures: retries never
    // run out at these fault rates, and Abort ends the run instead.
    let isolating: HashSet<String> = prog
        .fxs()
        .filter(|f| f.rec == Rec::Isolate)
        .map(|f| format!("c{}", f.id))
        .collect();
    for cfg in schedules(seed, random) {
        let ctx = || format!("program:\n{prog}\nroots: {inputs:?}\nschedule: {cfg:?}");
        let run = sim::run(&plan, common::keyed(inputs.iter().copied()), &cfg);
        if let Ok(run) = &run {
            let s = &run.stats;
            prop_assert!(
                s.conflicts == 0 && s.invalid_transitions == 0,
                "engine counters {s:?}\n{}",
                ctx()
            );
            for (spec, cs) in plan.calls().iter().zip(&run.call_stats) {
                prop_assert!(
                    cs.contract_errors == 0 && (cs.exhausted == 0 || isolating.contains(&*spec.name)),
                    "call `{}`: {cs:?}\n{}",
                    spec.name,
                    ctx()
                );
            }
        }
        expect(inputs, &outs, &want, run.map(|r| r.outcomes), &ctx)?;
    }
    Ok(want
        .allowed
        .iter()
        .filter(|a| a.as_ref().is_none_or(|a| a.len() > 1))
        .count())
}

/// How the production executor is started.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Flavour {
    /// `Runner::run_async` on a current-thread runtime with paused time:
    /// async stages' sleeps cost no wall-clock time.
    Paused,
    /// `Runner::run`: its own multi-thread runtime and real time, so the
    /// driver and async attempts also run in parallel.
    MultiThread,
}

/// One run of the production executor: blocking stages on their replica
/// threads, async ones on tokio.
pub(crate) fn run_threaded(
    plan: &Plan,
    inputs: &[i64],
    window: usize,
    flavour: Flavour,
    ctx: &dyn Fn() -> String,
) -> Result<Result<Vec<RootOutcome>, RunError>, TestCaseError> {
    let mut outcomes = Vec::new();
    let runner = Runner::new(plan).window(window);
    let source = inputs.iter().enumerate().map(|(k, &x)| (k as u64, x));
    let sink = Callback(|o: &RootOutcome| outcomes.push(o.clone()));
    let result = match flavour {
        Flavour::Paused => common::paused_runtime().block_on(runner.run_async(source, sink)),
        Flavour::MultiThread => runner.run(source, sink),
    };
    match result {
        Ok(summary) => {
            prop_assert_eq!(summary.roots, inputs.len() as u64, "{}", ctx());
            Ok(Ok(outcomes))
        }
        Err(e) => Ok(Err(e)),
    }
}

/// Where the threaded Runner is checked: every construct, but async stages
/// report a poisoned batch with `Err` only (async panics have a property of
/// their own, `threaded_runner_survives_async_panics`).
pub(crate) fn runner_programs() -> impl Strategy<Value = Program> {
    let plain = Gen {
        async_panics: false,
        ..SIM
    };
    prop_oneof![
        program(plain),
        program(Gen { group: true, ..plain }),
        program(Gen { abort: true, ..plain }),
    ]
}
