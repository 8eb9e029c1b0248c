//! Exporters for a [`Timeline`](gpu_counters_core::timeline::Timeline).
//!
//! - [`chrome`]: Chrome trace event JSON, which Perfetto UI and
//!   `chrome://tracing` open; one track per queue, statistics as counters.
//! - [`csv`]: one row per interval, for spreadsheets and scripts.
//! - [`svg`]: a timeline picture, frames stacked and aligned on their CPU
//!   submit time.
//!
//! All times in a timeline are CPU `CLOCK_MONOTONIC` nanoseconds; every
//! exporter keeps them (or states the offset it subtracted).

pub mod chrome;
pub mod csv;
pub mod svg;

pub use self::chrome::{to_chrome_trace_json, write_chrome_trace};
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
