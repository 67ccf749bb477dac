//! The C allocator's settings for a job process: keep freed memory for
//! reuse instead of handing it back to the kernel.
//!
//! glibc serves a block above its mmap threshold (32 MiB at most, and any
//! block a thread arena's 64 MiB heap cannot hold) with a fresh `mmap` and
//! unmaps it on free, and it trims the top of a heap once enough there is
//! free. A job's model calls allocate and free such blocks on every call:
//! the embedder's attention temporaries (batch × heads × tokens² floats
//! per op), page images, ONNX Runtime's buffers. Each new mapping is
//! faulted in again page by page: on 64 real PDF pages the default-mode
//! job took 2.07 M page faults and 4.4 of its 13.8 CPU seconds in the
//! kernel (BENCHMARKS.md, "The embedder's page faults").
//!
//! [`keep_freed_memory`], called first thing in a job's `main`, turns both
//! off for the process: every block comes from the arenas, and a freed one
//! is reused by the next allocation of its size (a block larger than a
//! thread arena's 64 MiB heap is still mapped afresh). glibc reads these
//! settings when a process starts (`GLIBC_TUNABLES`), and the workspace
//! forbids the `unsafe` of calling `mallopt`, so the binary starts itself
//! again, in place (`exec`: the same process id, arguments, environment
//! and open files), with the settings added to `GLIBC_TUNABLES`. The price
//! is that memory freed after a peak stays with the process (its RSS does
//! not fall back), which a batch job that runs near its peak for hours
//! does not feel.
//!
//! Invariants:
//! - A user who set any `glibc.malloc.` tunable has chosen: nothing is
//!   changed ([`Malloc::UserTunables`]). The restarted process sees the
//!   settings, so it never starts itself a third time.
//! - Off glibc (musl, macOS) nothing is changed ([`Malloc::NotGlibc`]).
//! - It changes only when memory returns to the kernel, never what an
//!   allocation returns: no output of a run depends on it.

/// The settings added to `GLIBC_TUNABLES`: no block is mapped on its own
/// (`mmap_max=0`), and the top of a heap is trimmed only past 4 GiB free.
pub const TUNABLES: &str = "glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=4294967296";

/// What [`keep_freed_memory`] found.
#[derive(Debug)]
pub enum Malloc {
    /// This process runs with [`TUNABLES`].
    Kept,
    /// `GLIBC_TUNABLES` named another malloc setting: the user's choice stands.
    UserTunables,
    /// Not glibc: its allocator is left as it is.
    NotGlibc,
    /// The restart failed (the binary could not be found or started): the
    /// process goes on with glibc's defaults.
    NotRestarted(std::io::Error),
}

/// Make sure this process keeps freed memory (see the module note): returns
/// at once when it does, or when it should not be changed; otherwise
/// starts the binary again with the settings and does not return, unless
/// that fails. Call it first in `main`, before any thread is started.
pub fn keep_freed_memory() -> Malloc {
    let current = std::env::var("GLIBC_TUNABLES").ok();
    match user_chose(current.as_deref()) {
        Some(true) => Malloc::Kept,
        Some(false) => Malloc::UserTunables,
        None => restart(current),
    }
}

/// `Some(true)`: `tunables` holds [`TUNABLES`]; `Some(false)`: another
/// malloc setting; `None`: no malloc setting.
fn user_chose(tunables: Option<&str>) -> Option<bool> {
    let t = tunables?;
    if t.contains(TUNABLES) {
        return Some(true);
    }
    t.split(':')
        .any(|kv| kv.starts_with("glibc.malloc."))
        .then_some(false)
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn restart(current: Option<String>) -> Malloc {
    use std::os::unix::process::CommandExt;
    let tunables = match current.filter(|t| !t.is_empty()) {
        Some(t) => format!("{t}:{TUNABLES}"),
        None => TUNABLES.to_string(),
    };
    let mut args = std::env::args_os();
    let arg0 = args.next();
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => return Malloc::NotRestarted(e),
    };
    let mut cmd = std::process::Command::new(exe);
    if let Some(arg0) = arg0 {
        cmd.arg0(arg0);
    }
    // `exec` returns only on failure.
    Malloc::NotRestarted(cmd.args(args).env("GLIBC_TUNABLES", tunables).exec())
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn restart(_: Option<String>) -> Malloc {
    Malloc::NotGlibc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_malloc_tunable_of_the_users_stops_the_restart() {
        assert_eq!(user_chose(None), None);
        assert_eq!(user_chose(Some("glibc.cpu.hwcaps=-AVX512F")), None);
        assert_eq!(user_chose(Some("glibc.malloc.mmap_threshold=1000")), Some(false));
        assert_eq!(
            user_chose(Some("glibc.cpu.hwcaps=-AVX512F:glibc.malloc.arena_max=2")),
            Some(false)
        );
        assert_eq!(
            user_chose(Some(&format!("glibc.cpu.hwcaps=-AVX512F:{TUNABLES}"))),
            Some(true)
        );
    }
}
