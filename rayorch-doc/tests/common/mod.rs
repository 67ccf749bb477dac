//! What the tests that run the job in a child process share: the child
//! itself (an ignored test of each binary that includes this module) and
//! how its result is read.

/// The child test's name, as `--exact` takes it.
pub(crate) const CHILD: &str = "common::child_runs_the_job";

/// The job in a child process: the command line in `RAYORCH_TEST_ARGV`
/// (`doc_layout …` or `doc_ocr …`), its result printed last.
#[test]
#[ignore = "run by the other tests of its binary in a child process, with the S3 server's environment"]
fn child_runs_the_job() {
    let argv: Vec<String> = serde_json::from_str(&std::env::var("RAYORCH_TEST_ARGV").unwrap()).unwrap();
    let run = if argv[0] == "doc_layout" {
        rayorch_doc::layout::run_from
    } else {
        rayorch_doc::ocr::run_from
    };
    match run(argv) {
        Ok(code) => println!("\nJOB-EXIT {code}"),
        Err(e) => println!("\nJOB-ERROR {}", serde_json::to_string(&e.to_string()).unwrap()),
    }
}

/// What a child run of the job said (the ignored `child_runs_the_job`
/// prints `JOB-EXIT code` or `JOB-ERROR "message"` last): its exit status
/// (`Err`: the error it ended with) and its console.
pub(crate) fn child_result(child: &std::process::Output) -> (Result<u8, String>, String) {
    let console = String::from_utf8_lossy(&child.stdout).into_owned();
    let result = if let Some(code) = console.lines().find_map(|l| l.strip_prefix("JOB-EXIT ")) {
        Ok(code.trim().parse().unwrap())
    } else if let Some(e) = console.lines().find_map(|l| l.strip_prefix("JOB-ERROR ")) {
        Err(serde_json::from_str(e).unwrap())
    } else {
        panic!(
            "the child ended without a result:\n{console}\n{}",
            String::from_utf8_lossy(&child.stderr)
        );
    };
    (result, console)
}
