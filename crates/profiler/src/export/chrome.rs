//! Chrome trace event JSON, the format Perfetto UI and `chrome://tracing`
//! open.
//!
//! The trace is the object form
//! `{"traceEvents": [...], "displayTimeUnit": "ns", "metadata": {...}}`:
//!
//! - process `pid` 1 is the GPU, named `GPU <device>`;
//! - thread `tid` 1 is the track `CPU submit→complete`, with one complete
//!   (`"ph":"X"`) event per frame spanning its CPU submit and complete times;
//! - threads `tid` 2, 3, ... are the queues, in order of first appearance,
//!   named after the queue; every interval is a complete event on its queue's
//!   track, with `name` = label, `cat` = kind, and `args` holding the frame,
//!   raw ticks, nanosecond times, the error bound and the statistics;
//!   nested scopes nest by time;
//! - statistics are also counter (`"ph":"C"`) events named after the queue,
//!   one argument per statistic, so Perfetto shows one counter track per
//!   queue and statistic (`<queue> <statistic>`); the value steps to the
//!   innermost running interval's value at each boundary and back to 0 when
//!   no interval with statistics runs.
//!
//! Several devices ([`to_chrome_trace_json_multi`], a
//! [`MultiTimeline`]): one such process per device, `pid` `1 + id`, named
//! `GPU <id>: <device>`, each with its own CPU track and queue tracks, all
//! on the one CPU clock; the metadata lists the devices and their
//! calibration summaries.
//!
//! `ts` and `dur` are microseconds as floats (nanoseconds / 1000, keeping
//! sub-microsecond digits), on the absolute CPU `CLOCK_MONOTONIC` clock.
//! Events other than metadata are sorted by `ts`.
//!
//! # Memory
//!
//! [`write_chrome_trace`] never holds the trace as JSON: it keeps a 48-byte
//! sort key per event (one per frame, interval and counter step) and each
//! queue's counter steps (72 bytes a step), builds each event as it writes
//! it, and writes through a buffer of [`BUFFER_BYTES`](super::BUFFER_BYTES).
//! [`to_chrome_trace_json`] returns the whole trace as a JSON value.

use gpu_counters_hal::timeline::{MultiTimeline, Timeline, TimelineFrame, TimelineInterval};
use gpu_counters_hal::CounterResultStatistic;
use serde_json::{json, Map, Value};
use std::io::{self, Write};

/// The `pid` of the GPU process in the trace.
pub const GPU_PID: u64 = 1;
/// The `tid` of the `CPU submit→complete` track.
pub const CPU_TID: u64 = 1;
pub use super::CPU_TRACK_NAME;

/// Converts CPU nanoseconds to trace microseconds.
fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

/// The `tid` of queue number `i` (0-based, in order of first appearance).
fn queue_tid(i: usize) -> u64 {
    i as u64 + 2
}

/// Where a timed event comes from, so that it can be built when written.
#[derive(Debug, Clone, Copy)]
enum Source {
    /// Frame `frame` of device `device`: its CPU window.
    Frame { device: usize, frame: usize },
    /// Interval `interval` of that frame.
    Interval {
        device: usize,
        frame: usize,
        interval: usize,
    },
    /// Step `step` of queue `queue`'s statistics counters.
    Counter {
        device: usize,
        queue: usize,
        step: usize,
    },
}

/// A timed event's sort key and source.
#[derive(Debug, Clone, Copy)]
struct Timed {
    ts_ns: u64,
    /// Longer first at equal `ts`, so parents come before their children.
    dur_ns: u64,
    source: Source,
}

/// A queue's statistics counters: the statistics that get a track, and the
/// steps.
type Counters = (Vec<usize>, Vec<(u64, [u64; 8])>);

/// One device's process in the trace.
struct Process<'a> {
    timeline: &'a Timeline,
    pid: u64,
    name: String,
    sort_index: usize,
    queues: Vec<&'a str>,
    /// Per queue, in `queues` order.
    counters: Vec<Counters>,
}

/// A trace laid out for writing: its processes, and every timed event's
/// sort key in order. Events are built one at a time as they are written,
/// so the trace is never held in memory as JSON.
struct Trace<'a> {
    processes: Vec<Process<'a>>,
    timed: Vec<Timed>,
}

impl<'a> Trace<'a> {
    /// Lays out the processes `(timeline, pid, process name, sort index)`.
    fn new(processes: impl IntoIterator<Item = (&'a Timeline, u64, String, usize)>) -> Self {
        let mut timed = Vec::new();
        let processes: Vec<Process<'a>> = processes
            .into_iter()
            .enumerate()
            .map(|(device, (timeline, pid, name, sort_index))| {
                let queues = super::queues_in_order(timeline);
                for (frame, f) in timeline.frames.iter().enumerate() {
                    timed.push(Timed {
                        ts_ns: f.cpu_submit_ns,
                        dur_ns: f.cpu_complete_ns.saturating_sub(f.cpu_submit_ns),
                        source: Source::Frame { device, frame },
                    });
                    for (interval, i) in f.intervals.iter().enumerate() {
                        timed.push(Timed {
                            ts_ns: i.start_ns,
                            dur_ns: i.duration_ns(),
                            source: Source::Interval {
                                device,
                                frame,
                                interval,
                            },
                        });
                    }
                }
                let counters: Vec<Counters> =
                    queues.iter().map(|q| counters(timeline, q)).collect();
                for (queue, (_, steps)) in counters.iter().enumerate() {
                    for (step, &(t, _)) in steps.iter().enumerate() {
                        timed.push(Timed {
                            ts_ns: t,
                            dur_ns: 0,
                            source: Source::Counter {
                                device,
                                queue,
                                step,
                            },
                        });
                    }
                }
                Process {
                    timeline,
                    pid,
                    name,
                    sort_index,
                    queues,
                    counters,
                }
            })
            .collect();
        // Stable: at equal ts and duration the input order (parents first)
        // stays.
        timed.sort_by(|a, b| a.ts_ns.cmp(&b.ts_ns).then_with(|| b.dur_ns.cmp(&a.dur_ns)));
        Self { processes, timed }
    }

    /// Every event in order: each process's metadata events, then the timed
    /// events sorted by `ts`.
    fn events(&self) -> impl Iterator<Item = Value> + '_ {
        self.processes
            .iter()
            .flat_map(metadata_events)
            .chain(self.timed.iter().map(|t| self.event(t.source)))
    }

    /// The event of `source`.
    fn event(&self, source: Source) -> Value {
        match source {
            Source::Frame { device, frame } => {
                let p = &self.processes[device];
                frame_event(&p.timeline.frames[frame], p.pid)
            }
            Source::Interval {
                device,
                frame,
                interval,
            } => {
                let p = &self.processes[device];
                let f = &p.timeline.frames[frame];
                let i = &f.intervals[interval];
                let tid = p
                    .queues
                    .iter()
                    .position(|q| *q == i.queue)
                    .map_or(CPU_TID, queue_tid);
                interval_event(f.index, i, p.pid, tid)
            }
            Source::Counter {
                device,
                queue,
                step,
            } => {
                let p = &self.processes[device];
                let (names, steps) = &p.counters[queue];
                let (t, values) = steps[step];
                counter_event(p.queues[queue], names, t, &values, p.pid, queue_tid(queue))
            }
        }
    }

    /// The whole trace as one JSON value.
    fn to_value(&self, metadata: Value) -> Value {
        json!({
            "traceEvents": self.events().collect::<Vec<Value>>(),
            "displayTimeUnit": "ns",
            "metadata": metadata,
        })
    }

    /// Writes the trace as JSON, event by event, through a buffer of
    /// [`BUFFER_BYTES`](super::BUFFER_BYTES); flushes `w`.
    fn write<W: Write + ?Sized>(&self, metadata: &Value, w: &mut W) -> io::Result<()> {
        let mut out = super::buffered(w);
        out.write_all(b"{\"traceEvents\":[")?;
        for (n, event) in self.events().enumerate() {
            if n > 0 {
                out.write_all(b",")?;
            }
            serde_json::to_writer(&mut out, &event)?;
        }
        out.write_all(b"],\"displayTimeUnit\":\"ns\",\"metadata\":")?;
        serde_json::to_writer(&mut out, metadata)?;
        out.write_all(b"}")?;
        out.flush()
    }
}

/// The trace of one device (see the module documentation for its layout).
fn single(timeline: &Timeline) -> (Trace<'_>, Value) {
    let trace = Trace::new([(timeline, GPU_PID, format!("GPU {}", timeline.device), 0)]);
    let metadata = json!({
        "exporter": "gpu-counters",
        "device": timeline.device,
        "clock": "CLOCK_MONOTONIC",
        "ts_unit": "us",
        "ts_origin": "absolute CLOCK_MONOTONIC (no offset subtracted)",
        "frames": timeline.frames.len(),
        "start_ns": timeline.start_ns(),
        "end_ns": timeline.end_ns(),
    });
    (trace, metadata)
}

/// The trace of several devices ([`to_chrome_trace_json_multi`]).
fn multi(timeline: &MultiTimeline) -> (Trace<'_>, Value) {
    let label = |id: usize, dev: &gpu_counters_hal::timeline::DeviceTimeline| {
        format!("{id}: {}", dev.timeline.device)
    };
    let trace = Trace::new(timeline.devices.iter().enumerate().map(|(id, dev)| {
        (
            &dev.timeline,
            device_pid(id),
            format!("GPU {}", label(id, dev)),
            id,
        )
    }));
    let devices: Vec<Value> = timeline
        .devices
        .iter()
        .enumerate()
        .map(|(id, dev)| {
            json!({
                "id": id,
                "pid": device_pid(id),
                "name": dev.timeline.device,
                "label": label(id, dev),
                "frames": dev.timeline.frames.len(),
                "clock": dev.clock,
            })
        })
        .collect();
    let metadata = json!({
        "exporter": "gpu-counters",
        "devices": devices,
        "clock": "CLOCK_MONOTONIC",
        "ts_unit": "us",
        "ts_origin": "absolute CLOCK_MONOTONIC (no offset subtracted)",
        "frames": timeline.devices.iter().map(|d| d.timeline.frames.len()).sum::<usize>(),
        "start_ns": timeline.start_ns(),
        "end_ns": timeline.end_ns(),
    });
    (trace, metadata)
}

/// Builds the trace as a JSON value (see the module documentation for its
/// layout).
pub fn to_chrome_trace_json(timeline: &Timeline) -> Value {
    let (trace, metadata) = single(timeline);
    trace.to_value(metadata)
}

/// Builds the trace of several devices on the one CPU clock: device `id`
/// (its position in `timeline.devices`) is process `pid` `GPU_PID + id`,
/// named `GPU <id>: <device>` and sorted by id, each laid out as a
/// single-device trace's process is (its own `CPU submit→complete` track
/// and one track per queue, `tid`s from 1 within the process). The
/// metadata lists the devices (`devices`: id, pid, name, frames and the
/// calibration summary `clock`, where known).
pub fn to_chrome_trace_json_multi(timeline: &MultiTimeline) -> Value {
    let (trace, metadata) = multi(timeline);
    trace.to_value(metadata)
}

/// The `pid` of device `id` in a several-device trace.
pub fn device_pid(id: usize) -> u64 {
    GPU_PID + id as u64
}

/// A process's metadata events: its name and sort index, and its tracks'.
fn metadata_events(p: &Process<'_>) -> Vec<Value> {
    let pid = p.pid;
    let mut events = vec![
        json!({"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
               "args": {"name": p.name}}),
        json!({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0,
               "args": {"sort_index": p.sort_index}}),
        json!({"ph": "M", "name": "thread_name", "pid": pid, "tid": CPU_TID,
               "args": {"name": CPU_TRACK_NAME}}),
        json!({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": CPU_TID,
               "args": {"sort_index": 0}}),
    ];
    for (i, queue) in p.queues.iter().enumerate() {
        events.push(json!({"ph": "M", "name": "thread_name", "pid": pid,
                           "tid": queue_tid(i), "args": {"name": queue}}));
        events.push(json!({"ph": "M", "name": "thread_sort_index", "pid": pid,
                           "tid": queue_tid(i), "args": {"sort_index": i + 1}}));
    }
    events
}

/// The complete event of a frame's CPU window, on the CPU track.
fn frame_event(frame: &TimelineFrame, pid: u64) -> Value {
    let window = frame.cpu_complete_ns.saturating_sub(frame.cpu_submit_ns);
    let mut args = Map::new();
    args.insert("frame".into(), json!(frame.index));
    args.insert("cpu_submit_ns".into(), json!(frame.cpu_submit_ns));
    args.insert("cpu_complete_ns".into(), json!(frame.cpu_complete_ns));
    args.insert("duration_ns".into(), json!(window));
    args.insert("intervals".into(), json!(frame.intervals.len()));
    if let (Some(s), Some(e)) = (
        frame.intervals.iter().map(|i| i.start_ns).min(),
        frame.intervals.iter().map(|i| i.end_ns).max(),
    ) {
        args.insert("gpu_start_ns".into(), json!(s));
        args.insert("gpu_end_ns".into(), json!(e));
    }
    json!({"ph": "X", "name": format!("frame {}", frame.index), "cat": "cpu",
           "pid": pid, "tid": CPU_TID,
           "ts": us(frame.cpu_submit_ns), "dur": us(window), "args": args})
}

/// The complete event of one interval.
fn interval_event(frame: u64, interval: &TimelineInterval, pid: u64, tid: u64) -> Value {
    let mut args = Map::new();
    args.insert("frame".into(), json!(frame));
    args.insert("queue".into(), json!(interval.queue));
    args.insert("depth".into(), json!(interval.depth));
    args.insert("start_ticks".into(), json!(interval.start_ticks));
    args.insert("end_ticks".into(), json!(interval.end_ticks));
    args.insert("error_bound_ns".into(), json!(interval.error_bound_ns));
    args.insert("duration_ns".into(), json!(interval.duration_ns()));
    args.insert("start_ns".into(), json!(interval.start_ns));
    args.insert("end_ns".into(), json!(interval.end_ns));
    if let Some(thread) = &interval.thread {
        args.insert("thread".into(), json!(thread));
    }
    if let Some(stats) = &interval.statistics {
        for (name, value) in stats.named() {
            args.insert(name.into(), json!(value));
        }
    }
    json!({
        "ph": "X",
        "name": interval.label,
        "cat": interval.kind.name(),
        "pid": pid,
        "tid": tid,
        "ts": us(interval.start_ns),
        "dur": us(interval.duration_ns()),
        "args": args,
    })
}

/// The statistics counters of one queue: at every start or end of an
/// interval with statistics, the values of the innermost interval still
/// running (deepest, then latest started), or 0 when none is. Only
/// statistics that are not 0 somewhere on the queue get a track (the
/// complete events' args still carry every statistic); no track, no steps.
fn counters(timeline: &Timeline, queue: &str) -> Counters {
    let intervals: Vec<(&TimelineInterval, CounterResultStatistic)> = timeline
        .frames
        .iter()
        .flat_map(|f| f.intervals.iter())
        .filter(|i| i.queue == queue)
        .filter_map(|i| i.statistics.map(|s| (i, s)))
        .collect();
    let names: Vec<usize> = (0..CounterResultStatistic::FIELDS)
        .filter(|&k| intervals.iter().any(|(_, s)| s.to_array()[k] != 0))
        .collect();
    if names.is_empty() {
        return (names, Vec::new());
    }
    let steps = super::statistic_steps(&intervals);
    (names, steps)
}

/// The counter event of one step of a queue's statistics.
fn counter_event(
    queue: &str,
    names: &[usize],
    t: u64,
    values: &[u64; 8],
    pid: u64,
    tid: u64,
) -> Value {
    let named = CounterResultStatistic::default().named();
    let mut args = Map::new();
    for &f in names {
        args.insert(named[f].0.into(), json!(values[f]));
    }
    json!({"ph": "C", "name": queue, "cat": "statistics", "pid": pid,
           "tid": tid, "ts": us(t), "args": args})
}

/// Writes the trace as JSON (see the module documentation for its layout),
/// event by event. Buffers internally
/// ([`BUFFER_BYTES`](super::BUFFER_BYTES)), so `w` can be a `File` as it
/// is; flushes `w`. A failed write is returned as `w`'s error, and what
/// reached `w` is a prefix of the trace.
pub fn write_chrome_trace<W: Write + ?Sized>(timeline: &Timeline, w: &mut W) -> io::Result<()> {
    let (trace, metadata) = single(timeline);
    trace.write(&metadata, w)
}

/// Writes the trace of several devices as JSON
/// ([`to_chrome_trace_json_multi`]), as [`write_chrome_trace`] writes one.
pub fn write_chrome_trace_multi<W: Write + ?Sized>(
    timeline: &MultiTimeline,
    w: &mut W,
) -> io::Result<()> {
    let (trace, metadata) = multi(timeline);
    trace.write(&metadata, w)
}
