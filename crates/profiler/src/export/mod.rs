//! Exporters for a [`Timeline`](gpu_counters_core::timeline::Timeline).
//!
//! - [`chrome`]: Chrome trace event JSON, which Perfetto UI and
//!   `chrome://tracing` open; one track per queue, statistics as counters.
//! - [`perfetto`] (feature `perfetto`, on by default): Perfetto's native
//!   protobuf trace, written frame by frame in bounded memory; GPU tracks
//!   per device and queue, statistics as counter tracks.
//! - [`tracy`]: what to hand to the Tracy profiler for each frame, as a
//!   sequence of calls; with the feature `tracy`, a sink that streams a
//!   profiler's frames into a running Tracy client.
//! - [`csv`]: one row per interval, for spreadsheets and scripts.
//! - [`svg`]: a timeline picture, frames stacked and aligned on their CPU
//!   submit time.
//!
//! Several devices ([`MultiTimeline`](gpu_counters_core::timeline::MultiTimeline)):
//! [`chrome::to_chrome_trace_json_multi`] writes one process per device,
//! each with a track per queue; CSV and SVG draw
//! [`MultiTimeline::flattened`](gpu_counters_core::timeline::MultiTimeline::flattened),
//! where each queue is named after its device. A Perfetto export keyed by
//! device name writes each device's frames under
//! [`MultiTimeline::device_label`](gpu_counters_core::timeline::MultiTimeline::device_label)
//! (unique even for two logical devices of one GPU).
//!
//! All times in a timeline are CPU `CLOCK_MONOTONIC` nanoseconds; every
//! exporter keeps them (or states the offset it subtracted).

pub mod chrome;
pub mod csv;
pub(crate) mod lanes;
#[cfg(feature = "perfetto")]
pub mod perfetto;
#[cfg(feature = "perfetto")]
pub mod perfetto_gpu;
pub mod svg;
pub mod tracy;
#[cfg(feature = "tracy")]
#[allow(unsafe_code)]
pub mod tracy_client;

pub use self::chrome::{
    to_chrome_trace_json, to_chrome_trace_json_multi, write_chrome_trace, write_chrome_trace_multi,
};
pub use self::csv::{write_csv, CSV_HEADER};
#[cfg(feature = "perfetto")]
pub use self::perfetto::{write_perfetto, PerfettoError, PerfettoWriter};
pub use self::svg::{render_svg, write_svg, SvgOptions};

use gpu_counters_core::timeline::TimelineInterval;
use gpu_counters_core::CounterResultStatistic;
use std::collections::BTreeSet;

/// Queue names in order of first appearance over all frames.
pub(crate) fn queues_in_order(timeline: &gpu_counters_core::timeline::Timeline) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    for frame in &timeline.frames {
        for interval in &frame.intervals {
            if !out.contains(&interval.queue.as_str()) {
                out.push(&interval.queue);
            }
        }
    }
    out
}

/// The steps of a queue's statistic counters over `intervals` (those with
/// statistics): at every distinct start or end time, the values of the
/// innermost interval still running (deepest, then latest started), or all 0
/// when none is; a step that repeats the previous values is left out.
/// Back-to-back intervals step straight from one value to the next, and an
/// empty interval shows nothing.
pub(crate) fn statistic_steps(
    intervals: &[(&TimelineInterval, CounterResultStatistic)],
) -> Vec<(u64, [u64; 8])> {
    // Boundaries: (time, 0 for a start or 1 for an end, interval index).
    let mut boundaries: Vec<(u64, u8, usize)> = Vec::with_capacity(intervals.len() * 2);
    for (n, (i, _)) in intervals.iter().enumerate() {
        boundaries.push((i.start_ns, 0, n));
        boundaries.push((i.end_ns.max(i.start_ns), 1, n));
    }
    boundaries.sort_unstable();

    // Active intervals keyed so that the last element is the innermost.
    let mut active: BTreeSet<(u32, u64, usize)> = BTreeSet::new();
    let mut last: Option<[u64; 8]> = None;
    let mut out = Vec::new();
    let mut k = 0;
    while k < boundaries.len() {
        let t = boundaries[k].0;
        while k < boundaries.len() && boundaries[k].0 == t {
            let (_, end, n) = boundaries[k];
            let key = (intervals[n].0.depth, intervals[n].0.start_ns, n);
            if end == 0 {
                active.insert(key);
            } else {
                active.remove(&key);
            }
            k += 1;
        }
        let values = active
            .last()
            .map_or([0u64; 8], |&(_, _, n)| intervals[n].1.to_array());
        if last == Some(values) {
            continue;
        }
        last = Some(values);
        out.push((t, values));
    }
    out
}
