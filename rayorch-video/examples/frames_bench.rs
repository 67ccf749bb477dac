//! Frames/s through rayorch against a plain sequential loop (issue 15's
//! first target: ≥ 0.95).
//!
//! - (A) the video pipeline as the `video_index` example runs it
//!   ([`VideoIndex`] under a [`Runner`], window 4): probe + histogram scan,
//!   clips, range decodes and open_nsfw in batches that mix clips and
//!   videos, merges (the videos have no audio, so no speech model runs).
//! - (B) a plain loop over the same files and the same frames: one
//!   sequential decode per video ([`for_each_sampled`], no scan, no seek),
//!   frames gathered into batches of the same size across videos, the same
//!   [`FrameModel`] session with the same intra-op threads.
//!
//! - (A0) as A with `keep_open: 0`: every batch reopens each clip's file and
//!   seeks back to a keyframe (the range decode before `FrameReader` kept
//!   inputs open), for a before/after in the same run.
//!
//! Both time the model load too (one `FrameModel` each). The arms alternate
//! A, B, A0, A, B, A0, … in one process; each round prints frames/s, the
//! ratios to B, and A's frame-model batch counts (how many mix clips, how
//! many mix videos) and range decodes (continued, sought); the medians of
//! the per-round ratios close the run.
//!
//! ```sh
//! cargo run --release -p rayorch-video --example frames_bench -- --rounds 5
//! ```
//! Options: `--rounds N` (5), `--batch B` (16), `--threads T` (1), `--fps F`
//! (2), `--long-s S` (60: one long video of S seconds), `--shorts N` (8 short
//! videos of 2–6 s), `--dir D` (`target/video_bench`), `--arms` any of
//! `a`, `b`, `0` (`ab0`).
//!
//! `--gen-long S` only writes `long_speech_{S}s.mp4` into `--dir` (one shot,
//! the espeak sentence every 10 s) and prints its path: the input of the
//! peak-RSS check, e.g.
//! `/usr/bin/time -v target/release/examples/video_index --no-progress <file>`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use rayorch::sink::Callback;
use rayorch::{Item, RootOutcome, Runner};
use rayorch_testdata::media::shots_video;
use rayorch_video::decode::{RgbFrame, for_each_sampled};
use rayorch_video::nsfw::{FrameAssets, RESIZE, ensure_assets};
use rayorch_video::pipeline::{IndexConfig, VideoIndex, VideoInput};
use rayorch_video::{BatchMix, FrameModel, ShotConfig};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

#[derive(Clone, Debug)]
struct Args {
    rounds: usize,
    batch: usize,
    threads: usize,
    fps: f64,
    long_s: usize,
    shorts: usize,
    dir: PathBuf,
    arms: String,
    gen_long: Option<u32>,
}

fn parse() -> Result<Args, BoxError> {
    let mut a = Args {
        rounds: 5,
        batch: 16,
        threads: 1,
        fps: 2.0,
        long_s: 60,
        shorts: 8,
        dir: PathBuf::from("target/video_bench"),
        arms: "ab0".into(),
        gen_long: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut val = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--rounds" => a.rounds = val()?.parse()?,
            "--batch" => a.batch = val()?.parse()?,
            "--threads" => a.threads = val()?.parse()?,
            "--fps" => a.fps = val()?.parse()?,
            "--long-s" => a.long_s = val()?.parse()?,
            "--shorts" => a.shorts = val()?.parse()?,
            "--dir" => a.dir = PathBuf::from(val()?),
            "--arms" => a.arms = val()?,
            "--gen-long" => a.gen_long = Some(val()?.parse()?),
            "--help" | "-h" => {
                println!("see the module doc of rayorch-video/examples/frames_bench.rs");
                std::process::exit(0);
            }
            other => return Err(format!("unknown option {other}").into()),
        }
    }
    Ok(a)
}

/// One long video of 5 s shots and `shorts` short ones of 1–3 shots of 2 s.
fn videos(a: &Args) -> Result<Vec<PathBuf>, BoxError> {
    std::fs::create_dir_all(&a.dir)?;
    let mut files = Vec::new();
    let shots = a.long_s.div_ceil(5).max(1);
    files.push(
        shots_video(
            &a.dir.join(format!("long_{}s.mp4", shots * 5)),
            shots,
            5.0,
            0,
            false,
        )?
        .path,
    );
    for k in 0..a.shorts {
        let p = a.dir.join(format!("short_{k}.mp4"));
        files.push(shots_video(&p, 1 + k % 3, 2.0, k, false)?.path);
    }
    Ok(files)
}

/// What one arm measured.
struct Arm {
    frames: u64,
    wall_s: f64,
    /// CPU seconds of the whole process (every thread) during the arm.
    cpu_s: f64,
    /// (batches, multi-clip, multi-video, decodes continued, decodes
    /// sought) for A.
    mix: Option<[u64; 5]>,
    /// A's score Call: busy seconds, first batch start, last batch end.
    score: Option<(f64, f64, f64)>,
}

fn arm_a(a: &Args, files: &[PathBuf], assets: &FrameAssets, keep_open: usize) -> Result<Arm, BoxError> {
    let speech = rayorch_models::assets::ensure_speech()?;
    let cfg = IndexConfig {
        shots: ShotConfig {
            sample_fps: a.fps,
            ..ShotConfig::default()
        },
        threads: a.threads,
        score_batch: a.batch,
        keep_open,
        ..IndexConfig::default()
    };
    let mix = Arc::new(BatchMix::default());
    let index = VideoIndex::new(&cfg, assets, &speech, mix.clone());
    let (plan, out) = index.plan()?;
    let mut written = 0usize;
    let mut failed = Vec::new();
    let summary = Runner::new(&plan).window(4).run(
        files
            .iter()
            .cloned()
            .enumerate()
            .map(|(i, p)| (i as u64, VideoInput::File(p))),
        Callback(|o: &RootOutcome| match o.get(out) {
            Item::Present(_) => written += 1,
            other => failed.push(format!("{:?}", other.cause())),
        }),
    )?;
    if !failed.is_empty() {
        return Err(format!("arm A: {} videos failed: {failed:?}", failed.len()).into());
    }
    let (batches, multi_clip, multi_video, frames) = mix.snapshot();
    let load = |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed);
    Ok(Arm {
        frames,
        wall_s: summary.wall_s,
        cpu_s: 0.0,
        mix: Some([
            batches,
            multi_clip,
            multi_video,
            load(&mix.decodes_continued),
            load(&mix.decodes_sought),
        ]),
        score: summary.call("score").map(|m| {
            (
                m.busy_s,
                m.window_start_s.unwrap_or(0.0),
                m.window_end_s.unwrap_or(0.0),
            )
        }),
    })
}

fn arm_b(a: &Args, files: &[PathBuf], assets: &FrameAssets) -> Result<Arm, BoxError> {
    let start = Instant::now();
    let onnx = rayorch_models::OnnxConfig {
        intra_threads: a.threads,
        ..Default::default()
    };
    let mut model = FrameModel::load(assets, &onnx)?;
    let mut pending: Vec<RgbFrame> = Vec::with_capacity(a.batch);
    let (mut frames, mut nsfw_sum) = (0u64, 0f64);
    let mut failed: Option<rayorch_models::ModelError> = None;
    let mut flush = |pending: &mut Vec<RgbFrame>| {
        match model.score(pending) {
            Ok(scores) => {
                for s in scores {
                    nsfw_sum += f64::from(s.nsfw);
                    frames += 1;
                }
            }
            Err(e) => failed = Some(e),
        }
        pending.clear();
    };
    for f in files {
        for_each_sampled(f, a.fps, RESIZE, |frame| {
            pending.push(frame);
            if pending.len() == a.batch {
                flush(&mut pending);
            }
            true
        })?;
    }
    flush(&mut pending);
    if let Some(e) = failed {
        return Err(e.into());
    }
    // Keeps the scores observable so the loop cannot be optimised away.
    std::hint::black_box(nsfw_sum);
    Ok(Arm {
        frames,
        wall_s: start.elapsed().as_secs_f64(),
        cpu_s: 0.0,
        mix: None,
        score: None,
    })
}

/// CPU seconds (user + system) of this process so far, every thread.
fn cpu_s() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which may hold spaces) start at ')':
    // state is field 3 of stat(5), utime and stime fields 14 and 15, in
    // clock ticks (100 a second).
    let rest = stat.rsplit_once(')').map_or("", |r| r.1);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let tick = |i: usize| f.get(i - 3).and_then(|x| x.parse::<f64>().ok()).unwrap_or(0.0);
    (tick(14) + tick(15)) / 100.0
}

/// Runs `arm`, recording the process's CPU seconds it took.
fn with_cpu(arm: impl FnOnce() -> Result<Arm, BoxError>) -> Result<Arm, BoxError> {
    let before = cpu_s();
    let mut r = arm()?;
    r.cpu_s = cpu_s() - before;
    Ok(r)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => 0.5 * (v[n / 2 - 1] + v[n / 2]),
    }
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn run(a: &Args) -> Result<(), BoxError> {
    if let Some(s) = a.gen_long {
        std::fs::create_dir_all(&a.dir)?;
        let m =
            rayorch_testdata::media::long_speech_video(&a.dir.join(format!("long_speech_{s}s.mp4")), s, 10)?;
        println!("{}", m.path.display());
        return Ok(());
    }
    let files = videos(a)?;
    let assets = ensure_assets()?;
    println!(
        "frames_bench: {} videos in {} (one of {} s), {} fps sampling, batch {}, {} intra-op thread(s); load {}",
        files.len(),
        a.dir.display(),
        a.long_s.div_ceil(5).max(1) * 5,
        a.fps,
        a.batch,
        a.threads,
        load()
    );
    // What A pays before its first batch can run: the loads of the models
    // its Calls hold (in parallel, one thread each) and the first scan.
    let speech = rayorch_models::assets::ensure_speech()?;
    let timed = |f: &mut dyn FnMut() -> Result<(), BoxError>| -> Result<f64, BoxError> {
        let t = Instant::now();
        f()?;
        Ok(t.elapsed().as_secs_f64())
    };
    let onnx = rayorch_models::OnnxConfig {
        intra_threads: a.threads,
        ..Default::default()
    };
    let t_nsfw = timed(&mut || Ok(FrameModel::load(&assets, &onnx).map(drop)?))?;
    let t_vad = timed(&mut || Ok(rayorch_video::SpeechSplit::load(&speech).map(drop)?))?;
    let t_whisper = timed(&mut || Ok(rayorch_video::Transcribe::load(&speech).map(drop)?))?;
    let t_scan = timed(&mut || Ok(rayorch_video::decode::scan(&files[0], a.fps).map(drop)?))?;
    println!(
        "alone, one after another: open_nsfw load {t_nsfw:.2} s, silero VAD load {t_vad:.2} s, whisper load {t_whisper:.2} s, scan of {} {t_scan:.2} s",
        files[0].display()
    );
    let print = |name: &str, r: &Arm| {
        let fps = r.frames as f64 / r.wall_s;
        let mix = r.mix.map_or_else(String::new, |[b, c, v, dc, ds]| {
            format!("; {b} batches, {c} mix clips, {v} mix videos; range decodes {dc} continued, {ds} sought")
        });
        let score = r.score.map_or_else(String::new, |(busy, first, last)| {
            format!("; score busy {busy:.2} s, batches from {first:.2} s to {last:.2} s")
        });
        println!(
            "  {name}: {} frames in {:.2} s = {fps:.2} frames/s, {:.2} CPU s ({:.1} ms per frame){mix}{score}",
            r.frames,
            r.wall_s,
            r.cpu_s,
            1e3 * r.cpu_s / r.frames.max(1) as f64
        );
        fps
    };
    let (mut fps, mut ratio_a, mut ratio_0) = ([Vec::new(), Vec::new(), Vec::new()], Vec::new(), Vec::new());
    let mut cpu_ratio = Vec::new();
    for round in 1..=a.rounds {
        println!("round {round} (load {})", load());
        let mut got: [Option<Arm>; 3] = [None, None, None];
        for (i, arm) in ['a', 'b', '0'].into_iter().enumerate() {
            if a.arms.contains(arm) {
                got[i] = Some(with_cpu(|| match arm {
                    'a' => arm_a(a, &files, &assets, 2),
                    'b' => arm_b(a, &files, &assets),
                    _ => arm_a(a, &files, &assets, 0),
                })?);
            }
        }
        let names = ["A rayorch", "B plain loop", "A0 rayorch, keep_open 0"];
        let mut f: [Option<f64>; 3] = [None; 3];
        for i in 0..3 {
            f[i] = got[i].as_ref().map(|r| print(names[i], r));
            fps[i].extend(f[i]);
        }
        let counts: Vec<u64> = got.iter().flatten().map(|r| r.frames).collect();
        if counts.windows(2).any(|w| w[0] != w[1]) {
            return Err(format!("the arms scored different frame counts: {counts:?}").into());
        }
        if let (Some(ra), Some(rb)) = (&got[0], &got[1]) {
            // CPU per frame, B over A: what A's work costs beside the same
            // model calls, less sensitive to other processes than wall time.
            cpu_ratio.push(rb.cpu_s / ra.cpu_s.max(1e-9));
        }
        if let Some(b) = f[1] {
            let r: Vec<String> = [(0, "A/B", &mut ratio_a), (2, "A0/B", &mut ratio_0)]
                .into_iter()
                .filter_map(|(i, n, v)| {
                    let r = f[i]? / b;
                    v.push(r);
                    Some(format!("{n} {r:.3}"))
                })
                .collect();
            println!("  ratios {}", r.join(", "));
        }
    }
    let [fa, fb, f0] = fps.map(median);
    println!(
        "medians over {} rounds: frames/s A {fa:.2}, B {fb:.2}, A0 {f0:.2}; per-round ratios A/B {:.3}, A0/B {:.3}; CPU per frame B/A {:.3}; load {}",
        a.rounds,
        median(ratio_a),
        median(ratio_0),
        median(cpu_ratio),
        load()
    );
    Ok(())
}

fn main() {
    let code = match parse().and_then(|a| run(&a)) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("error: {e}");
            1
        }
    };
    std::process::exit(code);
}
