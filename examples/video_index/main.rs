//! The video job: index videos by shot, safety score and frame embedding,
//! streamed per video.
//!
//! ```text
//! Video ─decode (probe + histogram scan)─► expand Clip ─frames─► expand Frame
//!     ─score (range decode + open_nsfw)─► reduce ─clip_merge (+ clip audio)─► reduce ─video_merge
//! ```
//! The pipeline is `rayorch_video::pipeline::VideoIndex` (`#[pipeline]`).
//! Frame-model batches mix frames of many clips and videos; each video is
//! written the moment its last clip is merged.
//!
//! Run on generated samples (made with `ffmpeg` and `espeak-ng` into
//! `target/video_samples` on first use; the model is fetched on first use):
//! `cargo run --example video_index` (`-- --help` for inputs and knobs).
//! Outputs in `--out` (default `target/video_index`): `videos.jsonl`,
//! `videos.parquet`, `failures.jsonl`, `summary.json`.

mod outputs;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use rayorch::{DomainCounts, Observer, Runner};
use rayorch_video::media::sample_set;
use rayorch_video::pipeline::{Clip, Frame, IndexConfig, VideoIndex};
use rayorch_video::{BatchMix, ShotConfig};

/// Index videos: shots, per-clip and per-video safety scores and embeddings.
#[derive(Parser, Debug, Clone)]
#[command(name = "video_index", version, about)]
struct Args {
    /// Video files or folders (searched for .mp4/.mkv/.webm/.mov/.avi/.m4a).
    /// Default: generated samples in `target/video_samples`.
    inputs: Vec<PathBuf>,
    /// Output folder.
    #[arg(short, long, default_value = "target/video_index")]
    out: PathBuf,
    /// Sampled frames per second.
    #[arg(long, default_value_t = 2.0)]
    fps: f64,
    /// Longest clip, seconds (longer shots are split).
    #[arg(long, default_value_t = 10.0)]
    max_clip_s: f64,
    /// Histogram difference that starts a shot; 0 turns shot detection off
    /// (fixed-length clips).
    #[arg(long, default_value_t = 0.35)]
    cut: f32,
    /// Admission window: videos in flight.
    #[arg(long, default_value_t = 4)]
    window: usize,
    /// ONNX Runtime threads per frame-model replica.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Frames per frame-model batch.
    #[arg(long, default_value_t = 16)]
    batch: usize,
    /// Frame-model replicas.
    #[arg(long, default_value_t = 1)]
    score_replicas: usize,
    /// Probe replicas (each scans one whole video; two let short videos'
    /// frames reach the frame model while a long one is still scanned).
    #[arg(long, default_value_t = 2)]
    decode_replicas: usize,
    /// No progress bars.
    #[arg(long)]
    no_progress: bool,
}

/// Progress bars per Domain: videos (moved by the sink), clips and frames
/// (moved by the runner's per-Domain counts).
pub struct Bars {
    multi: Option<MultiProgress>,
    videos: ProgressBar,
    clips: ProgressBar,
    frames: ProgressBar,
}

impl Bars {
    fn new(videos: u64, enabled: bool) -> Bars {
        let style =
            ProgressStyle::with_template("{prefix:>7} [{bar:32.cyan/blue}] {pos:>6}/{len:<6} {elapsed:>4}")
                .expect("a valid template")
                .progress_chars("=> ");
        let bar = |n: &str, len| {
            ProgressBar::new(len)
                .with_style(style.clone())
                .with_prefix(n.to_string())
        };
        if !enabled {
            let h = ProgressBar::hidden;
            return Bars {
                multi: None,
                videos: h(),
                clips: h(),
                frames: h(),
            };
        }
        let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr_with_hz(8));
        Bars {
            videos: multi.add(bar("videos", videos)),
            clips: multi.add(bar("clips", 0)),
            frames: multi.add(bar("frames", 0)),
            multi: Some(multi),
        }
    }

    /// A line above the bars.
    pub fn println(&self, msg: impl AsRef<str>) {
        match &self.multi {
            Some(m) => {
                let _ = m.println(msg.as_ref());
            }
            None => println!("{}", msg.as_ref()),
        }
    }

    /// One more video written or failed.
    pub fn video_done(&self) {
        self.videos.inc(1);
    }

    fn finish(&self) {
        for b in [&self.videos, &self.clips, &self.frames] {
            b.abandon();
        }
    }
}

struct DomainBars(Arc<Bars>);

impl Observer for DomainBars {
    fn domains(&mut self, counts: &[DomainCounts]) {
        for c in counts {
            let bar = match c.domain {
                d if d == <Clip as rayorch::Domain>::NAME => &self.0.clips,
                d if d == <Frame as rayorch::Domain>::NAME => &self.0.frames,
                _ => continue,
            };
            bar.set_length(c.published);
            bar.set_position((c.done + c.failed + c.suppressed).min(c.published));
        }
    }
}

const EXTENSIONS: [&str; 6] = ["mp4", "mkv", "webm", "mov", "avi", "m4a"];

fn discover(inputs: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let mut files = Vec::new();
    for i in inputs {
        if i.is_dir() {
            let mut found: Vec<PathBuf> = std::fs::read_dir(i)
                .map_err(|e| format!("{}: {e}", i.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    p.extension()
                        .is_some_and(|x| EXTENSIONS.contains(&x.to_string_lossy().to_lowercase().as_str()))
                })
                .collect();
            found.sort();
            files.extend(found);
        } else {
            files.push(i.clone());
        }
    }
    Ok(files)
}

fn run(args: Args) -> Result<(), rayorch::BoxError> {
    let files = if args.inputs.is_empty() {
        let dir = PathBuf::from("target/video_samples");
        eprintln!(
            "video_index: generating sample media in {} (first run only)",
            dir.display()
        );
        sample_set(&dir)?.into_iter().map(|m| m.path).collect()
    } else {
        discover(&args.inputs)?
    };
    if files.is_empty() {
        return Err("no video files found".into());
    }
    let assets = rayorch_video::nsfw::ensure_assets()?;
    let cfg = IndexConfig {
        shots: ShotConfig {
            sample_fps: args.fps,
            hist_threshold: (args.cut > 0.0).then_some(args.cut),
            max_clip_s: args.max_clip_s,
            ..ShotConfig::default()
        },
        threads: args.threads,
        decode_replicas: args.decode_replicas,
        score_replicas: args.score_replicas,
        score_batch: args.batch,
        audio_replicas: 1,
        ..IndexConfig::default()
    };
    let mix = Arc::new(BatchMix::default());
    let speech = rayorch_models::assets::ensure_speech()?;
    let index = VideoIndex::new(&cfg, &assets, &speech, mix.clone());
    let (plan, out) = index.plan()?;
    let bars = Arc::new(Bars::new(files.len() as u64, !args.no_progress));
    let names: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
    let mut sink = outputs::Outputs::create(&args.out, out, names, bars.clone())?;
    bars.println(format!(
        "video_index: {} files, {} fps sampling, batch {}, outputs in {}",
        files.len(),
        args.fps,
        args.batch,
        args.out.display()
    ));
    let runner = Runner::new(&plan)
        .window(args.window)
        .observe(DomainBars(bars.clone()));
    let summary = runner.run(
        files.iter().cloned().enumerate().map(|(i, p)| (i as u64, p)),
        &mut sink,
    )?;
    bars.finish();
    let (batches, multi_clip, multi_video, frames) = mix.snapshot();
    let mut json = serde_json::to_value(&summary)?;
    json["job"] = serde_json::json!({
        "videos": files.len(),
        "videos_written": sink.written,
        "videos_failed": sink.failed,
        "frames_scored": frames,
        "frames_per_s": frames as f64 / summary.wall_s.max(1e-9),
        "score_batches": batches,
        "score_batches_multi_clip": multi_clip,
        "score_batches_multi_video": multi_video,
        "written_at_s": sink.written_at,
    });
    std::fs::write(
        args.out.join("summary.json"),
        serde_json::to_string_pretty(&json)? + "\n",
    )?;
    println!(
        "\n{} written, {} failed, {} frames in {:.2} s ({:.2} frames/s); frame-model batches: {} ({} mix clips, {} mix videos)",
        sink.written,
        sink.failed,
        frames,
        summary.wall_s,
        frames as f64 / summary.wall_s.max(1e-9),
        batches,
        multi_clip,
        multi_video
    );
    print!("{}", summary.calls_table());
    println!("outputs in {}", args.out.display());
    Ok(())
}

fn main() -> ExitCode {
    match run(Args::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
