//! Progress bars per Domain: documents, pages, lines.
//!
//! Totals grow as the job discovers work: pages and lines are counted as they
//! reach their first Call. The runner's observer (`Bars` in `main.rs`) moves
//! the page and line bars from its per-Domain counts; the sink moves the
//! document bar.

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};

pub struct Progress {
    multi: Option<MultiProgress>,
    pub docs: ProgressBar,
    pub pages: ProgressBar,
    pub lines: ProgressBar,
}

impl Progress {
    pub fn new(total_docs: u64, enabled: bool) -> Progress {
        let style = ProgressStyle::with_template(
            "{prefix:>9} [{bar:32.cyan/blue}] {pos:>6}/{len:<6} {rate:>9} {elapsed:>4}",
        )
        .expect("a valid template")
        .with_key("rate", |s: &ProgressState, w: &mut dyn std::fmt::Write| {
            let _ = write!(w, "{:.1}/s", s.per_sec());
        })
        .progress_chars("=> ");
        let bar = |name: &str, len: u64| {
            ProgressBar::new(len)
                .with_style(style.clone())
                .with_prefix(name.to_string())
        };
        if enabled {
            let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr_with_hz(8));
            let docs = multi.add(bar("documents", total_docs));
            let pages = multi.add(bar("pages", 0));
            let lines = multi.add(bar("lines", 0));
            Progress {
                multi: Some(multi),
                docs,
                pages,
                lines,
            }
        } else {
            Progress {
                multi: None,
                docs: ProgressBar::hidden(),
                pages: ProgressBar::hidden(),
                lines: ProgressBar::hidden(),
            }
        }
    }

    /// Print a line above the bars (or plainly without them).
    pub fn println(&self, msg: impl AsRef<str>) {
        match &self.multi {
            Some(m) => {
                let _ = m.println(msg.as_ref());
            }
            None => println!("{}", msg.as_ref()),
        }
    }

    pub fn finish(&self) {
        for b in [&self.docs, &self.pages, &self.lines] {
            b.abandon();
        }
    }
}
