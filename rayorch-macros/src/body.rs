//! `forward`'s body: find the pipeline operations and parse them into [`Op`]s.
//!
//! The body stays the user's syn tree; each operation in it (`self.call(..)`,
//! `expand!(..)`, `reduce!(..)`, ...) is moved into `Body::ops` and replaced by
//! a placeholder `__rayorch_op!(N)`. `check` walks the tree to follow Domains
//! through the `let`s; `expand` swaps each placeholder for its builder call.
//! Operations nest (`reduce!(self.ocr(page))`), so an op's own arguments may
//! hold placeholders too.
//!
//! Single-op syntax errors (an unknown option, a missing `=> Child`) are
//! reported here; cross-cutting ones in `check`.

use std::collections::HashSet;

use proc_macro2::Span;
use quote::ToTokens;
use syn::parse::ParseStream;
use syn::punctuated::Punctuated;
use syn::visit_mut::{self, VisitMut};
use syn::{Block, Expr, ExprMethodCall, Ident, Item, Macro, Stmt, Token, Type};

use crate::ctxt::Ctxt;
use crate::symbol::{
    BROADCAST, CRATE, EXPAND, EXPAND_ALIGNED, FILTER, KEEP_FAILED, LIKE, MEMBERS, REDUCE, REDUCE_ALIGNED,
    SPLIT,
};

/// The placeholder macro name; never reaches the compiler.
const PLACEHOLDER: &str = "__rayorch_op";
/// The runtime's `Inputs` is implemented for tuples of up to four Ports.
const MAX_CALL_INPUTS: usize = 4;

pub(crate) struct Body {
    /// `forward`'s block, each operation replaced by a placeholder.
    pub(crate) block: Block,
    pub(crate) ops: Vec<Op>,
}

pub(crate) struct Op {
    pub(crate) kind: OpKind,
    /// The op's name as written (`reduce` in `reduce!`, the field in
    /// `self.field(..)`): generated scaffolding is spanned there, so every
    /// note rustc adds stays inside the user's code.
    pub(crate) span: Span,
}

pub(crate) enum OpKind {
    /// `self.field(a, b)`, or `split!(self.field(a))` when `split`.
    Apply(Apply),
    /// `expand!(x => C)`, or `expand_aligned!((a, b) => C)` with two inputs.
    Expand { inputs: Vec<Expr>, child: Type },
    /// `reduce!(x)`, `reduce_aligned!((a, b))`, optionally `members = m`;
    /// `reduce!(x, keep_failed)` when `keep_failed`.
    Reduce {
        inputs: Vec<Expr>,
        members: Option<Expr>,
        keep_failed: bool,
    },
    /// `filter!(x, mask)`.
    Filter { value: Expr, mask: Expr },
    /// `broadcast!(x, like = y)`.
    Broadcast { value: Expr, like: Expr },
    /// Malformed (already reported); flows as unknown.
    Invalid,
}

pub(crate) struct Apply {
    /// The `self` receiver, with the user's hygiene.
    pub(crate) receiver: Expr,
    pub(crate) field: Ident,
    pub(crate) args: Vec<Expr>,
    pub(crate) split: bool,
}

impl Body {
    /// `siblings` are the methods of the same impl block: `self.m(..)` calls
    /// those, every other `self.f(..)` applies the Call in field `f`.
    /// `krate` is the `crate = ..` option's last segment: `ray::reduce!`.
    pub(crate) fn from_syn(
        cx: &Ctxt,
        block: &Block,
        siblings: &HashSet<String>,
        krate: Option<&str>,
    ) -> Body {
        let mut block = block.clone();
        let mut collector = Collector {
            cx,
            siblings,
            krate,
            ops: Vec::new(),
        };
        collector.visit_block_mut(&mut block);
        Body {
            block,
            ops: collector.ops,
        }
    }
}

/// The op a placeholder stands for.
pub(crate) fn op_index(e: &Expr) -> Option<usize> {
    let Expr::Macro(m) = e else { return None };
    if !m.mac.path.is_ident(PLACEHOLDER) {
        return None;
    }
    m.mac.parse_body::<syn::LitInt>().ok()?.base10_parse().ok()
}

fn placeholder(index: usize, span: Span) -> Expr {
    let path = Ident::new(PLACEHOLDER, span);
    let lit = proc_macro2::Literal::usize_unsuffixed(index);
    syn::parse_quote_spanned!(span=> #path!(#lit))
}

/// Which pipeline macro a path names: `reduce`, `rayorch::reduce`,
/// `::rayorch::prelude::reduce`.
fn op_name(path: &syn::Path, krate: Option<&str>) -> Option<&'static str> {
    let last = path.segments.last()?;
    let first = path.segments.first()?;
    if path.segments.len() > 1 && first.ident != CRATE && krate.is_none_or(|k| first.ident != k) {
        return None;
    }
    [
        EXPAND,
        EXPAND_ALIGNED,
        REDUCE,
        REDUCE_ALIGNED,
        FILTER,
        BROADCAST,
        SPLIT,
    ]
    .into_iter()
    .find(|n| last.ident == n)
}

fn is_self(e: &Expr) -> bool {
    matches!(e, Expr::Path(p) if p.qself.is_none() && p.path.is_ident("self"))
}

struct Collector<'c> {
    cx: &'c Ctxt,
    siblings: &'c HashSet<String>,
    krate: Option<&'c str>,
    ops: Vec<Op>,
}

impl Collector<'_> {
    fn is_call_field(&self, mc: &ExprMethodCall) -> bool {
        is_self(&mc.receiver) && mc.turbofish.is_none() && !self.siblings.contains(&mc.method.to_string())
    }

    fn push(&mut self, kind: OpKind, span: Span) -> usize {
        self.ops.push(Op { kind, span });
        self.ops.len() - 1
    }

    /// Visit an op's argument for nested ops.
    fn arg(&mut self, mut e: Expr) -> Expr {
        self.visit_expr_mut(&mut e);
        e
    }

    fn apply(&mut self, mc: &ExprMethodCall, split: bool) -> OpKind {
        if mc.args.is_empty() {
            self.cx.error_spanned_by(
                mc,
                format!(
                    "a Call needs at least one input Port: write `self.{}(port)`",
                    mc.method
                ),
            );
            return OpKind::Invalid;
        }
        if let Some(extra) = mc.args.iter().nth(MAX_CALL_INPUTS) {
            self.cx.error_spanned_by(
                extra,
                "a Call takes at most 4 input Ports: combine some of them with a Call first",
            );
            return OpKind::Invalid;
        }
        OpKind::Apply(Apply {
            receiver: (*mc.receiver).clone(),
            field: mc.method.clone(),
            args: mc.args.iter().cloned().map(|a| self.arg(a)).collect(),
            split,
        })
    }

    fn macro_op(&mut self, name: &'static str, mac: &Macro) -> OpKind {
        match name {
            EXPAND | EXPAND_ALIGNED => self.expand(name, mac),
            SPLIT => self.split(mac),
            _ => self.with_args(name, mac),
        }
    }

    fn expand(&mut self, name: &'static str, mac: &Macro) -> OpKind {
        let aligned = name == EXPAND_ALIGNED;
        let usage = if aligned {
            "write `expand_aligned!((a, b) => Child)`"
        } else {
            "write `expand!(x => Child)`"
        };
        let parser = |input: ParseStream| {
            let x: Expr = input.parse()?;
            if input.is_empty() {
                return Err(syn::Error::new_spanned(
                    &x,
                    format!("expected `=> ChildDomain` after this Port: {usage}"),
                ));
            }
            if !input.peek(Token![=>]) {
                return Err(input.error(format!("expected `=> ChildDomain`: {usage}")));
            }
            input.parse::<Token![=>]>()?;
            let child: Type = input.parse()?;
            if !input.is_empty() {
                return Err(input.error(format!("unexpected tokens after the child Domain: {usage}")));
            }
            Ok((x, child))
        };
        let (x, child) = match mac.parse_body_with(parser) {
            Ok(parsed) => parsed,
            Err(e) => {
                self.cx.syn_error(e);
                return OpKind::Invalid;
            }
        };
        let Some(inputs) = self.inputs(name, x, aligned) else {
            return OpKind::Invalid;
        };
        OpKind::Expand { inputs, child }
    }

    /// One Port, or for the aligned forms a pair `(a, b)`.
    fn inputs(&mut self, name: &str, x: Expr, aligned: bool) -> Option<Vec<Expr>> {
        if !aligned {
            return Some(vec![self.arg(x)]);
        }
        match x {
            Expr::Tuple(t) if t.elems.len() == 2 => Some(t.elems.into_iter().map(|e| self.arg(e)).collect()),
            other => {
                self.cx.error_spanned_by(
                    &other,
                    format!("`{name}!` takes a pair of Ports of one Domain: write `{name}!((a, b) ...)`"),
                );
                None
            }
        }
    }

    /// `split!(self.f(x))` reports as the Call it wraps.
    fn split(&mut self, mac: &Macro) -> OpKind {
        match mac.parse_body::<Expr>() {
            Ok(Expr::MethodCall(mc)) if self.is_call_field(&mc) => self.apply(&mc, true),
            Ok(other) => {
                self.cx.error_spanned_by(
                    &other,
                    "`split!` wraps one Call application: write `let (a, b) = split!(self.call(x));`",
                );
                OpKind::Invalid
            }
            Err(e) => {
                self.cx.syn_error(e);
                OpKind::Invalid
            }
        }
    }

    /// `reduce!`, `reduce_aligned!`, `filter!`, `broadcast!`: positional
    /// arguments, then `name = value` options.
    fn with_args(&mut self, name: &'static str, mac: &Macro) -> OpKind {
        let spec = ArgSpec::of(name);
        let args = match mac.parse_body_with(Punctuated::<Expr, Token![,]>::parse_terminated) {
            Ok(args) => args,
            Err(e) => {
                self.cx.syn_error(e);
                return OpKind::Invalid;
            }
        };
        let mut positional = Vec::new();
        let mut options: Vec<(Ident, Expr)> = Vec::new();
        let mut keep_failed = None;
        let mut ok = true;
        for arg in args {
            if spec.flags.iter().any(|f| is_ident(&arg, f)) && !positional.is_empty() {
                if keep_failed.is_some() {
                    self.cx.error_spanned_by(
                        &arg,
                        format!("`{KEEP_FAILED}` is given twice: write `{name}!(x, {KEEP_FAILED})`"),
                    );
                    ok = false;
                }
                keep_failed = Some(arg);
                continue;
            }
            match option(&arg) {
                Some((key, value)) => {
                    if !spec.options.iter().any(|o| key == o) {
                        self.cx.error_spanned_by(
                            key,
                            format!("unknown option `{key}` for `{name}!`: {}", spec.usage),
                        );
                        ok = false;
                    } else if options.iter().any(|(k, _)| k == key) {
                        self.cx
                            .error_spanned_by(key, format!("`{key}` is given twice: {}", spec.usage));
                        ok = false;
                    } else {
                        options.push((key.clone(), value.clone()));
                    }
                }
                None if !options.is_empty() || positional.len() == spec.positional => {
                    let msg = if name == BROADCAST && options.is_empty() {
                        format!(
                            "name the Port whose Domain receives the value with `like =`: {}",
                            spec.usage
                        )
                    } else {
                        format!("unexpected argument: {}", spec.usage)
                    };
                    self.cx.error_spanned_by(&arg, msg);
                    ok = false;
                }
                None => positional.push(arg),
            }
        }
        if ok && positional.len() < spec.positional {
            self.cx
                .error_spanned_by(mac, format!("missing Port: {}", spec.usage));
            ok = false;
        }
        let like = options
            .iter()
            .position(|(k, _)| k == LIKE)
            .map(|i| options.remove(i).1);
        if ok && name == BROADCAST && like.is_none() {
            self.cx
                .error_spanned_by(mac, format!("missing `like = <Port>`: {}", spec.usage));
            ok = false;
        }
        if let (Some(flag), Some((key, _))) = (&keep_failed, options.first()) {
            self.cx.error_spanned_by(
                flag,
                format!(
                    "`{KEEP_FAILED}` cannot be combined with `{key} = ..`: gather with `reduce!(x, {KEEP_FAILED})` and filter the list, or drop `{KEEP_FAILED}`"
                ),
            );
            ok = false;
        }
        if !ok {
            return OpKind::Invalid;
        }
        let keep_failed = keep_failed.is_some();
        let members = options.pop().map(|(_, m)| self.arg(m));
        let mut positional = positional.into_iter();
        let first = positional.next().expect("counted above");
        match name {
            REDUCE | REDUCE_ALIGNED => match self.inputs(name, first, name == REDUCE_ALIGNED) {
                Some(inputs) => OpKind::Reduce {
                    inputs,
                    members,
                    keep_failed,
                },
                None => OpKind::Invalid,
            },
            FILTER => OpKind::Filter {
                value: self.arg(first),
                mask: self.arg(positional.next().expect("counted above")),
            },
            _ => OpKind::Broadcast {
                value: self.arg(first),
                like: self.arg(like.expect("checked above")),
            },
        }
    }
}

/// The last segment of a macro's path: `reduce` in `rayorch::reduce!(..)`.
fn macro_name_span(mac: &Macro) -> Span {
    mac.path
        .segments
        .last()
        .map_or_else(Span::call_site, |s| s.ident.span())
}

/// The first and last token of `tokens`.
pub(crate) fn span_range(tokens: &impl ToTokens) -> (Span, Span) {
    let mut it = tokens.to_token_stream().into_iter();
    let first = it.next().map_or_else(Span::call_site, |t| t.span());
    let last = it.last().map_or(first, |t| t.span());
    (first, last)
}

/// `e` is the bare identifier `name`.
fn is_ident(e: &Expr, name: &str) -> bool {
    matches!(e, Expr::Path(p) if p.qself.is_none() && p.path.is_ident(name))
}

/// `key = value` with a plain identifier key.
fn option(e: &Expr) -> Option<(&Ident, &Expr)> {
    let Expr::Assign(a) = e else { return None };
    let Expr::Path(p) = &*a.left else { return None };
    Some((p.path.get_ident()?, &a.right))
}

struct ArgSpec {
    positional: usize,
    options: &'static [&'static str],
    /// Bare words allowed after the positional arguments.
    flags: &'static [&'static str],
    usage: &'static str,
}

impl ArgSpec {
    fn of(name: &str) -> ArgSpec {
        match name {
            REDUCE => ArgSpec {
                positional: 1,
                options: &[MEMBERS],
                flags: &[KEEP_FAILED],
                // Unchanged by `keep_failed` so that the ui expectations stay
                // valid; the flag's own errors name it.
                usage: "write `reduce!(x)`, or `reduce!(x, members = m)` to gather only where `m` is present",
            },
            REDUCE_ALIGNED => ArgSpec {
                positional: 1,
                options: &[MEMBERS],
                flags: &[],
                usage: "write `reduce_aligned!((a, b))`, or `reduce_aligned!((a, b), members = m)`",
            },
            FILTER => ArgSpec {
                positional: 2,
                options: &[],
                flags: &[],
                usage: "write `filter!(x, mask)` with `mask` a `bool` Port of `x`'s Domain",
            },
            _ => ArgSpec {
                positional: 1,
                options: &[LIKE],
                flags: &[],
                usage: "write `broadcast!(x, like = y)`: `x`'s value is copied to every Entity of `y`'s Domain below it",
            },
        }
    }
}

impl VisitMut for Collector<'_> {
    fn visit_expr_mut(&mut self, e: &mut Expr) {
        let found = match e {
            Expr::Macro(m) => op_name(&m.mac.path, self.krate).map(|name| {
                let span = macro_name_span(&m.mac);
                (self.macro_op(name, &m.mac), span)
            }),
            Expr::MethodCall(mc) if self.is_call_field(mc) => {
                let mc = mc.clone();
                Some((self.apply(&mc, false), mc.method.span()))
            }
            _ => None,
        };
        match found {
            Some((kind, span)) => {
                let index = self.push(kind, span);
                *e = placeholder(index, span);
            }
            None => visit_mut::visit_expr_mut(self, e),
        }
    }

    /// A macro in statement position (`reduce!(x)` as a block's tail) parses
    /// as `Stmt::Macro`, not as an expression.
    fn visit_stmt_mut(&mut self, s: &mut Stmt) {
        if let Stmt::Macro(sm) = s
            && let Some(name) = op_name(&sm.mac.path, self.krate)
        {
            let span = macro_name_span(&sm.mac);
            let kind = self.macro_op(name, &sm.mac);
            let index = self.push(kind, span);
            *s = Stmt::Expr(placeholder(index, span), sm.semi_token);
            return;
        }
        visit_mut::visit_stmt_mut(self, s);
    }

    /// A nested item is its own scope, not part of the plan.
    fn visit_item_mut(&mut self, _: &mut Item) {}
}
