//! Ctrl-C for a job: the first press stops admitting (the roots in flight
//! finish and everything is closed properly), the second abandons the
//! in-flight work (every admitted root still reaches the sink, failed
//! "cancelled"), the third exits at once (status 130).
//!
//! One handler per process: a process that already has one (a test running
//! a job twice in-process) keeps the first, and [`Interrupts::pressed`]
//! reads the presses of this process.

use std::sync::atomic::{AtomicU8, Ordering};

use rayorch::CancelHandle;

/// Ctrl-C presses so far in this process.
static PRESSES: AtomicU8 = AtomicU8::new(0);

/// The presses a job reads after its run.
#[derive(Clone, Copy, Debug)]
pub struct Interrupts;

impl Interrupts {
    /// Was Ctrl-C pressed since the handler was installed?
    pub fn pressed(self) -> bool {
        PRESSES.load(Ordering::SeqCst) > 0
    }
}

/// Install the drain / abandon / exit handler on `stop` (a run's
/// [`CancelHandle`]); `what` names the roots in the messages ("documents").
pub fn on_ctrl_c(stop: CancelHandle, what: &'static str) -> Result<Interrupts, ctrlc::Error> {
    install(move || match PRESSES.fetch_add(1, Ordering::SeqCst) {
        0 => {
            stop.stop_admitting();
            eprintln!("\nCtrl-C: no new {what}; finishing those in flight (Ctrl-C again to abandon them)");
        }
        1 => {
            stop.cancel();
            eprintln!("\nCtrl-C: abandoning in-flight work; closing the outputs");
        }
        _ => std::process::exit(130),
    })?;
    Ok(Interrupts)
}

/// Install `f` as the Ctrl-C handler unless the process has one already.
pub fn install(f: impl FnMut() + Send + 'static) -> Result<(), ctrlc::Error> {
    match ctrlc::set_handler(f) {
        Err(ctrlc::Error::MultipleHandlers) => Ok(()),
        r => r,
    }
}
