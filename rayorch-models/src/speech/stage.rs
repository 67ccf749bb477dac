//! whisper as a batched rayorch [`Stage`]: one clip in, its text out.

use rayorch::{Cause, Outcome, Stage, StageContext, StageResult};

use crate::speech::{SAMPLE_RATE, WHISPER_WINDOW, Whisper};

/// Transcribe 16 kHz mono clips, a whole engine batch per encoder pass (clips
/// of many videos ride together). A clip over 30 s is a record failure that
/// says to split it; the rest of the batch still runs.
#[derive(Debug)]
pub struct WhisperStage {
    whisper: Whisper,
}

impl WhisperStage {
    /// Wrap a loaded model (load it in the Call's factory: one per replica).
    pub fn new(whisper: Whisper) -> WhisperStage {
        WhisperStage { whisper }
    }
}

impl Stage for WhisperStage {
    type In = Vec<f32>;
    type Out = String;

    fn run(&mut self, batch: Vec<Vec<f32>>, _cx: &StageContext) -> StageResult<String> {
        let _span = tracing::debug_span!("whisper_stage", clips = batch.len()).entered();
        let fits: Vec<&[f32]> = batch
            .iter()
            .filter(|c| c.len() <= WHISPER_WINDOW)
            .map(Vec::as_slice)
            .collect();
        let mut texts = self.whisper.transcribe_batch(&fits)?.into_iter();
        Ok(batch
            .iter()
            .map(|c| {
                if c.len() <= WHISPER_WINDOW {
                    texts.next().map_or_else(
                        || Outcome::RecordFailure(Cause::new("whisper returned fewer texts than clips")),
                        Outcome::Ok,
                    )
                } else {
                    Outcome::RecordFailure(Cause::new(format!(
                        "audio clip of {:.1} s is longer than whisper's 30 s window: split it (at speech spans or fixed windows) before this Call",
                        c.len() as f64 / SAMPLE_RATE as f64
                    )))
                }
            })
            .collect())
    }
}
