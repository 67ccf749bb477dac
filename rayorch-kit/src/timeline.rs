//! The run's stage-window timeline (the RayOrch paper's Figure 7) as an
//! SVG, for any pipeline.
//!
//! One row per replica of each Call, holding one rectangle per batch that
//! replica ran (from the runner's observer: [`SpanLog`]; on a long run,
//! batches close together share a rectangle), so gaps are idle time and the
//! picture shows where the time went; each Call's label carries
//! its busy time summed over replicas. Then a row of ticks where roots were
//! written (the job's sink says when), and a dashed line at the end of the
//! run. Written by hand: a
//! few rectangles and lines need no plotting library, and no fonts are
//! measured.

use std::fmt::Write as _;
use std::sync::{Arc, Mutex};

use rayorch::{BatchFinished, Observer, RunSummary};

/// Batches one replica ran back to back, in seconds from the run's start
/// (one batch, or several merged: see [`SpanLog`]).
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
    /// Grains in its batches.
    pub size: usize,
    /// Batches merged into it.
    pub batches: usize,
}

/// The most spans one replica's row keeps ([`SpanLog`]); the picture is
/// 960 pixels wide, so more would not show.
pub const SPANS_PER_REPLICA: usize = 1024;

/// One replica's row: its spans, and the gap below which a new batch joins
/// the last span.
#[derive(Default)]
struct Lane {
    call: usize,
    replica: usize,
    spans: Vec<Span>,
    gap: f64,
}

impl Lane {
    fn push(&mut self, span: Span) {
        join(&mut self.spans, span, self.gap);
        // Full: merge across wider gaps until half the row is left, so
        // the row's memory stays bounded however long the run.
        while self.spans.len() > SPANS_PER_REPLICA {
            self.gap = (self.gap * 2.0).max(1e-3);
            for s in std::mem::take(&mut self.spans) {
                join(&mut self.spans, s, self.gap);
            }
        }
    }
}

/// `span` onto the end of `spans`: merged into the last one when it starts
/// within `gap` of its end.
fn join(spans: &mut Vec<Span>, span: Span, gap: f64) {
    match spans.last_mut() {
        Some(last) if span.start - last.end <= gap => {
            last.end = last.end.max(span.end);
            last.size += span.size;
            last.batches += span.batches;
        }
        _ => spans.push(span),
    }
}

/// Records every finished batch into its replica's row; share the log with
/// [`SpanLog::spans`] after the run. Memory does not grow with the run: a
/// row holds at most [`SPANS_PER_REPLICA`] spans; past that, batches
/// separated by less than a gap (doubled each time the row fills) become
/// one span, as the picture would draw them anyway.
#[derive(Clone, Default)]
pub struct SpanLog(Arc<Mutex<Vec<Lane>>>);

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
            batches: 1,
        };
        let mut lanes = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let at = lanes
            .iter()
            .position(|l| l.call == span.call && l.replica == span.replica);
        let lane = match at {
            Some(i) => &mut lanes[i],
            None => {
                lanes.push(Lane {
                    call: span.call,
                    replica: span.replica,
                    ..Lane::default()
                });
                lanes.last_mut().expect("just pushed")
            }
        };
        lane.push(span);
    }

    /// Every span logged so far, row by row.
    pub fn spans(&self) -> Vec<Span> {
        let lanes = self.0.lock().unwrap_or_else(|p| p.into_inner());
        lanes.iter().flat_map(|l| l.spans.iter().copied()).collect()
    }
}

impl Observer for SpanLog {
    fn batch_finished(&mut self, b: &BatchFinished<'_>) {
        self.record(b);
    }
}

/// The times roots were written, for the timeline's ticks and the summary,
/// in memory that does not grow with the run: every time up to
/// [`SPANS_PER_REPLICA`] of them, then every second one kept, then every
/// fourth, … (evenly by count); the first time and the count stay exact.
#[derive(Clone, Debug, Default)]
pub struct Ticks {
    times: Vec<f64>,
    stride: usize,
    count: usize,
    first: Option<f64>,
}

impl Ticks {
    /// Note one root written at `t` (seconds since the start).
    pub fn push(&mut self, t: f64) {
        self.first.get_or_insert(t);
        let stride = self.stride.max(1);
        if self.count.is_multiple_of(stride) {
            self.times.push(t);
        }
        self.count += 1;
        if self.times.len() > SPANS_PER_REPLICA {
            let kept: Vec<f64> = self.times.iter().copied().step_by(2).collect();
            self.times = kept;
            self.stride = stride * 2;
        }
    }

    /// The times kept, in order.
    pub fn times(&self) -> &[f64] {
        &self.times
    }

    /// The first time noted.
    pub fn first(&self) -> Option<f64> {
        self.first
    }

    /// How many were noted.
    pub fn count(&self) -> usize {
        self.count
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
            r#"<rect class="batch" x="{xa:.2}" y="{:.1}" width="{:.2}" height="{:.1}" fill="{}"><title>{} #{}: {:.3}–{:.3} s, {} batches, {} grains</title></rect>"#,
            y + 3.0,
            (xb - xa).max(0.5),
            row - 6.0,
            colors[sp.call % colors.len()],
            escape(&c.name),
            sp.replica,
            sp.start,
            sp.end,
            sp.batches,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replica_row_stays_bounded_and_keeps_every_batch_counted() {
        let mut lane = Lane::default();
        // 100,000 batches of 3 grains, 1 ms each, 0.2 ms apart; every
        // hundredth followed by a second of idle time.
        let mut t = 0.0;
        for i in 0..100_000 {
            lane.push(Span {
                call: 0,
                replica: 0,
                start: t,
                end: t + 1e-3,
                size: 3,
                batches: 1,
            });
            t += 1.2e-3 + if i % 100 == 99 { 1.0 } else { 0.0 };
        }
        assert!(lane.spans.len() <= SPANS_PER_REPLICA, "{}", lane.spans.len());
        assert_eq!(lane.spans.iter().map(|s| s.batches).sum::<usize>(), 100_000);
        assert_eq!(lane.spans.iter().map(|s| s.size).sum::<usize>(), 300_000);
        assert_eq!(lane.spans[0].start, 0.0);
        assert!((lane.spans.last().unwrap().end - (t - 1.0 - 1.2e-3 + 1e-3)).abs() < 1e-6);
        // The second-long idle gaps still show: no span crosses one.
        assert!(
            lane.spans.iter().all(|s| s.end - s.start < 1.0),
            "{:?}",
            &lane.spans[..2]
        );
        assert!(
            lane.spans.len() >= 1000,
            "one span per busy stretch: {}",
            lane.spans.len()
        );

        // A short run keeps one span per batch.
        let mut short = Lane::default();
        for i in 0..10 {
            let start = i as f64 * 0.01;
            short.push(Span {
                call: 0,
                replica: 0,
                start,
                end: start + 0.005,
                size: 1,
                batches: 1,
            });
        }
        assert_eq!(short.spans.len(), 10);
    }

    #[test]
    fn ticks_keep_the_first_time_the_count_and_an_even_sample() {
        let mut ticks = Ticks::default();
        for i in 0..10 {
            ticks.push(i as f64);
        }
        assert_eq!(ticks.times(), (0..10).map(f64::from).collect::<Vec<_>>());
        for i in 10..1_000_000 {
            ticks.push(i as f64);
        }
        assert_eq!((ticks.count(), ticks.first()), (1_000_000, Some(0.0)));
        let t = ticks.times();
        assert!(
            t.len() <= SPANS_PER_REPLICA && t.len() > SPANS_PER_REPLICA / 2,
            "{}",
            t.len()
        );
        // Evenly spaced by count.
        let step = t[1] - t[0];
        assert!(t.windows(2).all(|w| w[1] - w[0] == step), "{step}");
    }
}
