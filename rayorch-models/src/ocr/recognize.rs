//! Text recognition: PP-OCRv6 tiny rec (CTC) on ONNX Runtime.
//!
//! Pre-processing follows PaddleOCR's `resize_norm_img`: each crop is scaled
//! to height 48 keeping its aspect ratio, pixels go in BGR order as
//! `(px / 255 - 0.5) / 0.5`, and right-padded with zeros.
//!
//! Batch invariance: padding changes the CTC output (a crop padded to 3000
//! px may read "Act³" where alone it reads "Act3"), and one engine batch
//! mixes crops of many pages and documents. So the padded width depends on
//! the crop alone: its scaled width rounded up to the next step of a fixed
//! ladder (`min_width`, then × `bucket_ratio` each step, multiples of 8).
//! Crops with the same padded width share one ONNX Runtime call; a crop's
//! text is the same alone and in any batch. Outputs return in input order.
//!
//! Confidence: the mean max-probability of the decoded characters; a line
//! under `min_confidence` is marked `low_confidence` (kept in the records,
//! left out of the page text).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use image::RgbImage;
use ndarray::ArrayViewD;
use rayorch::{Outcome, Stage, StageContext, StageResult};

use crate::assets::Assets;
use crate::error::ModelError;
use crate::image::{resize, write_bgr_chw};
use crate::onnx::{OnnxConfig, OnnxSession};
use crate::{LineText, TextLine};

/// The model's character set: class `i` (1-based) is `chars[i - 1]`; class 0
/// is the CTC blank; one class past the list is a space.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CharDict {
    chars: Vec<String>,
}

fn yaml_scalar(v: &str) -> Option<String> {
    let v = v.trim_end();
    if let Some(inner) = v.strip_prefix('\'').and_then(|s| s.strip_suffix('\'')) {
        return Some(inner.replace("''", "'"));
    }
    if let Some(inner) = v.strip_prefix('"').and_then(|s| s.strip_suffix('"')) {
        let mut out = String::new();
        let mut it = inner.chars();
        while let Some(c) = it.next() {
            if c != '\\' {
                out.push(c);
                continue;
            }
            match it.next()? {
                'n' => out.push('\n'),
                't' => out.push('\t'),
                'u' => {
                    let hex: String = it.by_ref().take(4).collect();
                    out.push(char::from_u32(u32::from_str_radix(&hex, 16).ok()?)?);
                }
                other => out.push(other),
            }
        }
        return Some(out);
    }
    Some(v.to_string())
}

impl CharDict {
    /// Read the `character_dict` list from a PaddleOCR `inference.yml`.
    ///
    /// ```
    /// use rayorch_models::ocr::CharDict;
    /// let yml = "PostProcess:\n  name: CTCLabelDecode\n  character_dict:\n  - '!'\n  - ''''\n  - a\n  - \"\\u00e9\"\n";
    /// let d = CharDict::from_inference_yml(yml).unwrap();
    /// assert_eq!(d.len(), 4);
    /// assert_eq!(d.class(2), Some("'"));
    /// assert_eq!(d.class(4), Some("é"));
    /// assert_eq!(d.class(5), Some(" "));
    /// ```
    pub fn from_inference_yml(text: &str) -> Result<CharDict, String> {
        let mut lines = text.lines();
        let key_indent = loop {
            let l = lines
                .next()
                .ok_or("no `character_dict:` key (is this a PaddleOCR rec inference.yml?)")?;
            if l.trim_end().trim_start() == "character_dict:" {
                break l.len() - l.trim_start().len();
            }
        };
        let mut chars = Vec::new();
        for l in lines {
            let indent = l.len() - l.trim_start().len();
            let Some(item) = l.trim_start().strip_prefix("- ") else {
                break;
            };
            if indent < key_indent {
                break;
            }
            chars.push(yaml_scalar(item).ok_or_else(|| format!("cannot parse dict entry {item:?}"))?);
        }
        if chars.is_empty() {
            return Err("`character_dict` is empty".into());
        }
        Ok(CharDict { chars })
    }

    /// Read a dict file: the rec `inference.yml`, or a text file with one
    /// character per line.
    pub fn load(path: &Path) -> Result<CharDict, ModelError> {
        let text = std::fs::read_to_string(path).map_err(ModelError::io(path))?;
        let is_yml = path.extension().is_some_and(|e| e == "yml" || e == "yaml");
        if is_yml {
            CharDict::from_inference_yml(&text).map_err(|e| ModelError::model(path.display().to_string(), e))
        } else {
            Ok(CharDict {
                chars: text.lines().map(str::to_string).collect(),
            })
        }
    }

    /// Characters in the list (blank and space not counted).
    pub fn len(&self) -> usize {
        self.chars.len()
    }

    /// Is the list empty?
    pub fn is_empty(&self) -> bool {
        self.chars.is_empty()
    }

    /// The text of class `i`; `None` for the blank and out-of-range classes.
    pub fn class(&self, i: usize) -> Option<&str> {
        match i {
            0 => None,
            i if i <= self.chars.len() => Some(&self.chars[i - 1]),
            i if i == self.chars.len() + 1 => Some(" "),
            _ => None,
        }
    }
}

/// CTC greedy decoding of one `[t, classes]` row-major probability matrix:
/// argmax per step, merge repeats, drop blanks. Returns the text and the
/// mean probability of the kept steps (0 for an empty result).
///
/// ```
/// use rayorch_models::ocr::{CharDict, ctc_greedy};
/// let d = CharDict::from_inference_yml("character_dict:\n- a\n- b\n").unwrap();
/// // steps: a a blank a b  → "aab"
/// let p = |k: usize| { let mut r = vec![0.0; 4]; r[k] = 1.0; r };
/// let probs: Vec<f32> = [1, 1, 0, 1, 2].iter().flat_map(|&k| p(k)).collect();
/// assert_eq!(ctc_greedy(&probs, 5, 4, &d), ("aab".to_string(), 1.0));
/// ```
pub fn ctc_greedy(probs: &[f32], t: usize, classes: usize, dict: &CharDict) -> (String, f32) {
    let mut text = String::new();
    let (mut sum, mut kept) = (0.0f32, 0usize);
    let mut prev = usize::MAX;
    for step in probs.chunks_exact(classes).take(t) {
        let (k, p) = step.iter().enumerate().fold(
            (0, f32::MIN),
            |best, (k, &p)| if p > best.1 { (k, p) } else { best },
        );
        if k != prev
            && let Some(c) = dict.class(k)
        {
            text.push_str(c);
            sum += p;
            kept += 1;
        }
        prev = k;
    }
    let conf = if kept > 0 { sum / kept as f32 } else { 0.0 };
    (text, conf)
}

/// How lines are recognised.
#[derive(Clone, Debug, PartialEq)]
pub struct RecognizeConfig {
    /// Session settings.
    pub onnx: OnnxConfig,
    /// Input height of the model.
    pub height: u32,
    /// Smallest padded width. PaddleOCR pads to its training width, 320;
    /// on real PDFs a fifth of the model's input was then padding (short
    /// crops: table cells, labels, numbers), and 96 reads the same words
    /// for ~12% less of the job's CPU (BENCHMARKS.md, "Padding in
    /// recognition's input").
    pub min_width: u32,
    /// Widest crop after scaling; wider ones are squeezed to it.
    pub max_width: u32,
    /// Ratio between consecutive padded widths of the ladder (> 1). The
    /// default, 1.06, pads a crop by at most 6% (plus the rounding to 8):
    /// with the default `min_width`, 4.3% of the model's input columns on
    /// real PDFs are padding, against 24.9% at ×1.25 from 320, for more
    /// and narrower model calls per batch, which on a CPU cost less than
    /// the columns they save. Keyed by width (a GPU), a coarser ladder
    /// keeps batches fuller (`rayorch_doc`'s `--cuda` uses ×1.25 from 320).
    pub bucket_ratio: f32,
    /// Lines whose confidence is under this are marked low-confidence.
    pub min_confidence: f32,
    /// The most padded columns (crops × padded width) one model call takes:
    /// a width bucket holding more is read in several calls of at most this
    /// many (at least one crop each). It bounds what ONNX Runtime holds per
    /// call, whose output alone is N × W/8 × 6.6 k floats (48 lines of
    /// 1,600 columns: ~250 MB, kept by its arena for the rest of the run;
    /// on 64 real pages the job peaked at 2.1 GB without a cap, 1.3 GB
    /// with the default, BENCHMARKS.md). Results
    /// do not change: padding depends on the crop alone. The default,
    /// 16,384, still takes 48 crops of 320 columns (the model's training width) in one
    /// call; `usize::MAX` takes every bucket in one call (a GPU, where
    /// calls cost more than memory).
    pub max_call_columns: usize,
}

impl Default for RecognizeConfig {
    fn default() -> Self {
        RecognizeConfig {
            onnx: OnnxConfig::default(),
            height: 48,
            min_width: 96,
            max_width: 3200,
            bucket_ratio: 1.06,
            min_confidence: 0.6,
            max_call_columns: 16_384,
        }
    }
}

impl RecognizeConfig {
    /// The width a `w × h` crop scales to at the model's height (at least
    /// 1, at most `max_width`).
    pub fn scaled_width(&self, w: u32, h: u32) -> u32 {
        let r = w as f32 / h.max(1) as f32;
        ((self.height as f32 * r).ceil() as u32).clamp(1, self.max_width)
    }

    /// The width a `w × h` crop is padded to: its ladder step. Crops with
    /// the same padded width share one model call, so this is the
    /// recognition Call's shape key ([`rayorch::Call::shape`]).
    pub fn padded_width(&self, w: u32, h: u32) -> u32 {
        padded_width(
            self.scaled_width(w, h),
            self.min_width,
            self.max_width,
            self.bucket_ratio,
        )
    }
}

/// The recognition model and its dict, ready to run.
#[derive(Debug)]
pub struct LineRecognizer {
    session: OnnxSession,
    dict: CharDict,
    cfg: RecognizeConfig,
    /// Model calls made so far (one per padded width per batch, more where
    /// a width holds over `max_call_columns`).
    model_calls: u64,
    /// Columns the crops filled, and columns of the model's input (crops
    /// × padded width), so far: the difference is padding.
    columns: (u64, u64),
    /// The input tensor's buffer, kept between calls so a batch writes
    /// into memory already mapped instead of faulting in a fresh one.
    input: Vec<f32>,
}

impl LineRecognizer {
    /// Load `model` with the dict in `dict` and the ONNX Runtime library `ort_lib`.
    pub fn load(model: &Path, dict: &Path, ort_lib: &Path, cfg: RecognizeConfig) -> Result<Self, ModelError> {
        Ok(LineRecognizer {
            dict: CharDict::load(dict)?,
            session: OnnxSession::load(model, ort_lib, &cfg.onnx)?,
            cfg,
            model_calls: 0,
            columns: (0, 0),
            input: Vec::new(),
        })
    }

    /// Load the bundled model (see [`crate::assets`]).
    pub fn from_assets(a: &Assets, cfg: RecognizeConfig) -> Result<Self, ModelError> {
        LineRecognizer::load(&a.rec_model, &a.rec_config, &a.ort_lib, cfg)
    }

    /// The character set.
    pub fn dict(&self) -> &CharDict {
        &self.dict
    }

    /// Model calls made so far: one per padded width present in each
    /// [`LineRecognizer::recognize`] (so one per batch when a batch holds
    /// one width bucket), more where a width's crops hold over
    /// [`RecognizeConfig::max_call_columns`] columns.
    pub fn model_calls(&self) -> u64 {
        self.model_calls
    }

    /// Columns so far: `(filled by the crops, of the model's input)`; the
    /// input's other columns are padding (see [`RecognizeCounts`]).
    pub fn columns(&self) -> (u64, u64) {
        self.columns
    }

    fn scaled_width(&self, img: &RgbImage) -> u32 {
        self.cfg.scaled_width(img.width(), img.height())
    }

    /// The padded width of a crop scaled to `w`: the first step of the
    /// ladder that holds it. Depends on `w` and the config only.
    pub fn padded_width(&self, w: u32) -> u32 {
        padded_width(w, self.cfg.min_width, self.cfg.max_width, self.cfg.bucket_ratio)
    }

    /// The model calls for crops scaled to `widths`: `(padded width, input
    /// indices)`, narrowest first, one per width bucket, split where a
    /// bucket holds over `max_call_columns` columns.
    fn calls(&self, widths: &[u32]) -> Vec<(u32, Vec<usize>)> {
        let mut out: Vec<(u32, Vec<usize>)> = Vec::new();
        let mut order: Vec<usize> = (0..widths.len()).collect();
        order.sort_by_key(|&i| (self.padded_width(widths[i]), i));
        for i in order {
            let pw = self.padded_width(widths[i]);
            let room = (self.cfg.max_call_columns / pw as usize).max(1);
            match out.last_mut() {
                Some((w, b)) if *w == pw && b.len() < room => b.push(i),
                _ => out.push((pw, vec![i])),
            }
        }
        out
    }

    /// Recognise each crop: `(text, confidence)` in input order. Empty crops
    /// read as empty text. A crop's result does not depend on the others.
    pub fn recognize(&mut self, crops: &[&RgbImage]) -> Result<Vec<(String, f32)>, ModelError> {
        let mut out = vec![(String::new(), 0.0); crops.len()];
        let usable: Vec<usize> = (0..crops.len())
            .filter(|&i| crops[i].width() > 0 && crops[i].height() > 0)
            .collect();
        let widths: Vec<u32> = usable.iter().map(|&i| self.scaled_width(crops[i])).collect();
        let h = self.cfg.height;
        for (w, bucket) in self.calls(&widths) {
            let (hu, wu) = (h as usize, w as usize);
            self.model_calls += 1;
            self.columns.0 += bucket.iter().map(|&j| u64::from(widths[j].min(w))).sum::<u64>();
            self.columns.1 += bucket.len() as u64 * u64::from(w);
            let dict = &self.dict;
            // Zero (the buffer's fill) is the normalised mid-grey Paddle pads with.
            let fill = |buf: &mut [f32]| {
                for (n, &j) in bucket.iter().enumerate() {
                    let scaled = resize(crops[usable[j]], widths[j], h);
                    write_bgr_chw(buf, n, (hu, wu), &scaled, [0.5; 3], [0.5; 3]);
                }
            };
            // Decode straight from the runtime's output (no copy of the
            // N × T × classes probabilities).
            let read = |probs: ArrayViewD<'_, f32>| {
                let shape = probs.shape();
                if shape.len() != 3 || shape[0] != bucket.len() || shape[2] < dict.len() + 1 {
                    return Err(format!(
                        "expected [N, T, {}] class probabilities, got {shape:?}; does the dict match the model?",
                        dict.len() + 2
                    ));
                }
                let (t, c) = (shape[1], shape[2]);
                let flat = probs.as_standard_layout();
                let flat = flat.as_slice().unwrap_or(&[]);
                Ok((0..bucket.len())
                    .map(|n| ctc_greedy(&flat[n * t * c..(n + 1) * t * c], t, c, dict))
                    .collect::<Vec<_>>())
            };
            let decoded = self
                .session
                .run_filled(&mut self.input, &[bucket.len(), 3, hu, wu], fill, read)?;
            for (&j, text) in bucket.iter().zip(decoded) {
                out[usable[j]] = text;
            }
        }
        Ok(out)
    }
}

impl LineRecognizer {
    /// Read detected lines: text, confidence and the low-confidence mark
    /// (non-empty text under `min_confidence`), in input order.
    pub fn read_lines(&mut self, lines: &[TextLine]) -> Result<Vec<LineText>, ModelError> {
        // A flipped line is read both ways, the more confident reading
        // kept (`TextLine::flipped`); each reading depends on its crop
        // alone, whatever else is in the batch.
        let back: Vec<(usize, RgbImage)> = lines
            .iter()
            .enumerate()
            .filter(|(_, l)| l.flipped)
            .map(|(i, l)| (i, crate::ocr::orient::turn(&l.crop, 180)))
            .collect();
        let crops: Vec<&RgbImage> = lines
            .iter()
            .map(|l| &*l.crop)
            .chain(back.iter().map(|(_, c)| c))
            .collect();
        let mut texts = self.recognize(&crops)?;
        let unflipped = texts.split_off(lines.len());
        for ((i, _), reading) in back.iter().zip(unflipped) {
            if reading.1 > texts[*i].1 {
                texts[*i] = reading;
            }
        }
        let min = self.cfg.min_confidence;
        Ok(lines
            .iter()
            .zip(texts)
            .map(|(l, (text, confidence))| LineText {
                low_confidence: !text.trim().is_empty() && confidence < min,
                text,
                confidence,
                row: l.row,
                bbox: l.bbox,
            })
            .collect())
    }
}

/// The ladder step for a scaled width `w`: `min_w`, then × `ratio` per step,
/// rounded up to multiples of 8, capped at `max_w` (rounded up to 8).
///
/// ```
/// use rayorch_models::ocr::padded_width;
/// assert_eq!(padded_width(100, 320, 3200, 1.25), 320);
/// assert_eq!(padded_width(321, 320, 3200, 1.25), 400);
/// assert_eq!(padded_width(400, 320, 3200, 1.25), 400);
/// assert_eq!(padded_width(5000, 320, 3200, 1.25), 3200);
/// ```
pub fn padded_width(w: u32, min_w: u32, max_w: u32, ratio: f32) -> u32 {
    let cap = max_w.max(min_w).div_ceil(8) * 8;
    let mut step = min_w.max(8).div_ceil(8) * 8;
    let ratio = if ratio.is_finite() && ratio > 1.01 {
        ratio
    } else {
        1.25
    };
    while step < w && step < cap {
        step = ((step as f32 * ratio).ceil() as u32).div_ceil(8) * 8;
    }
    step.min(cap)
}

/// What a recognition Call's batches cost, summed over its replicas (one
/// `Arc` shared by them, read after the run): model calls, and how much of
/// the model's input was padding.
#[derive(Debug, Default)]
pub struct RecognizeCounts {
    /// Model calls: one per padded width per batch, more where a width
    /// holds over [`RecognizeConfig::max_call_columns`].
    pub calls: AtomicU64,
    /// Columns the crops filled (each crop's width at the model's height).
    pub columns: AtomicU64,
    /// Columns of the model's input (crops × their padded width).
    pub input_columns: AtomicU64,
}

/// [`RecognizeCounts`] read once, for a run's summary.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct RecognizeFigures {
    /// Model calls.
    pub model_calls: u64,
    /// Columns the crops filled.
    pub columns: u64,
    /// Columns of the model's input.
    pub input_columns: u64,
    /// Padded columns as a share of the model's input (0 when none ran).
    pub padded_share: f64,
}

impl RecognizeCounts {
    /// The counts now.
    pub fn figures(&self) -> RecognizeFigures {
        let (columns, input_columns) = (
            self.columns.load(Ordering::Relaxed),
            self.input_columns.load(Ordering::Relaxed),
        );
        RecognizeFigures {
            model_calls: self.calls.load(Ordering::Relaxed),
            columns,
            input_columns,
            padded_share: match input_columns {
                0 => 0.0,
                n => (n - columns.min(n)) as f64 / n as f64,
            },
        }
    }
}

/// The recognition stage: a line crop in, its text out. Crops of one batch
/// may come from any pages and documents.
#[derive(Debug)]
pub struct TextRecognize {
    rec: LineRecognizer,
    /// Where each batch's model calls and columns are added, when counted.
    counts: Option<Arc<RecognizeCounts>>,
}

impl TextRecognize {
    /// Wrap a loaded recogniser.
    pub fn new(rec: LineRecognizer) -> TextRecognize {
        TextRecognize { rec, counts: None }
    }

    /// Also add every batch's model calls and columns to `counts` (shared
    /// by the replicas).
    pub fn counting(mut self, counts: Arc<RecognizeCounts>) -> TextRecognize {
        self.counts = Some(counts);
        self
    }
}

impl Stage for TextRecognize {
    type In = TextLine;
    type Out = LineText;

    fn run(&mut self, batch: Vec<TextLine>, _cx: &StageContext) -> StageResult<LineText> {
        let _span = tracing::debug_span!("text_recognize", lines = batch.len()).entered();
        let (calls, (cols, input)) = (self.rec.model_calls(), self.rec.columns());
        let read = self.rec.read_lines(&batch)?;
        if let Some(c) = &self.counts {
            let (cols_now, input_now) = self.rec.columns();
            c.calls
                .fetch_add(self.rec.model_calls() - calls, Ordering::Relaxed);
            c.columns.fetch_add(cols_now - cols, Ordering::Relaxed);
            c.input_columns.fetch_add(input_now - input, Ordering::Relaxed);
        }
        Ok(read.into_iter().map(Outcome::Ok).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The default ladder pads no crop wider than the narrowest step by
    /// more than its ratio (plus the rounding to 8 columns): 6%.
    #[test]
    fn the_default_ladder_pads_a_crop_by_six_percent_at_most() {
        let cfg = RecognizeConfig::default();
        assert!(cfg.bucket_ratio <= 1.06);
        for w in cfg.min_width..=cfg.max_width {
            let pw = padded_width(w, cfg.min_width, cfg.max_width, cfg.bucket_ratio);
            assert!(pw >= w && pw.is_multiple_of(8), "{w} -> {pw}");
            assert!(pw as f32 <= w as f32 * 1.06 + 8.0, "{w} padded to {pw}");
        }
    }

    #[test]
    fn single_quoted_yaml_scalars() {
        assert_eq!(yaml_scalar("'\"'").as_deref(), Some("\""));
        assert_eq!(yaml_scalar("''''").as_deref(), Some("'"));
        assert_eq!(yaml_scalar("\\").as_deref(), Some("\\"));
        assert_eq!(yaml_scalar("'#'").as_deref(), Some("#"));
    }

    #[test]
    fn ctc_keeps_a_letter_repeated_across_a_blank() {
        let d = CharDict::from_inference_yml("character_dict:\n- l\n- o\n").unwrap();
        let one = |k: usize| {
            let mut r = vec![0.0; 4];
            r[k] = 0.5;
            r
        };
        // l l blank l o space → "llo "
        let probs: Vec<f32> = [1, 1, 0, 1, 2, 3].iter().flat_map(|&k| one(k)).collect();
        assert_eq!(ctc_greedy(&probs, 6, 4, &d).0, "llo ");
        assert_eq!(ctc_greedy(&[], 0, 4, &d), (String::new(), 0.0));
    }
}
