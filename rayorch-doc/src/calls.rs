//! Calls both document jobs make the same way.

use rayorch::Call;
use rayorch_models::{Assets, LineRecognizer, RecognizeConfig, TextLine, TextRecognize};

/// Line recognition: each replica loads PP-OCRv6 tiny rec from `assets`;
/// batches of `batch` crops from any pages and documents. `by_width`: of
/// one padded width each (the shape key), so a batch is one model call;
/// else any widths, one model call per width present.
pub fn recognize(
    assets: &Assets,
    cfg: RecognizeConfig,
    replicas: usize,
    batch: usize,
    by_width: bool,
) -> Call<TextRecognize> {
    let assets = assets.clone();
    let bucket = cfg.clone();
    let call = Call::new("recognize", move || {
        Ok(TextRecognize::new(LineRecognizer::from_assets(
            &assets,
            cfg.clone(),
        )?))
    })
    .replicas(replicas)
    .batch_size(batch);
    if by_width {
        call.shape(move |line: &TextLine| {
            u64::from(bucket.padded_width(line.crop.width(), line.crop.height()))
        })
    } else {
        call
    }
}
