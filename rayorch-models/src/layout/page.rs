//! The values that flow through the layout family: a page on its way to
//! layout ([`LayoutPage`]), its regions ([`Region`]) and what a finished
//! page records about itself ([`PageInfo`], [`TextSource`]).

use std::sync::Arc;

use image::RgbImage;
use serde::{Deserialize, Serialize};

use super::detect::{LayoutBox, RegionKind};
use super::{leftover, upright};
use crate::image::{PageImage, crop};
use crate::ocr::LineText;
pub use crate::pdf::text::TextSource;
use crate::pdf::text::{Glyph, Verdict, layer_lines};
use upright::Orientation;

/// A rendered page on its way to layout, with its text layer when usable.
#[derive(Clone, Debug)]
pub struct LayoutPage {
    /// The pixels.
    pub image: PageImage,
    /// The page's text layer in page pixels; `None` when OCR reads the page
    /// (no usable layer, or OCR forced).
    pub glyphs: Option<Arc<Vec<Glyph>>>,
    /// Why the page's text comes from where it does.
    pub verdict: Verdict,
    /// What was done to bring `image` upright (nothing until
    /// [`upright::PageUpright`] has seen the page).
    pub orientation: Orientation,
    /// Text-line boxes of an OCR page in `image`'s pixels, found by the
    /// upright pass (`None` before it, and for text-layer pages): what
    /// [`leftover`] reads when the layout model misses text.
    pub lines: Option<Arc<Vec<[f32; 4]>>>,
}

impl LayoutPage {
    /// Where the page's text comes from.
    pub fn text_source(&self) -> TextSource {
        if self.glyphs.is_some() {
            TextSource::Layer
        } else {
            TextSource::Ocr
        }
    }

    /// What the finished page records about itself.
    pub fn info(&self) -> PageInfo {
        PageInfo {
            page: self.image.page,
            text_source: self.text_source(),
            verdict: self.verdict,
            orientation: self.orientation,
            vertical: self
                .glyphs
                .as_deref()
                .is_some_and(|g| crate::pdf::text::mostly_vertical(g)),
        }
    }
}

/// A page's number, text source and orientation: what its finished record
/// needs from the rendered page.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct PageInfo {
    /// Zero-based page number.
    pub page: usize,
    /// Where the page's text came from.
    pub text_source: TextSource,
    /// Why (the text-layer checks' verdict).
    pub verdict: Verdict,
    /// What was done to bring the page upright.
    pub orientation: Orientation,
    /// Whether most of its text layer is set in vertical columns
    /// (`pdf::text::mostly_vertical`): its regions are read right to left.
    #[serde(default)]
    pub vertical: bool,
}

/// One region of a page, flowing from layout to its per-kind handling.
#[derive(Clone, Debug)]
pub struct Region {
    /// The document's name.
    pub doc: Arc<str>,
    /// Zero-based page number.
    pub page: usize,
    /// The page's size in pixels.
    pub page_size: (u32, u32),
    /// Index of the region on its page (detection order).
    pub index: usize,
    /// The class.
    pub kind: RegionKind,
    /// Layout score.
    pub score: f32,
    /// `[x0, y0, x1, y1]` in page pixels.
    pub bbox: [u32; 4],
    /// The region's pixels (with a small margin), for OCR and table structure.
    pub crop: Arc<RgbImage>,
    /// Where `crop` starts in page pixels.
    pub crop_origin: (u32, u32),
    /// The text-layer lines inside the region, when the page has a usable layer.
    pub layer: Option<Vec<LineText>>,
}

impl Region {
    /// Does this region go through line detection and recognition? Every
    /// region of a page without a text layer does, figures included: text
    /// drawn inside a figure (a form, a chart's labels, a table drawn as an
    /// image) is kept as the figure's text, never dropped.
    pub fn needs_ocr(&self) -> bool {
        self.layer.is_none()
    }
}

/// Margin around a region's crop: layout boxes hug the ink, and detection
/// needs a little background around each line.
const CROP_MARGIN: u32 = 8;

/// Turn one page's layout boxes into [`Region`]s (with text-layer lines when
/// the page has a layer), grown over the lines they cut short and followed
/// by leftover text regions for lines no box covers ([`leftover`]).
pub fn regions_of(page: &LayoutPage, boxes: Vec<LayoutBox>) -> Vec<Region> {
    let img = &page.image.image;
    leftover::complete(page, boxes)
        .into_iter()
        .enumerate()
        .map(|(index, b)| {
            let bbox = [
                b.bbox[0].floor() as u32,
                b.bbox[1].floor() as u32,
                (b.bbox[2].ceil() as u32).min(img.width()),
                (b.bbox[3].ceil() as u32).min(img.height()),
            ];
            let outer = [
                bbox[0].saturating_sub(CROP_MARGIN),
                bbox[1].saturating_sub(CROP_MARGIN),
                (bbox[2] + CROP_MARGIN).min(img.width()),
                (bbox[3] + CROP_MARGIN).min(img.height()),
            ];
            let layer = page.glyphs.as_ref().map(|g| {
                layer_lines(
                    g,
                    [bbox[0] as f32, bbox[1] as f32, bbox[2] as f32, bbox[3] as f32],
                )
            });
            Region {
                doc: page.image.doc.clone(),
                page: page.image.page,
                page_size: (img.width(), img.height()),
                index,
                kind: b.kind,
                score: b.score,
                bbox,
                crop: Arc::new(crop(img, outer)),
                crop_origin: (outer[0], outer[1]),
                layer,
            }
        })
        .collect()
}
