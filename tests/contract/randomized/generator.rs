//! The program generator: raw proptest draws decoded into well-formed
//! programs, and the guard that it keeps reaching every construct.

use super::*;

/// Raw draws, decoded into a well-formed program by `Decoder`. Proptest
/// shrinks these toward zero, which decodes to fewer, plainer ops (maps,
/// the newest ports, no failures), so a failure shrinks to a small listing.
#[derive(Clone, Debug)]
pub(crate) struct RawFx {
    p: u8,
    q: u16,
    fail: u8,
    m: u8,
    r: u8,
    res: u8,
    batch: u8,
    /// Recovery policy and poison.
    rec: u8,
    /// Blocking or async, and how a poisoned batch fails.
    exec: u16,
}

#[derive(Clone, Debug)]
pub(crate) struct RawOp {
    kind: u8,
    lvl: u8,
    a: u16,
    b: u16,
    c: u16,
    flags: u8,
    f: RawFx,
    g: RawFx,
}

pub(crate) fn raw_fx() -> impl Strategy<Value = RawFx> {
    (
        any::<u8>(),
        any::<u16>(),
        any::<u8>(),
        any::<u8>(),
        any::<u8>(),
        any::<u8>(),
        any::<u8>(),
        any::<u8>(),
        any::<u16>(),
    )
        .prop_map(|(p, q, fail, m, r, res, batch, rec, exec)| RawFx {
            p,
            q,
            fail,
            m,
            r,
            res,
            batch,
            rec,
            exec,
        })
}

pub(crate) fn raw_op() -> impl Strategy<Value = RawOp> {
    (
        any::<u8>(),
        any::<u8>(),
        any::<u16>(),
        any::<u16>(),
        any::<u16>(),
        any::<u8>(),
        raw_fx(),
        raw_fx(),
    )
        .prop_map(|(kind, lvl, a, b, c, flags, f, g)| RawOp {
            kind,
            lvl,
            a,
            b,
            c,
            flags,
            f,
            g,
        })
}

/// Which constructs a program may use beyond the always-on ones (blocking
/// and async stages, retrying and isolating Calls, poisoned records).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Gen {
    /// Some Calls return `GroupFailure` instead of `RecordFailure`, and at
    /// least one Call below the root does.
    pub(crate) group: bool,
    /// Some Calls are `Recovery::Abort`, most of them with poisoned records.
    pub(crate) abort: bool,
    /// A poisoned async stage may panic (inside its future, or before
    /// returning it) instead of returning `Err`.
    pub(crate) async_panics: bool,
    /// An Isolate Call with poisoned records may batch Grains of several
    /// parents, so batch-mates of a failed batch can go stale separately and
    /// leave an innocent Grain the only live one (the engine must retry it,
    /// not take it for the poison: `isolate_never_fails_a_record_that_did_not_fail_alone`).
    /// When false, such Calls are `ParentBound` below the root and unpoisoned
    /// at the root.
    pub(crate) isolate_mixes_parents: bool,
}

/// Everything the simulated executor runs.
pub(crate) const SIM: Gen = Gen {
    group: false,
    abort: false,
    async_panics: true,
    isolate_mixes_parents: true,
};

/// A program with 1–3 expansion levels.
pub(crate) fn program(mix: Gen) -> impl Strategy<Value = Program> {
    (1..=3usize, prop::collection::vec(raw_op(), 3..=20), any::<u16>())
        .prop_map(move |(depth, raws, g)| Decoder::decode(depth, &raws, mix, g))
}

#[derive(Clone, Copy)]
pub(crate) enum FxKind {
    Arith,
    Mask,
    List { max: i64 },
    Hash,
}

pub(crate) struct Decoder {
    mix: Gen,
    depth: usize,
    entered: usize,
    /// Per level: whether each Port has a consumer yet (liveness: every Port
    /// must reach an output, or the plan is rejected).
    used: Vec<Vec<bool>>,
    ops: Vec<Op>,
    next_id: usize,
}

impl Decoder {
    fn decode(depth: usize, raws: &[RawOp], mix: Gen, g: u16) -> Program {
        let mut d = Decoder {
            mix,
            depth,
            entered: 0,
            used: vec![vec![false], vec![], vec![], vec![]],
            ops: Vec::new(),
            next_id: 0,
        };
        for raw in raws {
            d.step(raw);
        }
        while d.entered < d.depth {
            let src = d.used[d.entered].len() - 1;
            d.expand(src, None, &RawFx::plain(), None);
        }
        if mix.group {
            d.force_group(g);
        }
        d.close();
        if !mix.isolate_mixes_parents {
            d.unpoison_isolated_roots();
        }
        Program { ops: d.ops }
    }

    fn fx(&mut self, raw: &RawFx, kind: FxKind) -> Fx {
        let id = self.next_id;
        self.next_id += 1;
        let (p, q) = match kind {
            FxKind::Arith => (1 + i64::from(raw.p % 9), i64::from(raw.q % 1000)),
            FxKind::Mask => {
                let p = 2 + i64::from(raw.p % 4);
                (p, i64::from(raw.q) % p)
            }
            FxKind::List { max } => (i64::from(raw.p) % (max + 1), i64::from(raw.q % 10)),
            FxKind::Hash => (0, 0),
        };
        let m = 5 + i64::from(raw.m % 9);
        let r = i64::from(raw.r) % m;
        let fail = match raw.fail % 10 {
            0..=5 => Fail::Never,
            9 if self.mix.group => Fail::Group { m, r },
            _ => Fail::Record { m, r },
        };
        let rec = match raw.rec % 8 {
            0..=3 if raw.batch >= 128 => Rec::RetryTail,
            0..=3 => Rec::RetryBatch,
            6 | 7 if self.mix.abort => Rec::Abort,
            _ => Rec::Isolate,
        };
        let exec = match raw.exec % 5 {
            1 | 2 => Exec::Async {
                base: u32::from(raw.exec / 5 % 1500),
                concurrency: 1 + usize::from(raw.exec / 7500) % 3,
            },
            _ => Exec::Blocking,
        };
        let how = match (raw.rec / 8) % 3 {
            1 if exec != Exec::Blocking && !self.mix.async_panics => How::Err,
            1 => How::Panic,
            2 if exec != Exec::Blocking && self.mix.async_panics => How::PanicEarly,
            _ => How::Err,
        };
        // A poisoned value fires on about one judged record in `m`; an Abort
        // Call's rarely, so that many Abort programs run to the end.
        let poison = match rec {
            Rec::Isolate if !(raw.rec / 24).is_multiple_of(3) => Some(11 + i64::from(raw.m / 16)),
            Rec::Abort if !(raw.rec / 24).is_multiple_of(3) => Some(20 + i64::from(raw.m % 40)),
            _ => None,
        }
        .map(|m| Poison {
            m,
            r: i64::from(raw.q / 3) % m,
            how,
        });
        let res = match raw.res % 4 {
            _ if rec == Rec::Isolate && poison.is_some() && !self.mix.isolate_mixes_parents => {
                Reservation::ParentBound
            }
            0 => Reservation::Elastic,
            1 => Reservation::ParentBound,
            2 => Reservation::Unordered,
            _ => Reservation::NearestCompletion,
        };
        Fx {
            id,
            p,
            q,
            fail,
            res,
            batch: 1 + raw.batch as usize % 16,
            rec,
            poison,
            exec,
            replicas: 1 + (raw.res as usize / 3) % 3,
            // Bits 4-5 of `batch` (the size reads bits 0-3, RetryTail bit 7).
            shape: matches!((raw.batch / 16) % 4, 1 | 2).then(|| 2 + i64::from(raw.p % 3)),
            delay_us: matches!((raw.batch / 16) % 4, 2 | 3).then(|| 100 + u64::from(raw.q % 2000)),
            stall: false,
        }
    }

    /// Mostly one of the three newest Ports, so that programs grow long
    /// dependency chains rather than many shallow branches off the source.
    fn pick(&mut self, lvl: usize, raw: u16) -> usize {
        let n = self.used[lvl].len();
        let r = (raw >> 1) as usize;
        let i = if raw & 1 == 0 { n - 1 - r % n.min(3) } else { r % n };
        self.used[lvl][i] = true;
        i
    }

    fn add(&mut self, lvl: usize) {
        self.used[lvl].push(false);
    }

    /// Mostly the deepest level entered so far, sometimes any.
    fn level(&self, raw: u8) -> usize {
        if raw & 1 == 0 {
            self.entered
        } else {
            (raw >> 1) as usize % (self.entered + 1)
        }
    }

    /// Out of 16: map 4, filter 3, binary 3, broadcast 2, expand or reduce 4.
    /// An op the current depth cannot host (a broadcast or reduce before the
    /// first expansion, an expansion past `depth`) becomes another one, so
    /// every draw decodes to a valid op.
    fn step(&mut self, raw: &RawOp) {
        let can_expand = self.entered < self.depth;
        let kind = match raw.kind % 16 {
            10 | 11 if self.entered == 0 => 0,
            12..=15 if can_expand && (raw.kind % 16 <= 13 || self.entered == 0) => 12,
            12..=15 if self.entered > 0 => 14,
            12..=15 => 7,
            k => k,
        };
        match kind {
            0..=3 => {
                let lvl = self.level(raw.lvl);
                let src = self.pick(lvl, raw.a);
                let f = self.fx(&raw.f, FxKind::Arith);
                self.ops.push(Op::Map { lvl, src, f });
                self.add(lvl);
            }
            4..=6 => {
                let lvl = self.level(raw.lvl);
                let value = self.pick(lvl, raw.a);
                let mask_src = self.pick(lvl, raw.b);
                let f = self.fx(&raw.f, FxKind::Mask);
                self.ops.push(Op::Filter {
                    lvl,
                    value,
                    mask_src,
                    f,
                });
                self.add(lvl);
            }
            7..=9 => {
                let lvl = self.level(raw.lvl);
                let a = self.pick(lvl, raw.a);
                let b = self.pick(lvl, raw.b);
                let f = self.fx(&raw.f, FxKind::Arith);
                self.ops.push(Op::Binary {
                    lvl,
                    a,
                    b,
                    opt_a: raw.flags & 16 != 0,
                    opt_b: raw.flags & 32 != 0,
                    f,
                });
                self.add(lvl);
            }
            10 | 11 => {
                let lvl = if raw.lvl & 1 == 0 {
                    self.entered
                } else {
                    1 + (raw.lvl >> 1) as usize % self.entered
                };
                let from = raw.c as usize % lvl;
                let src = self.pick(from, raw.a);
                let like = self.pick(lvl, raw.b);
                self.ops.push(Op::Broadcast { lvl, from, src, like });
                self.add(lvl);
            }
            12 => {
                let a = self.pick(self.entered, raw.a);
                let b = (raw.flags & 1 != 0).then(|| {
                    if raw.flags & 2 != 0 {
                        a
                    } else {
                        self.pick(self.entered, raw.b)
                    }
                });
                // Same source and same length rule: the aligned lists always
                // agree; otherwise they often do not (a cardinality mismatch).
                self.expand(a, b, &raw.f, Some((&raw.g, raw.flags & 2 != 0)));
            }
            _ => {
                let lvl = if raw.lvl & 1 == 0 {
                    self.entered - 1
                } else {
                    (raw.lvl >> 1) as usize % self.entered
                };
                let a = self.pick(lvl + 1, raw.a);
                let fa = self.fx(&raw.f, FxKind::Hash);
                let b = if raw.flags & 8 != 0 {
                    let b = self.pick(lvl + 1, raw.b);
                    Some((b, self.fx(&raw.g, FxKind::Hash)))
                } else {
                    None
                };
                let members = (raw.flags & 4 != 0).then(|| self.pick(lvl + 1, raw.c));
                // A quarter of the one-input reduces without members.
                let keep_failed = b.is_none() && members.is_none() && raw.flags & 3 == 3;
                self.add(lvl);
                if b.is_some() {
                    self.add(lvl);
                }
                self.ops.push(Op::Reduce {
                    lvl,
                    a,
                    fa,
                    b,
                    members,
                    keep_failed,
                });
            }
        }
    }

    fn expand(&mut self, a: usize, b: Option<usize>, fa: &RawFx, fb: Option<(&RawFx, bool)>) {
        let lvl = self.entered + 1;
        // Shorter lists deeper down keep the entity count (and the run time) small.
        let max = if lvl == 1 { 4 } else { 3 };
        self.used[self.entered][a] = true;
        let fa = self.fx(fa, FxKind::List { max });
        let b = match (b, fb) {
            (Some(b), Some((raw, same))) => {
                let mut fb = self.fx(raw, FxKind::List { max });
                if same {
                    fb.p = fa.p;
                    fb.q = fa.q;
                }
                Some((b, fb))
            }
            _ => None,
        };
        self.ops.push(Op::Expand { lvl, a, fa, b });
        self.entered = lvl;
        self.add(lvl);
        if b.is_some() {
            self.add(lvl);
        }
    }

    /// Make one Call below the root a GroupFailure source that fires often.
    fn force_group(&mut self, g: u16) {
        let m = 3 + i64::from(g % 3);
        let r = i64::from(g / 3) % m;
        let candidates: Vec<usize> = self
            .ops
            .iter()
            .enumerate()
            .filter(|(_, op)| {
                matches!(op, Op::Map { lvl, .. } | Op::Filter { lvl, .. } | Op::Binary { lvl, .. } if *lvl >= 1)
            })
            .map(|(i, _)| i)
            .collect();
        if candidates.is_empty() {
            let lvl = self.entered;
            let src = self.used[lvl].len() - 1;
            self.used[lvl][src] = true;
            let mut f = self.fx(&RawFx::plain(), FxKind::Arith);
            f.fail = Fail::Group { m, r };
            self.ops.push(Op::Map { lvl, src, f });
            self.add(lvl);
            return;
        }
        let i = candidates[g as usize % candidates.len()];
        if let Op::Map { f, .. } | Op::Filter { f, .. } | Op::Binary { f, .. } = &mut self.ops[i] {
            f.fail = Fail::Group { m, r };
        }
    }

    /// Root-level Calls batch Grains of several roots whatever their
    /// reservation: drop the poison of their Isolate Calls (see
    /// `Gen::isolate_mixes_parents`).
    fn unpoison_isolated_roots(&mut self) {
        let unpoison = |f: &mut Fx| {
            if f.rec == Rec::Isolate {
                f.poison = None;
            }
        };
        for op in &mut self.ops {
            match op {
                Op::Map { lvl: 0, f, .. } | Op::Filter { lvl: 0, f, .. } | Op::Binary { lvl: 0, f, .. } => {
                    unpoison(f)
                }
                Op::Expand { lvl: 1, fa, b, .. } | Op::Reduce { lvl: 0, fa, b, .. } => {
                    unpoison(fa);
                    if let Some((_, fb)) = b {
                        unpoison(fb);
                    }
                }
                _ => {}
            }
        }
    }

    /// Reduce every Port without a consumer up to the root, where every Port
    /// is an output.
    fn close(&mut self) {
        for lvl in (1..=self.entered).rev() {
            for a in 0..self.used[lvl].len() {
                if !self.used[lvl][a] {
                    self.used[lvl][a] = true;
                    let fa = self.fx(&RawFx::plain(), FxKind::Hash);
                    self.ops.push(Op::Reduce {
                        lvl: lvl - 1,
                        a,
                        fa,
                        b: None,
                        members: None,
                        keep_failed: false,
                    });
                    self.add(lvl - 1);
                }
            }
        }
    }
}

impl RawFx {
    fn plain() -> RawFx {
        RawFx {
            p: 255,
            q: 1,
            fail: 0,
            m: 0,
            r: 0,
            res: 0,
            batch: 7,
            rec: 0,
            exec: 0,
        }
    }
}

/// The properties above are only as strong as the programs they are fed:
/// pin that the generator keeps reaching every construct and every Item
/// kind, so that a change to the decoder cannot quietly make them trivial.
#[test]
fn generator_reaches_every_construct() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;

    let mut runner = TestRunner::deterministic();
    let mut seen = BTreeSet::new();
    let no_async_panics = Gen {
        async_panics: false,
        ..SIM
    };
    for mix in [
        SIM,
        Gen { group: true, ..SIM },
        Gen { abort: true, ..SIM },
        no_async_panics,
    ] {
        let (mut roots, mut fired, mut aborting) = (0, 0, 0);
        for _ in 0..300 {
            let prog = program(mix).new_tree(&mut runner).unwrap().current();
            for op in &prog.ops {
                seen.insert(match op {
                    Op::Map { .. } => "map",
                    Op::Filter { .. } => "filter",
                    Op::Binary { opt_a, opt_b, .. } if *opt_a || *opt_b => "binary with an optional input",
                    Op::Binary { .. } => "binary",
                    Op::Broadcast { lvl, from, .. } if lvl - from >= 2 => "broadcast from a grandparent",
                    Op::Broadcast { .. } => "broadcast",
                    Op::Expand { lvl: 3, .. } => "expand into L3",
                    Op::Expand { b: Some(_), .. } => "expand_aligned",
                    Op::Expand { .. } => "expand",
                    Op::Reduce { b: Some(_), .. } => "reduce_aligned",
                    Op::Reduce { members: Some(_), .. } => "reduce_members",
                    Op::Reduce {
                        keep_failed: true, ..
                    } => "reduce keep_failed",
                    Op::Reduce { .. } => "reduce",
                });
            }
            for f in prog.fxs() {
                seen.insert(match f.rec {
                    Rec::RetryBatch => "RetryBatch",
                    Rec::RetryTail => "RetryTail",
                    Rec::Isolate => "Isolate",
                    Rec::Abort => "Abort",
                });
                if let Exec::Async { concurrency, .. } = f.exec {
                    seen.insert(if concurrency > 1 {
                        "async, concurrent"
                    } else {
                        "async"
                    });
                }
                let (what, async_panic) = match (f.poison.map(|p| p.how), f.exec) {
                    (None, _) => continue,
                    (Some(How::Err), _) => ("poison: Err", false),
                    (Some(How::Panic), Exec::Blocking) => ("poison: blocking panic", false),
                    (Some(How::Panic), Exec::Async { .. }) => ("poison: panic in the future", true),
                    (Some(How::PanicEarly), _) => ("poison: panic before the future", true),
                };
                seen.insert(what);
                assert!(
                    mix.async_panics || !async_panic,
                    "an async panic in a program for the threaded Runner:\n{prog}"
                );
            }
            let inputs = prop::collection::vec(0..1000i64, 1..=30)
                .new_tree(&mut runner)
                .unwrap()
                .current();
            aborting += usize::from(!reference(&prog, &inputs).aborts.is_empty());
            for x in inputs {
                let mut oracle = Oracle::default();
                roots += 1;
                let (outs, _) = eval_root(&prog, x, &mut oracle);
                for r in outs {
                    seen.insert(match &r {
                        R::Present(_) => "Present",
                        R::Dropped => "Dropped",
                        R::Failed(c) if c.contains(" is poisoned by ") => "Failed by its poisoned record",
                        R::Failed(_) => "Failed",
                        R::Suppressed(c) if c.contains(MISMATCH) => "cardinality mismatch",
                        R::Suppressed(c) if c.iter().any(|c| c.contains(" is poisoned by ")) => {
                            "Suppressed by a poisoned record"
                        }
                        R::Suppressed(_) => "Suppressed",
                    });
                }
                fired += usize::from(!oracle.script.is_empty());
            }
        }
        if mix.group {
            assert!(
                fired * 10 >= roots,
                "GroupFailures fired in only {fired} of {roots} roots"
            );
        } else {
            assert_eq!(fired, 0, "GroupFailures outside the envelope property");
        }
        if mix.abort {
            // Both branches of the Abort property: runs that must abort, and
            // runs of Abort programs that must complete.
            assert!(
                (30..=270).contains(&aborting),
                "{aborting} of 300 Abort runs abort"
            );
        } else {
            assert_eq!(aborting, 0, "aborts outside the Abort property");
        }
    }
    let all = [
        "map",
        "filter",
        "binary",
        "binary with an optional input",
        "broadcast",
        "broadcast from a grandparent",
        "expand",
        "expand_aligned",
        "expand into L3",
        "reduce",
        "reduce_members",
        "reduce_aligned",
        "reduce keep_failed",
        "RetryBatch",
        "RetryTail",
        "Isolate",
        "Abort",
        "async",
        "async, concurrent",
        "poison: Err",
        "poison: blocking panic",
        "poison: panic in the future",
        "poison: panic before the future",
        "Present",
        "Dropped",
        "Failed",
        "Failed by its poisoned record",
        "Suppressed",
        "Suppressed by a poisoned record",
        "cardinality mismatch",
    ];
    let missing: Vec<_> = all.iter().filter(|k| !seen.contains(*k)).collect();
    assert!(missing.is_empty(), "never generated: {missing:?}");
}
