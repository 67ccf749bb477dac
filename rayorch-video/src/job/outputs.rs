//! The job's sink: every video is written the moment it is complete.
//!
//! - `videos.jsonl`: one line per video (the full record), flushed at once;
//! - `videos.parquet`: one row per video, a row group every few videos,
//!   readable once the run has closed it;
//! - `failures.jsonl`: one line per file that did not complete, with the cause.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use rayorch::sink::{FailureLine, Sink};
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

/// The job's sink (see the module note); its counters are the run's
/// figures for the summary.
pub struct Outputs {
    out: Output<VideoRecord>,
    names: Arc<RootNames>,
    spool: PathBuf,
    jsonl: BufWriter<File>,
    failures: BufWriter<File>,
    parquet: Option<ParquetFile<VideoRows>>,
    bars: Arc<Progress>,
    start: Instant,
    /// When videos were written, seconds since the sink was made (a
    /// bounded, even sample past a thousand: see [`Ticks`]).
    pub written_at: Ticks,
    /// Videos written.
    pub written: usize,
    /// Videos that failed.
    pub failed: usize,
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
        Ok(Outputs {
            out,
            names,
            spool,
            jsonl: file("videos.jsonl")?,
            failures: file("failures.jsonl")?,
            parquet: Some(ParquetFile::create(&dir.join("videos.parquet"), VideoRows, 8)?),
            bars,
            start: Instant::now(),
            written_at: Ticks::default(),
            written: 0,
            failed: 0,
        })
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
                serde_json::to_writer(
                    &mut self.jsonl,
                    &VideoLine {
                        key: o.key,
                        video: &v,
                    },
                )?;
                self.jsonl.write_all(b"\n")?;
                self.jsonl.flush()?;
                self.written += 1;
                self.written_at.push(t);
                self.bars.println(format!(
                    "{t:>7.2}s  wrote  {name} ({:.1} s, {} clips, {} shots, {} frames, max nsfw {:.3})",
                    v.info.duration_s,
                    v.clips.len(),
                    v.shots.len(),
                    v.frames,
                    v.max_nsfw
                ));
                if let Some(p) = self.parquet.as_mut() {
                    p.write((o.key, v))?;
                }
            }
            other => {
                // The job has one output: the root's kind is the video's.
                let Some(line) = FailureLine::of(o, Some(name.clone())) else {
                    return Err(
                        format!("{name}: a present root without its record ({:?})", other.kind()).into(),
                    );
                };
                serde_json::to_writer(&mut self.failures, &line)?;
                self.failures.write_all(b"\n")?;
                self.failures.flush()?;
                self.failed += 1;
                self.bars
                    .println(format!("{t:>7.2}s  FAILED {name}: {}", line.cause));
            }
        }
        Ok(())
    }

    fn close(&mut self) -> Result<(), BoxError> {
        self.jsonl.flush()?;
        self.failures.flush()?;
        if let Some(p) = self.parquet.take() {
            p.close()?;
        }
        Ok(())
    }
}
