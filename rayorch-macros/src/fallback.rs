//! What `#[pipeline]` emits when it reports errors: the user's impl block
//! with `forward`'s signature unchanged, plus `impl Pipeline`, beside the
//! `compile_error!`s.
//!
//! Only the bodies of `forward` and its helpers (methods that take or return
//! a Port) are replaced (by `unreachable!()`): left as written,
//! its `self.call(..)` and `expand!(..)` would add "no method" and
//! "outside `#[pipeline]`" errors on top of ours. Code that calls `forward` or
//! `build_plan` still type-checks, so the user sees only the macro's errors
//! (a ui test, `fail/recovery/`, proves it).

use proc_macro2::TokenStream;
use quote::quote;
use syn::{ImplItem, ItemImpl};

use crate::ast::{PortType, Signature, find_forward};
use crate::ctxt::Ctxt;
use crate::expand::pipeline_impl;

pub(crate) fn pipeline(item: TokenStream, err: syn::Error) -> TokenStream {
    let errors = err.into_compile_error();
    let Ok(mut imp) = syn::parse2::<ItemImpl>(item.clone()) else {
        return quote!(#item #errors);
    };
    let unreachable = quote!(::core::unreachable!("`#[pipeline]` reported an error"));
    let pipeline = find_forward(&imp).and_then(|f| {
        // A signature error is already among `errors`; this Ctxt only asks
        // whether an `impl Pipeline` can be written.
        let cx = Ctxt::new();
        let sig = Signature::from_syn(&cx, f).map(|sig| pipeline_impl(&imp, &sig, unreachable.clone()));
        let _ = cx.check();
        sig
    });
    // Without a `forward`, any method taking a Port is probably it, misnamed:
    // its body would only add errors about its pipeline syntax.
    let has_forward = find_forward(&imp).is_some();
    for it in &mut imp.items {
        if let ImplItem::Fn(f) = it
            && (f.sig.ident == crate::symbol::FORWARD
                || crate::ast::handles_ports(&f.sig)
                || !has_forward && takes_port(&f.sig))
        {
            f.attrs
                .push(syn::parse_quote!(#[allow(unused_variables, unreachable_code)]));
            f.block = syn::parse_quote!({ #unreachable });
        }
    }
    quote! {
        #imp
        #pipeline
        #errors
    }
}

fn takes_port(sig: &syn::Signature) -> bool {
    sig.inputs
        .iter()
        .any(|a| matches!(a, syn::FnArg::Typed(t) if PortType::from_type(&t.ty).is_some()))
}
