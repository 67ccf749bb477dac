//! Video stages for rayorch: FFmpeg decoding, shot detection, the open_nsfw
//! frame model on ONNX Runtime, and per-clip / per-video merges.
//!
//! A separate crate so that document users never compile FFmpeg bindings.
//!
//! ```text
//! Video ─VideoDecode (probe + histogram scan + shots)─► expand Clip
//!   Clip ─frame handles─► expand Frame ─ScoreFrames (range decode + open_nsfw)─► reduce
//!   Clip ─ClipAudioStage (16 kHz mono level)────────────────────────────────────┘
//! Video ─SpeechSplit (silero VAD)─► expand Speech ─Transcribe (whisper)─► reduce
//!   Clip ─merge_clip─► reduce ─merge_video─► VideoRecord
//! ```
//!
//! | module | what |
//! | --- | --- |
//! | [`decode`] | probe, sampled scan, lazy range decode, audio extraction |
//! | [`shots`] | histogram cuts, clip spans (fixed-length fallback), cosine |
//! | [`nsfw`] | the pinned model, its ONNX edit, batched inference |
//! | [`merge`] | clip and video records |
//! | [`stages`] | the rayorch [`Stage`](rayorch::Stage)s |
//! | [`output`] | the `videos.parquet` row schema |
//! | [`pipeline`] | the `#[pipeline]` and its Calls ([`pipeline::VideoIndex::plan`]) |
//! | [`job`] | the `video_index` job: command line, outputs, summary, timeline |
//!
//! Bad files (not a video, empty, truncated, corrupt, audio-only) are typed
//! [`VideoError`]s that become `RecordFailure`s naming the file.
//!
//! Transcripts: a video's audio track is decoded as 16 kHz mono a packet at
//! a time ([`decode::for_each_audio`]) into silero VAD, which finds the
//! speech spans ([`SpeechSplit`]; the track is never held whole); each
//! piece's samples are decoded again when whisper tiny.en transcribes it,
//! pieces of many videos together ([`Transcribe`]), and each text goes to
//! the clip holding its midpoint ([`merge::assign_speech`]).

pub mod decode;
pub mod error;
pub mod job;
pub mod merge;
pub mod nsfw;
pub mod output;
pub mod pipeline;
pub mod shots;
pub mod stages;

pub use decode::{VideoInfo, probe};
pub use error::VideoError;
pub use merge::{ClipAudio, ClipRecord, Shot, SpeechText, VideoRecord};
pub use nsfw::{FrameAssets, FrameModel, FrameScore};
pub use shots::{ClipSpan, FrameRef, ShotConfig};
pub use stages::{
    BatchMix, ClipAudioStage, Probed, ScoreFrames, SpeechPiece, SpeechSplit, Transcribe, VideoDecode,
};
