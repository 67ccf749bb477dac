//! The job's sink: every video is written the moment it is complete.
//!
//! - `videos.jsonl`: one line per video (the full record), flushed at once;
//! - `videos.parquet`: one row per video, a row group every few videos,
//!   readable once the run has closed it;
//! - `failures.jsonl`: one line per file that did not complete, with the cause.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use rayorch::sink::Sink;
use rayorch::{BoxError, Item, Output, RootOutcome};
use rayorch_video::VideoRecord;
use rayorch_video::output::VideoParquet;
use serde::Serialize;

use crate::Bars;

#[derive(Serialize)]
struct VideoLine<'a> {
    key: u64,
    #[serde(flatten)]
    video: &'a VideoRecord,
}

#[derive(Serialize)]
struct FailureLine {
    key: u64,
    name: String,
    outcome: String,
    cause: String,
    at: Option<String>,
}

pub struct Outputs {
    out: Output<VideoRecord>,
    names: Vec<String>,
    jsonl: BufWriter<File>,
    failures: BufWriter<File>,
    parquet: Option<VideoParquet>,
    bars: Arc<Bars>,
    start: Instant,
    pub written_at: Vec<f64>,
    pub written: usize,
    pub failed: usize,
}

impl Outputs {
    pub fn create(
        dir: &Path,
        out: Output<VideoRecord>,
        names: Vec<String>,
        bars: Arc<Bars>,
    ) -> Result<Outputs, BoxError> {
        std::fs::create_dir_all(dir)?;
        let file = |n: &str| File::create(dir.join(n)).map(BufWriter::new);
        Ok(Outputs {
            out,
            names,
            jsonl: file("videos.jsonl")?,
            failures: file("failures.jsonl")?,
            parquet: Some(VideoParquet::create(&dir.join("videos.parquet"), 8)?),
            bars,
            start: Instant::now(),
            written_at: Vec::new(),
            written: 0,
            failed: 0,
        })
    }
}

impl Sink for Outputs {
    fn root(&mut self, o: &RootOutcome) -> Result<(), BoxError> {
        let t = self.start.elapsed().as_secs_f64();
        let name = self.names.get(o.key as usize).cloned().unwrap_or_default();
        match o.get(self.out) {
            Item::Present(v) => {
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
                    p.write(o.key, v)?;
                }
            }
            other => {
                let cause = other.cause();
                let line = FailureLine {
                    key: o.key,
                    name: name.clone(),
                    outcome: format!("{:?}", other.kind()).to_lowercase(),
                    cause: cause.map(|c| c.message().to_string()).unwrap_or_default(),
                    at: cause.and_then(|c| c.context().map(String::from)),
                };
                serde_json::to_writer(&mut self.failures, &line)?;
                self.failures.write_all(b"\n")?;
                self.failures.flush()?;
                self.failed += 1;
                self.bars
                    .println(format!("{t:>7.2}s  FAILED {name}: {}", line.cause));
            }
        }
        self.bars.video_done();
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
