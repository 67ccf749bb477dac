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

/// Turn a plain Rust `forward` function into a pipeline plan.
///
/// Put it on the impl block of a struct whose fields are `Call<_>`s. Inside
/// `forward`:
///
/// | write | means |
/// | --- | --- |
/// | `self.ocr(page)` | apply the Call in field `ocr` to one Port |
/// | `self.pair(a, b)` | a Call with several inputs, all Ports of one Domain; its stage takes `(A, B)` |
/// | `split!(self.detect(x))` | a Call whose stage returns `(A, B)`: one Port per field |
/// | `expand!(pages => Page)` | each element of a list becomes a child Entity of `Page` |
/// | `expand_aligned!((a, b) => Page)` | two lists of one parent become aligned children |
/// | `reduce!(x)` | gather a child Domain back into its parent, as a `Vec` in child order |
/// | `reduce!(x, members = m)` | only the children where `m` is present |
/// | `reduce!(x, keep_failed)` | keep the parent when children failed: `Vec<Result<T, Cause>>`, `Err(cause)` where a child failed |
/// | `reduce_aligned!((a, b))` | gather two child Ports, keeping children present in both |
/// | `filter!(x, mask)` | drop the Entities whose `bool` mask is `false` |
/// | `broadcast!(x, like = y)` | an ancestor's value, seen from each Entity of `y`'s Domain |
/// | `x.optional()` | a Call input that arrives as `None` instead of dropping the output |
///
/// `forward`'s parameters are the source Ports (one to three, all in the one
/// root Domain) and it returns a root-Domain Port or a tuple of them. The
/// signature stays as written, `forward` stays callable, and the macro adds
/// `impl rayorch::Pipeline` (`build_plan`). `self.m(..)` calls a method when
/// `m` is defined in the same impl block; elsewhere write `Self::m(self, ..)`.
///
/// Helper methods of the same impl block that take `&self` and take or
/// return a Port are rewritten like `forward`: `self.call(x)`, `expand!` and
/// `reduce!` work in them, and rustc checks their Domains. The cross-operation
/// checks (an `expand!` never reduced, an unused Port, ...) follow `forward`
/// only; what they cannot see there is a `PlanError` from `build_plan()` that
/// names the line of each operation involved.
///
/// `#[pipeline(crate = ray)]` names rayorch where the dependency is renamed
/// (`ray = { package = "rayorch", .. }`); `expand!` and the other operations
/// may then also be written `ray::expand!`.
///
/// Domain mistakes are compile errors at the offending token. Set
/// `RAYORCH_MACROS_DEBUG=1` (or the type's name) to print the expansion.
///
/// `build_plan()` gives the `Plan` and a typed handle per output; a `Runner`
/// runs it. (A pipeline's tests may run it under `rayorch::sim`, the seeded
/// executor: rayorch's `sim` feature.)
///
/// ```
/// use rayorch::prelude::*;
///
/// #[derive(Domain)]
/// struct Doc;
///
/// #[derive(Domain)]
/// #[domain(parent = Doc)]
/// struct Word;
///
/// struct WordLengths {
///     split: FnCall<String, Vec<String>>,
///     len: FnCall<String, usize>,
/// }
///
/// #[pipeline]
/// impl WordLengths {
///     fn forward(&self, docs: Port<Doc, String>) -> Port<Doc, Vec<usize>> {
///         let word = expand!(self.split(docs) => Word);
///         reduce!(self.len(word))
///     }
/// }
///
/// let p = WordLengths {
///     split: Call::map("split", |s: String| s.split(' ').map(String::from).collect::<Vec<_>>()),
///     len: Call::map("len", |w: String| w.len()),
/// };
/// let (plan, out) = p.build_plan().unwrap();
/// let mut got = Vec::new();
/// Runner::new(&plan)
///     .run([(0, "a bb ccc".to_string())], Callback(|o: &RootOutcome| got.push(o.get(out))))
///     .unwrap();
/// assert_eq!(got, vec![Item::Present(vec![1, 2, 3])]);
/// ```
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

/// `impl Domain`: a root Domain as written, a child Domain with
/// `#[domain(parent = ParentDomain)]`. A cycle of parents (`A` parent of
/// `B`, `B` parent of `A`) is a compile error at the `parent`. With a renamed
/// dependency, add `crate = ray`: `#[domain(parent = Pdf, crate = ray)]`.
///
/// ```
/// use rayorch::{Domain, DomainInfo};
///
/// #[derive(Domain)]
/// struct Pdf;
///
/// #[derive(Domain)]
/// #[domain(parent = Pdf)]
/// struct Page;
///
/// assert_eq!(DomainInfo::of::<Page>().parent(), Some(DomainInfo::of::<Pdf>()));
/// assert_eq!(<Page as Domain>::NAME, "Page");
/// ```
#[proc_macro_derive(Domain, attributes(domain))]
pub fn derive_domain(input: TokenStream) -> TokenStream {
    let input = syn::parse_macro_input!(input as syn::DeriveInput);
    domain::derive(&input).into()
}
