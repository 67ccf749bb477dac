//! The video job with inputs in object storage (`--features store`),
//! against a real S3 server (SeaweedFS from its pinned wheel): a video
//! below a prefix is spooled to a file for FFmpeg, indexed like the same
//! file on disk, written under its URL, and its spooled file is gone after;
//! a missing object is one failure line with the URL in its cause.
//!
//! The job reads credentials and endpoint from the environment only, and a
//! test may not change its own process's: the job runs in a child process
//! of this test binary (the ignored test `child_runs_the_job`).

use std::path::Path;

use clap::Parser;
use rayorch_kit::store::testing::S3Server;

#[test]
#[ignore = "run by the other test of this file in a child process, with the S3 server's environment"]
fn child_runs_the_job() {
    let argv: Vec<String> = serde_json::from_str(&std::env::var("RAYORCH_TEST_ARGV").unwrap()).unwrap();
    let args = rayorch_video::job::Args::parse_from(argv);
    let r = rayorch_video::job::split(&args.inputs)
        .and_then(|(files, urls)| rayorch_video::job::run(&args, &files, &urls));
    match r {
        Ok(()) => println!("\nJOB-OK"),
        Err(e) => println!("\nJOB-ERROR {}", serde_json::to_string(&e.to_string()).unwrap()),
    }
}

fn jsonl(path: &Path) -> Vec<serde_json::Value> {
    rayorch_kit::check::jsonl_lines(path).unwrap()
}

#[test]
fn a_video_in_a_bucket_is_indexed_under_its_url_and_its_spooled_file_removed() {
    let s3 = S3Server::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let video =
        rayorch_testdata::media::shots_video(&dir.path().join("two-shots.mp4"), 2, 1.5, 0, false).unwrap();
    let bytes = std::fs::read(&video.path).unwrap();
    s3.put(&[
        ("s3://videos/in/two-shots.mp4", &bytes),
        ("s3://videos/in/notes.txt", b"no"),
    ])
    .unwrap();
    let out = dir.path().join("out");
    let argv = [
        "video_index",
        "--no-progress",
        "--out",
        &out.display().to_string(),
        "s3://videos/in/",
        "s3://videos/in/gone.mp4",
    ]
    .map(String::from);
    let child = s3.child_test("child_runs_the_job", &argv).unwrap();
    let console = String::from_utf8_lossy(&child.stdout);
    assert!(
        console.contains("JOB-OK"),
        "{console}\n{}",
        String::from_utf8_lossy(&child.stderr)
    );
    let videos = jsonl(&out.join("videos.jsonl"));
    assert_eq!(videos.len(), 1, "{console}");
    assert_eq!(videos[0]["name"], "s3://videos/in/two-shots.mp4");
    assert_eq!(videos[0]["clips"].as_array().unwrap().len(), 2, "{}", videos[0]);
    let failures = jsonl(&out.join("failures.jsonl"));
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert_eq!(failures[0]["name"], "s3://videos/in/gone.mp4");
    assert!(
        failures[0]["cause"]
            .as_str()
            .unwrap()
            .contains("s3://videos/in/gone.mp4: no such object")
    );
    // The spool is empty: the written video's file went with its record.
    let left: Vec<_> = std::fs::read_dir(out.join("spool")).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
}
