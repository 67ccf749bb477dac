//! Compile-pass and compile-fail cases for `#[pipeline]` and `#[derive(Domain)]`.
//!
//! The `.stderr` files depend on the exact compiler, which `rust-toolchain.toml`
//! pins. After an intended change in a message, bless them with
//! `TRYBUILD=overwrite cargo test -p ui-tests` and review the diff. To run some
//! cases only: `RAYORCH_UI_ONLY=fail/domain cargo test -p ui-tests` (a path
//! fragment under `tests/ui/`).

#[test]
fn ui() {
    let only = std::env::var("RAYORCH_UI_ONLY").unwrap_or_default();
    let t = trybuild::TestCases::new();
    for case in cases("tests/ui/pass").into_iter().filter(|c| c.contains(&only)) {
        t.pass(case);
    }
    for case in cases("tests/ui/fail").into_iter().filter(|c| c.contains(&only)) {
        t.compile_fail(case);
    }
}

/// Every `.rs` file under `dir`, sorted, so the run order is stable.
fn cases(dir: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![std::path::PathBuf::from(dir)];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).expect("ui case directory") {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path.to_string_lossy().into_owned());
            }
        }
    }
    out.sort();
    out
}
