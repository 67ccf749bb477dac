//! The run's stage-window timeline (the RayOrch paper's Figure 7) as an
//! SVG, for any pipeline.
//!
//! One row per replica of each Call, holding one rectangle per batch that
//! replica ran (from the runner's observer: [`SpanLog`]), so gaps are idle
//! time and the picture shows where the time went; each Call's label carries
//! its busy time summed over replicas. Then a row of ticks where roots were
//! written (the job's sink says when), and a dashed line at the end of the
//! run. Written by hand: a
//! few rectangles and lines need no plotting library, and no fonts are
//! measured.

use std::fmt::Write as _;
use std::sync::{Arc, Mutex};

use rayorch::{BatchFinished, Observer, RunSummary};

/// One batch a replica ran, in seconds from the run's start.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Span {
    /// The Call's index in the plan (and in `RunSummary::calls`).
    pub call: usize,
    /// The replica that ran it.
    pub replica: usize,
    /// Start, seconds since the run's start.
    pub start: f64,
    /// End, seconds since the run's start.
    pub end: f64,
    /// Grains in the batch.
    pub size: usize,
}

/// Records every finished batch as a [`Span`]; share the log with
/// [`SpanLog::spans`] after the run.
#[derive(Clone, Default)]
pub struct SpanLog(Arc<Mutex<Vec<Span>>>);

impl SpanLog {
    /// Log one finished batch.
    pub fn record(&self, b: &BatchFinished<'_>) {
        let start = b.started.as_secs_f64();
        let span = Span {
            call: b.call_index,
            replica: b.replica,
            start,
            end: start + b.duration.as_secs_f64(),
            size: b.size,
        };
        self.0.lock().unwrap_or_else(|p| p.into_inner()).push(span);
    }

    /// Every batch logged so far.
    pub fn spans(&self) -> Vec<Span> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl Observer for SpanLog {
    fn batch_finished(&mut self, b: &BatchFinished<'_>) {
        self.record(b);
    }
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

fn nice_step(span: f64) -> f64 {
    let raw = span / 8.0;
    let mag = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag)
}

/// The timeline of a run: `spans` from a [`SpanLog`] observing it, a tick
/// at each time in `written_at` on a row labelled `written_label` (e.g.
/// "documents written").
pub fn svg(
    summary: &RunSummary,
    spans: &[Span],
    written_at: &[f64],
    written_label: &str,
    title: &str,
) -> String {
    let (w, left, right, row, top) = (960.0, 190.0, 30.0, 22.0, 50.0);
    // One row per replica slot of each Call (at least one, so an idle Call shows).
    let lanes: Vec<usize> = summary
        .calls
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let seen = spans.iter().filter(|s| s.call == i).map(|s| s.replica + 1).max();
            c.replicas.max(seen.unwrap_or(0)).max(1)
        })
        .collect();
    let first_lane: Vec<usize> = lanes
        .iter()
        .scan(0, |acc, n| {
            let at = *acc;
            *acc += n;
            Some(at)
        })
        .collect();
    let rows = lanes.iter().sum::<usize>() + 1;
    let h = top + rows as f64 * row + 50.0;
    let end = summary.wall_s.max(1e-3);
    let x = |t: f64| left + (t / end).clamp(0.0, 1.0) * (w - left - right);
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{left}" y="22" font-size="15" font-weight="bold">{}</text>"#,
        escape(title)
    );
    let step = nice_step(end);
    let mut t = 0.0;
    while t <= end + 1e-9 {
        let xt = x(t);
        let _ = writeln!(
            s,
            r##"<line x1="{xt:.1}" y1="{top}" x2="{xt:.1}" y2="{:.1}" stroke="#e4e4e4"/><text x="{xt:.1}" y="{:.1}" text-anchor="middle" fill="#555">{t:.*}</text>"##,
            top + rows as f64 * row,
            top + rows as f64 * row + 16.0,
            if step < 1.0 { 1 } else { 0 }
        );
        t += step;
    }
    let _ = writeln!(
        s,
        r##"<text x="{:.1}" y="{:.1}" text-anchor="middle" fill="#555">seconds since start</text>"##,
        (left + w - right) / 2.0,
        top + rows as f64 * row + 34.0
    );
    let colors = [
        "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#9c755f",
    ];
    for (i, c) in summary.calls.iter().enumerate() {
        for lane in 0..lanes[i] {
            let y = top + (first_lane[i] + lane) as f64 * row;
            let label = if lane == 0 {
                format!("{} (B={}, busy {:.1} s) #{lane}", c.name, c.batch_size, c.busy_s)
            } else {
                format!("#{lane}")
            };
            let _ = writeln!(
                s,
                r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
                left - 8.0,
                y + row / 2.0 + 4.0,
                escape(&label)
            );
        }
    }
    for sp in spans {
        let Some(c) = summary.calls.get(sp.call) else {
            continue;
        };
        let y = top + (first_lane[sp.call] + sp.replica) as f64 * row;
        let (xa, xb) = (x(sp.start), x(sp.end));
        // Sub-pixel batches still show as a hairline.
        let _ = writeln!(
            s,
            r#"<rect class="batch" x="{xa:.2}" y="{:.1}" width="{:.2}" height="{:.1}" fill="{}"><title>{} #{}: {:.3}–{:.3} s, {} grains</title></rect>"#,
            y + 3.0,
            (xb - xa).max(0.5),
            row - 6.0,
            colors[sp.call % colors.len()],
            escape(&c.name),
            sp.replica,
            sp.start,
            sp.end,
            sp.size
        );
    }
    let y = top + (rows - 1) as f64 * row;
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
        left - 8.0,
        y + row / 2.0 + 4.0,
        escape(written_label)
    );
    for &t in written_at {
        let xt = x(t);
        let _ = writeln!(
            s,
            r##"<line x1="{xt:.1}" y1="{:.1}" x2="{xt:.1}" y2="{:.1}" stroke="#333" stroke-width="2"/>"##,
            y + 6.0,
            y + row - 6.0
        );
    }
    let xe = x(end);
    let _ = writeln!(
        s,
        r##"<line x1="{xe:.1}" y1="{:.1}" x2="{xe:.1}" y2="{:.1}" stroke="#c00" stroke-dasharray="5,4"/><text x="{:.1}" y="{:.1}" text-anchor="end" fill="#c00">end {end:.2} s</text>"##,
        top - 8.0,
        top + rows as f64 * row,
        xe - 4.0,
        top - 10.0
    );
    s.push_str("</svg>\n");
    s
}
