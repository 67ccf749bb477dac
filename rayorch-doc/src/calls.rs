//! Calls both document jobs make the same way.

use std::sync::Arc;
use std::time::Duration;

use rayorch::{AsyncRecordStage, Call, Outcome, RecordCall, RecordResult, StageContext};
use rayorch_models::ocr::RecognizeCounts;
use rayorch_models::{Assets, LineRecognizer, PdfFile, PdfSource, RecognizeConfig, TextLine, TextRecognize};

/// The fetch Call's stage: a document named by a URL is read from object
/// storage into memory (`rayorch_kit::store::Fetch`: one GET, the store
/// client's retries on 5xx, 429, SlowDown and cut connections); a local
/// file passes through untouched (the open stage reads it). A missing
/// object, or one the credentials may not read, fails its document at once
/// with the URL in the cause; any other error is retried within the Call's
/// record budget.
pub struct FetchPdf {
    #[cfg(feature = "store")]
    fetch: Arc<rayorch_kit::store::Fetch>,
}

impl FetchPdf {
    /// The stage, with store clients configured from the environment
    /// (`AWS_*`, `AWS_ENDPOINT_URL`, `GOOGLE_*`, `AZURE_*`).
    pub fn new() -> FetchPdf {
        FetchPdf {
            #[cfg(feature = "store")]
            fetch: Arc::new(rayorch_kit::store::Fetch::new(rayorch_kit::store::Stores::new(
                rayorch_kit::store::StoreOptions::default(),
            ))),
        }
    }
}

impl Default for FetchPdf {
    fn default() -> FetchPdf {
        FetchPdf::new()
    }
}

impl AsyncRecordStage for FetchPdf {
    type In = PdfFile;
    type Out = PdfFile;

    async fn run_one(self: Arc<Self>, file: PdfFile, cx: StageContext) -> RecordResult<PdfFile> {
        let url = match &file.source {
            PdfSource::Url(url) => url,
            // An input list's row that names no document.
            PdfSource::Invalid(why) => {
                return Ok(Outcome::RecordFailure(
                    rayorch::Cause::new(why.to_string()).with_code("input.bad_row"),
                ));
            }
            _ => return Ok(Outcome::Ok(file)),
        };
        #[cfg(feature = "store")]
        {
            let object = rayorch_kit::store::Object::new(url.clone());
            let got = rayorch_kit::store::Fetch::run_one(self.fetch.clone(), object, cx).await?;
            Ok(got.map(|f| PdfFile::fetched(file.name.clone(), f.url, &f.bytes[..])))
        }
        #[cfg(not(feature = "store"))]
        {
            let _ = (self, cx);
            Ok(Outcome::RecordFailure(rayorch::Cause::new(format!(
                "{url}: this binary was built without object-storage inputs (the `store` feature)"
            ))))
        }
    }
}

/// The fetch Call: up to `concurrency` objects in flight, each attempt
/// bounded by `timeout`, a failed object retried twice.
pub fn fetch(concurrency: usize, timeout: Duration) -> RecordCall<FetchPdf> {
    Call::new_async_records("fetch", || Ok(FetchPdf::new()))
        .batch_size(concurrency)
        .concurrency(concurrency)
        .record_timeout(timeout)
        .record_retries(2)
}

/// Line recognition: each replica loads PP-OCRv6 tiny rec from `assets`;
/// batches of `batch` crops from any pages and documents. `by_width`: of
/// one padded width each (the shape key), so a batch is one model call;
/// else any widths, one model call per width present. Every replica adds
/// its model calls and columns (padding included) to `counts`.
pub fn recognize(
    assets: &Assets,
    cfg: RecognizeConfig,
    replicas: usize,
    batch: usize,
    by_width: bool,
    counts: &Arc<RecognizeCounts>,
) -> Call<TextRecognize> {
    let assets = assets.clone();
    let bucket = cfg.clone();
    let counts = counts.clone();
    let call = Call::new("recognize", move || {
        Ok(TextRecognize::new(LineRecognizer::from_assets(&assets, cfg.clone())?).counting(counts.clone()))
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
