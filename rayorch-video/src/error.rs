//! The crate's error type. Every variant names the file, says what is wrong
//! with it and what the user can do; a stage turns one into a typed
//! `RecordFailure` for that video only.

use thiserror::Error;

/// Why a video (or one clip of it) could not be used.
#[derive(Debug, Error, Clone, PartialEq)]
#[non_exhaustive]
pub enum VideoError {
    /// The file cannot be read at all.
    #[error("{file}: cannot read the file: {cause}; check the path and its permissions")]
    Read {
        /// The video.
        file: String,
        /// The I/O error.
        cause: String,
    },
    /// The file is empty.
    #[error("{file}: the file is empty (0 bytes); the download or copy did not finish, fetch it again")]
    Empty {
        /// The video.
        file: String,
    },
    /// FFmpeg recognises no container format in the file.
    #[error("{file}: not a video: FFmpeg cannot open it ({cause}); pass only video files")]
    NotVideo {
        /// The video.
        file: String,
        /// FFmpeg's message.
        cause: String,
    },
    /// The container opens but holds no video stream.
    #[error("{file}: no video stream ({streams}); audio-only and data files cannot be indexed as video")]
    NoVideoStream {
        /// The video.
        file: String,
        /// What streams there are.
        streams: String,
    },
    /// The container is damaged or cut short.
    #[error(
        "{file}: the file is truncated or its index is damaged ({cause}); re-download or remux it (`ffmpeg -i IN -c copy OUT`)"
    )]
    Truncated {
        /// The video.
        file: String,
        /// What FFmpeg said.
        cause: String,
    },
    /// Packets or frames inside the file do not decode.
    #[error("{file}: corrupt video data at {at_s:.2} s ({cause}); re-encode or replace the file")]
    Corrupt {
        /// The video.
        file: String,
        /// Where (seconds from the start).
        at_s: f64,
        /// What FFmpeg said.
        cause: String,
    },
    /// The video stream decodes to no frame at all.
    #[error("{file}: the video stream holds no decodable frame; the file is empty or broken, replace it")]
    NoFrames {
        /// The video.
        file: String,
    },
    /// An FFmpeg call failed in a way not tied to the data (a codec missing from this build, a scaler).
    #[error(
        "{file}: FFmpeg failed in {step}: {cause}; check that this FFmpeg build supports the codec ({codec})"
    )]
    Ffmpeg {
        /// The video.
        file: String,
        /// Which step.
        step: &'static str,
        /// The codec involved.
        codec: String,
        /// FFmpeg's message.
        cause: String,
    },
}
