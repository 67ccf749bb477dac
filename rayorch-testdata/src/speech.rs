//! Test speech without fixtures: espeak-ng speaks a text, ffmpeg turns any
//! audio file into 16 kHz mono `f32`. Both are external programs (Debian
//! `espeak-ng`, `ffmpeg`); a missing program is an error that says so.

use std::path::Path;
use std::process::Command;

use rayorch_models::ModelError;

fn tool_error(tool: &str, cause: impl std::fmt::Display) -> ModelError {
    ModelError::model(
        tool,
        format!("{cause}; install it (Debian: `apt-get install {tool}`) or put it on PATH"),
    )
}

/// Decode any audio file ffmpeg reads to 16 kHz mono samples in `[-1, 1]`.
pub fn decode_16k_mono(path: &Path) -> Result<Vec<f32>, ModelError> {
    let out = Command::new("ffmpeg")
        .args(["-v", "error", "-nostdin", "-i"])
        .arg(path)
        .args(["-ar", "16000", "-ac", "1", "-f", "f32le", "-"])
        .output()
        .map_err(|e| tool_error("ffmpeg", e))?;
    if !out.status.success() {
        return Err(ModelError::model(
            "ffmpeg",
            format!(
                "decoding {}: {}",
                path.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        ));
    }
    Ok(out
        .stdout
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect())
}

/// `text` spoken by espeak-ng (default English voice), as 16 kHz mono.
pub fn espeak(text: &str) -> Result<Vec<f32>, ModelError> {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let wav = std::env::temp_dir().join(format!("rayorch-espeak-{}-{n}.wav", std::process::id()));
    let st = Command::new("espeak-ng")
        .arg("-w")
        .arg(&wav)
        .arg(text)
        .status()
        .map_err(|e| tool_error("espeak-ng", e))?;
    if !st.success() {
        return Err(ModelError::model(
            "espeak-ng",
            format!("exited with {st} for {text:?}"),
        ));
    }
    let pcm = decode_16k_mono(&wav);
    let _ = std::fs::remove_file(&wav);
    pcm
}
