//! Calls both document jobs make the same way.

use rayorch::Call;
use rayorch_models::{Assets, LineRecognizer, RecognizeConfig, TextLine, TextRecognize};

/// Line recognition: each replica loads PP-OCRv6 tiny rec from `assets`;
/// batches of `batch` crops from any pages and documents, of one padded
/// width each (the shape key), so a batch is one model call.
pub fn recognize(
    assets: &Assets,
    cfg: RecognizeConfig,
    replicas: usize,
    batch: usize,
) -> Call<TextRecognize> {
    let assets = assets.clone();
    let bucket = cfg.clone();
    Call::new("recognize", move || {
        Ok(TextRecognize::new(LineRecognizer::from_assets(
            &assets,
            cfg.clone(),
        )?))
    })
    .replicas(replicas)
    .batch_size(batch)
    .shape(move |line: &TextLine| u64::from(bucket.padded_width(line.crop.width(), line.crop.height())))
}
