//! Cross-cutting structural checks: follow each Port's Domain through
//! `forward` and report the mistakes that need more than one operation to see.
//!
//! The macro knows Domains only as the user spelled them: the parameter types
//! (`Port<Pdf, _>`, the roots) and the `=> Child` of each `expand!`. A local
//! gets a Domain from its initialiser; anything the walk cannot follow (a helper
//! function, an `if` with different arms, a closure) is *unknown*, and no check
//! fires on an unknown Domain: rustc, aimed by `expand`'s check calls, decides
//! those. Checked:
//! - `reduce!` of a root-Domain Port: `reduce!(pdfs)`;
//! - an `expand!` into a Domain that no `reduce!` gathers before `forward`
//!   returns its root-Domain Ports;
//! - `reduce!` members, a `filter!` mask, or the second aligned Port in
//!   another Domain than the Port they go with;
//! - a Port where Rust wants a `bool`: `if mask { .. }`, `!mask`, `a && b`;
//! - `let (a, b) = self.call(x);` without `split!`;
//! - several source Ports in different root Domains;
//! - two `expand!` into one child Domain, or an `expand!` into the Port's own
//!   Domain;
//! - a `broadcast!` from a Domain that is not an ancestor of `like`'s (known
//!   when both Domains were entered by `expand!`s of this `forward`);
//! - an operation whose Port is never used (a `let` never read, or a
//!   statement `self.call(x);`): the plan would reject it as an unused node,
//!   with no line to point at.
//!
//! Two Domain types are "the same" when their last path segments are equal
//! (`crate::Page` and `Page`), which can only miss an error. The one way to
//! get a wrong error is to spell one Domain under two names (a type alias):
//! Domains are meant to be written by their own name.

use std::collections::{HashMap, HashSet};

use quote::ToTokens;
use syn::visit::{self, Visit};
use syn::{BinOp, Block, Expr, Local, Pat, Stmt, Type, UnOp};

use crate::ast::{Pipeline, PortType};
use crate::body::{Op, OpKind, op_index};
use crate::ctxt::Ctxt;
use crate::symbol::PORT_METHODS;

pub(crate) fn check(cx: &Ctxt, pipeline: &Pipeline<'_>) {
    let forward = &pipeline.forward;
    let mut walk = Walk {
        cx,
        ops: &forward.body.ops,
        scopes: vec![HashMap::new()],
        domains: HashMap::new(),
        expands: Vec::new(),
        reduced: HashSet::new(),
        reduced_unknown: false,
        lets: Vec::new(),
    };
    let mut root: Option<Dom> = None;
    for source in &forward.sig.sources {
        let dom = Dom::of(source.port.domain);
        match &root {
            Some(first) if first.key != dom.key => cx.error_spanned_by(
                source.port.domain,
                format!(
                    "all source Ports of `forward` are in one root Domain, but this one is in `{}` and the first in `{}`: take both in `{}`",
                    dom.name(),
                    first.name(),
                    first.name()
                ),
            ),
            Some(_) => {}
            None => root = Some(dom.clone()),
        }
        walk.domains.insert(dom.key.clone(), Parent::Root);
        if let Some(name) = source.name {
            walk.bind(&name.to_string(), Flow::Port(Some(dom)));
        }
    }
    walk.block(&forward.body.block);
    walk.unreduced_expands(&forward.sig.outputs);
    walk.unused_lets();
}

/// A Domain as the user spelled it.
#[derive(Clone)]
struct Dom {
    key: String,
    ty: Type,
}

impl Dom {
    fn of(ty: &Type) -> Dom {
        let ty = crate::ast::peel(ty);
        let key = match ty {
            Type::Path(p) => p.path.segments.last().map_or_else(
                || ty.to_token_stream().to_string(),
                |s| s.to_token_stream().to_string(),
            ),
            _ => ty.to_token_stream().to_string(),
        };
        Dom { key, ty: ty.clone() }
    }

    fn name(&self) -> String {
        self.ty.to_token_stream().to_string().replace(' ', "")
    }
}

/// What an expression is, as far as the walk can tell.
#[derive(Clone)]
enum Flow {
    /// A Port (or `.optional()` Port), in a known Domain or not.
    Port(Option<Dom>),
    /// A tuple, e.g. from `expand_aligned!`.
    Tuple(Vec<Flow>),
    /// `split!(..)`: any number of Ports of one Domain.
    Split(Option<Dom>),
    /// Not a Port, or unknown.
    Other,
}

impl Flow {
    fn dom(&self) -> Option<&Dom> {
        match self {
            Flow::Port(d) => d.as_ref(),
            _ => None,
        }
    }
}

enum Parent {
    Root,
    Child(Box<Dom>),
    Unknown,
}

struct Walk<'a> {
    cx: &'a Ctxt,
    ops: &'a [Op],
    scopes: Vec<HashMap<String, Flow>>,
    /// What the walk knows of each Domain's parent.
    domains: HashMap<String, Parent>,
    /// Each `expand!`'s child Domain, in order.
    expands: Vec<Dom>,
    /// Child Domains some `reduce!` gathers.
    reduced: HashSet<String>,
    /// A `reduce!` of a Port whose Domain the walk lost: then no expansion
    /// can be called unreduced.
    reduced_unknown: bool,
    /// Each `let name = <operation>;` and whether `name` was read since.
    lets: Vec<(syn::Ident, bool)>,
}

impl Walk<'_> {
    fn bind(&mut self, name: &str, flow: Flow) {
        self.scopes
            .last_mut()
            .expect("a scope")
            .insert(name.to_string(), flow);
    }

    fn lookup(&mut self, name: &str) -> Flow {
        let flow = self
            .scopes
            .iter()
            .rev()
            .find_map(|s| s.get(name).cloned())
            .unwrap_or(Flow::Other);
        // The innermost `let` of that name is the one read.
        if let Some((_, used)) = self.lets.iter_mut().rev().find(|(id, _)| id == name) {
            *used = true;
        }
        flow
    }

    /// A macro other than the operations (`vec![a, b]`, `dbg!(x)`): its
    /// tokens are not parsed, so any name in them counts as read.
    fn read_tokens(&mut self, tokens: &proc_macro2::TokenStream) {
        for t in tokens.clone() {
            match t {
                proc_macro2::TokenTree::Ident(id) => {
                    if let Some((_, used)) = self.lets.iter_mut().rev().find(|(l, _)| *l == id) {
                        *used = true;
                    }
                }
                proc_macro2::TokenTree::Group(g) => self.read_tokens(&g.stream()),
                _ => {}
            }
        }
    }

    /// Every `let` of an operation's Port is read later: a Port nobody
    /// reads is a node the plan cannot connect to an output.
    fn unused_lets(&self) {
        // A malformed operation (already reported) did not read its arguments.
        if self.ops.iter().any(|op| matches!(op.kind, OpKind::Invalid)) {
            return;
        }
        for (id, _) in self
            .lets
            .iter()
            .filter(|(id, used)| !used && !id.to_string().starts_with('_'))
        {
            self.cx.error_spanned_by(
                id,
                format!("`{id}` is never used: every operation's Port must flow into `forward`'s result; pass `{id}` to a Call, `reduce!` it or return it, or remove this `let`"),
            );
        }
    }

    fn block(&mut self, b: &Block) -> Flow {
        self.scopes.push(HashMap::new());
        let mut last = Flow::Other;
        for stmt in &b.stmts {
            last = match stmt {
                Stmt::Local(local) => {
                    self.local(local);
                    Flow::Other
                }
                Stmt::Expr(e, None) => self.expr(e),
                Stmt::Expr(e, Some(_)) => {
                    if op_index(e).is_some() {
                        self.cx.error_spanned_by(
                            e,
                            "this operation's Port is dropped: every operation's Port must flow into `forward`'s result; bind it with `let` and use it, or remove this line",
                        );
                    }
                    self.expr(e);
                    Flow::Other
                }
                Stmt::Macro(m) => {
                    self.read_tokens(&m.mac.tokens);
                    Flow::Other
                }
                Stmt::Item(_) => Flow::Other,
            };
        }
        self.scopes.pop();
        last
    }

    fn local(&mut self, local: &Local) {
        let Some(init) = &local.init else { return };
        let flow = self.expr(&init.expr);
        if let Some((_, diverge)) = &init.diverge {
            self.expr(diverge);
        }
        let op = op_index(&init.expr);
        let single_call = op.is_some_and(|i| matches!(&self.ops[i].kind, OpKind::Apply(a) if !a.split));
        if op.is_some()
            && let Pat::Ident(p) = &local.pat
            && matches!(flow, Flow::Port(_))
        {
            self.lets.push((p.ident.clone(), false));
        }
        self.pattern(&local.pat, flow, single_call);
    }

    fn pattern(&mut self, pat: &Pat, flow: Flow, single_call: bool) {
        match pat {
            Pat::Ident(p) => self.bind(&p.ident.to_string(), flow),
            Pat::Type(pt) => {
                let flow = match PortType::from_type(&pt.ty) {
                    Some(port) => Flow::Port(Some(Dom::of(port.domain))),
                    None => flow,
                };
                self.pattern(&pt.pat, flow, single_call);
            }
            Pat::Tuple(t) if single_call => self.cx.error_spanned_by(
                t,
                "a Call gives one Port: to get one Port per field of a stage's tuple output, write `let (a, b) = split!(self.call(x));`",
            ),
            Pat::Tuple(t) => {
                for (i, elem) in t.elems.iter().enumerate() {
                    let f = match &flow {
                        Flow::Tuple(v) => v.get(i).cloned().unwrap_or(Flow::Other),
                        Flow::Split(d) => Flow::Port(d.clone()),
                        _ => Flow::Other,
                    };
                    self.pattern(elem, f, false);
                }
            }
            other => self.shadow(other),
        }
    }

    fn expr(&mut self, e: &Expr) -> Flow {
        if let Some(i) = op_index(e) {
            return self.op(i);
        }
        match e {
            Expr::Path(p) => match p.path.get_ident() {
                Some(id) if p.qself.is_none() => self.lookup(&id.to_string()),
                _ => Flow::Other,
            },
            Expr::Paren(p) => self.expr(&p.expr),
            Expr::Group(g) => self.expr(&g.expr),
            Expr::Tuple(t) => Flow::Tuple(t.elems.iter().map(|x| self.expr(x)).collect()),
            Expr::Block(b) => self.block(&b.block),
            Expr::Unsafe(u) => self.block(&u.block),
            Expr::MethodCall(mc) => {
                let recv = self.expr(&mc.receiver);
                for a in &mc.args {
                    // A helper method given a Port may `reduce!` it: what
                    // `forward` gathers is then unknown.
                    if let Flow::Port(_) | Flow::Tuple(_) = self.expr(a) {
                        self.reduced_unknown = true;
                    }
                }
                let keeps = PORT_METHODS.iter().any(|m| mc.method == m);
                match recv {
                    Flow::Port(d) if keeps => Flow::Port(d),
                    _ => Flow::Other,
                }
            }
            Expr::If(i) => {
                // An `if let` binds its names for the `then` block only.
                self.scopes.push(HashMap::new());
                self.condition(&i.cond);
                let then = self.block(&i.then_branch);
                self.scopes.pop();
                let other = i.else_branch.as_ref().map(|(_, e)| self.expr(e));
                match (then, other) {
                    (Flow::Port(a), Some(Flow::Port(b))) if same(&a, &b) => Flow::Port(a),
                    _ => Flow::Other,
                }
            }
            Expr::While(w) => {
                self.scopes.push(HashMap::new());
                self.condition(&w.cond);
                self.block(&w.body);
                self.scopes.pop();
                Flow::Other
            }
            Expr::Unary(u) if matches!(u.op, UnOp::Not(_)) => {
                self.condition(&u.expr);
                Flow::Other
            }
            Expr::Binary(b) if matches!(b.op, BinOp::And(_) | BinOp::Or(_)) => {
                self.condition(&b.left);
                self.condition(&b.right);
                Flow::Other
            }
            Expr::Macro(m) => {
                self.read_tokens(&m.mac.tokens);
                Flow::Other
            }
            Expr::Closure(c) => {
                self.scopes.push(HashMap::new());
                c.inputs.iter().for_each(|p| self.shadow(p));
                self.expr(&c.body);
                self.scopes.pop();
                Flow::Other
            }
            Expr::ForLoop(f) => {
                self.expr(&f.expr);
                self.scopes.push(HashMap::new());
                self.shadow(&f.pat);
                self.block(&f.body);
                self.scopes.pop();
                Flow::Other
            }
            Expr::Match(m) => {
                self.expr(&m.expr);
                for arm in &m.arms {
                    self.scopes.push(HashMap::new());
                    self.shadow(&arm.pat);
                    if let Pat::Guard(g) = &arm.pat {
                        self.expr(&g.guard);
                    }
                    self.expr(&arm.body);
                    self.scopes.pop();
                }
                Flow::Other
            }
            other => {
                visit::visit_expr(&mut Children(self), other);
                Flow::Other
            }
        }
    }

    /// The names a pattern binds hide any Port of the same name; what they
    /// hold is not followed.
    fn shadow(&mut self, pat: &Pat) {
        struct Names<'w, 'a>(&'w mut Walk<'a>);
        impl<'ast> Visit<'ast> for Names<'_, '_> {
            fn visit_pat_ident(&mut self, p: &'ast syn::PatIdent) {
                self.0.bind(&p.ident.to_string(), Flow::Other);
                visit::visit_pat_ident(self, p);
            }
        }
        Names(self).visit_pat(pat);
    }

    /// An expression Rust needs as a `bool`.
    fn condition(&mut self, e: &Expr) {
        if let Expr::Let(l) = e {
            self.expr(&l.expr);
            self.shadow(&l.pat);
            return;
        }
        if let Flow::Port(_) = self.expr(e) {
            self.cx.error_spanned_by(
                e,
                "this is a Port, not a `bool`: `forward` runs once, while the plan is built, so it cannot branch on per-Entity data; compute a `bool` Port with a Call and keep the Entities where it is true with `filter!(x, mask)`",
            );
        }
    }

    fn op(&mut self, index: usize) -> Flow {
        let op = &self.ops[index];
        match &op.kind {
            OpKind::Apply(a) => {
                let flows: Vec<Flow> = a.args.iter().map(|x| self.expr(x)).collect();
                // Inputs in two Domains are rustc's error; the result's Domain
                // is then unknown rather than a guess.
                let mut doms = flows.iter().filter_map(Flow::dom);
                let first = doms.next().cloned();
                let dom = first.filter(|f| doms.all(|d| d.key == f.key));
                if a.split {
                    Flow::Split(dom)
                } else {
                    Flow::Port(dom)
                }
            }
            OpKind::Expand { inputs, child } => {
                let flows: Vec<Flow> = inputs.iter().map(|x| self.expr(x)).collect();
                self.same_domain(inputs, &flows, "aligned Ports", "the first aligned Port");
                let child = Dom::of(child);
                self.expand_target(&child, flows[0].dom());
                let parent = match flows[0].dom() {
                    Some(p) => Parent::Child(Box::new(p.clone())),
                    None => Parent::Unknown,
                };
                // A Domain entered from two different parents (or a root
                // entered at all) is rustc's error; its parent is then unknown.
                let known = match (self.domains.get(&child.key), &parent) {
                    (None, _) => parent,
                    (Some(Parent::Child(a)), Parent::Child(b)) if a.key == b.key => parent,
                    _ => Parent::Unknown,
                };
                self.domains.insert(child.key.clone(), known);
                self.expands.push(child.clone());
                let port = Flow::Port(Some(child));
                if inputs.len() == 1 {
                    port
                } else {
                    Flow::Tuple(vec![port; inputs.len()])
                }
            }
            OpKind::Reduce { inputs, members, .. } => {
                let flows: Vec<Flow> = inputs.iter().map(|x| self.expr(x)).collect();
                self.same_domain(inputs, &flows, "aligned Ports", "the first aligned Port");
                if let Some(m) = members {
                    let mf = self.expr(m);
                    if let (Some(c), Some(md)) = (flows[0].dom(), mf.dom())
                        && c.key != md.key
                    {
                        self.cx.error_spanned_by(
                            m,
                            format!(
                                "`reduce!` members must be in the reduced Port's Domain `{}`, but this Port is in `{}`: pass a `{}` Port as `members = ...`",
                                c.name(),
                                md.name(),
                                c.name()
                            ),
                        );
                    }
                }
                let parent = match flows[0].dom() {
                    None => {
                        self.reduced_unknown = true;
                        None
                    }
                    Some(c) => {
                        self.reduced.insert(c.key.clone());
                        match self.domains.get(&c.key) {
                            Some(Parent::Root) => {
                                self.cx.error_spanned_by(
                                    &inputs[0],
                                    format!(
                                        "`reduce!` needs a Port in a child Domain, but this Port is in `{}`, the pipeline's root Domain: `reduce!` gathers what an `expand!(.. => Child)` produced back into its parent; reduce a Port made after an `expand!`, or drop the `reduce!`",
                                        c.name()
                                    ),
                                );
                                None
                            }
                            Some(Parent::Child(p)) => Some((**p).clone()),
                            _ => None,
                        }
                    }
                };
                let port = Flow::Port(parent);
                if inputs.len() == 1 {
                    port
                } else {
                    Flow::Tuple(vec![port; inputs.len()])
                }
            }
            OpKind::Filter { value, mask } => {
                let vf = self.expr(value);
                let mf = self.expr(mask);
                if let (Some(v), Some(m)) = (vf.dom(), mf.dom())
                    && v.key != m.key
                {
                    self.cx.error_spanned_by(
                        mask,
                        format!(
                            "the `filter!` mask must be in the filtered Port's Domain `{}`, but this mask is in `{}`: compute the mask from a `{}` Port, or bring it down with `broadcast!(mask, like = x)`",
                            v.name(),
                            m.name(),
                            v.name()
                        ),
                    );
                }
                Flow::Port(vf.dom().cloned())
            }
            OpKind::Broadcast { value, like } => {
                let vf = self.expr(value);
                let lf = self.expr(like);
                if let (Some(v), Some(l)) = (vf.dom(), lf.dom()) {
                    self.broadcast_source(value, v, l);
                }
                Flow::Port(lf.dom().cloned())
            }
            OpKind::Invalid => {
                // Whatever it would have gathered is unknown.
                self.reduced_unknown = true;
                Flow::Other
            }
        }
    }

    /// An `expand!` enters a new child Domain: not the input's own, and not
    /// one an earlier `expand!` entered (the plan has one expansion per child
    /// Domain, and would reject the second with no line to show).
    fn expand_target(&self, child: &Dom, input: Option<&Dom>) {
        let c = child.name();
        if input.is_some_and(|d| d.key == child.key) {
            self.cx.error_spanned_by(
                &child.ty,
                format!("`expand!` enters a child Domain, but this Port is already in `{c}`: declare a child Domain (`#[derive(Domain)] #[domain(parent = {c})] struct Item;`) and write `expand!(x => Item)`"),
            );
        } else if self.expands.iter().any(|e| e.key == child.key) {
            self.cx.error_spanned_by(
                &child.ty,
                format!("`{c}` is already entered by an earlier `expand!`: a child Domain has one `expand!`; to expand two lists of one parent together write `expand_aligned!((a, b) => {c})`, or declare another child Domain"),
            );
        }
    }

    /// `broadcast!(x, like = y)` copies `x` down to `y`'s Domain, so `x`'s
    /// Domain is a strict ancestor of `y`'s. Decided here only when both
    /// chains up to the root are known; otherwise rustc decides.
    fn broadcast_source(&self, value: &Expr, v: &Dom, like: &Dom) {
        let (Some(up_from_like), Some(up_from_value)) = (self.ancestors(like), self.ancestors(v)) else {
            return;
        };
        let (vn, ln) = (v.name(), like.name());
        let msg = if v.key == like.key {
            format!(
                "`broadcast!` copies a value down to a descendant Domain, but this Port is already in `{ln}`, `like`'s Domain: use the Port itself, without `broadcast!`"
            )
        } else if up_from_value.contains(&like.key) {
            format!(
                "`broadcast!` copies a value down from an ancestor, but this Port is in `{vn}`, below `{ln}`: to bring `{vn}` values up into `{ln}`, gather them with `reduce!(x)` (once per level)"
            )
        } else if !up_from_like.contains(&v.key) {
            format!(
                "`broadcast!` copies a value down from an ancestor, but `{vn}` is not above `{ln}` (they are on different branches): broadcast a Port of a Domain above `{ln}`, or `reduce!` this one up to a common ancestor first"
            )
        } else {
            return;
        };
        self.cx.error_spanned_by(value, msg);
    }

    /// The keys of `d`'s ancestors, nearest first, when every parent up to
    /// the root is known.
    fn ancestors(&self, d: &Dom) -> Option<Vec<String>> {
        let mut out = Vec::new();
        let mut key = d.key.clone();
        loop {
            match self.domains.get(&key)? {
                Parent::Root => return Some(out),
                Parent::Child(p) => {
                    if out.contains(&p.key) || out.len() > 64 {
                        return None;
                    }
                    out.push(p.key.clone());
                    key = p.key.clone();
                }
                Parent::Unknown => return None,
            }
        }
    }

    /// The second Port of an aligned op is in the first one's Domain.
    fn same_domain(&mut self, inputs: &[Expr], flows: &[Flow], what: &str, first: &str) {
        if let [a, b] = flows
            && let (Some(a), Some(b)) = (a.dom(), b.dom())
            && a.key != b.key
        {
            // Which Domain the user meant to gather is unknown now.
            self.reduced_unknown = true;
            self.cx.error_spanned_by(
                &inputs[1],
                format!(
                    "{what} must share one Domain, but this one is in `{}` and {first} in `{}`: pass two Ports of `{}`",
                    b.name(),
                    a.name(),
                    a.name()
                ),
            );
        }
    }

    /// Every `expand!` is paired with a `reduce!` of its child Domain. Only
    /// when `forward` returns root-Domain Ports: returning a child Port is
    /// rustc's error, and a second one about it here would be noise.
    fn unreduced_expands(&self, outputs: &[PortType<'_>]) {
        let outputs_are_roots = outputs
            .iter()
            .all(|o| matches!(self.domains.get(&Dom::of(o.domain).key), Some(Parent::Root)));
        // An unused `let` (reported by `unused_lets`) may be the missing
        // `reduce!`'s input: one error for one mistake.
        let unused_let = self
            .lets
            .iter()
            .any(|(id, used)| !used && !id.to_string().starts_with('_'));
        if !outputs_are_roots || self.reduced_unknown || unused_let {
            return;
        }
        for child in &self.expands {
            if !self.reduced.contains(&child.key) {
                self.cx.error_spanned_by(
                    &child.ty,
                    format!(
                        "`expand!` enters `{c}`, but no `reduce!` gathers a `{c}` Port back before `forward` returns: gather what the `{c}` Entities computed with `reduce!(port)` and use the result, or drop the `expand!`",
                        c = child.name()
                    ),
                );
            }
        }
    }
}

fn same(a: &Option<Dom>, b: &Option<Dom>) -> bool {
    matches!((a, b), (Some(a), Some(b)) if a.key == b.key)
}

/// Visits the direct sub-expressions of an expression through the walk, so
/// that operations nested anywhere are checked in order.
struct Children<'w, 'a>(&'w mut Walk<'a>);

impl<'ast> Visit<'ast> for Children<'_, '_> {
    fn visit_expr(&mut self, e: &'ast Expr) {
        self.0.expr(e);
    }
    fn visit_block(&mut self, b: &'ast Block) {
        self.0.block(b);
    }
    fn visit_item(&mut self, _: &'ast syn::Item) {}
}
