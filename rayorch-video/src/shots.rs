//! Shot boundaries and clip spans.
//!
//! Invariants:
//! - Cuts come from the scan's colour histograms: a cut starts at a sampled
//!   frame whose histogram differs from the previous sampled frame's by more
//!   than the threshold (half the L1 distance, in [0, 1]).
//! - Clips tile the sampled frames without gaps or overlaps, in time order:
//!   every sampled frame belongs to exactly one clip, and each clip holds at
//!   least one. A shot longer than `max_clip_s` is split into fixed-length
//!   pieces (the fallback when shot detection is off: fixed pieces only).
//! - A clip's frames are its sampled times; the frame model decodes exactly
//!   those ([`crate::decode::decode_frames`]).

use std::path::PathBuf;
use std::sync::Arc;

use crate::decode::{HIST_BINS, Sample};

/// How a video is cut into clips.
#[derive(Clone, Debug, PartialEq)]
pub struct ShotConfig {
    /// Sampled frames per second (scan and frame model).
    pub sample_fps: f64,
    /// Histogram difference above which a sampled frame starts a new shot;
    /// `None` turns shot detection off (fixed-length clips only).
    pub hist_threshold: Option<f32>,
    /// Longest clip in seconds; longer shots are split into pieces this long.
    pub max_clip_s: f64,
    /// Embedding cosine below which consecutive frames mark a cut the
    /// histograms missed (checked once the frame model has run).
    pub embed_threshold: f32,
}

impl Default for ShotConfig {
    fn default() -> Self {
        ShotConfig {
            sample_fps: 2.0,
            hist_threshold: Some(0.35),
            max_clip_s: 10.0,
            embed_threshold: 0.5,
        }
    }
}

/// One clip of a video: a time range and the sampled frame times in it.
#[derive(Clone, Debug, PartialEq)]
pub struct ClipSpan {
    /// The video file.
    pub video: Arc<PathBuf>,
    /// Zero-based clip number within the video.
    pub index: usize,
    /// Start (the first sampled frame's time), seconds.
    pub start_s: f64,
    /// End (the next clip's start, or the video's end), seconds.
    pub end_s: f64,
    /// Whether the clip starts a shot (a histogram cut or the video start),
    /// rather than continuing a shot split for length.
    pub starts_shot: bool,
    /// The sampled frame times in the clip.
    pub frames: Vec<f64>,
}

/// One sampled frame to score: which video, which clip, when.
#[derive(Clone, Debug, PartialEq)]
pub struct FrameRef {
    /// The video file.
    pub video: Arc<PathBuf>,
    /// The clip it belongs to.
    pub clip: usize,
    /// Its time, seconds.
    pub t: f64,
}

/// Half the L1 distance of two normalised histograms: 0 same, 1 disjoint.
pub fn hist_distance(a: &[f32; HIST_BINS], b: &[f32; HIST_BINS]) -> f32 {
    0.5 * a.iter().zip(b).map(|(x, y)| (x - y).abs()).sum::<f32>()
}

/// Indices of the sampled frames that start a new shot (never 0).
pub fn histogram_cuts(samples: &[Sample], threshold: f32) -> Vec<usize> {
    (1..samples.len())
        .filter(|&i| hist_distance(&samples[i - 1].hist, &samples[i].hist) > threshold)
        .collect()
}

/// Clip spans for one video from its scan.
pub fn clip_spans(
    video: &Arc<PathBuf>,
    samples: &[Sample],
    duration_s: f64,
    cfg: &ShotConfig,
) -> Vec<ClipSpan> {
    let cuts = cfg
        .hist_threshold
        .map_or_else(Vec::new, |th| histogram_cuts(samples, th));
    let mut bounds = vec![0usize];
    bounds.extend(cuts.iter().copied());
    bounds.push(samples.len());
    let mut clips: Vec<ClipSpan> = Vec::new();
    for w in bounds.windows(2) {
        let (a, b) = (w[0], w[1]);
        if a >= b {
            continue;
        }
        let mut start = a;
        let mut first = true;
        while start < b {
            let t0 = samples[start].t;
            let mut end = start + 1;
            while end < b && samples[end].t < t0 + cfg.max_clip_s - 1e-9 {
                end += 1;
            }
            clips.push(ClipSpan {
                video: video.clone(),
                index: clips.len(),
                start_s: t0,
                end_s: 0.0,
                starts_shot: first && cfg.hist_threshold.is_some(),
                frames: samples[start..end].iter().map(|s| s.t).collect(),
            });
            first = false;
            start = end;
        }
    }
    let n = clips.len();
    for i in 0..n {
        clips[i].end_s = if i + 1 < n {
            clips[i + 1].start_s
        } else {
            duration_s.max(clips[i].frames.last().copied().unwrap_or(0.0))
        };
    }
    if let Some(c) = clips.first_mut() {
        c.starts_shot = true;
    }
    clips
}

/// The frames of one clip, as handles the frame model decodes.
pub fn frame_refs(clip: &ClipSpan) -> Vec<FrameRef> {
    clip.frames
        .iter()
        .map(|&t| FrameRef {
            video: clip.video.clone(),
            clip: clip.index,
            t,
        })
        .collect()
}

/// Cosine similarity of two vectors (0 when either is zero).
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let na: f32 = a.iter().map(|x| x * x).sum::<f32>().sqrt();
    let nb: f32 = b.iter().map(|x| x * x).sum::<f32>().sqrt();
    if na == 0.0 || nb == 0.0 {
        0.0
    } else {
        dot / (na * nb)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(t: f64, bin: usize) -> Sample {
        let mut hist = [0f32; HIST_BINS];
        hist[bin] = 1.0;
        Sample { t, hist }
    }

    #[test]
    fn cuts_and_length_splits_tile_the_frames() {
        let v = Arc::new(PathBuf::from("v.mp4"));
        // 0..4 s in bin 0, 4..6 s in bin 5, sampled at 1 fps.
        let s: Vec<Sample> = (0..6)
            .map(|i| sample(i as f64, if i < 4 { 0 } else { 5 }))
            .collect();
        let cfg = ShotConfig {
            max_clip_s: 3.0,
            ..ShotConfig::default()
        };
        let clips = clip_spans(&v, &s, 6.0, &cfg);
        let frames: Vec<Vec<f64>> = clips.iter().map(|c| c.frames.clone()).collect();
        assert_eq!(frames, vec![vec![0.0, 1.0, 2.0], vec![3.0], vec![4.0, 5.0]]);
        assert_eq!(
            clips.iter().map(|c| c.starts_shot).collect::<Vec<_>>(),
            vec![true, false, true]
        );
        assert_eq!(
            clips.iter().map(|c| (c.start_s, c.end_s)).collect::<Vec<_>>(),
            vec![(0.0, 3.0), (3.0, 4.0), (4.0, 6.0)]
        );
        let fixed = clip_spans(
            &v,
            &s,
            6.0,
            &ShotConfig {
                hist_threshold: None,
                ..cfg
            },
        );
        assert_eq!(fixed.len(), 2, "fixed-length split ignores the cut");
    }
}
