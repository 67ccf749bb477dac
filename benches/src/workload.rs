//! The long-tail workloads, generated in the repository: MinerU-shaped page
//! counts (lognormal, rounded, clipped to [1, 427], stratified sampling, then
//! a seeded shuffle), written as `multigrain-workload/v1` JSON.
//!
//! The output is byte-identical to the reference generator the workload
//! format was defined with (CPython's `random.Random` and
//! `statistics.NormalDist` arithmetic, `json.dumps` with compact separators),
//! so the named workloads below are the same files the earlier figures were
//! measured on; `tests/scheduling_workloads.rs` pins their bytes. Everything
//! here is plain integer and IEEE arithmetic in the same order as the
//! reference, so it does not depend on the platform beyond `exp`/`ln`/`sqrt`.

/// Shape parameters of a preset.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Shape {
    /// The mean page count the lognormal is fitted to.
    pub target_mean: f64,
    /// The lognormal's sigma.
    pub sigma: f64,
    /// Page counts are clipped to `min_pages..=max_pages`.
    pub min_pages: u32,
    /// See `min_pages`.
    pub max_pages: u32,
}

/// What to generate (the reference generator's flags).
#[derive(Clone, Debug, PartialEq)]
pub struct GenSpec {
    /// "mineru" or "failure".
    pub preset: &'static str,
    /// Documents.
    pub n: usize,
    /// The shuffle's and the draws' seed.
    pub seed: u64,
    /// Stratified (default) or i.i.d. lognormal draws.
    pub stratified: bool,
    /// How many of the largest documents are poisoned.
    pub fail_largest: usize,
}

impl GenSpec {
    /// A named workload: `mineru-N` (seed 7) or `failure-N` (seed 7, the 99
    /// largest poisoned); the names of the files the figures were made on.
    pub fn named(name: &str) -> Option<GenSpec> {
        let (preset, n) = name.split_once('-')?;
        let n: usize = n.parse().ok().filter(|&n| n >= 1)?;
        let (preset, fail_largest) = match preset {
            "mineru" => ("mineru", 0),
            "failure" => ("failure", 99),
            _ => return None,
        };
        Some(GenSpec {
            preset,
            n,
            seed: 7,
            stratified: true,
            fail_largest,
        })
    }

    /// The preset's shape parameters.
    pub fn shape(&self) -> Shape {
        match self.preset {
            // MinerU corpus: 3,689 PDFs, 174,744 pages, 1..427 pages per PDF.
            "mineru" => Shape {
                target_mean: 174_744.0 / 3_689.0,
                sigma: 0.9,
                min_pages: 1,
                max_pages: 427,
            },
            // Failure trace: 1,885 PDFs, 45,507 pages, the 99 largest hold ~52%.
            _ => Shape {
                target_mean: 45_507.0 / 1_885.0,
                sigma: 1.9,
                min_pages: 1,
                max_pages: 427,
            },
        }
    }
}

/// MT19937 seeded the way CPython seeds `random.Random(int)`.
struct Mt {
    s: [u32; 624],
    i: usize,
}

impl Mt {
    fn new(seed: u64) -> Mt {
        // CPython: the seed's 32-bit words, least significant first (0 -> [0]).
        let key: Vec<u32> = if seed >> 32 == 0 {
            vec![seed as u32]
        } else {
            vec![seed as u32, (seed >> 32) as u32]
        };
        let mut m = Mt { s: [0; 624], i: 624 };
        m.s[0] = 19_650_218;
        for k in 1..624 {
            let p = m.s[k - 1];
            m.s[k] = 1_812_433_253u32
                .wrapping_mul(p ^ (p >> 30))
                .wrapping_add(k as u32);
        }
        let (mut i, mut j) = (1usize, 0usize);
        for _ in 0..624.max(key.len()) {
            let p = m.s[i - 1];
            m.s[i] = (m.s[i] ^ (p ^ (p >> 30)).wrapping_mul(1_664_525))
                .wrapping_add(key[j])
                .wrapping_add(j as u32);
            i += 1;
            j += 1;
            if i >= 624 {
                m.s[0] = m.s[623];
                i = 1;
            }
            if j >= key.len() {
                j = 0;
            }
        }
        for _ in 0..623 {
            let p = m.s[i - 1];
            m.s[i] = (m.s[i] ^ (p ^ (p >> 30)).wrapping_mul(1_566_083_941)).wrapping_sub(i as u32);
            i += 1;
            if i >= 624 {
                m.s[0] = m.s[623];
                i = 1;
            }
        }
        m.s[0] = 0x8000_0000;
        m
    }

    fn next_u32(&mut self) -> u32 {
        if self.i >= 624 {
            for k in 0..624 {
                let y = (self.s[k] & 0x8000_0000) | (self.s[(k + 1) % 624] & 0x7fff_ffff);
                let mag = if y & 1 == 1 { 0x9908_b0df } else { 0 };
                self.s[k] = self.s[(k + 397) % 624] ^ (y >> 1) ^ mag;
            }
            self.i = 0;
        }
        let mut y = self.s[self.i];
        self.i += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^ (y >> 18)
    }

    /// `random.random()`: 53 random bits in [0, 1).
    fn random(&mut self) -> f64 {
        let a = f64::from(self.next_u32() >> 5);
        let b = f64::from(self.next_u32() >> 6);
        (a * 67_108_864.0 + b) * (1.0 / 9_007_199_254_740_992.0)
    }

    /// `random._randbelow(n)` for `n < 2^32`: rejection on `bit_length(n)` bits.
    fn below(&mut self, n: u32) -> u32 {
        let k = 32 - n.leading_zeros();
        loop {
            let r = self.next_u32() >> (32 - k);
            if r < n {
                return r;
            }
        }
    }

    /// `random.gauss(0, 1)` for the i.i.d. sampler, with the reference's
    /// pairwise caching (Box–Muller).
    fn gauss(&mut self, cache: &mut Option<f64>) -> f64 {
        if let Some(z) = cache.take() {
            return z;
        }
        let x2pi = self.random() * std::f64::consts::TAU;
        let g2rad = (-2.0 * (1.0 - self.random()).ln()).sqrt();
        *cache = Some(x2pi.sin() * g2rad);
        x2pi.cos() * g2rad
    }
}

/// Wichura's AS241 coefficients, highest power first (as published).
#[expect(
    clippy::excessive_precision,
    reason = "the coefficients as published, digit for digit"
)]
const CENTRAL: ([f64; 8], [f64; 8]) = (
    [
        2.5090809287301226727e+3,
        3.3430575583588128105e+4,
        6.7265770927008700853e+4,
        4.5921953931549871457e+4,
        1.3731693765509461125e+4,
        1.9715909503065514427e+3,
        1.3314166789178437745e+2,
        3.3871328727963666080e+0,
    ],
    [
        5.2264952788528545610e+3,
        2.8729085735721942674e+4,
        3.9307895800092710610e+4,
        2.1213794301586595867e+4,
        5.3941960214247511077e+3,
        6.8718700749205790830e+2,
        4.2313330701600911252e+1,
        1.0,
    ],
);
#[expect(
    clippy::excessive_precision,
    reason = "the coefficients as published, digit for digit"
)]
const INTERMEDIATE: ([f64; 8], [f64; 8]) = (
    [
        7.74545014278341407640e-4,
        2.27238449892691845833e-2,
        2.41780725177450611770e-1,
        1.27045825245236838258e+0,
        3.64784832476320460504e+0,
        5.76949722146069140550e+0,
        4.63033784615654529590e+0,
        1.42343711074968357734e+0,
    ],
    [
        1.05075007164441684324e-9,
        5.47593808499534494600e-4,
        1.51986665636164571966e-2,
        1.48103976427480074590e-1,
        6.89767334985100004550e-1,
        1.67638483018380384940e+0,
        2.05319162663775882187e+0,
        1.0,
    ],
);
#[expect(
    clippy::excessive_precision,
    reason = "the coefficients as published, digit for digit"
)]
const TAIL: ([f64; 8], [f64; 8]) = (
    [
        2.01033439929228813265e-7,
        2.71155556874348757815e-5,
        1.24266094738807843860e-3,
        2.65321895265761230930e-2,
        2.96560571828504891230e-1,
        1.78482653991729133580e+0,
        5.46378491116411436990e+0,
        6.65790464350110377720e+0,
    ],
    [
        2.04426310338993978564e-15,
        1.42151175831644588870e-7,
        1.84631831751005468180e-5,
        7.86869131145613259100e-4,
        1.48753612908506148525e-2,
        1.36929880922735805310e-1,
        5.99832206555887937690e-1,
        1.0,
    ],
);

/// Horner's rule, `((c0·r + c1)·r + c2)…`: the reference's evaluation order.
fn horner(c: &[f64; 8], r: f64) -> f64 {
    c[1..].iter().fold(c[0], |acc, &k| acc * r + k)
}

/// Standard normal quantile (AS241), as `statistics.NormalDist().inv_cdf`.
fn inv_cdf(p: f64) -> f64 {
    let q = p - 0.5;
    if q.abs() <= 0.425 {
        let r = 0.180625 - q * q;
        return horner(&CENTRAL.0, r) * q / horner(&CENTRAL.1, r);
    }
    let r = if q <= 0.0 { p } else { 1.0 - p };
    let r = (-r.ln()).sqrt();
    let (c, r) = if r <= 5.0 {
        (&INTERMEDIATE, r - 1.6)
    } else {
        (&TAIL, r - 5.0)
    };
    let x = horner(&c.0, r) / horner(&c.1, r);
    if q < 0.0 { -x } else { x }
}

fn page_count(mu: f64, sigma: f64, z: f64, s: &Shape) -> u32 {
    // Python's round() is round-half-even.
    let v = (mu + sigma * z).exp().round_ties_even();
    (v.min(f64::from(s.max_pages)) as u32).max(s.min_pages)
}

/// The `mu` whose clipped mean is `target_mean` (bisection on a quantile grid).
fn solve_mu(s: &Shape) -> f64 {
    const GRID: usize = 20_000;
    let zs: Vec<f64> = (0..GRID)
        .map(|i| inv_cdf((i as f64 + 0.5) / GRID as f64))
        .collect();
    let clipped_mean = |mu: f64| {
        let total: u64 = zs.iter().map(|&z| u64::from(page_count(mu, s.sigma, z, s))).sum();
        total as f64 / GRID as f64
    };
    let (mut a, mut b) = (-10.0f64, 15.0f64);
    for _ in 0..70 {
        let m = (a + b) / 2.0;
        if clipped_mean(m) < s.target_mean {
            a = m;
        } else {
            b = m;
        }
    }
    (a + b) / 2.0
}

/// Page counts of the `n` documents, in source order.
pub fn sample(g: &GenSpec) -> (f64, Vec<u32>) {
    let s = g.shape();
    let mu = solve_mu(&s);
    let mut rng = Mt::new(g.seed);
    let mut out: Vec<u32> = Vec::with_capacity(g.n);
    if g.stratified {
        for i in 0..g.n {
            let u = (i as f64 + rng.random()) / g.n as f64;
            let u = u.clamp(1e-12, 1.0 - 1e-12);
            out.push(page_count(mu, s.sigma, inv_cdf(u), &s));
        }
        for i in (1..out.len()).rev() {
            let j = rng.below(i as u32 + 1) as usize;
            out.swap(i, j);
        }
    } else {
        let mut cache = None;
        for _ in 0..g.n {
            let z = rng.gauss(&mut cache);
            out.push(page_count(mu, s.sigma, z, &s));
        }
    }
    (mu, out)
}

/// Python's `repr(float)`: shortest round-trip digits, `.0` on integers,
/// exponent form outside [1e-4, 1e16).
fn py_float(x: f64) -> String {
    let a = x.abs();
    if a != 0.0 && !(1e-4..1e16).contains(&a) {
        let e = format!("{x:e}");
        let (m, exp) = e.split_once('e').expect("exponent form");
        let exp: i32 = exp.parse().expect("integer exponent");
        let sign = if exp < 0 { '-' } else { '+' };
        return format!("{m}e{sign}{:02}", exp.abs());
    }
    let s = format!("{x}");
    if s.contains('.') { s } else { format!("{s}.0") }
}

/// Python's `round(x, digits)` (correctly rounded decimal, then the nearest double).
fn py_round(x: f64, digits: usize) -> f64 {
    format!("{x:.digits$}").parse().expect("a decimal")
}

fn percentile(sorted: &[u32], p: f64) -> u32 {
    let k = ((p / 100.0 * sorted.len() as f64).ceil() as usize).max(1);
    sorted[k - 1]
}

/// The workload file, byte for byte.
pub fn generate(g: &GenSpec) -> String {
    let s = g.shape();
    let (mu, pages) = sample(g);
    let mut sorted = pages.clone();
    sorted.sort_unstable();
    let n = pages.len();
    let total: u64 = pages.iter().map(|&p| u64::from(p)).sum();
    let top = ((0.0525 * n as f64).round_ties_even() as usize).max(1);
    let top_pages: u64 = sorted.iter().rev().take(top).map(|&p| u64::from(p)).sum();
    let mut o = String::with_capacity(64 + n * 24);
    o.push_str(&format!(
        "{{\"format\":\"multigrain-workload/v1\",\"generator\":{{\"preset\":\"{}\",\"seed\":{},\"sampler\":\"{}\",\"distribution\":\"lognormal, rounded, clipped\",\"mu\":{},\"sigma\":{},\"target_mean\":{},\"min_pages\":{},\"max_pages\":{}}},",
        g.preset,
        g.seed,
        if g.stratified { "stratified" } else { "iid" },
        py_float(py_round(mu, 6)),
        py_float(s.sigma),
        py_float(py_round(s.target_mean, 6)),
        s.min_pages,
        s.max_pages
    ));
    o.push_str(&format!(
        "\"stats\":{{\"docs\":{n},\"pages\":{total},\"mean\":{},\"min\":{},\"max\":{},\"p10\":{},\"p25\":{},\"p50\":{},\"p75\":{},\"p90\":{},\"p95\":{},\"p99\":{},\"docs_at_max_cap\":{},\"top_5.25pct_docs\":{top},\"top_5.25pct_page_share\":{},\"docs_le_48_pages\":{}}},",
        py_float(py_round(total as f64 / n as f64, 3)),
        sorted[0],
        sorted[n - 1],
        percentile(&sorted, 10.0),
        percentile(&sorted, 25.0),
        percentile(&sorted, 50.0),
        percentile(&sorted, 75.0),
        percentile(&sorted, 90.0),
        percentile(&sorted, 95.0),
        percentile(&sorted, 99.0),
        pages.iter().filter(|&&p| p == s.max_pages).count(),
        py_float(py_round(top_pages as f64 / total as f64, 4)),
        pages.iter().filter(|&&p| p <= 48).count(),
    ));
    o.push_str(&format!(
        "\"pipeline\":{{\"render_s_per_page\":{},\"ocr_a\":{},\"ocr_b\":{},\"batch\":48,\"workers\":4,\"upload_s\":{},\"render_workers\":2,\"upload_workers\":2,\"payload_bytes\":0}},\"fail_largest\":{},\"docs\":[",
        py_float(0.001),
        py_float(0.02),
        py_float(0.002),
        py_float(0.01),
        g.fail_largest
    ));
    for (i, p) in pages.iter().enumerate() {
        if i > 0 {
            o.push(',');
        }
        o.push_str(&format!("{{\"doc_id\":{i},\"pages\":{p}}}"));
    }
    o.push_str("]}\n");
    o
}

/// 64-bit FNV-1a, to pin generated bytes in a test without a hashing crate.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}
