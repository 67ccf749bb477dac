//! The layout family (feature `layout`, with `pdf` and `ocr`): a page in,
//! its regions read by the right model, back in reading order as Markdown.
//!
//! | module | what |
//! | --- | --- |
//! | [`regions`] | [`LayoutRender`]: a document → its pages with their text layer; [`RegionDetect`]: a region → its text lines (OCR regions only) |
//! | [`upright`] | [`upright::PageUpright`]: pages read by OCR turned upright (90/180/270°) and deskewed |
//! | [`detect`] | [`LayoutDetect`]: a page → its [`Region`]s (PicoDet CDLA; pages of many documents per call) |
//! | [`batch`] | the model edit that frees PicoDet's batch dimension |
//! | [`leftover`] | text no region covers is still read |
//! | [`table`] | [`TableStructure`]: a table region → its cells (SLANet-plus) |
//! | [`reading_order`] | regions in reading order across columns |
//! | [`markdown`] | regions, pages and documents as Markdown |
//!
//! The values between them ([`LayoutPage`], [`Region`], [`PageInfo`],
//! [`TextSource`]) are re-exported here.

pub mod batch;
pub mod detect;
pub mod leftover;
pub mod markdown;
mod page;
pub mod reading_order;
pub mod regions;
pub mod table;
pub mod upright;

pub use detect::{LayoutBox, LayoutConfig, LayoutDetect, LayoutDetector, RegionKind};
pub use page::{LayoutPage, PageInfo, Region, TextSource, regions_of};
pub use regions::{LayoutRender, RegionDetect};
pub use table::{Table, TableConfig, TableRecognizer, TableStructure};
pub use upright::Orientation;
