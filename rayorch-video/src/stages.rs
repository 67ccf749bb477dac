//! The video stages: probe + shot scan per video, frame scoring (decode +
//! open_nsfw) per batch of frames, audio level per clip, speech pieces per
//! video (silero VAD) and their transcripts (whisper, batched).
//!
//! Invariants:
//! - Every stage returns one outcome per input, in order. A bad file is a
//!   `RecordFailure` naming the file; the model failing as a whole is an
//!   attempt failure (`Err`), handled by the Call's recovery policy.
//! - [`ScoreFrames`] receives cheap [`FrameRef`] handles and decodes them
//!   inside its replica, a clip range at a time: decoded pixels exist only
//!   for the batch being scored, so memory is bounded by batch sizes, not by
//!   video length, and each replica owns its FFmpeg contexts (a
//!   [`FrameReader`] keeping two inputs open, so the next batch of a clip
//!   continues the decode instead of seeking back to a keyframe).
//! - Batch invariance: a frame's pixels come from a range decode of its own
//!   clip's run of frames in the batch, matched by timestamp; the network
//!   scores frames independently. Batch-mates change neither.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rayorch::{
    AsyncRecordStage, Call, Cause, Outcome, RecordCall, RecordResult, Stage, StageContext, StageResult,
};

use crate::decode::{FrameReader, VideoInfo, extract_audio, for_each_audio, scan};
use crate::merge::{ClipAudio, SpeechText};
use crate::nsfw::{FrameAssets, FrameModel, FrameScore, RESIZE};
use crate::shots::{ClipSpan, FrameRef, ShotConfig, clip_spans};
use rayorch_models::assets::SpeechAssets;
use rayorch_models::speech::{
    SAMPLE_RATE, SpeechSpan, Vad, VadConfig, WHISPER_WINDOW, Whisper, WhisperConfig,
};

/// A probed video: its facts and its clips.
#[derive(Clone, Debug, PartialEq)]
pub struct Probed {
    /// The file.
    pub path: Arc<PathBuf>,
    /// What the probe found.
    pub info: VideoInfo,
    /// The clips, in time order.
    pub clips: Vec<ClipSpan>,
}

/// Probe + scan + shot detection, one video per Grain (batch size 1 and
/// several replicas for parallelism).
#[derive(Clone, Debug, Default)]
pub struct VideoDecode {
    cfg: ShotConfig,
}

impl VideoDecode {
    /// A probe with `cfg`.
    pub fn new(cfg: ShotConfig) -> VideoDecode {
        VideoDecode { cfg }
    }

    /// Probe one file.
    pub fn probe(&self, path: &std::path::Path) -> Result<Probed, crate::VideoError> {
        let (info, samples) = scan(path, self.cfg.sample_fps)?;
        let path = Arc::new(path.to_path_buf());
        let clips = clip_spans(&path, &samples, info.duration_s, &self.cfg);
        Ok(Probed { path, info, clips })
    }
}

/// The fetch Call's stage: a local file passes through; an object is
/// written into the spool folder as it arrives (`rayorch_kit::store::FetchToFile`,
/// `--features store`) and its file is what the decoder opens.
pub struct FetchVideo {
    #[cfg(feature = "store")]
    fetch: Arc<rayorch_kit::store::FetchToFile>,
}

impl AsyncRecordStage for FetchVideo {
    type In = crate::pipeline::VideoInput;
    type Out = PathBuf;

    async fn run_one(
        self: Arc<Self>,
        input: crate::pipeline::VideoInput,
        cx: StageContext,
    ) -> RecordResult<PathBuf> {
        let url = match input {
            crate::pipeline::VideoInput::File(p) => return Ok(Outcome::Ok(p)),
            crate::pipeline::VideoInput::Url(u) => u,
            crate::pipeline::VideoInput::Invalid(why) => {
                let cause = Cause::new(why.to_string()).with_code("input.bad_row");
                return Ok(Outcome::RecordFailure(cause));
            }
        };
        #[cfg(feature = "store")]
        {
            let object = rayorch_kit::store::Object::new(url);
            rayorch_kit::store::FetchToFile::run_one(self.fetch.clone(), object, cx).await
        }
        #[cfg(not(feature = "store"))]
        {
            let _ = (self, cx);
            Ok(Outcome::RecordFailure(Cause::new(format!(
                "{url}: this binary was built without object-storage inputs (the `store` feature)"
            ))))
        }
    }
}

/// The fetch Call: objects spooled into `spool`, four at a time, each
/// attempt within 10 minutes, retried twice.
pub fn fetch(spool: PathBuf) -> RecordCall<FetchVideo> {
    Call::new_async_records("fetch", move || {
        let _ = &spool;
        Ok(FetchVideo {
            #[cfg(feature = "store")]
            fetch: Arc::new(rayorch_kit::store::FetchToFile::new(
                rayorch_kit::store::Stores::new(rayorch_kit::store::StoreOptions::default()),
                spool.clone(),
            )),
        })
    })
    .batch_size(4)
    .concurrency(4)
    .record_timeout(std::time::Duration::from_secs(600))
    .record_retries(2)
}

impl Stage for VideoDecode {
    type In = PathBuf;
    type Out = Probed;

    fn run(&mut self, batch: Vec<PathBuf>, _cx: &StageContext) -> StageResult<Probed> {
        Ok(batch
            .iter()
            .map(|p| match self.probe(p) {
                Ok(v) => Outcome::Ok(v),
                Err(e) => Outcome::RecordFailure(Cause::new(e.to_string())),
            })
            .collect())
    }
}

/// How mixed the frame-model batches were (shared by a Call's replicas).
#[derive(Debug, Default)]
pub struct BatchMix {
    /// Batches scored.
    pub batches: AtomicU64,
    /// Batches holding frames of more than one clip.
    pub multi_clip: AtomicU64,
    /// Batches holding frames of more than one video.
    pub multi_video: AtomicU64,
    /// Frames scored.
    pub frames: AtomicU64,
    /// Range decodes (a clip's run of frames in a batch) that continued an
    /// input left open by the replica's previous batch.
    pub decodes_continued: AtomicU64,
    /// Range decodes that opened the file and sought.
    pub decodes_sought: AtomicU64,
}

impl BatchMix {
    /// (batches, multi-clip, multi-video, frames) so far.
    pub fn snapshot(&self) -> (u64, u64, u64, u64) {
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        (
            l(&self.batches),
            l(&self.multi_clip),
            l(&self.multi_video),
            l(&self.frames),
        )
    }
}

/// Decode + open_nsfw over a batch of frame handles of any clips and videos.
pub struct ScoreFrames {
    model: FrameModel,
    reader: FrameReader,
    mix: Arc<BatchMix>,
}

impl ScoreFrames {
    /// Load the model (once per replica); the replica keeps up to
    /// `keep_open` inputs open between batches ([`FrameReader`]).
    pub fn load(
        assets: &FrameAssets,
        onnx: &rayorch_models::OnnxConfig,
        keep_open: usize,
        mix: Arc<BatchMix>,
    ) -> Result<ScoreFrames, rayorch_models::ModelError> {
        Ok(ScoreFrames {
            model: FrameModel::load(assets, onnx)?,
            reader: FrameReader::new(keep_open),
            mix,
        })
    }
}

impl Stage for ScoreFrames {
    type In = FrameRef;
    type Out = FrameScore;

    fn run(&mut self, batch: Vec<FrameRef>, _cx: &StageContext) -> StageResult<FrameScore> {
        // Runs of consecutive frames of one clip: one range decode each.
        let mut runs: Vec<(usize, usize)> = Vec::new();
        for (i, f) in batch.iter().enumerate() {
            match runs.last_mut() {
                Some((s, e)) if batch[*s].video == f.video && batch[*s].clip == f.clip && *e == i => {
                    *e = i + 1
                }
                _ => runs.push((i, i + 1)),
            }
        }
        let mut frames = Vec::with_capacity(batch.len());
        let mut slot: Vec<Result<usize, String>> = Vec::with_capacity(batch.len());
        for &(s, e) in &runs {
            let times: Vec<f64> = batch[s..e].iter().map(|f| f.t).collect();
            match self.reader.decode(&batch[s].video, &times, RESIZE) {
                Ok(decoded) => {
                    for d in decoded {
                        slot.push(Ok(frames.len()));
                        frames.push(d);
                    }
                }
                Err(err) => slot.extend((s..e).map(|_| Err(err.to_string()))),
            }
        }
        let (continued, sought) = (self.reader.continued, self.reader.sought);
        self.reader.continued = 0;
        self.reader.sought = 0;
        let scores = self.model.score(&frames)?;
        let mut clips: Vec<(&PathBuf, usize)> = batch.iter().map(|f| (&*f.video, f.clip)).collect();
        clips.dedup();
        let mut videos: Vec<&PathBuf> = clips.iter().map(|c| c.0).collect();
        videos.sort();
        videos.dedup();
        let m = &self.mix;
        m.batches.fetch_add(1, Ordering::Relaxed);
        m.frames.fetch_add(frames.len() as u64, Ordering::Relaxed);
        m.decodes_continued.fetch_add(continued, Ordering::Relaxed);
        m.decodes_sought.fetch_add(sought, Ordering::Relaxed);
        if runs.len() > 1 {
            m.multi_clip.fetch_add(1, Ordering::Relaxed);
        }
        if videos.len() > 1 {
            m.multi_video.fetch_add(1, Ordering::Relaxed);
        }
        Ok(slot
            .into_iter()
            .map(|s| match s {
                Ok(i) => Outcome::Ok(scores[i].clone()),
                Err(e) => Outcome::RecordFailure(Cause::new(e)),
            })
            .collect())
    }
}

/// The audio of one clip as 16 kHz mono, reduced to [`ClipAudio`] on the
/// spot (the samples are dropped here, so waiting clips hold no audio).
#[derive(Clone, Debug, Default)]
pub struct ClipAudioStage;

impl Stage for ClipAudioStage {
    type In = ClipSpan;
    type Out = ClipAudio;

    fn run(&mut self, batch: Vec<ClipSpan>, _cx: &StageContext) -> StageResult<ClipAudio> {
        Ok(batch
            .iter()
            .map(|c| match extract_audio(&c.video, c.start_s, c.end_s) {
                Ok(pcm) => Outcome::Ok(ClipAudio::from_pcm(&pcm)),
                Err(e) => Outcome::RecordFailure(Cause::new(e.to_string())),
            })
            .collect())
    }
}

/// One speech piece of a video: where it is. Its samples are decoded by
/// [`Transcribe`] when its batch runs (as frames are by [`ScoreFrames`]), so
/// the pieces of a long video waiting for whisper hold no audio.
#[derive(Clone, Debug, PartialEq)]
pub struct SpeechPiece {
    /// The video file.
    pub video: Arc<PathBuf>,
    /// Start in the video, seconds.
    pub start_s: f64,
    /// End in the video, seconds (at most whisper's 30 s window after the start).
    pub end_s: f64,
}

impl SpeechPiece {
    /// The transcription Call's shape key: the piece's length in 5 s steps
    /// (0 to 6). whisper decodes a batch until its longest text ends, so
    /// pieces of like length waste fewer decoder steps together.
    pub fn length_bucket(&self) -> u64 {
        ((self.end_s - self.start_s).max(0.0) / 5.0).ceil().min(6.0) as u64
    }
}

/// Seconds of audio kept on each side of a VAD span for whisper.
const CONTEXT_S: f64 = 0.3;

/// The speech of one probed video: its audio track decoded as 16 kHz mono a
/// packet at a time into silero VAD ([`Vad::stream`]: the track is never
/// held whole), each span found split into whisper-sized windows. Speech is
/// found over the whole track, not per clip, so a sentence that crosses a
/// shot cut is transcribed whole. A video without an audio track or without
/// speech has no pieces. One VAD model per replica.
pub struct SpeechSplit {
    vad: Vad,
}

impl SpeechSplit {
    /// Load silero VAD (call it in the Call's factory: one per replica).
    pub fn load(assets: &SpeechAssets) -> Result<SpeechSplit, rayorch_models::ModelError> {
        Ok(SpeechSplit {
            vad: Vad::from_assets(assets, VadConfig::default())?,
        })
    }

    fn pieces(&mut self, v: &Probed) -> Result<Vec<SpeechPiece>, String> {
        let mut stream = self.vad.stream();
        let mut vad_err = None;
        for_each_audio(&v.path, 0.0, v.info.duration_s, |pcm| {
            if vad_err.is_none() {
                vad_err = stream.push(pcm).err();
            }
        })
        .map_err(|e| e.to_string())?;
        let vad_fail = |e| format!("speech detection on {}: {e}", v.path.display());
        if let Some(e) = vad_err {
            return Err(vad_fail(e));
        }
        let track_s = stream.len() as f64 / SAMPLE_RATE as f64;
        let spans = stream.finish().map_err(vad_fail)?;
        Ok(speech_windows(&v.path, &spans, track_s))
    }
}

/// The whisper windows of VAD `spans` over a track of `track_s` seconds:
/// each span widened by 0.3 s (`CONTEXT_S`) on both sides (whisper reads a span's
/// first and last words better with a little of the silence around them
/// than cut at the voice's edge), then cut into pieces of at most
/// [`WHISPER_WINDOW`] samples, on the 16 kHz sample grid.
pub fn speech_windows(video: &Arc<PathBuf>, spans: &[SpeechSpan], track_s: f64) -> Vec<SpeechPiece> {
    let rate = SAMPLE_RATE as f64;
    let mut out = Vec::new();
    for s in spans {
        let first = ((s.start_s - CONTEXT_S).max(0.0) * rate) as usize;
        let last = (((s.end_s + CONTEXT_S).min(track_s) * rate) as usize).max(first);
        let mut at = first;
        while at < last {
            let end = (at + WHISPER_WINDOW).min(last);
            out.push(SpeechPiece {
                video: video.clone(),
                start_s: at as f64 / rate,
                end_s: end as f64 / rate,
            });
            at = end;
        }
    }
    out
}

impl Stage for SpeechSplit {
    type In = Probed;
    type Out = Vec<SpeechPiece>;

    fn run(&mut self, batch: Vec<Probed>, _cx: &StageContext) -> StageResult<Vec<SpeechPiece>> {
        Ok(batch
            .iter()
            .map(|v| match self.pieces(v) {
                Ok(p) => Outcome::Ok(p),
                Err(e) => Outcome::RecordFailure(Cause::new(e)),
            })
            .collect())
    }
}

/// whisper tiny.en over speech pieces, a whole engine batch per encoder pass
/// (pieces of many videos ride together); each text keeps its piece's times.
pub struct Transcribe {
    whisper: Whisper,
}

impl Transcribe {
    /// Load whisper (call it in the Call's factory: one per replica).
    pub fn load(assets: &SpeechAssets) -> Result<Transcribe, rayorch_models::ModelError> {
        Ok(Transcribe {
            whisper: Whisper::from_assets(assets, WhisperConfig::default())?,
        })
    }
}

impl Stage for Transcribe {
    type In = SpeechPiece;
    type Out = SpeechText;

    fn run(&mut self, batch: Vec<SpeechPiece>, _cx: &StageContext) -> StageResult<SpeechText> {
        // Decode each piece's samples now; a piece whose audio does not
        // decode fails alone, the others are transcribed together.
        let audio: Vec<Result<Vec<f32>, String>> = batch
            .iter()
            .map(|p| extract_audio(&p.video, p.start_s, p.end_s).map_err(|e| e.to_string()))
            .collect();
        let clips: Vec<&[f32]> = audio
            .iter()
            .filter_map(|a| a.as_ref().ok().map(Vec::as_slice))
            .collect();
        let mut texts = self.whisper.transcribe_batch(&clips)?.into_iter();
        Ok(batch
            .iter()
            .zip(audio)
            .map(|(p, a)| match a {
                Ok(_) => Outcome::Ok(SpeechText {
                    start_s: p.start_s,
                    end_s: p.end_s,
                    text: texts.next().unwrap_or_default().trim().to_string(),
                }),
                Err(e) => Outcome::RecordFailure(Cause::new(e)),
            })
            .collect())
    }
}
