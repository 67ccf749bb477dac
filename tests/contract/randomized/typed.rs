//! The typed interpretation of a program: a `Plan` whose Calls run the
//! program's user code as blocking or async stages.

use super::*;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// A batch's result: the first poisoned record fails the whole attempt
/// (an `Err`, or a panic), else one outcome per record.
pub(crate) fn finish<T>(fx: Fx, results: Vec<Res<T>>) -> StageResult<T> {
    let mut out = Vec::with_capacity(results.len());
    for r in results {
        out.push(match r {
            Res::Ok(v) => Outcome::Ok(v),
            Res::Record(c) => Outcome::RecordFailure(Cause::new(c)),
            Res::Group(c) => Outcome::GroupFailure(Cause::new(c)),
            Res::Poison(why) => match fx.poison.map(|p| p.how) {
                Some(How::Panic | How::PanicEarly) => std::panic::panic_any(why),
                _ => return Err(why.into()),
            },
        });
    }
    Ok(out)
}

pub(crate) fn first_poison<T>(results: &[Res<T>]) -> Option<&str> {
    results.iter().find_map(|r| match r {
        Res::Poison(why) => Some(why.as_str()),
        _ => None,
    })
}

/// Is `s` exactly a poisoned record's message (`c7 is poisoned by 42`)?
pub(crate) fn is_poison(s: &str) -> bool {
    let number = |x: &str| x.trim_start_matches('-').parse::<u64>().is_ok();
    s.strip_prefix('c')
        .and_then(|s| s.split_once(" is poisoned by "))
        .is_some_and(|(id, k)| number(id) && number(k))
}

/// Poisoned stages panic on purpose, thousands of times per run: keep their
/// messages off stderr (any other panic still prints).
pub(crate) fn quiet_poison_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let poison = info
                .payload()
                .downcast_ref::<String>()
                .is_some_and(|s| is_poison(s));
            if !poison {
                default(info);
            }
        }));
    });
}

/// Apply `fx` running `f` per record to `inputs`, as a blocking or an async
/// stage. Retrying Calls have a budget of 1000 attempts, so the injected
/// crashes and timeouts (which hit retrying Calls only) never change an Item.
pub(crate) fn apply_fx<D, Ins, I, O>(
    fx: Fx,
    f: impl Fn(I) -> Res<O> + Clone + Send + Sync + 'static,
    inputs: Ins,
) -> Port<D, O>
where
    D: Domain,
    Ins: Inputs<D, Value = I>,
    I: Send + 'static,
    O: Data,
{
    let name = format!("c{}", fx.id);
    match fx.exec {
        Exec::Blocking => configure(
            fx,
            Call::batch(name, move |batch: Vec<I>| {
                finish(fx, batch.into_iter().map(&f).collect())
            }),
        )
        .apply(inputs),
        // The stage judges the batch at once (a `PanicEarly` poison panics
        // there, before the future exists); the future sleeps and yields on
        // tokio's clock before it reports.
        Exec::Async { base, concurrency } => {
            let attempts = Arc::new(AtomicU64::new(0));
            let call = common::async_call(&name, move |batch: Vec<I>| {
                let stalls = fx.stall && matches!(attempts.fetch_add(1, Ordering::Relaxed), 1 | 5);
                let pause = Duration::from_micros(u64::from(base) * (batch.len() as u64 + 1) % 3000);
                let results: Vec<Res<O>> = batch.into_iter().map(&f).collect();
                if fx.poison.is_some_and(|p| p.how == How::PanicEarly)
                    && let Some(why) = first_poison(&results)
                {
                    std::panic::panic_any(why.to_string());
                }
                Box::pin(async move {
                    if stalls {
                        tokio::time::sleep(Duration::from_secs(3600)).await;
                    }
                    tokio::time::sleep(pause).await;
                    if base % 2 == 1 {
                        tokio::task::yield_now().await;
                    }
                    finish(fx, results)
                })
            })
            .concurrency(concurrency);
            let call = match fx.stall {
                true => call.timeout(STALL_TIMEOUT),
                false => call,
            };
            configure(fx, call).apply(inputs)
        }
    }
}

pub(crate) fn configure<S: StageKind>(fx: Fx, call: Call<S>) -> Call<S> {
    let recovery = match fx.rec {
        Rec::RetryBatch => Recovery::RetryBatch(1000),
        Rec::RetryTail => Recovery::RetryTail(1000),
        Rec::Isolate => Recovery::Isolate,
        Rec::Abort => Recovery::Abort,
    };
    let call = call
        .recovery(recovery)
        .reservation(fx.res)
        .batch_size(fx.batch)
        .replicas(fx.replicas);
    // A shape key reads one required input: only Calls over one `i64` Port.
    let call = match fx.shape {
        Some(n) if std::any::TypeId::of::<S::In>() == std::any::TypeId::of::<i64>() => {
            call.shape(move |x: &S::In| {
                (x as &dyn std::any::Any)
                    .downcast_ref::<i64>()
                    .map_or(0, |v| v.rem_euclid(n) as u64)
            })
        }
        _ => call,
    };
    match fx.delay_us {
        Some(us) => call
            .max_batch_delay(Duration::from_micros(us))
            .preferred_batch_sizes(&[fx.batch.div_ceil(2)]),
        None => call,
    }
}

#[derive(Default)]
pub(crate) struct Typed {
    l0: Vec<Port<L0, i64>>,
    l1: Vec<Port<L1, i64>>,
    l2: Vec<Port<L2, i64>>,
    l3: Vec<Port<L3, i64>>,
}

/// Runs `$body` with `$v` bound to the port list of level `$lvl`: the body is
/// monomorphized once per Domain type.
macro_rules! on_level {
    ($t:expr, $lvl:expr, $v:ident => $body:expr) => {
        match $lvl {
            0 => {
                let $v = &mut $t.l0;
                $body
            }
            1 => {
                let $v = &mut $t.l1;
                $body
            }
            2 => {
                let $v = &mut $t.l2;
                $body
            }
            3 => {
                let $v = &mut $t.l3;
                $body
            }
            l => unreachable!("no level {l}"),
        }
    };
}

pub(crate) fn map_op<D: Domain>(v: &mut Vec<Port<D, i64>>, src: usize, f: Fx) {
    let out = apply_fx(f, move |x: i64| f.arith(x), v[src]);
    v.push(out);
}

pub(crate) fn filter_op<D: Domain>(v: &mut Vec<Port<D, i64>>, value: usize, mask_src: usize, f: Fx) {
    let mask = apply_fx(f, move |x: i64| f.keep(x), v[mask_src]);
    let out = filter(v[value], mask);
    v.push(out);
}

pub(crate) fn binary_op<D: Domain>(v: &mut Vec<Port<D, i64>>, a: usize, b: usize, oa: bool, ob: bool, f: Fx) {
    let (pa, pb) = (v[a], v[b]);
    let out = match (oa, ob) {
        (false, false) => apply_fx(f, move |(x, y): (i64, i64)| f.binary(Some(x), Some(y)), (pa, pb)),
        (true, false) => apply_fx(
            f,
            move |(x, y): (Option<i64>, i64)| f.binary(x, Some(y)),
            (pa.optional(), pb),
        ),
        (false, true) => apply_fx(
            f,
            move |(x, y): (i64, Option<i64>)| f.binary(Some(x), y),
            (pa, pb.optional()),
        ),
        (true, true) => apply_fx(
            f,
            move |(x, y): (Option<i64>, Option<i64>)| f.binary(x, y),
            (pa.optional(), pb.optional()),
        ),
    };
    v.push(out);
}

pub(crate) fn broadcast_op<A: Domain, D: DescendantOf<A, I>, I>(
    anc: &[Port<A, i64>],
    v: &mut Vec<Port<D, i64>>,
    src: usize,
    like: usize,
) {
    let out = broadcast(anc[src], v[like]);
    v.push(out);
}

pub(crate) fn expand_op<P: Domain, C: ChildOf<P>>(
    parent: &[Port<P, i64>],
    child: &mut Vec<Port<C, i64>>,
    a: usize,
    fa: Fx,
    b: Option<(usize, Fx)>,
) {
    let la = apply_fx(fa, move |x: i64| fa.list(x), parent[a]);
    match b {
        None => child.push(expand(la)),
        Some((b, fb)) => {
            let lb = apply_fx(fb, move |x: i64| fb.list(x), parent[b]);
            let (x, y) = expand_aligned((la, lb));
            child.push(x);
            child.push(y);
        }
    }
}

pub(crate) fn reduce_op<C: ChildOf<P>, P: Domain>(
    child: &[Port<C, i64>],
    parent: &mut Vec<Port<P, i64>>,
    a: usize,
    fa: Fx,
    b: Option<(usize, Fx)>,
    members: Option<usize>,
    keep_failed: bool,
) {
    let hash = |f: Fx, xs: Port<P, Vec<i64>>| apply_fx(f, move |xs: Vec<i64>| f.hash(&xs), xs);
    let m = members.map(|m| child[m]);
    match b {
        None if keep_failed => {
            let kept = rayorch::reduce_keep_failed(child[a]);
            let flat = move |xs: Vec<Result<i64, Cause>>| {
                let xs: Vec<i64> = xs.into_iter().map(|x| x.unwrap_or(FAILED_CHILD)).collect();
                fa.hash(&xs)
            };
            parent.push(apply_fx(fa, flat, kept));
        }
        None => {
            let gathered = match m {
                None => reduce(child[a]),
                Some(m) => reduce_members(child[a], m),
            };
            parent.push(hash(fa, gathered));
        }
        Some((b, fb)) => {
            let (va, vb) = reduce_aligned((child[a], child[b]), m);
            parent.push(hash(fa, va));
            parent.push(hash(fb, vb));
        }
    }
}

pub(crate) fn build(prog: &Program) -> (Plan, Vec<Output<i64>>) {
    let built = Plan::build(|b| {
        let mut t = Typed {
            l0: vec![b.source::<L0, i64>()],
            ..Typed::default()
        };
        for op in &prog.ops {
            match *op {
                Op::Map { lvl, src, f } => on_level!(t, lvl, v => map_op(v, src, f)),
                Op::Filter {
                    lvl,
                    value,
                    mask_src,
                    f,
                } => on_level!(t, lvl, v => filter_op(v, value, mask_src, f)),
                Op::Binary {
                    lvl,
                    a,
                    b,
                    opt_a,
                    opt_b,
                    f,
                } => on_level!(t, lvl, v => binary_op(v, a, b, opt_a, opt_b, f)),
                Op::Broadcast { lvl, from, src, like } => match (from, lvl) {
                    (0, 1) => broadcast_op(&t.l0, &mut t.l1, src, like),
                    (0, 2) => broadcast_op(&t.l0, &mut t.l2, src, like),
                    (0, 3) => broadcast_op(&t.l0, &mut t.l3, src, like),
                    (1, 2) => broadcast_op(&t.l1, &mut t.l2, src, like),
                    (1, 3) => broadcast_op(&t.l1, &mut t.l3, src, like),
                    (2, 3) => broadcast_op(&t.l2, &mut t.l3, src, like),
                    other => unreachable!("no broadcast {other:?}"),
                },
                Op::Expand { lvl, a, fa, b } => match lvl {
                    1 => expand_op(&t.l0, &mut t.l1, a, fa, b),
                    2 => expand_op(&t.l1, &mut t.l2, a, fa, b),
                    3 => expand_op(&t.l2, &mut t.l3, a, fa, b),
                    l => unreachable!("no expansion into {l}"),
                },
                Op::Reduce {
                    lvl,
                    a,
                    fa,
                    b,
                    members,
                    keep_failed,
                } => match lvl {
                    0 => reduce_op(&t.l1, &mut t.l0, a, fa, b, members, keep_failed),
                    1 => reduce_op(&t.l2, &mut t.l1, a, fa, b, members, keep_failed),
                    2 => reduce_op(&t.l3, &mut t.l2, a, fa, b, members, keep_failed),
                    l => unreachable!("no reduce into {l}"),
                },
            }
        }
        t.l0.iter().map(|&p| b.output(p)).collect::<Vec<_>>()
    });
    match built {
        Ok(x) => x,
        Err(e) => panic!("the generator made an invalid plan: {e:?}\n{prog}"),
    }
}
