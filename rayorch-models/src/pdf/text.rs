//! The text a PDF already carries: glyphs with their Unicode values and
//! positions, read with hayro's interpreter (no rendering).
//!
//! Invariants:
//! - Positions are in the pixels of the page image rendered at the same
//!   scale (y down), so a layout box selects glyphs directly.
//! - A page's layer is *usable* only if most glyphs map to Unicode; a page
//!   that draws its text as paths or images, or with fonts without a
//!   Unicode mapping, has no usable layer and goes through OCR.
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

use crate::lines::LineText;

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
}

impl Glyph {
    /// Where the glyph ends on its baseline, page pixels: its advance, or
    /// 0.6 em when the font gives none (wide enough for most Latin letters).
    fn end(&self) -> f32 {
        self.x + self.advance.unwrap_or(0.6 * self.size)
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
}

impl<'a> Device<'a> for Collect {
    fn draw_path(&mut self, _: &BezPath, _: DrawProps<'a>, _: &DrawMode) {}
    fn push_clip_path(&mut self, _: &ClipPath) {}
    fn push_transparency_group(&mut self, _: f32, _: Option<SoftMask<'a>>, _: BlendMode) {}
    fn draw_glyph_run(&mut self, run: &GlyphRun<'_, 'a>, props: DrawProps<'a>, _: &DrawMode) {
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
            let text = match (&**g as &HGlyph<'_>).as_unicode() {
                Some(BfString::Char(c)) => c.to_string(),
                Some(BfString::String(s)) => s,
                None => {
                    self.unmapped += 1;
                    continue;
                }
            };
            self.glyphs.push(Glyph {
                text,
                x: o.x as f32,
                y: o.y as f32,
                size,
                advance,
            });
        }
    }
    fn draw_image(&mut self, _: Image<'a, '_>, _: ImageDrawProps<'a>) {}
    fn pop_clip(&mut self) {}
    fn pop_transparency_group(&mut self) {}
}

/// The glyphs of each page of `pdf`, positioned for a rendering at
/// `scales[i]` pixels per point (pages without a scale are skipped). A page
/// whose layer is not usable (see module docs) gives `None`.
pub fn extract(pdf: &[u8], scales: &[f32]) -> Vec<Option<Vec<Glyph>>> {
    let run = || {
        let Ok(pdf) = Pdf::new(pdf.to_vec()) else {
            return vec![None; scales.len()];
        };
        let cache = InterpreterCache::new();
        let pages = pdf.pages();
        scales
            .iter()
            .enumerate()
            .map(|(i, &s)| {
                let page = pages.get(i)?;
                let (w, h) = page.render_dimensions();
                let transform = Affine::scale(s as f64) * page.initial_transform(true).to_kurbo();
                let mut cx = Context::new(
                    transform,
                    Rect::new(0.0, 0.0, (w * s) as f64, (h * s) as f64),
                    &cache,
                    page.xref(),
                    InterpreterSettings::default(),
                );
                let mut dev = Collect {
                    glyphs: Vec::new(),
                    unmapped: 0,
                };
                interpret_page(page, &mut cx, &mut dev);
                usable(&dev.glyphs, dev.unmapped).then_some(dev.glyphs)
            })
            .collect()
    };
    catch_unwind(AssertUnwindSafe(run)).unwrap_or_else(|_| vec![None; scales.len()])
}

/// A layer is usable when it has some visible text and at most 5% of its
/// glyphs lack a Unicode value.
fn usable(glyphs: &[Glyph], unmapped: usize) -> bool {
    let visible = glyphs.iter().filter(|g| !g.text.trim().is_empty()).count();
    visible >= 10 && unmapped * 20 <= glyphs.len() + unmapped
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
///   the same row.
pub fn layer_lines(glyphs: &[Glyph], bbox: [f32; 4]) -> Vec<LineText> {
    let inside: Vec<&Glyph> = glyphs
        .iter()
        .filter(|g| {
            let cy = g.y - 0.35 * g.size;
            let cx = g.x + 0.25 * g.size;
            cx >= bbox[0] && cx < bbox[2] && cy >= bbox[1] && cy < bbox[3]
        })
        .collect();
    let mut rows: Vec<Vec<Vec<&Glyph>>> = Vec::new();
    for run in runs(&inside) {
        let first = run[0];
        match rows
            .iter_mut()
            .find(|r| (r[0][0].y - first.y).abs() < r[0][0].size / 3.0)
        {
            Some(r) => {
                if !r.iter().any(|kept| repeats(kept, &run)) {
                    r.push(run);
                }
            }
            None => rows.push(vec![run]),
        }
    }
    rows.sort_by(|a, b| a[0][0].y.total_cmp(&b[0][0].y));
    let mut out = Vec::new();
    for (row, runs) in rows.into_iter().enumerate() {
        let mut l: Vec<&Glyph> = runs.into_iter().flatten().collect();
        l.sort_by(|a, b| a.x.total_cmp(&b.x));
        l.dedup_by(|g, prev| {
            g.text == prev.text && !g.text.trim().is_empty() && g.x - prev.x < 0.1 * prev.size
        });
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
    out.retain(|l| !l.text.is_empty());
    out
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
    let span = |r: &[&Glyph]| {
        let x0 = r.iter().map(|g| g.x).fold(f32::MAX, f32::min);
        let x1 = r.iter().map(|g| g.end()).fold(f32::MIN, f32::max);
        (x0, x1)
    };
    let ((a0, a1), (b0, b1)) = (span(kept), span(run));
    let overlap = a1.min(b1) - a0.max(b0);
    overlap > 0.5 * (a1 - a0).min(b1 - b0) && text(kept) == text(run)
}

fn segment(l: &[&Glyph], row: usize) -> LineText {
    let mut text = String::new();
    let mut prev: Option<&Glyph> = None;
    for &g in l {
        if let Some(p) = prev
            && g.x - p.end() > g.space_after(p)
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
    LineText {
        text: collapse_spaces(&text),
        confidence: 1.0,
        low_confidence: false,
        row,
        bbox: [
            x0.max(0.0) as u32,
            top.max(0.0) as u32,
            x1.max(0.0) as u32,
            bottom.max(0.0) as u32,
        ],
    }
}

/// Is the glyph Chinese or Japanese script (Han, kana, CJK punctuation,
/// full-width forms)? Text in those scripts puts no spaces between words,
/// so a gap between two such glyphs is layout, not a word break.
fn ideographic(g: &Glyph) -> bool {
    g.text.chars().next().is_some_and(|c| {
        matches!(c as u32,
            0x3000..=0x30FF        // CJK punctuation, hiragana, katakana
            | 0x3400..=0x4DBF      // Han extension A
            | 0x4E00..=0x9FFF      // Han
            | 0xF900..=0xFAFF      // Han compatibility
            | 0xFF00..=0xFFEF      // full-width and half-width forms
            | 0x20000..=0x3FFFF) // Han extensions B and on
    })
}

fn collapse_spaces(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glyphs_group_into_lines_with_spaces_from_gaps() {
        let g = |t: &str, x: f32, y: f32| Glyph {
            text: t.into(),
            x,
            y,
            size: 20.0,
            advance: None,
        };
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

    /// The lines of every page of `pdf`, read from its text layer at 2
    /// pixels per point.
    fn page_lines(pdf: &[u8], pages: usize) -> Vec<Vec<String>> {
        extract(pdf, &vec![2.0; pages])
            .into_iter()
            .map(|g| {
                let g = g.expect("a usable text layer");
                layer_lines(&g, [0.0, 0.0, 2.0 * 612.0, 2.0 * 792.0])
                    .into_iter()
                    .map(|l| l.text)
                    .collect()
            })
            .collect()
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
    fn a_page_without_mapped_text_is_not_usable() {
        let g = Glyph {
            text: "x".into(),
            x: 0.0,
            y: 0.0,
            size: 1.0,
            advance: None,
        };
        assert!(usable(&vec![g.clone(); 40], 1));
        assert!(!usable(&vec![g.clone(); 40], 10));
        assert!(!usable(&vec![g; 3], 0));
    }
}
