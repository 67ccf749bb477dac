//! FFmpeg decoding: probe, the sampled-frame scan, lazy range decode, audio.
//!
//! Invariants:
//! - Every function opens its own input, decoder and scaler and drops them
//!   before returning: FFmpeg contexts are not shareable between threads, so
//!   each blocking task owns one set for the length of one call.
//! - Frame times are seconds from the video stream's first timestamp. The
//!   sampling rule ([`Grid`]) is the same in [`scan`] and [`decode_frames`],
//!   so the range decode of a clip finds exactly the frames the scan chose
//!   (matched by timestamp, not by counting frames after a seek).
//! - Memory is bounded by what one call returns: the scan keeps one small
//!   histogram per sampled frame, a range decode the frames of that range.
//! - Decoders run with `err_detect=explode`: a damaged packet is a typed
//!   [`VideoError::Corrupt`] naming the file and the time, never concealed
//!   pixels that would be indexed as if they were content.

use std::path::Path;
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

/// Feeds the video packets of `o` from the current position to a decoder
/// and hands each decoded frame (with its time) to `on_frame`, which
/// returns `false` to stop early. Damaged data becomes [`VideoError::Corrupt`].
fn decode_video(
    o: &mut Opened,
    dec: &mut ff::decoder::Video,
    mut on_frame: impl FnMut(&VideoFrame, f64) -> Result<bool, VideoError>,
) -> Result<(), VideoError> {
    let mut frame = VideoFrame::empty();
    let mut last_t = 0.0f64;
    let mut packet = ff::Packet::empty();
    let frame_dt = 1.0 / o.info.fps.max(1.0);
    let corrupt = |name: &str, at_s: f64, e: ff::Error| VideoError::Corrupt {
        file: name.to_string(),
        at_s,
        cause: e.to_string(),
    };
    let mut eof = false;
    loop {
        if !eof {
            match packet.read(&mut o.ictx) {
                Ok(()) => {
                    if packet.stream() != o.video {
                        continue;
                    }
                    if let Err(e) = dec.send_packet(&packet) {
                        let at = packet.pts().map_or(last_t, |p| p as f64 * o.tb - o.start);
                        return Err(corrupt(&o.name, at, e));
                    }
                }
                Err(ff::Error::Eof) => {
                    eof = true;
                    let _ = dec.send_eof();
                }
                Err(e @ ff::Error::InvalidData) => return Err(corrupt(&o.name, last_t, e)),
                Err(e) => {
                    return Err(VideoError::Truncated {
                        file: o.name.clone(),
                        cause: format!("reading packets after {last_t:.2} s: {e}"),
                    });
                }
            }
        }
        loop {
            match dec.receive_frame(&mut frame) {
                Ok(()) => {
                    let t = frame
                        .timestamp()
                        .map_or(last_t + frame_dt, |ts| ts as f64 * o.tb - o.start);
                    last_t = t;
                    if !on_frame(&frame, t)? {
                        return Ok(());
                    }
                }
                Err(ff::Error::Eof) => return Ok(()),
                Err(ff::Error::Other { errno }) if errno == ff::util::error::EAGAIN => break,
                Err(e) => return Err(corrupt(&o.name, last_t, e)),
            }
        }
    }
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
    decode_video(&mut o, &mut dec, |f, t| {
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

/// Decode the frames at `times` (sorted, as chosen by a [`scan`] at the same
/// rate) as `side`×`side` RGB: one seek to the keyframe before the first,
/// then decoding forward until the last. A time the decode does not reach
/// is a [`VideoError::Corrupt`] (the file changed or is damaged there).
pub fn decode_frames(path: &Path, times: &[f64], side: u32) -> Result<Vec<RgbFrame>, VideoError> {
    let (Some(&first), Some(&last)) = (times.first(), times.last()) else {
        return Ok(Vec::new());
    };
    let mut o = open(path)?;
    let mut dec = video_decoder(&o)?;
    let target = ((first + o.start) * f64::from(ff::ffi::AV_TIME_BASE)) as i64;
    // A failed seek (a non-seekable input) decodes from the start instead:
    // slower, same frames.
    if o.ictx.seek(target, ..target).is_err() {
        o = open(path)?;
        dec = video_decoder(&o)?;
    }
    let mut scaler = RgbScaler::new(&o, side);
    let mut out = Vec::with_capacity(times.len());
    let mut next = 0usize;
    decode_video(&mut o, &mut dec, |f, t| {
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
            file: o.name,
            at_s: missing,
            cause: format!("the frame at {missing:.3} s chosen by the scan does not decode"),
        });
    }
    Ok(out)
}

/// Sample rate of extracted audio (what speech models take).
pub const AUDIO_RATE: u32 = 16_000;

/// The audio of `[start_s, end_s)` as 16 kHz mono f32 (silence-free: exactly
/// the decoded samples in range). A video without audio gives an empty vector.
pub fn extract_audio(path: &Path, start_s: f64, end_s: f64) -> Result<Vec<f32>, VideoError> {
    use ff::format::Sample as Fmt;
    use ff::format::sample::Type as Layout;
    let mut o = open(path)?;
    let Some(stream) = o.ictx.streams().best(Type::Audio) else {
        return Ok(Vec::new());
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
    let mut resampler: Option<ff::software::resampling::Context> = None;
    let mut out: Vec<f32> = Vec::new();
    let mut first_t: Option<f64> = None;
    let mut frame = ff::frame::Audio::empty();
    let mut packet = ff::Packet::empty();
    let push = |resampler: &mut Option<ff::software::resampling::Context>,
                frame: &mut ff::frame::Audio,
                out: &mut Vec<f32>|
     -> Result<(), VideoError> {
        let lay = layout(frame.channels(), frame.channel_layout());
        frame.set_channel_layout(lay);
        if resampler.is_none() {
            *resampler = Some(
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
            r.run(frame, &mut res).map_err(fail("resampling audio"))?;
        }
        append_f32(&res, out);
        Ok(())
    };
    let mut done = false;
    while !done {
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
            first_t.get_or_insert(t);
            push(&mut resampler, &mut frame, &mut out)?;
        }
    }
    if let Some(r) = resampler.as_mut() {
        loop {
            let mut res = ff::frame::Audio::new(Fmt::F32(Layout::Packed), 4096, ff::ChannelLayout::MONO);
            match r.flush(&mut res) {
                Ok(_) if res.samples() > 0 => append_f32(&res, &mut out),
                _ => break,
            }
        }
    }
    // Trim to the range: the first decoded frame may start before it.
    let offset = first_t.map_or(0.0, |t| start_s - t).max(0.0);
    let skip = (offset * f64::from(AUDIO_RATE)).round() as usize;
    let keep = ((end_s - start_s).max(0.0) * f64::from(AUDIO_RATE)).round() as usize;
    Ok(out.into_iter().skip(skip).take(keep).collect())
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
