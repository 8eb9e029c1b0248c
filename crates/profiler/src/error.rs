//! The profiler's errors.

use std::time::Duration;
use thiserror::Error;

/// What can go wrong in the profiler layer.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ProfilerError {
    /// The counter-sampling layer failed (bad input, out of memory, driver).
    #[error(transparent)]
    Counters(#[from] gpu_counters_hal::Error),
    /// A field of [`ProfilerOptions`](crate::ProfilerOptions) is out of range;
    /// the message names it.
    #[error("invalid profiler options: {0}")]
    InvalidOptions(String),
    /// [`WhenFull::Wait`](crate::WhenFull::Wait): the next ring slot was still
    /// held by an unfinished frame when the timeout ran out. Either that
    /// frame's command buffers were not submitted, or the GPU is slower than
    /// the timeout. No frame was begun.
    #[error(
        "ring of {ring_size} slot(s) is full: frame {busy_frame} still holds the next slot \
         after waiting {waited:?} (were its command buffers submitted?)"
    )]
    RingFull {
        /// The frame that holds the slot.
        busy_frame: u64,
        /// The ring's size.
        ring_size: usize,
        /// How long `begin_frame` waited.
        waited: Duration,
    },
    /// [`Profiler::wait_collect_all`](crate::Profiler::wait_collect_all) timed
    /// out; nothing was consumed, a later `collect` still returns every frame.
    #[error(
        "frame {frame} did not finish within {waited:?} (were its command buffers submitted?)"
    )]
    CollectTimeout {
        /// The oldest unfinished frame.
        frame: u64,
        /// How long it waited.
        waited: Duration,
    },
    /// A scope was ended on another command buffer than the one it began on
    /// (or on another recorder value wrapping the same one).
    #[error("scope `{label}` began on another command buffer than the one it is ended on")]
    WrongCommandBuffer {
        /// The scope's label.
        label: String,
    },
    /// A scope was ended while a scope nested in it on the same command
    /// buffer was still open. The outer scope is reported as not ended.
    #[error("scope `{label}` ended while the scope `{open}` nested in it is still open")]
    ScopeOrder {
        /// The scope that was ended.
        label: String,
        /// The innermost scope still open on that command buffer.
        open: String,
    },
    /// A frame was handed to another profiler than the one that began it.
    #[error("the frame was begun by another profiler")]
    ForeignFrame,
    /// The profiler abandoned the frame while it was still being recorded
    /// (see [`Profiler`](crate::Profiler)), and went on without it: a scope
    /// begun on it, or its end, comes too late. Its
    /// scopes are counted in its result's
    /// [`DropCounts::frame_abandoned`](crate::DropCounts::frame_abandoned);
    /// nothing recorded with it reaches another frame.
    #[error(
        "frame {frame} was abandoned while it was still being recorded: the profiler went on \
         without it after `frames_in_flight` later frames (its scopes are counted as \
         frame_abandoned)"
    )]
    FrameAbandoned {
        /// The frame's index.
        frame: u64,
    },
}

/// The result type of the profiler layer.
pub type Result<T, E = ProfilerError> = std::result::Result<T, E>;
