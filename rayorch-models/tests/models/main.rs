//! The models crate's integration tests in one binary: one compile of what
//! they share and one link instead of nine (BENCHMARKS.md, "Build"). Each
//! module needs the model families it names; `cargo test -p rayorch-models
//! --test models ocr_lines` runs one of them. (The wire decoders' tests stay
//! a binary of their own: their global allocator counts every allocation.)

#[cfg(feature = "embed")]
mod embed_reference;
#[cfg(all(feature = "pdf", feature = "dist"))]
mod fetched_pages;
#[cfg(all(feature = "pdf", feature = "ocr", feature = "layout"))]
mod figure_text;
#[cfg(feature = "layout")]
mod layout_corpus;
#[cfg(all(feature = "pdf", feature = "ocr"))]
mod ocr_lines;
#[cfg(all(feature = "pdf", feature = "ocr"))]
mod ocr_models;
#[cfg(all(feature = "pdf", feature = "ocr"))]
mod page_read;
#[cfg(feature = "pdf")]
mod render_truncated;
#[cfg(feature = "pdf")]
mod samples_committed;
#[cfg(feature = "speech")]
mod speech_models;
