//! The job's sink: every video is written the moment it is complete.
//!
//! - `videos.jsonl`: one line per video (the full record);
//! - `videos.parquet/`: one row per video, one `part-NNNNN.parquet`
//!   segment per journal commit that wrote rows;
//! - `failures.jsonl`: one line per file that did not complete, with the cause.
//!
//! The three follow the run's journal (`journal.redb` beside them:
//! `rayorch_kit::parquet::JournaledFiles`), so a resumed run holds every
//! video once however the previous run ended.
//!
//! With `--out` an object-store URL (feature `store`) the same three are
//! immutable segments committed exactly once (`videos.jsonl`,
//! `failures.jsonl`, `videos.parquet` per commit, each commit record naming
//! its videos: `rayorch_kit::store::outputs`).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use rayorch::sink::Sink;
use rayorch::{BoxError, Item, Output, RootOutcome};
use rayorch_kit::job::Tally;
use rayorch_kit::names::RootNames;
use rayorch_kit::parquet::{JobFiles, JournaledFiles};
use rayorch_kit::progress::Progress;
use serde::Serialize;

use crate::VideoRecord;
use crate::output::VideoRows;

#[derive(Serialize)]
struct VideoLine<'a> {
    key: u64,
    #[serde(flatten)]
    video: &'a VideoRecord,
    /// The video's `--input-list` fields (JSON lines only).
    #[serde(skip_serializing_if = "Option::is_none")]
    metadata: Option<&'a serde_json::Value>,
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
    files: JobFiles<VideoRows>,
    bars: Arc<Progress>,
    start: Instant,
    /// Videos written, failed, unexpected (`--expected`), and when.
    pub tally: Tally,
}

impl Outputs {
    /// Create the outputs in `dir` for the roots named in `names` (by key;
    /// a name is taken when its video ends); the file `spool` holds for a
    /// video read from object storage is removed then. `resume`: keep the
    /// files (the runner cuts them back to the journal's last commit).
    pub fn create(
        dir: &Path,
        out: Output<VideoRecord>,
        names: Arc<RootNames>,
        spool: PathBuf,
        bars: Arc<Progress>,
        resume: bool,
    ) -> Result<Outputs, BoxError> {
        let names_of = ["videos.jsonl", "failures.jsonl", "videos.parquet"];
        let files = JournaledFiles::open(dir, names_of, &[], VideoRows, 8, resume)?;
        Ok(Outputs::over(JobFiles::Local(files), out, names, spool, bars))
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
        Outputs::over(JobFiles::Bucket(Box::new(commits)), out, names, spool, bars)
    }

    /// The commits, when the outputs are at a URL.
    #[cfg(feature = "store")]
    pub fn bucket(&mut self) -> Option<&mut rayorch_kit::store::outputs::RowCommits<VideoRows>> {
        self.files.bucket()
    }

    fn over(
        files: JobFiles<VideoRows>,
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
            tally: Tally::default(),
        }
    }

    /// Count only videos that end otherwise than `expected` says (a sample
    /// broken on purpose failing is expected) as unexpected.
    pub fn expecting(mut self, expected: rayorch_kit::expect::Expected) -> Outputs {
        self.tally = Tally::expecting(expected);
        self
    }
}

impl Sink for Outputs {
    fn root(&mut self, o: &RootOutcome) -> Result<(), BoxError> {
        let t = self.start.elapsed().as_secs_f64();
        let (name, meta) = self
            .names
            .take(o.key)
            .map_or_else(Default::default, |(n, m)| (n.to_string(), m));
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
                    metadata: meta.as_deref(),
                })?;
                // A video's parts, as an expectation may count them: its clips.
                self.tally.written(&name, v.clips.len(), t);
                self.bars.println(format!(
                    "{t:>7.2}s  wrote  {name} ({:.1} s, {} clips, {} shots, {} frames, max nsfw {:.3})",
                    v.info.duration_s,
                    v.clips.len(),
                    v.shots.len(),
                    v.frames,
                    v.max_nsfw
                ));
                self.files.record(o.key, &line, (o.key, v, meta))?;
            }
            other => {
                // The job has one output: the root's kind is the video's.
                let Some(line) = rayorch_kit::outcome::failure_line(o, Some(name.clone())) else {
                    return Err(
                        format!("{name}: a present root without its record ({:?})", other.kind()).into(),
                    );
                };
                let bytes = rayorch_kit::outcome::failure_json(&line, meta.as_ref())?;
                self.files.failure(o.key, &bytes)?;
                self.tally.failed(&name);
                self.bars
                    .println(format!("{t:>7.2}s  FAILED {name}: {}", line.cause));
            }
        }
        Ok(())
    }

    fn close(&mut self) -> Result<(), BoxError> {
        self.files.close()
    }

    fn sync(&mut self, durable: bool, positions: &mut Vec<u64>) -> Result<(), BoxError> {
        self.files.sync(durable, positions)
    }

    fn truncate_to(&mut self, positions: &mut &[u64]) -> Result<(), BoxError> {
        self.files.truncate_to(positions)
    }
}
