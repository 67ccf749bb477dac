//! Progress bars per Domain, for any pipeline, moved by the run's observer.
//!
//! One bar per Domain the job names: the root Domain's bar has the number of
//! roots as its length from the start; a child Domain's length grows as the
//! run discovers work (Entities that reached the Domain's first Call) and
//! its position counts the Entities that ended (done, failed or
//! suppressed), both from [`DomainCounts`]. Lines printed with
//! [`Progress::println`] appear above the bars (or plainly without them).
//!
//! ```
//! use rayorch::prelude::*;
//! use rayorch_kit::progress::Progress;
//! #[derive(Domain)] struct Doc;
//! #[derive(Domain)] #[domain(parent = Doc)] struct Page;
//! let bars = Progress::new(false).root::<Doc>("documents", 2).domain::<Page>("pages").shared();
//! let observer = bars.observer(); // pass to `Runner::observe`
//! # let _ = observer;
//! bars.finish();
//! ```

use std::sync::Arc;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};
use rayorch::{Domain, DomainCounts, Observer};

/// The bars of one run.
pub struct Progress {
    multi: Option<MultiProgress>,
    style: ProgressStyle,
    bars: Vec<(&'static str, ProgressBar)>,
}

impl Progress {
    /// No bars yet; `enabled: false` draws nothing (lines print plainly).
    pub fn new(enabled: bool) -> Progress {
        let style = ProgressStyle::with_template(
            "{prefix:>9} [{bar:32.cyan/blue}] {pos:>6}/{len:<6} {rate:>9} {elapsed:>4}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .with_key("rate", |s: &ProgressState, w: &mut dyn std::fmt::Write| {
            let _ = write!(w, "{:.1}/s", s.per_sec());
        })
        .progress_chars("=> ");
        Progress {
            multi: enabled.then(|| MultiProgress::with_draw_target(ProgressDrawTarget::stderr_with_hz(8))),
            style,
            bars: Vec::new(),
        }
    }

    fn bar(mut self, domain: &'static str, label: &str, len: u64) -> Progress {
        let bar = match &self.multi {
            Some(m) => m.add(
                ProgressBar::new(len)
                    .with_style(self.style.clone())
                    .with_prefix(label.to_string()),
            ),
            // Hidden bars keep their counts (tests and `--no-progress` runs read them).
            None => ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::hidden()),
        };
        self.bars.push((domain, bar));
        self
    }

    /// A bar for the root Domain `D`, `roots` long.
    pub fn root<D: Domain>(self, label: &str, roots: u64) -> Progress {
        self.bar(D::NAME, label, roots)
    }

    /// A bar for the child Domain `D`; its length grows with the work found.
    pub fn domain<D: Domain>(self, label: &str) -> Progress {
        self.bar(D::NAME, label, 0)
    }

    /// Share the bars between the observer and the job's sink.
    pub fn shared(self) -> Arc<Progress> {
        Arc::new(self)
    }

    /// The observer that moves the bars (pass it to `Runner::observe`).
    pub fn observer(self: &Arc<Self>) -> ProgressObserver {
        ProgressObserver(self.clone())
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

    /// Apply one set of per-Domain counts.
    pub fn update(&self, counts: &[DomainCounts]) {
        for c in counts {
            let Some((_, bar)) = self.bars.iter().find(|(d, _)| *d == c.domain) else {
                continue;
            };
            let ended = c.done + c.failed + c.suppressed;
            if bar.length().is_none_or(|l| l < c.published) {
                bar.set_length(c.published);
            }
            bar.set_position(ended.min(bar.length().unwrap_or(ended)));
        }
    }

    /// Leave the bars where they are (the run ended).
    pub fn finish(&self) {
        for (_, b) in &self.bars {
            b.abandon();
        }
    }
}

/// Moves a [`Progress`] from the run's per-Domain counts.
pub struct ProgressObserver(Arc<Progress>);

impl Observer for ProgressObserver {
    fn domains(&mut self, counts: &[DomainCounts]) {
        self.0.update(counts);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    rayorch::domain!(Doc);

    #[test]
    fn bars_follow_the_counts_and_never_pass_their_length() {
        let p = Progress::new(false).root::<Doc>("documents", 5);
        let counts = |published, done| DomainCounts {
            domain: "Doc",
            published,
            done,
            ..DomainCounts::default()
        };
        p.update(&[counts(2, 1)]);
        let bar = &p.bars[0].1;
        assert_eq!((bar.length(), bar.position()), (Some(5), 1));
        p.update(&[counts(7, 6)]);
        assert_eq!((bar.length(), bar.position()), (Some(7), 6));
    }
}
