//! `#[pipeline(crate = path)]` and `#[domain(crate = path)]`: where the
//! generated code finds rayorch when the dependency is renamed
//! (`ray = { package = "rayorch", .. }`), as serde's `#[serde(crate = ..)]`.
//!
//! The code generators write `::rayorch::__private::..` throughout; [`rebase`]
//! swaps each leading `::rayorch` for the user's path at the end, so that no
//! generator has to thread the path through and none can forget it.

use proc_macro2::{Group, Span, TokenStream, TokenTree};
use quote::ToTokens;

use crate::symbol::CRATE;

/// `tokens` with every `::rayorch` path start replaced by `krate`.
pub(crate) fn rebase(tokens: TokenStream, krate: Option<&syn::Path>) -> TokenStream {
    match krate {
        None => tokens,
        Some(path) => replace(tokens, &path.to_token_stream()),
    }
}

fn replace(tokens: TokenStream, krate: &TokenStream) -> TokenStream {
    let trees: Vec<TokenTree> = tokens.into_iter().collect();
    let mut out = Vec::with_capacity(trees.len());
    let mut i = 0;
    while i < trees.len() {
        if let [TokenTree::Punct(a), TokenTree::Punct(b), TokenTree::Ident(id), ..] = &trees[i..]
            && a.as_char() == ':'
            && b.as_char() == ':'
            && id == CRATE
            && !follows_path(&out)
        {
            out.extend(respanned(krate, id.span()));
            i += 3;
            continue;
        }
        match &trees[i] {
            TokenTree::Group(g) => {
                let mut group = Group::new(g.delimiter(), replace(g.stream(), krate));
                group.set_span(g.span());
                out.push(TokenTree::Group(group));
            }
            t => out.push(t.clone()),
        }
        i += 1;
    }
    out.into_iter().collect()
}

/// `a::rayorch` is a module of `a`, not the crate; `impl ::rayorch::..`
/// (a keyword before it) is the crate.
fn follows_path(out: &[TokenTree]) -> bool {
    const KEYWORDS: &[&str] = &[
        "impl", "for", "as", "dyn", "where", "in", "return", "let", "mut", "move", "else", "fn", "type",
        "const", "static", "use", "pub", "match", "if", "while", "ref", "unsafe", "async",
    ];
    matches!(out.last(), Some(TokenTree::Ident(id)) if !KEYWORDS.iter().any(|k| id == k))
}

fn respanned(tokens: &TokenStream, span: Span) -> Vec<TokenTree> {
    tokens
        .clone()
        .into_iter()
        .map(|mut t| {
            t.set_span(t.span().located_at(span));
            t
        })
        .collect()
}

/// Parses `crate = path` in a macro's options; any other option is reported
/// by the caller, who knows its usage line.
pub(crate) fn parse_option(meta: &syn::meta::ParseNestedMeta<'_>) -> syn::Result<syn::Path> {
    meta.value()?.parse()
}
