//! Memory of the decoders, in its own test binary (its own process, so the
//! resident size is this test's alone): reading a video again and again
//! must not grow the process. Before packets were released after each read
//! (`decode::fresh_packet`), every scan kept every byte it had read.

use std::path::PathBuf;

use rayorch_testdata::media::long_speech_video;
use rayorch_video::decode::{FrameReader, for_each_audio, scan};

/// The process's resident set in bytes (`/proc/self/statm`, Linux).
fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("reading /proc/self/statm");
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .expect("statm's second field");
    pages * 4096
}

#[test]
fn reading_a_video_again_and_again_does_not_grow_the_process() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("video-memory");
    std::fs::create_dir_all(&dir).unwrap();
    let media = long_speech_video(&dir.join("long_120s.mp4"), 120, 10).expect("generating (needs ffmpeg)");
    let size = std::fs::metadata(&media.path).unwrap().len();
    let read_all = || {
        let (_, samples) = scan(&media.path, 2.0).unwrap();
        let times: Vec<f64> = samples.iter().map(|s| s.t).collect();
        let mut reader = FrameReader::new(1);
        for run in times.chunks(40) {
            assert_eq!(reader.decode(&media.path, run, 64).unwrap().len(), run.len());
        }
        let mut n = 0usize;
        for_each_audio(&media.path, 0.0, 120.0, |pcm| n += pcm.len()).unwrap();
        assert!((n as i64 - 120 * 16_000).abs() < 16_000, "{n} samples");
    };
    // The first pass warms the allocator and FFmpeg's tables.
    read_all();
    let before = rss_bytes();
    let passes = 4;
    for _ in 0..passes {
        read_all();
    }
    let grown = rss_bytes().saturating_sub(before);
    // A leak of the bytes read would be ≥ 3 × the file per pass (a scan, the
    // range decodes and the audio each read it whole).
    assert!(
        grown < size,
        "{passes} passes over a {size}-byte file grew the process by {grown} bytes"
    );
}
