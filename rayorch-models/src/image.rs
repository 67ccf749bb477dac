//! Pages as pixels, shared by every family: [`PageImage`] (a rendered or
//! decoded page), and the plumbing of the ONNX stages (resizing, cropping
//! and packing images into the NCHW float tensors Paddle models expect).
//!
//! Images are behind `Arc`: a Port value read by two consumers is cloned, and
//! cloning a page must not copy its pixels.

use std::sync::Arc;

use image::RgbImage;

/// One rendered page.
#[derive(Clone, Debug)]
pub struct PageImage {
    /// The document's name.
    pub doc: Arc<str>,
    /// Zero-based page number.
    pub page: usize,
    /// The pixels (RGB, white background).
    pub image: Arc<RgbImage>,
    /// The resolution it was rendered at.
    pub dpi: f32,
}

/// Resize with a bilinear filter (what Paddle's `cv2.resize` default does).
#[cfg(feature = "ocr")]
pub(crate) fn resize(img: &RgbImage, w: u32, h: u32) -> RgbImage {
    if img.width() == w && img.height() == h {
        return img.clone();
    }
    image::imageops::resize(img, w.max(1), h.max(1), image::imageops::FilterType::Triangle)
}

/// Cut `[x0, y0, x1, y1)` out of `img` (clamped to the image).
#[cfg(feature = "layout")]
pub(crate) fn crop(img: &RgbImage, b: [u32; 4]) -> RgbImage {
    let x0 = b[0].min(img.width());
    let y0 = b[1].min(img.height());
    let x1 = b[2].clamp(x0, img.width());
    let y1 = b[3].clamp(y0, img.height());
    image::imageops::crop_imm(img, x0, y0, x1 - x0, y1 - y0).to_image()
}

/// Write `img` into slot `n` of an `[N, 3, H, W]` buffer (row-major), in BGR
/// channel order as Paddle models were trained, as `(px / 255 - mean[c]) / std[c]`.
/// Pixels outside `img` keep whatever the buffer holds (the padding).
#[cfg(feature = "ocr")]
pub(crate) fn write_bgr_chw(
    buf: &mut [f32],
    n: usize,
    (h, w): (usize, usize),
    img: &RgbImage,
    mean: [f32; 3],
    std: [f32; 3],
) {
    let plane = h * w;
    let base = n * 3 * plane;
    let (iw, ih) = (img.width() as usize, img.height() as usize);
    for y in 0..ih.min(h) {
        for x in 0..iw.min(w) {
            let p = img.get_pixel(x as u32, y as u32).0;
            // BGR: channel 0 is blue.
            for (c, v) in [p[2], p[1], p[0]].into_iter().enumerate() {
                buf[base + c * plane + y * w + x] = (v as f32 / 255.0 - mean[c]) / std[c];
            }
        }
    }
}
