//! Several devices in one timeline, on the fake backend (CPU only): two
//! fake devices whose GPU clocks differ, one profiler each, merged into one
//! `MultiTimeline` on the CPU clock and exported as one Chrome trace with a
//! process per device. The same on two lavapipe devices is in
//! tests/multi_vulkan.rs.

use gpu_counters_hal::fake::FakeDevice;
use gpu_counters_hal::timeline::{
    MultiTimeline, PassKind, Timeline, TimelineFrame, TimelineInterval,
};
use gpu_counters_profiler::{export, FrameResult, Profiler, ProfilerOptions, WhenFull};
use serde_json::Value;
use std::time::Duration;

const WAIT: WhenFull = WhenFull::Wait {
    timeout: Duration::from_secs(10),
};

fn options(queue: &str) -> ProfilerOptions {
    ProfilerOptions {
        frames_in_flight: 2,
        max_scopes_per_frame: 4,
        statistics: true,
        when_full: WAIT,
        queue_name: Some(queue.into()),
    }
}

/// Offsets far apart, so that a tick of one device read as the other's
/// would land hours away.
const OFFSET_A: u64 = 1_000_000_007;
const OFFSET_B: u64 = 7_200_000_000_000_013;

/// One frame on `device`: one scope of `kind` with `invocations`
/// dispatched, submitted and waited for (the fake GPU runs it in the wait),
/// then collected into `out`.
fn one_frame(
    device: &FakeDevice,
    profiler: &Profiler<FakeDevice>,
    label: &str,
    kind: PassKind,
    invocations: u64,
    out: &mut Vec<FrameResult>,
) {
    let frame = profiler.begin_frame().unwrap();
    let mut cmd = device.recorder();
    let scope = frame.scope(&mut cmd, label, kind).unwrap();
    cmd.dispatch(invocations);
    scope.end(&mut cmd).unwrap();
    let submission = device.submit(cmd).unwrap();
    profiler.end_frame(frame, [&submission]).unwrap();
    submission.wait();
    out.extend(collect(profiler));
}

fn collect(profiler: &Profiler<FakeDevice>) -> Vec<FrameResult> {
    profiler.wait_collect_all(Duration::from_secs(10)).unwrap()
}

/// A copy on device A, the host waiting for it, then a kernel on device B,
/// three times over: every device's intervals lie inside their frames' CPU
/// windows within their own bound, and on the one CPU timeline each A copy
/// comes before the B kernel that waited for it, within the two bounds,
/// although the two GPU clocks are hours apart.
#[test]
fn a_cross_device_sequence_is_in_order_on_one_cpu_timeline() {
    let a = FakeDevice::with_clock_offset("fake A", 64, OFFSET_A).unwrap();
    let b = FakeDevice::with_clock_offset("fake B", 64, OFFSET_B).unwrap();
    let pa = Profiler::new(&a, options("copy queue")).unwrap();
    let pb = Profiler::new(&b, options("compute queue")).unwrap();
    let (mut ra, mut rb) = (Vec::new(), Vec::new());
    for n in 0..3 {
        // `one_frame` returns once the fake GPU ran the copy and the
        // profiler saw it complete: the host waited for A before
        // submitting B's kernel.
        one_frame(&a, &pa, &format!("copy {n}"), PassKind::Blit, 0, &mut ra);
        one_frame(
            &b,
            &pb,
            &format!("kernel {n}"),
            PassKind::Compute,
            64 + n,
            &mut rb,
        );
    }
    assert_eq!((ra.len(), rb.len()), (3, 3));

    let mut multi = MultiTimeline::new();
    assert_eq!(pa.add_to(&mut multi, &ra), 0);
    assert_eq!(pb.add_to(&mut multi, &rb), 1);
    assert_eq!(multi.devices.len(), 2);
    for dev in &multi.devices {
        let clock = dev.clock.expect("each device has its own calibration");
        assert!(clock.anchors >= 1);
        assert!(clock.error_bound_ns >= 1);
    }
    assert_eq!(multi.device_label(0).as_deref(), Some("0: fake A"));
    assert_eq!(multi.device_label(1).as_deref(), Some("1: fake B"));
    assert_eq!(multi.device_label(2), None);

    // Each device's intervals inside their CPU windows ± that device's bound.
    assert_eq!(multi.outside_cpu_windows(), Vec::new());
    for dev in &multi.devices {
        for frame in &dev.timeline.frames {
            for i in &frame.intervals {
                assert!(
                    i.start_ns + i.error_bound_ns >= frame.cpu_submit_ns,
                    "{i:?}"
                );
                assert!(
                    i.end_ns <= frame.cpu_complete_ns + i.error_bound_ns,
                    "{i:?}"
                );
                assert!(i.start_ns <= i.end_ns);
            }
        }
    }
    // The raw ticks are each device's own clock, far apart; the calibrated
    // times are on the one CPU clock.
    let first_a = &multi.devices[0].timeline.frames[0].intervals[0];
    let first_b = &multi.devices[1].timeline.frames[0].intervals[0];
    assert!(first_b.start_ticks - first_a.start_ticks > OFFSET_B - OFFSET_A - 10_000_000_000);
    assert!(first_b.start_ns.abs_diff(first_a.start_ns) < 10_000_000_000);

    // The one CPU timeline: A's copy n, then B's kernel n, in turn.
    let order: Vec<(usize, String)> = multi
        .intervals_by_start()
        .into_iter()
        .map(|r| (r.device, multi.interval(r).unwrap().label.clone()))
        .collect();
    let expected: Vec<(usize, String)> = (0..3)
        .flat_map(|n| [(0, format!("copy {n}")), (1, format!("kernel {n}"))])
        .collect();
    assert_eq!(order, expected);
    let refs = multi.intervals_by_start();
    for pair in refs.windows(2) {
        let (first, then) = (
            multi.interval(pair[0]).unwrap(),
            multi.interval(pair[1]).unwrap(),
        );
        assert!(first.ends_before(then), "{first:?} then {then:?}");
    }
    // And the host's order: B's frame n was submitted after A's frame n
    // was seen complete.
    for n in 0..3 {
        let fa = &multi.devices[0].timeline.frames[n];
        let fb = &multi.devices[1].timeline.frames[n];
        assert!(fa.cpu_complete_ns <= fb.cpu_submit_ns);
    }
    let kernel = multi.devices[1].timeline.frames[2].intervals[0].clone();
    assert_eq!(
        kernel.statistics.map(|s| s.compute_kernel_invocations),
        Some(66)
    );

    // One trace, a process per device, a track per queue.
    let trace = export::to_chrome_trace_json_multi(&multi);
    let events = trace["traceEvents"].as_array().unwrap();
    let meta = |name: &str, pid: u64| -> Vec<String> {
        events
            .iter()
            .filter(|e| e["ph"] == "M" && e["name"] == name && e["pid"] == pid)
            .map(|e| e["args"]["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(meta("process_name", 1), ["GPU 0: fake A"]);
    assert_eq!(meta("process_name", 2), ["GPU 1: fake B"]);
    assert_eq!(
        meta("thread_name", 1),
        ["CPU submit→complete", "copy queue"]
    );
    assert_eq!(
        meta("thread_name", 2),
        ["CPU submit→complete", "compute queue"]
    );
    let slices: Vec<(u64, u64, &str)> = events
        .iter()
        .filter(|e| e["ph"] == "X" && e["cat"] != "cpu")
        .map(|e| {
            (
                e["pid"].as_u64().unwrap(),
                e["tid"].as_u64().unwrap(),
                e["name"].as_str().unwrap(),
            )
        })
        .collect();
    let expected: Vec<(u64, u64, &str)> = vec![
        (1, 2, "copy 0"),
        (2, 2, "kernel 0"),
        (1, 2, "copy 1"),
        (2, 2, "kernel 1"),
        (1, 2, "copy 2"),
        (2, 2, "kernel 2"),
    ];
    let expected: Vec<(u64, u64, String)> = expected
        .into_iter()
        .map(|(p, t, n)| (p, t, n.to_string()))
        .collect();
    let slices: Vec<(u64, u64, String)> = slices
        .into_iter()
        .map(|(p, t, n)| (p, t, n.to_string()))
        .collect();
    assert_eq!(slices, expected);
    let devices = trace["metadata"]["devices"].as_array().unwrap();
    assert_eq!(devices.len(), 2);
    assert_eq!(devices[1]["label"], "1: fake B");
    assert_eq!(devices[1]["pid"], 2);
    assert_eq!(devices[0]["clock"]["method"], "bracketing");
    assert_eq!(trace["metadata"]["frames"], 6);
    // Written, it reads back the same.
    let mut bytes = Vec::new();
    export::write_chrome_trace_multi(&multi, &mut bytes).unwrap();
    let back: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(back, trace);

    // CSV and SVG draw the flattened timeline, each queue named after its
    // device.
    let flat = multi.flattened();
    assert_eq!(flat.device, "0: fake A, 1: fake B");
    let queues: Vec<&str> = flat
        .frames
        .iter()
        .map(|f| f.intervals[0].queue.as_str())
        .collect();
    assert_eq!(
        queues,
        [
            "0: fake A copy queue",
            "1: fake B compute queue",
            "0: fake A copy queue",
            "1: fake B compute queue",
            "0: fake A copy queue",
            "1: fake B compute queue",
        ]
    );
    let mut csv = Vec::new();
    export::write_csv(&flat, &mut csv).unwrap();
    assert_eq!(String::from_utf8(csv).unwrap().lines().count(), 7);
}

/// Two devices of one name (two logical devices of one GPU) stay two
/// processes, told apart by id.
#[test]
fn devices_of_one_name_are_two_processes() {
    let a = FakeDevice::with_clock_offset("same GPU", 64, OFFSET_A).unwrap();
    let b = FakeDevice::with_clock_offset("same GPU", 64, OFFSET_B).unwrap();
    let pa = Profiler::new(&a, options("q")).unwrap();
    let pb = Profiler::new(&b, options("q")).unwrap();
    let (mut ra, mut rb) = (Vec::new(), Vec::new());
    one_frame(&a, &pa, "on a", PassKind::Compute, 1, &mut ra);
    one_frame(&b, &pb, "on b", PassKind::Compute, 2, &mut rb);
    let mut multi = MultiTimeline::new();
    pa.add_to(&mut multi, &ra);
    pb.add_to(&mut multi, &rb);
    let trace = export::to_chrome_trace_json_multi(&multi);
    let names: Vec<&str> = trace["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["name"] == "process_name")
        .map(|e| e["args"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["GPU 0: same GPU", "GPU 1: same GPU"]);
    let on: Vec<(u64, &str)> = trace["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "X" && e["cat"] == "compute")
        .map(|e| (e["pid"].as_u64().unwrap(), e["name"].as_str().unwrap()))
        .collect();
    assert_eq!(on, [(1, "on a"), (2, "on b")]);
}

fn interval(label: &str, start_ns: u64, end_ns: u64, bound: u64) -> TimelineInterval {
    TimelineInterval {
        label: label.into(),
        kind: PassKind::Compute,
        queue: "q".into(),
        depth: 0,
        parent: None,
        thread: None,
        start_ns,
        end_ns,
        start_ticks: 0,
        end_ticks: 0,
        error_bound_ns: bound,
        statistics: None,
    }
}

fn timeline(device: &str, submit: u64, complete: u64, i: TimelineInterval) -> Timeline {
    Timeline {
        device: device.into(),
        frames: vec![TimelineFrame {
            index: 0,
            cpu_submit_ns: submit,
            cpu_complete_ns: complete,
            intervals: vec![i],
        }],
    }
}

/// The checks catch what they are for: an interval outside its CPU window
/// by more than its bound, and two intervals out of order by more than both
/// bounds; within the bounds both pass.
#[test]
fn window_and_order_checks_allow_the_bounds_only() {
    // Inside by the bound: starts 5 before submit with a bound of 5.
    let ok = timeline("a", 100, 200, interval("ok", 95, 205, 5));
    assert!(ok.outside_cpu_windows().is_empty());
    let early = timeline("a", 100, 200, interval("early", 90, 150, 5));
    let v = early.outside_cpu_windows();
    assert_eq!(v.len(), 1);
    assert_eq!(
        (v[0].label.as_str(), v[0].early_ns, v[0].late_ns),
        ("early", 5, 0)
    );
    let late = timeline("b", 100, 200, interval("late", 150, 230, 10));
    let v = late.outside_cpu_windows();
    assert_eq!((v[0].early_ns, v[0].late_ns), (0, 20));

    let mut multi = MultiTimeline::new();
    multi.push(ok, None);
    multi.push(late, None);
    assert_eq!(multi.outside_cpu_windows().len(), 1);
    assert_eq!(multi.outside_cpu_windows()[0].0, 1);

    // `first` ends at 200 ± 5; `then` starts at 190 ± 5: within the bounds.
    let first = interval("first", 100, 200, 5);
    assert!(first.ends_before(&interval("then", 190, 300, 5)));
    assert!(!first.ends_before(&interval("then", 189, 300, 5)));
    assert!(first.ends_before(&interval("then", 189, 300, 6)));
}
