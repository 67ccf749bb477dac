//! Model stages for rayorch, by family, each behind a cargo feature: build
//! only the models your pipeline calls.
//!
//! | family (feature) | folder | stages | engine |
//! | --- | --- | --- | --- |
//! | PDF (`pdf`) | [`pdf`] | [`PdfOpen`]: [`PdfFile`] → [`PdfPages`] (page handles); [`PdfPageRender`]: [`PdfPage`] → [`PageImage`]; [`pdf::text`]: the text layer | hayro |
//! | OCR (`ocr`) | [`ocr`] | [`TextDetect`]: [`PageImage`] → `Vec<TextLine>` (reading order); [`TextRecognize`]: [`TextLine`] → [`LineText`] (crops of many pages per batch) | PP-OCRv6 tiny on ONNX Runtime |
//! | layout (`layout`, needs `pdf`, `ocr`) | [`layout`] | [`LayoutRender`], [`layout::upright::PageUpright`], [`LayoutDetect`]: pages → `Vec<Region>`; [`RegionDetect`]; [`TableStructure`]; reading order; Markdown | PicoDet CDLA, SLANet-plus on ONNX Runtime |
//! | embeddings (`embed`) | [`embed`] | [`SentenceEmbed`]: `String` → `Vec<f32>` (L2-normalised) | all-MiniLM-L6-v2 on candle |
//! | speech (`speech`) | [`speech`] | [`speech::Vad`] (speech spans); [`speech::WhisperStage`]: 16 kHz clip → text | silero VAD on ONNX Runtime, whisper tiny.en on candle |
//! | wire (`dist`) | [`wire`] | byte formats of these values for `rayorch::dist` | — |
//!
//! Shared by every family: [`onnx`] (sessions, devices, model edits),
//! [`assets`] (model files and the ONNX Runtime library from pinned PyPI
//! wheels, no model hub), [`image`] ([`PageImage`] and pixel plumbing),
//! [`lines`] (text lines as OCR and the text layer give them) and
//! [`ModelError`]. Every family is on by default; a pipeline that needs
//! OCR only takes `default-features = false, features = ["pdf", "ocr"]`
//! and builds neither candle nor tokenizers.
//!
//! Every stage here is a blocking [`rayorch::Stage`]: one instance per
//! replica, the model loaded once in the Call's factory, then batches.
//! Record-level problems (a corrupt PDF, an empty crop) are
//! [`rayorch::Outcome::RecordFailure`]s that name the document and what to do;
//! a stage never panics on user data.

pub mod assets;
#[cfg(any(feature = "embed", feature = "speech"))]
mod candle;
#[cfg(feature = "embed")]
pub mod embed;
mod error;
pub mod image;
#[cfg(feature = "layout")]
pub mod layout;
pub mod lines;
#[cfg(feature = "ocr")]
pub mod ocr;
pub mod onnx;
#[cfg(feature = "pdf")]
pub mod pdf;
#[cfg(feature = "speech")]
pub mod speech;
#[cfg(feature = "dist")]
pub mod wire;

pub use assets::Assets;
#[cfg(feature = "embed")]
pub use embed::{EmbedConfig, SentenceEmbed, SentenceEmbedder};
pub use error::ModelError;
pub use image::PageImage;
#[cfg(feature = "layout")]
pub use layout::{
    LayoutConfig, LayoutDetect, LayoutDetector, LayoutPage, LayoutRender, Region, RegionDetect, RegionKind,
    Table, TableConfig, TableRecognizer, TableStructure, TextSource,
};
pub use lines::{LineText, TextLine, page_text};
#[cfg(feature = "ocr")]
pub use ocr::{DetectConfig, LineRecognizer, RecognizeConfig, TextDetect, TextDetector, TextRecognize};
pub use onnx::{Device, OnnxConfig, OnnxSession};
#[cfg(feature = "pdf")]
pub use pdf::{
    PageText, PdfFile, PdfOpen, PdfPage, PdfPageRead, PdfPageRender, PdfPages, PdfSource, ReadPage,
    RenderConfig, RenderError, open_document, render_document, render_page,
};
