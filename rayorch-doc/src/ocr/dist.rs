//! The job over NATS JetStream: one owner process (admission, lineage,
//! outputs, journal) and any number of worker processes running the models,
//! all the same binary with the same flags (see the README, "Several
//! machines").
//!
//! Every value a Call takes or returns travels in `rayorch_models::wire`'s
//! byte formats (pixels raw, floats as bits; the [`Document`]'s is in this
//! crate), so a document's output is the same as in one process: the
//! workers run the same stages on the same bytes. Page handles travel as their file's path and page number; the
//! worker opens the file itself, so workers must see the inputs at the same
//! paths (the owner passes absolute ones).

use std::any::Any;
use std::path::PathBuf;
use std::sync::Arc;

use rayorch::spi::Value;
use rayorch_dist::{Codecs, DistConfig};
use rayorch_models::wire::Wire;
use rayorch_models::{
    LineText, PageImage, PageText, PdfFile, PdfPage, PdfPages, PdfSource, ReadPage, TextLine,
};

use super::cli::Args;
use crate::document::Document;

/// The codecs of every value that crosses between the owner and the workers.
pub fn codecs() -> Codecs {
    fn add<T: Wire + Any + Send + Sync>(c: Codecs) -> Codecs {
        c.custom::<T>(T::TAG, T::to_wire, T::from_wire)
    }
    let c = add::<PdfFile>(Codecs::new());
    let c = add::<PdfPages>(c);
    let c = add::<PdfPage>(c);
    let c = add::<PageImage>(c);
    let c = add::<ReadPage>(c);
    let c = add::<PageText>(c);
    let c = add::<Vec<PageText>>(c);
    let c = add::<Vec<TextLine>>(c);
    let c = add::<TextLine>(c);
    let c = add::<LineText>(c);
    let c = add::<Vec<LineText>>(c);
    let c = add::<String>(c);
    let c = add::<Vec<String>>(c);
    let c = add::<Vec<f32>>(c);
    let c = add::<Vec<Vec<f32>>>(c);
    add::<Document>(c)
}

/// The broker settings of a run with these flags.
pub(super) fn config(args: &Args, url: &str) -> DistConfig {
    let mut cfg = DistConfig::new(url, args.dist.job_name("doc_ocr"));
    cfg.window = args.window;
    cfg.window_children = args.window_pages;
    cfg.backpressure = Some(args.backpressure);
    cfg
}

/// The documents as the owner sends them: named as given (so outputs match
/// a local run), read from absolute paths (so workers elsewhere find them).
pub(super) fn sources(files: &[PathBuf]) -> Vec<(u64, Value)> {
    files
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let mut f = PdfFile::from_path(p);
            if let Ok(abs) = std::path::absolute(p) {
                f.source = PdfSource::Path(abs);
            }
            (i as u64, Arc::new(f) as Value)
        })
        .collect()
}
