//! Helpers shared by the distributed test binaries: worker processes (the
//! test binary re-executed with `RAYORCH_DIST_TEST_WORKER` set, running its
//! own `worker_process` test), a guard that reaps them, and bounded waits
//! (a bug fails the test instead of hanging it).
#![allow(
    dead_code,
    reason = "each test binary (dist_cluster, dist_failures, dist_control) uses some of the helpers"
)]

use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

use rayorch_dist::{Codecs, DistConfig, Security, Storage};

/// How long a run may take before the test calls it hung: generous, it
/// fails a test instead of timing one.
pub(crate) const HUNG: Duration = Duration::from_secs(120);

/// The tests' settings: plain TCP to a loopback broker, ack wait 1 s (owner lease 3 s) so faults resolve in
/// seconds, values over 64 bytes through the object store, memory queues.
pub(crate) fn config(url: &str, job: &str) -> DistConfig {
    let mut c = DistConfig::new(url, job).ack_wait(Duration::from_secs(1));
    c.security = Security::insecure();
    c.inline_max = 64;
    c.storage = Storage::Memory;
    c
}

/// The codecs of the test plans: documents and pages are strings.
pub(crate) fn codecs() -> Codecs {
    Codecs::new().json::<String>().json::<Vec<String>>()
}

/// Start this test binary again as a worker of `job` (its `worker_process`
/// test), with `env` set.
pub(crate) fn spawn_worker(url: &str, job: &str, env: &[(&str, &str)]) -> Child {
    worker_command(url, job, env).spawn().unwrap()
}

/// The command [`spawn_worker`] starts (its stdout discarded).
pub(crate) fn worker_command(url: &str, job: &str, env: &[(&str, &str)]) -> Command {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args([
        "--exact",
        "worker_process",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ])
    .env("RAYORCH_DIST_TEST_WORKER", url)
    .env("RAYORCH_DIST_TEST_JOB", job)
    .envs(env.iter().copied())
    .stdout(std::process::Stdio::null());
    c
}

/// Kill and reap the workers still running (their pids are ours).
pub(crate) struct Workers(pub(crate) Vec<Child>);

impl Drop for Workers {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Workers {
    /// Is every worker process still running?
    pub(crate) fn all_running(&mut self) -> bool {
        self.0.iter_mut().all(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// Each worker's exit status, waiting until it exits (bounded by [`HUNG`]).
    pub(crate) fn exits(&mut self) -> Vec<ExitStatus> {
        let start = Instant::now();
        self.0
            .iter_mut()
            .map(|c| {
                loop {
                    if let Some(s) = c.try_wait().unwrap() {
                        break s;
                    }
                    assert!(
                        start.elapsed() < HUNG,
                        "worker process {} did not exit after the run ended",
                        c.id()
                    );
                    std::thread::sleep(Duration::from_millis(20));
                }
            })
            .collect()
    }
}

/// Wait (bounded, so a bug fails instead of hanging) until `cond` holds.
pub(crate) async fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < HUNG, "gave up waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `fut`'s output, or a failed test if it takes longer than [`HUNG`].
pub(crate) async fn bounded<T>(what: &str, fut: impl Future<Output = T>) -> T {
    match tokio::time::timeout(HUNG, fut).await {
        Ok(v) => v,
        Err(_) => panic!("{what} gave no answer in {HUNG:?}: it hangs"),
    }
}

/// Keep the panics a test provokes on purpose (their message holds
/// `marker`) off stderr; any other panic still prints.
pub(crate) fn quiet_panics(marker: &'static str) {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let p = info.payload();
            let text = p
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| p.downcast_ref::<&str>().copied());
            if !text.is_some_and(|t| t.contains(marker)) {
                default(info);
            }
        }));
    });
}

/// A [`PayloadStore`](rayorch_dist::PayloadStore) over a folder: the
/// simplest store outside the broker that an owner and its worker
/// processes share (`DistConfig::payloads`). Each key is a file, written
/// under a temporary name and renamed, so a reader never sees half of it.
pub(crate) struct DirStore(pub(crate) std::path::PathBuf);

impl DirStore {
    /// The store as a run shares it: named `dir://<folder>`.
    pub(crate) fn shared(dir: &std::path::Path) -> rayorch_dist::SharedPayloads {
        rayorch_dist::SharedPayloads {
            url: format!("dir://{}", dir.display()),
            store: std::sync::Arc::new(DirStore(dir.to_path_buf())),
        }
    }
}

impl rayorch_dist::PayloadStore for DirStore {
    fn put(&self, key: String, bytes: Vec<u8>) -> rayorch_runtime::BoxFuture<Result<(), String>> {
        let (part, at) = (self.0.join(format!("{key}.part")), self.0.join(&key));
        Box::pin(async move {
            std::fs::write(&part, bytes).map_err(|e| e.to_string())?;
            std::fs::rename(&part, &at).map_err(|e| e.to_string())
        })
    }

    fn get(&self, key: String, max: u64) -> rayorch_runtime::BoxFuture<Result<Vec<u8>, String>> {
        let at = self.0.join(&key);
        Box::pin(async move {
            let size = match std::fs::metadata(&at) {
                Ok(m) => m.len(),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    return Err(format!("{}{key}", rayorch_dist::GONE));
                }
                Err(e) => return Err(e.to_string()),
            };
            if size > max {
                return Err(format!("{}{key} holds {size} bytes", rayorch_dist::TOO_LARGE));
            }
            std::fs::read(&at).map_err(|e| e.to_string())
        })
    }

    fn delete(&self, key: String) -> rayorch_runtime::BoxFuture<Result<(), String>> {
        let at = self.0.join(&key);
        Box::pin(async move { std::fs::remove_file(at).map_err(|e| e.to_string()) })
    }
}
