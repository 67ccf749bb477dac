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
    let r = rayorch_video::job::split(&args.inputs, &args.run).and_then(|(files, urls)| {
        rayorch_video::job::run(&args, &files, &urls, rayorch_kit::expect::Expected::none())
    });
    match r {
        Ok(code) => println!("\nJOB-EXIT {code}"),
        Err(e) => println!("\nJOB-ERROR {}", serde_json::to_string(&e.to_string()).unwrap()),
    }
}

/// A server holding a video of two shots at `s3://videos/in/two-shots.mp4`,
/// and the temporary folder it was made in.
fn two_shots_in_a_bucket() -> (S3Server, tempfile::TempDir) {
    let s3 = S3Server::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let video =
        rayorch_testdata::media::shots_video(&dir.path().join("two-shots.mp4"), 2, 1.5, 0, false).unwrap();
    let bytes = std::fs::read(&video.path).unwrap();
    s3.put(&[("s3://videos/in/two-shots.mp4", &bytes)]).unwrap();
    (s3, dir)
}

fn jsonl(path: &Path) -> Vec<serde_json::Value> {
    rayorch_kit::check::jsonl_lines(path).unwrap()
}

#[test]
fn a_video_in_a_bucket_is_indexed_under_its_url_and_its_spooled_file_removed() {
    let (s3, dir) = two_shots_in_a_bucket();
    s3.put(&[("s3://videos/in/notes.txt", b"no")]).unwrap();
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
    // The job ran to its end; the missing object makes the status 3.
    assert!(
        console.contains("JOB-EXIT 3"),
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

/// A child run's exit status (`None`: the job returned an error), and its
/// console.
fn child(s3: &S3Server, argv: &[&str]) -> (Option<u8>, String) {
    let argv: Vec<String> = argv.iter().map(|a| a.to_string()).collect();
    let child = s3.child_test("child_runs_the_job", &argv).unwrap();
    let console = format!(
        "{}\n{}",
        String::from_utf8_lossy(&child.stdout),
        String::from_utf8_lossy(&child.stderr)
    );
    let code = console
        .lines()
        .find_map(|l| l.strip_prefix("JOB-EXIT "))
        .and_then(|c| c.trim().parse().ok());
    (code, console)
}

#[test]
fn outputs_at_a_url_are_committed_once_and_a_resume_skips_what_they_name() {
    let (s3, dir) = two_shots_in_a_bucket();
    s3.put(&[("s3://out/README", b"outputs")]).unwrap();
    let run = |extra: &[&str]| {
        let mut argv = vec![
            "video_index",
            "--no-progress",
            "--commit-every-s",
            "0",
            "--out",
            "s3://out/index/",
            "s3://videos/in/",
            "s3://videos/in/gone.mp4",
        ];
        argv.extend_from_slice(extra);
        child(&s3, &argv)
    };
    // gone.mp4 fails (status 3); both videos are committed, once.
    let (code, console) = run(&[]);
    assert_eq!(code, Some(3), "{console}");
    assert!(
        console.contains("2 videos in 2 commit records, each once"),
        "{console}"
    );
    let committed =
        rayorch_kit::store::outputs::read_committed("s3://out/index/", &S3Server::options(&s3.endpoint()))
            .unwrap();
    let kinds: Vec<Vec<&str>> = committed
        .records
        .iter()
        .map(|r| r.segments.iter().map(|s| s.kind.as_str()).collect())
        .collect();
    assert!(
        kinds.contains(&vec!["videos.jsonl", "videos.parquet"]),
        "{kinds:?}"
    );
    assert!(kinds.contains(&vec!["failures.jsonl"]), "{kinds:?}");
    let line = committed.segments("videos.jsonl")[0].clone();
    let text = String::from_utf8(s3.get(&format!("s3://out/index/{line}")).unwrap()).unwrap();
    let v: serde_json::Value = serde_json::from_str(text.trim()).unwrap();
    assert_eq!(v["name"], "s3://videos/in/two-shots.mp4");
    assert_eq!(v["clips"].as_array().unwrap().len(), 2, "{v}");

    // Again into the same URL: refused; resumed: nothing left to run.
    let (code, console) = run(&[]);
    assert!(code.is_none() && console.contains("--resume"), "{console}");
    let (code, console) = run(&["--resume"]);
    assert_eq!(code, Some(0), "{console}");
    assert!(
        console.contains("2 videos in 2 commit records, each once (this run: 0 commits, 0 videos"),
        "{console}"
    );
    // A local folder holding no journaled run: --resume says so.
    let local = dir.path().join("local").display().to_string();
    let (code, console) = child(
        &s3,
        &[
            "video_index",
            "--no-progress",
            "--resume",
            "--out",
            &local,
            "s3://videos/in/",
        ],
    );
    assert!(
        code.is_none() && console.contains("holds no journaled run to continue"),
        "{console}"
    );
}
