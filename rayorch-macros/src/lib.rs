//! Procedural macros for rayorch: `#[pipeline]` and `#[derive(Domain)]`.
//!
//! Use them through the `rayorch` crate (`rayorch::pipeline`,
//! `rayorch::Domain`); the code they generate names only
//! `::rayorch::__private` paths.
//!
//! Layout: each entry point parses and hands over to one function; `ast` and
//! `body` turn syn into our IR, `check` does the cross-cutting structural
//! checks, `expand` generates code, `fallback` is what comes out when there
//! are errors, and `ctxt` collects them so all are reported at once.

mod ast;
mod body;
mod check;
mod ctxt;
mod debug;
mod domain;
mod expand;
mod fallback;
mod krate;
mod symbol;
#[cfg(test)]
mod tests;

use proc_macro::TokenStream;

/// (Defined in `rayorch-macros`; use it as `rayorch::pipeline`, where
/// this page's text and example live and are doctested: a doctest here
/// would build the engine a second time, for the host.)
#[proc_macro_attribute]
pub fn pipeline(attr: TokenStream, item: TokenStream) -> TokenStream {
    let (attr, item) = (
        proc_macro2::TokenStream::from(attr),
        proc_macro2::TokenStream::from(item),
    );
    let krate = ast::crate_option(&attr);
    let out = expand::pipeline(attr, item.clone()).unwrap_or_else(|err| fallback::pipeline(item, err));
    krate::rebase(out, krate.as_ref()).into()
}

/// (Defined in `rayorch-macros`; use it as `rayorch::Domain`, where this
/// page's text and example live.)
#[proc_macro_derive(Domain, attributes(domain))]
pub fn derive_domain(input: TokenStream) -> TokenStream {
    let input = syn::parse_macro_input!(input as syn::DeriveInput);
    domain::derive(&input).into()
}
