//! Exporters for a [`Timeline`](gpu_counters_core::timeline::Timeline).
//!
//! - [`chrome`]: Chrome trace event JSON, which Perfetto UI and
//!   `chrome://tracing` open; one track per queue, statistics as counters.
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
pub mod svg;

pub use self::chrome::{
    to_chrome_trace_json, to_chrome_trace_json_multi, write_chrome_trace, write_chrome_trace_multi,
};
pub use self::csv::{write_csv, CSV_HEADER};
pub use self::svg::{render_svg, write_svg, SvgOptions};

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
