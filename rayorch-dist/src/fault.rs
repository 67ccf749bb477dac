//! Fault injection for the fault-tolerance tests (feature `fault-injection`):
//! a worker that crashes, stops or loses a report on purpose, at a chosen
//! claim, by signalling its own process.
//!
//! Not for production builds: a worker started with a [`Fault`] kills
//! itself. The faults count the batches a worker's slots claim (1-based,
//! all slots together); the claim that keeps a batch fetched ahead alive
//! does not count.

use std::sync::atomic::{AtomicU32, Ordering};

use async_nats::jetstream;

/// A fault to inject.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultKind {
    /// `kill -9` itself right after claiming the batch (mid-batch crash).
    Crash,
    /// `kill -STOP` itself right after claiming (a zombie until resumed with
    /// `kill -CONT`; it then finishes and reports late).
    Pause,
    /// Run the batch and ack it, then `kill -9` itself before reporting.
    AckThenCrash,
    /// From this claim on, never hear the owner announce the end of the run
    /// (as a worker whose connection was down at that moment: the
    /// announcement is a plain NATS message, delivered at most once).
    Deaf,
}

/// Inject `kind` on this worker's `at`-th claimed batch (1-based).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fault {
    /// What happens.
    pub kind: FaultKind,
    /// On which claim.
    pub at: u32,
}

impl Fault {
    /// Parse `crash:2`, `pause:1`, `ack_then_crash:3`, `deaf:1`.
    pub fn parse(s: &str) -> Option<Fault> {
        let (k, n) = s.split_once(':')?;
        let kind = match k {
            "crash" => FaultKind::Crash,
            "pause" => FaultKind::Pause,
            "ack_then_crash" => FaultKind::AckThenCrash,
            "deaf" => FaultKind::Deaf,
            _ => return None,
        };
        Some(Fault {
            kind,
            at: n.parse().ok()?,
        })
    }
}

/// The fault of one worker and the claims counted so far.
#[derive(Debug)]
pub(crate) struct Injector {
    fault: Option<Fault>,
    claims: AtomicU32,
}

impl Injector {
    pub(crate) fn new(fault: Option<Fault>) -> Injector {
        Injector {
            fault,
            claims: AtomicU32::new(0),
        }
    }

    /// A worker without a fault.
    pub(crate) fn none() -> Injector {
        Injector::new(None)
    }

    /// Count a claim just published; at the fault's claim, crash or stop
    /// now (after flushing the claim), or return the fault that strikes
    /// later ([`Injector::before_report`]).
    pub(crate) async fn after_claim(&self, client: &async_nats::Client) -> Option<FaultKind> {
        let n = self.claims.fetch_add(1, Ordering::Relaxed) + 1;
        let fault = self.fault.filter(|f| f.at == n).map(|f| f.kind)?;
        match fault {
            FaultKind::Crash | FaultKind::Pause => {
                let _ = client.flush().await;
                kill_self(if fault == FaultKind::Crash {
                    "-KILL"
                } else {
                    "-STOP"
                });
                None
            }
            FaultKind::AckThenCrash => Some(fault),
            FaultKind::Deaf => None,
        }
    }

    /// Does this worker miss the owner's announcement of the run's end
    /// ([`FaultKind::Deaf`], once its claim has come)?
    pub(crate) fn deaf(&self) -> bool {
        self.fault
            .is_some_and(|f| f.kind == FaultKind::Deaf && self.claims.load(Ordering::Relaxed) >= f.at)
    }

    /// The batch ran: with [`FaultKind::AckThenCrash`], ack it and die
    /// before the report is sent.
    pub(crate) async fn before_report(fault: Option<FaultKind>, m: &jetstream::Message) {
        if fault == Some(FaultKind::AckThenCrash) {
            let _ = m.double_ack().await;
            kill_self("-KILL");
        }
    }
}

fn kill_self(signal: &str) {
    let _ = std::process::Command::new("kill")
        .args([signal, &std::process::id().to_string()])
        .status();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_parse() {
        assert_eq!(
            Fault::parse("ack_then_crash:3"),
            Some(Fault {
                kind: FaultKind::AckThenCrash,
                at: 3
            })
        );
        assert_eq!(
            Fault::parse("deaf:1"),
            Some(Fault {
                kind: FaultKind::Deaf,
                at: 1
            })
        );
        assert_eq!(Fault::parse("crash:x"), None);
        assert_eq!(Fault::parse("boom:1"), None);
    }
}
