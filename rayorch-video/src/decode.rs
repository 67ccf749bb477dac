//! FFmpeg decoding: probe, the sampled-frame scan, lazy range decode, audio.
//!
//! Invariants:
//! - Every function opens its own input, decoder and scaler and drops them
//!   before returning: FFmpeg contexts are not shareable between threads, so
//!   each blocking task owns one set for the length of one call. The one
//!   exception, [`FrameReader`], keeps a few inputs open between calls of
//!   the one replica that owns it (`&mut self`).
//! - Frame times are seconds from the video stream's first timestamp. The
//!   sampling rule ([`Grid`]) is the same in [`scan`] and [`decode_frames`],
//!   so the range decode of a clip finds exactly the frames the scan chose
//!   (matched by timestamp, not by counting frames after a seek).
//! - Memory is bounded by what one call returns: the scan keeps one small
//!   histogram per sampled frame, a range decode the frames of that range,
//!   the audio one decoded chunk ([`for_each_audio`]). Every packet read is
//!   released after use (`fresh_packet`): nothing grows with the
//!   bytes read.
//! - Decoders run with `err_detect=explode`: a damaged packet is a typed
//!   [`VideoError::Corrupt`] naming the file and the time, never concealed
//!   pixels that would be indexed as if they were content.

use std::path::{Path, PathBuf};
use std::sync::Once;

use ff::codec::decoder::Check;
use ff::format::Pixel;
use ff::media::Type;
use ff::software::scaling::{context::Context as Scaler, flag::Flags};
use ff::util::frame::video::Video as VideoFrame;
use ffmpeg_next as ff;
use serde::{Deserialize, Serialize};

use crate::error::VideoError;

/// Initialise FFmpeg once per process and silence its log (errors reach
/// the user as typed [`VideoError`]s instead).
pub fn init() {
    static INIT: Once = Once::new();
    INIT.call_once(|| {
        let _ = ff::init();
        ff::util::log::set_level(ff::util::log::Level::Quiet);
    });
}

/// What a probe finds in a video file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VideoInfo {
    /// Duration in seconds (container, else video stream).
    pub duration_s: f64,
    /// Average frame rate of the video stream.
    pub fps: f64,
    /// Coded width.
    pub width: u32,
    /// Coded height.
    pub height: u32,
    /// Video codec name.
    pub codec: String,
    /// The best audio stream, if any.
    pub audio: Option<AudioInfo>,
    /// Every stream as `index:kind(codec)`.
    pub streams: Vec<String>,
}

/// The best audio stream of a video.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AudioInfo {
    /// Codec name.
    pub codec: String,
    /// Sample rate in Hz.
    pub sample_rate: u32,
    /// Channel count.
    pub channels: u16,
}

/// One sampled frame of the scan: its time and colour histogram.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    /// Seconds from the first frame.
    pub t: f64,
    /// Joint RGB histogram, 4 levels per channel, summing to 1.
    pub hist: [f32; HIST_BINS],
}

/// Bins of the scan's colour histogram (4 × 4 × 4).
pub const HIST_BINS: usize = 64;
/// Side of the thumbnail the histogram is computed on.
const HIST_SIDE: u32 = 64;

/// One decoded RGB frame at model size.
#[derive(Clone, Debug, PartialEq)]
pub struct RgbFrame {
    /// Seconds from the first frame.
    pub t: f64,
    /// Width = height = `side`.
    pub side: u32,
    /// Packed RGB24, row-major, `side * side * 3` bytes.
    pub rgb: Vec<u8>,
}

/// The sampling rule: a frame is taken when it is the first at or after the
/// next point of the grid `k / rate`; the grid then moves past it. A video
/// slower than `rate` yields every frame.
#[derive(Clone, Debug)]
pub struct Grid {
    rate: f64,
    next: u64,
}

const EPS: f64 = 1e-6;

impl Grid {
    /// A grid of `rate` points per second, starting at 0.
    pub fn new(rate: f64) -> Grid {
        Grid {
            rate: rate.max(1e-3),
            next: 0,
        }
    }

    /// Whether the frame at `t` is sampled (call in presentation order).
    pub fn take(&mut self, t: f64) -> bool {
        if t + EPS >= self.next as f64 / self.rate {
            self.next = ((t + EPS) * self.rate).floor().max(0.0) as u64 + 1;
            true
        } else {
            false
        }
    }
}

/// An open input with its video stream located.
struct Opened {
    ictx: ff::format::context::Input,
    info: VideoInfo,
    video: usize,
    /// Seconds per timestamp unit of the video stream.
    tb: f64,
    /// The video stream's first timestamp, in seconds.
    start: f64,
    name: String,
}

fn name_of(path: &Path) -> String {
    path.display().to_string()
}

fn ffmpeg_err(name: &str, step: &'static str, codec: &str) -> impl Fn(ff::Error) -> VideoError {
    let (name, codec) = (name.to_string(), codec.to_string());
    move |e| VideoError::Ffmpeg {
        file: name.clone(),
        step,
        codec: codec.clone(),
        cause: e.to_string(),
    }
}

/// Containers whose magic bytes say "this was meant to be a video": an open
/// failure on one of these is damage, not a wrong file type.
fn looks_like_container(head: &[u8]) -> bool {
    let mp4 = head.len() >= 8 && &head[4..8] == b"ftyp";
    let mkv = head.starts_with(&[0x1a, 0x45, 0xdf, 0xa3]);
    let avi = head.starts_with(b"RIFF") && head.get(8..11) == Some(b"AVI");
    mp4 || mkv || avi
}

fn open(path: &Path) -> Result<Opened, VideoError> {
    init();
    let name = name_of(path);
    let meta = std::fs::metadata(path).map_err(|e| VideoError::Read {
        file: name.clone(),
        cause: e.to_string(),
    })?;
    if meta.len() == 0 {
        return Err(VideoError::Empty { file: name });
    }
    let ictx = match ff::format::input(path) {
        Ok(i) => i,
        Err(e) => {
            let mut head = [0u8; 16];
            let n = std::fs::File::open(path)
                .and_then(|mut f| std::io::Read::read(&mut f, &mut head))
                .unwrap_or(0);
            return Err(if looks_like_container(&head[..n]) {
                VideoError::Truncated {
                    file: name,
                    cause: e.to_string(),
                }
            } else {
                VideoError::NotVideo {
                    file: name,
                    cause: e.to_string(),
                }
            });
        }
    };
    let codec_name = |p: ff::codec::Parameters| {
        ff::codec::decoder::find(p.id()).map_or_else(|| format!("{:?}", p.id()), |c| c.name().to_string())
    };
    let streams: Vec<String> = ictx
        .streams()
        .map(|s| {
            let p = s.parameters();
            format!("{}:{:?}({})", s.index(), p.medium(), codec_name(p)).to_lowercase()
        })
        .collect();
    let Some(vs) = ictx.streams().best(Type::Video) else {
        let streams = if streams.is_empty() {
            "no streams at all".to_string()
        } else {
            format!("streams: {}", streams.join(", "))
        };
        return Err(VideoError::NoVideoStream { file: name, streams });
    };
    let video = vs.index();
    let tb = f64::from(vs.time_base());
    let start = if vs.start_time() == ff::ffi::AV_NOPTS_VALUE {
        0.0
    } else {
        vs.start_time() as f64 * tb
    };
    let fr = vs.avg_frame_rate();
    let fps = if fr.denominator() > 0 && fr.numerator() > 0 {
        f64::from(fr)
    } else {
        f64::from(vs.rate())
    };
    let vcodec = codec_name(vs.parameters());
    let vctx = ff::codec::context::Context::from_parameters(vs.parameters()).map_err(ffmpeg_err(
        &name,
        "reading the video parameters",
        &vcodec,
    ))?;
    let vdec = vctx
        .decoder()
        .video()
        .map_err(ffmpeg_err(&name, "opening the video decoder", &vcodec))?;
    let duration_s = if ictx.duration() > 0 {
        ictx.duration() as f64 / f64::from(ff::ffi::AV_TIME_BASE)
    } else if vs.duration() > 0 {
        vs.duration() as f64 * tb
    } else {
        0.0
    };
    let audio = ictx.streams().best(Type::Audio).map(|a| {
        let p = a.parameters();
        let (rate, channels) = ff::codec::context::Context::from_parameters(p.clone())
            .and_then(|c| c.decoder().audio())
            .map_or((0, 0), |d| (d.rate(), d.channels()));
        AudioInfo {
            codec: codec_name(p),
            sample_rate: rate,
            channels,
        }
    });
    let info = VideoInfo {
        duration_s,
        fps,
        width: vdec.width(),
        height: vdec.height(),
        codec: vcodec,
        audio,
        streams,
    };
    Ok(Opened {
        ictx,
        info,
        video,
        tb,
        start,
        name,
    })
}

/// Probe a file: duration, frame rate, streams. Opens no decoder beyond
/// checking that the video codec is supported.
pub fn probe(path: &Path) -> Result<VideoInfo, VideoError> {
    open(path).map(|o| o.info)
}

fn video_decoder(o: &Opened) -> Result<ff::decoder::Video, VideoError> {
    let stream = o.ictx.stream(o.video).ok_or_else(|| VideoError::NoVideoStream {
        file: o.name.clone(),
        streams: o.info.streams.join(", "),
    })?;
    let ctx = ff::codec::context::Context::from_parameters(stream.parameters()).map_err(ffmpeg_err(
        &o.name,
        "reading the video parameters",
        &o.info.codec,
    ))?;
    let mut dec = ctx.decoder();
    dec.check(Check::EXPLODE);
    dec.video()
        .map_err(ffmpeg_err(&o.name, "opening the video decoder", &o.info.codec))
}

/// A blank packet for one `av_read_frame`. Never reuse a packet across
/// reads: `av_read_frame` expects a blank packet and overwrites the buffer
/// reference of a used one without releasing it (ffmpeg-next's
/// `Packet::read` does not unref first), which leaked every byte read:
/// a whole-file scan held the file's size in memory. Dropping the packet
/// after each read releases it.
fn fresh_packet() -> ff::Packet {
    ff::Packet::empty()
}

/// Where a forward decode stands between calls of [`decode_video`].
#[derive(Clone, Copy, Debug)]
struct DecodeState {
    /// Time of the last frame the decoder gave out (frames up to it are
    /// consumed); `-inf` before the first.
    last_t: f64,
    /// The input is exhausted and the decoder drained or draining.
    eof: bool,
    /// The decoder gave out its last frame: nothing more will come.
    done: bool,
}

impl DecodeState {
    fn new() -> DecodeState {
        DecodeState {
            last_t: f64::NEG_INFINITY,
            eof: false,
            done: false,
        }
    }
}

/// Feeds the video packets of `o` from the current position to a decoder
/// and hands each decoded frame (with its time) to `on_frame`, which
/// returns `false` to stop early. Damaged data becomes [`VideoError::Corrupt`].
/// Resumable: frames the decoder still holds when `on_frame` stops are
/// received first by the next call with the same `st` (the decoder is
/// always drained before a packet is sent, so sending never meets a full
/// decoder).
fn decode_video(
    o: &mut Opened,
    dec: &mut ff::decoder::Video,
    st: &mut DecodeState,
    mut on_frame: impl FnMut(&VideoFrame, f64) -> Result<bool, VideoError>,
) -> Result<(), VideoError> {
    let mut frame = VideoFrame::empty();
    let frame_dt = 1.0 / o.info.fps.max(1.0);
    let corrupt = |name: &str, at_s: f64, e: ff::Error| VideoError::Corrupt {
        file: name.to_string(),
        at_s,
        cause: e.to_string(),
    };
    let known = |t: f64| if t.is_finite() { t } else { 0.0 };
    while !st.done {
        loop {
            match dec.receive_frame(&mut frame) {
                Ok(()) => {
                    let t = frame
                        .timestamp()
                        .map_or(known(st.last_t) + frame_dt, |ts| ts as f64 * o.tb - o.start);
                    st.last_t = t;
                    if !on_frame(&frame, t)? {
                        return Ok(());
                    }
                }
                Err(ff::Error::Eof) => {
                    st.done = true;
                    return Ok(());
                }
                Err(ff::Error::Other { errno }) if errno == ff::util::error::EAGAIN => break,
                Err(e) => return Err(corrupt(&o.name, known(st.last_t), e)),
            }
        }
        if st.eof {
            // Drained after EOF without the decoder saying so.
            st.done = true;
            break;
        }
        let mut packet = fresh_packet();
        match packet.read(&mut o.ictx) {
            Ok(()) => {
                if packet.stream() != o.video {
                    continue;
                }
                if let Err(e) = dec.send_packet(&packet) {
                    let at = packet
                        .pts()
                        .map_or(known(st.last_t), |p| p as f64 * o.tb - o.start);
                    return Err(corrupt(&o.name, at, e));
                }
            }
            Err(ff::Error::Eof) => {
                st.eof = true;
                let _ = dec.send_eof();
            }
            Err(e @ ff::Error::InvalidData) => return Err(corrupt(&o.name, known(st.last_t), e)),
            Err(e) => {
                return Err(VideoError::Truncated {
                    file: o.name.clone(),
                    cause: format!("reading packets after {:.2} s: {e}", known(st.last_t)),
                });
            }
        }
    }
    Ok(())
}

/// Scales decoded frames to `side`×`side` RGB24, rebuilding the scaler when
/// the input size or format changes mid-stream.
struct RgbScaler {
    scaler: Option<Scaler>,
    side: u32,
    name: String,
    codec: String,
}

impl RgbScaler {
    fn new(o: &Opened, side: u32) -> RgbScaler {
        RgbScaler {
            scaler: None,
            side,
            name: o.name.clone(),
            codec: o.info.codec.clone(),
        }
    }

    fn rgb(&mut self, frame: &VideoFrame) -> Result<Vec<u8>, VideoError> {
        let fail = |step| ffmpeg_err(&self.name, step, &self.codec);
        let stale = self.scaler.as_ref().is_none_or(|s| {
            let i = s.input();
            i.width != frame.width() || i.height != frame.height() || i.format != frame.format()
        });
        if stale || self.scaler.is_none() {
            let s = Scaler::get(
                frame.format(),
                frame.width(),
                frame.height(),
                Pixel::RGB24,
                self.side,
                self.side,
                Flags::BILINEAR,
            )
            .map_err(fail("creating the RGB scaler"))?;
            self.scaler = Some(s);
        }
        let mut out = VideoFrame::empty();
        if let Some(s) = self.scaler.as_mut() {
            s.run(frame, &mut out).map_err(fail("scaling a frame"))?;
        }
        Ok(packed_rgb(&out))
    }
}

/// Packed RGB rows of a scaled frame (dropping the stride padding).
fn packed_rgb(f: &VideoFrame) -> Vec<u8> {
    let (w, h, stride) = (f.width() as usize, f.height() as usize, f.stride(0));
    let data = f.data(0);
    let mut out = Vec::with_capacity(w * h * 3);
    for y in 0..h {
        out.extend_from_slice(&data[y * stride..y * stride + w * 3]);
    }
    out
}

/// A joint 4×4×4 RGB histogram of packed RGB pixels, normalised to sum 1.
pub fn histogram(rgb: &[u8]) -> [f32; HIST_BINS] {
    let mut h = [0f32; HIST_BINS];
    let mut n = 0usize;
    for px in rgb.chunks_exact(3) {
        let bin = ((px[0] as usize >> 6) << 4) | ((px[1] as usize >> 6) << 2) | (px[2] as usize >> 6);
        h[bin] += 1.0;
        n += 1;
    }
    if n > 0 {
        h.iter_mut().for_each(|v| *v /= n as f32);
    }
    h
}

/// The whole-video scan: probe, then decode every frame in order and keep a
/// colour histogram of each sampled one (`rate` per second). Cheap in memory
/// (64 floats per sampled frame) whatever the video's length.
pub fn scan(path: &Path, rate: f64) -> Result<(VideoInfo, Vec<Sample>), VideoError> {
    let mut o = open(path)?;
    let mut dec = video_decoder(&o)?;
    let mut grid = Grid::new(rate);
    let mut scaler = RgbScaler::new(&o, HIST_SIDE);
    let mut samples = Vec::new();
    decode_video(&mut o, &mut dec, &mut DecodeState::new(), |f, t| {
        if grid.take(t) {
            samples.push(Sample {
                t,
                hist: histogram(&scaler.rgb(f)?),
            });
        }
        Ok(true)
    })?;
    if samples.is_empty() {
        return Err(VideoError::NoFrames { file: o.name });
    }
    Ok((o.info, samples))
}

/// A plain sequential decode: one open, no seek, every frame the grid at
/// `rate` takes handed to `on_frame` as `side`×`side` RGB, in order (the
/// same frames a [`scan`] at `rate` chooses); `on_frame` returns `false` to
/// stop. Holds one frame at a time. The baseline the frame benchmark
/// compares the engine's range decodes to.
pub fn for_each_sampled(
    path: &Path,
    rate: f64,
    side: u32,
    mut on_frame: impl FnMut(RgbFrame) -> bool,
) -> Result<VideoInfo, VideoError> {
    let mut o = open(path)?;
    let mut dec = video_decoder(&o)?;
    let mut grid = Grid::new(rate);
    let mut scaler = RgbScaler::new(&o, side);
    decode_video(&mut o, &mut dec, &mut DecodeState::new(), |f, t| {
        Ok(!grid.take(t)
            || on_frame(RgbFrame {
                t,
                side,
                rgb: scaler.rgb(f)?,
            }))
    })?;
    Ok(o.info)
}

/// Decode the frames at `times` (sorted, as chosen by a [`scan`] at the same
/// rate) as `side`×`side` RGB: one seek to the keyframe before the first,
/// then decoding forward until the last. A time the decode does not reach
/// is a [`VideoError::Corrupt`] (the file changed or is damaged there).
pub fn decode_frames(path: &Path, times: &[f64], side: u32) -> Result<Vec<RgbFrame>, VideoError> {
    FrameReader::new(0).decode(path, times, side)
}

/// How far ahead of an open input's position a request may start and still
/// continue that decode rather than seek: about a keyframe interval of the
/// usual encoders, so continuing never decodes much more than a seek would.
const CONTINUE_S: f64 = 5.0;

/// An open input positioned after the last frame it gave out.
struct Cursor {
    path: PathBuf,
    o: Opened,
    dec: ff::decoder::Video,
    st: DecodeState,
}

/// Range decodes that keep up to `keep_open` inputs open between calls,
/// positioned after the last frame each gave out: a request starting just
/// after that frame (the next batch of the same clip, or the next clip)
/// continues the decode instead of reopening, seeking back to a keyframe
/// and decoding the frames before it again. Any other request opens and
/// seeks as [`decode_frames`] does. Decoding is deterministic from a
/// keyframe, so a continued decode gives the same pixels as a fresh one
/// (for closed-GOP streams, the usual H.264 output; for an open-GOP stream
/// the continued decode is the one with all references intact).
///
/// Memory: `keep_open` decoders with their reference frames, whatever the
/// videos' lengths. Not shareable between threads at once (`&mut self`);
/// each frame-model replica owns one.
pub struct FrameReader {
    open: Vec<Cursor>,
    keep_open: usize,
    /// Requests that continued an open decode.
    pub continued: u64,
    /// Requests that opened the file and sought.
    pub sought: u64,
}

impl std::fmt::Debug for FrameReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FrameReader")
            .field("open", &self.open.iter().map(|c| &c.path).collect::<Vec<_>>())
            .field("continued", &self.continued)
            .field("sought", &self.sought)
            .finish()
    }
}

impl FrameReader {
    /// A reader keeping at most `keep_open` inputs open (0: none, every
    /// request opens and seeks).
    pub fn new(keep_open: usize) -> FrameReader {
        FrameReader {
            open: Vec::new(),
            keep_open,
            continued: 0,
            sought: 0,
        }
    }

    /// The frames of `path` at `times` (sorted, as a [`scan`] at the same
    /// rate chose them) as `side`×`side` RGB; see [`decode_frames`].
    pub fn decode(&mut self, path: &Path, times: &[f64], side: u32) -> Result<Vec<RgbFrame>, VideoError> {
        let (Some(&first), Some(&last)) = (times.first(), times.last()) else {
            return Ok(Vec::new());
        };
        let reuse = self.open.iter().position(|c| {
            c.path == path && !c.st.done && c.st.last_t < first - EPS && first - c.st.last_t <= CONTINUE_S
        });
        let mut c = match reuse {
            Some(i) => {
                self.continued += 1;
                self.open.remove(i)
            }
            None => {
                self.sought += 1;
                Self::seek(path, first)?
            }
        };
        let mut scaler = RgbScaler::new(&c.o, side);
        let mut out = Vec::with_capacity(times.len());
        let mut next = 0usize;
        decode_video(&mut c.o, &mut c.dec, &mut c.st, |f, t| {
            while next < times.len() && times[next] < t - EPS {
                next += 1; // a time between frames: the scan never chose it
            }
            if next < times.len() && (times[next] - t).abs() <= EPS {
                out.push(RgbFrame {
                    t,
                    side,
                    rgb: scaler.rgb(f)?,
                });
                next += 1;
            }
            Ok(t < last - EPS && next < times.len())
        })?;
        if out.len() != times.len() {
            let missing = times
                .iter()
                .find(|t| !out.iter().any(|f| (f.t - **t).abs() <= EPS))
                .copied()
                .unwrap_or(last);
            return Err(VideoError::Corrupt {
                file: c.o.name,
                at_s: missing,
                cause: format!("the frame at {missing:.3} s chosen by the scan does not decode"),
            });
        }
        if self.keep_open > 0 && !c.st.done {
            if self.open.len() >= self.keep_open {
                self.open.remove(0); // the least recently used
            }
            self.open.push(c);
        }
        Ok(out)
    }

    /// Open `path` positioned at the keyframe before `first`.
    fn seek(path: &Path, first: f64) -> Result<Cursor, VideoError> {
        let mut o = open(path)?;
        let mut dec = video_decoder(&o)?;
        let target = ((first + o.start) * f64::from(ff::ffi::AV_TIME_BASE)) as i64;
        // A failed seek (a non-seekable input) decodes from the start instead:
        // slower, same frames.
        if o.ictx.seek(target, ..target).is_err() {
            o = open(path)?;
            dec = video_decoder(&o)?;
        }
        Ok(Cursor {
            path: path.to_path_buf(),
            o,
            dec,
            st: DecodeState::new(),
        })
    }
}

/// Sample rate of extracted audio (what speech models take).
pub const AUDIO_RATE: u32 = 16_000;

/// The audio of `[start_s, end_s)` as 16 kHz mono f32 (silence-free: exactly
/// the decoded samples in range). A video without audio gives an empty vector.
pub fn extract_audio(path: &Path, start_s: f64, end_s: f64) -> Result<Vec<f32>, VideoError> {
    let mut out = Vec::new();
    for_each_audio(path, start_s, end_s, |pcm| out.extend_from_slice(pcm))?;
    Ok(out)
}

/// Cuts a stream of resampled chunks to the samples of a time range: the
/// first decoded frame may start before the range (`skip` drops the
/// difference) and the last may run past it (`keep` counts what is left).
struct RangeCut {
    skip: Option<usize>,
    keep: usize,
}

impl RangeCut {
    /// Hand the in-range part of `chunk` to `f`.
    fn pass(&mut self, chunk: &[f32], f: &mut impl FnMut(&[f32])) {
        let skip = self.skip.unwrap_or(0).min(chunk.len());
        self.skip = Some(self.skip.unwrap_or(0) - skip);
        let take = (chunk.len() - skip).min(self.keep);
        if take > 0 {
            f(&chunk[skip..skip + take]);
        }
        self.keep -= take;
    }
}

/// [`extract_audio`] a decoded packet at a time: `on_pcm` gets the 16 kHz
/// mono samples of `[start_s, end_s)` in order, in chunks of a few
/// thousand, and together exactly what [`extract_audio`] returns. Holds one
/// chunk at a time, so a long track never sits in memory whole. A video
/// without audio calls `on_pcm` never.
pub fn for_each_audio(
    path: &Path,
    start_s: f64,
    end_s: f64,
    mut on_pcm: impl FnMut(&[f32]),
) -> Result<(), VideoError> {
    use ff::format::Sample as Fmt;
    use ff::format::sample::Type as Layout;
    let mut o = open(path)?;
    let Some(stream) = o.ictx.streams().best(Type::Audio) else {
        return Ok(());
    };
    let index = stream.index();
    let tb = f64::from(stream.time_base());
    let codec = o
        .info
        .audio
        .as_ref()
        .map_or_else(String::new, |a| a.codec.clone());
    let name = o.name.clone();
    let fail = |step| ffmpeg_err(&name, step, &codec);
    let mut dec = ff::codec::context::Context::from_parameters(stream.parameters())
        .map_err(fail("reading the audio parameters"))?
        .decoder()
        .audio()
        .map_err(fail("opening the audio decoder"))?;
    let target = ((start_s + o.start).max(0.0) * f64::from(ff::ffi::AV_TIME_BASE)) as i64;
    if start_s > 0.0 && o.ictx.seek(target, ..target).is_err() {
        o = open(path)?;
    }
    let layout = |ch: u16, l: ff::ChannelLayout| {
        if l.bits() == 0 {
            ff::ChannelLayout::default(i32::from(ch.max(1)))
        } else {
            l
        }
    };
    let rate = f64::from(AUDIO_RATE);
    let mut cut = RangeCut {
        skip: None,
        keep: ((end_s - start_s).max(0.0) * rate).round() as usize,
    };
    let mut resampler: Option<ff::software::resampling::Context> = None;
    let mut frame = ff::frame::Audio::empty();
    let mut chunk: Vec<f32> = Vec::new();
    let mut done = false;
    while !done {
        let mut packet = fresh_packet();
        match packet.read(&mut o.ictx) {
            Ok(()) if packet.stream() == index => {
                if dec.send_packet(&packet).is_err() {
                    continue; // a damaged audio packet is skipped: the video decides validity
                }
            }
            Ok(()) => continue,
            Err(_) => {
                let _ = dec.send_eof();
                done = true;
            }
        }
        while dec.receive_frame(&mut frame).is_ok() {
            let t = frame.timestamp().map_or(0.0, |ts| ts as f64 * tb - o.start);
            let dur = frame.samples() as f64 / f64::from(frame.rate().max(1));
            if t + dur <= start_s {
                continue;
            }
            if t >= end_s {
                done = true;
                break;
            }
            // The first frame in range fixes how much of its start is before
            // the range.
            if cut.skip.is_none() {
                cut.skip = Some(((start_s - t).max(0.0) * rate).round() as usize);
            }
            let lay = layout(frame.channels(), frame.channel_layout());
            frame.set_channel_layout(lay);
            if resampler.is_none() {
                resampler = Some(
                    ff::software::resampling::Context::get(
                        frame.format(),
                        lay,
                        frame.rate(),
                        Fmt::F32(Layout::Packed),
                        ff::ChannelLayout::MONO,
                        AUDIO_RATE,
                    )
                    .map_err(fail("creating the audio resampler"))?,
                );
            }
            let cap = frame.samples() * AUDIO_RATE as usize / frame.rate().max(1) as usize + 64;
            let mut res = ff::frame::Audio::new(Fmt::F32(Layout::Packed), cap, ff::ChannelLayout::MONO);
            if let Some(r) = resampler.as_mut() {
                r.run(&frame, &mut res).map_err(fail("resampling audio"))?;
            }
            chunk.clear();
            append_f32(&res, &mut chunk);
            cut.pass(&chunk, &mut on_pcm);
        }
    }
    if let Some(r) = resampler.as_mut() {
        loop {
            let mut res = ff::frame::Audio::new(Fmt::F32(Layout::Packed), 4096, ff::ChannelLayout::MONO);
            match r.flush(&mut res) {
                Ok(_) if res.samples() > 0 => {
                    chunk.clear();
                    append_f32(&res, &mut chunk);
                    cut.pass(&chunk, &mut on_pcm);
                }
                _ => break,
            }
        }
    }
    Ok(())
}

fn append_f32(frame: &ff::frame::Audio, out: &mut Vec<f32>) {
    let n = frame.samples();
    let bytes = frame.data(0);
    out.extend(
        bytes[..(n * 4).min(bytes.len())]
            .chunks_exact(4)
            .map(|b| f32::from_ne_bytes([b[0], b[1], b[2], b[3]])),
    );
}
