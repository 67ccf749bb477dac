//! Per-clip and per-video merges.
//!
//! Invariants: merges are pure functions of their inputs (the reduce hands
//! frames and clips in ordinal order, i.e. time order), so a video's record
//! is the same under any batching or schedule. Float sums run in that fixed
//! order; nothing depends on hash-map iteration.

use serde::{Deserialize, Serialize};

use crate::decode::VideoInfo;
use crate::nsfw::{FrameScore, l2_normalised};
use crate::shots::{ClipSpan, cosine};

/// What the audio branch yields for one clip.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ClipAudio {
    /// Seconds of audio extracted (16 kHz mono); 0 without an audio track.
    pub seconds: f64,
    /// Root-mean-square level of those samples.
    pub rms: f32,
}

impl ClipAudio {
    /// Level statistics of 16 kHz mono samples, no transcript.
    pub fn from_pcm(pcm: &[f32]) -> ClipAudio {
        let rms = if pcm.is_empty() {
            0.0
        } else {
            (pcm.iter().map(|x| x * x).sum::<f32>() / pcm.len() as f32).sqrt()
        };
        ClipAudio {
            seconds: pcm.len() as f64 / f64::from(crate::decode::AUDIO_RATE),
            rms,
        }
    }
}

/// One transcribed speech piece of a video.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SpeechText {
    /// Start in the video, seconds.
    pub start_s: f64,
    /// End in the video, seconds.
    pub end_s: f64,
    /// What whisper heard.
    pub text: String,
}

/// Give each clip the speech whose midpoint falls inside it (the last clip
/// also takes a midpoint at its end), in time order: every piece lands in
/// exactly one clip, so the video's transcript (the clips' transcripts in
/// order) holds each piece once.
pub fn assign_speech(clips: &mut [ClipRecord], speech: &[SpeechText]) {
    for c in clips.iter_mut() {
        c.transcript.clear();
    }
    let n = clips.len();
    for s in speech.iter().filter(|s| !s.text.is_empty()) {
        let mid = 0.5 * (s.start_s + s.end_s);
        let at = clips
            .iter()
            .position(|c| mid < c.end_s)
            .unwrap_or(n.saturating_sub(1));
        if let Some(c) = clips.get_mut(at) {
            if !c.transcript.is_empty() {
                c.transcript.push(' ');
            }
            c.transcript.push_str(&s.text);
        }
    }
}

/// One clip's merged result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClipRecord {
    /// Zero-based clip number.
    pub index: usize,
    /// Start, seconds.
    pub start_s: f64,
    /// End, seconds.
    pub end_s: f64,
    /// Sampled frames scored.
    pub frames: usize,
    /// Whether the clip starts a shot by the colour histograms.
    pub starts_shot: bool,
    /// Highest per-frame nsfw probability.
    pub max_nsfw: f32,
    /// Mean per-frame nsfw probability.
    pub mean_nsfw: f32,
    /// Frame times inside the clip where the embedding cosine to the
    /// previous frame drops below the threshold (cuts the histograms missed).
    pub embed_cuts_s: Vec<f64>,
    /// The L2-normalised mean of the frame embeddings.
    pub embedding: Vec<f32>,
    /// Audio seconds and level.
    pub audio_s: f64,
    /// RMS level of the clip's audio.
    pub audio_rms: f32,
    /// Speech overlapping the clip.
    pub transcript: String,
    /// First frame's embedding (for the cut check at the clip's start).
    #[serde(skip)]
    pub first_embedding: Vec<f32>,
    /// Last frame's embedding (for the cut check at the next clip's start).
    #[serde(skip)]
    pub last_embedding: Vec<f32>,
}

/// The L2-normalised mean of vectors of one width (empty for none).
pub fn mean_embedding<'a>(vs: impl IntoIterator<Item = &'a [f32]>) -> Vec<f32> {
    let mut sum: Vec<f32> = Vec::new();
    for v in vs {
        if sum.is_empty() {
            sum = vec![0.0; v.len()];
        }
        sum.iter_mut().zip(v).for_each(|(s, x)| *s += x);
    }
    l2_normalised(&sum)
}

/// Merge one clip: its span, its frame scores (time order) and its audio.
pub fn merge_clip(
    span: &ClipSpan,
    frames: &[FrameScore],
    audio: &ClipAudio,
    embed_threshold: f32,
) -> ClipRecord {
    let n = frames.len();
    let max_nsfw = frames.iter().map(|f| f.nsfw).fold(0.0f32, f32::max);
    let mean_nsfw = if n == 0 {
        0.0
    } else {
        frames.iter().map(|f| f.nsfw).sum::<f32>() / n as f32
    };
    let embed_cuts_s = frames
        .windows(2)
        .filter(|w| cosine(&w[0].embedding, &w[1].embedding) < embed_threshold)
        .map(|w| w[1].t)
        .collect();
    ClipRecord {
        index: span.index,
        start_s: span.start_s,
        end_s: span.end_s,
        frames: n,
        starts_shot: span.starts_shot,
        max_nsfw,
        mean_nsfw,
        embed_cuts_s,
        embedding: mean_embedding(frames.iter().map(|f| f.embedding.as_slice())),
        audio_s: audio.seconds,
        audio_rms: audio.rms,
        transcript: String::new(),
        first_embedding: frames.first().map(|f| f.embedding.clone()).unwrap_or_default(),
        last_embedding: frames.last().map(|f| f.embedding.clone()).unwrap_or_default(),
    }
}

/// One shot of a video.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Shot {
    /// Start, seconds.
    pub start_s: f64,
    /// End, seconds.
    pub end_s: f64,
    /// What found its start: `start`, `histogram` or `embedding`.
    pub cut: String,
}

/// One video's merged result: what `videos.jsonl` holds per line.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VideoRecord {
    /// The video (its path).
    pub name: String,
    /// What the probe found.
    pub info: VideoInfo,
    /// Clips in time order.
    pub clips: Vec<ClipRecord>,
    /// Shots in time order: histogram cuts, plus embedding cuts (inside
    /// clips and at length splits between clips).
    pub shots: Vec<Shot>,
    /// The clips' transcripts in order, space-separated.
    pub transcript: String,
    /// Highest frame nsfw probability in the video.
    pub max_nsfw: f32,
    /// Frame-weighted mean nsfw probability.
    pub mean_nsfw: f32,
    /// Sampled frames scored.
    pub frames: usize,
    /// The L2-normalised mean of the clip embeddings, weighted by frames.
    pub embedding: Vec<f32>,
}

/// Merge a video from its probe and its clips (time order).
pub fn merge_video(
    name: &str,
    info: &VideoInfo,
    clips: Vec<ClipRecord>,
    embed_threshold: f32,
) -> VideoRecord {
    let mut cuts: Vec<(f64, &'static str)> = Vec::new();
    for (i, c) in clips.iter().enumerate() {
        if i == 0 {
            cuts.push((c.start_s, "start"));
        } else if c.starts_shot {
            cuts.push((c.start_s, "histogram"));
        } else if cosine(&clips[i - 1].last_embedding, &c.first_embedding) < embed_threshold {
            cuts.push((c.start_s, "embedding"));
        }
        cuts.extend(c.embed_cuts_s.iter().map(|&t| (t, "embedding")));
    }
    let end = clips.last().map_or(info.duration_s, |c| c.end_s);
    let shots = cuts
        .iter()
        .enumerate()
        .map(|(i, &(start_s, cut))| Shot {
            start_s,
            end_s: cuts.get(i + 1).map_or(end, |c| c.0),
            cut: cut.to_string(),
        })
        .collect();
    let frames: usize = clips.iter().map(|c| c.frames).sum();
    let mean_nsfw = if frames == 0 {
        0.0
    } else {
        clips.iter().map(|c| c.mean_nsfw * c.frames as f32).sum::<f32>() / frames as f32
    };
    let mut weighted: Vec<Vec<f32>> = Vec::with_capacity(clips.len());
    for c in &clips {
        weighted.push(c.embedding.iter().map(|x| x * c.frames as f32).collect());
    }
    let transcript = clips
        .iter()
        .map(|c| c.transcript.trim())
        .filter(|t| !t.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    VideoRecord {
        name: name.to_string(),
        info: info.clone(),
        max_nsfw: clips.iter().map(|c| c.max_nsfw).fold(0.0, f32::max),
        mean_nsfw,
        frames,
        embedding: mean_embedding(weighted.iter().map(Vec::as_slice)),
        transcript,
        shots,
        clips,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;
    use std::sync::Arc;

    fn clip(index: usize, start_s: f64, end_s: f64) -> ClipRecord {
        let span = ClipSpan {
            video: Arc::new(PathBuf::from("v.mp4")),
            index,
            start_s,
            end_s,
            starts_shot: index == 0,
            frames: Vec::new(),
        };
        merge_clip(&span, &[], &ClipAudio::default(), 0.5)
    }

    fn said(start_s: f64, end_s: f64, text: &str) -> SpeechText {
        SpeechText {
            start_s,
            end_s,
            text: text.to_string(),
        }
    }

    #[test]
    fn each_speech_piece_lands_in_the_clip_holding_its_midpoint_once() {
        let mut clips = vec![clip(0, 0.0, 3.0), clip(1, 3.0, 6.0), clip(2, 6.0, 9.0)];
        let speech = [
            said(0.5, 2.0, "one"),
            // Crosses the cut at 3 s; its midpoint (3.25 s) is in clip 1.
            said(2.5, 4.0, "two"),
            said(4.0, 5.0, ""),
            said(4.5, 5.5, "three"),
            // Past the last clip's end: the last clip takes it.
            said(8.5, 10.0, "four"),
        ];
        assign_speech(&mut clips, &speech);
        let got: Vec<&str> = clips.iter().map(|c| c.transcript.as_str()).collect();
        assert_eq!(got, ["one", "two three", "four"]);
    }
}
