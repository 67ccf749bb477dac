//! `rayorch_kit::malloc::keep_freed_memory` in a process of its own: this
//! test binary re-executed (its ignored `child` test), once with the call
//! and once without. The child allocates, touches and frees a 40 MiB
//! block four times and prints the page faults its thread took: with
//! glibc's defaults every round maps the block afresh and faults in each
//! page; restarted with the settings, the freed block is reused.

use std::process::Command;

/// 40 MiB: above glibc's largest mmap threshold (32 MiB), inside a thread
/// arena's heap (64 MiB; a block larger than that is mapped whatever the
/// settings).
const LEN: usize = 40 << 20;

/// This thread's minor page faults (`/proc/thread-self/stat`, field 10).
fn minor_faults() -> u64 {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
    let after_name = &stat[stat.rfind(')').unwrap() + 2..];
    after_name.split(' ').nth(7).unwrap().parse().unwrap()
}

#[test]
#[ignore = "a child process: run by this binary's test with its role in the environment"]
fn child() {
    if std::env::var("MALLOC_ROLE").as_deref() == Ok("keep") {
        let kept = rayorch_kit::malloc::keep_freed_memory();
        assert!(matches!(kept, rayorch_kit::malloc::Malloc::Kept), "{kept:?}");
    }
    let faults = std::thread::spawn(|| {
        let round = || {
            let mut v: Vec<u8> = Vec::with_capacity(LEN);
            // Every page written, as a model op writes its output.
            v.resize(LEN, 1);
            std::hint::black_box(&v);
        };
        round();
        let before = minor_faults();
        for _ in 0..4 {
            round();
        }
        minor_faults() - before
    })
    .join()
    .unwrap();
    println!("FAULTS {faults}");
}

fn faults_of(role: &str) -> u64 {
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["child", "--exact", "--ignored", "--nocapture", "--test-threads=1"])
        .env("MALLOC_ROLE", role)
        .env_remove("GLIBC_TUNABLES")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{role}: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .lines()
        .find_map(|l| l.split_once("FAULTS ").map(|(_, n)| n))
        .unwrap_or_else(|| panic!("{role}: no FAULTS line in {stdout}"))
        .trim()
        .parse()
        .unwrap()
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[test]
fn a_process_restarted_to_keep_freed_memory_reuses_a_freed_block() {
    let pages = (LEN / 4096) as u64;
    let default = faults_of("default");
    let kept = faults_of("keep");
    assert!(
        default >= 3 * pages,
        "{default} faults in 4 rounds of {pages} pages with glibc's defaults"
    );
    assert!(
        kept < pages / 4,
        "{kept} faults in 4 rounds of {pages} pages, freed memory kept"
    );
}
