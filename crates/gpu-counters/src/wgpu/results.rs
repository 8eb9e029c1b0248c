//! A collected frame of the drop-in profiler, and its conversion to
//! wgpu-profiler's shape (label, time range, nested children).

use gpu_counters_profiler::{FrameResult, ScopeResult};
use std::ops::Range;

/// One frame of [`Profiler`](super::Profiler), collected: every scope that
/// ran, on the CPU clock with its bound, and what happened to the others.
///
/// Every scope begun in the frame is either in [`ProfiledFrame::scopes`] or
/// counted once in `result.drops`: `abandoned` for scopes whose encoder did
/// not run before the frame's read-back ([`Profiler::end_frame`](super::Profiler::end_frame)),
/// `not_ended` for scopes still open when the frame ended, `over_capacity`
/// past [`ProfilerSettings::max_scopes_per_frame`](super::ProfilerSettings::max_scopes_per_frame),
/// `failed` for scopes without timestamps (a scope over an encoder on a
/// device without `TIMESTAMP_QUERY_INSIDE_ENCODERS`) or whose timestamps
/// could not be mapped onto the CPU clock.
#[derive(Debug, Clone, PartialEq)]
pub struct ProfiledFrame {
    /// The frame in gpu-counters' own result type (for the exporters:
    /// [`FrameResult::to_timeline_frame`]).
    pub result: FrameResult,
    /// Root scopes begun in the frame (scopes begun on an encoder rather
    /// than inside another scope).
    pub root_scopes: u32,
    /// Root scopes whose encoder did not run before the frame's read-back:
    /// submitted after [`Profiler::end_frame`](super::Profiler::end_frame),
    /// or never. Their scopes are counted in `result.drops.abandoned`, never
    /// reported with a zero or an earlier frame's value.
    pub root_scopes_not_run: u32,
    /// Indices into [`ProfiledFrame::scopes`] of scopes ended by a drop
    /// while their thread was panicking.
    pub ended_by_panic: Vec<usize>,
    /// [`cpu_monotonic_ns`](gpu_counters_hal::cpu_monotonic_ns) when
    /// `end_frame` submitted the frame's read-back: every scope that ran
    /// was submitted before then.
    pub cpu_end_frame_ns: u64,
}

/// A scope in wgpu-profiler's shape: label, time range and nested scopes.
/// Times are seconds on the CPU's monotonic clock
/// ([`cpu_monotonic_ns`](gpu_counters_hal::cpu_monotonic_ns) / 1e9), each
/// within `± error_bound` of the true time.
#[derive(Debug, Clone, PartialEq)]
pub struct TimerQueryResult {
    /// The scope's label.
    pub label: String,
    /// Start and end, in seconds.
    pub time: Range<f64>,
    /// The bound of both ends, in seconds.
    pub error_bound: f64,
    /// Scopes nested in it, in the order they began.
    pub nested_queries: Vec<TimerQueryResult>,
}

impl ProfiledFrame {
    /// The frame's scopes that ran, parents before children.
    pub fn scopes(&self) -> &[ScopeResult] {
        &self.result.scopes
    }

    /// The frame number (every frame counts, empty ones included).
    pub fn index(&self) -> u64 {
        self.result.index
    }

    /// Whether no scope was begun in the frame, or none of them ran before
    /// the frame's read-back (the application submitted nothing profiled).
    pub fn nothing_ran(&self) -> bool {
        self.result.scopes.is_empty() && self.root_scopes == self.root_scopes_not_run
    }

    /// The scopes as trees of [`TimerQueryResult`], wgpu-profiler's shape.
    pub fn to_timer_queries(&self) -> Vec<TimerQueryResult> {
        let scopes = &self.result.scopes;
        let mut children: Vec<Vec<usize>> = vec![Vec::new(); scopes.len()];
        let mut roots = Vec::new();
        for (i, s) in scopes.iter().enumerate() {
            match s.parent {
                Some(p) => children[p].push(i),
                None => roots.push(i),
            }
        }
        fn build(i: usize, scopes: &[ScopeResult], children: &[Vec<usize>]) -> TimerQueryResult {
            let s = &scopes[i];
            TimerQueryResult {
                label: s.label.to_string(),
                time: s.start_ns as f64 / 1e9..s.end_ns as f64 / 1e9,
                error_bound: s.error_bound_ns as f64 / 1e9,
                nested_queries: children[i]
                    .iter()
                    .map(|&c| build(c, scopes, children))
                    .collect(),
            }
        }
        roots
            .into_iter()
            .map(|r| build(r, scopes, &children))
            .collect()
    }
}
