//! Plane geometry for text lines: convex hulls, minimum-area rectangles,
//! polygon offsetting ("unclip"), scoring a map inside a polygon, and cutting
//! a rotated rectangle out of an image as an upright one.
//!
//! Conventions: image coordinates (x right, y down), pixel `(i, j)` covers
//! `[i, i+1) × [j, j+1)` and its centre is `(i + 0.5, j + 0.5)`. A [`Quad`]
//! lists its corners top-left, top-right, bottom-right, bottom-left as the
//! text reads (so `quad[0] → quad[1]` is the reading direction).
//!
//! Invariants: every function is total on finite input (degenerate shapes
//! give empty or zero-sized results, never a panic or a NaN index).

use image::{Rgb, RgbImage};

/// A point `(x, y)`.
pub type Point = [f32; 2];

/// Four corners: top-left, top-right, bottom-right, bottom-left.
pub type Quad = [Point; 4];

/// A rotated rectangle: centre, unit reading direction `u` (its angle is
/// within ±45° of the x axis), extent along `u` (`w`) and across it (`h`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RotRect {
    /// Centre.
    pub c: Point,
    /// Unit vector along the width.
    pub u: Point,
    /// Extent along `u`.
    pub w: f32,
    /// Extent along the normal `(-u.y, u.x)` (pointing down for `u = (1, 0)`).
    pub h: f32,
}

impl RotRect {
    /// The normal to `u`, pointing "down" the text.
    pub fn v(&self) -> Point {
        [-self.u[1], self.u[0]]
    }

    /// Angle of `u` in degrees (positive = clockwise on screen).
    pub fn angle_deg(&self) -> f32 {
        self.u[1].atan2(self.u[0]).to_degrees()
    }

    /// The corners, top-left first, clockwise on screen.
    pub fn quad(&self) -> Quad {
        let (u, v) = (self.u, self.v());
        let (hw, hh) = (self.w / 2.0, self.h / 2.0);
        let at = |a: f32, b: f32| [self.c[0] + u[0] * a + v[0] * b, self.c[1] + u[1] * a + v[1] * b];
        [at(-hw, -hh), at(hw, -hh), at(hw, hh), at(-hw, hh)]
    }

    /// Grow by `d` on every side (the Vatti offset of a rectangle, whose
    /// rounded corners the minimum-area rectangle squares off again).
    pub fn grown(&self, d: f32) -> RotRect {
        RotRect {
            w: (self.w + 2.0 * d).max(0.0),
            h: (self.h + 2.0 * d).max(0.0),
            ..*self
        }
    }

    /// Scale by `(sx, sy)` (map pixels → page pixels). Exact for a
    /// rectangle when `sx == sy`; otherwise the image of the rectangle is a
    /// parallelogram and this returns the rectangle with the same centre,
    /// the scaled reading direction and the scaled side lengths.
    pub fn scaled(&self, sx: f32, sy: f32) -> RotRect {
        let u = [self.u[0] * sx, self.u[1] * sy];
        let v = self.v();
        let v = [v[0] * sx, v[1] * sy];
        let nu = (u[0] * u[0] + u[1] * u[1]).sqrt().max(1e-6);
        let nv = (v[0] * v[0] + v[1] * v[1]).sqrt();
        RotRect {
            c: [self.c[0] * sx, self.c[1] * sy],
            u: [u[0] / nu, u[1] / nu],
            w: self.w * nu,
            h: self.h * nv,
        }
    }
}

fn cross(o: Point, a: Point, b: Point) -> f32 {
    (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0])
}

/// Convex hull (Andrew's monotone chain), counter-clockwise in maths
/// orientation, without repeated or collinear points.
pub fn convex_hull(points: &[Point]) -> Vec<Point> {
    let mut p: Vec<Point> = points
        .iter()
        .copied()
        .filter(|q| q[0].is_finite() && q[1].is_finite())
        .collect();
    p.sort_by(|a, b| a[0].total_cmp(&b[0]).then(a[1].total_cmp(&b[1])));
    p.dedup();
    if p.len() < 3 {
        return p;
    }
    let mut hull: Vec<Point> = Vec::with_capacity(2 * p.len());
    for pass in 0..2 {
        let start = hull.len();
        let iter: Box<dyn Iterator<Item = &Point>> = if pass == 0 {
            Box::new(p.iter())
        } else {
            Box::new(p.iter().rev())
        };
        for &q in iter {
            while hull.len() >= start + 2 && cross(hull[hull.len() - 2], hull[hull.len() - 1], q) <= 0.0 {
                hull.pop();
            }
            hull.push(q);
        }
        hull.pop();
    }
    hull
}

/// The minimum-area enclosing rectangle of `points` (rotating calipers over
/// the hull's edges). `None` for fewer than one point.
///
/// ```
/// use rayorch_models::ocr::geometry::min_area_rect;
/// // A 10 × 2 bar rotated by 30°.
/// let (c, s) = (30f32.to_radians().cos(), 30f32.to_radians().sin());
/// let pts: Vec<[f32; 2]> = [(-5.0, -1.0), (5.0, -1.0), (5.0, 1.0), (-5.0, 1.0)]
///     .iter().map(|&(x, y)| [x * c - y * s, x * s + y * c]).collect();
/// let r = min_area_rect(&pts).unwrap();
/// assert!((r.w - 10.0).abs() < 1e-3 && (r.h - 2.0).abs() < 1e-3);
/// assert!((r.angle_deg() - 30.0).abs() < 1e-2);
/// ```
pub fn min_area_rect(points: &[Point]) -> Option<RotRect> {
    let hull = convex_hull(points);
    if hull.is_empty() {
        return None;
    }
    if hull.len() < 3 {
        let (a, b) = (hull[0], *hull.last().unwrap_or(&hull[0]));
        let d = [b[0] - a[0], b[1] - a[1]];
        let n = (d[0] * d[0] + d[1] * d[1]).sqrt();
        let u = if n > 0.0 { [d[0] / n, d[1] / n] } else { [1.0, 0.0] };
        return Some(upright(RotRect {
            c: [(a[0] + b[0]) / 2.0, (a[1] + b[1]) / 2.0],
            u,
            w: n,
            h: 0.0,
        }));
    }
    let mut best: Option<(f32, RotRect)> = None;
    for i in 0..hull.len() {
        let (a, b) = (hull[i], hull[(i + 1) % hull.len()]);
        let d = [b[0] - a[0], b[1] - a[1]];
        let n = (d[0] * d[0] + d[1] * d[1]).sqrt();
        if n <= 0.0 {
            continue;
        }
        let u = [d[0] / n, d[1] / n];
        let v = [-u[1], u[0]];
        let (mut u0, mut u1, mut v0, mut v1) = (f32::MAX, f32::MIN, f32::MAX, f32::MIN);
        for q in &hull {
            let pu = q[0] * u[0] + q[1] * u[1];
            let pv = q[0] * v[0] + q[1] * v[1];
            u0 = u0.min(pu);
            u1 = u1.max(pu);
            v0 = v0.min(pv);
            v1 = v1.max(pv);
        }
        let area = (u1 - u0) * (v1 - v0);
        if best.as_ref().is_none_or(|(a, _)| area < *a) {
            let (cu, cv) = ((u0 + u1) / 2.0, (v0 + v1) / 2.0);
            let c = [u[0] * cu + v[0] * cv, u[1] * cu + v[1] * cv];
            best = Some((
                area,
                RotRect {
                    c,
                    u,
                    w: u1 - u0,
                    h: v1 - v0,
                },
            ));
        }
    }
    best.map(|(_, r)| upright(r))
}

/// Turn `u` to the side direction nearest the +x axis (within ±45°), swapping
/// `w` and `h` when that is the other side.
fn upright(r: RotRect) -> RotRect {
    let mut r = r;
    // Candidates: ±u, ±v; pick the one with the largest x component.
    let v = r.v();
    let cands = [
        (r.u, false),
        ([-r.u[0], -r.u[1]], false),
        (v, true),
        ([-v[0], -v[1]], true),
    ];
    let (u, swap) = cands
        .into_iter()
        .max_by(|a, b| a.0[0].total_cmp(&b.0[0]).then(b.0[1].total_cmp(&a.0[1])))
        .unwrap_or((r.u, false));
    r.u = u;
    if swap {
        std::mem::swap(&mut r.w, &mut r.h);
    }
    r
}

/// Offset a convex polygon outwards by `d` (mitred corners): each edge moves
/// `d` along its outer normal and consecutive edges meet again. For a
/// rectangle this is exactly [`RotRect::grown`].
pub fn offset_convex(poly: &[Point], d: f32) -> Vec<Point> {
    let n = poly.len();
    if n < 3 {
        return poly.to_vec();
    }
    // Signed area tells the winding; outer normal depends on it.
    let area2: f32 = (0..n)
        .map(|i| cross([0.0, 0.0], poly[i], poly[(i + 1) % n]))
        .sum();
    let sign = if area2 >= 0.0 { 1.0 } else { -1.0 };
    let lines: Vec<(Point, Point)> = (0..n)
        .map(|i| {
            let (a, b) = (poly[i], poly[(i + 1) % n]);
            let e = [b[0] - a[0], b[1] - a[1]];
            let len = (e[0] * e[0] + e[1] * e[1]).sqrt().max(1e-6);
            let nrm = [sign * e[1] / len, -sign * e[0] / len];
            ([a[0] + nrm[0] * d, a[1] + nrm[1] * d], e)
        })
        .collect();
    (0..n)
        .map(|i| {
            let (p, r) = lines[(i + n - 1) % n];
            let (q, s) = lines[i];
            let den = r[0] * s[1] - r[1] * s[0];
            if den.abs() < 1e-9 {
                return q;
            }
            let t = ((q[0] - p[0]) * s[1] - (q[1] - p[1]) * s[0]) / den;
            [p[0] + r[0] * t, p[1] + r[1] * t]
        })
        .collect()
}

/// Area and perimeter of a polygon.
pub fn area_perimeter(poly: &[Point]) -> (f32, f32) {
    let n = poly.len();
    let mut a = 0.0;
    let mut per = 0.0;
    for i in 0..n {
        let (p, q) = (poly[i], poly[(i + 1) % n]);
        a += cross([0.0, 0.0], p, q);
        per += ((q[0] - p[0]).powi(2) + (q[1] - p[1]).powi(2)).sqrt();
    }
    (a.abs() / 2.0, per)
}

/// Mean of a `w × h` row-major map over the pixels whose centres lie inside
/// the convex polygon `poly` (0 when none does).
pub fn mean_inside(map: &[f32], w: usize, h: usize, poly: &[Point]) -> f32 {
    if poly.len() < 3 || map.len() < w * h {
        return 0.0;
    }
    let ymin = poly.iter().map(|p| p[1]).fold(f32::MAX, f32::min);
    let ymax = poly.iter().map(|p| p[1]).fold(f32::MIN, f32::max);
    let j0 = (ymin - 0.5).ceil().max(0.0) as usize;
    let j1 = ((ymax - 0.5).floor() + 1.0).clamp(0.0, h as f32) as usize;
    let (mut sum, mut count) = (0.0f64, 0usize);
    for j in j0..j1 {
        let y = j as f32 + 0.5;
        let (mut xl, mut xr) = (f32::MAX, f32::MIN);
        for k in 0..poly.len() {
            let (a, b) = (poly[k], poly[(k + 1) % poly.len()]);
            if (a[1] <= y && b[1] >= y) || (b[1] <= y && a[1] >= y) {
                let x = if (b[1] - a[1]).abs() < 1e-9 {
                    xl = xl.min(a[0].min(b[0]));
                    a[0].max(b[0])
                } else {
                    a[0] + (y - a[1]) * (b[0] - a[0]) / (b[1] - a[1])
                };
                xl = xl.min(x);
                xr = xr.max(x);
            }
        }
        if xl > xr {
            continue;
        }
        let i0 = (xl - 0.5).ceil().max(0.0) as usize;
        let i1 = ((xr - 0.5).floor() + 1.0).clamp(0.0, w as f32) as usize;
        for &v in map[j * w + i0.min(i1)..j * w + i1].iter() {
            sum += v as f64;
        }
        count += i1.saturating_sub(i0);
    }
    if count == 0 {
        0.0
    } else {
        (sum / count as f64) as f32
    }
}

fn sample(img: &RgbImage, x: f32, y: f32) -> Rgb<u8> {
    // Bilinear with the border replicated (as PaddleOCR's crop does).
    let (w, h) = (img.width() as i64, img.height() as i64);
    let (fx, fy) = (x - 0.5, y - 0.5);
    let (x0, y0) = (fx.floor(), fy.floor());
    let (ax, ay) = (fx - x0, fy - y0);
    let px = |i: i64, j: i64| {
        img.get_pixel(i.clamp(0, w - 1) as u32, j.clamp(0, h - 1) as u32)
            .0
    };
    let (i, j) = (x0 as i64, y0 as i64);
    let (p00, p10, p01, p11) = (px(i, j), px(i + 1, j), px(i, j + 1), px(i + 1, j + 1));
    let mut out = [0u8; 3];
    for c in 0..3 {
        let top = p00[c] as f32 * (1.0 - ax) + p10[c] as f32 * ax;
        let bot = p01[c] as f32 * (1.0 - ax) + p11[c] as f32 * ax;
        out[c] = (top * (1.0 - ay) + bot * ay).round().clamp(0.0, 255.0) as u8;
    }
    Rgb(out)
}

/// Cut the rotated rectangle `r` out of `img` as an upright
/// `round(w) × round(h)` image (bilinear, border replicated). Empty when the
/// image or the rectangle is empty.
pub fn warp_crop(img: &RgbImage, r: &RotRect) -> RgbImage {
    let (ow, oh) = (r.w.round().max(0.0) as u32, r.h.round().max(0.0) as u32);
    if img.width() == 0 || img.height() == 0 || ow == 0 || oh == 0 {
        return RgbImage::new(0, 0);
    }
    let tl = r.quad()[0];
    let (u, v) = (r.u, r.v());
    let (sx, sy) = (r.w / ow as f32, r.h / oh as f32);
    RgbImage::from_fn(ow, oh, |i, j| {
        let (a, b) = ((i as f32 + 0.5) * sx, (j as f32 + 0.5) * sy);
        sample(img, tl[0] + u[0] * a + v[0] * b, tl[1] + u[1] * a + v[1] * b)
    })
}

/// Rotate `img` by `degrees` (positive = clockwise on screen) about its
/// centre, onto a canvas large enough to hold it, `fill` outside (bilinear).
pub fn rotate_image(img: &RgbImage, degrees: f32, fill: Rgb<u8>) -> RgbImage {
    let (w, h) = (img.width() as f32, img.height() as f32);
    let (s, c) = degrees.to_radians().sin_cos();
    // The tolerance keeps quarter turns exact (cos 90° is not 0 in f32).
    let dim = |v: f32| (v - 1e-3).ceil().max(1.0);
    let (nw, nh) = (dim(w * c.abs() + h * s.abs()), dim(w * s.abs() + h * c.abs()));
    rotate_onto(img, degrees, fill, (nw, nh))
}

/// Rotate `img` by `degrees` (positive = clockwise) about its centre onto a
/// canvas of its own size (corners that leave it are cut, `fill` where
/// nothing lands): a page deskewed this way keeps its size and coordinates.
pub fn rotate_image_within(img: &RgbImage, degrees: f32, fill: Rgb<u8>) -> RgbImage {
    rotate_onto(img, degrees, fill, (img.width() as f32, img.height() as f32))
}

fn rotate_onto(img: &RgbImage, degrees: f32, fill: Rgb<u8>, (nw, nh): (f32, f32)) -> RgbImage {
    let (w, h) = (img.width() as f32, img.height() as f32);
    let (s, c) = degrees.to_radians().sin_cos();
    let (cx, cy, ncx, ncy) = (w / 2.0, h / 2.0, nw / 2.0, nh / 2.0);
    RgbImage::from_fn(nw as u32, nh as u32, |i, j| {
        // Inverse map: destination → source.
        let (dx, dy) = (i as f32 + 0.5 - ncx, j as f32 + 0.5 - ncy);
        let (x, y) = (c * dx + s * dy + cx, -s * dx + c * dy + cy);
        if x < 0.0 || y < 0.0 || x >= w || y >= h {
            fill
        } else {
            sample(img, x, y)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hull_of_a_square_with_inner_points() {
        let pts = [
            [0.0, 0.0],
            [2.0, 0.0],
            [2.0, 2.0],
            [0.0, 2.0],
            [1.0, 1.0],
            [1.0, 0.0],
        ];
        let h = convex_hull(&pts);
        assert_eq!(h.len(), 4, "{h:?}");
        assert!(convex_hull(&[]).is_empty());
    }

    #[test]
    fn tall_rect_reads_along_x_with_swapped_sides() {
        let pts = [[0.0, 0.0], [2.0, 0.0], [2.0, 10.0], [0.0, 10.0]];
        let r = min_area_rect(&pts).unwrap();
        assert!((r.w - 2.0).abs() < 1e-4 && (r.h - 10.0).abs() < 1e-4, "{r:?}");
        assert!(r.u[0] > 0.99);
        let q = r.quad();
        assert!(
            (q[0][0] - 0.0).abs() < 1e-4 && (q[0][1] - 0.0).abs() < 1e-4,
            "{q:?}"
        );
        assert!(
            (q[2][0] - 2.0).abs() < 1e-4 && (q[2][1] - 10.0).abs() < 1e-4,
            "{q:?}"
        );
    }

    #[test]
    fn offset_of_a_rectangle_matches_grown() {
        let r = RotRect {
            c: [5.0, 5.0],
            u: [0.8, 0.6],
            w: 6.0,
            h: 2.0,
        };
        let off = offset_convex(&r.quad(), 1.5);
        let g = r.grown(1.5).quad();
        for (a, b) in off.iter().zip(g.iter()) {
            assert!(
                (a[0] - b[0]).abs() < 1e-3 && (a[1] - b[1]).abs() < 1e-3,
                "{off:?} vs {g:?}"
            );
        }
        let (a, p) = area_perimeter(&r.quad());
        assert!((a - 12.0).abs() < 1e-3 && (p - 16.0).abs() < 1e-3);
    }

    #[test]
    fn mean_inside_counts_only_the_polygon() {
        let (w, h) = (10, 10);
        let mut map = vec![0.0; w * h];
        for y in 2..4 {
            for x in 2..8 {
                map[y * w + x] = 1.0;
            }
        }
        let inside = [[2.0, 2.0], [8.0, 2.0], [8.0, 4.0], [2.0, 4.0]];
        assert!((mean_inside(&map, w, h, &inside) - 1.0).abs() < 1e-6);
        let twice = [[2.0, 2.0], [8.0, 2.0], [8.0, 6.0], [2.0, 6.0]];
        assert!((mean_inside(&map, w, h, &twice) - 0.5).abs() < 1e-6);
        assert_eq!(mean_inside(&map, w, h, &[[0.0, 0.0]]), 0.0);
    }

    #[test]
    fn warp_of_an_axis_aligned_rect_is_a_plain_crop() {
        let img = RgbImage::from_fn(8, 6, |x, y| Rgb([(x * 30) as u8, (y * 40) as u8, 7]));
        let r = RotRect {
            c: [4.0, 3.0],
            u: [1.0, 0.0],
            w: 4.0,
            h: 2.0,
        };
        let c = warp_crop(&img, &r);
        assert_eq!(c.dimensions(), (4, 2));
        assert_eq!(c.get_pixel(0, 0), img.get_pixel(2, 2));
        assert_eq!(c.get_pixel(3, 1), img.get_pixel(5, 3));
        let back = rotate_image(&rotate_image(&img, 90.0, Rgb([255; 3])), -90.0, Rgb([255; 3]));
        assert_eq!(back.dimensions(), img.dimensions());
        assert_eq!(back.get_pixel(3, 3), img.get_pixel(3, 3));
    }
}
