//! Decoders that never trust bytes: every `wire` decoder fed valid, random,
//! mutated, truncated and huge-length encodings. Each decode returns `Ok` or
//! an `Err` naming what it read, never panics, and its largest single
//! allocation stays within a small multiple of its input (measured by the
//! global allocator below, per thread, so parallel tests do not see each
//! other's allocations). A value that decodes is canonical (it encodes back
//! to the same bytes) and its images hold exactly width × height × 3 bytes.
//!
//! Case counts are small so the file runs in seconds; `PROPTEST_CASES`
//! raises them.

use std::alloc::System;
use std::cell::Cell;
use std::sync::{Arc, Once};

use image::RgbImage;
use proptest::prelude::*;
use rayorch_models::LineText;
use rayorch_models::PageImage;
#[cfg(feature = "ocr")]
use rayorch_models::TextLine;
use rayorch_models::wire::{MAX_IMAGE_PIXELS, Wire};
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

/// The most a decode of `n` bytes may allocate at once: a list whose items
/// each took at least 8 bytes and are at most 24 in memory, doubled as it
/// grows; a copy of the bytes; a list's first few items.
fn bound(n: usize) -> usize {
    8 * n + 1024
}

fn check_image(what: &str, im: &RgbImage) {
    let (w, h) = im.dimensions();
    assert_eq!(
        im.as_raw().len() as u64,
        u64::from(w) * u64::from(h) * 3,
        "{what}: a {w}×{h} image decoded with a buffer of another size"
    );
    assert!(u64::from(w) * u64::from(h) <= MAX_IMAGE_PIXELS);
}

/// Decode `b` as `T`: `Ok` only for a canonical encoding, within [`bound`].
fn decode_as<T: Wire>(b: &[u8]) -> Option<T> {
    let (r, largest) = largest_allocation(|| T::from_wire(b));
    let limit = bound(b.len());
    assert!(
        largest <= limit,
        "{}: a decode of {} bytes allocated {largest} bytes at once (bound {limit})",
        T::TAG,
        b.len()
    );
    match r {
        Ok(v) => {
            assert_eq!(
                v.to_wire(),
                b,
                "{}: decoded from a non-canonical encoding",
                T::TAG
            );
            Some(v)
        }
        Err(e) => {
            assert!(!e.is_empty(), "{}: an error that says nothing", T::TAG);
            None
        }
    }
}

/// Decode `b` with every decoder; how many accepted it.
fn decode_all(b: &[u8]) -> usize {
    let mut ok = 0;
    ok += usize::from(decode_as::<String>(b).is_some());
    ok += usize::from(decode_as::<Vec<f32>>(b).is_some());
    ok += usize::from(decode_as::<Vec<String>>(b).is_some());
    ok += usize::from(decode_as::<Vec<Vec<f32>>>(b).is_some());
    if let Some(p) = decode_as::<PageImage>(b) {
        check_image("page image", &p.image);
        ok += 1;
    }
    #[cfg(feature = "ocr")]
    {
        if let Some(l) = decode_as::<TextLine>(b) {
            check_image("line crop", &l.crop);
            ok += 1;
        }
        if let Some(ls) = decode_as::<Vec<TextLine>>(b) {
            ls.iter().for_each(|l| check_image("line crop", &l.crop));
            ok += 1;
        }
    }
    ok += usize::from(decode_as::<LineText>(b).is_some());
    ok += usize::from(decode_as::<Vec<LineText>>(b).is_some());
    #[cfg(feature = "pdf")]
    {
        // Only the document's source: a page handle opens its document.
        ok += usize::from(decode_as::<rayorch_models::pdf::PdfFile>(b).is_some());
        if let Some(p) = decode_as::<rayorch_models::ReadPage>(b) {
            if let Some(im) = &p.image {
                check_image("read page", &im.image);
            }
            ok += 1;
        }
        ok += usize::from(decode_as::<rayorch_models::PageText>(b).is_some());
        ok += usize::from(decode_as::<Vec<rayorch_models::PageText>>(b).is_some());
    }
    ok
}

fn text() -> impl Strategy<Value = String> {
    "[a-zé ]{0,10}"
}

fn floats() -> impl Strategy<Value = Vec<f32>> {
    proptest::collection::vec(any::<u32>().prop_map(f32::from_bits), 0..6)
}

fn image() -> impl Strategy<Value = RgbImage> {
    (0u32..5, 0u32..5).prop_flat_map(|(w, h)| {
        proptest::collection::vec(any::<u8>(), (w * h * 3) as usize)
            .prop_map(move |raw| RgbImage::from_raw(w, h, raw).unwrap())
    })
}

fn page_image() -> impl Strategy<Value = PageImage> {
    (text(), any::<u32>(), any::<u32>(), image()).prop_map(|(doc, page, dpi, im)| PageImage {
        doc: doc.into(),
        page: page as usize,
        dpi: f32::from_bits(dpi),
        image: Arc::new(im),
    })
}

#[cfg(feature = "ocr")]
fn text_line() -> impl Strategy<Value = TextLine> {
    (
        text(),
        any::<u32>(),
        any::<u32>(),
        any::<[u32; 4]>(),
        any::<u32>(),
        image(),
        any::<bool>(),
    )
        .prop_map(|(doc, page, row, bbox, score, crop, flipped)| TextLine {
            doc: doc.into(),
            page: page as usize,
            row: row as usize,
            bbox,
            score: f32::from_bits(score),
            crop: Arc::new(crop),
            flipped,
        })
}

fn line_text() -> impl Strategy<Value = LineText> {
    (
        text(),
        any::<u32>(),
        any::<bool>(),
        any::<u32>(),
        any::<[u32; 4]>(),
    )
        .prop_map(|(text, confidence, low_confidence, row, bbox)| LineText {
            text,
            confidence: f32::from_bits(confidence),
            low_confidence,
            row: row as usize,
            bbox,
        })
}

#[cfg(feature = "pdf")]
fn verdict() -> impl Strategy<Value = rayorch_models::pdf::text::Verdict> {
    use rayorch_models::pdf::text::Verdict;
    prop_oneof![
        Just(Verdict::Trusted),
        Just(Verdict::Forced),
        Just(Verdict::NoLayer),
        Just(Verdict::Unreadable),
        any::<u32>().prop_map(|percent| Verdict::Unmapped { percent }),
        any::<u32>().prop_map(|percent| Verdict::Garbage { percent }),
        any::<u32>().prop_map(|percent| Verdict::SpacedOut { percent }),
        any::<u32>().prop_map(|percent| Verdict::Scrambled { percent }),
        any::<u32>().prop_map(|percent| Verdict::TextInImages { percent }),
        any::<u32>().prop_map(|percent| Verdict::Disagrees { percent }),
        any::<u32>().prop_map(|percent| Verdict::Verified { percent }),
    ]
}

#[cfg(feature = "pdf")]
fn page_text_value() -> impl Strategy<Value = rayorch_models::PageText> {
    (text(), verdict()).prop_map(|(text, verdict)| rayorch_models::PageText {
        text,
        source: verdict.source(),
        verdict,
    })
}

#[cfg(feature = "pdf")]
fn read_page() -> impl Strategy<Value = rayorch_models::ReadPage> {
    (
        text(),
        any::<u32>(),
        verdict(),
        proptest::collection::vec(line_text(), 0..3),
        proptest::option::of(page_image()),
        any::<bool>(),
    )
        .prop_map(
            |(doc, page, verdict, layer, image, verify)| rayorch_models::ReadPage {
                doc: doc.into(),
                page: page as usize,
                verdict,
                layer: Arc::new(layer),
                image,
                verify,
            },
        )
}

/// A valid encoding of any wire type.
fn frame() -> BoxedStrategy<Vec<u8>> {
    let mut s = prop_oneof![
        text().prop_map(|t| t.to_wire()),
        floats().prop_map(|f| f.to_wire()),
        proptest::collection::vec(text(), 0..4).prop_map(|v| v.to_wire()),
        proptest::collection::vec(floats(), 0..3).prop_map(|v| v.to_wire()),
        page_image().prop_map(|p| p.to_wire()),
    ]
    .boxed();
    #[cfg(feature = "ocr")]
    {
        s = prop_oneof![
            s,
            text_line().prop_map(|l| l.to_wire()),
            proptest::collection::vec(text_line(), 0..3).prop_map(|v| v.to_wire()),
        ]
        .boxed();
    }
    s = prop_oneof![
        s,
        proptest::collection::vec(line_text(), 0..3).prop_map(|v| v.to_wire()),
    ]
    .boxed();
    #[cfg(feature = "pdf")]
    {
        use rayorch_models::pdf::PdfFile;
        s = prop_oneof![
            s,
            (text(), text()).prop_map(|(n, p)| {
                PdfFile {
                    name: n.into(),
                    ..PdfFile::from_path(format!("/{p}.pdf"))
                }
                .to_wire()
            }),
            (text(), proptest::collection::vec(any::<u8>(), 0..16))
                .prop_map(|(n, b)| PdfFile::from_bytes(n, b).to_wire()),
            read_page().prop_map(|p| p.to_wire()),
            page_text_value().prop_map(|p| p.to_wire()),
            proptest::collection::vec(page_text_value(), 0..3).prop_map(|v| v.to_wire()),
        ]
        .boxed();
    }
    s
}

/// Lengths, counts and dimensions a hostile encoding may declare.
const HUGE: [u64; 6] = [
    u64::MAX,
    u64::MAX - 7,
    1 << 63,
    u32::MAX as u64,
    (u32::MAX as u64) << 32 | u32::MAX as u64 >> 1,
    MAX_IMAGE_PIXELS + 1,
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn valid_values_round_trip(f in frame()) {
        prop_assert!(decode_all(&f) >= 1, "no decoder took a valid encoding");
    }

    #[test]
    fn random_bytes_are_refused_or_canonical(b in proptest::collection::vec(any::<u8>(), 0..192)) {
        decode_all(&b);
    }

    #[test]
    fn mutated_encodings_are_refused_or_canonical(
        f in frame(),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), 0u8..8), 1..4),
        writes in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..4),
    ) {
        let mut m = f.clone();
        if !m.is_empty() {
            for (i, bit) in flips {
                let i = i.index(m.len());
                m[i] ^= 1 << bit;
            }
            for (i, v) in writes {
                let i = i.index(m.len());
                m[i] = v;
            }
        }
        decode_all(&m);
    }

    #[test]
    fn every_truncation_is_refused_or_canonical(f in frame()) {
        for cut in 0..f.len() {
            decode_all(&f[..cut]);
        }
    }

    #[test]
    fn huge_declared_lengths_are_refused(f in frame()) {
        // Every u64 (lengths, counts) and u32 (dimensions) position in turn.
        for at in 0..f.len() {
            for huge in HUGE {
                let mut m = f.clone();
                if at + 8 <= m.len() {
                    m[at..at + 8].copy_from_slice(&huge.to_le_bytes());
                    decode_all(&m);
                }
                if at + 4 <= m.len() {
                    let mut m = f.clone();
                    m[at..at + 4].copy_from_slice(&(huge as u32).to_le_bytes());
                    decode_all(&m);
                }
            }
        }
    }
}

fn page(w: u32, h: u32, raw: Vec<u8>) -> Vec<u8> {
    let mut b = Vec::new();
    rayorch_models::wire::put_bytes(&mut b, b"d");
    rayorch_models::wire::put_u64(&mut b, 0);
    b.extend_from_slice(&72f32.to_bits().to_le_bytes());
    b.extend_from_slice(&w.to_le_bytes());
    b.extend_from_slice(&h.to_le_bytes());
    rayorch_models::wire::put_bytes(&mut b, &raw);
    b
}

#[test]
fn image_dimensions_must_match_their_pixels() {
    assert!(PageImage::from_wire(&page(2, 1, vec![7; 6])).is_ok());
    // More bytes than 2×1 RGB, or a zero side with pixels behind it.
    for (w, h, n) in [(2, 1, 9), (0, 5, 3), (1, 1, 2)] {
        let e = PageImage::from_wire(&page(w, h, vec![7; n])).unwrap_err();
        assert!(e.contains(&format!("{w}×{h}")), "{e}");
    }
    // u32::MAX × u32::MAX: refused on the declared size alone.
    let (r, largest) = largest_allocation(|| PageImage::from_wire(&page(u32::MAX, u32::MAX, vec![0; 3])));
    let e = r.unwrap_err();
    assert!(
        e.contains("at most") && e.contains(&MAX_IMAGE_PIXELS.to_string()),
        "{e}"
    );
    assert!(largest < 1024, "allocated {largest} bytes at once");
}
