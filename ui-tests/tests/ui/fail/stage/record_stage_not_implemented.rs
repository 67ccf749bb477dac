//! `Call::new_async_records` over a type that only implements the
//! batch-level `AsyncStage`.

use std::sync::Arc;

use rayorch::prelude::*;

struct Fetch;

impl AsyncStage for Fetch {
    type In = u32;
    type Out = u32;
    async fn run(self: Arc<Self>, batch: Vec<u32>, _cx: StageContext) -> StageResult<u32> {
        Ok(batch.into_iter().map(Outcome::Ok).collect())
    }
}

fn main() {
    let _fetch = Call::new_async_records("fetch", || Ok(Fetch));
}
