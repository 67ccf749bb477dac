//! The error collector every phase reports into (serde_derive's `Ctxt`).
//!
//! Phases record problems and keep going, so the user sees every structural
//! mistake of one `forward` at once, each at its own span. `check` turns the
//! collection into one `syn::Error`; dropping a `Ctxt` without calling it is a
//! bug in the macro (an error could be lost), so `Drop` panics.

use std::cell::RefCell;
use std::fmt::Display;
use std::thread;

use quote::ToTokens;

pub(crate) struct Ctxt {
    errors: RefCell<Option<Vec<syn::Error>>>,
}

impl Ctxt {
    pub(crate) fn new() -> Self {
        Ctxt {
            errors: RefCell::new(Some(Vec::new())),
        }
    }

    /// An error covering `tokens` (first to last token).
    pub(crate) fn error_spanned_by<T: ToTokens, M: Display>(&self, tokens: T, msg: M) {
        self.syn_error(syn::Error::new_spanned(tokens.into_token_stream(), msg));
    }

    pub(crate) fn syn_error(&self, err: syn::Error) {
        self.errors
            .borrow_mut()
            .as_mut()
            .expect("Ctxt used after check")
            .push(err);
    }

    /// All recorded errors, combined; consumes the collector.
    pub(crate) fn check(self) -> syn::Result<()> {
        let mut errors = self
            .errors
            .borrow_mut()
            .take()
            .expect("Ctxt checked twice")
            .into_iter();
        let Some(mut combined) = errors.next() else {
            return Ok(());
        };
        for rest in errors {
            combined.combine(rest);
        }
        Err(combined)
    }
}

impl Drop for Ctxt {
    fn drop(&mut self) {
        if !thread::panicking() && self.errors.borrow().is_some() {
            panic!("forgot to check for errors");
        }
    }
}
