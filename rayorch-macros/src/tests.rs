//! Fast checks of the parse → check → generate pipeline on token input; the
//! compiler-facing behaviour (spans, rustc's messages) is pinned by `ui-tests`.

use proc_macro2::TokenStream;
use quote::quote;

use crate::expand;

/// The messages of every error `#[pipeline]` reports for `item`.
fn errors(item: TokenStream) -> Vec<String> {
    match expand::pipeline(TokenStream::new(), item) {
        Ok(_) => Vec::new(),
        Err(e) => e.into_iter().map(|e| e.to_string()).collect(),
    }
}

fn forward(body: TokenStream) -> TokenStream {
    quote! {
        impl P {
            fn forward(&self, pdfs: Port<Pdf, String>) -> Port<Pdf, String> { #body }
        }
    }
}

#[test]
fn a_valid_pipeline_keeps_forward_and_adds_pipeline() {
    let out = expand::pipeline(
        TokenStream::new(),
        forward(quote! {
            let page = expand!(self.pages(pdfs) => Page);
            let texts = reduce!(self.ocr(page));
            self.join(pdfs, texts)
        }),
    )
    .expect("no errors")
    .to_string();
    assert!(out.contains("fn forward (& self , pdfs : Port < Pdf , String >) -> Port < Pdf , String >"));
    assert!(out.contains("impl :: rayorch :: __private :: Pipeline for P"));
    assert!(out.contains("type Input = String"));
    assert!(!out.contains("expand !"), "every pseudo-macro is rewritten");
}

#[test]
fn every_structural_error_is_reported_at_once() {
    let errs = errors(forward(quote! {
        let page = expand!(self.pages(pdfs) => Page);
        let keep = self.keep(page);
        let roots = reduce!(pdfs);
        let texts = reduce!(page, members = self.keep(pdfs));
        if keep {}
        let (a, b) = self.pair(pdfs, texts);
        let _ = roots;
        self.pair(pdfs, texts)
    }));
    assert_eq!(errs.len(), 4, "{errs:#?}");
    assert!(errs[0].starts_with("`reduce!` needs a Port in a child Domain"));
    assert!(errs[1].starts_with("`reduce!` members must be in"));
    assert!(errs[2].starts_with("this is a Port, not a `bool`"));
    assert!(errs[3].starts_with("a Call gives one Port"));
}

#[test]
fn ports_the_walk_cannot_follow_raise_nothing() {
    // `helper` may return a child-Domain Port: only rustc can tell.
    let errs = errors(forward(quote! {
        let page = expand!(self.pages(pdfs) => Page);
        let texts = reduce!(helper(page));
        let all = reduce!(helper(pdfs));
        self.join(pdfs, texts, all)
    }));
    assert!(errs.is_empty(), "{errs:#?}");
}

#[test]
fn an_unreduced_expansion_is_reported_only_for_root_outputs() {
    let body = quote! {
        let page = expand!(self.pages(pdfs) => Page);
        self.ocr(page)
    };
    let errs = errors(forward(body.clone()));
    assert_eq!(errs.len(), 1);
    assert!(errs[0].starts_with("`expand!` enters `Page`"));
    // Returning the child Port is rustc's error (`OutputRoot`), not a second one here.
    let child_output = quote! {
        impl P {
            fn forward(&self, pdfs: Port<Pdf, String>) -> Port<Page, String> { #body }
        }
    };
    assert!(errors(child_output).is_empty());
}

#[test]
fn a_call_mixing_domains_leaves_its_result_unknown() {
    // rustc reports the mixed inputs; the walk must not then guess that the
    // result is in `Pdf` and call the `reduce!` one of a root Port.
    let errs = errors(forward(quote! {
        let page = expand!(self.pages(pdfs) => Page);
        let text = self.label(pdfs, page);
        let texts = reduce!(text);
        self.pair(pdfs, texts)
    }));
    assert!(errs.is_empty(), "{errs:#?}");
}

#[test]
fn sibling_methods_are_methods_and_other_fields_are_calls() {
    let item = quote! {
        impl P {
            fn forward(&self, pdfs: Port<Pdf, String>) -> Port<Pdf, String> {
                self.helper(self.ocr(pdfs))
            }
            fn helper(&self, p: Port<Pdf, String>) -> Port<Pdf, String> { p }
        }
    };
    let out = expand::pipeline(TokenStream::new(), item).unwrap().to_string();
    assert!(out.contains("self . helper ("), "{out}");
    assert!(out.contains("call_field (& self . ocr)"), "{out}");
}

#[test]
fn signature_errors() {
    let errs = errors(quote! {
        impl P {
            async fn forward(self, pdfs: String) {}
        }
    });
    assert_eq!(errs.len(), 4, "{errs:#?}");
    let errs = errors(quote!(impl P { fn build(&self) {} }));
    assert_eq!(
        errs,
        vec![
            "a `#[pipeline]` impl needs `fn forward(&self, source: Port<Root, In>) -> Port<Root, Out>`"
                .to_string()
        ]
    );
}

#[test]
fn names_bound_by_patterns_hide_ports() {
    let errs = errors(forward(quote! {
        let keep = self.keep(pdfs);
        for keep in [true, false] { if keep {} }
        let _ = [true].iter().filter(|keep| !**keep);
        if let Some(keep) = Some(true) { while keep {} }
        match 1 { keep => if keep == 1 {} }
        self.ocr(pdfs)
    }));
    assert!(errs.is_empty(), "{errs:#?}");
}

#[test]
fn crate_option_rebases_every_generated_path() {
    let attr = quote!(crate = ray);
    let item = forward(quote! {
        let page = ray::expand!(self.pages(pdfs) => Page);
        self.join(pdfs, ray::reduce!(self.ocr(page)))
    });
    let krate = crate::ast::crate_option(&attr);
    let out = expand::pipeline(attr, item).expect("no errors");
    let out = crate::krate::rebase(out, krate.as_ref()).to_string();
    assert!(out.contains("impl ray :: __private :: Pipeline for P"));
    assert!(
        !out.contains(":: rayorch ::"),
        "no path names the crate by its package name: {out}"
    );
    assert!(!out.contains("expand !"), "`ray::expand!` is an operation too");
}

#[test]
fn late_mistakes_are_macro_errors() {
    let errs = errors(forward(quote! {
        let page = expand!(self.pages(pdfs) => Page);
        let again = expand!(self.pages(pdfs) => Page);
        let unused = self.ocr(pdfs);
        self.ocr(pdfs);
        let a = reduce!(self.ocr(page));
        let b = reduce!(self.ocr(again));
        self.join(a, b)
    }));
    assert_eq!(errs.len(), 3, "{errs:?}");
    assert!(
        errs[0].contains("already entered by an earlier `expand!`"),
        "{errs:?}"
    );
    assert!(errs[1].contains("Port is dropped"), "{errs:?}");
    assert!(errs[2].contains("`unused` is never used"), "{errs:?}");
}

#[test]
fn helper_methods_are_rewritten() {
    let out = expand::pipeline(
        TokenStream::new(),
        quote! {
            impl Twice {
                fn forward(&self, docs: Port<Doc, String>) -> Port<Doc, String> {
                    let a = self.gather(self.first(docs));
                    let b = self.gather(self.first(docs));
                    self.join(a, b)
                }
                fn first(&self, docs: Port<Doc, String>) -> Port<Page, String> {
                    expand!(self.split(docs) => Page)
                }
                fn gather(&self, page: Port<Page, String>) -> Port<Doc, Vec<String>> {
                    reduce!(page)
                }
            }
        },
    )
    .expect("no errors")
    .to_string();
    assert!(!out.contains("expand !") && !out.contains("reduce !"), "{out}");
    assert!(out.contains("check :: expansion"), "{out}");
}

#[test]
fn a_port_read_inside_another_macro_is_used() {
    let errs = errors(forward(quote! {
        let text = self.ocr(pdfs);
        let all = vec![text];
        self.join(pdfs, all)
    }));
    assert!(errs.is_empty(), "{errs:?}");
}

#[test]
fn keep_failed_is_a_reduce_flag() {
    let ok = expand::pipeline(
        TokenStream::new(),
        forward(quote! {
            let page = expand!(self.pages(pdfs) => Page);
            self.join(pdfs, reduce!(self.ocr(page), keep_failed))
        }),
    )
    .expect("no errors")
    .to_string();
    assert!(ok.contains("reduce_keep_failed"), "{ok}");
    let errs = errors(forward(quote! {
        let page = expand!(self.pages(pdfs) => Page);
        let a = reduce!(page, keep_failed, keep_failed);
        let b = reduce!(page, members = self.keep(page), keep_failed);
        let c = reduce_aligned!((page, page), keep_failed);
        self.join(pdfs, a, b, c)
    }));
    assert_eq!(errs.len(), 3, "{errs:#?}");
    assert!(errs[0].starts_with("`keep_failed` is given twice"), "{errs:#?}");
    assert!(
        errs[1].starts_with("`keep_failed` cannot be combined with `members = ..`"),
        "{errs:#?}"
    );
    assert!(
        errs[2].starts_with("unexpected argument: write `reduce_aligned!"),
        "{errs:#?}"
    );
}
