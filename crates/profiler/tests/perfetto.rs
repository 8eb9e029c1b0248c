//! The Perfetto export, decoded with Perfetto's own schema
//! (`perfetto_trace_pb2` from the `perfetto` package on PyPI) and checked
//! against the timeline and the Chrome JSON export of the same timeline.
#![cfg(feature = "perfetto")]

#[path = "common/perfetto_py.rs"]
mod perfetto_py;

use gpu_counters_hal::timeline::{PassKind, Timeline, TimelineFrame, TimelineInterval};
use gpu_counters_hal::{CounterResultStatistic, COUNTER_ERROR_VALUE};
use gpu_counters_profiler::export::perfetto::{PerfettoError, PerfettoWriter, CPU_TRACK_NAME};
use gpu_counters_profiler::export::{to_chrome_trace_json, write_perfetto};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{self, Write};

const GRAPHICS: &str = "graphics";
const COMPUTE: &str = "async compute";
const NASTY: &str = "blur, \"wide\" <&> pass\nline two";

#[allow(clippy::too_many_arguments)]
fn iv(
    label: &str,
    kind: PassKind,
    queue: &str,
    depth: u32,
    parent: Option<usize>,
    start_ns: u64,
    end_ns: u64,
    statistics: Option<CounterResultStatistic>,
) -> TimelineInterval {
    TimelineInterval {
        label: label.to_string(),
        kind,
        queue: queue.to_string(),
        depth,
        parent,
        thread: Some(format!("worker {depth}")),
        start_ns,
        end_ns,
        // Distinct from the nanoseconds, so a mix-up shows.
        start_ticks: start_ns / 32 + 7,
        end_ticks: end_ns / 32 + 7,
        error_bound_ns: 1_500 + depth as u64,
        statistics,
    }
}

fn draw_stats(k: u64) -> CounterResultStatistic {
    CounterResultStatistic {
        vertex_invocations: 300 * k,
        clipper_invocations: 100 * k,
        fragment_invocations: 5_000 * k,
        fragments_passed: 4_000 * k,
        ..Default::default()
    }
}

fn dispatch_stats(k: u64) -> CounterResultStatistic {
    CounterResultStatistic {
        compute_kernel_invocations: 4096 * k,
        // A counter the device does not count.
        post_tessellation_vertex_invocations: COUNTER_ERROR_VALUE,
        ..Default::default()
    }
}

/// Three frames one after another, two queues, scopes nested two deep,
/// statistics on some passes, an awkward label, CLOCK_MONOTONIC times of a
/// machine up for days.
fn sample() -> Timeline {
    let mut frames = Vec::new();
    for n in 0..3u64 {
        let submit = 345_678_000_000_123 + n * 16_666_667;
        let t = |off: u64| submit + off;
        frames.push(TimelineFrame {
            index: 10 + n,
            cpu_submit_ns: submit,
            cpu_complete_ns: t(2_400_000),
            intervals: vec![
                iv(
                    "frame",
                    PassKind::Scope,
                    GRAPHICS,
                    0,
                    None,
                    t(50_001),
                    t(2_000_999),
                    None,
                ),
                iv(
                    "shadows",
                    PassKind::Render,
                    GRAPHICS,
                    1,
                    Some(0),
                    t(60_250),
                    t(700_500),
                    Some(draw_stats(n + 1)),
                ),
                iv(
                    "post",
                    PassKind::Scope,
                    GRAPHICS,
                    1,
                    Some(0),
                    t(710_000),
                    t(1_900_000),
                    None,
                ),
                iv(
                    NASTY,
                    PassKind::Compute,
                    GRAPHICS,
                    2,
                    Some(2),
                    t(720_000),
                    t(1_300_123),
                    Some(dispatch_stats(n + 1)),
                ),
                iv(
                    "copy out",
                    PassKind::Blit,
                    GRAPHICS,
                    2,
                    Some(2),
                    t(1_310_000),
                    t(1_890_000),
                    None,
                ),
                iv(
                    "simulate",
                    PassKind::Compute,
                    COMPUTE,
                    0,
                    None,
                    t(100_000),
                    t(900_777),
                    Some(dispatch_stats(2)),
                ),
                iv(
                    "reduce",
                    PassKind::Compute,
                    COMPUTE,
                    0,
                    None,
                    t(950_000),
                    t(1_200_000),
                    None,
                ),
            ],
        });
    }
    Timeline {
        device: "Test GPU <1>".to_string(),
        frames,
    }
}

fn write(t: &Timeline) -> Vec<u8> {
    let mut bytes = Vec::new();
    write_perfetto(t, &mut bytes).expect("write");
    bytes
}

/// The decoded trace, or `None` where Python is missing and skipping allowed.
fn decode(test: &str, t: &Timeline) -> Option<Value> {
    let python = perfetto_py::python(test)?;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.pftrace");
    std::fs::write(&path, write(t)).unwrap();
    Some(perfetto_py::dump(&python, &path))
}

fn slices_on<'a>(dump: &'a Value, track: &str) -> Vec<&'a Value> {
    dump["slices"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["track"] == track)
        .collect()
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a u64: {v}"))
}

#[test]
fn perfetto_tracks_are_device_cpu_queues_and_counters() {
    let t = sample();
    let Some(dump) = decode("perfetto_tracks_are_device_cpu_queues_and_counters", &t) else {
        return;
    };
    assert_eq!(dump["primary_clock"], "BUILTIN_CLOCK_MONOTONIC");
    let tracks = dump["tracks"].as_array().unwrap();
    let names: Vec<&str> = tracks.iter().map(|t| t["name"].as_str().unwrap()).collect();
    let stats = |queue: &str, list: &[&str]| -> Vec<String> {
        list.iter().map(|s| format!("{queue} {s}")).collect()
    };
    let mut expected: Vec<String> = vec![
        "GPU Test GPU <1>".into(),
        CPU_TRACK_NAME.into(),
        GRAPHICS.into(),
    ];
    // Counter tracks come as statistics first become non-zero: the draw
    // statistics in Metal's order, then the dispatch's.
    expected.extend(stats(
        GRAPHICS,
        &[
            "vertex_invocations",
            "clipper_invocations",
            "fragment_invocations",
            "fragments_passed",
        ],
    ));
    expected.extend(stats(GRAPHICS, &["compute_kernel_invocations"]));
    expected.push(COMPUTE.into());
    expected.extend(stats(COMPUTE, &["compute_kernel_invocations"]));
    let mut sorted_names: Vec<&str> = names.clone();
    sorted_names.sort();
    let mut sorted_expected: Vec<&str> = expected.iter().map(String::as_str).collect();
    sorted_expected.sort();
    assert_eq!(sorted_names, sorted_expected);

    // One device track with no parent; every other track is its child, in
    // the order given by their ranks: CPU first, counters marked.
    let device = &tracks[0];
    assert_eq!(device["parent"], Value::Null);
    for t in &tracks[1..] {
        assert_eq!(t["parent"], device["uuid"], "{t}");
        let is_counter = t["name"].as_str().unwrap().ends_with("invocations")
            || t["name"].as_str().unwrap().ends_with("passed");
        assert_eq!(t["counter"], is_counter, "{t}");
    }
    let cpu = tracks.iter().find(|t| t["name"] == CPU_TRACK_NAME).unwrap();
    assert_eq!(cpu["rank"], 0);
    let uuids: BTreeSet<u64> = tracks.iter().map(|t| u(&t["uuid"])).collect();
    assert_eq!(uuids.len(), tracks.len(), "uuids are unique");
}

#[test]
fn perfetto_slices_match_the_timeline_and_the_chrome_export() {
    let t = sample();
    let Some(dump) = decode(
        "perfetto_slices_match_the_timeline_and_the_chrome_export",
        &t,
    ) else {
        return;
    };
    let slices = dump["slices"].as_array().unwrap();
    let intervals: usize = t.frames.iter().map(|f| f.intervals.len()).sum();
    assert_eq!(slices.len(), intervals + t.frames.len());
    assert!(
        slices.iter().all(|s| s["dur"].is_u64()),
        "every slice ended"
    );

    // Chrome's complete events, by (track name, label, start): (ts, dur) in
    // nanoseconds from its microseconds, and from its exact args.
    let chrome = to_chrome_trace_json(&t);
    let events = chrome["traceEvents"].as_array().unwrap();
    let thread_names: BTreeMap<u64, String> = events
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "thread_name")
        .map(|e| {
            (
                u(&e["tid"]),
                e["args"]["name"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let mut from_chrome: BTreeSet<(String, String, u64, u64)> = BTreeSet::new();
    for e in events.iter().filter(|e| e["ph"] == "X") {
        let ts = (e["ts"].as_f64().unwrap() * 1000.0).round() as u64;
        let dur = (e["dur"].as_f64().unwrap() * 1000.0).round() as u64;
        let track = thread_names[&u(&e["tid"])].clone();
        if track != CPU_TRACK_NAME {
            assert_eq!(ts, u(&e["args"]["start_ns"]));
            assert_eq!(ts + dur, u(&e["args"]["end_ns"]));
        }
        from_chrome.insert((track, e["name"].as_str().unwrap().to_string(), ts, dur));
    }
    let from_perfetto: BTreeSet<(String, String, u64, u64)> = slices
        .iter()
        .map(|s| {
            (
                s["track"].as_str().unwrap().to_string(),
                s["name"].as_str().unwrap().to_string(),
                u(&s["ts"]),
                u(&s["dur"]),
            )
        })
        .collect();
    assert_eq!(from_perfetto.len(), slices.len(), "no two slices alike");
    assert_eq!(from_perfetto, from_chrome);

    // Names, nesting, kinds and annotations, interval by interval.
    for frame in &t.frames {
        for i in &frame.intervals {
            let s = slices
                .iter()
                .find(|s| s["track"] == i.queue.as_str() && u(&s["ts"]) == i.start_ns)
                .unwrap_or_else(|| panic!("no slice for {}", i.label));
            assert_eq!(s["name"], i.label.as_str());
            assert_eq!(s["category"], i.kind.name());
            assert_eq!(u(&s["depth"]), u64::from(i.depth), "{}", i.label);
            let parent = s["parent"]
                .as_u64()
                .map(|p| slices[p as usize]["name"].clone());
            let expected = i
                .parent
                .map(|p| Value::from(frame.intervals[p].label.as_str()));
            assert_eq!(parent, expected, "parent of {}", i.label);
            let a = &s["args"];
            assert_eq!(u(&a["frame"]), frame.index);
            assert_eq!(u(&a["start_ticks"]), i.start_ticks);
            assert_eq!(u(&a["end_ticks"]), i.end_ticks);
            assert_eq!(u(&a["error_bound_ns"]), i.error_bound_ns);
            assert_eq!(u(&a["start_ns"]), i.start_ns);
            assert_eq!(u(&a["end_ns"]), i.end_ns);
            assert_eq!(u(&a["duration_ns"]), i.duration_ns());
            assert_eq!(a["thread"], i.thread.as_deref().unwrap());
            match &i.statistics {
                Some(stats) => {
                    for (name, value) in stats.named() {
                        assert_eq!(u(&a[name]), value, "{} {name}", i.label);
                    }
                }
                None => assert!(a.get("vertex_invocations").is_none()),
            }
        }
    }

    // The CPU track: one slice per frame, submit to complete.
    let cpu = slices_on(&dump, CPU_TRACK_NAME);
    assert_eq!(cpu.len(), t.frames.len());
    for (s, f) in cpu.iter().zip(&t.frames) {
        assert_eq!(s["name"], format!("frame {}", f.index));
        assert_eq!(u(&s["ts"]), f.cpu_submit_ns);
        assert_eq!(u(&s["dur"]), f.cpu_complete_ns - f.cpu_submit_ns);
        assert_eq!(u(&s["args"]["intervals"]), f.intervals.len() as u64);
        assert_eq!(s["category"], "cpu");
    }
}

#[test]
fn perfetto_counters_match_the_chrome_export() {
    let t = sample();
    let Some(dump) = decode("perfetto_counters_match_the_chrome_export", &t) else {
        return;
    };
    // Chrome: per queue, counter events with one arg per statistic.
    let chrome = to_chrome_trace_json(&t);
    let mut expected: BTreeMap<String, Vec<(u64, i64)>> = BTreeMap::new();
    for e in chrome["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "C")
    {
        let ts = (e["ts"].as_f64().unwrap() * 1000.0).round() as u64;
        for (stat, v) in e["args"].as_object().unwrap() {
            if u(v) == COUNTER_ERROR_VALUE {
                continue;
            }
            let track = format!("{} {stat}", e["name"].as_str().unwrap());
            expected.entry(track).or_default().push((ts, u(v) as i64));
        }
    }
    // Perfetto starts a statistic's track where it is first non-zero.
    for steps in expected.values_mut() {
        let first = steps
            .iter()
            .position(|&(_, v)| v != 0)
            .unwrap_or(steps.len());
        steps.drain(..first);
    }
    expected.retain(|_, steps| !steps.is_empty());

    let mut got: BTreeMap<String, Vec<(u64, i64)>> = BTreeMap::new();
    for c in dump["counters"].as_array().unwrap() {
        got.entry(c["track"].as_str().unwrap().to_string())
            .or_default()
            .push((u(&c["ts"]), c["value"].as_i64().unwrap()));
    }
    assert!(!got.is_empty(), "counters present");
    assert_eq!(got, expected);
    // Spot check: the dispatch's kernel invocations on the graphics queue.
    let k = &got[&format!("{GRAPHICS} compute_kernel_invocations")];
    let f0 = &t.frames[0].intervals[3];
    assert!(k.contains(&(f0.start_ns, 4096)));
    assert!(k.contains(&(f0.end_ns, 0)));
}

/// Frames in flight whose CPU windows overlap, and two intervals on one
/// queue that overlap without nesting: each goes on an overlap track, and
/// every track's slices still nest.
#[test]
fn perfetto_overlaps_go_on_overlap_tracks() {
    let base = 1_000_000_000u64;
    let frame = |index: u64, submit: u64, intervals: Vec<TimelineInterval>| TimelineFrame {
        index,
        cpu_submit_ns: submit,
        cpu_complete_ns: submit + 3_000,
        intervals,
    };
    let t = Timeline {
        device: "dev".into(),
        frames: vec![
            frame(
                0,
                base,
                vec![
                    iv(
                        "a",
                        PassKind::Compute,
                        GRAPHICS,
                        0,
                        None,
                        base + 100,
                        base + 1_000,
                        None,
                    ),
                    iv(
                        "b",
                        PassKind::Compute,
                        GRAPHICS,
                        0,
                        None,
                        base + 500,
                        base + 1_500,
                        None,
                    ),
                ],
            ),
            frame(
                1,
                base + 1_000,
                vec![iv(
                    "c",
                    PassKind::Compute,
                    GRAPHICS,
                    0,
                    None,
                    base + 1_600,
                    base + 2_000,
                    None,
                )],
            ),
        ],
    };
    let Some(dump) = decode("perfetto_overlaps_go_on_overlap_tracks", &t) else {
        return;
    };
    let on = |track: &str| -> Vec<String> {
        slices_on(&dump, track)
            .iter()
            .map(|s| s["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(on(GRAPHICS), ["a", "c"]);
    assert_eq!(on(&format!("{GRAPHICS} (overlap 1)")), ["b"]);
    assert_eq!(on(CPU_TRACK_NAME), ["frame 0"]);
    assert_eq!(on(&format!("{CPU_TRACK_NAME} (overlap 1)")), ["frame 1"]);
}

#[test]
fn perfetto_empty_timeline_is_a_valid_trace() {
    let t = Timeline::default();
    let Some(dump) = decode("perfetto_empty_timeline_is_a_valid_trace", &t) else {
        return;
    };
    assert_eq!(dump["packets"], 1, "just the clock snapshot");
    assert_eq!(dump["tracks"], serde_json::json!([]));
}

/// Frames written one at a time give the same bytes as the whole timeline.
#[test]
fn perfetto_streaming_equals_whole_timeline() {
    let t = sample();
    let mut w = PerfettoWriter::new(Vec::new());
    for f in &t.frames {
        w.write_frame(&t.device, f).unwrap();
    }
    assert_eq!(w.finish().unwrap(), write(&t));
}

struct Failing {
    after: usize,
}

impl Write for Failing {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.after < buf.len() {
            return Err(io::Error::other("disk full"));
        }
        self.after -= buf.len();
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[test]
fn perfetto_output_errors_are_typed_errors() {
    let t = sample();
    for after in [0, 10, 200] {
        let mut w = PerfettoWriter::new(Failing { after });
        let r = w.write_timeline(&t).and_then(|()| w.finish().map(drop));
        match r {
            Err(e @ (PerfettoError::Io(_) | PerfettoError::Encode(_))) => {
                assert!(e.to_string().contains("disk full"), "{e}");
            }
            Ok(()) => panic!("writing {after} bytes at most succeeded"),
        }
    }
}
