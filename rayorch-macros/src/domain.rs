//! `#[derive(Domain)]`: `impl Domain` with the parent from `#[domain(parent = P)]`.
//!
//! Errors (an unknown option, a second `parent`, a Domain that is its own
//! parent) are reported beside the impl, which is still emitted, so that the
//! rest of the crate sees a Domain and reports nothing else.

use proc_macro2::{TokenStream, TokenTree};
use quote::{quote, quote_spanned};
use syn::{DeriveInput, Token, Type};

use crate::ast::first_span;
use crate::ctxt::Ctxt;
use crate::symbol::{DOMAIN, PARENT};

const USAGE: &str = "write `#[domain(parent = ParentDomain)]` on a child Domain, and no `#[domain]` on a root Domain (`crate = ray` names a renamed rayorch dependency)";

pub(crate) fn derive(input: &DeriveInput) -> TokenStream {
    let cx = Ctxt::new();
    let Options { parent, krate } = options(&cx, input);
    let ident = &input.ident;
    let name = ident.to_string().trim_start_matches("r#").to_string();
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    // Through `DomainParent`, so a parent that is not a Domain is reported at
    // the user's type with a message that says so.
    // A cycle of parents is reported at this Domain's `parent`: naming the
    // constant makes rustc prove the parent `Acyclic` where the Domain is
    // declared (the parent is in the cycle exactly when this Domain is).
    // Through `Domain::Parent`, so that a parent that is no Domain is an
    // error type here and reported once, by `DomainParent`.
    let acyclic = match &parent {
        Some(p) if input.generics.params.is_empty() => {
            let check = quote_spanned!(first_span(p)=> <<#ident as ::rayorch::__private::Domain>::Parent as ::rayorch::__private::check::Acyclic>::CHECKED);
            Some(quote!(const _: () = #check;))
        }
        _ => None,
    };
    let parent = match &parent {
        Some(p) => quote_spanned!(first_span(p)=> <#p as ::rayorch::__private::check::DomainParent>::Slot),
        None => quote!(::rayorch::__private::NoParent),
    };
    let errors = cx.check().err().map(syn::Error::into_compile_error);
    let out = quote! {
        // Not listed under "the following other types implement trait
        // `Domain`" when a non-Domain is used as one: that list is noise.
        #[automatically_derived]
        #[diagnostic::do_not_recommend]
        impl #impl_generics ::rayorch::__private::Domain for #ident #ty_generics #where_clause {
            type Parent = #parent;
            const NAME: &'static str = #name;
        }
        #acyclic
        #errors
    };
    crate::krate::rebase(out, krate.as_ref())
}

struct Options {
    parent: Option<Type>,
    krate: Option<syn::Path>,
}

fn options(cx: &Ctxt, input: &DeriveInput) -> Options {
    let mut parent: Option<Type> = None;
    let mut krate: Option<syn::Path> = None;
    for attr in input.attrs.iter().filter(|a| a.path().is_ident(DOMAIN)) {
        if let syn::Meta::Path(p) = &attr.meta {
            cx.error_spanned_by(p, format!("`#[domain]` needs an option: {USAGE}"));
            continue;
        }
        let parsed = attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("crate") {
                let path = crate::krate::parse_option(&meta)?;
                if krate.is_some() {
                    cx.error_spanned_by(&meta.path, format!("`crate` is given twice: {USAGE}"));
                }
                krate = Some(path);
            } else if meta.path.is_ident(PARENT) {
                let ty: Type = meta.value()?.parse()?;
                if parent.is_some() {
                    cx.error_spanned_by(&meta.path, format!("`parent` is given twice: {USAGE}"));
                } else if is_self(&ty, &input.ident) {
                    cx.error_spanned_by(
                        &ty,
                        "a Domain cannot be its own parent: Domains form a tree; name the Domain one level up",
                    );
                } else {
                    parent = Some(ty);
                }
            } else {
                cx.error_spanned_by(
                    &meta.path,
                    format!(
                        "unknown `domain` option `{}`: {USAGE}",
                        quote::ToTokens::to_token_stream(&meta.path)
                    ),
                );
                // Skip its value so that later options are still checked.
                if meta.input.peek(Token![=]) {
                    meta.input.parse::<Token![=]>()?;
                    while !meta.input.is_empty() && !meta.input.peek(Token![,]) {
                        meta.input.parse::<TokenTree>()?;
                    }
                }
            }
            Ok(())
        });
        if let Err(e) = parsed {
            cx.syn_error(e);
        }
    }
    Options { parent, krate }
}

fn is_self(ty: &Type, ident: &syn::Ident) -> bool {
    matches!(ty, Type::Path(p) if p.qself.is_none() && (p.path.is_ident(ident) || p.path.is_ident("Self")))
}
