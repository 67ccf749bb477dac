//! The video-index pipeline, written with `#[pipeline]`:
//!
//! ```text
//! Video ─decode─► expand Clip ─frames─► expand Frame ─score─► reduce ─┐
//!                      Clip ─audio─────────────────────────────────────┤
//!                      Clip ─clip_merge (span, frame scores, audio)◄───┘
//!                            ─► reduce ─┐
//! Video ─decode─► speech (VAD) ─► expand Speech ─transcribe─► reduce ─┤
//!                 video_merge (probe, clips, speech texts)◄───────────┘ ─► VideoRecord
//! ```
//!
//! Speech pieces of many videos share whisper's encoder batches the way
//! frames share the frame model's; speech is found over a video's whole
//! track (a sentence crossing a shot cut stays whole) and each piece is given
//! to the clip holding its midpoint.
//!
//! Frame-model batches mix frames of many clips and videos (elastic
//! reservation); each clip and video is merged the moment its last child is
//! done.

use std::path::PathBuf;
use std::sync::Arc;

use rayorch::prelude::*;
use rayorch::{Output, PlanErrors};

use crate::merge::{ClipAudio, ClipRecord, SpeechText, VideoRecord, assign_speech, merge_clip, merge_video};
use crate::nsfw::{FrameAssets, FrameScore};
use crate::shots::{ClipSpan, FrameRef, ShotConfig, frame_refs};
use crate::stages::{
    BatchMix, ClipAudioStage, Probed, ScoreFrames, SpeechPiece, SpeechSplit, Transcribe, VideoDecode,
};
use rayorch_models::assets::SpeechAssets;

/// A video file (the root).
#[derive(Domain)]
pub struct Video;
/// A clip of a video: a shot, or a piece of a long shot.
#[derive(Domain)]
#[domain(parent = Video)]
pub struct Clip;
/// A sampled frame of a clip.
#[derive(Domain)]
#[domain(parent = Clip)]
pub struct Frame;
/// A speech piece of a video (a VAD span, at most 30 s).
#[derive(Domain)]
#[domain(parent = Video)]
pub struct Speech;

/// A video to index (the root's value): a local file, or an object in
/// object storage that the fetch Call spools to a file first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VideoInput {
    /// A local file, read where it is.
    File(PathBuf),
    /// An object's URL (`--features store`).
    Url(Arc<str>),
    /// No video: why the input names none (an input list's bad row); the
    /// fetch Call fails with it.
    Invalid(Arc<str>),
}

/// What `clip_merge` takes.
pub type ClipParts = (ClipSpan, Vec<FrameScore>, ClipAudio);
/// What `video_merge` takes.
pub type VideoParts = (Probed, Vec<ClipRecord>, Vec<SpeechText>);

/// Every Call of the pipeline.
pub struct VideoIndex {
    /// A local file as it is; an object spooled to a file (FFmpeg seeks).
    pub fetch: RecordCall<crate::stages::FetchVideo>,
    /// Probe, histogram scan, clip spans (one video per Grain).
    pub decode: Call<VideoDecode>,
    /// The clip spans of a probed video.
    pub clips: FnCall<Probed, Vec<ClipSpan>>,
    /// The frame handles of a clip.
    pub frames: FnCall<ClipSpan, Vec<FrameRef>>,
    /// Range decode + open_nsfw, batched across clips and videos.
    pub score: Call<ScoreFrames>,
    /// 16 kHz mono audio per clip.
    pub audio: Call<ClipAudioStage>,
    /// Speech pieces of a video (16 kHz mono, silero VAD).
    pub speech: Call<SpeechSplit>,
    /// whisper tiny.en, batched across videos.
    pub transcribe: Call<Transcribe>,
    /// Per-clip merge.
    pub clip_merge: FnCall<ClipParts, ClipRecord>,
    /// Per-video merge.
    pub video_merge: FnCall<VideoParts, VideoRecord>,
}

#[pipeline]
impl VideoIndex {
    fn forward(&self, videos: Port<Video, VideoInput>) -> Port<Video, VideoRecord> {
        let probed = self.decode(self.fetch(videos));
        let clip = expand!(self.clips(probed) => Clip);
        let scores = self.score(expand!(self.frames(clip) => Frame));
        let audio = self.audio(clip);
        let merged = self.clip_merge(clip, reduce!(scores), audio);
        let texts = self.transcribe(expand!(self.speech(probed) => Speech));
        self.video_merge(probed, reduce!(merged), reduce!(texts))
    }
}

/// Replicas and batch sizes.
#[derive(Clone, Debug)]
pub struct IndexConfig {
    /// Shot detection and sampling.
    pub shots: ShotConfig,
    /// ONNX Runtime threads per frame-model replica.
    pub threads: usize,
    /// Probe replicas (each scans one whole video; two let a short video's
    /// frames reach the frame model while a long video is still scanned).
    pub decode_replicas: usize,
    /// Frame-model replicas.
    pub score_replicas: usize,
    /// Frames per frame-model batch.
    pub score_batch: usize,
    /// Inputs each frame-model replica keeps open between batches, so the
    /// next batch of a clip continues its decode instead of seeking (2: the
    /// clip being scored and the next one, often of another video; 0: every
    /// batch reopens and seeks).
    pub keep_open: usize,
    /// Audio replicas (level per clip; VAD per video).
    pub audio_replicas: usize,
    /// Speech pieces per whisper batch.
    pub transcribe_batch: usize,
    /// Longest a speech piece waits for a fuller whisper batch while more
    /// pieces can still come (zero: never).
    pub transcribe_delay: std::time::Duration,
    /// Where the fetch Call writes videos read from object storage (the
    /// job removes each when its record is written).
    pub spool: PathBuf,
    /// Limits: decode and speech read a whole video at once
    /// (`document`), audio one clip (`parse`), score and transcribe are
    /// model Calls.
    pub timeouts: rayorch_kit::limits::Timeouts,
}

impl Default for IndexConfig {
    fn default() -> Self {
        IndexConfig {
            shots: ShotConfig::default(),
            threads: 1,
            decode_replicas: 2,
            score_replicas: 1,
            score_batch: 16,
            keep_open: 2,
            audio_replicas: 1,
            transcribe_batch: 8,
            transcribe_delay: std::time::Duration::from_secs(1),
            spool: std::env::temp_dir().join("rayorch-video-spool"),
            timeouts: rayorch_kit::limits::Timeouts::default(),
        }
    }
}

impl VideoIndex {
    /// The Calls for `cfg`, the frame model from `assets`, VAD and whisper
    /// from `speech`; `mix` counts how mixed the frame-model batches are.
    pub fn new(
        cfg: &IndexConfig,
        assets: &FrameAssets,
        speech: &SpeechAssets,
        mix: Arc<BatchMix>,
    ) -> VideoIndex {
        let (vad_assets, whisper_assets) = (speech.clone(), speech.clone());
        let shots = cfg.shots.clone();
        let (assets, onnx) = (
            assets.clone(),
            rayorch_models::OnnxConfig {
                intra_threads: cfg.threads,
                ..Default::default()
            },
        );
        let th = cfg.shots.embed_threshold;
        let keep_open = cfg.keep_open;
        let t = &cfg.timeouts;
        VideoIndex {
            fetch: crate::stages::fetch(cfg.spool.clone()),
            decode: t.whole(
                Call::new("decode", move || Ok(VideoDecode::new(shots.clone())))
                    .replicas(cfg.decode_replicas)
                    .batch_size(1),
            ),
            clips: Call::map("clips", |p: Probed| p.clips),
            frames: Call::map("frames", |c: ClipSpan| frame_refs(&c)),
            score: t.modelling(
                Call::new("score", move || {
                    Ok(ScoreFrames::load(&assets, &onnx, keep_open, mix.clone())?)
                })
                .replicas(cfg.score_replicas)
                .batch_size(cfg.score_batch),
            ),
            audio: t.parsing(
                Call::new("audio", || Ok(ClipAudioStage))
                    .replicas(cfg.audio_replicas)
                    .batch_size(1),
            ),
            speech: t.whole(
                Call::new("speech", move || Ok(SpeechSplit::load(&vad_assets)?))
                    .replicas(cfg.audio_replicas)
                    .batch_size(1),
            ),
            transcribe: t.modelling(
                Call::new("transcribe", move || Ok(Transcribe::load(&whisper_assets)?))
                    .batch_size(cfg.transcribe_batch)
                    .shape(SpeechPiece::length_bucket)
                    .max_batch_delay(cfg.transcribe_delay),
            ),
            clip_merge: Call::map("clip_merge", move |(span, frames, audio): ClipParts| {
                merge_clip(&span, &frames, &audio, th)
            }),
            video_merge: Call::map("video_merge", move |(p, mut clips, speech): VideoParts| {
                assign_speech(&mut clips, &speech);
                merge_video(&p.path.display().to_string(), &p.info, clips, th)
            }),
        }
    }

    /// The plan and its output.
    pub fn plan(&self) -> Result<(Plan, Output<VideoRecord>), PlanErrors> {
        self.build_plan()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn every_call_that_decodes_user_bytes_or_runs_a_model_has_a_limit_by_default() {
        let p = PathBuf::from("/nonexistent");
        let frames = FrameAssets {
            ort_lib: p.clone(),
            model: p.clone(),
        };
        let speech = SpeechAssets {
            ort_lib: p.clone(),
            vad_model: p.clone(),
            whisper_dir: p.clone(),
            mel_filters: p,
        };
        let index = VideoIndex::new(&IndexConfig::default(), &frames, &speech, Arc::default());
        let (plan, _) = index.plan().unwrap();
        let of = |name: &str| {
            let c = plan.calls().iter().find(|c| &*c.name == name).unwrap();
            c.config.timeout
        };
        let s = Duration::from_secs;
        assert_eq!((of("decode"), of("speech")), (Some(s(1800)), Some(s(1800))));
        assert_eq!(of("audio"), Some(s(120)));
        assert_eq!((of("score"), of("transcribe")), (Some(s(600)), Some(s(600))));
    }
}
