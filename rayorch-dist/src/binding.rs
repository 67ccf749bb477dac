//! Reports bound to the lease holder: only the worker that claimed a
//! delivery of a batch can commit its result.
//!
//! The owner's generation fence refuses *stale* reports (an older delivery,
//! a decided ticket, another run); on its own it would take a *forged* one:
//! tickets are small sequential numbers and the run id is told to every
//! worker that says hello, so any client allowed to publish on the control
//! subject could claim and report a live batch first. Three values close
//! that:
//!
//! - **The batch key**: 16 random bytes the owner puts in each published
//!   batch ([`BatchMsg::key`](crate::messages::BatchMsg::key)). Only a
//!   client that pulled the batch off its work queue knows it (the broker's
//!   permissions decide who may pull a Call's queue).
//! - **The seal**: a worker derives a secret *opening* per delivery it
//!   claims (from a random secret of its own process, so claiming a batch
//!   fetched ahead and again when it starts gives one seal) and claims with
//!   `seal = SHA-256(opening)` and
//!   `proof = HMAC-SHA-256(key, run ‖ ticket ‖ delivery ‖ seal)`. The owner
//!   checks the proof, records the seal of the newest delivery claimed, and
//!   refuses a different seal for the same delivery.
//! - **The opening**: the report reveals it. The owner commits a report
//!   only if its proof holds, `SHA-256(opening)` is the report's seal and
//!   that seal is the one recorded for its delivery (none recorded: the
//!   claim was lost, the proof alone admits it).
//!
//! So a client that copied a live claim off the control subject has the
//! seal and the proof but not the opening, and one that never pulled the
//! batch cannot make a proof: both are refused and counted
//! ([`OwnerStats::forged_refused`](crate::OwnerStats::forged_refused)),
//! their stored payloads are left alone (the keys they name may be another
//! report's), and the batch's real report still commits. What this does not
//! stop: a client with the worker credentials of a Call pulling its batches
//! and reporting wrong values — the broker's permissions keep everyone else
//! off those queues.

use ring::hmac;
use ring::rand::{SecureRandom, SystemRandom};

use crate::error::DistError;

/// A batch's key: known to the owner and to whoever pulled the batch.
pub(crate) type BatchKey = [u8; 16];

/// `SHA-256(opening)`, the commitment a claim makes.
pub(crate) type Seal = [u8; 32];

/// `HMAC(key, run ‖ ticket ‖ delivery ‖ seal)`: the claimer pulled the batch.
pub(crate) type Proof = [u8; 32];

/// The opening a report reveals (32 random bytes per claimed delivery).
pub(crate) type Opening = [u8; 32];

fn random<const N: usize>() -> Result<[u8; N], DistError> {
    let mut b = [0u8; N];
    SystemRandom::new().fill(&mut b).map_err(|_| {
        DistError::Security(
            "the system's random number generator failed; a batch key or claim secret could not be drawn"
                .into(),
        )
    })?;
    Ok(b)
}

/// A fresh batch key (the owner, per published batch).
pub(crate) fn batch_key() -> Result<BatchKey, DistError> {
    random()
}

/// A worker's source of openings: one secret per worker process, from
/// which the opening of each delivery it claims is derived
/// (`HMAC(secret, run ‖ ticket ‖ delivered)`), so a batch fetched ahead
/// and claimed again when it starts keeps one seal.
pub(crate) struct Claimer {
    secret: hmac::Key,
}

impl Claimer {
    /// A claimer with a fresh secret.
    pub(crate) fn new() -> Result<Claimer, DistError> {
        let secret: [u8; 32] = random()?;
        Ok(Claimer {
            secret: hmac::Key::new(hmac::HMAC_SHA256, &secret),
        })
    }

    /// The opening, seal and proof of this worker's claim of `delivered`
    /// of the batch keyed `key`.
    pub(crate) fn claim(
        &self,
        key: &BatchKey,
        run: u64,
        ticket: u64,
        delivered: u64,
    ) -> (Opening, Seal, Proof) {
        let tag = hmac::sign(&self.secret, &message(run, ticket, delivered, &[0; 32]));
        let mut opening = [0u8; 32];
        opening.copy_from_slice(tag.as_ref());
        let seal = seal_of(&opening);
        (opening, seal, proof(key, run, ticket, delivered, &seal))
    }
}

/// The seal an opening commits to.
pub(crate) fn seal_of(opening: &Opening) -> Seal {
    let d = ring::digest::digest(&ring::digest::SHA256, opening);
    let mut s = [0u8; 32];
    s.copy_from_slice(d.as_ref());
    s
}

fn message(run: u64, ticket: u64, delivered: u64, seal: &Seal) -> [u8; 56] {
    let mut m = [0u8; 56];
    m[..8].copy_from_slice(&run.to_le_bytes());
    m[8..16].copy_from_slice(&ticket.to_le_bytes());
    m[16..24].copy_from_slice(&delivered.to_le_bytes());
    m[24..].copy_from_slice(seal);
    m
}

/// The proof that the claimer of `delivered` pulled the batch keyed `key`.
pub(crate) fn proof(key: &BatchKey, run: u64, ticket: u64, delivered: u64, seal: &Seal) -> Proof {
    let k = hmac::Key::new(hmac::HMAC_SHA256, key);
    let tag = hmac::sign(&k, &message(run, ticket, delivered, seal));
    let mut p = [0u8; 32];
    p.copy_from_slice(tag.as_ref());
    p
}

/// Does `proof` hold for this claim (constant-time comparison)?
pub(crate) fn proof_holds(
    key: &BatchKey,
    run: u64,
    ticket: u64,
    delivered: u64,
    seal: &Seal,
    proof: &Proof,
) -> bool {
    let k = hmac::Key::new(hmac::HMAC_SHA256, key);
    hmac::verify(&k, &message(run, ticket, delivered, seal), proof).is_ok()
}

/// Does `opening` open `seal`? (The seal is public: comparing a hash of
/// the sender's bytes to it leaks nothing about the opening.)
pub(crate) fn opens(opening: &Opening, seal: &Seal) -> bool {
    seal_of(opening) == *seal
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proof_holds_only_for_its_key_and_fields_and_an_opening_only_for_its_seal() {
        let key = batch_key().unwrap();
        assert_ne!(key, batch_key().unwrap(), "keys are random");
        let me = Claimer::new().unwrap();
        let (o, s, p) = me.claim(&key, 1, 2, 3);
        assert_eq!(me.claim(&key, 1, 2, 3), (o, s, p), "a delivery keeps its seal");
        assert_eq!(p, proof(&key, 1, 2, 3, &s));
        assert!(proof_holds(&key, 1, 2, 3, &s, &p));
        assert!(!proof_holds(&batch_key().unwrap(), 1, 2, 3, &s, &p));
        assert!(!proof_holds(&key, 1, 2, 4, &s, &p));
        assert!(!proof_holds(&key, 1, 9, 3, &s, &p));
        assert!(!proof_holds(&key, 7, 2, 3, &s, &p));
        let (o2, s2, _) = Claimer::new().unwrap().claim(&key, 1, 2, 3);
        assert!(!proof_holds(&key, 1, 2, 3, &s2, &p));
        assert!(opens(&o, &s));
        assert!(!opens(&o2, &s));
    }
}
