//! The video pipeline on media generated at test time (ffmpeg lavfi shots
//! with known cuts, an espeak-ng sentence, bad files), into the target dir.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use rayorch::sink::Callback;
use rayorch::{Item, RootOutcome, Runner};
use rayorch_testdata::media::{Expect, MediaFile, sample_set, shots_video};
use rayorch_video::decode::{
    FrameReader, decode_frames, extract_audio, for_each_audio, for_each_sampled, scan,
};
use rayorch_video::pipeline::{IndexConfig, VideoIndex, VideoInput};
use rayorch_video::shots::{ShotConfig, clip_spans, histogram_cuts};
use rayorch_video::stages::speech_windows;
use rayorch_video::{BatchMix, VideoDecode, VideoRecord};

fn media_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("video-media")
}

/// The sample set, generated once per test binary (tests run in parallel).
fn samples() -> &'static [MediaFile] {
    static SET: OnceLock<Vec<MediaFile>> = OnceLock::new();
    static GEN: Mutex<()> = Mutex::new(());
    SET.get_or_init(|| {
        let _g = GEN.lock().unwrap_or_else(|p| p.into_inner());
        sample_set(&media_dir()).expect("generating the sample media (needs ffmpeg and espeak-ng)")
    })
}

fn four_shots() -> &'static Path {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| {
        let dir = media_dir();
        std::fs::create_dir_all(&dir).unwrap();
        shots_video(&dir.join("four_shots.mp4"), 4, 2.0, 0, false)
            .unwrap()
            .path
    })
}

#[test]
fn histogram_cuts_are_found_at_the_known_frames() {
    let rate = 5.0;
    let (info, samples) = scan(four_shots(), rate).unwrap();
    assert!((info.duration_s - 8.0).abs() < 0.1, "{info:?}");
    assert_eq!(info.fps, 25.0);
    assert_eq!(samples.len(), 40, "8 s sampled at 5 fps");
    let cuts: Vec<f64> = histogram_cuts(&samples, ShotConfig::default().hist_threshold.unwrap())
        .iter()
        .map(|&i| samples[i].t)
        .collect();
    assert_eq!(cuts.len(), 3, "cuts at {cuts:?}");
    for (found, known) in cuts.iter().zip([2.0, 4.0, 6.0]) {
        assert!(
            (found - known).abs() <= 1.0 / rate + 1e-9,
            "cut at {found}, known {known}"
        );
    }
    // Clips follow the shots; a 1 s length limit splits each shot in two.
    let path = Arc::new(four_shots().to_path_buf());
    let cfg = ShotConfig {
        sample_fps: rate,
        max_clip_s: 1.0,
        ..ShotConfig::default()
    };
    let clips = clip_spans(&path, &samples, info.duration_s, &cfg);
    assert_eq!(clips.len(), 8);
    assert_eq!(clips.iter().filter(|c| c.starts_shot).count(), 4);
    assert_eq!(clips.iter().map(|c| c.frames.len()).sum::<usize>(), 40);
}

#[test]
fn a_clip_decodes_lazily_to_exactly_the_scanned_frames() {
    let (_, samples) = scan(four_shots(), 5.0).unwrap();
    // A range in the middle of the video: one seek, then forward decoding.
    let times: Vec<f64> = samples[22..27].iter().map(|s| s.t).collect();
    let frames = decode_frames(four_shots(), &times, 256).unwrap();
    assert_eq!(frames.iter().map(|f| f.t).collect::<Vec<_>>(), times);
    assert!(
        frames
            .iter()
            .all(|f| f.side == 256 && f.rgb.len() == 256 * 256 * 3)
    );
    // The same frame decoded in another range has the same pixels.
    let alone = decode_frames(four_shots(), &times[2..3], 256).unwrap();
    assert_eq!(alone[0], frames[2]);
}

#[test]
fn audio_is_extracted_as_16k_mono_per_time_range() {
    let long = &samples()[0];
    let Expect::Video { duration_s, .. } = long.expect else {
        panic!("the first sample is the long video")
    };
    let all = extract_audio(&long.path, 0.0, duration_s).unwrap();
    let want = duration_s * 16_000.0;
    assert!(
        (all.len() as f64 - want).abs() < 0.1 * 16_000.0,
        "{} samples",
        all.len()
    );
    let rms = |s: &[f32]| (s.iter().map(|x| x * x).sum::<f32>() / s.len().max(1) as f32).sqrt();
    let silence = extract_audio(&long.path, 0.0, 0.4).unwrap();
    let speech = extract_audio(&long.path, 1.0, 3.0).unwrap();
    assert_eq!(speech.len(), 32_000);
    assert!(rms(&silence) < 0.01, "silence rms {}", rms(&silence));
    assert!(rms(&speech) > 0.02, "speech rms {}", rms(&speech));
    // A video without audio gives no samples.
    assert!(extract_audio(four_shots(), 0.0, 1.0).unwrap().is_empty());
}

#[test]
fn the_plain_sequential_decode_gives_the_scanned_frames_and_pixels() {
    // The frame benchmark's baseline loop must score exactly the frames the
    // pipeline scores.
    let (_, samples) = scan(four_shots(), 5.0).unwrap();
    let mut seen = Vec::new();
    for_each_sampled(four_shots(), 5.0, 256, |f| {
        seen.push(f);
        true
    })
    .unwrap();
    let times: Vec<f64> = samples.iter().map(|s| s.t).collect();
    assert_eq!(seen.iter().map(|f| f.t).collect::<Vec<_>>(), times);
    let ranged = decode_frames(four_shots(), &times[30..33], 256).unwrap();
    assert_eq!(ranged, seen[30..33]);
    // A reader that keeps the input open continues the decode for the next
    // run of frames (no seek) and gives the same pixels; a run before its
    // position, or of another file, opens and seeks.
    let mut reader = FrameReader::new(1);
    for (a, b) in [(20, 24), (24, 31), (31, 33)] {
        assert_eq!(
            reader.decode(four_shots(), &times[a..b], 256).unwrap(),
            seen[a..b]
        );
    }
    assert_eq!((reader.sought, reader.continued), (1, 2));
    assert_eq!(
        reader.decode(four_shots(), &times[2..4], 256).unwrap(),
        seen[2..4]
    );
    assert_eq!((reader.sought, reader.continued), (2, 2));
    // Stopping early stops the decode.
    let mut n = 0;
    for_each_sampled(four_shots(), 5.0, 256, |_| {
        n += 1;
        n < 3
    })
    .unwrap();
    assert_eq!(n, 3);
}

#[test]
fn streaming_vad_over_the_decoded_track_finds_the_whole_track_spans() {
    let long = &samples()[0];
    let Expect::Video { duration_s, .. } = long.expect else {
        panic!("the first sample is the long video")
    };
    let speech = rayorch_models::assets::ensure_speech().expect("fetching silero VAD");
    let mut vad = rayorch_models::speech::Vad::from_assets(&speech, Default::default()).unwrap();
    let whole = extract_audio(&long.path, 0.0, duration_s).unwrap();
    let want = vad.segments(&whole).unwrap();
    assert_eq!(want.len(), 2, "the two sentences: {want:?}");
    // Fed a decoded packet at a time (never holding the track) and in
    // pieces cut across windows: the same probabilities, the same spans.
    let mut stream = vad.stream();
    let mut chunks = 0;
    for_each_audio(&long.path, 0.0, duration_s, |pcm| {
        chunks += 1;
        stream.push(pcm).unwrap();
    })
    .unwrap();
    assert!(chunks > 10, "{chunks} chunks");
    assert_eq!(stream.len(), whole.len());
    assert_eq!(stream.finish().unwrap(), want);
    let mut stream = vad.stream();
    for piece in whole.chunks(777) {
        stream.push(piece).unwrap();
    }
    assert_eq!(
        stream.finish_probabilities().unwrap(),
        vad.probabilities(&whole).unwrap()
    );
    // The whisper windows cover each span with context, on the sample grid,
    // none longer than whisper's window.
    let path = Arc::new(long.path.clone());
    let pieces = speech_windows(&path, &want, whole.len() as f64 / 16_000.0);
    assert_eq!(pieces.len(), 2);
    for (p, w) in pieces.iter().zip(&want) {
        assert!(p.start_s <= w.start_s && p.end_s >= w.end_s, "{p:?} covers {w:?}");
    }
    let long_span = [rayorch_models::speech::SpeechSpan {
        start_s: 1.0,
        end_s: 71.0,
    }];
    let cut = speech_windows(&path, &long_span, 80.0);
    let lens: Vec<f64> = cut.iter().map(|p| p.end_s - p.start_s).collect();
    assert_eq!(lens.len(), 3, "{lens:?}");
    assert!(lens.iter().all(|l| *l <= 30.0 + 1e-9), "{lens:?}");
    assert!(
        cut.windows(2).all(|w| w[0].end_s == w[1].start_s),
        "pieces tile the span"
    );
    assert!((cut[0].start_s - 0.7).abs() < 1e-9 && (cut[2].end_s - 71.3).abs() < 1e-9);
}

#[test]
fn every_bad_input_is_a_typed_failure_naming_the_file() {
    let decode = VideoDecode::new(ShotConfig::default());
    let bad: Vec<&MediaFile> = samples()
        .iter()
        .filter(|m| matches!(m.expect, Expect::Failure { .. }))
        .collect();
    assert_eq!(bad.len(), 5);
    for m in bad {
        let Expect::Failure { word } = &m.expect else {
            unreachable!()
        };
        let err = decode
            .probe(&m.path)
            .expect_err("a bad file must fail")
            .to_string();
        assert!(err.contains(&m.path.display().to_string()), "{err}");
        assert!(
            err.contains(word.as_str()),
            "{} should say {word:?}: {err}",
            m.path.display()
        );
    }
}

/// Records by file name, and the frame-model batch counts (batches,
/// multi-clip, multi-video, frames).
type Run = (Vec<(String, Result<VideoRecord, String>)>, (u64, u64, u64, u64));

fn run_index(cfg: &IndexConfig, files: &[MediaFile]) -> Run {
    let assets = rayorch_video::nsfw::ensure_assets().expect("fetching open_nsfw and ONNX Runtime");
    let mix = Arc::new(BatchMix::default());
    let speech = rayorch_models::assets::ensure_speech().expect("fetching silero VAD and whisper");
    let index = VideoIndex::new(cfg, &assets, &speech, mix.clone());
    let (plan, out) = index.plan().unwrap();
    let mut got = Vec::new();
    Runner::new(&plan)
        .window(4)
        .run(
            files
                .iter()
                .enumerate()
                .map(|(i, m)| (i as u64, VideoInput::File(m.path.clone()))),
            Callback(|o: &RootOutcome| {
                let name = files[o.key as usize].path.display().to_string();
                let r = match o.get(out) {
                    Item::Present(v) => Ok(v),
                    other => Err(other.cause().map(|c| c.message().to_string()).unwrap_or_default()),
                };
                got.push((name, r));
            }),
        )
        .unwrap();
    got.sort_by(|a, b| a.0.cmp(&b.0));
    (got, mix.snapshot())
}

#[test]
fn the_pipeline_writes_every_good_video_and_fails_every_bad_one() {
    let files = samples();
    let cfg = IndexConfig {
        score_batch: 8,
        ..IndexConfig::default()
    };
    let (got, mix) = run_index(&cfg, files);
    assert_eq!(got.len(), files.len());
    let rate = cfg.shots.sample_fps;
    for m in files {
        let name = m.path.display().to_string();
        let r = &got.iter().find(|g| g.0 == name).unwrap().1;
        match (&m.expect, r) {
            (
                Expect::Video {
                    cuts_s,
                    duration_s,
                    speech,
                },
                Ok(v),
            ) => {
                if *speech {
                    let wer = rayorch_testdata::wer::wer(rayorch_testdata::media::SENTENCE, &v.transcript);
                    assert!(wer <= 0.3, "{name}: transcript {:?}, WER {wer:.2}", v.transcript);
                } else {
                    assert_eq!(v.transcript, "", "{name}: no speech was muxed in");
                }
                assert!((v.info.duration_s - duration_s).abs() < 0.2, "{name}");
                let starts: Vec<f64> = v.shots.iter().skip(1).map(|s| s.start_s).collect();
                assert_eq!(
                    starts.len(),
                    cuts_s.len(),
                    "{name}: shots at {starts:?}, cuts {cuts_s:?}"
                );
                for (s, c) in starts.iter().zip(cuts_s) {
                    assert!((s - c).abs() <= 1.0 / rate + 1e-9, "{name}: {s} vs {c}");
                }
                assert_eq!(v.frames, v.clips.iter().map(|c| c.frames).sum::<usize>());
                assert!(
                    v.frames as f64 >= duration_s * rate - 1.0,
                    "{name}: {} frames",
                    v.frames
                );
                assert!(v.max_nsfw <= 0.05, "{name}: nsfw {}", v.max_nsfw);
                assert_eq!(v.embedding.len(), 1024);
                let norm: f32 = v.embedding.iter().map(|x| x * x).sum::<f32>().sqrt();
                assert!((norm - 1.0).abs() < 1e-4);
            }
            (Expect::Failure { word }, Err(cause)) => {
                assert!(cause.contains(&name) && cause.contains(word.as_str()), "{cause}");
            }
            (e, r) => panic!("{name}: expected {e:?}, got {r:?}"),
        }
    }
    let (batches, multi_clip, _, frames) = mix;
    let scored: usize = got
        .iter()
        .filter_map(|g| g.1.as_ref().ok())
        .map(|v| v.frames)
        .sum();
    assert_eq!(frames, scored as u64, "every scored frame is in a record");
    assert!(batches >= frames.div_ceil(8), "batches hold at most 8 frames");
    assert!(multi_clip > 0, "some batches mix clips");
    // Determinism: another batch size and replica count, the same records
    // (structure exactly, scores to float tolerance).
    let other = IndexConfig {
        score_batch: 5,
        score_replicas: 2,
        ..cfg
    };
    let (again, _) = run_index(&other, files);
    for ((n1, a), (n2, b)) in got.iter().zip(&again) {
        assert_eq!(n1, n2);
        match (a, b) {
            (Ok(a), Ok(b)) => {
                assert_eq!(a.shots, b.shots, "{n1}");
                assert_eq!(a.transcript, b.transcript, "{n1}: whisper batches change no text");
                assert_eq!(a.frames, b.frames);
                for (x, y) in a.clips.iter().zip(&b.clips) {
                    assert_eq!((x.start_s, x.end_s, x.frames), (y.start_s, y.end_s, y.frames));
                    assert!((x.max_nsfw - y.max_nsfw).abs() < 1e-4);
                }
                let d: f32 = a
                    .embedding
                    .iter()
                    .zip(&b.embedding)
                    .map(|(x, y)| (x - y).abs())
                    .sum();
                assert!(d < 1e-3, "{n1}: embedding moved by {d}");
            }
            (Err(a), Err(b)) => assert_eq!(a, b),
            _ => panic!("{n1}: outcomes differ between runs"),
        }
    }
}

#[test]
#[cfg(not(feature = "store"))]
fn a_build_without_store_refuses_a_url_with_the_command_that_adds_it() {
    let err = rayorch_video::job::split(&["s3://videos/in/".to_string()], &Default::default())
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("s3://videos/in/: ")
            && err.contains("--features store --example video_index -- s3://videos/in/"),
        "{err}"
    );
}

/// The job's command line says of a file that is no video what the document
/// jobs say of a file that is no PDF (`rayorch_kit::outcome`): one `failed`
/// line (its own input failed; nothing suppressed it), the good video
/// written, the exit status 3; and 0 when the caller expected that failure
/// (the example's generated samples broken on purpose).
#[test]
fn the_job_reports_a_bad_file_as_failed_and_exits_3_unless_it_was_expected() {
    use clap::Parser;
    let tmp = tempfile::tempdir().unwrap();
    let bad = tmp.path().join("notes.mp4");
    std::fs::write(&bad, b"these are notes, not a video").unwrap();
    let inputs = [four_shots().display().to_string(), bad.display().to_string()];
    for (expected, exit) in [(false, 3), (true, 0)] {
        let out = tmp.path().join(format!("out-{expected}"));
        let o = out.display().to_string();
        let mut argv = vec!["video_index", "--no-progress", "--out", &o];
        argv.extend(inputs.iter().map(String::as_str));
        let args = rayorch_video::job::Args::parse_from(argv);
        let (files, urls) = rayorch_video::job::split(&args.inputs, &args.run).unwrap();
        let bad_name = bad.display().to_string();
        let known = rayorch_kit::expect::Expected::failing(expected.then_some(&bad_name));
        let code = rayorch_video::job::run(&args, &files, &urls, known).unwrap();
        assert_eq!(code, exit, "expected failure: {expected}");
        let failures = rayorch_kit::check::jsonl_lines(&out.join("failures.jsonl")).unwrap();
        assert_eq!(failures.len(), 1, "{failures:?}");
        assert_eq!(failures[0]["outcome"], "failed", "{failures:?}");
        assert_eq!(
            rayorch_kit::check::jsonl_lines(&out.join("videos.jsonl"))
                .unwrap()
                .len(),
            1
        );
    }
    // The same expectation from the command line: a manifest (`--expected`).
    let known = tmp.path().join("known");
    std::fs::create_dir_all(&known).unwrap();
    std::fs::write(
        known.join("manifest.json"),
        r#"[{"file": "notes.mp4", "kind": "not_video"}]"#,
    )
    .unwrap();
    let (o, k) = (
        tmp.path().join("out-manifest").display().to_string(),
        known.display().to_string(),
    );
    let mut argv = vec!["video_index", "--no-progress", "--expected", &k, "--out", &o];
    argv.extend(inputs.iter().map(String::as_str));
    let args = rayorch_video::job::Args::parse_from(argv);
    let (files, urls) = rayorch_video::job::split(&args.inputs, &args.run).unwrap();
    let none = rayorch_kit::expect::Expected::none();
    assert_eq!(rayorch_video::job::run(&args, &files, &urls, none).unwrap(), 0);
}

/// The video job on the jobs' journal (`rayorch_kit::job`): a run cut short
/// (`--limit 1`) leaves a journal that a plain run into the folder refuses
/// with what to do, and `--resume` writes the rest, each video once.
#[test]
fn a_video_run_cut_short_is_continued_by_resume_with_each_video_once() {
    use clap::Parser;
    let tmp = tempfile::tempdir().unwrap();
    let copy = tmp.path().join("again.mp4");
    std::fs::copy(four_shots(), &copy).unwrap();
    let inputs = [four_shots().display().to_string(), copy.display().to_string()];
    let out = tmp.path().join("out");
    let o = out.display().to_string();
    let run = |extra: &[&str]| {
        let mut argv = vec!["video_index", "--no-progress", "--out", &o];
        argv.extend_from_slice(extra);
        argv.extend(inputs.iter().map(String::as_str));
        let args = rayorch_video::job::Args::parse_from(argv);
        let (files, urls) = rayorch_video::job::split(&args.inputs, &args.run).unwrap();
        rayorch_video::job::run(&args, &files, &urls, rayorch_kit::expect::Expected::none())
    };
    let keys = || -> Vec<u64> { rayorch_kit::check::jsonl_keys(&out.join("videos.jsonl")).unwrap() };
    assert_eq!(run(&["--limit", "1"]).unwrap(), 0);
    assert_eq!(keys(), [0]);
    let refused = run(&[]).unwrap_err().to_string();
    assert!(
        refused.contains("--resume") && refused.contains("--force"),
        "{refused}"
    );
    assert_eq!(run(&["--resume"]).unwrap(), 0);
    let mut got = keys();
    got.sort_unstable();
    assert_eq!(got, [0, 1], "each video once");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    let r = &summary["job"];
    assert_eq!(
        (r["written"].as_u64(), r["resumed"].as_u64()),
        (Some(1), Some(1)),
        "{r}"
    );
}

/// The video job reads an input list as the document jobs do: each row's
/// video, its other fields in the video's line, a bad row one failure.
#[test]
fn the_video_job_reads_an_input_list_and_writes_each_rows_fields_beside_its_video() {
    use clap::Parser;
    let tmp = tempfile::tempdir().unwrap();
    let list = tmp.path().join("videos.csv");
    let shots = four_shots().display().to_string();
    std::fs::write(&list, format!("url,camera\n{shots},north\n,south\n")).unwrap();
    let (o, l) = (
        tmp.path().join("out").display().to_string(),
        list.display().to_string(),
    );
    let args = rayorch_video::job::Args::parse_from([
        "video_index",
        "--no-progress",
        "--out",
        &o,
        "--input-list",
        &l,
    ]);
    let (files, urls) = rayorch_video::job::split(&args.inputs, &args.run).unwrap();
    let code = rayorch_video::job::run(&args, &files, &urls, rayorch_kit::expect::Expected::none()).unwrap();
    assert_eq!(code, 3, "the row without a video fails");
    let out = tmp.path().join("out");
    let videos = rayorch_kit::check::jsonl_lines(&out.join("videos.jsonl")).unwrap();
    assert_eq!(videos.len(), 1);
    assert_eq!(videos[0]["metadata"], serde_json::json!({"camera": "north"}));
    // The Parquet row carries the same fields, as JSON text.
    use arrow_array::Array as _;
    let (_, batches) = rayorch_kit::parquet::read_batches(&out.join("videos.parquet")).unwrap();
    let metadata: Vec<Option<String>> = batches
        .iter()
        .flat_map(|b| {
            let column = b.column_by_name("metadata").expect("a metadata column");
            let strings = column
                .as_any()
                .downcast_ref::<arrow_array::StringArray>()
                .expect("JSON text");
            (0..b.num_rows())
                .map(|r| strings.is_valid(r).then(|| strings.value(r).to_string()))
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(metadata, [Some(r#"{"camera":"north"}"#.to_string())]);
    let failures = rayorch_kit::check::jsonl_lines(&out.join("failures.jsonl")).unwrap();
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert_eq!(failures[0]["name"], format!("{l}:3"));
    assert_eq!(failures[0]["code"], "input.bad_row");
}

/// Videos are read where FFmpeg can seek: a tar member or a shard's bytes
/// column is refused before anything is written, with what to give instead.
#[test]
fn the_video_job_refuses_inputs_it_cannot_seek_in() {
    use clap::Parser;
    for (flags, says) in [
        (&["--input-tar", "videos.tar"][..], "not from a tar member"),
        (
            &["--input-parquet", "v.parquet", "--bytes-column", "mp4"][..],
            "--url-column",
        ),
    ] {
        let mut argv = vec!["video_index", "--no-progress"];
        argv.extend_from_slice(flags);
        let args = rayorch_video::job::Args::parse_from(argv);
        let e = rayorch_video::job::split(&args.inputs, &args.run)
            .unwrap_err()
            .to_string();
        assert!(e.contains(says), "{e}");
    }
}
