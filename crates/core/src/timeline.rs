//! The timeline of labelled GPU intervals that exporters draw.
//!
//! A [`Timeline`] is a list of frames; each frame holds the CPU window it was
//! submitted and completed in and the GPU intervals (passes or scopes) it ran,
//! with calibrated `CLOCK_MONOTONIC` times, raw ticks and statistics. Nested
//! scopes point at their parent.

use crate::CounterResultStatistic;
use serde::{Deserialize, Serialize};

/// What kind of GPU work an interval covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PassKind {
    /// A compute pass or dispatches.
    Compute,
    /// A render pass.
    Render,
    /// A transfer (blit) pass.
    Blit,
    /// A user scope spanning other work.
    Scope,
}

impl PassKind {
    /// The kind's name: `compute`, `render`, `blit` or `scope`.
    pub fn name(self) -> &'static str {
        match self {
            PassKind::Compute => "compute",
            PassKind::Render => "render",
            PassKind::Blit => "blit",
            PassKind::Scope => "scope",
        }
    }
}

/// One labelled GPU interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TimelineInterval {
    /// The user's label.
    pub label: String,
    /// What kind of work it covers.
    pub kind: PassKind,
    /// The queue it ran on (one trace track per queue).
    pub queue: String,
    /// Nesting depth: 0 for top-level intervals.
    pub depth: u32,
    /// Index of the enclosing interval in the same frame.
    pub parent: Option<usize>,
    /// The CPU thread that recorded it, if known.
    pub thread: Option<String>,
    /// Calibrated start, `CLOCK_MONOTONIC` nanoseconds.
    pub start_ns: u64,
    /// Calibrated end, `CLOCK_MONOTONIC` nanoseconds.
    pub end_ns: u64,
    /// Raw GPU ticks at the start.
    pub start_ticks: u64,
    /// Raw GPU ticks at the end.
    pub end_ticks: u64,
    /// Bound on the calibration error of `start_ns` and `end_ns`.
    pub error_bound_ns: u64,
    /// What the GPU counted in the interval, where statistics were sampled.
    pub statistics: Option<CounterResultStatistic>,
}

impl TimelineInterval {
    /// `end_ns - start_ns`.
    pub fn duration_ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.start_ns)
    }
}

/// One frame: a submission and the intervals it ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TimelineFrame {
    /// Frame number.
    pub index: u64,
    /// CPU time just before the frame's submission.
    pub cpu_submit_ns: u64,
    /// CPU time just after the frame was seen complete.
    pub cpu_complete_ns: u64,
    /// The frame's intervals, parents before children.
    pub intervals: Vec<TimelineInterval>,
}

/// Frames of GPU intervals on one device.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Timeline {
    /// The device's name.
    pub device: String,
    /// The frames, oldest first.
    pub frames: Vec<TimelineFrame>,
}

impl Timeline {
    /// Earliest start over all frames (the CPU submit time if earlier).
    pub fn start_ns(&self) -> Option<u64> {
        self.frames
            .iter()
            .flat_map(|f| {
                std::iter::once(f.cpu_submit_ns).chain(f.intervals.iter().map(|i| i.start_ns))
            })
            .min()
    }

    /// Latest end over all frames.
    pub fn end_ns(&self) -> Option<u64> {
        self.frames
            .iter()
            .flat_map(|f| {
                std::iter::once(f.cpu_complete_ns).chain(f.intervals.iter().map(|i| i.end_ns))
            })
            .max()
    }
}
