//! What a finished frame resolves to, and its conversion to a timeline.

use crate::shared_str::SharedStr;
use gpu_counters_hal::timeline::{PassKind, Timeline, TimelineFrame, TimelineInterval};
use gpu_counters_hal::CounterResultStatistic;
#[cfg(feature = "serde")]
use serde::{Deserialize, Serialize};

/// Why scopes of a frame have no result. Every scope asked for is either in
/// [`FrameResult::scopes`] or counted here exactly once.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
pub struct DropCounts {
    /// The frame got no ring slot ([`WhenFull::Drop`](crate::WhenFull::Drop)
    /// with the ring full): its scopes recorded nothing.
    pub no_slot: u32,
    /// The frame's slot held [`ProfilerOptions::max_scopes_per_frame`](crate::ProfilerOptions::max_scopes_per_frame)
    /// scopes already (and the policy was not `Grow`, or growing failed).
    pub over_capacity: u32,
    /// The scope was begun but never ended (its [`Scope`](crate::Scope) was
    /// dropped, or `end` failed on a misuse).
    pub not_ended: u32,
    /// Recording a sample failed, the GPU reported a sample as failed, or
    /// the scope's timestamps could not be mapped onto the CPU clock (or end
    /// before they start).
    pub failed: u32,
    /// The scope was recorded into a command buffer that was dropped without
    /// ever being submitted: the GPU never ran it.
    #[cfg_attr(feature = "serde", serde(default))]
    pub abandoned: u32,
    /// The scope's frame was abandoned while it was still being recorded
    /// (never ended: leaked with `mem::forget`, or slower than the ring
    /// allows, see [`Profiler`](crate::Profiler)): begun in it by then, the
    /// scope has no result, whether it was ended or not.
    #[cfg_attr(feature = "serde", serde(default))]
    pub frame_abandoned: u32,
}

impl DropCounts {
    /// All dropped scopes.
    pub fn total(&self) -> u32 {
        self.no_slot
            + self.over_capacity
            + self.not_ended
            + self.failed
            + self.abandoned
            + self.frame_abandoned
    }
}

/// One ended scope, resolved.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
pub struct ScopeResult {
    /// The label given to [`Frame::scope`](crate::Frame::scope), shared with
    /// every other scope of the same label (reads as a `&str`).
    pub label: SharedStr,
    /// What kind of work the scope covers.
    pub kind: PassKind,
    /// The name of the thread that began the scope (its id where unnamed),
    /// shared with every other scope the thread began.
    pub thread: SharedStr,
    /// Nesting depth on its command buffer: 0 for outermost scopes.
    pub depth: u32,
    /// Index in [`FrameResult::scopes`] of the enclosing scope on the same
    /// command buffer. Parents come before their children.
    pub parent: Option<usize>,
    /// Calibrated start, `CLOCK_MONOTONIC` nanoseconds.
    pub start_ns: u64,
    /// Calibrated end, `CLOCK_MONOTONIC` nanoseconds.
    pub end_ns: u64,
    /// `end_ns - start_ns`.
    pub duration_ns: u64,
    /// Raw GPU ticks at the start.
    pub start_ticks: u64,
    /// Raw GPU ticks at the end.
    pub end_ticks: u64,
    /// The true start and end lie within `± error_bound_ns` of `start_ns`
    /// and `end_ns`.
    pub error_bound_ns: u64,
    /// What the GPU counted between start and end, where statistics were
    /// sampled: `None` without the profiler's `statistics` option, or where
    /// the scope's recorder could not sample them (wgpu counts statistics
    /// only inside passes: a scope over an encoder is timed only, its
    /// profiled passes are counted). Counters the device does not count hold
    /// [`COUNTER_ERROR_VALUE`](gpu_counters_hal::COUNTER_ERROR_VALUE), never 0.
    /// Boxed, so that a result without them stays small: collecting a frame
    /// writes, and dropping it reads, every result.
    pub statistics: Option<Box<CounterResultStatistic>>,
}

/// One finished frame: every scope ended in it, resolved, and the count of
/// those that were dropped.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
pub struct FrameResult {
    /// Frame number, counting every frame begun (dropped ones included).
    pub index: u64,
    /// The queue's name ([`ProfilerOptions::queue_name`](crate::ProfilerOptions::queue_name)).
    pub queue: String,
    /// CPU time just before the frame's submission: the earliest
    /// `cpu_submit_ns` of the submissions passed to
    /// [`Profiler::end_frame`](crate::Profiler::end_frame), `None` for none.
    pub cpu_submit_ns: Option<u64>,
    /// CPU time at which the profiler saw the frame finished (all its samples
    /// available); at or after the GPU finished it.
    pub cpu_complete_ns: u64,
    /// The frame's scopes in the order they began: parents before children.
    pub scopes: Vec<ScopeResult>,
    /// Scopes that have no result, `drops.total()`.
    pub dropped_scopes: u32,
    /// Why they have none.
    pub drops: DropCounts,
}

impl FrameResult {
    /// The frame as a timeline frame for the exporters. Without a CPU submit
    /// time, the earliest scope start (or the completion time) stands in.
    pub fn to_timeline_frame(&self) -> TimelineFrame {
        let cpu_submit_ns = self.cpu_submit_ns.unwrap_or_else(|| {
            self.scopes
                .iter()
                .map(|s| s.start_ns)
                .min()
                .unwrap_or(self.cpu_complete_ns)
        });
        TimelineFrame {
            index: self.index,
            cpu_submit_ns,
            cpu_complete_ns: self.cpu_complete_ns,
            intervals: self
                .scopes
                .iter()
                .map(|s| TimelineInterval {
                    label: s.label.to_string(),
                    kind: s.kind,
                    queue: self.queue.clone(),
                    depth: s.depth,
                    parent: s.parent,
                    thread: Some(s.thread.to_string()),
                    start_ns: s.start_ns,
                    end_ns: s.end_ns,
                    start_ticks: s.start_ticks,
                    end_ticks: s.end_ticks,
                    error_bound_ns: s.error_bound_ns,
                    statistics: s.statistics.as_deref().copied(),
                })
                .collect(),
        }
    }
}

impl From<&FrameResult> for TimelineFrame {
    fn from(frame: &FrameResult) -> Self {
        frame.to_timeline_frame()
    }
}

/// A timeline of `frames` on the device named `device`, for the exporters
/// ([`crate::export`]).
pub fn to_timeline(device: &str, frames: &[FrameResult]) -> Timeline {
    Timeline {
        device: device.to_string(),
        frames: frames.iter().map(FrameResult::to_timeline_frame).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Collecting a frame writes every scope's result and dropping it reads
    /// every one: the result stays within 96 bytes (labels and thread names
    /// one pointer each, statistics boxed). It was 192.
    #[test]
    fn a_scope_result_is_at_most_96_bytes() {
        assert_eq!(std::mem::size_of::<SharedStr>(), 8);
        assert!(std::mem::size_of::<ScopeResult>() <= 96);
    }
}
