use crate::{CommonCounterSet, ConversionError, CounterSamplingPoint, RenderStage};
use thiserror::Error;

/// The three kinds of counter-sampling error Metal defines
/// (`MTLCounterSampleBufferError`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CounterErrorKind {
    /// The device could not allocate the memory (`MTLCounterSampleBufferErrorOutOfMemory`).
    OutOfMemory,
    /// The request was malformed or the device cannot do it (`...Invalid`).
    Invalid,
    /// The driver failed (`...Internal`).
    Internal,
}

/// What exactly was wrong with a request; each variant names the field or
/// limit at fault.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum InvalidInput {
    /// A sample buffer's `sample_count` was 0.
    #[error("sample_count of `{label}` is 0; a counter sample buffer needs at least one sample")]
    SampleCountZero {
        /// The descriptor's label.
        label: String,
    },
    /// A sample buffer's `sample_count` is over what the device allows.
    #[error("sample_count {requested} of `{label}` is over the device limit of {limit}")]
    SampleCountTooLarge {
        /// The descriptor's label.
        label: String,
        /// What was asked for.
        requested: u32,
        /// The device's limit.
        limit: u32,
    },
    /// A heap's `count` was 0 or over the limit.
    #[error("counter heap count {requested} is out of range 1..={limit}")]
    HeapCountOutOfRange {
        /// What was asked for.
        requested: u32,
        /// The device's limit.
        limit: u32,
    },
    /// The device has no such counter set.
    #[error("counter set `{set}` is not supported by device `{device}`")]
    UnsupportedCounterSet {
        /// The set asked for.
        set: CommonCounterSet,
        /// The device's name.
        device: String,
    },
    /// The device cannot sample at that point.
    #[error("device `{device}` cannot sample counters at the {point} boundary")]
    UnsupportedSamplingPoint {
        /// The sampling point asked for.
        point: CounterSamplingPoint,
        /// The device's name.
        device: String,
    },
    /// A render stage the backend or device does not have, for a timestamp
    /// written after it.
    #[error("device `{device}` has no {stage} stage to write a timestamp after")]
    UnsupportedRenderStage {
        /// The stage asked for.
        stage: RenderStage,
        /// The device's name.
        device: String,
    },
    /// A sample index past the buffer's or heap's end.
    #[error("{what} index {index} is out of range for `{label}` with {count} entries")]
    IndexOutOfRange {
        /// What kind of index (`sample`, `heap entry`).
        what: &'static str,
        /// The buffer's or heap's label.
        label: String,
        /// The index given.
        index: u64,
        /// The number of entries.
        count: u64,
    },
    /// A range that reaches past the end, or is empty.
    #[error("range {start}..{end} is invalid for `{label}` with {count} entries")]
    RangeOutOfBounds {
        /// The buffer's or heap's label.
        label: String,
        /// The range's start.
        start: u64,
        /// The range's end (exclusive).
        end: u64,
        /// The number of entries.
        count: u32,
    },
    /// A CPU resolve of a buffer with private storage.
    #[error("`{label}` has private storage: only a GPU resolve may read it")]
    CpuResolveOfPrivateBuffer {
        /// The buffer's label.
        label: String,
    },
    /// A destination offset that is not a multiple of the required alignment.
    #[error("destination offset {offset} is not a multiple of {alignment}")]
    DestinationOffsetUnaligned {
        /// The offset given.
        offset: u64,
        /// The alignment required.
        alignment: u64,
    },
    /// A destination buffer too small for the resolved range.
    #[error(
        "destination buffer holds {available} bytes from offset {offset}, {needed} are needed"
    )]
    DestinationTooSmall {
        /// The offset given.
        offset: u64,
        /// Bytes the resolve writes.
        needed: u64,
        /// Bytes available after the offset.
        available: u64,
    },
    /// A destination buffer the GPU cannot write with a resolve.
    #[error("destination buffer lacks the usage {usage} that a GPU resolve needs")]
    DestinationUsage {
        /// The missing usage flag.
        usage: &'static str,
    },
    /// An object that belongs to another device.
    #[error("{what} belongs to another device")]
    ForeignObject {
        /// The object's kind.
        what: &'static str,
    },
    /// The same sample index used twice in one pass or before it was reset.
    #[error("sample index {index} of `{label}` {reason}")]
    SampleIndexReuse {
        /// The buffer's label.
        label: String,
        /// The index.
        index: u32,
        /// Why it cannot be written here.
        reason: &'static str,
    },
    /// An encoder used in a way its state does not allow.
    #[error("{0}")]
    EncoderState(String),
    /// A feature the device or driver lacks.
    #[error("{0}")]
    Unsupported(String),
    /// A calibration parameter or anchor that cannot be used.
    #[error("calibration {field} {value} is invalid: it {reason}")]
    Calibration {
        /// The parameter or anchor field at fault (`period_ns`, `cpu_ns`, ...).
        field: &'static str,
        /// Its value.
        value: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A GPU timestamp that cannot be mapped onto the CPU clock.
    #[error("{0}")]
    TimestampConversion(ConversionError),
    /// A duration whose end sample was taken before its start sample
    /// ([`Calibration::duration`](crate::Calibration::duration)).
    #[error("timestamp sample {end} ({end_ns} ns) is before sample {start} ({start_ns} ns): it cannot end a duration that starts there")]
    EndBeforeStart {
        /// The start sample's index within the resolve.
        start: u64,
        /// The end sample's index within the resolve.
        end: u64,
        /// The start sample's time on the CPU clock.
        start_ns: u64,
        /// The end sample's time on the CPU clock.
        end_ns: u64,
    },
    /// Any other malformed argument, with a message naming it.
    #[error("{0}")]
    Argument(String),
}

/// The errors of gpu-counters, in Metal's three kinds
/// ([`Error::kind`]).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Error {
    /// The device ran out of memory; the message names what was being allocated.
    #[error("out of memory: {0}")]
    OutOfMemory(String),
    /// The request was malformed or the device cannot do it.
    #[error("invalid: {0}")]
    Invalid(#[from] InvalidInput),
    /// The driver or the library failed; the message names the call.
    #[error("internal error: {0}")]
    Internal(String),
    /// The device was lost (Vulkan's `VK_ERROR_DEVICE_LOST`: a hang, a
    /// fault, a reset or a removed GPU). The string names the call that saw
    /// it (`vkQueueSubmit2`, `vkWaitForFences`, ...). Nothing more can be submitted to the device; work already
    /// submitted may or may not have run, so samples not yet resolved are
    /// lost with it. Its [`kind`](Error::kind) is
    /// [`CounterErrorKind::Internal`]: Metal has no kind of its own for it.
    #[error("device lost (seen by {0})")]
    DeviceLost(String),
}

impl Error {
    /// Metal's error kind for this error.
    pub fn kind(&self) -> CounterErrorKind {
        match self {
            Error::OutOfMemory(_) => CounterErrorKind::OutOfMemory,
            Error::Invalid(_) => CounterErrorKind::Invalid,
            Error::Internal(_) | Error::DeviceLost(_) => CounterErrorKind::Internal,
        }
    }

    /// Whether this is [`Error::DeviceLost`]: the device can take no more
    /// work, and a new one must be opened.
    pub fn is_device_lost(&self) -> bool {
        matches!(self, Error::DeviceLost(_))
    }

    /// The details of an [`Error::Invalid`], if this is one.
    pub fn invalid(&self) -> Option<&InvalidInput> {
        match self {
            Error::Invalid(i) => Some(i),
            _ => None,
        }
    }
}

/// The result type of gpu-counters.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_lost_is_internal_and_names_the_call() {
        let e = Error::DeviceLost("vkWaitForFences".into());
        assert_eq!(e.kind(), CounterErrorKind::Internal);
        assert!(e.is_device_lost());
        assert!(e.invalid().is_none());
        assert_eq!(e.to_string(), "device lost (seen by vkWaitForFences)");
        assert!(!Error::Internal("vkWaitForFences failed".into()).is_device_lost());
    }

    #[test]
    fn an_unsupported_render_stage_names_the_stage_and_device() {
        let e = Error::from(InvalidInput::UnsupportedRenderStage {
            stage: RenderStage::Tile,
            device: "llvmpipe".into(),
        });
        assert_eq!(e.kind(), CounterErrorKind::Invalid);
        assert_eq!(
            e.to_string(),
            "invalid: device `llvmpipe` has no tile stage to write a timestamp after"
        );
    }
}
