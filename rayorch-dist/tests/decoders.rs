//! Decoders that never trust bytes: every frame decoder of `messages` and
//! the value codecs of `Codecs`, fed valid, random, mutated, truncated and
//! huge-length frames. Each decode returns `Ok` or a typed `Err`, never
//! panics, and its largest single allocation stays within what the caps
//! allow for a frame of its size (measured by the global allocator below,
//! per thread, so parallel tests do not see each other's allocations).
//!
//! Case counts are small so the file runs in seconds; `PROPTEST_CASES`
//! raises them.

use std::alloc::System;
use std::cell::Cell;
use std::mem::size_of;
use std::sync::Once;

use proptest::prelude::*;
use rayorch_dist::messages::{
    BatchMsg, Claim, Ctl, Hello, MAX_FRAME, MAX_ITEMS, MAX_NAME, Report, Slot, WireFailure, WireOutcome,
};
use rayorch_dist::{Codecs, DistError};
use tracking_allocator::{AllocationGroupId, AllocationRegistry, AllocationTracker, Allocator};

#[global_allocator]
static GLOBAL: Allocator<System> = Allocator::system();

thread_local! {
    /// The largest allocation request of this thread while measuring.
    static LARGEST: Cell<Option<usize>> = const { Cell::new(None) };
}

struct Largest;

impl AllocationTracker for Largest {
    fn allocated(&self, _: usize, size: usize, _: usize, _: AllocationGroupId) {
        let _ = LARGEST.try_with(|l| {
            if let Some(m) = l.get() {
                l.set(Some(m.max(size)));
            }
        });
    }
    fn deallocated(&self, _: usize, _: usize, _: usize, _: AllocationGroupId, _: AllocationGroupId) {}
}

/// `f`'s result and the largest single allocation it requested.
fn largest_allocation<T>(f: impl FnOnce() -> T) -> (T, usize) {
    static INIT: Once = Once::new();
    INIT.call_once(|| {
        let _ = AllocationRegistry::set_global_tracker(Largest);
        AllocationRegistry::enable_tracking();
    });
    LARGEST.with(|l| l.set(Some(0)));
    let out = f();
    let largest = LARGEST.with(|l| l.replace(None)).unwrap_or(0);
    (out, largest)
}

/// The most a decode of an `n`-byte frame may allocate at once: a copy of
/// its bytes (a payload, a name), or one list of items that each took at
/// least a byte of the frame, never more than `MAX_ITEMS` of them.
fn frame_bound(n: usize) -> usize {
    let item = size_of::<Slot>().max(size_of::<WireOutcome>());
    (4 * n + 1024).max((MAX_ITEMS * item).min(item * n))
}

/// Decode `b` with every frame decoder; each must be `Ok` or a
/// `DistError::Wire`, within [`frame_bound`]. Returns which decoded.
fn decode_all(b: &[u8]) -> [bool; 3] {
    let bound = frame_bound(b.len());
    let (batch, a) = largest_allocation(|| BatchMsg::decode(b));
    let (hello, h) = largest_allocation(|| Hello::decode(b));
    let (ctl, c) = largest_allocation(|| Ctl::decode(b));
    for (name, largest) in [("batch", a), ("hello", h), ("ctl", c)] {
        assert!(
            largest <= bound,
            "{name} decode of {} bytes allocated {largest} bytes at once (bound {bound})",
            b.len()
        );
    }
    for e in [batch.as_ref().err(), hello.as_ref().err(), ctl.as_ref().err()]
        .into_iter()
        .flatten()
    {
        assert!(matches!(e, DistError::Wire { .. }), "untyped error: {e:?}");
    }
    // A frame that decodes is canonical: it is what its value encodes to.
    if let Ok(m) = &batch {
        assert_eq!(m.encode(), b, "batch decoded from a non-canonical frame");
    }
    if let Ok(m) = &hello {
        assert_eq!(m.encode(), b, "hello decoded from a non-canonical frame");
    }
    if let Ok(m) = &ctl {
        assert_eq!(m.encode(), b, "control frame decoded from a non-canonical frame");
    }
    [batch.is_ok(), hello.is_ok(), ctl.is_ok()]
}

fn name() -> impl Strategy<Value = String> {
    "[a-z0-9_:<>é]{0,12}"
}

fn element() -> impl Strategy<Value = Slot> {
    prop_oneof![
        Just(Slot::None),
        (name(), proptest::collection::vec(any::<u8>(), 0..24)).prop_map(|(t, b)| Slot::Inline(t, b)),
        (name(), name(), any::<u64>()).prop_map(|(t, k, n)| Slot::Ref(t, k, n)),
    ]
}

fn slot() -> impl Strategy<Value = Slot> {
    prop_oneof![
        3 => element(),
        1 => proptest::collection::vec(element(), 0..4).prop_map(Slot::List),
    ]
}

fn batch() -> impl Strategy<Value = BatchMsg> {
    (
        any::<u64>(),
        any::<u64>(),
        any::<u32>(),
        any::<u32>(),
        proptest::collection::vec(slot(), 0..6),
        proptest::collection::vec(any::<bool>(), 0..4),
        any::<[u8; 16]>(),
    )
        .prop_map(|(ticket, run, call, arity, slots, split, key)| BatchMsg {
            ticket,
            run,
            key,
            call,
            arity,
            slots,
            split,
        })
}

fn claim() -> impl Strategy<Value = Claim> {
    (
        any::<u64>(),
        any::<u64>(),
        any::<u64>(),
        name(),
        any::<[u8; 32]>(),
        any::<[u8; 32]>(),
    )
        .prop_map(|(run, ticket, delivered, worker, seal, proof)| Claim {
            run,
            ticket,
            delivered,
            worker,
            seal,
            proof,
        })
}

fn hello() -> impl Strategy<Value = Hello> {
    (
        name(),
        name(),
        proptest::collection::vec((any::<u32>(), any::<u32>()), 0..4),
    )
        .prop_map(|(worker, fingerprint, calls)| Hello {
            worker,
            fingerprint,
            calls,
        })
}

fn outcome() -> impl Strategy<Value = WireOutcome> {
    prop_oneof![
        proptest::collection::vec(slot(), 0..4).prop_map(WireOutcome::Ok),
        (name(), prop::option::of(name())).prop_map(|(m, c)| WireOutcome::Record(m, c)),
        (name(), prop::option::of(name())).prop_map(|(m, c)| WireOutcome::Group(m, c)),
    ]
}

fn failure() -> impl Strategy<Value = WireFailure> {
    prop_oneof![
        Just(WireFailure::Failed),
        Just(WireFailure::Contract),
        Just(WireFailure::Panicked),
        Just(WireFailure::TimedOut),
    ]
}

fn ctl() -> impl Strategy<Value = Ctl> {
    prop_oneof![
        claim().prop_map(Ctl::Claim),
        hello().prop_map(Ctl::Beat),
        (
            claim(),
            proptest::collection::vec(outcome(), 0..4),
            any::<[u8; 32]>()
        )
            .prop_map(|(claim, outs, opening)| {
                Ctl::Report(Report {
                    claim,
                    opening,
                    result: Ok(outs),
                })
            }),
        (claim(), failure(), name(), any::<[u8; 32]>()).prop_map(|(claim, k, m, opening)| Ctl::Report(
            Report {
                claim,
                opening,
                result: Err((k, m)),
            }
        )),
    ]
}

/// A valid frame of any kind.
fn frame() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![batch().prop_map(|b| b.encode()), ctl().prop_map(|c| c.encode())]
}

/// Lengths and counts a hostile frame may declare.
const HUGE: [u32; 6] = [
    u32::MAX,
    u32::MAX - 3,
    1 << 31,
    MAX_ITEMS as u32 + 1,
    MAX_NAME as u32 + 1,
    MAX_FRAME as u32 + 1,
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn valid_frames_round_trip(b in batch(), c in ctl(), h in hello()) {
        prop_assert_eq!(BatchMsg::decode(&b.encode()).unwrap(), b.clone());
        prop_assert_eq!(Ctl::decode(&c.encode()).unwrap(), c.clone());
        prop_assert_eq!(Hello::decode(&h.encode()).unwrap(), h.clone());
        // Each decodes as what it is, and only as that.
        prop_assert_eq!(decode_all(&b.encode()), [true, false, false]);
        let beat = matches!(c, Ctl::Beat(_));
        prop_assert_eq!(decode_all(&c.encode()), [false, beat, true]);
    }

    #[test]
    fn random_bytes_are_refused_typed(
        b in proptest::collection::vec(any::<u8>(), 0..256),
        head in prop_oneof![Just(b'B'), Just(b'C'), Just(b'R'), Just(b'H')],
    ) {
        decode_all(&b);
        // The same bytes behind a valid kind and version reach the fields.
        let mut framed = vec![head, 3];
        framed.extend_from_slice(&b);
        decode_all(&framed);
    }

    #[test]
    fn mutated_frames_are_ok_or_refused_typed(
        f in frame(),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), 0u8..8), 1..4),
        writes in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..4),
    ) {
        let mut m = f.clone();
        for (i, bit) in flips {
            let i = i.index(m.len());
            m[i] ^= 1 << bit;
        }
        for (i, v) in writes {
            let i = i.index(m.len());
            m[i] = v;
        }
        decode_all(&m);
    }

    #[test]
    fn every_truncation_is_refused_typed(f in frame()) {
        for cut in 0..f.len() {
            prop_assert_eq!(decode_all(&f[..cut]), [false; 3], "cut at {}", cut);
        }
    }

    #[test]
    fn huge_declared_lengths_are_refused_typed(f in frame()) {
        // Every u32 position (lengths and counts among them) in turn.
        for at in 2..f.len().saturating_sub(3) {
            for huge in HUGE {
                let mut m = f.clone();
                m[at..at + 4].copy_from_slice(&huge.to_le_bytes());
                decode_all(&m);
            }
        }
    }

    #[test]
    fn codecs_refuse_bytes_typed(b in proptest::collection::vec(any::<u8>(), 0..256)) {
        let codecs = Codecs::new().json::<String>().json::<Vec<u32>>().json::<Vec<String>>().bytes();
        let tags = [
            std::any::type_name::<String>(),
            std::any::type_name::<Vec<u32>>(),
            std::any::type_name::<Vec<String>>(),
            "bytes",
            "no such tag",
        ];
        // JSON text too, so the parsers get past the first byte.
        const JSON: &[u8] = b"[]{}\",:0123456789aeflnrstu \\";
        let text: Vec<u8> = b.iter().map(|&x| JSON[x as usize % JSON.len()]).collect();
        for input in [&b, &text] {
            for tag in tags {
                let (r, largest) = largest_allocation(|| codecs.decode(tag, input));
                // A JSON list item takes ≥ 2 bytes and is ≤ 24 in memory;
                // the vector doubles.
                let bound = 24 * input.len() + 1024;
                prop_assert!(largest <= bound, "{tag}: {largest} > {bound}");
                if tag == "no such tag" {
                    prop_assert!(r.is_err());
                }
            }
        }
    }
}

/// A batch of `n` one-byte (`Slot::None`) slots.
fn none_slots(n: u32) -> Vec<u8> {
    let mut b = BatchMsg {
        ticket: 1,
        run: 1,
        key: [0; 16],
        call: 0,
        arity: 1,
        slots: vec![],
        split: vec![],
    }
    .encode();
    // kind, version, ticket, run, key, call, arity: then the slot count.
    let at = 2 + 8 + 8 + 16 + 4 + 4;
    b[at..at + 4].copy_from_slice(&n.to_le_bytes());
    b.splice(at + 4..at + 4, std::iter::repeat_n(0u8, n as usize));
    b
}

#[test]
fn a_count_over_the_item_cap_is_refused_before_the_list_grows() {
    let ok = none_slots(1000);
    assert_eq!(BatchMsg::decode(&ok).unwrap().slots.len(), 1000);
    // One byte per slot: the frame holds them all, the cap does not.
    let f = none_slots(MAX_ITEMS as u32 + 1);
    let (r, largest) = largest_allocation(|| BatchMsg::decode(&f));
    let bound = frame_bound(f.len());
    assert!(
        largest <= bound,
        "allocated {largest} bytes at once (bound {bound})"
    );
    let e = r.unwrap_err();
    assert!(
        matches!(&e, DistError::Wire { what: "batch message", cause } if cause.contains("slots") && cause.contains(&MAX_ITEMS.to_string())),
        "{e}"
    );
}

#[test]
fn a_report_with_more_outcomes_than_its_bytes_hold_is_refused() {
    let claim = Claim {
        run: 1,
        ticket: 2,
        delivered: 1,
        worker: "w".into(),
        seal: [0; 32],
        proof: [0; 32],
    };
    let mut f = Ctl::Report(Report {
        claim,
        opening: [0; 32],
        result: Ok(vec![]),
    })
    .encode();
    // The outcome count is the frame's last u32: declare one per byte of
    // 4 KiB of filler (an outcome takes at least five).
    let at = f.len() - 4;
    f[at..].copy_from_slice(&4096u32.to_le_bytes());
    f.extend(std::iter::repeat_n(1u8, 4096));
    let (r, largest) = largest_allocation(|| Ctl::decode(&f));
    assert!(largest <= 4 * f.len(), "allocated {largest} bytes at once");
    let e = r.unwrap_err();
    assert!(
        matches!(&e, DistError::Wire { cause, .. } if cause.contains("outcomes")),
        "{e}"
    );
}

#[test]
fn names_and_frames_over_their_caps_are_refused() {
    let long = Hello {
        worker: "w".repeat(MAX_NAME + 1),
        fingerprint: "f".into(),
        calls: vec![],
    };
    let e = Hello::decode(&long.encode()).unwrap_err();
    assert!(
        matches!(&e, DistError::Wire { cause, .. } if cause.contains("worker id") && cause.contains(&MAX_NAME.to_string())),
        "{e}"
    );
    let mut big = vec![0u8; MAX_FRAME + 1];
    big[0] = b'H';
    big[1] = 3;
    let (r, largest) = largest_allocation(|| Hello::decode(&big));
    assert!(largest < 1024, "a refused frame allocated {largest} bytes");
    assert!(matches!(r, Err(DistError::Wire { .. })));
}
