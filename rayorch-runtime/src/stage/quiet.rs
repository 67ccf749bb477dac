//! Panics printed once: a stage that panics on one record panics again on
//! each retry and each bisection step that holds it, and every one used to
//! print its message (with a backtrace, when on). The first attempt prints
//! as usual; later attempts run *quiet*: the panic hook the run installs
//! (once per process, chained to the hook in place then) prints nothing for
//! a panic on a thread while it runs a quiet attempt. The panic is still
//! caught, counted and reported as the attempt's failure, with its message
//! in the cause.
//!
//! Invariants: the flag is per thread and set only around one attempt's
//! code (a blocking call, one poll of an async attempt), then restored; a
//! panic on any other code prints through the previous hook unchanged.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::sync::Once;
use std::task::{Context, Poll};

thread_local! {
    static QUIET: Cell<bool> = const { Cell::new(false) };
}

static HOOK: Once = Once::new();

/// Install the hook that skips printing quiet panics (once per process).
pub(crate) fn install() {
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !QUIET.with(Cell::get) {
                previous(info);
            }
        }));
    });
}

/// Run `f` with this thread's panics quiet when `quiet` (`f` must not
/// unwind: run it under `catch_unwind`).
pub(crate) fn quietly<T>(quiet: bool, f: impl FnOnce() -> T) -> T {
    let was = QUIET.with(|q| q.replace(quiet));
    let out = f();
    QUIET.with(|q| q.set(was));
    out
}

/// A future whose polls run quiet when `quiet` (it must not unwind out of
/// a poll: wrap it in `catch_unwind`).
pub(crate) struct Quiet<F> {
    inner: Pin<Box<F>>,
    quiet: bool,
}

impl<F: Future> Quiet<F> {
    pub(crate) fn new(inner: F, quiet: bool) -> Quiet<F> {
        Quiet {
            inner: Box::pin(inner),
            quiet,
        }
    }
}

impl<F: Future> Future for Quiet<F> {
    type Output = F::Output;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let quiet = self.quiet;
        quietly(quiet, || self.inner.as_mut().poll(cx))
    }
}
