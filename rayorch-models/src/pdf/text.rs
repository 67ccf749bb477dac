//! The text a PDF already carries: glyphs with their Unicode values and
//! positions, read with hayro's interpreter (no rendering).
//!
//! Invariants:
//! - Positions are in the pixels of the page image rendered at the same
//!   scale (y down), so a layout box selects glyphs directly.
//! - A page's layer is *trusted* only when it passes every check of
//!   [`Verdict`] (enough mapped glyphs, no garbage or control characters,
//!   words that are not spaced out letters or scrambled, and no page-sized
//!   image carrying text the layer lacks); any other page goes through OCR,
//!   and the verdict (with its measure) is what the records give as the
//!   reason.
//! - A layer drawn invisibly over pictures that cover the page (an OCR'd
//!   scan's: it says what some OCR engine read, not what the page shows)
//!   is marked [`PageLayer::hidden`]; a reader that can OCR the page
//!   checks it against its own reading before trusting it
//!   ([`Verdict::Disagrees`]).
//! - Nothing here panics on user data: the interpreter runs under
//!   `catch_unwind`, and a failure means "no layer" (OCR still reads it).

use std::panic::{AssertUnwindSafe, catch_unwind};

use hayro::hayro_interpret::TransformExt;
use hayro::hayro_interpret::font::{Glyph as HGlyph, GlyphRun};
use hayro::hayro_interpret::hayro_cmap::BfString;
use hayro::hayro_interpret::kurbo::{Affine, BezPath, Point, Rect};
use hayro::hayro_interpret::{
    BlendMode, ClipPath, Context, Device, DrawMode, DrawProps, Image, ImageDrawProps, InterpreterCache,
    InterpreterSettings, SoftMask, interpret_page,
};
use hayro::hayro_syntax::Pdf;

use serde::{Deserialize, Serialize};

use crate::lines::LineText;

/// Where a page's text comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TextSource {
    /// The PDF's own text layer.
    Layer,
    /// Line detection and recognition on the pixels.
    Ocr,
}

/// What the text-layer checks found on a page: [`Verdict::Trusted`] sends
/// the page's text from its layer, anything else through OCR. Each check
/// that fails gives its measure, so a record says why a page was OCR'd.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "verdict")]
pub enum Verdict {
    /// Every check passed.
    Trusted,
    /// OCR was asked for (`--force-ocr`).
    Forced,
    /// Fewer than 10 visible glyphs: no text layer (a scan, text drawn as
    /// paths).
    NoLayer,
    /// More than 5% of the glyphs have no Unicode value (fonts without a
    /// mapping).
    Unmapped {
        /// Glyphs without a Unicode value, % of all.
        percent: u32,
    },
    /// More than 5% of the characters are control, private-use or
    /// replacement characters.
    Garbage {
        /// Such characters, % of all visible ones.
        percent: u32,
    },
    /// More than half the words are single letters ("H e l l o"): the
    /// layer places letters, not words.
    SpacedOut {
        /// One-letter words, % of words with letters.
        percent: u32,
    },
    /// More than a quarter of the Latin words of four letters or more have
    /// no vowel: a font whose mapping scrambles letters.
    Scrambled {
        /// Such words without a vowel, %.
        percent: u32,
    },
    /// Images cover most of the page and almost no layer text lies on
    /// them: the page's text is in its pixels (a table or a page pasted
    /// as a picture).
    TextInImages {
        /// The page area the images cover, %.
        percent: u32,
    },
    /// The PDF interpreter failed on the page.
    Unreadable,
    /// The layer passed every check above but is an OCR'd scan's invisible
    /// layer ([`PageLayer::hidden`]) that shares too few words with what OCR
    /// reads on the page: it does not say what the page shows.
    Disagrees {
        /// Word agreement of the layer with the page's OCR, % (F1 of the
        /// two bags of words; see [`crate::pdf::agreement`]).
        percent: u32,
    },
    /// An OCR'd scan's invisible layer that agrees with what OCR reads on
    /// the page: its text is the page's.
    Verified {
        /// Word agreement of the layer with the page's OCR, %.
        percent: u32,
    },
}

impl Verdict {
    /// The verdict's kind, one stable word (what records and summaries
    /// count pages by; the `Display` text adds the figures): `trusted`,
    /// `forced`, `no_layer`, `unmapped`, `garbage`, `spaced_out`,
    /// `scrambled`, `text_in_images`, `unreadable`, `disagrees` or
    /// `verified`.
    ///
    /// ```
    /// use rayorch_models::pdf::text::Verdict;
    /// assert_eq!(Verdict::Unmapped { percent: 40 }.kind(), "unmapped");
    /// assert_eq!(Verdict::Trusted.kind(), "trusted");
    /// ```
    pub fn kind(self) -> &'static str {
        match self {
            Verdict::Trusted => "trusted",
            Verdict::Forced => "forced",
            Verdict::NoLayer => "no_layer",
            Verdict::Unmapped { .. } => "unmapped",
            Verdict::Garbage { .. } => "garbage",
            Verdict::SpacedOut { .. } => "spaced_out",
            Verdict::Scrambled { .. } => "scrambled",
            Verdict::TextInImages { .. } => "text_in_images",
            Verdict::Unreadable => "unreadable",
            Verdict::Disagrees { .. } => "disagrees",
            Verdict::Verified { .. } => "verified",
        }
    }

    /// Where the page's text comes from.
    pub fn source(self) -> TextSource {
        match self {
            Verdict::Trusted | Verdict::Verified { .. } => TextSource::Layer,
            _ => TextSource::Ocr,
        }
    }
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Verdict::Trusted => write!(f, "the text layer passed every check"),
            Verdict::Forced => write!(f, "OCR forced (--force-ocr)"),
            Verdict::NoLayer => write!(f, "no text layer (fewer than 10 visible glyphs)"),
            Verdict::Unmapped { percent } => write!(f, "{percent}% of the glyphs have no Unicode value"),
            Verdict::Garbage { percent } => {
                write!(
                    f,
                    "{percent}% of the layer's characters are control or private-use characters"
                )
            }
            Verdict::SpacedOut { percent } => {
                write!(
                    f,
                    "spaced-out letters: {percent}% of the layer's words are single letters"
                )
            }
            Verdict::Scrambled { percent } => {
                write!(
                    f,
                    "scrambled text: {percent}% of the layer's long Latin words have no vowel"
                )
            }
            Verdict::TextInImages { percent } => write!(
                f,
                "images cover {percent}% of the page and carry no layer text (text in pixels)"
            ),
            Verdict::Unreadable => write!(f, "the text layer could not be read"),
            Verdict::Disagrees { percent } => write!(
                f,
                "an OCR'd scan's invisible text layer agrees with OCR on only {percent}% of the page's words"
            ),
            Verdict::Verified { percent } => write!(
                f,
                "an OCR'd scan's invisible text layer, agreeing with OCR on {percent}% of the page's words"
            ),
        }
    }
}

/// A page's text layer as read: its glyphs (kept whatever the verdict, for
/// a caller that wants them anyway) and the verdict on them.
#[derive(Clone, Debug)]
pub struct PageLayer {
    /// The glyphs in drawing order, page pixels.
    pub glyphs: Vec<Glyph>,
    /// Whether the layer is trusted, and if not why.
    pub verdict: Verdict,
    /// Most of the layer is drawn invisibly (text render mode 3) over
    /// pictures that cover most of the page: an OCR'd scan's layer, what
    /// an OCR engine read rather than what the page shows.
    pub hidden: bool,
}

impl PageLayer {
    /// The glyphs when the layer is trusted.
    pub fn trusted(self) -> Option<Vec<Glyph>> {
        (self.verdict == Verdict::Trusted).then_some(self.glyphs)
    }
}

/// One glyph of the text layer.
#[derive(Clone, Debug, PartialEq)]
pub struct Glyph {
    /// Its text (usually one character; ligatures give several).
    pub text: String,
    /// Baseline origin, page pixels.
    pub x: f32,
    /// Baseline y, page pixels.
    pub y: f32,
    /// Font size (em height), page pixels.
    pub size: f32,
    /// Advance width along the baseline, page pixels: where the next glyph
    /// would start without extra spacing (the font's width for the glyph).
    /// `None` when the font gives none (Type 3 glyphs); an estimate from
    /// the size is used then.
    pub advance: Option<f32>,
    /// The baseline's direction, a unit vector in page pixels (y down):
    /// `[1, 0]` for upright text, `[0, -1]` for text turned a quarter
    /// counter-clockwise (read bottom to top), `[-1, 0]` upside down.
    pub dir: [f32; 2],
}

/// Upright text's baseline direction ([`Glyph::dir`]).
pub const UPRIGHT: [f32; 2] = [1.0, 0.0];

impl Glyph {
    /// Where the glyph ends on its baseline, page pixels: its advance, or
    /// 0.6 em when the font gives none (wide enough for most Latin letters).
    /// Along the x axis: for a glyph of a rotated run, in the run's frame
    /// ([`Glyph::in_frame`]).
    fn end(&self) -> f32 {
        self.x + self.advance.unwrap_or(0.6 * self.size)
    }

    /// Roughly the middle of the glyph's body, page pixels: a quarter em
    /// along the baseline, 0.35 em above it.
    fn centre(&self) -> (f32, f32) {
        let [c, s] = self.dir;
        let (along, up) = (0.25 * self.size, 0.35 * self.size);
        (self.x + along * c + up * s, self.y + along * s - up * c)
    }

    /// The baseline's angle in whole degrees, in (-180, 180] (y down: -90
    /// reads bottom to top), 0 within two degrees of upright.
    fn angle(&self) -> i32 {
        match self.dir[1].atan2(self.dir[0]).to_degrees().round() as i32 {
            a if a.abs() <= 2 => 0,
            -180 => 180,
            a => a,
        }
    }

    /// This glyph in the frame of a baseline at the angle whose sine and
    /// cosine are `(s, c)`: x along the baseline, y across it (down the
    /// page for upright text), so the upright rules of [`layer_lines`]
    /// apply to a rotated run.
    fn in_frame(&self, (s, c): (f32, f32)) -> Glyph {
        Glyph {
            text: self.text.clone(),
            x: self.x * c + self.y * s,
            y: -self.x * s + self.y * c,
            size: self.size,
            advance: self.advance,
            dir: UPRIGHT,
        }
    }

    /// The gap after `prev` that reads as a word space: 0.12 em when the
    /// advance is known (word spaces are 0.2–0.33 em, kerning and tracking
    /// well under 0.1), 0.35 em past the estimated end otherwise.
    fn space_after(&self, prev: &Glyph) -> f32 {
        match prev.advance {
            Some(_) => 0.12 * self.size,
            None => 0.35 * self.size,
        }
    }
}

struct Collect {
    glyphs: Vec<Glyph>,
    unmapped: usize,
    /// Glyphs of `glyphs` drawn invisibly (text render mode 3).
    invisible: usize,
    /// Device-space bounds of every image drawn.
    images: Vec<Rect>,
}

impl<'a> Device<'a> for Collect {
    fn draw_path(&mut self, _: &BezPath, _: DrawProps<'a>, _: &DrawMode) {}
    fn push_clip_path(&mut self, _: &ClipPath) {}
    fn push_transparency_group(&mut self, _: f32, _: Option<SoftMask<'a>>, _: BlendMode) {}
    fn draw_glyph_run(&mut self, run: &GlyphRun<'_, 'a>, props: DrawProps<'a>, mode: &DrawMode) {
        let invisible = matches!(mode, DrawMode::Invisible);
        for g in run.glyphs() {
            let t = props.transform * g.transform();
            let o = t * Point::new(0.0, 0.0);
            // Glyph space has 1000 units per em (hayro_font::UNITS_PER_EM).
            let up = t * Point::new(0.0, 1000.0);
            let size = ((up.x - o.x).powi(2) + (up.y - o.y).powi(2)).sqrt() as f32;
            // Font widths are in glyph space too (1/1000 em); a Type 3
            // glyph's are in its own font matrix, so none is taken.
            let advance = match &**g as &HGlyph<'_> {
                HGlyph::Outline(o) => o.advance_width(),
                HGlyph::Type3(_) => None,
            }
            .map(|w| {
                let e = t * Point::new(w as f64, 0.0);
                ((e.x - o.x).powi(2) + (e.y - o.y).powi(2)).sqrt() as f32
            });
            let along = t * Point::new(1000.0, 0.0);
            let (dx, dy) = ((along.x - o.x) as f32, (along.y - o.y) as f32);
            let norm = dx.hypot(dy);
            let dir = if norm > 0.0 {
                [dx / norm, dy / norm]
            } else {
                UPRIGHT
            };
            let text = match (&**g as &HGlyph<'_>).as_unicode() {
                Some(BfString::Char(c)) => unligature(&c.to_string()),
                Some(BfString::String(s)) => unligature(&s),
                None => {
                    self.unmapped += 1;
                    continue;
                }
            };
            self.invisible += usize::from(invisible);
            self.glyphs.push(Glyph {
                text,
                x: o.x as f32,
                y: o.y as f32,
                size,
                advance,
                dir,
            });
        }
    }
    fn draw_image(&mut self, image: Image<'a, '_>, props: ImageDrawProps<'a>) {
        // The transform places the image's grid of pixels (hayro scales the
        // unit square a PDF draws an image into by 1/width, 1/height first).
        let grid = Rect::new(0.0, 0.0, image.width() as f64, image.height() as f64);
        self.images.push(props.transform.transform_rect_bbox(grid));
    }
    fn pop_clip(&mut self) {}
    fn pop_transparency_group(&mut self) {}
}

/// `text` with the Latin typographic ligatures spelled out ("ﬁ" → "fi",
/// U+FB00–FB06, as NFKC does): a typeset "ﬁgure" is the word "figure" to
/// whoever searches, tokenizes or embeds the text, and to an OCR of the
/// page.
///
/// ```
/// # use rayorch_models::pdf::text::unligature;
/// assert_eq!(unligature("\u{FB01}gure e\u{FB03}cient \u{FB02}ow"), "figure efficient flow");
/// assert_eq!(unligature("plain"), "plain");
/// ```
pub fn unligature(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\u{FB00}' => out.push_str("ff"),
            '\u{FB01}' => out.push_str("fi"),
            '\u{FB02}' => out.push_str("fl"),
            '\u{FB03}' => out.push_str("ffi"),
            '\u{FB04}' => out.push_str("ffl"),
            '\u{FB05}' | '\u{FB06}' => out.push_str("st"),
            c => out.push(c),
        }
    }
    out
}

/// The text layer of each page of `pdf`, positioned for a rendering at
/// `scales[i]` pixels per point (pages without a scale are skipped), with
/// the verdict on each (see [`Verdict`]).
pub fn extract(pdf: &[u8], scales: &[f32]) -> Vec<PageLayer> {
    let unreadable = || PageLayer {
        glyphs: Vec::new(),
        verdict: Verdict::Unreadable,
        hidden: false,
    };
    let run = || {
        let Ok(pdf) = Pdf::new(pdf.to_vec()) else {
            return vec![unreadable(); scales.len()];
        };
        let pages = pdf.pages();
        scales
            .iter()
            .enumerate()
            .map(|(i, &s)| pages.get(i).map_or_else(unreadable, |p| read_page(p, s)))
            .collect()
    };
    catch_unwind(AssertUnwindSafe(run)).unwrap_or_else(|_| vec![unreadable(); scales.len()])
}

/// The text layer of one parsed page at `scale` pixels per point, judged.
/// Never panics: an interpreter failure is [`Verdict::Unreadable`].
pub fn read_page(page: &hayro::hayro_syntax::page::Page<'_>, scale: f32) -> PageLayer {
    let run = || {
        let cache = InterpreterCache::new();
        let (w, h) = page.render_dimensions();
        let transform = Affine::scale(scale as f64) * page.initial_transform(true).to_kurbo();
        let area = Rect::new(0.0, 0.0, (w * scale) as f64, (h * scale) as f64);
        let mut cx = Context::new(
            transform,
            area,
            &cache,
            page.xref(),
            InterpreterSettings::default(),
        );
        let mut dev = Collect {
            glyphs: Vec::new(),
            unmapped: 0,
            invisible: 0,
            images: Vec::new(),
        };
        interpret_page(page, &mut cx, &mut dev);
        let verdict = judge(&dev, area);
        // Four glyphs in five invisible, over pictures covering most of the
        // page (the share `judge` calls a page of pictures).
        let hidden = dev.invisible * 5 >= dev.glyphs.len() * 4
            && !dev.glyphs.is_empty()
            && image_cover(&dev, area) > 0.6 * area.area().max(1.0);
        PageLayer {
            glyphs: dev.glyphs,
            verdict,
            hidden,
        }
    };
    catch_unwind(AssertUnwindSafe(run)).unwrap_or(PageLayer {
        glyphs: Vec::new(),
        verdict: Verdict::Unreadable,
        hidden: false,
    })
}

/// The checks of [`Verdict`], in its order; the first that fails decides.
fn judge(dev: &Collect, page: Rect) -> Verdict {
    let percent = |n: usize, of: usize| (100 * n / of.max(1)) as u32;
    let glyphs = &dev.glyphs;
    let visible: Vec<&Glyph> = glyphs.iter().filter(|g| !g.text.trim().is_empty()).collect();
    if visible.len() < 10 {
        return Verdict::NoLayer;
    }
    if dev.unmapped * 20 > glyphs.len() + dev.unmapped {
        return Verdict::Unmapped {
            percent: percent(dev.unmapped, glyphs.len() + dev.unmapped),
        };
    }
    let chars: Vec<char> = visible.iter().flat_map(|g| g.text.chars()).collect();
    let garbage = chars
        .iter()
        .filter(|&&c| c.is_control() || c == '\u{FFFD}' || ('\u{E000}'..='\u{F8FF}').contains(&c))
        .count();
    if garbage * 20 > chars.len() {
        return Verdict::Garbage {
            percent: percent(garbage, chars.len()),
        };
    }
    let lines = layer_lines(glyphs, [f32::MIN, f32::MIN, f32::MAX, f32::MAX]);
    let words: Vec<&str> = lines.iter().flat_map(|l| l.text.split_whitespace()).collect();
    let letters = |w: &str| w.chars().filter(|c| c.is_alphabetic()).count();
    let worded: Vec<&str> = words
        .iter()
        .copied()
        .filter(|w| letters(w) > 0 && !w.chars().any(ideograph))
        .collect();
    // A lone letter, perhaps with punctuation ("a", "I.", "(b)"): not a
    // word with one letter among digits and signs ("Y≥20000", "X<20" in a
    // table of ranges).
    let lone = |w: &str| letters(w) == 1 && w.chars().all(|c| c.is_alphabetic() || c.is_ascii_punctuation());
    let single = worded.iter().filter(|w| lone(w)).count();
    if worded.len() >= 20 && single * 2 > worded.len() {
        return Verdict::SpacedOut {
            percent: percent(single, worded.len()),
        };
    }
    let latin: Vec<&str> = words
        .iter()
        .map(|w| w.trim_matches(|c: char| !c.is_ascii_alphabetic()))
        .filter(|w| w.len() >= 4 && w.chars().all(|c| c.is_ascii_alphabetic()))
        .collect();
    let vowelless = latin
        .iter()
        .filter(|w| !w.chars().any(|c| "aeiouyAEIOUY".contains(c)))
        .count();
    if latin.len() >= 20 && vowelless * 4 > latin.len() {
        return Verdict::Scrambled {
            percent: percent(vowelless, latin.len()),
        };
    }
    let page_area = page.area().max(1.0);
    let cover = image_cover(dev, page);
    let on_images = visible
        .iter()
        .filter(|g| {
            let (x, y) = g.centre();
            dev.images
                .iter()
                .any(|r| r.contains(Point::new(x as f64, y as f64)))
        })
        .count();
    if cover > 0.6 * page_area && on_images * 20 < visible.len() {
        return Verdict::TextInImages {
            percent: (100.0 * cover / page_area) as u32,
        };
    }
    Verdict::Trusted
}

/// The page area the images drawn on it cover (overlaps counted twice, at
/// most the page's area), square pixels.
fn image_cover(dev: &Collect, page: Rect) -> f64 {
    dev.images
        .iter()
        .map(|r| r.intersect(page).area().max(0.0))
        .sum::<f64>()
        .min(page.area().max(1.0))
}

/// The lines of text-layer glyphs whose centre lies in `bbox` (page pixels),
/// top to bottom, as [`LineText`]s with confidence 1.
///
/// - **Lines**: glyphs go into runs in drawing order, a run moving forward
///   along one baseline (a glyph behind the last one, or off its baseline
///   by half a font size, starts the next); runs whose first baselines are
///   within a third of the font size share a row.
/// - **Text drawn twice** is read once: a run whose text equals an earlier
///   run's on the same row and covers the same stretch (an invisible OCR
///   layer over a visible one, a header repeated at another size) is
///   dropped, and so is a glyph repeating the previous one within 0.1 em
///   (fake bold: the same glyph drawn again slightly offset).
/// - **Word gaps** come from the glyphs' geometry, not from space
///   characters (many PDFs position each word and draw no spaces): a gap
///   after a glyph's advance wider than 0.12 em reads as a space (0.35 em
///   past an estimated end when the font gives no width), and a gap wider
///   than one em starts a new segment (a table cell, another column) on
///   the same row. A line whose letters were each placed on their own (an
///   OCR'd scan's layer, most gaps wider than that) takes its word gap
///   from its own gaps instead (`placed_word_gap`).
/// - **Rotated text** (an axis label, a margin note, a page turned in its
///   PDF) is read along its own baseline: glyphs are grouped by the
///   baseline's angle (whole degrees; within two of upright counts as
///   upright), each group is read by the rules above in its own frame, and
///   its lines' boxes are turned back into page pixels. Upright rows come
///   first, then each rotated group's, so a label comes out as a line, not
///   a letter per row.
/// - **Vertical writing** (Chinese or Japanese set in columns: upright
///   glyphs, each drawn right below the one before) is read down each
///   column, columns right to left, each column one line whose box holds
///   its glyphs; its rows come last.
/// - **Spaces drawn over letters** (another text object's blanks on the
///   same baseline) are dropped before words and cells are cut.
pub fn layer_lines(glyphs: &[Glyph], bbox: [f32; 4]) -> Vec<LineText> {
    let inside: Vec<&Glyph> = glyphs
        .iter()
        .filter(|g| {
            let (cx, cy) = g.centre();
            cx >= bbox[0] && cx < bbox[2] && cy >= bbox[1] && cy < bbox[3]
        })
        .collect();
    let vertical = vertical_columns(&inside);
    // By baseline direction: upright text first, then each rotated one;
    // upright glyphs set in vertical columns are read as text running
    // down the page (as 90°, whose rows go right to left; their own
    // group, `VERTICAL`, since their bodies sit otherwise on the baseline).
    let mut groups: Vec<(i32, Vec<&Glyph>)> = Vec::new();
    for (g, down) in inside.into_iter().zip(vertical) {
        let a = if down { VERTICAL } else { g.angle() };
        match groups.iter_mut().find(|(k, _)| *k == a) {
            Some((_, gs)) => gs.push(g),
            None => groups.push((a, vec![g])),
        }
    }
    groups.sort_by_key(|(a, _)| (*a != 0, *a));
    let mut out = Vec::new();
    let mut rows = 0;
    for (angle, gs) in groups {
        if angle == 0 {
            out.extend(upright_lines(&gs, &mut rows));
            continue;
        }
        // A rotated run is read in its own frame and its box turned back.
        let turn = if angle == VERTICAL { 90 } else { angle };
        let (s, c) = (turn as f32).to_radians().sin_cos();
        let framed: Vec<Glyph> = gs
            .iter()
            .map(|g| {
                let mut f = g.in_frame((s, c));
                if angle == VERTICAL {
                    // An upright glyph's body is above its baseline and
                    // right of its origin: in the frame, an em before its
                    // x (less the 0.2 em below the baseline) and 0.2 em
                    // further across, so the column's box holds its glyphs.
                    f.x -= 0.8 * f.size;
                    f.y -= 0.2 * f.size;
                }
                f
            })
            .collect();
        let refs: Vec<&Glyph> = framed.iter().collect();
        for mut l in upright_lines(&refs, &mut rows) {
            let [x0, y0, x1, y1] = l.frame;
            let corners =
                [(x0, y0), (x1, y0), (x0, y1), (x1, y1)].map(|(u, v)| (u * c - v * s, u * s + v * c));
            let xs = corners.map(|p| p.0);
            let ys = corners.map(|p| p.1);
            let min = |a: [f32; 4]| a.into_iter().fold(f32::MAX, f32::min).max(0.0) as u32;
            let max = |a: [f32; 4]| a.into_iter().fold(f32::MIN, f32::max).max(0.0) as u32;
            l.line.bbox = [min(xs), min(ys), max(xs), max(ys)];
            out.push(l);
        }
    }
    out.into_iter()
        .map(|l| l.line)
        .filter(|l| !l.text.is_empty())
        .collect()
}

/// A line with its box in the frame it was read in (page pixels for
/// upright text).
struct Framed {
    line: LineText,
    frame: [f32; 4],
}

/// The rules of [`layer_lines`] on glyphs of one upright frame; rows are
/// numbered from `*rows_so_far` on, which is left past the last one.
fn upright_lines(inside: &[&Glyph], rows_so_far: &mut usize) -> Vec<Framed> {
    let mut rows: Vec<Vec<Vec<&Glyph>>> = Vec::new();
    for run in runs(inside) {
        let first = run[0];
        match rows
            .iter()
            .position(|r| (r[0][0].y - first.y).abs() < r[0][0].size / 3.0)
        {
            // The same text again over the same stretch: read once.
            Some(i) if rows[i].iter().any(|kept| repeats(kept, &run)) => {}
            // Other text over the same stretch (a second OCR layer that
            // read the line otherwise): a line of its own, not letters
            // interleaved with the first ("Thhee Jaapapnan"). A part of the
            // line drawn again in place stays (its glyphs are deduplicated).
            Some(i)
                if rows[i]
                    .iter()
                    .any(|kept| overlapping(kept, &run) && !redraws(kept, &run)) =>
            {
                rows.push(vec![run])
            }
            Some(i) => rows[i].push(run),
            None => rows.push(vec![run]),
        }
    }
    rows.sort_by(|a, b| a[0][0].y.total_cmp(&b[0][0].y));
    let first_row = *rows_so_far;
    *rows_so_far += rows.len();
    let mut out = Vec::new();
    for (i, runs) in rows.into_iter().enumerate() {
        let row = first_row + i;
        let mut l: Vec<&Glyph> = runs.into_iter().flatten().collect();
        l.sort_by(|a, b| a.x.total_cmp(&b.x));
        l.dedup_by(|g, prev| {
            g.text == prev.text && !g.text.trim().is_empty() && g.x - prev.x < 0.1 * prev.size
        });
        let l = without_spaces_drawn_over(l);
        // A gap of more than one em splits the line into segments (table
        // cells, columns), each its own LineText on the same row.
        let mut seg: Vec<&Glyph> = Vec::new();
        for g in l {
            if let Some(prev) = seg.last()
                && g.x - prev.end() > g.size
            {
                out.push(segment(&seg, row));
                seg.clear();
            }
            seg.push(g);
        }
        if !seg.is_empty() {
            out.push(segment(&seg, row));
        }
    }
    out
}

/// The group of [`layer_lines`] of upright glyphs set in vertical columns
/// (not an angle: angles are within ±180).
const VERTICAL: i32 = 1000;

/// Is most of a page's text set in vertical columns (see
/// [`layer_lines`])? Its regions are then read right to left.
pub fn mostly_vertical(glyphs: &[Glyph]) -> bool {
    let refs: Vec<&Glyph> = glyphs.iter().collect();
    let down = vertical_columns(&refs).into_iter().filter(|&v| v).count();
    let visible = glyphs.iter().filter(|g| !g.text.trim().is_empty()).count();
    down > 0 && down * 2 > visible
}

/// Which of `glyphs` (in drawing order) are set vertically: upright
/// Chinese or Japanese glyphs in a run of three or more, each drawn right
/// below the one before (within a fifth of an em across, 0.8 to 1.3 em
/// down), as a page written in vertical columns draws them. Lines of one
/// ideograph each (a table's column of one-character cells) are further
/// apart than that.
fn vertical_columns(glyphs: &[&Glyph]) -> Vec<bool> {
    let mut marks = vec![false; glyphs.len()];
    let mut start = 0;
    for i in 1..=glyphs.len() {
        let continues = i < glyphs.len() && {
            let (p, g) = (glyphs[i - 1], glyphs[i]);
            let down = g.y - p.y;
            p.angle() == 0
                && g.angle() == 0
                && ideographic(p)
                && ideographic(g)
                && (g.x - p.x).abs() < 0.2 * p.size
                && down > 0.8 * p.size
                && down < 1.3 * p.size
        };
        if !continues {
            if i - start >= 3 {
                marks[start..i].fill(true);
            }
            start = i;
        }
    }
    marks
}

/// `line` (sorted along the baseline) without the space glyphs drawn over
/// its visible glyphs: more than half a space's width covered by letters
/// is padding another text object drew across the text (a form's field of
/// blanks under a table's dates), not a gap between words, and keeping it
/// would break "03/25/2016" into "0 3 / 2 5 / 2 0 16" and bridge the gaps
/// between cells.
fn without_spaces_drawn_over(line: Vec<&Glyph>) -> Vec<&Glyph> {
    let visible: Vec<&Glyph> = line
        .iter()
        .copied()
        .filter(|g| !g.text.trim().is_empty())
        .collect();
    // The widest visible glyph: none starting further left can reach a space.
    let reach = visible.iter().map(|v| v.end() - v.x).fold(0.0, f32::max);
    let drawn_over = |g: &Glyph| {
        let (a, b) = (g.x, g.end());
        let from = visible.partition_point(|v| v.x < a - reach);
        let covered: f32 = visible[from..]
            .iter()
            .take_while(|v| v.x < b)
            .map(|v| (b.min(v.end()) - a.max(v.x)).max(0.0))
            .sum();
        covered > 0.5 * (b - a)
    };
    line.into_iter()
        .filter(|g| !g.text.trim().is_empty() || !drawn_over(g))
        .collect()
}

/// `glyphs` (in drawing order) cut into runs: a glyph continues the run
/// when it is on the last glyph's baseline (within half a font size) and
/// not behind it.
fn runs<'g>(glyphs: &[&'g Glyph]) -> Vec<Vec<&'g Glyph>> {
    let mut out: Vec<Vec<&Glyph>> = Vec::new();
    for &g in glyphs {
        match out.last_mut() {
            Some(run)
                if run.last().is_some_and(|p| {
                    (g.y - p.y).abs() < 0.5 * p.size.max(g.size) && g.x >= p.x - 0.1 * p.size
                }) =>
            {
                run.push(g)
            }
            _ => out.push(vec![g]),
        }
    }
    out
}

/// Does `run` repeat `kept`: the same text (spaces aside) over more than
/// half of the shorter one's stretch of the baseline?
fn repeats(kept: &[&Glyph], run: &[&Glyph]) -> bool {
    let text = |r: &[&Glyph]| {
        r.iter()
            .flat_map(|g| g.text.chars())
            .filter(|c| !c.is_whitespace())
            .collect::<String>()
    };
    let (common, shorter, _) = in_common(kept, run);
    common > 0.5 * shorter && text(kept) == text(run)
}

/// Do the runs `a` and `b` cover mostly the same stretch of the baseline:
/// more than half of the longer one's in common?
fn overlapping(a: &[&Glyph], b: &[&Glyph]) -> bool {
    let (common, _, longer) = in_common(a, b);
    common > 0.5 * longer
}

/// Does `run` draw glyphs of `kept` again in place (fake bold drawn glyph
/// by glyph, a word redrawn): of its visible glyphs over `kept`'s
/// stretch, most (four in five) the same as one of `kept` within 0.1 em?
fn redraws(kept: &[&Glyph], run: &[&Glyph]) -> bool {
    let x0 = kept.iter().map(|g| g.x).fold(f32::MAX, f32::min);
    let x1 = kept.iter().map(|g| g.end()).fold(f32::MIN, f32::max);
    let over: Vec<&&Glyph> = run
        .iter()
        .filter(|g| !g.text.trim().is_empty() && g.x >= x0 && g.x < x1)
        .collect();
    let again = over
        .iter()
        .filter(|g| {
            kept.iter()
                .any(|k| k.text == g.text && (k.x - g.x).abs() < 0.1 * k.size)
        })
        .count();
    again * 5 >= over.len() * 4
}

/// The stretch of the baseline the runs `a` and `b` share, and the
/// shorter and the longer of their own stretches (visible glyphs only).
fn in_common(a: &[&Glyph], b: &[&Glyph]) -> (f32, f32, f32) {
    let span = |r: &[&Glyph]| {
        let visible = r.iter().filter(|g| !g.text.trim().is_empty());
        let x0 = visible.clone().map(|g| g.x).fold(f32::MAX, f32::min);
        let x1 = visible.map(|g| g.end()).fold(f32::MIN, f32::max);
        (x0, x1.max(x0))
    };
    let ((a0, a1), (b0, b1)) = (span(a), span(b));
    let (la, lb) = (a1 - a0, b1 - b0);
    (a1.min(b1) - a0.max(b0), la.min(lb), la.max(lb))
}

fn segment(l: &[&Glyph], row: usize) -> Framed {
    let placed = placed_word_gap(l);
    let mut text = String::new();
    let mut prev: Option<&Glyph> = None;
    for &g in l {
        // A space drawn off this line's baseline (another text object's,
        // within the row's tolerance) is no word break here: the line's
        // own gaps say where its words end.
        if g.text.trim().is_empty() && prev.is_some_and(|p| (g.y - p.y).abs() > 0.2 * p.size) {
            continue;
        }
        if let Some(p) = prev
            && g.x - p.end() > placed.map_or_else(|| g.space_after(p), |em| em * p.size)
            && !(ideographic(p) && ideographic(g))
            && !text.ends_with(' ')
            && g.text != " "
        {
            text.push(' ');
        }
        text.push_str(&g.text);
        prev = Some(g);
    }
    let x0 = l.iter().map(|g| g.x).fold(f32::MAX, f32::min);
    let x1 = l.iter().map(|g| g.end()).fold(f32::MIN, f32::max);
    let top = l.iter().map(|g| g.y - 0.8 * g.size).fold(f32::MAX, f32::min);
    let bottom = l.iter().map(|g| g.y + 0.2 * g.size).fold(f32::MIN, f32::max);
    Framed {
        line: LineText {
            text: collapse_spaces(&text),
            confidence: 1.0,
            low_confidence: false,
            row,
            bbox: [x0, top, x1, bottom].map(|v| v.max(0.0) as u32),
        },
        frame: [x0, top, x1, bottom],
    }
}

/// The word gap of a line whose letters were each placed on their own
/// (an OCR'd scan's invisible layer: the engine put each glyph where it
/// saw the letter, in a font whose advances are not the scan's), in em;
/// `None` for a line set the usual way, whose gaps [`Glyph::space_after`]
/// reads.
///
/// A line is "placed" when most gaps between its adjacent letters (no
/// space glyph between them, neither ideographic) exceed the usual word
/// gap: typeset text has one word gap per five letters or so. Its gaps
/// then fall into two groups, letter gaps and word gaps a space's width
/// wider; the widest jump between its sorted gaps, when it is at least
/// 0.15 em, separates them (the word gap is its middle). A line with no
/// such jump is one word. Letter gaps are under 0.3 em (a space's width):
/// a line whose smaller gaps are wider is short words set apart ("1 2 3",
/// "a b c") and is read the usual way.
fn placed_word_gap(l: &[&Glyph]) -> Option<f32> {
    // Each gap between adjacent letters, and the usual word gap there, in em.
    let pairs: Vec<(f32, f32)> = l
        .windows(2)
        .filter(|w| w.iter().all(|g| !g.text.trim().is_empty() && !ideographic(g)))
        .map(|w| {
            let em = w[0].size.max(1e-3);
            ((w[1].x - w[0].end()) / em, w[1].space_after(w[0]) / em)
        })
        .collect();
    let wide = pairs.iter().filter(|(gap, usual)| gap > usual).count();
    if pairs.len() < 4 || wide * 2 <= pairs.len() {
        return None;
    }
    let mut gaps: Vec<f32> = pairs.into_iter().map(|(gap, _)| gap).collect();
    gaps.sort_by(f32::total_cmp);
    let jump = gaps
        .windows(2)
        .map(|p| (p[1] - p[0], p[0], p[1]))
        .max_by(|a, b| a.0.total_cmp(&b.0));
    // Letter gaps stay under a space's width (0.3 em); wider ones are word
    // gaps between short words ("1 2 3 4", "a b c"), read the usual way.
    let (letters, threshold) = match jump {
        Some((width, below, above)) if width >= 0.15 => (below, 0.5 * (below + above)),
        // One word: no gap of the line breaks it.
        _ => (gaps.last().copied().unwrap_or(0.0), f32::INFINITY),
    };
    (letters < 0.3).then_some(threshold)
}

/// Is the glyph Chinese or Japanese script (Han, kana, CJK punctuation,
/// full-width forms)? Text in those scripts puts no spaces between words,
/// so a gap between two such glyphs is layout, not a word break.
fn ideographic(g: &Glyph) -> bool {
    g.text.chars().next().is_some_and(ideograph)
}

/// Is `c` Chinese or Japanese script (see [`ideographic`])?
fn ideograph(c: char) -> bool {
    {
        matches!(c as u32,
            0x3000..=0x30FF        // CJK punctuation, hiragana, katakana
            | 0x3400..=0x4DBF      // Han extension A
            | 0x4E00..=0x9FFF      // Han
            | 0xF900..=0xFAFF      // Han compatibility
            | 0xFF00..=0xFFEF      // full-width and half-width forms
            | 0x20000..=0x3FFFF) // Han extensions B and on
    }
}

fn collapse_spaces(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An upright glyph.
    fn upright(text: &str, x: f32, y: f32, size: f32, advance: Option<f32>) -> Glyph {
        Glyph {
            text: text.into(),
            x,
            y,
            size,
            advance,
            dir: UPRIGHT,
        }
    }

    /// The texts of the lines of `glyphs`, wherever they lie.
    fn read(glyphs: &[Glyph]) -> Vec<String> {
        layer_lines(glyphs, [f32::MIN, f32::MIN, f32::MAX, f32::MAX])
            .into_iter()
            .map(|l| l.text)
            .collect()
    }

    #[test]
    fn glyphs_group_into_lines_with_spaces_from_gaps() {
        let g = |t: &str, x: f32, y: f32| upright(t, x, y, 20.0, None);
        let glyphs = vec![
            g("b", 110.0, 100.0),
            g("a", 100.0, 100.0),
            g("c", 130.0, 101.0),
            g("d", 100.0, 130.0),
            g("z", 500.0, 100.0),
            g("e", 180.0, 130.0),
        ];
        let lines = layer_lines(&glyphs, [90.0, 50.0, 200.0, 200.0]);
        let texts: Vec<&str> = lines.iter().map(|l| l.text.as_str()).collect();
        assert_eq!(texts, vec!["ab c", "d", "e"]);
        assert_eq!((lines[1].row, lines[2].row), (1, 1));
    }

    /// A space glyph drawn a quarter of an em off a line's baseline (another
    /// text object's, caught by the row's tolerance) between two
    /// ideographs is no word break: a real table's layer read "项目总 体"
    /// where the page shows "项目总体" (word F1 on tables, issue 45).
    #[test]
    fn a_space_off_the_baseline_is_no_word_break() {
        let g = |t: &str, x: f32, y: f32| upright(t, x, y, 22.0, Some(22.0));
        let glyphs = vec![
            g(" ", 620.0, 413.5),
            g("项", 561.0, 419.3),
            g("目", 583.0, 419.3),
            g("总", 605.0, 419.3),
            g("体", 627.0, 419.3),
            g("概", 649.0, 419.3),
        ];
        assert_eq!(read(&glyphs), ["项目总体概"]);
        // On the baseline, a space glyph still separates Latin words.
        let latin = vec![g("a", 100.0, 100.0), g(" ", 122.0, 100.0), g("b", 144.0, 100.0)];
        assert_eq!(read(&latin), ["a b"]);
    }

    /// Vertical Japanese (generated: a glyph per position, columns right
    /// to left) is read down each column, the rightmost first, and its
    /// page text is in that order.
    #[test]
    fn vertical_cjk_is_read_down_each_column_right_to_left() {
        let columns = ["縦書きの文章は上から", "下へ右から左へ読む"].map(String::from);
        let pdf = rayorch_testdata::pdfgen::vertical_cjk_pdf(&columns, 20.0);
        let layer = extract(&pdf, &[2.0]).remove(0);
        assert_eq!(layer.verdict, Verdict::Trusted);
        let lines = layer_lines(&layer.glyphs, [0.0, 0.0, 2.0 * 612.0, 2.0 * 792.0]);
        let texts: Vec<&str> = lines.iter().map(|l| l.text.as_str()).collect();
        assert_eq!(texts, columns);
        // Each line's box is its column, from the first glyph's top to the
        // last one's foot (2 px per point: glyphs 40 px, 42 px apart) and
        // one em wide; the first column is the right one.
        let [a, b] = [lines[0].bbox, lines[1].bbox];
        let top = 2.0 * (60.0 + 1.05 * 20.0) - 0.8 * 40.0;
        assert!((a[1] as f32 - top).abs() <= 2.0, "{a:?} from {top}");
        assert!((a[3] - a[1]) as f32 >= 9.0 * 42.0 && a[2] - a[0] <= 41, "{a:?}");
        assert!(a[0] > b[2], "{a:?} right of {b:?}");
        assert!(mostly_vertical(&layer.glyphs));
        let order = crate::lines::reading_order(&lines);
        assert_eq!(crate::page_text(&order), columns.join("\n"));
        // A column of one-ideograph cells, rows two em apart, stays rows.
        let cell = |t: &str, y: f32| upright(t, 100.0, y, 20.0, Some(20.0));
        let cells = [cell("是", 100.0), cell("否", 140.0), cell("是", 180.0)];
        assert_eq!(read(&cells), ["是", "否", "是"]);
    }

    /// Two OCR layers that read one line differently ("Society" and
    /// "Sooiety" over the same stretch, as a real scan has them) come out
    /// as two lines, not as letters interleaved; runs side by side on a
    /// row still make one line.
    #[test]
    fn two_readings_of_one_line_are_two_lines_not_interleaved() {
        let run = |t: &str, x0: f32, dx: f32| -> Vec<Glyph> {
            t.chars()
                .enumerate()
                .map(|(i, c)| upright(&c.to_string(), x0 + 10.0 * i as f32 + dx, 100.0, 20.0, Some(10.0)))
                .collect()
        };
        let glyphs = [run("Society", 100.0, 0.0), run("Sooiety", 100.0, 3.0)].concat();
        assert_eq!(read(&glyphs), ["Society", "Sooiety"]);
        // Part of a line drawn again in place is that line, once.
        let again = [run("(1) Contents", 100.0, 0.0), run("Contents:", 140.0, 0.0)].concat();
        assert_eq!(read(&again), ["(1) Contents:"]);
        let side = [run("left", 100.0, 0.0), run("right", 150.0, 0.0)].concat();
        assert_eq!(read(&side).len(), 1, "{:?}", read(&side));
    }

    /// Letters each placed on their own (an OCR'd scan's layer: gaps of
    /// 0.1-0.2 em after every letter's advance, 0.5 em between words) are
    /// read as words; short words set apart the usual way, or a line of
    /// digits 0.5 em apart, keep their breaks.
    #[test]
    fn letters_placed_one_by_one_are_read_as_words() {
        let size = 20.0;
        let mut glyphs = Vec::new();
        let mut x = 100.0;
        for (w, word) in ["American", "agreement", "signed"].iter().enumerate() {
            if w > 0 {
                x += 0.55 * size;
            }
            for (i, c) in word.chars().enumerate() {
                glyphs.push(upright(&c.to_string(), x, 100.0, size, Some(0.5 * size)));
                x += 0.5 * size + (0.10 + 0.01 * ((i * 7) % 13) as f32) * size;
            }
        }
        assert_eq!(read(&glyphs), ["American agreement signed"]);
        let digits: Vec<Glyph> = (0..6)
            .map(|i| {
                upright(
                    &i.to_string(),
                    100.0 + i as f32 * 1.05 * size,
                    100.0,
                    size,
                    Some(0.55 * size),
                )
            })
            .collect();
        assert_eq!(read(&digits), ["0 1 2 3 4 5"]);
    }

    /// Spaces another text object drew across a line's letters (on the
    /// same baseline: a field of blanks under a table's dates, seen in a
    /// real PDF) neither break its words nor bridge its cells; a space
    /// between two words still separates them.
    #[test]
    fn spaces_drawn_over_letters_are_no_word_breaks() {
        let g = |t: &str, x: f32| {
            upright(
                t,
                x,
                267.0,
                21.75,
                Some(if t == " " || t == "/" { 6.05 } else { 12.09 }),
            )
        };
        let mut glyphs: Vec<Glyph> = Vec::new();
        // The padding first (drawn earlier), a blank every 6 px from 195.
        glyphs.extend((0..24).map(|i| g(" ", 195.5 + 6.03 * i as f32)));
        let mut x = 203.75;
        for c in "03/25/2016".chars() {
            let t = c.to_string();
            glyphs.push(g(&t, x));
            x += if c == '/' { 6.05 } else { 12.0 };
        }
        // A space, then the next cell well over an em away.
        glyphs.push(g(" ", x));
        for (i, c) in "Maxim".chars().enumerate() {
            glyphs.push(g(&c.to_string(), x + 60.0 + 12.0 * i as f32));
        }
        assert_eq!(read(&glyphs), ["03/25/2016", "Maxim"]);
    }

    /// The lines of every page of `pdf`, read from its text layer at 2
    /// pixels per point.
    fn page_lines(pdf: &[u8], pages: usize) -> Vec<Vec<String>> {
        extract(pdf, &vec![2.0; pages])
            .into_iter()
            .map(|g| {
                let g = g.trusted().expect("a trusted text layer");
                layer_lines(&g, [0.0, 0.0, 2.0 * 612.0, 2.0 * 792.0])
                    .into_iter()
                    .map(|l| l.text)
                    .collect()
            })
            .collect()
    }

    #[test]
    fn a_rotated_run_is_one_line_along_its_own_baseline_with_its_box_in_page_pixels() {
        // "Axis" read bottom to top at x = 40 (baseline turned -90° in
        // page pixels, y down), beside an upright word.
        let turned = |t: &str, i: usize| Glyph {
            text: t.into(),
            x: 40.0,
            y: 400.0 - 12.0 * i as f32,
            size: 20.0,
            advance: Some(12.0),
            dir: [0.0, -1.0],
        };
        let upright = |t: &str, i: usize| Glyph {
            text: t.into(),
            x: 100.0 + 12.0 * i as f32,
            y: 200.0,
            size: 20.0,
            advance: Some(12.0),
            dir: UPRIGHT,
        };
        let mut glyphs: Vec<Glyph> = "Axis"
            .chars()
            .enumerate()
            .map(|(i, c)| turned(&c.to_string(), i))
            .collect();
        glyphs.extend(
            "Body"
                .chars()
                .enumerate()
                .map(|(i, c)| upright(&c.to_string(), i)),
        );
        let lines = layer_lines(&glyphs, [0.0, 0.0, 1000.0, 1000.0]);
        let texts: Vec<&str> = lines.iter().map(|l| l.text.as_str()).collect();
        assert_eq!(texts, ["Body", "Axis"], "upright rows first, then the turned run");
        assert_eq!((lines[0].row, lines[1].row), (0, 1));
        // The label's box: narrow across its baseline (about 1 em, left of
        // x = 40 where the glyph tops point), tall along it (4 advances up
        // from y = 400).
        let [x0, y0, x1, y1] = lines[1].bbox;
        assert!(
            (20..=40).contains(&x0) && (40..=46).contains(&x1),
            "{:?}",
            lines[1].bbox
        );
        assert!(
            (350..=354).contains(&y0) && (400..=402).contains(&y1),
            "{:?}",
            lines[1].bbox
        );
    }

    #[test]
    fn a_baseline_angle_is_whole_degrees_with_one_value_for_upside_down() {
        let at = |dir: [f32; 2]| {
            Glyph {
                text: "a".into(),
                x: 0.0,
                y: 0.0,
                size: 10.0,
                advance: None,
                dir,
            }
            .angle()
        };
        assert_eq!(at(UPRIGHT), 0);
        assert_eq!(at([0.9996, 0.0297]), 0, "1.7 degrees reads as upright");
        assert_eq!(at([0.0, -1.0]), -90);
        // Upside down, whichever sign the zero has: one group, not two.
        assert_eq!((at([-1.0, 0.0]), at([-1.0, -0.0])), (180, 180));
    }

    #[test]
    fn labels_at_any_angle_in_a_pdf_come_out_whole_and_the_layer_stays_trusted() {
        let body: Vec<String> = [
            "Quarterly results by region and product line",
            "Revenue grew in every region but one this quarter",
            "The table below lists the figures in thousands",
            "Margins held steady while costs fell slightly",
        ]
        .map(String::from)
        .to_vec();
        let labels = [
            ("Revenue in thousands", 90.0, (40.0, 200.0)),
            ("Draft copy", 270.0, (580.0, 600.0)),
            ("Approved for release", 30.0, (200.0, 150.0)),
            ("Upside down note", 180.0, (500.0, 60.0)),
        ];
        let pdf = rayorch_testdata::pdfgen::rotated_labels_pdf(&body, &labels, 14.0);
        let layer = extract(&pdf, &[2.0]).remove(0);
        assert_eq!(layer.verdict, Verdict::Trusted);
        let lines: Vec<String> = layer_lines(&layer.glyphs, [0.0, 0.0, 2.0 * 612.0, 2.0 * 792.0])
            .into_iter()
            .map(|l| l.text)
            .collect();
        assert_eq!(lines[..body.len()], body[..], "{lines:?}");
        for (label, ..) in labels {
            assert!(lines.iter().any(|l| l == label), "{label:?} whole in {lines:?}");
        }
        assert_eq!(lines.len(), body.len() + labels.len(), "{lines:?}");
    }

    #[test]
    fn word_gaps_come_from_glyph_advances_when_a_pdf_draws_no_spaces() {
        let pages = vec![
            vec![
                "Here is to the crazy ones.".to_string(),
                "The misfits, the rebels, the troublemakers.".to_string(),
            ],
            vec!["Waterfall AVATAR kerning iiii llll mmmm WWWW".to_string()],
        ];
        for size in [9.0, 14.0] {
            // Words positioned by the pen, no space characters, letters
            // kerned by 0.04 em: every word is found, none is split.
            let pdf = rayorch_testdata::pdfgen::positioned_words_pdf(&pages, size);
            assert_eq!(page_lines(&pdf, 2), pages, "positioned words at {size} pt");
            // With space characters the same lines come out.
            let pdf = rayorch_testdata::pdfgen::text_pdf(&pages, size);
            assert_eq!(page_lines(&pdf, 2), pages, "spaces at {size} pt");
        }
    }

    #[test]
    fn text_drawn_twice_is_read_once() {
        let g = |t: char, x: f32, size: f32| Glyph {
            text: t.to_string(),
            x,
            y: 100.0,
            size,
            advance: Some(0.6 * size),
            dir: UPRIGHT,
        };
        let word = |s: &str, x0: f32, size: f32| -> Vec<Glyph> {
            s.chars()
                .enumerate()
                .map(|(i, c)| g(c, x0 + i as f32 * 0.6 * size, size))
                .collect()
        };
        let texts = |glyphs: &[Glyph]| -> Vec<String> {
            layer_lines(glyphs, [0.0, 0.0, 1000.0, 1000.0])
                .into_iter()
                .map(|l| l.text)
                .collect()
        };
        // The same header at two sizes from one origin (a visible line and
        // an OCR layer over it): one line, not "TThhee".
        let mut twice = word("The Society", 20.0, 16.0);
        twice.extend(word("The Society", 20.0, 12.0));
        assert_eq!(texts(&twice), vec!["The Society"]);
        // Fake bold: every glyph drawn again 0.5 px to the right.
        let bold: Vec<Glyph> = word("Bold", 20.0, 20.0)
            .into_iter()
            .flat_map(|a| {
                let mut b = a.clone();
                b.x += 0.5;
                [a, b]
            })
            .collect();
        assert_eq!(texts(&bold), vec!["Bold"]);
        // Letters that repeat in a word are not duplicates, and different
        // text over the same stretch is kept (every letter of both).
        assert_eq!(texts(&word("small", 20.0, 20.0)), vec!["small"]);
        let mut two = word("small", 20.0, 20.0);
        two.extend(word("print", 20.0, 20.0));
        assert_eq!(texts(&two).concat().len(), 10);
    }

    #[test]
    fn no_spaces_between_ideographs_spaced_out_by_the_layout() {
        // An OCR layer of a Japanese title: each glyph boxed on its own,
        // 0.3 em apart; Latin letters at the same gaps are words.
        let g = |t: &str, i: usize| Glyph {
            text: t.into(),
            x: 100.0 + i as f32 * 26.0,
            y: 100.0,
            size: 20.0,
            advance: Some(20.0),
            dir: UPRIGHT,
        };
        let glyphs: Vec<Glyph> = ["流", "体", "力", "学", "A", "B"]
            .iter()
            .enumerate()
            .map(|(i, t)| g(t, i))
            .collect();
        let lines = layer_lines(&glyphs, [0.0, 0.0, 1000.0, 1000.0]);
        assert_eq!(lines[0].text, "流体力学 A B");
    }

    #[test]
    fn a_layer_is_judged_by_its_mapping_characters_words_and_images() {
        let page = Rect::new(0.0, 0.0, 1000.0, 1000.0);
        let line = |text: &str, y: f32| -> Vec<Glyph> {
            text.chars()
                .enumerate()
                .map(|(i, c)| Glyph {
                    text: c.to_string(),
                    x: 20.0 + 6.0 * i as f32,
                    y,
                    size: 10.0,
                    advance: Some(6.0),
                    dir: UPRIGHT,
                })
                .collect()
        };
        let dev = |glyphs: Vec<Glyph>, unmapped: usize, images: Vec<Rect>| Collect {
            glyphs,
            unmapped,
            invisible: 0,
            images,
        };
        let prose = "The quick brown fox jumps over the lazy dog while seven wizards quietly judge \
                     boxing matches and a tired lion sleeps under the warm summer sun again";
        let text = line(prose, 100.0);
        assert_eq!(judge(&dev(text.clone(), 0, vec![]), page), Verdict::Trusted);
        assert_eq!(
            judge(&dev(line("short", 100.0), 0, vec![]), page),
            Verdict::NoLayer
        );
        assert!(matches!(
            judge(&dev(text.clone(), 20, vec![]), page),
            Verdict::Unmapped { .. }
        ));
        let garbage: String = prose
            .chars()
            .map(|c| if c == 'e' { '\u{E012}' } else { c })
            .collect();
        assert!(matches!(
            judge(&dev(line(&garbage, 100.0), 0, vec![]), page),
            Verdict::Garbage { .. }
        ));
        let spaced: String = prose.chars().flat_map(|c| [c, ' ']).collect();
        assert!(matches!(
            judge(&dev(line(&spaced, 100.0), 0, vec![]), page),
            Verdict::SpacedOut { percent } if percent > 90
        ));
        // A table of ranges: words with one letter among digits and signs
        // are words, not letters set apart (a real table's page was OCR'd
        // for this, issue 45).
        let ranges = "营业收入(Y) 万元 Y≥20000 X≥1000 Z≥80000 Y≥300 X≥20 Z≥5000 Y≥40000 X≥200 Z≥100 Y≥50";
        let table = [line(ranges, 100.0), line(ranges, 120.0)].concat();
        assert_eq!(judge(&dev(table, 0, vec![]), page), Verdict::Trusted);
        // A font whose mapping shifts every letter by 7.
        let shifted: String = prose
            .chars()
            .map(|c| match c {
                'a'..='z' => (b'a' + (c as u8 - b'a' + 7) % 26) as char,
                _ => c,
            })
            .collect();
        // Two lines of it: the check wants at least 20 words of 4+ letters.
        let two_lines = [line(&shifted, 100.0), line(&shifted, 120.0)].concat();
        assert!(matches!(
            judge(&dev(two_lines, 0, vec![]), page),
            Verdict::Scrambled { .. }
        ));
        // One line is too few words to call a mapping scrambled.
        assert_eq!(
            judge(&dev(line(&shifted, 100.0), 0, vec![]), page),
            Verdict::Trusted
        );
        // A page-sized picture with a caption under it: text in pixels. The
        // same picture under the text (a scan with its OCR layer) is fine.
        let picture = Rect::new(0.0, 200.0, 1000.0, 1000.0);
        assert_eq!(
            judge(&dev(text.clone(), 0, vec![picture]), page),
            Verdict::TextInImages { percent: 80 }
        );
        assert_eq!(
            judge(&dev(line(prose, 500.0), 0, vec![picture]), page),
            Verdict::Trusted
        );
        assert_eq!(
            judge(&dev(text, 0, vec![Rect::new(0.0, 200.0, 500.0, 600.0)]), page),
            Verdict::Trusted
        );
    }
}
