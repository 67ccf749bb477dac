//! The job's sink: every video is written the moment it is complete.
//!
//! - `videos.jsonl`: one line per video (the full record), flushed at once;
//! - `videos.parquet`: one row per video, a row group every few videos,
//!   readable once the run has closed it;
//! - `failures.jsonl`: one line per file that did not complete, with the cause.
//!
//! With `--out` an object-store URL (feature `store`) the same three are
//! immutable segments committed exactly once (`videos.jsonl`,
//! `failures.jsonl`, `videos.parquet` per commit, each commit record naming
//! its videos: `rayorch_kit::store::outputs`).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use rayorch::sink::Sink;
use rayorch::{BoxError, Item, Output, RootOutcome};
use rayorch_kit::names::RootNames;
use rayorch_kit::parquet::ParquetFile;
use rayorch_kit::progress::Progress;
use rayorch_kit::timeline::Ticks;
use serde::Serialize;

use crate::VideoRecord;
use crate::output::VideoRows;

#[derive(Serialize)]
struct VideoLine<'a> {
    key: u64,
    #[serde(flatten)]
    video: &'a VideoRecord,
}

/// Where the outputs go: files in a folder, or commits at a URL.
#[cfg_attr(
    feature = "store",
    expect(
        clippy::large_enum_variant,
        reason = "one per run, never moved after it is made"
    )
)]
enum Files {
    Local {
        jsonl: BufWriter<File>,
        failures: BufWriter<File>,
        parquet: Option<ParquetFile<VideoRows>>,
    },
    #[cfg(feature = "store")]
    Bucket(Box<rayorch_kit::store::outputs::RowCommits<VideoRows>>),
}

/// The job's segment kinds at a URL.
#[cfg(feature = "store")]
const KINDS: rayorch_kit::store::outputs::Kinds = rayorch_kit::store::outputs::Kinds {
    records: "videos.jsonl",
    failures: "failures.jsonl",
    parquet: "videos.parquet",
};

/// The job's sink (see the module note); its counters are the run's
/// figures for the summary.
pub struct Outputs {
    out: Output<VideoRecord>,
    names: Arc<RootNames>,
    spool: PathBuf,
    files: Files,
    bars: Arc<Progress>,
    start: Instant,
    /// When videos were written, seconds since the sink was made (a
    /// bounded, even sample past a thousand: see [`Ticks`]).
    pub written_at: Ticks,
    /// Videos written.
    pub written: usize,
    /// Videos that failed.
    pub failed: usize,
    /// Videos that ended otherwise than [`Outputs::expecting`] says (all
    /// failed ones without it).
    pub unexpected: usize,
    expected: rayorch_kit::expect::Expected,
}

impl Outputs {
    /// Create the outputs in `dir` for the roots named in `names` (by key;
    /// a name is taken when its video ends); the file `spool` holds for a
    /// video read from object storage is removed then.
    pub fn create(
        dir: &Path,
        out: Output<VideoRecord>,
        names: Arc<RootNames>,
        spool: PathBuf,
        bars: Arc<Progress>,
    ) -> Result<Outputs, BoxError> {
        std::fs::create_dir_all(dir)?;
        let file = |n: &str| File::create(dir.join(n)).map(BufWriter::new);
        let files = Files::Local {
            jsonl: file("videos.jsonl")?,
            failures: file("failures.jsonl")?,
            parquet: Some(ParquetFile::create(&dir.join("videos.parquet"), VideoRows, 8)?),
        };
        Ok(Outputs::over(files, out, names, spool, bars))
    }

    /// The outputs committed to `bucket` (`--out` an object-store URL).
    #[cfg(feature = "store")]
    pub fn to_bucket(
        bucket: rayorch_kit::store::outputs::BucketOutputs,
        out: Output<VideoRecord>,
        names: Arc<RootNames>,
        spool: PathBuf,
        bars: Arc<Progress>,
    ) -> Outputs {
        let commits = rayorch_kit::store::outputs::RowCommits::new(bucket, VideoRows, KINDS);
        Outputs::over(Files::Bucket(Box::new(commits)), out, names, spool, bars)
    }

    /// The commits, when the outputs are at a URL.
    #[cfg(feature = "store")]
    pub fn bucket(&self) -> Option<&rayorch_kit::store::outputs::RowCommits<VideoRows>> {
        match &self.files {
            Files::Bucket(b) => Some(b),
            Files::Local { .. } => None,
        }
    }

    fn over(
        files: Files,
        out: Output<VideoRecord>,
        names: Arc<RootNames>,
        spool: PathBuf,
        bars: Arc<Progress>,
    ) -> Outputs {
        Outputs {
            out,
            names,
            spool,
            files,
            bars,
            start: Instant::now(),
            written_at: Ticks::default(),
            written: 0,
            failed: 0,
            unexpected: 0,
            expected: rayorch_kit::expect::Expected::none(),
        }
    }

    /// Count only videos that end otherwise than `expected` says (a sample
    /// broken on purpose failing is expected) as [`Outputs::unexpected`].
    pub fn expecting(mut self, expected: rayorch_kit::expect::Expected) -> Outputs {
        self.expected = expected;
        self
    }
}

impl Sink for Outputs {
    fn root(&mut self, o: &RootOutcome) -> Result<(), BoxError> {
        let t = self.start.elapsed().as_secs_f64();
        let name = self.names.take(o.key).map_or_else(String::new, |n| n.to_string());
        let from_store = rayorch_kit::store::is_url(&name);
        if from_store {
            // The spooled file served its purpose (written or failed).
            let _ = std::fs::remove_file(rayorch_kit::store::spool_path(&self.spool, &name));
        }
        match o.get(self.out) {
            Item::Present(mut v) => {
                if from_store {
                    // Named by its URL, not by the spooled file's path.
                    v.name.clone_from(&name);
                }
                let line = serde_json::to_vec(&VideoLine {
                    key: o.key,
                    video: &v,
                })?;
                self.written += 1;
                // A video's parts, as an expectation may count them: its clips.
                self.unexpected += usize::from(!self.expected.as_expected(&name, Some(v.clips.len())));
                self.written_at.push(t);
                self.bars.println(format!(
                    "{t:>7.2}s  wrote  {name} ({:.1} s, {} clips, {} shots, {} frames, max nsfw {:.3})",
                    v.info.duration_s,
                    v.clips.len(),
                    v.shots.len(),
                    v.frames,
                    v.max_nsfw
                ));
                match &mut self.files {
                    Files::Local { jsonl, parquet, .. } => {
                        jsonl.write_all(&line)?;
                        jsonl.write_all(b"\n")?;
                        jsonl.flush()?;
                        if let Some(p) = parquet.as_mut() {
                            p.write((o.key, v))?;
                        }
                    }
                    #[cfg(feature = "store")]
                    Files::Bucket(b) => b.record(o.key, &line, (o.key, v))?,
                }
            }
            other => {
                // The job has one output: the root's kind is the video's.
                let Some(line) = rayorch_kit::outcome::failure_line(o, Some(name.clone())) else {
                    return Err(
                        format!("{name}: a present root without its record ({:?})", other.kind()).into(),
                    );
                };
                let bytes = serde_json::to_vec(&line)?;
                match &mut self.files {
                    Files::Local { failures, .. } => {
                        failures.write_all(&bytes)?;
                        failures.write_all(b"\n")?;
                        failures.flush()?;
                    }
                    #[cfg(feature = "store")]
                    Files::Bucket(b) => b.failure(o.key, &bytes)?,
                }
                self.failed += 1;
                self.unexpected += usize::from(!self.expected.as_expected(&name, None));
                self.bars
                    .println(format!("{t:>7.2}s  FAILED {name}: {}", line.cause));
            }
        }
        Ok(())
    }

    fn close(&mut self) -> Result<(), BoxError> {
        match &mut self.files {
            Files::Local {
                jsonl,
                failures,
                parquet,
            } => {
                jsonl.flush()?;
                failures.flush()?;
                if let Some(p) = parquet.take() {
                    p.close()?;
                }
            }
            // The rest committed, every upload waited for.
            #[cfg(feature = "store")]
            Files::Bucket(b) => b.finish()?,
        }
        Ok(())
    }
}
