//! Code generation for `#[pipeline]`: parse → check → generate. Never
//! re-validates: by the time `generate` runs, `ast` and `check` found nothing.
//!
//! What comes out, next to the user's impl block:
//! - `forward` with the same signature, each operation replaced by a call
//!   into `::rayorch::__private::check`. Those calls carry the user's spans, so
//!   a Domain or type mistake that only rustc can see is reported at the
//!   user's token with the check trait's message (see the runtime's `check.rs`).
//! - `impl Pipeline`: `build_plan` declares the source(s), calls `forward` and
//!   declares its result(s) as outputs.
//!
//! Generated names are `__rayorch_*`. Those of `build_plan` have mixed-site
//! hygiene and can never meet a user's name; the few locals inside `forward`
//! that rustc may blame carry the user's span instead (see [`local`]).

use proc_macro2::{Delimiter, Group, Ident, Span, TokenStream};
use quote::{ToTokens, format_ident, quote, quote_spanned};
use syn::visit_mut::{self, VisitMut};
use syn::{Expr, ImplItem, ItemImpl};

use crate::ast::{Pipeline, Signature, first_span};
use crate::body::{Apply, Body, OpKind, op_index, span_range};
use crate::ctxt::Ctxt;
use crate::{check, debug};

/// `#[pipeline]`: the whole expansion, or every error found.
pub(crate) fn pipeline(attr: TokenStream, item: TokenStream) -> syn::Result<TokenStream> {
    let item: ItemImpl = syn::parse2(item)?;
    let cx = Ctxt::new();
    let parsed = Pipeline::from_syn(&cx, &attr, &item);
    if let Some(p) = &parsed {
        check::check(&cx, p);
    }
    cx.check()?;
    let pipeline = parsed.expect("no errors, so `forward` was parsed");
    let out = generate(&pipeline);
    debug::print("pipeline", &type_name(&item), &out);
    Ok(out)
}

/// The impl's self type, as `RAYORCH_MACROS_DEBUG` filters it.
pub(crate) fn type_name(item: &ItemImpl) -> String {
    item.self_ty.to_token_stream().to_string().replace(' ', "")
}

fn generate(p: &Pipeline<'_>) -> TokenStream {
    let mut item = p.original.clone();
    let block = Rewrite::body(&p.forward.body);
    for it in &mut item.items {
        let ImplItem::Fn(f) = it else { continue };
        if f.sig.ident == p.forward.original.sig.ident {
            f.block = block.clone();
        } else if let Some((_, body)) = p.helpers.iter().find(|(h, _)| h.sig.ident == f.sig.ident) {
            f.block = Rewrite::body(body);
        }
    }
    let build = build_plan(&p.forward.sig);
    let pipeline_impl = pipeline_impl(&item, &p.forward.sig, build);
    quote! {
        #item
        #pipeline_impl
    }
}

/// `impl Pipeline for Self`, with `build_plan`'s body supplied.
pub(crate) fn pipeline_impl(item: &ItemImpl, sig: &Signature<'_>, build_body: TokenStream) -> TokenStream {
    let (impl_generics, _, where_clause) = item.generics.split_for_impl();
    let self_ty = &item.self_ty;
    let values: Vec<_> = sig.sources.iter().map(|s| s.port.value).collect();
    let input = match values.as_slice() {
        [one] => quote!(#one),
        many => quote!((#(#many,)*)),
    };
    let outs: Vec<_> = sig
        .outputs
        .iter()
        .map(|o| {
            let v = o.value;
            quote!(::rayorch::__private::Output<#v>)
        })
        .collect();
    let outputs = if sig.tuple_output {
        quote!((#(#outs,)*))
    } else {
        quote!(#(#outs)*)
    };
    quote! {
        #[automatically_derived]
        impl #impl_generics ::rayorch::__private::Pipeline for #self_ty #where_clause {
            type Input = #input;
            type Outputs = #outputs;
            fn build_plan(
                &self,
            ) -> ::core::result::Result<
                (::rayorch::__private::Plan, <Self as ::rayorch::__private::Pipeline>::Outputs),
                ::rayorch::__private::PlanErrors,
            > {
                #build_body
            }
        }
    }
}

/// `Plan::build(|b| { sources; forward; outputs })`.
fn build_plan(sig: &Signature<'_>) -> TokenStream {
    let b = format_ident!("__rayorch_builder", span = Span::mixed_site());
    let sources: Vec<_> = (0..sig.sources.len())
        .map(|i| format_ident!("__rayorch_source{}", i, span = Span::mixed_site()))
        .collect();
    let declare = match sig.sources.as_slice() {
        [one] => {
            let (d, v) = (one.port.domain, one.port.value);
            let call = quote_spanned!(first_span(d)=>
                <<#d as ::rayorch::__private::Domain>::Parent as ::rayorch::__private::check::SourceRoot<#d>>::source::<#v>);
            quote!(let #(#sources)* = #call(#b);)
        }
        many => {
            let d = many[0].port.domain;
            let values = many.iter().map(|s| s.port.value);
            let call = quote_spanned!(first_span(d)=>
                <<#d as ::rayorch::__private::Domain>::Parent as ::rayorch::__private::check::SourceRoot<#d>>::sources::<(#(#values,)*)>);
            quote!(let (#(#sources,)*) = #call(#b);)
        }
    };
    let results: Vec<_> = sig
        .outputs
        .iter()
        .enumerate()
        .map(|(i, o)| local(&format!("result{i}"), first_span(o.domain)))
        .collect();
    // `<Parent as OutputRoot<D>>::output`: a trait path, which rustc reports
    // without a "required by a bound in" note pointing into rayorch.
    let outputs = results.iter().zip(&sig.outputs).map(|(r, o)| {
        let d = o.domain;
        let out = quote_spanned!(first_span(d)=>
            <<#d as ::rayorch::__private::Domain>::Parent as ::rayorch::__private::check::OutputRoot<#d>>::output);
        quote!(#out(#b, #r))
    });
    let bind = if sig.tuple_output {
        quote!(let (#(#results,)*) = Self::forward(self, #(#sources),*);)
    } else {
        quote!(let #(#results)* = Self::forward(self, #(#sources),*);)
    };
    let declare_outputs = if sig.tuple_output {
        quote!((#(#outputs,)*))
    } else {
        quote!(#(#outputs)*)
    };
    quote! {
        ::rayorch::__private::Plan::build(|#b: &mut ::rayorch::__private::PlanBuilder| {
            #declare
            #bind
            #declare_outputs
        })
    }
}

/// Replaces each placeholder with its operation's builder call.
///
/// Each call goes through `::rayorch::__private::check` and is built so that
/// rustc blames the argument the user should change: the tokens around a
/// user's argument carry the user's spans, and no checked value is bound to a
/// generated `let` (rustc would report it again there).
struct Rewrite<'a> {
    body: &'a Body,
}

impl Rewrite<'_> {
    fn body(body: &Body) -> syn::Block {
        let mut block = body.block.clone();
        Rewrite { body }.visit_block_mut(&mut block);
        block
    }

    /// An op argument, itself rewritten.
    fn arg(&mut self, e: &Expr) -> TokenStream {
        let mut e = e.clone();
        self.visit_expr_mut(&mut e);
        e.into_token_stream()
    }

    fn args(&mut self, es: &[Expr]) -> Vec<TokenStream> {
        es.iter().map(|e| self.arg(e)).collect()
    }

    fn op(&mut self, index: usize) -> TokenStream {
        let op = &self.body.ops[index];
        let span = op.span;
        let check = quote_spanned!(span=> ::rayorch::__private::check);
        match &op.kind {
            OpKind::Apply(a) => self.apply(a, span),
            OpKind::Expand { inputs, child } => {
                // `{ let input = x; expansion(&input).into_child(PhantomData::<C>, input) }`:
                // the input's Domain is known before the child is checked.
                let (x_first, x_last) = span_range(&inputs[0]);
                let input = local("input", x_first);
                let args = self.args(inputs);
                let (x, rest) = (&args[0], &args[1..]);
                let bind = quote_spanned!(x_first=> let #input = #x);
                let semi = quote_spanned!(x_last=> ;);
                let (c_first, c_last) = span_range(child);
                let marker = quote_spanned!(c_first=> ::core::marker::PhantomData::<#child);
                let close = quote_spanned!(c_last=> >);
                let method = Ident::new(
                    if rest.is_empty() {
                        "into_child"
                    } else {
                        "into_children"
                    },
                    c_first,
                );
                quote_spanned! {span=> {
                    #bind #semi
                    #check::expansion(&#input).#method(#marker #close, #input #(, #rest)*)
                }}
            }
            OpKind::Reduce {
                inputs,
                members,
                keep_failed,
            } => {
                let args = self.args(inputs);
                let members = members.as_ref().map(|m| self.arg(m));
                let f = match (inputs.len(), members.is_some()) {
                    // `body` admits the flag only on a one-input `reduce!`
                    // without members.
                    _ if *keep_failed => "reduce_keep_failed",
                    (1, false) => "reduce",
                    (1, true) => "reduce_members",
                    (_, false) => "reduce_aligned",
                    (_, true) => "reduce_aligned_members",
                };
                // The call covers exactly the reduced Port, where "root
                // Domain" is reported: rustc then reports it once.
                let all = args.iter().chain(&members);
                call_at(f, quote!(#(#all),*), span_range(&inputs[0]))
            }
            OpKind::Filter { value, mask } => {
                let (v, m) = (self.arg(value), self.arg(mask));
                quote_spanned!(span=> #check::filter(#v, #m))
            }
            OpKind::Broadcast { value, like } => {
                let (v, l) = (self.arg(value), self.arg(like));
                quote_spanned!(span=> #check::broadcast(#v, #l))
            }
            OpKind::Invalid => unreachable!("an invalid op was reported, so nothing is generated"),
        }
    }

    /// `self.f(a, ..)`: the field is a Call, later inputs share the first
    /// one's Domain, and the inputs' value is the stage's input type.
    fn apply(&mut self, a: &Apply, span: Span) -> TokenStream {
        let receiver = respan(a.receiver.to_token_stream(), span);
        let field = &a.field;
        let field_ref = quote_spanned!(span=> &#receiver.#field);
        let args = self.args(&a.args);
        // One input: a stage input mismatch is reported at it. Several: the
        // checked tuple covers the second input, where `inputsN` reports a
        // Domain mismatch, and a stage input mismatch goes to the field. Each
        // check's call covers the same tokens as its error, so rustc reports
        // it once; `apply` takes the checked inputs and checks nothing more.
        let stage_input = match args.as_slice() {
            [one] => call_at("stage_input", quote!(#field_ref, #one), span_range(&a.args[0])),
            many => {
                let f = format!("inputs{}", many.len());
                let tuple = call_at(&f, quote!(#(#many),*), span_range(&a.args[1]));
                call_at("stage_inputs", quote!(#field_ref, #tuple), (span, span))
            }
        };
        let apply = if a.split {
            quote_spanned!(span=> apply_split)
        } else {
            quote_spanned!(span=> apply)
        };
        quote_spanned! {span=>
            ::rayorch::__private::check::#apply(
                ::rayorch::__private::check::call_field(#field_ref),
                #stage_input,
            )
        }
    }
}

impl VisitMut for Rewrite<'_> {
    fn visit_expr_mut(&mut self, e: &mut Expr) {
        match op_index(e) {
            Some(i) => *e = Expr::Verbatim(self.op(i)),
            None => visit_mut::visit_expr_mut(self, e),
        }
    }
}

/// `callee(args)` with the parentheses at `close`: the call expression then
/// spans from the callee's first token to `close`.
fn with_parens(callee: TokenStream, args: TokenStream, close: Span) -> TokenStream {
    let mut group = Group::new(Delimiter::Parenthesis, args);
    group.set_span(close);
    quote!(#callee #group)
}

/// `::rayorch::__private::check::f(args)` whose expression covers exactly
/// `first..=last` of the user's tokens.
fn call_at(f: &str, args: TokenStream, (first, last): (Span, Span)) -> TokenStream {
    let f = Ident::new(f, first);
    with_parens(
        quote_spanned!(first=> ::rayorch::__private::check::#f),
        args,
        last,
    )
}

/// A generated local that rustc may blame: it takes the user's span whole
/// (location and hygiene), since rustc moves an error at a span from a
/// macro's own context to the `#[pipeline]` line.
fn local(name: &str, at: Span) -> Ident {
    format_ident!("__rayorch_{}", name, span = at)
}

/// Tokens moved to `at`, keeping their own hygiene (the user's `self`).
fn respan(tokens: TokenStream, at: Span) -> TokenStream {
    tokens
        .into_iter()
        .map(|mut t| {
            t.set_span(t.span().located_at(at));
            t
        })
        .collect()
}
