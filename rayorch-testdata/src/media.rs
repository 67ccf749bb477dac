//! Test media generated on demand with the `ffmpeg` and `espeak-ng`
//! commands (licence-clean lavfi sources and a synthetic voice; nothing is
//! committed).
//!
//! Invariants: every good video has known cut times (multiples of its shot
//! length); each file is written under a temporary name and renamed, so a
//! killed run leaves no half file that a later run would take as done.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde::{Deserialize, Serialize};

/// The lavfi sources a shot can show (each visibly different in colour).
pub const SOURCES: [&str; 4] = [
    "testsrc=size=320x240:rate=25",
    "smptebars=size=320x240:rate=25",
    "mandelbrot=size=320x240:rate=25",
    "rgbtestsrc=size=320x240:rate=25",
];

/// The sentence muxed into videos with speech.
pub const SENTENCE: &str = "The quick brown fox jumps over the lazy dog. This is a test of speech detection.";

/// What a generated file is expected to give.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Expect {
    /// A good video: its cut times (seconds; the first shot starts at 0).
    Video {
        /// Cut times.
        cuts_s: Vec<f64>,
        /// Duration, seconds.
        duration_s: f64,
        /// Whether an espeak sentence is muxed in.
        speech: bool,
    },
    /// A bad file: the failure message must contain this word.
    Failure {
        /// A word of the expected failure message.
        word: String,
    },
}

/// One generated file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MediaFile {
    /// Where it is.
    pub path: PathBuf,
    /// What it should give.
    pub expect: Expect,
}

fn run(cmd: &mut Command) -> Result<(), String> {
    let out = cmd.output().map_err(|e| {
        format!(
            "could not run {:?}: {e}; install it (apt-get install ffmpeg espeak-ng)",
            cmd.get_program()
        )
    })?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{:?} failed: {}",
            cmd.get_program(),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// H.264 (fast to encode, yuv420p) with a keyframe every `gop` frames.
fn x264(cmd: &mut Command, gop: u32) {
    cmd.args([
        "-c:v",
        "libx264",
        "-preset",
        "ultrafast",
        "-pix_fmt",
        "yuv420p",
        "-g",
    ])
    .arg(gop.to_string());
}

fn part(path: &Path) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(format!(".{}.part.mp4", std::process::id()));
    PathBuf::from(p)
}

/// The espeak sentence as a WAV file in `dir` (made once).
pub fn speech_wav(dir: &Path) -> Result<PathBuf, String> {
    let wav = dir.join("speech.wav");
    if !wav.is_file() {
        let tmp = dir.join(format!(".speech.{}.wav", std::process::id()));
        // 140 words a minute (espeak's default is 175): still robotic, but
        // every word is voiced.
        run(Command::new("espeak-ng")
            .args(["-s", "140", "-w"])
            .arg(&tmp)
            .arg(SENTENCE))?;
        std::fs::rename(&tmp, &wav).map_err(|e| e.to_string())?;
    }
    Ok(wav)
}

/// A video of `shots` shots of `shot_s` seconds each (sources in turn from
/// `first`), 320×240 at 25 fps, H.264; with the espeak sentence as AAC audio
/// when `speech` is set. Cuts are at `k * shot_s`.
pub fn shots_video(
    path: &Path,
    shots: usize,
    shot_s: f64,
    first: usize,
    speech: bool,
) -> Result<MediaFile, String> {
    let expect = Expect::Video {
        cuts_s: (1..shots).map(|k| k as f64 * shot_s).collect(),
        duration_s: shots as f64 * shot_s,
        speech,
    };
    if !path.is_file() {
        let dir = path.parent().unwrap_or(Path::new("."));
        let mut cmd = Command::new("ffmpeg");
        cmd.args(["-v", "error", "-y"]);
        let mut graph = String::new();
        for k in 0..shots {
            cmd.args(["-f", "lavfi", "-i", SOURCES[(first + k) % SOURCES.len()]]);
            graph.push_str(&format!(
                "[{k}:v]trim=duration={shot_s},setpts=PTS-STARTPTS,format=yuv420p[s{k}];"
            ));
        }
        for k in 0..shots {
            graph.push_str(&format!("[s{k}]"));
        }
        graph.push_str(&format!("concat=n={shots}:v=1:a=0[v]"));
        if speech {
            cmd.arg("-i").arg(speech_wav(dir)?);
            // Pad the speech with silence to the video's length exactly.
            let total = shots as f64 * shot_s;
            graph.push_str(&format!(
                ";[{shots}:a]adelay=500:all=1,apad=whole_dur={total},atrim=duration={total}[a]"
            ));
        }
        cmd.args(["-filter_complex", &graph, "-map", "[v]"]);
        if speech {
            cmd.args(["-map", "[a]", "-c:a", "aac"]);
        }
        x264(&mut cmd, 50);
        let tmp = part(path);
        cmd.arg(&tmp);
        run(&mut cmd)?;
        std::fs::rename(&tmp, path).map_err(|e| e.to_string())?;
    }
    Ok(MediaFile {
        path: path.to_path_buf(),
        expect,
    })
}

/// A long single-shot video (`testsrc`, 320×240, 25 fps) for memory checks.
pub fn long_video(path: &Path, seconds: u32) -> Result<MediaFile, String> {
    long_testsrc(path, seconds, None)
}

/// A long single-shot video like [`long_video`] with an AAC audio track:
/// the espeak sentence every `every_s` seconds (silence between), for
/// memory checks of the speech branch (VAD over the whole track, one
/// speech piece per sentence).
pub fn long_speech_video(path: &Path, seconds: u32, every_s: u32) -> Result<MediaFile, String> {
    long_testsrc(path, seconds, Some(every_s))
}

fn long_testsrc(path: &Path, seconds: u32, speech_every_s: Option<u32>) -> Result<MediaFile, String> {
    if !path.is_file() {
        let tmp = part(path);
        let mut cmd = Command::new("ffmpeg");
        cmd.args(["-v", "error", "-y", "-f", "lavfi", "-i"])
            .arg(format!("testsrc=duration={seconds}:size=320x240:rate=25"));
        if let Some(every) = speech_every_s {
            let dir = path.parent().unwrap_or(Path::new("."));
            cmd.arg("-i").arg(speech_wav(dir)?);
            let every = every.max(5);
            // 16 kHz, padded to `every` seconds, looped over the whole length.
            let audio = format!(
                "[1:a]aresample=16000,apad=whole_dur={every},aloop=loop=-1:size={},atrim=duration={seconds}[a]",
                every * 16_000
            );
            cmd.args([
                "-filter_complex",
                &audio,
                "-map",
                "0:v",
                "-map",
                "[a]",
                "-c:a",
                "aac",
            ]);
        }
        x264(&mut cmd, 250);
        cmd.arg(&tmp);
        run(&mut cmd)?;
        std::fs::rename(&tmp, path).map_err(|e| e.to_string())?;
    }
    Ok(MediaFile {
        path: path.to_path_buf(),
        expect: Expect::Video {
            cuts_s: Vec::new(),
            duration_s: f64::from(seconds),
            speech: speech_every_s.is_some(),
        },
    })
}

fn write(path: &Path, bytes: &[u8]) -> Result<(), String> {
    std::fs::write(path, bytes).map_err(|e| format!("{}: {e}", path.display()))
}

/// The bad inputs, derived from the good video `good`: corrupt, truncated,
/// audio-only, zero-length and not-a-video.
pub fn bad_files(dir: &Path, good: &Path) -> Result<Vec<MediaFile>, String> {
    let bytes = std::fs::read(good).map_err(|e| format!("{}: {e}", good.display()))?;
    let mut out = Vec::new();
    let mut add = |name: &str, word: &str| {
        let path = dir.join(name);
        out.push(MediaFile {
            path,
            expect: Expect::Failure { word: word.into() },
        });
    };
    // Garbage over the middle of the media data (the index stays intact).
    let mut corrupt = bytes.clone();
    let (a, b) = (corrupt.len() / 4, corrupt.len() * 3 / 5);
    let mut x: u32 = 0x9e37_79b9;
    for byte in &mut corrupt[a..b] {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        *byte = x as u8;
    }
    write(&dir.join("bad_corrupt.mp4"), &corrupt)?;
    add("bad_corrupt.mp4", "corrupt");
    // Cut before the index (the moov box is written at the end).
    write(&dir.join("bad_truncated.mp4"), &bytes[..bytes.len() / 2])?;
    add("bad_truncated.mp4", "truncated");
    write(&dir.join("bad_empty.mp4"), b"")?;
    add("bad_empty.mp4", "empty");
    write(
        &dir.join("bad_not_video.mp4"),
        b"this is a text file, not a video\n",
    )?;
    add("bad_not_video.mp4", "not a video");
    let audio = dir.join("bad_audio_only.m4a");
    if !audio.is_file() {
        let tmp = dir.join(format!(".audio.{}.m4a", std::process::id()));
        run(Command::new("ffmpeg")
            .args(["-v", "error", "-y", "-i"])
            .arg(speech_wav(dir)?)
            .args(["-c:a", "aac"])
            .arg(&tmp))?;
        std::fs::rename(&tmp, &audio).map_err(|e| e.to_string())?;
    }
    add("bad_audio_only.m4a", "no video stream");
    Ok(out)
}

/// The sample set: one longer video with speech, several short ones, and
/// the bad files; generated into `dir` on first use.
pub fn sample_set(dir: &Path) -> Result<Vec<MediaFile>, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut files = vec![shots_video(&dir.join("long_speech.mp4"), 8, 3.0, 0, true)?];
    for k in 0..4 {
        files.push(shots_video(
            &dir.join(format!("short_{k}.mp4")),
            1 + k % 3,
            1.0,
            k,
            false,
        )?);
    }
    let source = files[0].path.clone();
    files.extend(bad_files(dir, &source)?);
    Ok(files)
}
