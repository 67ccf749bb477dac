//! The video job (`video_index`): index videos by shot, safety score,
//! frame embedding and transcript, streamed per video.
//!
//! ```text
//! Video ─decode (probe + histogram scan)─► expand Clip ─frames─► expand Frame
//!     ─score (range decode + open_nsfw)─► reduce ─clip_merge (+ clip audio)─► reduce ─video_merge
//! ```
//! The pipeline is [`crate::pipeline::VideoIndex`] (`#[pipeline]`).
//! Frame-model batches mix frames of many clips and videos; each video is
//! written the moment its last clip is merged.
//!
//! [`run`] takes the command line ([`Args`]) and the files to index (the
//! `video_index` example generates sample media when given none) and, with
//! `--features store`, object-store inputs ([`split`]), listed while the
//! run goes; each object is spooled to a file under `--out` for FFmpeg and
//! removed when its record is written. Outputs
//! in `--out` (default `target/video_index`): `videos.jsonl`,
//! `videos.parquet/` (segments), `failures.jsonl`, `summary.json`,
//! `timeline.svg`, and the run's journal `journal.redb`: Ctrl-C drains,
//! and after it, a crash or `kill -9` `--resume` continues with every
//! video written once (the flags every job has: `rayorch_kit::job`).
//! With `--features store`, `--out` may be an object-store URL
//! (`s3://bucket/prefix/`, `file:///folder/`): the outputs are committed
//! there exactly once (`outputs`), `--resume` continues from the commit
//! records alone, objects are spooled to a temporary folder, and
//! `summary.json` and `timeline.svg` go to `runs/<writer>/`.

pub mod outputs;

use std::path::PathBuf;
use std::sync::Arc;

use clap::Parser;
use rayorch::Runner;
use rayorch_kit::job::{Driven, JobInputs, open_run};
use rayorch_kit::progress::Progress;
use rayorch_kit::timeline::{self, SpanLog};
use rayorch_kit::watch;

use rayorch_kit::names::RootNames;
use rayorch_kit::store::RootKind;
use rayorch_kit::store::shards::{InputColumn, ShardColumns};

use crate::pipeline::{Clip, Frame, IndexConfig, Video, VideoIndex, VideoInput};
use crate::{BatchMix, ShotConfig};

/// What `--help` says about the exit status (`rayorch_kit::outcome`).
pub const EXIT_CODES: &str = "Exit status:
  0    every video was written (with the generated samples: only those broken
       on purpose failed)
  1    the run could not start or broke off (the message says why)
  2    the command line is wrong
  3    at least one video failed: see failures.jsonl (the others are written)
  130  interrupted by Ctrl-C (what finished is written; --resume continues)";

/// Index videos: shots, per-clip and per-video safety scores and embeddings.
#[derive(Parser, Debug, Clone)]
#[command(name = "video_index", version, about, after_help = EXIT_CODES)]
pub struct Args {
    /// Video files or folders (searched for .mp4/.mkv/.webm/.mov/.avi/.m4a);
    /// or, in a build with `--features store`, objects in object storage
    /// (`s3://BUCKET/PREFIX/`, `s3://BUCKET/**/*.mp4`, `gs://`, `az://`,
    /// `https://…`; credentials from the environment: `AWS_*`,
    /// `AWS_ENDPOINT_URL`, `GOOGLE_*`, `AZURE_*`). Default: generated samples
    /// in `target/video_samples`.
    pub inputs: Vec<String>,
    /// Output folder (a run into one holding an unfinished journaled run
    /// needs `--resume` or `--force`); or, in a build with `--features
    /// store`, an object-store URL (`s3://BUCKET/PREFIX/`, `gs://…`,
    /// `az://…`, `file:///FOLDER/`) where the outputs are committed exactly
    /// once.
    #[arg(short, long, default_value = "target/video_index")]
    pub out: PathBuf,
    /// `--resume`, `--force`, `--limit`, `--no-progress`, `--metrics`,
    /// `--otlp`, `--expected` (every job's: `rayorch_kit::job`).
    #[command(flatten)]
    pub run: rayorch_kit::job::RunFlags,
    /// Outputs at a URL: `--commit-mib`, `--commit-every-s`,
    /// `--at-least-once`.
    #[command(flatten)]
    pub commit: rayorch_kit::store::CommitFlags,
    /// Sampled frames per second.
    #[arg(long, default_value_t = 2.0)]
    pub fps: f64,
    /// Longest clip, seconds (longer shots are split).
    #[arg(long, default_value_t = 10.0)]
    pub max_clip_s: f64,
    /// Histogram difference that starts a shot; 0 turns shot detection off
    /// (fixed-length clips).
    #[arg(long, default_value_t = 0.35)]
    pub cut: f32,
    /// Admission window: videos in flight.
    #[arg(long, default_value_t = 4)]
    pub window: usize,
    /// ONNX Runtime threads per frame-model replica.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Frames per frame-model batch.
    #[arg(long, default_value_t = 16)]
    pub batch: usize,
    /// Frame-model replicas.
    #[arg(long, default_value_t = 1)]
    pub score_replicas: usize,
    /// Probe replicas (each scans one whole video; two let short videos'
    /// frames reach the frame model while a long one is still scanned).
    #[arg(long, default_value_t = 2)]
    pub decode_replicas: usize,
    /// Time limit of audio (per clip).
    #[command(flatten)]
    pub parse_limit: rayorch_kit::limits::ParseLimit,
    /// Time limit of decode and speech (a whole video at once).
    #[command(flatten)]
    pub whole_limit: rayorch_kit::limits::WholeLimit,
    /// Time limit of score and transcribe.
    #[command(flatten)]
    pub model_limit: rayorch_kit::limits::ModelLimit,
}

const EXTENSIONS: [&str; 6] = ["mp4", "mkv", "webm", "mov", "avi", "m4a"];

/// Is `name` a video's (what a folder or prefix listing keeps)?
fn is_video_name(name: &str) -> bool {
    std::path::Path::new(name)
        .extension()
        .is_some_and(|x| EXTENSIONS.contains(&x.to_string_lossy().to_lowercase().as_str()))
}

/// The build command with object-storage inputs (named when a build
/// without them refuses a URL).
const REBUILD_STORE: &str = "cargo run --release -p rayorch-video --features store --example video_index --";

/// Split the inputs into local video files (`rayorch_kit::store::discover`:
/// folders searched recursively, glob patterns expanded) and object-store
/// inputs (checked to list before anything is written); a URL in a build
/// without `store` is refused with the command that adds it.
pub fn split(
    inputs: &[String],
    flags: &rayorch_kit::job::RunFlags,
) -> Result<(Vec<PathBuf>, Vec<String>), rayorch::BoxError> {
    let streamed = rayorch_kit::store::Streamed::of(flags)?;
    if let Some((
        _,
        ShardColumns {
            input: InputColumn::Bytes(c),
            ..
        },
    )) = &streamed.shards
    {
        return Err(format!(
            "--bytes-column {c}: video_index reads each video from a file or a URL (FFmpeg seeks in it); give the shards' column of locations with --url-column"
        )
        .into());
    }
    if let Some(t) = streamed.tars.first() {
        return Err(format!(
            "--input-tar {t}: video_index reads each video from a file or a URL (FFmpeg seeks in it), not from a tar member"
        )
        .into());
    }
    rayorch_kit::store::split(
        inputs,
        &streamed,
        cfg!(feature = "store"),
        REBUILD_STORE,
        None,
        is_video_name,
        "video files",
    )
}

/// Index `files` and the objects of `urls` (see [`split`]) as `args` say.
/// `Ok` carries the exit status (`rayorch_kit::outcome`): 3 when a video
/// ended otherwise than `expected` says (`rayorch_kit::expect`: by
/// default, any failure), else 0.
pub fn run(
    args: &Args,
    files: &[PathBuf],
    urls: &[String],
    expected: rayorch_kit::expect::Expected,
) -> Result<u8, rayorch::BoxError> {
    let streamed = rayorch_kit::store::Streamed::of(&args.run)?;
    if files.is_empty() && urls.is_empty() && streamed.is_empty() {
        return Err("no video files found".into());
    }
    // Flags and `--out` first: a bad one is refused before anything is
    // written.
    let traces = rayorch_kit::otlp::job_traces(args.run.otlp.as_deref(), "video_index")?;
    let out_url = rayorch_kit::store::output_url(&args.out, cfg!(feature = "store"), REBUILD_STORE)?;
    let expected = match &args.run.expected {
        Some(dir) => rayorch_kit::expect::Expected::read(dir)?,
        None => expected,
    };
    // Objects are spooled beside local outputs, or in a temporary folder.
    let spool = match &out_url {
        None => args.out.join("spool"),
        Some(_) => std::env::temp_dir().join(format!("rayorch-video-spool-{}", std::process::id())),
    };
    let assets = crate::nsfw::ensure_assets()?;
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
        spool: spool.clone(),
        timeouts: rayorch_kit::limits::Timeouts::from_flags(
            Some(args.parse_limit),
            Some(args.whole_limit),
            args.model_limit,
        ),
        ..IndexConfig::default()
    };
    let mix = Arc::new(BatchMix::default());
    let speech = rayorch_models::assets::ensure_speech()?;
    let index = VideoIndex::new(&cfg, &assets, &speech, mix.clone());
    let (plan, out) = index.plan()?;
    let bars = Progress::new(!args.run.no_progress)
        .root::<Video>("videos", files.len() as u64)
        .domain::<Clip>("clips")
        .domain::<Frame>("frames")
        .shared();
    let names = RootNames::new();
    let kind = RootKind {
        accept: is_video_name,
        from_path: |p| VideoInput::File(p.to_path_buf()),
        from_url: VideoInput::Url,
        invalid: |_, why| VideoInput::Invalid(why.into()),
        from_bytes: None,
    };
    let inputs = JobInputs {
        files: files.to_vec(),
        urls: urls.to_vec(),
        streamed,
        what: "video files",
        kind,
    };
    let mut opened = open_run(
        &args.out,
        out_url.as_deref(),
        &args.run,
        &args.commit,
        inputs,
        names.clone(),
    )?;
    let mut sink = match opened.bucket.take() {
        None => outputs::Outputs::create(
            &args.out,
            out,
            names.clone(),
            spool.clone(),
            bars.clone(),
            args.run.resume,
        )?,
        #[cfg(feature = "store")]
        Some(bucket) => outputs::Outputs::to_bucket(bucket, out, names.clone(), spool.clone(), bars.clone()),
        #[cfg(not(feature = "store"))]
        Some(never) => match never {},
    }
    .expecting(expected);
    bars.println(format!(
        "video_index: {}, {} fps sampling, batch {}, outputs in {}",
        opened.roots.describe("files"),
        args.fps,
        args.batch,
        args.out.display()
    ));
    let spans = SpanLog::default();
    let (watch, _server) = watch::serve(args.run.metrics, &bars)?;
    let runner = Runner::new(&plan)
        .window(args.window)
        .observe((bars.observer(), (spans.clone(), watch)));
    let Driven { summary, interrupted } = opened.drive(runner, "videos", &mut sink)?;
    bars.finish();
    if let Some(t) = traces {
        println!("{}", t.finish());
    }
    let (batches, multi_clip, multi_video, frames) = mix.snapshot();
    let figures = VideoFigures {
        frames_scored: frames,
        frames_per_s: frames as f64 / summary.wall_s.max(1e-9),
        score_batches: batches,
        score_batches_multi_clip: multi_clip,
        score_batches_multi_video: multi_video,
    };
    let (json, exit_status) = opened.report(&sink.tally, &names, &summary, interrupted, figures)?;
    let title = format!(
        "video_index: {} videos in {:.1} s",
        sink.tally.written, summary.wall_s
    );
    let svg = timeline::svg(
        &summary,
        &spans.spans(),
        sink.tally.written_at.times(),
        "videos written",
        &title,
    );
    let committed: Option<String> = match &out_url {
        None => {
            rayorch_kit::check::write_json(&args.out, "summary.json", &json)?;
            std::fs::write(args.out.join("timeline.svg"), svg)?;
            None
        }
        #[cfg(feature = "store")]
        Some(url) => Some(bucket_report(url, &mut sink, &mut { json }, svg)?),
        #[cfg(not(feature = "store"))]
        Some(_) => unreachable!("output_url refuses URLs without `store`"),
    };
    println!(
        "\n{} written, {} failed, {} frames in {:.2} s ({:.2} frames/s); frame-model batches: {} ({} mix clips, {} mix videos)",
        sink.tally.written,
        sink.tally.failed,
        frames,
        summary.wall_s,
        frames as f64 / summary.wall_s.max(1e-9),
        batches,
        multi_clip,
        multi_video
    );
    print!("{}", summary.calls_table());
    println!("outputs in {}", args.out.display());
    if let Some(c) = committed {
        println!("{c}");
        // The temporary spool (its files went with their records).
        let _ = std::fs::remove_dir(&spool);
    }
    if interrupted || summary.cancelled {
        println!(
            "interrupted: continue this run with\n  {}",
            rayorch_kit::resume::resume_command(
                "cargo run --release -p rayorch-video --example video_index --"
            )
        );
    }
    match opened.roots.listing_error() {
        Some(e) => Err(format!("the listing stopped early: {e} (what was listed is written)").into()),
        None => Ok(exit_status),
    }
}

/// The video job's own figures in `summary.json`'s `job` (beside every
/// job's, `rayorch_kit::job::RunReport`).
#[derive(serde::Serialize)]
struct VideoFigures {
    frames_scored: u64,
    frames_per_s: f64,
    /// Frame-model batches, and those mixing clips and videos.
    score_batches: u64,
    score_batches_multi_clip: u64,
    score_batches_multi_video: u64,
}

/// The report's end for outputs at `url` (`RowCommits::report`).
#[cfg(feature = "store")]
fn bucket_report(
    url: &str,
    sink: &mut outputs::Outputs,
    json: &mut serde_json::Value,
    svg: String,
) -> Result<String, rayorch::BoxError> {
    let bucket = sink.bucket().ok_or("the outputs at a URL were not a bucket's")?;
    Ok(bucket.report(url, "videos", json, Some(svg))?)
}
