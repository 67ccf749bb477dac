//! A panic prints once (issue 53 item 4): a record whose stage panics on
//! every attempt is retried and bisected down to itself, each attempt
//! panicking again, yet its message reaches stderr once (the first
//! attempt); a per-record async stage's retries are as quiet; a shape key
//! that panics prints one warning line for its Call and is counted. The
//! run happens in a child process (this binary re-executed), so the parent
//! reads exactly what it wrote to stderr and no other test's panic hook
//! meets it.

use std::process::Command;
use std::time::Duration;

use rayorch::prelude::*;
use rayorch::sink::Callback;
use rayorch::{AsyncRecordStage, RecordResult, RootOutcome, Runner, StageContext};

domain!(Doc);
domain!(Page: Doc);

const BLOCKING: &str = "blocking stage exploded on page 13";
const ASYNC: &str = "async record exploded on page 27";
const SHAPE: &str = "shape key exploded on page";

struct Remote;

impl AsyncRecordStage for Remote {
    type In = u32;
    type Out = u32;
    async fn run_one(self: std::sync::Arc<Self>, p: u32, _: StageContext) -> RecordResult<u32> {
        if p == 27 {
            panic!("{ASYNC}");
        }
        Ok(Outcome::Ok(p))
    }
}

/// The child: one run that panics as the module note says; its figures to
/// stdout for the parent.
#[test]
#[ignore = "the child of quiet_panics::a_panic_prints_once: run with --ignored by the parent, which reads its stderr"]
fn quiet_panics_child() {
    let pages = Call::map("pages", |n: u32| (0..n).collect::<Vec<u32>>());
    let ocr = Call::map("ocr", |p: u32| {
        assert!(p != 13, "{BLOCKING}");
        p
    })
    .batch_size(8)
    .shape(|p: &u32| {
        assert!(p % 10 != 5, "{SHAPE} {p}");
        0
    });
    let remote = Call::new_async_records("remote", || Ok(Remote))
        .batch_size(8)
        .record_retries(2)
        .record_backoff(Duration::from_millis(1));
    let (plan, out) = Plan::build(|b| {
        let docs = b.source::<Doc, u32>();
        let page = expand::<Page, _, _>(pages.apply(docs));
        b.output(rayorch::reduce_keep_failed(remote.apply(ocr.apply(page))))
    })
    .unwrap();
    let mut failed = 0;
    let summary = Runner::new(&plan)
        .run(
            [(0u64, 40u32)],
            Callback(|o: &RootOutcome| {
                if let Item::Present(pages) = o.get(out) {
                    failed += pages.iter().filter(|p| p.is_err()).count();
                }
            }),
        )
        .unwrap();
    let ocr = summary.call("ocr").unwrap();
    let remote = summary.call("remote").unwrap();
    println!(
        "FIGURES failed={failed} ocr_attempt_failures={} shape_key_panics={} remote_attempts={}",
        ocr.attempt_failures, ocr.shape_key_panics, remote.record_attempts
    );
}

#[test]
fn a_panic_prints_once_and_a_panicking_shape_key_once_per_call() {
    let child = format!(
        "{}::quiet_panics_child",
        module_path!().split_once("::").unwrap().1
    );
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", &child, "--ignored", "--nocapture", "--test-threads=1"])
        .env("RUST_BACKTRACE", "0")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    // libtest writes the test's name on the line the child's output starts.
    let figures = stdout
        .lines()
        .find_map(|l| l.find("FIGURES").map(|i| &l[i..]))
        .unwrap_or_else(|| panic!("{stdout}"));
    // Page 13 fails in ocr (its batch of 8 retried, then bisected: several
    // attempts), page 27 in remote (three attempts); pages 5, 15, 25, 35
    // have a panicking shape key (batched under u64::MAX, not failed).
    let attempt_failures: u64 = field(figures, "ocr_attempt_failures");
    assert!(attempt_failures >= 3, "{figures}");
    assert_eq!(field::<u64>(figures, "failed"), 2, "{figures}");
    assert_eq!(field::<u64>(figures, "shape_key_panics"), 4, "{figures}");
    // 39 pages reach remote (page 13 failed before it): 38 once, page 27
    // three times.
    assert_eq!(field::<u64>(figures, "remote_attempts"), 38 + 3, "{figures}");
    assert_eq!(
        stderr.matches(BLOCKING).count(),
        1,
        "printed once, not per attempt:\n{stderr}"
    );
    assert_eq!(
        stderr.matches(ASYNC).count(),
        1,
        "printed once, not per retry:\n{stderr}"
    );
    assert_eq!(stderr.matches(SHAPE).count(), 0, "{stderr}");
    assert_eq!(
        stderr
            .matches("Call `ocr`: its shape key function panicked")
            .count(),
        1,
        "one line for the Call:\n{stderr}"
    );
}

fn field<T: std::str::FromStr>(line: &str, name: &str) -> T {
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in {line}"))
}
