//! Pages upright before layout: a page scanned sideways, upside down or a
//! few degrees off is turned and deskewed before the layout model sees it
//! (the model was trained on upright pages, and its regions are upright
//! boxes).
//!
//! Invariants:
//! - Only pages read by OCR are looked at (no usable text layer, or OCR
//!   forced). A page with a text layer keeps its pixels, so the glyph
//!   positions of its layer stay valid.
//! - The quarter turn and the skew come from one cheap line-detection pass
//!   at low resolution (`detect.max_side`) with the PP-OCR line-orientation
//!   classifier: [`crate::TextDetector::detect_lines`] decides the turn from
//!   the line boxes and the classifier ([`crate::ocr::page_turn`]); the skew is
//!   the median angle of the long lines on the turned page.
//! - Quarter turns are exact. Deskewing rotates about the centre onto a
//!   canvas of the same size, filled with the paper colour, so a deskewed
//!   page keeps its size and, up to the skew, its coordinates.
//! - The pass's line boxes are kept with the page (in the upright page's
//!   pixels), so text the layout model misses can still be read
//!   ([`crate::layout::leftover`]).
//! - Skews under `min_skew_deg` are left alone (resampling would only blur
//!   the glyphs); skews over `max_skew_deg` are not trusted (a page of
//!   slanted art, not a slanted scan) and left alone too.

use std::sync::Arc;

use image::{Rgb, RgbImage};
use rayorch::{Outcome, Stage, StageContext, StageResult};
use serde::{Deserialize, Serialize};

use crate::assets::Assets;
use crate::error::ModelError;
use crate::layout::LayoutPage;
use crate::ocr::detect::{DetectConfig, TextDetector};
use crate::ocr::geometry::rotate_image_within;
use crate::ocr::orient::turn;

/// What was undone to bring a page upright.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Orientation {
    /// Clockwise quarter turn applied (0, 90, 180 or 270 degrees).
    pub turn: u32,
    /// The skew found after the turn, in degrees (positive = clockwise);
    /// the page was rotated back by it when `deskewed`.
    pub skew_deg: f32,
    /// Was the page rotated back by `skew_deg`?
    pub deskewed: bool,
}

/// How pages are brought upright.
#[derive(Clone, Debug, PartialEq)]
pub struct UprightConfig {
    /// The detection pass (its `max_side` sets the resolution; `orientation`
    /// must be on for quarter turns to be found).
    pub detect: DetectConfig,
    /// Smaller skews are left alone.
    pub min_skew_deg: f32,
    /// Larger skews are not trusted and left alone.
    pub max_skew_deg: f32,
}

impl Default for UprightConfig {
    fn default() -> Self {
        UprightConfig {
            detect: DetectConfig {
                // Lines of body text (11 pt) stay 8–10 px high at 150 dpi:
                // enough for boxes and their angles, at ~60% of the pixels
                // of a 960 pass.
                max_side: 736,
                orientation: true,
                ..DetectConfig::default()
            },
            min_skew_deg: 0.2,
            max_skew_deg: 10.0,
        }
    }
}

/// The colour of the paper: the per-channel median of the image's border
/// pixels (white for a digital page, grey for a scan).
pub fn paper_colour(img: &RgbImage) -> Rgb<u8> {
    let (w, h) = img.dimensions();
    if w == 0 || h == 0 {
        return Rgb([255; 3]);
    }
    let mut px: Vec<[u8; 3]> = Vec::new();
    let step = |n: u32| (n / 64).max(1) as usize;
    for x in (0..w).step_by(step(w)) {
        px.push(img.get_pixel(x, 0).0);
        px.push(img.get_pixel(x, h - 1).0);
    }
    for y in (0..h).step_by(step(h)) {
        px.push(img.get_pixel(0, y).0);
        px.push(img.get_pixel(w - 1, y).0);
    }
    let mut out = [0u8; 3];
    for (c, o) in out.iter_mut().enumerate() {
        let mut v: Vec<u8> = px.iter().map(|p| p[c]).collect();
        v.sort_unstable();
        *o = v[v.len() / 2];
    }
    Rgb(out)
}

/// `img` turned clockwise by `o.turn`, then rotated back by `o.skew_deg`
/// when `o.deskewed`.
pub fn apply(img: &RgbImage, o: &Orientation) -> RgbImage {
    let turned = turn(img, o.turn);
    if o.deskewed {
        rotate_image_within(&turned, -o.skew_deg, paper_colour(&turned))
    } else {
        turned
    }
}

/// The axis-aligned bounds, on the deskewed page, of `quad` (corners on
/// the turned page of size `w × h`): deskewing rotates by `-skew_deg` about
/// the centre, so each corner does too.
fn upright_bounds(quad: &[[f32; 2]; 4], o: &Orientation, (w, h): (f32, f32)) -> [f32; 4] {
    let (s, c) = if o.deskewed {
        (-o.skew_deg).to_radians().sin_cos()
    } else {
        (0.0, 1.0)
    };
    let (cx, cy) = (w / 2.0, h / 2.0);
    let mut b = [f32::MAX, f32::MAX, f32::MIN, f32::MIN];
    for [x, y] in quad {
        let (dx, dy) = (x - cx, y - cy);
        let (px, py) = (c * dx - s * dy + cx, s * dx + c * dy + cy);
        b = [b[0].min(px), b[1].min(py), b[2].max(px), b[3].max(py)];
    }
    [b[0].max(0.0), b[1].max(0.0), b[2].min(w), b[3].min(h)]
}

/// Finds each OCR page's turn and skew and undoes them.
#[derive(Debug)]
pub struct PageUpright {
    det: TextDetector,
    cfg: UprightConfig,
}

impl PageUpright {
    /// With a loaded detector (with the orientation classifier, else only
    /// skew is found).
    pub fn new(det: TextDetector, cfg: UprightConfig) -> PageUpright {
        PageUpright { det, cfg }
    }

    /// Load the bundled detector and orientation classifier.
    pub fn from_assets(a: &Assets, cfg: UprightConfig) -> Result<PageUpright, ModelError> {
        Ok(PageUpright::new(
            TextDetector::from_assets(a, cfg.detect.clone())?,
            cfg,
        ))
    }

    /// What would bring each page upright, and its text-line boxes on the
    /// upright page (pages with a text layer: nothing, no lines).
    #[expect(
        clippy::type_complexity,
        reason = "one (turn, lines) pair per page: a named type would be used once"
    )]
    pub fn find(
        &mut self,
        pages: &[&LayoutPage],
    ) -> Result<Vec<(Orientation, Option<Vec<[f32; 4]>>)>, ModelError> {
        let ocr: Vec<usize> = (0..pages.len()).filter(|&i| pages[i].glyphs.is_none()).collect();
        let images: Vec<&RgbImage> = ocr.iter().map(|&i| &*pages[i].image.image).collect();
        let mut out = vec![(Orientation::default(), None); pages.len()];
        for (&i, found) in ocr.iter().zip(self.det.detect_lines(&images)?) {
            let s = found.skew_deg;
            let o = Orientation {
                turn: found.turn,
                skew_deg: s,
                deskewed: s.is_finite()
                    && s.abs() >= self.cfg.min_skew_deg
                    && s.abs() <= self.cfg.max_skew_deg,
            };
            let (w, h) = pages[i].image.image.dimensions();
            let (w, h) = if o.turn % 180 == 90 { (h, w) } else { (w, h) };
            let boxes = found
                .lines
                .iter()
                .map(|(b, _)| upright_bounds(&b.rect.quad(), &o, (w as f32, h as f32)))
                .collect();
            out[i] = (o, Some(boxes));
        }
        Ok(out)
    }

    /// The pages brought upright (their `orientation` says what was done).
    pub fn upright(&mut self, pages: Vec<LayoutPage>) -> Result<Vec<LayoutPage>, ModelError> {
        let found = self.find(&pages.iter().collect::<Vec<_>>())?;
        Ok(pages
            .into_iter()
            .zip(found)
            .map(|(mut p, (o, lines))| {
                p.lines = lines.map(Arc::new);
                if o.turn != 0 || o.deskewed {
                    let _span = tracing::debug_span!(
                        "upright",
                        doc = &*p.image.doc,
                        page = p.image.page,
                        turn = o.turn,
                        skew = o.skew_deg
                    )
                    .entered();
                    p.image.image = Arc::new(apply(&p.image.image, &o));
                }
                p.orientation = o;
                p
            })
            .collect())
    }
}

impl Stage for PageUpright {
    type In = LayoutPage;
    type Out = LayoutPage;

    fn run(&mut self, batch: Vec<LayoutPage>, _cx: &StageContext) -> StageResult<LayoutPage> {
        let _span = tracing::debug_span!("page_upright", pages = batch.len()).entered();
        Ok(self.upright(batch)?.into_iter().map(Outcome::Ok).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paper_colour_is_the_border_median() {
        let mut img = RgbImage::from_pixel(40, 30, Rgb([225, 225, 219]));
        img.put_pixel(0, 0, Rgb([0, 0, 0]));
        img.put_pixel(20, 15, Rgb([0, 0, 0]));
        assert_eq!(paper_colour(&img), Rgb([225, 225, 219]));
        assert_eq!(paper_colour(&RgbImage::new(0, 0)), Rgb([255; 3]));
    }

    #[test]
    fn apply_turns_then_deskews_keeping_the_size() {
        let img = RgbImage::from_fn(30, 20, |x, y| Rgb([(x * 8) as u8, (y * 12) as u8, 9]));
        let turned = Orientation {
            turn: 90,
            ..Orientation::default()
        };
        assert_eq!(apply(&img, &turned), image::imageops::rotate90(&img));
        let skewed = Orientation {
            turn: 0,
            skew_deg: 3.0,
            deskewed: true,
        };
        assert_eq!(apply(&img, &skewed).dimensions(), (30, 20));
        let ignored = Orientation {
            deskewed: false,
            ..skewed
        };
        assert_eq!(apply(&img, &ignored), img);
    }

    #[test]
    fn line_bounds_follow_the_deskew_rotation() {
        let line = [[10.0, 10.0], [50.0, 10.0], [50.0, 20.0], [10.0, 20.0]];
        let kept = Orientation::default();
        assert_eq!(
            upright_bounds(&line, &kept, (100.0, 100.0)),
            [10.0, 10.0, 50.0, 20.0]
        );
        // A line slanted by +10° about the centre comes back level.
        let o = Orientation {
            turn: 0,
            skew_deg: 10.0,
            deskewed: true,
        };
        let (s, c) = 10f32.to_radians().sin_cos();
        let slant = line.map(|[x, y]| {
            let (dx, dy) = (x - 50.0, y - 50.0);
            [c * dx - s * dy + 50.0, s * dx + c * dy + 50.0]
        });
        let b = upright_bounds(&slant, &o, (100.0, 100.0));
        for (got, want) in b.iter().zip([10.0, 10.0, 50.0, 20.0]) {
            assert!((got - want).abs() < 1e-3, "{b:?}");
        }
    }
}
