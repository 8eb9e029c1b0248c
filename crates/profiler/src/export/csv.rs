//! CSV: one row per interval, in frame order and, within a frame, in the
//! timeline's order (parents before children).
//!
//! Columns are [`CSV_HEADER`]: frame, label, kind, queue, depth, calibrated
//! `CLOCK_MONOTONIC` start, end and duration in nanoseconds, raw GPU ticks,
//! the calibration error bound, then the eight statistics by snake-case name
//! (empty cells where the interval has no statistics). Rows end in `\n`;
//! fields holding commas, quotes or line breaks are quoted as RFC 4180 says.
//!
//! [`write_csv`] writes row by row through the `csv` crate's buffer of 8
//! KiB (about one `write` call per 8 KiB), keeping one row in memory.

use gpu_counters_hal::timeline::Timeline;
use std::io::{self, Write};

/// The header row, in column order.
pub const CSV_HEADER: [&str; 19] = [
    "frame",
    "label",
    "kind",
    "queue",
    "depth",
    "start_ns",
    "end_ns",
    "duration_ns",
    "start_ticks",
    "end_ticks",
    "error_bound_ns",
    "tessellation_input_patches",
    "vertex_invocations",
    "post_tessellation_vertex_invocations",
    "clipper_invocations",
    "clipper_primitives_out",
    "fragment_invocations",
    "fragments_passed",
    "compute_kernel_invocations",
];

/// Writes the timeline as CSV: the header, then one row per interval.
/// Buffers internally (8 KiB), so `w` can be a `File` as it is; flushes
/// `w`. A failed write is returned as `w`'s error, and what reached `w` is a
/// prefix of the CSV.
pub fn write_csv<W: Write + ?Sized>(timeline: &Timeline, w: &mut W) -> io::Result<()> {
    // The csv crate's buffer writes itself again on drop after a failed
    // write: `Fused` stops that at the first failure.
    let mut out = ::csv::WriterBuilder::new()
        .buffer_capacity(super::BUFFER_BYTES)
        .from_writer(super::Fused::new(w));
    out.write_record(CSV_HEADER)?;
    for frame in &timeline.frames {
        for i in &frame.intervals {
            let mut row: Vec<String> = vec![
                frame.index.to_string(),
                i.label.clone(),
                i.kind.name().to_string(),
                i.queue.clone(),
                i.depth.to_string(),
                i.start_ns.to_string(),
                i.end_ns.to_string(),
                i.duration_ns().to_string(),
                i.start_ticks.to_string(),
                i.end_ticks.to_string(),
                i.error_bound_ns.to_string(),
            ];
            match &i.statistics {
                Some(stats) => row.extend(stats.to_array().iter().map(u64::to_string)),
                None => row.extend((0..8).map(|_| String::new())),
            }
            out.write_record(&row)?;
        }
    }
    out.flush()?;
    Ok(())
}
