//! Exporters for a [`Timeline`](gpu_counters_hal::timeline::Timeline).
//!
//! - `chrome` (feature `chrome`, on by default here; `gpu-counters` asks
//!   for it through its own `chrome`): Chrome trace event JSON, which
//!   Perfetto UI and `chrome://tracing` open; one track per queue,
//!   statistics as counters.
//! - [`perfetto`] (feature `perfetto`, off by default; on in the command line): Perfetto's native
//!   protobuf trace, written frame by frame in bounded memory; GPU tracks
//!   per device and queue, statistics as counter tracks. It writes through
//!   [`perfetto_gpu`]'s streaming writer, which `gpu-counters record`
//!   writes its traces with too.
//! - [`tracy`]: what to hand to the Tracy profiler for each frame, as a
//!   sequence of calls; with the feature `tracy`, a sink that streams a
//!   profiler's frames into a running Tracy client.
//! - `csv` (feature `csv`, as `chrome`): one row per interval, for
//!   spreadsheets and scripts.
//! - [`svg`]: a timeline picture, frames stacked and aligned on their CPU
//!   submit time.
//!
//! Several devices ([`MultiTimeline`](gpu_counters_hal::timeline::MultiTimeline)):
//! [`chrome::to_chrome_trace_json_multi`] writes one process per device,
//! each with a track per queue; CSV and SVG draw
//! [`MultiTimeline::flattened`](gpu_counters_hal::timeline::MultiTimeline::flattened),
//! where each queue is named after its device. A Perfetto export keyed by
//! device name writes each device's frames under
//! [`MultiTimeline::device_label`](gpu_counters_hal::timeline::MultiTimeline::device_label)
//! (unique even for two logical devices of one GPU).
//!
//! All times in a timeline are CPU `CLOCK_MONOTONIC` nanoseconds; every
//! exporter keeps them (or states the offset it subtracted).
//!
//! # Writers, failures and memory
//!
//! - **Buffered**: every `write_*` function and `perfetto::PerfettoWriter`
//!   buffer internally ([`BUFFER_BYTES`]), so hand them the `File` or
//!   socket itself: a trace costs about one `write` call per
//!   [`BUFFER_BYTES`], as through a `BufWriter`. Each flushes the writer
//!   before it returns (`PerfettoWriter` in its `finish`).
//! - **Failed writes**: a write that fails (a full disk, a closed pipe) is
//!   returned as the writer's own [`io::Error`] (inside [`ExportError::Io`]
//!   or `perfetto::PerfettoError::Io` where the function has other errors),
//!   never a panic; what reached the writer is a prefix of the export, and
//!   nothing more is written to it after the failure.
//! - **Limits**: the one option with a size, [`SvgOptions::width`] (and the
//!   SVG title's length), has a stated limit; past it the export is an
//!   [`ExportError::OverLimit`] naming the option, and nothing is written.
//!   Labels, queue and device names may be any length: the file formats
//!   hold them whole; the Tracy planner cuts the names it hands to Tracy
//!   to [`tracy::MAX_NAME_BYTES`] and counts each cut.
//! - **Memory**: no exporter's memory grows with an option's value. Each
//!   keeps, beyond the timeline it is given, a few words per interval (the
//!   Chrome export's sort keys, the SVG layout) and one output buffer; the
//!   streaming writers keep per-track state and bounded name tables
//!   between frames (see each module).

#[cfg(feature = "chrome")]
pub mod chrome;
#[cfg(feature = "csv")]
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

#[cfg(feature = "chrome")]
pub use self::chrome::{
    to_chrome_trace_json, to_chrome_trace_json_multi, write_chrome_trace, write_chrome_trace_multi,
};
#[cfg(feature = "csv")]
pub use self::csv::{write_csv, CSV_HEADER};
#[cfg(feature = "perfetto")]
pub use self::perfetto::{write_perfetto, PerfettoError, PerfettoWriter};
pub use self::svg::{render_svg, write_svg, SvgOptions};

#[cfg(any(feature = "chrome", feature = "perfetto"))]
use gpu_counters_hal::timeline::TimelineInterval;
#[cfg(any(feature = "chrome", feature = "perfetto"))]
use gpu_counters_hal::CounterResultStatistic;
#[cfg(any(feature = "chrome", feature = "perfetto"))]
use std::collections::BTreeSet;
use std::io::{self, Write};
use thiserror::Error;

/// Bytes each exporter buffers before it writes to its writer (8 KiB, a
/// `BufWriter`'s default).
pub const BUFFER_BYTES: usize = 8 * 1024;

/// The name of the track that shows each frame's CPU window (Chrome and
/// Perfetto traces).
pub const CPU_TRACK_NAME: &str = "CPU submit→complete";

/// What can go wrong in an export with options ([`svg`]).
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ExportError {
    /// An option is over its stated limit; nothing was written.
    #[error("{option} {value}: must be at most {max} {unit}")]
    OverLimit {
        /// The option, as `Type::field`.
        option: &'static str,
        /// Its value (a length for a text option).
        value: u64,
        /// Its limit.
        max: u64,
        /// The unit of both: `pixels`, `bytes`.
        unit: &'static str,
    },
    /// Writing to the output failed: the writer's own error. What reached
    /// the writer is a prefix of the export.
    #[error(transparent)]
    Io(#[from] io::Error),
}

impl From<ExportError> for io::Error {
    /// The writer's error as it was; an option over its limit as
    /// [`io::ErrorKind::InvalidInput`].
    fn from(e: ExportError) -> Self {
        match e {
            ExportError::Io(e) => e,
            e @ ExportError::OverLimit { .. } => io::Error::new(io::ErrorKind::InvalidInput, e),
        }
    }
}

/// Fails with [`ExportError::OverLimit`] when `value` is over `max`.
pub(crate) fn at_most(
    option: &'static str,
    value: u64,
    max: u64,
    unit: &'static str,
) -> Result<(), ExportError> {
    if value > max {
        return Err(ExportError::OverLimit {
            option,
            value,
            max,
            unit,
        });
    }
    Ok(())
}

/// A writer that stops at its first failure: once a write or flush of the
/// inner writer has failed (other than [`io::ErrorKind::Interrupted`],
/// which callers retry), every later call fails with an error of the same
/// kind without reaching the inner writer. Buffers that retry on drop (a
/// `BufWriter`'s, the `csv` crate's) then cannot write again what was
/// written partly before the failure, so what reaches the writer is
/// always a prefix of the export.
#[derive(Debug)]
pub(crate) struct Fused<W> {
    inner: W,
    failed: Option<(io::ErrorKind, String)>,
}

impl<W: Write> Fused<W> {
    pub(crate) fn new(inner: W) -> Self {
        Self {
            inner,
            failed: None,
        }
    }

    /// The inner writer.
    #[cfg(feature = "perfetto")]
    pub(crate) fn into_inner(self) -> W {
        self.inner
    }

    fn check(&self) -> io::Result<()> {
        match &self.failed {
            None => Ok(()),
            Some((kind, what)) => Err(io::Error::new(
                *kind,
                format!("an earlier write to this output failed: {what}"),
            )),
        }
    }

    fn note<T>(&mut self, r: io::Result<T>) -> io::Result<T> {
        if let Err(e) = &r {
            if e.kind() != io::ErrorKind::Interrupted {
                self.failed = Some((e.kind(), e.to_string()));
            }
        }
        r
    }
}

impl<W: Write> Write for Fused<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.check()?;
        let r = self.inner.write(buf);
        self.note(r)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.check()?;
        let r = self.inner.flush();
        self.note(r)
    }
}

/// `w`, stopping at its first failure ([`Fused`]), behind a buffer of
/// [`BUFFER_BYTES`].
pub(crate) fn buffered<W: Write>(w: W) -> io::BufWriter<Fused<W>> {
    io::BufWriter::with_capacity(BUFFER_BYTES, Fused::new(w))
}

/// Queue names in order of first appearance over all frames.
pub(crate) fn queues_in_order(timeline: &gpu_counters_hal::timeline::Timeline) -> Vec<&str> {
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
/// empty interval shows nothing. (The Chrome and Perfetto exports.)
#[cfg(any(feature = "chrome", feature = "perfetto"))]
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
