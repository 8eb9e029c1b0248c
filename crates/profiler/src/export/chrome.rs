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

use gpu_counters_core::timeline::{MultiTimeline, Timeline, TimelineInterval};
use gpu_counters_core::CounterResultStatistic;
use serde_json::{json, Map, Value};
use std::io::{self, Write};

/// The `pid` of the GPU process in the trace.
pub const GPU_PID: u64 = 1;
/// The `tid` of the `CPU submit→complete` track.
pub const CPU_TID: u64 = 1;
/// The name of the track that shows each frame's CPU window.
pub const CPU_TRACK_NAME: &str = "CPU submit→complete";

/// Converts CPU nanoseconds to trace microseconds.
fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

/// The `tid` of queue number `i` (0-based, in order of first appearance).
fn queue_tid(i: usize) -> u64 {
    i as u64 + 2
}

/// An event with the sort key it is ordered by.
struct Timed {
    ts_ns: u64,
    /// Longer first at equal `ts`, so parents come before their children.
    dur_ns: u64,
    event: Value,
}

/// Builds the trace as a JSON value (see the module documentation for its
/// layout).
pub fn to_chrome_trace_json(timeline: &Timeline) -> Value {
    let mut events = Vec::new();
    let mut timed = Vec::new();
    device_events(
        timeline,
        GPU_PID,
        &format!("GPU {}", timeline.device),
        0,
        &mut events,
        &mut timed,
    );
    json!({
        "traceEvents": sorted(events, timed),
        "displayTimeUnit": "ns",
        "metadata": {
            "exporter": "gpu-counters",
            "device": timeline.device,
            "clock": "CLOCK_MONOTONIC",
            "ts_unit": "us",
            "ts_origin": "absolute CLOCK_MONOTONIC (no offset subtracted)",
            "frames": timeline.frames.len(),
            "start_ns": timeline.start_ns(),
            "end_ns": timeline.end_ns(),
        }
    })
}

/// Builds the trace of several devices on the one CPU clock: device `id`
/// (its position in `timeline.devices`) is process `pid` `GPU_PID + id`,
/// named `GPU <id>: <device>` and sorted by id, each laid out as a
/// single-device trace's process is (its own `CPU submit→complete` track
/// and one track per queue, `tid`s from 1 within the process). The
/// metadata lists the devices (`devices`: id, pid, name, frames and the
/// calibration summary `clock`, where known).
pub fn to_chrome_trace_json_multi(timeline: &MultiTimeline) -> Value {
    let mut events = Vec::new();
    let mut timed = Vec::new();
    let mut devices = Vec::new();
    for (id, dev) in timeline.devices.iter().enumerate() {
        let pid = device_pid(id);
        let label = format!("{id}: {}", dev.timeline.device);
        device_events(
            &dev.timeline,
            pid,
            &format!("GPU {label}"),
            id,
            &mut events,
            &mut timed,
        );
        devices.push(json!({
            "id": id,
            "pid": pid,
            "name": dev.timeline.device,
            "label": label,
            "frames": dev.timeline.frames.len(),
            "clock": dev.clock,
        }));
    }
    json!({
        "traceEvents": sorted(events, timed),
        "displayTimeUnit": "ns",
        "metadata": {
            "exporter": "gpu-counters",
            "devices": devices,
            "clock": "CLOCK_MONOTONIC",
            "ts_unit": "us",
            "ts_origin": "absolute CLOCK_MONOTONIC (no offset subtracted)",
            "frames": timeline.devices.iter().map(|d| d.timeline.frames.len()).sum::<usize>(),
            "start_ns": timeline.start_ns(),
            "end_ns": timeline.end_ns(),
        }
    })
}

/// The `pid` of device `id` in a several-device trace.
pub fn device_pid(id: usize) -> u64 {
    GPU_PID + id as u64
}

/// Metadata events first, then the timed events sorted by `ts`.
fn sorted(mut events: Vec<Value>, mut timed: Vec<Timed>) -> Vec<Value> {
    // Stable: at equal ts and duration the input order (parents first) stays.
    timed.sort_by(|a, b| a.ts_ns.cmp(&b.ts_ns).then_with(|| b.dur_ns.cmp(&a.dur_ns)));
    events.extend(timed.into_iter().map(|t| t.event));
    events
}

/// One device's process: its metadata into `events`, its frames, intervals
/// and counters into `timed`.
fn device_events(
    timeline: &Timeline,
    pid: u64,
    process_name: &str,
    sort_index: usize,
    events: &mut Vec<Value>,
    timed: &mut Vec<Timed>,
) {
    let queues = super::queues_in_order(timeline);
    let tid_of = |queue: &str| {
        queues
            .iter()
            .position(|q| *q == queue)
            .map_or(CPU_TID, queue_tid)
    };

    events.extend([
        json!({"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
               "args": {"name": process_name}}),
        json!({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0,
               "args": {"sort_index": sort_index}}),
        json!({"ph": "M", "name": "thread_name", "pid": pid, "tid": CPU_TID,
               "args": {"name": CPU_TRACK_NAME}}),
        json!({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": CPU_TID,
               "args": {"sort_index": 0}}),
    ]);
    for (i, queue) in queues.iter().enumerate() {
        events.push(json!({"ph": "M", "name": "thread_name", "pid": pid,
                           "tid": queue_tid(i), "args": {"name": queue}}));
        events.push(json!({"ph": "M", "name": "thread_sort_index", "pid": pid,
                           "tid": queue_tid(i), "args": {"sort_index": i + 1}}));
    }

    for frame in &timeline.frames {
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
        timed.push(Timed {
            ts_ns: frame.cpu_submit_ns,
            dur_ns: window,
            event: json!({"ph": "X", "name": format!("frame {}", frame.index), "cat": "cpu",
                          "pid": pid, "tid": CPU_TID,
                          "ts": us(frame.cpu_submit_ns), "dur": us(window), "args": args}),
        });

        for interval in &frame.intervals {
            timed.push(Timed {
                ts_ns: interval.start_ns,
                dur_ns: interval.duration_ns(),
                event: interval_event(frame.index, interval, pid, tid_of(&interval.queue)),
            });
        }
    }

    for (i, queue) in queues.iter().enumerate() {
        counter_events(timeline, queue, pid, queue_tid(i), timed);
    }
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

/// Counter events for the statistics on one queue: at every start or end of
/// an interval with statistics, the values of the innermost interval still
/// running (deepest, then latest started), or 0 when none is.
fn counter_events(timeline: &Timeline, queue: &str, pid: u64, tid: u64, out: &mut Vec<Timed>) {
    let intervals: Vec<(&TimelineInterval, CounterResultStatistic)> = timeline
        .frames
        .iter()
        .flat_map(|f| f.intervals.iter())
        .filter(|i| i.queue == queue)
        .filter_map(|i| i.statistics.map(|s| (i, s)))
        .collect();
    if intervals.is_empty() {
        return;
    }
    // Only statistics that are not 0 somewhere on this queue get a track;
    // the complete events' args still carry every statistic.
    let names: Vec<usize> = (0..CounterResultStatistic::FIELDS)
        .filter(|&k| intervals.iter().any(|(_, s)| s.to_array()[k] != 0))
        .collect();
    if names.is_empty() {
        return;
    }

    for (t, values) in super::statistic_steps(&intervals) {
        let named = CounterResultStatistic::default().named();
        let mut args = Map::new();
        for &f in &names {
            args.insert(named[f].0.into(), json!(values[f]));
        }
        out.push(Timed {
            ts_ns: t,
            dur_ns: 0,
            event: json!({"ph": "C", "name": queue, "cat": "statistics", "pid": pid,
                          "tid": tid, "ts": us(t), "args": args}),
        });
    }
}

/// Writes the trace as JSON (see the module documentation for its layout).
pub fn write_chrome_trace(timeline: &Timeline, w: &mut impl Write) -> io::Result<()> {
    serde_json::to_writer(&mut *w, &to_chrome_trace_json(timeline))?;
    w.flush()
}

/// Writes the trace of several devices as JSON
/// ([`to_chrome_trace_json_multi`]).
pub fn write_chrome_trace_multi(timeline: &MultiTimeline, w: &mut impl Write) -> io::Result<()> {
    serde_json::to_writer(&mut *w, &to_chrome_trace_json_multi(timeline))?;
    w.flush()
}
