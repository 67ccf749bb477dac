//! The sequential reference evaluator, written from DESIGN.md's "Runtime
//! contract" and CONFORMANCE.md §A and §C alone; it calls no engine code.

use super::*;

// Evaluates one root at a time, op by op, level by level, with no notion of
// batches, queues or time. Two places where the contract lets the schedule
// choose are modelled explicitly instead of guessed:
// - Which failure a Suppressed Item names. "Any failed input → Suppressed with
//   the cause of the input that decided it" and "any member failed →
//   Suppressed (even while others are pending)" mean that when several inputs
//   or members fail, whichever resolves first decides. So a Suppressed
//   reference Item holds the *set* of causes that could have decided it.
// - GroupFailure (CONFORMANCE §D's envelope): the evaluator asks an `Oracle`
//   which siblings committed before the barrier, and the caller enumerates
//   every answer.

/// A reference Item.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum R<T> {
    Present(T),
    Dropped,
    Failed(String),
    /// Any one of these causes is correct.
    Suppressed(BTreeSet<String>),
}

impl<T> R<T> {
    fn causes(&self) -> Option<BTreeSet<String>> {
        match self {
            R::Failed(c) => Some(BTreeSet::from([c.clone()])),
            R::Suppressed(s) => Some(s.clone()),
            _ => None,
        }
    }

    fn not_present<U>(&self) -> R<U> {
        match self {
            R::Present(_) => unreachable!("present"),
            R::Dropped => R::Dropped,
            R::Failed(c) => R::Failed(c.clone()),
            R::Suppressed(s) => R::Suppressed(s.clone()),
        }
    }
}

pub(crate) fn union_of_failures<'a, T: 'a>(items: impl IntoIterator<Item = &'a R<T>>) -> BTreeSet<String> {
    items.into_iter().filter_map(R::causes).flatten().collect()
}

pub(crate) enum Exp {
    Succeeded(Vec<usize>),
    Dropped,
    Failed(BTreeSet<String>),
}

pub(crate) struct Level {
    /// Per entity: its parent's index in the level above.
    parent: Vec<usize>,
    /// Per Port: per entity.
    ports: Vec<Vec<R<i64>>>,
    /// Per entity: its Expansion into the next level, once that is evaluated.
    kids: Vec<Exp>,
}

/// Replays a prefix of choices, then always takes choice 0 and records it;
/// `advance` moves to the next unexplored combination (depth first).
#[derive(Default)]
pub(crate) struct Oracle {
    pub(crate) script: Vec<(usize, usize)>,
    pos: usize,
}

impl Oracle {
    fn choose(&mut self, n: usize) -> usize {
        assert!(n > 0);
        let c = if self.pos < self.script.len() {
            assert_eq!(self.script[self.pos].1, n, "the replay diverged");
            self.script[self.pos].0
        } else {
            self.script.push((0, n));
            0
        };
        self.pos += 1;
        c
    }

    fn advance(&mut self) -> bool {
        self.pos = 0;
        while let Some(last) = self.script.last_mut() {
            if last.0 + 1 < last.1 {
                last.0 += 1;
                return true;
            }
            self.script.pop();
        }
        false
    }
}

/// What one Grain does, before barriers are taken into account.
pub(crate) enum Base<O> {
    Decided(R<O>),
    Ran(Res<O>),
}

pub(crate) struct Eval<'a> {
    levels: Vec<Level>,
    oracle: &'a mut Oracle,
    /// The Abort Calls that ran a poisoned record: any of them ends the run.
    aborts: BTreeSet<usize>,
}

impl Eval<'_> {
    fn rows(&self, lvl: usize, inputs: &[(usize, bool)]) -> Vec<Vec<(R<i64>, bool)>> {
        let l = &self.levels[lvl];
        (0..l.parent.len())
            .map(|e| {
                inputs
                    .iter()
                    .map(|&(p, opt)| (l.ports[p][e].clone(), opt))
                    .collect()
            })
            .collect()
    }

    /// One Call over every entity of `lvl`: the input precedence of the
    /// contract, then the stage, then GroupFailure barriers per parent.
    fn call<I: Clone, O: Clone>(
        &mut self,
        lvl: usize,
        fx: Fx,
        rows: Vec<Vec<(R<I>, bool)>>,
        f: impl Fn(Vec<Option<I>>) -> Res<O>,
    ) -> Vec<R<O>> {
        let base: Vec<Base<O>> = rows
            .into_iter()
            .map(|row| {
                let failed = union_of_failures(row.iter().map(|(r, _)| r));
                if !failed.is_empty() {
                    return Base::Decided(R::Suppressed(failed));
                }
                if row.iter().any(|(r, opt)| matches!(r, R::Dropped) && !opt) {
                    return Base::Decided(R::Dropped);
                }
                let args = row
                    .into_iter()
                    .map(|(r, _)| match r {
                        R::Present(v) => Some(v),
                        _ => None,
                    })
                    .collect();
                let res = f(args);
                if matches!(res, Res::Poison(_)) && fx.rec == Rec::Abort {
                    self.aborts.insert(fx.id);
                }
                Base::Ran(res)
            })
            .collect();
        // Siblings share a barrier; a root is its own group (it has no siblings).
        let mut groups: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for e in 0..base.len() {
            let key = if lvl == 0 { e } else { self.levels[lvl].parent[e] };
            groups.entry(key).or_default().push(e);
        }
        let plain = |b: &Base<O>| match b {
            Base::Decided(r) => r.clone(),
            Base::Ran(Res::Ok(v)) => R::Present(v.clone()),
            Base::Ran(Res::Record(c)) | Base::Ran(Res::Group(c)) => R::Failed(c.clone()),
            // Isolate bisects down to the record and fails it alone, with the
            // error of its last attempt (under Abort the run ends instead).
            Base::Ran(Res::Poison(why)) => R::Failed(fx.attempt_error(why)),
        };
        let mut out: Vec<R<O>> = base.iter().map(plain).collect();
        for sibs in groups.values() {
            let doomed: Vec<usize> = sibs
                .iter()
                .copied()
                .filter(|&e| matches!(base[e], Base::Ran(Res::Group(_))))
                .collect();
            if doomed.is_empty() {
                continue;
            }
            // Which failing siblings committed (Failed) before the barrier
            // closed on the rest: any non-empty subset, and the barrier
            // carries the cause of one of them.
            let mask = 1 + self.oracle.choose((1 << doomed.len()) - 1);
            let committed: Vec<usize> = (0..doomed.len())
                .filter(|i| mask & (1 << i) != 0)
                .map(|i| doomed[i])
                .collect();
            let first = committed[self.oracle.choose(committed.len())];
            let group_cause = match &out[first] {
                R::Failed(c) => BTreeSet::from([c.clone()]),
                _ => unreachable!("a doomed Grain is Failed"),
            };
            for &e in sibs {
                if doomed.contains(&e) {
                    if !committed.contains(&e) {
                        out[e] = R::Suppressed(group_cause.clone());
                    }
                    continue;
                }
                // A failed input decides before the barrier does; anything
                // else was either decided/committed before the barrier or is
                // suppressed by it.
                if matches!(base[e], Base::Decided(R::Suppressed(_))) {
                    continue;
                }
                if self.oracle.choose(2) == 1 {
                    out[e] = R::Suppressed(group_cause.clone());
                }
            }
        }
        out
    }

    fn push_port(&mut self, lvl: usize, items: Vec<R<i64>>) {
        self.levels[lvl].ports.push(items);
    }

    fn op(&mut self, op: &Op) {
        match *op {
            Op::Map { lvl, src, f } => {
                let rows = self.rows(lvl, &[(src, false)]);
                let out = self.call(lvl, f, rows, |v| f.arith(v[0].unwrap()));
                self.push_port(lvl, out);
            }
            Op::Filter {
                lvl,
                value,
                mask_src,
                f,
            } => {
                let rows = self.rows(lvl, &[(mask_src, false)]);
                let mask = self.call(lvl, f, rows, |v| f.keep(v[0].unwrap()));
                let out = self.levels[lvl].ports[value]
                    .iter()
                    .zip(mask)
                    .map(|(v, m)| match (v, m) {
                        (R::Present(_), R::Present(true)) => v.clone(),
                        (R::Present(_), R::Present(false)) => R::Dropped,
                        (R::Present(_), m) => m.not_present(),
                        (v, _) => v.clone(),
                    })
                    .collect();
                self.push_port(lvl, out);
            }
            Op::Binary {
                lvl,
                a,
                b,
                opt_a,
                opt_b,
                f,
            } => {
                let rows = self.rows(lvl, &[(a, opt_a), (b, opt_b)]);
                let out = self.call(lvl, f, rows, |v| f.binary(v[0], v[1]));
                self.push_port(lvl, out);
            }
            Op::Broadcast { lvl, from, src, .. } => {
                let out = (0..self.levels[lvl].parent.len())
                    .map(|e| {
                        let mut x = e;
                        for l in (from + 1..=lvl).rev() {
                            x = self.levels[l].parent[x];
                        }
                        self.levels[from].ports[src][x].clone()
                    })
                    .collect();
                self.push_port(lvl, out);
            }
            Op::Expand { lvl, a, fa, b } => self.expand(lvl, a, fa, b),
            Op::Reduce { .. } => self.reduce(op),
        }
    }

    fn expand(&mut self, lvl: usize, a: usize, fa: Fx, b: Option<(usize, Fx)>) {
        let up = lvl - 1;
        let rows = self.rows(up, &[(a, false)]);
        let la = self.call(up, fa, rows, |v| fa.list(v[0].unwrap()));
        let lb = b.map(|(b, fb)| {
            let rows = self.rows(up, &[(b, false)]);
            self.call(up, fb, rows, |v| fb.list(v[0].unwrap()))
        });
        let mut parent = Vec::new();
        let mut xa = Vec::new();
        let mut xb = Vec::new();
        let mut kids = Vec::new();
        for p in 0..la.len() {
            let lists: Vec<&R<Vec<i64>>> = std::iter::once(&la[p])
                .chain(lb.as_ref().map(|l| &l[p]))
                .collect();
            let failed = union_of_failures(lists.iter().copied());
            let exp = if !failed.is_empty() {
                Exp::Failed(failed)
            } else if lists.iter().any(|l| matches!(l, R::Dropped)) {
                Exp::Dropped
            } else {
                let lists: Vec<&Vec<i64>> = lists
                    .iter()
                    .map(|l| match l {
                        R::Present(v) => v,
                        _ => unreachable!("only present lists are left"),
                    })
                    .collect();
                if lists.iter().any(|l| l.len() != lists[0].len()) {
                    Exp::Failed(BTreeSet::from([MISMATCH.to_string()]))
                } else {
                    let first = parent.len();
                    for j in 0..lists[0].len() {
                        parent.push(p);
                        xa.push(R::Present(lists[0][j]));
                        if let Some(l) = lists.get(1) {
                            xb.push(R::Present(l[j]));
                        }
                    }
                    Exp::Succeeded((first..parent.len()).collect())
                }
            };
            kids.push(exp);
        }
        self.levels[up].kids = kids;
        let mut ports = vec![xa];
        if b.is_some() {
            ports.push(xb);
        }
        assert_eq!(self.levels.len(), lvl, "one expansion per Domain");
        self.levels.push(Level {
            parent,
            ports,
            kids: Vec::new(),
        });
    }

    fn reduce(&mut self, op: &Op) {
        let Op::Reduce {
            lvl,
            a,
            fa,
            b,
            members,
            keep_failed,
        } = *op
        else {
            unreachable!("called for a reduce")
        };
        let child = &self.levels[lvl + 1];
        let cols: Vec<&Vec<R<i64>>> = std::iter::once(a)
            .chain(b.map(|(b, _)| b))
            .map(|p| &child.ports[p])
            .collect();
        let mask = members.map(|m| &child.ports[m]);
        let mut gathered: Vec<Vec<R<Vec<i64>>>> = vec![Vec::new(); cols.len()];
        for exp in &self.levels[lvl].kids {
            let items: Vec<R<Vec<i64>>> = match exp {
                Exp::Dropped => vec![R::Dropped; cols.len()],
                Exp::Failed(c) => vec![R::Suppressed(c.clone()); cols.len()],
                // "A Failed or Suppressed child becomes Err(cause) at its
                // ordinal, a Dropped child is left out; child failures do
                // not suppress the parent" (one input, no members).
                Exp::Succeeded(ch) if keep_failed => vec![R::Present(
                    ch.iter()
                        .filter_map(|&c| match cols[0][c] {
                            R::Present(v) => Some(v),
                            R::Dropped => None,
                            R::Failed(_) | R::Suppressed(_) => Some(FAILED_CHILD),
                        })
                        .collect(),
                )],
                Exp::Succeeded(ch) => {
                    let failed = union_of_failures(
                        ch.iter()
                            .flat_map(|&c| cols.iter().map(move |col| &col[c]).chain(mask.map(|m| &m[c]))),
                    );
                    if !failed.is_empty() {
                        vec![R::Suppressed(failed); cols.len()]
                    } else {
                        let survivors: Vec<usize> = ch
                            .iter()
                            .copied()
                            .filter(|&c| {
                                cols.iter().all(|col| matches!(col[c], R::Present(_)))
                                    && mask.is_none_or(|m| matches!(m[c], R::Present(_)))
                            })
                            .collect();
                        cols.iter()
                            .map(|col| {
                                R::Present(
                                    survivors
                                        .iter()
                                        .map(|&c| match col[c] {
                                            R::Present(v) => v,
                                            _ => unreachable!("survivors are present"),
                                        })
                                        .collect(),
                                )
                            })
                            .collect()
                    }
                }
            };
            for (g, item) in gathered.iter_mut().zip(items) {
                g.push(item);
            }
        }
        let fxs: Vec<Fx> = std::iter::once(fa).chain(b.map(|(_, f)| f)).collect();
        for (g, f) in gathered.into_iter().zip(fxs) {
            let rows = g.into_iter().map(|r| vec![(r, false)]).collect();
            let out = self.call(lvl, f, rows, |v| f.hash(v[0].as_ref().unwrap()));
            self.push_port(lvl, out);
        }
    }
}

/// The root's outputs under the GroupFailure resolution `oracle` picks, and
/// the Abort Calls that ran a poisoned record of it.
pub(crate) fn eval_root(prog: &Program, input: i64, oracle: &mut Oracle) -> (Vec<R<i64>>, BTreeSet<usize>) {
    let mut ev = Eval {
        levels: vec![Level {
            parent: vec![usize::MAX],
            ports: vec![vec![R::Present(input)]],
            kids: Vec::new(),
        }],
        oracle,
        aborts: BTreeSet::new(),
    };
    for op in &prog.ops {
        ev.op(op);
    }
    let outs = ev.levels[0].ports.iter().map(|p| p[0].clone()).collect();
    (outs, ev.aborts)
}

/// A root's allowed output vectors (`None`: too many to enumerate).
pub(crate) type Allowed = Option<Vec<Vec<R<i64>>>>;

/// Every root output vector the contract allows for one root, one per
/// GroupFailure resolution (exactly one for programs without GroupFailures);
/// `None` when there are more than `cap`. Also the Abort Calls that ran a
/// poisoned record of the root.
pub(crate) fn allowed_outputs(prog: &Program, input: i64, cap: usize) -> (Allowed, BTreeSet<usize>) {
    let mut oracle = Oracle::default();
    let mut seen = HashSet::new();
    let mut all = Vec::new();
    let mut aborts = BTreeSet::new();
    for _ in 0..cap {
        let (out, a) = eval_root(prog, input, &mut oracle);
        aborts.extend(a);
        if seen.insert(out.clone()) {
            all.push(out);
        }
        if !oracle.advance() {
            return (Some(all), aborts);
        }
    }
    (None, aborts)
}
