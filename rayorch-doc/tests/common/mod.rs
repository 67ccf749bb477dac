//! What the tests that run the job in a child process share.

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
