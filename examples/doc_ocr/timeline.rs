//! The stage-window timeline (the RayOrch paper's Figure 7) as an SVG.
//!
//! One bar per Call from its first batch start to its last batch end
//! (concurrent windows overlap rather than add), labelled with its busy time
//! summed over replicas; a row of ticks where documents were written; a
//! dashed line at the end of the run. Written by hand: a few rectangles and
//! lines need no plotting library, and no fonts are measured.

use std::fmt::Write as _;

use rayorch::RunSummary;

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

pub fn svg(summary: &RunSummary, written_at: &[f64], title: &str) -> String {
    let (w, left, right, row, top) = (960.0, 170.0, 30.0, 30.0, 50.0);
    let rows = summary.calls.len() + 1;
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
        let y = top + i as f64 * row;
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{} (B={}, ×{})</text>"#,
            left - 8.0,
            y + row / 2.0 + 4.0,
            escape(&c.name),
            c.batch_size,
            c.replicas
        );
        if let (Some(a), Some(b)) = (c.window_start_s, c.window_end_s) {
            let (xa, xb) = (x(a), x(b).max(x(a) + 1.0));
            let _ = writeln!(
                s,
                r#"<rect x="{xa:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{}" opacity="0.8"><title>{}: {a:.2}–{b:.2} s, busy {:.2} s, {} batches, mean {:.1} ({:.0}% full)</title></rect>"#,
                y + 5.0,
                xb - xa,
                row - 10.0,
                colors[i % colors.len()],
                escape(&c.name),
                c.busy_s,
                c.rpcs,
                c.mean_batch,
                c.fill * 100.0
            );
            let _ = writeln!(
                s,
                r#"<text x="{:.1}" y="{:.1}" fill="white" font-size="11">busy {:.1} s</text>"#,
                xa + 4.0,
                y + row / 2.0 + 4.0,
                c.busy_s
            );
        }
    }
    let y = top + summary.calls.len() as f64 * row;
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="end">documents written</text>"#,
        left - 8.0,
        y + row / 2.0 + 4.0
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
