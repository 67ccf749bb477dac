//! The OCR family (feature `ocr`): page images in, text lines out, with
//! PP-OCRv6 tiny on ONNX Runtime.
//!
//! | module | what |
//! | --- | --- |
//! | [`detect`] | [`TextDetect`]: a page → its [`TextLine`]s in reading order (DB model, line crops that follow the text, page turn) |
//! | [`db`] | DB post-processing: probability map → rotated boxes in reading order |
//! | [`geometry`] | hulls, minimum-area rectangles, unclip, rotated crops |
//! | [`orient`] | the line-orientation classifier and the page's quarter turn |
//! | [`recognize`] | [`TextRecognize`]: a line crop → its [`LineText`] (CTC; crops of many pages per batch) |
//!
//! Its values ([`TextLine`], [`LineText`], [`page_text`]) are the crate's
//! [`lines`](crate::lines), shared with the PDF text layer.

pub mod db;
pub mod detect;
pub mod geometry;
pub mod orient;
pub mod recognize;

pub use crate::lines::{LineText, TextLine, page_text};
pub use db::{DbParams, TextBox, db_boxes, skew_deg};
#[cfg(feature = "pdf")]
pub use detect::PageDetect;
pub use detect::{DetectConfig, PageLines, TextDetect, TextDetector};
pub use orient::{LineOrientation, is_tall, page_turn, turn};
pub use recognize::{
    CharDict, LineRecognizer, RecognizeConfig, RecognizeCounts, RecognizeFigures, TextRecognize, ctc_greedy,
    padded_width,
};
