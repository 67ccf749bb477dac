//! Time limits for a job's Calls, as flags: every Call that runs third-party
//! code on user bytes (a PDF parser, a renderer, a video decoder) gets a
//! timeout by default, so one input that makes it loop fails alone
//! (its root's failure, kind `timeout`) instead of holding the run for ever.
//!
//! A blocking stage's thread cannot be stopped from outside: past its limit
//! it is abandoned, counted (`threads_abandoned` in the run summary) and a
//! fresh replica takes its place; the engine caps the stuck threads per Call
//! ([`rayorch::Call::max_abandoned_threads`]). Limits scale with the Call's
//! batch size, so a `--render-batch` of 8 gives 8 pages their time.

use std::time::Duration;

use rayorch::Call;
use rayorch::spi::StageKind;

/// `--parse-timeout-s`: flatten into the command line of a job with
/// Calls that parse user bytes one input at a time.
#[derive(clap::Args, Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParseLimit {
    /// Longest one input may take in a Call that parses user bytes (open a
    /// document, read or render a page, decode a clip), in seconds; a batch
    /// gets this times its size. An input that takes longer fails alone
    /// (kind `timeout`) and the run goes on. 0: no limit.
    #[arg(long, default_value_t = 120, value_name = "SECONDS")]
    pub parse_timeout_s: u64,
}

/// `--document-timeout-s`: flatten into the command line of a job with
/// Calls that take a whole input at once.
#[derive(clap::Args, Debug, Clone, Copy, PartialEq, Eq)]
pub struct WholeLimit {
    /// Longest a Call that takes a whole input at once (render every page
    /// of a document, decode a whole video) may take on one, in seconds;
    /// 0: no limit.
    #[arg(long, default_value_t = 1800, value_name = "SECONDS")]
    pub document_timeout_s: u64,
}

/// `--model-timeout-s`: flatten into the command line of a job with
/// model Calls.
#[derive(clap::Args, Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelLimit {
    /// Longest one batch of a model Call (detect, recognise, embed, layout,
    /// classify) may take, in seconds; 0: no limit.
    #[arg(long, default_value_t = 600, value_name = "SECONDS")]
    pub model_timeout_s: u64,
}

/// The limits a job's Calls get. A job's command line has the flag of
/// each kind of Call it has ([`ParseLimit`], [`WholeLimit`],
/// [`ModelLimit`]), never one that would change nothing; a kind it lacks
/// keeps its default here, which none of its Calls reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Timeouts {
    /// See [`ParseLimit`].
    pub parse_timeout_s: u64,
    /// See [`WholeLimit`].
    pub document_timeout_s: u64,
    /// See [`ModelLimit`].
    pub model_timeout_s: u64,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            parse_timeout_s: 120,
            document_timeout_s: 1800,
            model_timeout_s: 600,
        }
    }
}

impl Timeouts {
    /// The limits from a job's flags (`None`: the job has no such Calls).
    pub fn from_flags(parse: Option<ParseLimit>, whole: Option<WholeLimit>, model: ModelLimit) -> Timeouts {
        let d = Timeouts::default();
        Timeouts {
            parse_timeout_s: parse.map_or(d.parse_timeout_s, |p| p.parse_timeout_s),
            document_timeout_s: whole.map_or(d.document_timeout_s, |w| w.document_timeout_s),
            model_timeout_s: model.model_timeout_s,
        }
    }

    /// The limit of one attempt of a parsing Call of batch size `batch`.
    pub fn parse(&self, batch: usize) -> Option<Duration> {
        limit(self.parse_timeout_s, batch)
    }

    /// The limit of one attempt of a model Call.
    pub fn model(&self) -> Option<Duration> {
        limit(self.model_timeout_s, 1)
    }

    /// `call` with the parsing limit for its batch size.
    pub fn parsing<S: StageKind>(&self, call: Call<S>) -> Call<S> {
        let t = self.parse(call.config().batch_size);
        with(call, t)
    }

    /// `call` with the whole-input limit for its batch size.
    pub fn whole<S: StageKind>(&self, call: Call<S>) -> Call<S> {
        let t = limit(self.document_timeout_s, call.config().batch_size);
        with(call, t)
    }

    /// `call` with the model limit.
    pub fn modelling<S: StageKind>(&self, call: Call<S>) -> Call<S> {
        with(call, self.model())
    }
}

fn limit(seconds: u64, batch: usize) -> Option<Duration> {
    (seconds > 0).then(|| Duration::from_secs(seconds).saturating_mul(batch.max(1) as u32))
}

fn with<S: StageKind>(call: Call<S>, t: Option<Duration>) -> Call<S> {
    match t {
        Some(t) => call.timeout(t),
        None => call,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_scale_with_the_batch_and_zero_means_none() {
        let t = Timeouts::default();
        assert_eq!(t.parse(1), Some(Duration::from_secs(120)));
        assert_eq!(t.parse(4), Some(Duration::from_secs(480)));
        assert_eq!(t.model(), Some(Duration::from_secs(600)));
        let off = Timeouts {
            parse_timeout_s: 0,
            document_timeout_s: 0,
            model_timeout_s: 0,
        };
        assert_eq!((off.parse(8), off.model()), (None, None));
        let call = Call::map("render", |x: u32| x).batch_size(3);
        assert_eq!(t.parsing(call).config().timeout, Some(Duration::from_secs(360)));
        let call = Call::map("open", |x: u32| x);
        assert_eq!(off.parsing(call).config().timeout, None);
        let call = Call::map("render", |x: u32| x).batch_size(1);
        assert_eq!(t.whole(call).config().timeout, Some(Duration::from_secs(1800)));
    }
}
