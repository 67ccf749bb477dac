//! `#[pipeline]`'s input as our IR: the impl block, `forward`'s signature
//! (sources and outputs) and its body (see `body`).
//!
//! Every node keeps a reference to the syn node it came from, so later phases
//! report errors at the user's own tokens. Checks that need only one node
//! happen here, while parsing; checks across nodes live in `check`.

use std::cell::Cell;
use std::collections::HashSet;

use proc_macro2::{Span, TokenStream};
use quote::ToTokens;
use syn::{FnArg, GenericArgument, ImplItem, ImplItemFn, ItemImpl, Pat, PathArguments, ReturnType, Type};

use crate::body::Body;
use crate::ctxt::Ctxt;
use crate::symbol::{FORWARD, PORT};

/// At most this many source parameters: the runtime splits a tuple-valued
/// source into up to three Ports.
const MAX_SOURCES: usize = 3;

pub(crate) struct Pipeline<'a> {
    pub(crate) original: &'a ItemImpl,
    pub(crate) forward: Forward<'a>,
    /// The other methods that take or return a Port: their operations are
    /// rewritten as `forward`'s are (rustc checks them; the structural walk
    /// covers `forward` only).
    pub(crate) helpers: Vec<(&'a ImplItemFn, Body)>,
}

pub(crate) struct Forward<'a> {
    pub(crate) original: &'a ImplItemFn,
    pub(crate) sig: Signature<'a>,
    pub(crate) body: Body,
}

/// `forward`'s sources and outputs, read from its declared types.
pub(crate) struct Signature<'a> {
    pub(crate) sources: Vec<Source<'a>>,
    pub(crate) outputs: Vec<PortType<'a>>,
    /// `-> (Port<..>, Port<..>)` rather than `-> Port<..>`.
    pub(crate) tuple_output: bool,
}

pub(crate) struct Source<'a> {
    /// The parameter's name, when it is a plain binding.
    pub(crate) name: Option<&'a syn::Ident>,
    pub(crate) port: PortType<'a>,
}

/// A type written `Port<D, T>`.
pub(crate) struct PortType<'a> {
    pub(crate) domain: &'a Type,
    pub(crate) value: &'a Type,
}

impl<'a> Pipeline<'a> {
    /// `None` only when there is no usable `forward` (already reported).
    pub(crate) fn from_syn(cx: &Ctxt, attr: &TokenStream, item: &'a ItemImpl) -> Option<Pipeline<'a>> {
        options(cx, attr);
        if let Some((path, _)) = &item.trait_ {
            cx.error_spanned_by(
                path,
                "`#[pipeline]` goes on an inherent impl block: write `#[pipeline] impl MyPipeline { fn forward(&self, ...) -> ... }`",
            );
        }
        let Some(original) = find_forward(item) else {
            cx.error_spanned_by(
                &item.self_ty,
                "a `#[pipeline]` impl needs `fn forward(&self, source: Port<Root, In>) -> Port<Root, Out>`",
            );
            return None;
        };
        let sig = Signature::from_syn(cx, original)?;
        let siblings = item
            .items
            .iter()
            .filter_map(|it| match it {
                ImplItem::Fn(f) => Some(f.sig.ident.to_string()),
                _ => None,
            })
            .collect::<HashSet<_>>();
        let krate = crate_option(attr).and_then(|p| p.segments.last().map(|s| s.ident.to_string()));
        let body = Body::from_syn(cx, &original.block, &siblings, krate.as_deref());
        let helpers = item
            .items
            .iter()
            .filter_map(|it| match it {
                ImplItem::Fn(f) if f.sig.ident != FORWARD && handles_ports(&f.sig) => {
                    Some((f, Body::from_syn(cx, &f.block, &siblings, krate.as_deref())))
                }
                _ => None,
            })
            .collect();
        Some(Pipeline {
            original: item,
            forward: Forward { original, sig, body },
            helpers,
        })
    }
}

const OPTIONS_USAGE: &str =
    "write `#[pipeline]`, or `#[pipeline(crate = ray)]` when the rayorch dependency is renamed to `ray`";

/// `#[pipeline(crate = path)]`: the path, or `None` (also when the options
/// are malformed, which `options` reports).
pub(crate) fn crate_option(attr: &TokenStream) -> Option<syn::Path> {
    let mut krate = None;
    let parser = syn::meta::parser(|meta| {
        if meta.path.is_ident("crate") {
            krate = Some(crate::krate::parse_option(&meta)?);
        }
        Ok(())
    });
    syn::parse::Parser::parse2(parser, attr.clone()).ok()?;
    krate
}

fn options(cx: &Ctxt, attr: &TokenStream) {
    let mut seen = false;
    let parser = syn::meta::parser(|meta| {
        if meta.path.is_ident("crate") {
            if seen {
                return Err(meta.error(format!("`crate` is given twice: {OPTIONS_USAGE}")));
            }
            seen = true;
            crate::krate::parse_option(&meta).map(drop)
        } else {
            Err(meta.error(format!(
                "unknown `#[pipeline]` option `{}`: {OPTIONS_USAGE}",
                meta.path.to_token_stream()
            )))
        }
    });
    if let Err(e) = syn::parse::Parser::parse2(parser, attr.clone()) {
        cx.syn_error(e);
    }
}

/// A method that takes `&self` and a Port or returns one: a helper of
/// `forward`, whose `self.call(x)`, `expand!` and `reduce!` are operations.
pub(crate) fn handles_ports(sig: &syn::Signature) -> bool {
    let takes_self = matches!(sig.inputs.first(), Some(FnArg::Receiver(_)));
    let takes_port = sig
        .inputs
        .iter()
        .any(|a| matches!(a, FnArg::Typed(t) if PortType::from_type(&t.ty).is_some()));
    let returns_port = match &sig.output {
        ReturnType::Type(_, ty) => match peel(ty) {
            Type::Tuple(t) => t.elems.iter().any(|e| PortType::from_type(e).is_some()),
            ty => PortType::from_type(ty).is_some(),
        },
        ReturnType::Default => false,
    };
    takes_self && (takes_port || returns_port)
}

pub(crate) fn find_forward(item: &ItemImpl) -> Option<&ImplItemFn> {
    item.items.iter().find_map(|it| match it {
        ImplItem::Fn(f) if f.sig.ident == FORWARD => Some(f),
        _ => None,
    })
}

impl<'a> Signature<'a> {
    /// Read `forward`'s signature; `None` when it cannot describe a plan
    /// (the reasons are in `cx`).
    pub(crate) fn from_syn(cx: &Ctxt, f: &'a ImplItemFn) -> Option<Signature<'a>> {
        let sig = &f.sig;
        let ok = Cell::new(true);
        let fail = |tokens: &dyn ToTokens, msg: &str| {
            cx.error_spanned_by(tokens.to_token_stream(), msg);
            ok.set(false);
        };
        if let Some(t) = &sig.asyncness {
            fail(t, "`forward` builds the plan once, synchronously: remove `async`");
        }
        if let Some(t) = &sig.constness {
            fail(t, "`forward` cannot be `const`: remove `const`");
        }
        if let syn::Safety::Unsafe(t) = &sig.safety {
            fail(t, "`forward` cannot be `unsafe`: remove `unsafe`");
        }
        if !sig.generics.params.is_empty() {
            fail(
                &sig.generics,
                "`forward` cannot be generic: its parameter and return types decide the plan's source and outputs; put type parameters on the impl block instead",
            );
        }
        match sig.inputs.first() {
            Some(FnArg::Receiver(r))
                if matches!(r.kind, syn::ReceiverKind::Reference(_, _, None)) && r.mutability.is_none() => {}
            Some(FnArg::Receiver(r)) => fail(r, "`forward` takes `&self`: write `fn forward(&self, ...)`"),
            _ => fail(
                &sig.ident,
                "`forward` takes `&self` first: write `fn forward(&self, ...)`",
            ),
        }
        let mut sources = Vec::new();
        for arg in sig.inputs.iter().skip(1) {
            let FnArg::Typed(pt) = arg else { continue };
            let name = match &*pt.pat {
                Pat::Ident(p) if p.subpat.is_none() => Some(&p.ident),
                Pat::Wild(_) => None,
                pat => {
                    fail(
                        pat,
                        "write one parameter per source Port, as a plain name: `docs: Port<Doc, In>`",
                    );
                    continue;
                }
            };
            match PortType::from_type(&pt.ty) {
                Some(port) if sources.len() == MAX_SOURCES => {
                    let _ = port;
                    fail(
                        arg,
                        "`forward` takes at most 3 source Ports: bundle the rest into one value (a tuple or struct) carried by one Port",
                    );
                }
                Some(port) => sources.push(Source { name, port }),
                None => fail(
                    &pt.ty,
                    "`forward`'s parameters are the pipeline's source Ports: write `name: Port<RootDomain, Input>`",
                ),
            }
        }
        if sig.inputs.len() == 1 && ok.get() {
            fail(
                &sig.ident,
                "`forward` needs a source Port: write `fn forward(&self, docs: Port<Doc, In>) -> Port<Doc, Out>`",
            );
        }
        let (outputs, tuple_output) = match &sig.output {
            ReturnType::Default => {
                // At the `)`, where `-> ...` goes.
                cx.syn_error(syn::Error::new(
                    sig.paren_token.span.close(),
                    "`forward` returns the pipeline's outputs: add `-> Port<Root, Out>` (or a tuple of root-Domain Ports)",
                ));
                ok.set(false);
                (Vec::new(), false)
            }
            ReturnType::Type(_, ty) => match &**ty {
                Type::Tuple(t) if !t.elems.is_empty() => {
                    let mut outs = Vec::new();
                    for elem in &t.elems {
                        match PortType::from_type(elem) {
                            Some(p) => outs.push(p),
                            None => fail(
                                elem,
                                "each output of `forward` is a Port: write `Port<Root, Out>`",
                            ),
                        }
                    }
                    (outs, true)
                }
                ty => match PortType::from_type(ty) {
                    Some(p) => (vec![p], false),
                    None => {
                        fail(
                            ty,
                            "`forward` returns the pipeline's outputs: write `Port<Root, Out>` or a tuple of them",
                        );
                        (Vec::new(), false)
                    }
                },
            },
        };
        ok.get().then_some(Signature {
            sources,
            outputs,
            tuple_output,
        })
    }
}

impl<'a> PortType<'a> {
    /// `Port<D, T>` (any path ending in `Port`), or `None`.
    pub(crate) fn from_type(ty: &'a Type) -> Option<PortType<'a>> {
        let ty = peel(ty);
        let Type::Path(tp) = ty else { return None };
        if tp.qself.is_some() {
            return None;
        }
        let last = tp.path.segments.last()?;
        if last.ident != PORT {
            return None;
        }
        let PathArguments::AngleBracketed(args) = &last.arguments else {
            return None;
        };
        let mut types = args.args.iter().filter_map(|a| match a {
            GenericArgument::Type(t) => Some(t),
            _ => None,
        });
        let (Some(domain), Some(value), None) = (types.next(), types.next(), types.next()) else {
            return None;
        };
        Some(PortType { domain, value })
    }
}

/// `(T)` and invisible groups are `T`.
pub(crate) fn peel(mut ty: &Type) -> &Type {
    loop {
        match ty {
            Type::Paren(p) => ty = &p.elem,
            Type::Group(g) => ty = &g.elem,
            _ => return ty,
        }
    }
}

/// The span of the first token of `tokens`: where an error about a Domain
/// type points (`Page` in `Port<Page, Text>`).
pub(crate) fn first_span(tokens: &impl ToTokens) -> Span {
    tokens
        .to_token_stream()
        .into_iter()
        .next()
        .map_or_else(Span::call_site, |t| t.span())
}
