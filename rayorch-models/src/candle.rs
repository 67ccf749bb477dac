//! What the candle families (`embed`, `speech`) share: the device choice and
//! candle's errors as [`ModelError`](crate::ModelError)s.

use candle_core::Device;

/// The candle device for `ordinal` (`None` = CPU). CUDA needs the crate's
/// `candle-cuda` feature.
pub(crate) fn device(ordinal: Option<usize>) -> candle_core::Result<Device> {
    match ordinal {
        None => Ok(Device::Cpu),
        Some(i) => Device::new_cuda(i),
    }
}

impl From<candle_core::Error> for crate::ModelError {
    fn from(e: candle_core::Error) -> Self {
        crate::ModelError::model("candle", e)
    }
}
