//! The profiler and the exporters on the fake backend: CPU only, scripted
//! work, no GPU and no Vulkan loader (CI runs these before it installs one).
//! The GPU tests on lavapipe (tests/profiler.rs, tests/export.rs) stay.

use gpu_counters_hal::fake::{FakeDevice, FakeRecorder, FakeSubmission};
use gpu_counters_hal::timeline::PassKind;
use gpu_counters_profiler::{
    export, DropCounts, FrameResult, Profiler, ProfilerError, ProfilerOptions, WhenFull,
};
use std::collections::VecDeque;
use std::time::Duration;

fn device() -> FakeDevice {
    FakeDevice::new("fake GPU", 64).unwrap()
}

fn options(ring: usize, scopes: u32, when_full: WhenFull) -> ProfilerOptions {
    ProfilerOptions {
        frames_in_flight: ring,
        max_scopes_per_frame: scopes,
        statistics: true,
        when_full,
        queue_name: Some("fake queue".into()),
    }
}

const WAIT: WhenFull = WhenFull::Wait {
    timeout: Duration::from_secs(10),
};

/// Submits `cmd`, ends `frame` with its submit time and runs it.
fn run_frame(
    device: &FakeDevice,
    profiler: &Profiler<FakeDevice>,
    frame: gpu_counters_profiler::Frame<'_, FakeDevice>,
    cmd: FakeRecorder,
) -> (u64, u64) {
    let submission = device.submit(cmd).unwrap();
    profiler.end_frame(frame, [&submission]).unwrap();
    let done = submission.wait();
    (submission.cpu_submit_ns(), done)
}

/// `end_frame` takes the frame's submissions: its CPU submit time is the
/// earliest one's, in whatever order they are handed over; with none (work
/// submitted outside gpu-counters) it has none, and is still collected once
/// its samples are in.
#[test]
fn a_frames_submit_time_is_its_earliest_submissions() {
    let device = device();
    let profiler = Profiler::new(&device, options(2, 4, WAIT)).unwrap();
    let frame = profiler.begin_frame().unwrap();
    let (mut a, mut b) = (device.recorder(), device.recorder());
    let s = frame.scope(&mut a, "a", PassKind::Compute).unwrap();
    s.end(&mut a).unwrap();
    let s = frame.scope(&mut b, "b", PassKind::Compute).unwrap();
    s.end(&mut b).unwrap();
    let first = device.submit(a).unwrap();
    let second = device.submit(b).unwrap();
    assert!(first.cpu_submit_ns() <= second.cpu_submit_ns());
    profiler.end_frame(frame, [&second, &first]).unwrap();
    second.wait();
    let frames = profiler.wait_collect_all(Duration::from_secs(10)).unwrap();
    assert_eq!(frames.len(), 1);
    assert_eq!(frames[0].cpu_submit_ns, Some(first.cpu_submit_ns()));
    assert_eq!(frames[0].scopes.len(), 2);

    let frame = profiler.begin_frame().unwrap();
    let mut c = device.recorder();
    let s = frame.scope(&mut c, "c", PassKind::Compute).unwrap();
    s.end(&mut c).unwrap();
    let outside = device.submit(c).unwrap();
    profiler.end_frame(frame, []).unwrap();
    outside.wait();
    let frames = profiler.wait_collect_all(Duration::from_secs(10)).unwrap();
    assert_eq!(frames.len(), 1);
    assert_eq!(frames[0].cpu_submit_ns, None);
    assert_eq!(frames[0].scopes.len(), 1);
    assert_eq!(frames[0].drops, DropCounts::default());
}

/// Nested scopes from two threads, each on its own recorder: exact counts
/// per scope (outer = sum of inners), nesting by recorder, and every scope
/// inside the CPU window of its submission.
#[test]
fn nested_scopes_from_two_threads_on_the_fake_backend() {
    let device = device();
    let profiler = Profiler::new(&device, options(2, 16, WAIT)).unwrap();
    let frame = profiler.begin_frame().unwrap();
    let recorders: Vec<FakeRecorder> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..2u64)
            .map(|t| {
                let frame = &frame;
                let device = &device;
                s.spawn(move || {
                    let mut cmd = device.recorder();
                    let outer = frame
                        .scope(&mut cmd, &format!("outer {t}"), PassKind::Scope)
                        .unwrap();
                    for k in 0..3u64 {
                        let inner = frame
                            .scope(&mut cmd, &format!("inner {t}.{k}"), PassKind::Compute)
                            .unwrap();
                        cmd.dispatch(100 * (t + 1) + k);
                        inner.end(&mut cmd).unwrap();
                    }
                    outer.end(&mut cmd).unwrap();
                    cmd
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let before = gpu_counters_hal::cpu_monotonic_ns();
    let submissions: Vec<FakeSubmission> = recorders
        .into_iter()
        .map(|r| device.submit(r).unwrap())
        .collect();
    profiler.end_frame(frame, &submissions).unwrap();
    let after = submissions.iter().map(|s| s.wait()).max().unwrap();
    let frames = profiler.wait_collect_all(Duration::from_secs(10)).unwrap();
    assert_eq!(frames.len(), 1);
    let f = &frames[0];
    assert_eq!(f.drops, DropCounts::default());
    assert_eq!(f.scopes.len(), 8);
    for t in 0..2u64 {
        let outer = f
            .scopes
            .iter()
            .position(|s| s.label == format!("outer {t}"))
            .unwrap();
        let o = &f.scopes[outer];
        assert_eq!(o.depth, 0);
        let expected: u64 = (0..3).map(|k| 100 * (t + 1) + k).sum();
        assert_eq!(
            o.statistics.as_deref().unwrap().compute_kernel_invocations,
            expected,
            "outer {t}"
        );
        for k in 0..3u64 {
            let i = f
                .scopes
                .iter()
                .find(|s| s.label == format!("inner {t}.{k}"))
                .unwrap();
            assert_eq!(i.parent, Some(outer));
            assert_eq!(i.depth, 1);
            assert_eq!(
                i.statistics.as_deref().unwrap().compute_kernel_invocations,
                100 * (t + 1) + k
            );
            assert!(o.start_ns <= i.start_ns && i.end_ns <= o.end_ns);
        }
    }
    for s in &f.scopes {
        assert!(
            s.start_ns + s.error_bound_ns >= before && s.end_ns <= after + s.error_bound_ns,
            "{} [{}, {}] outside [{before}, {after}]",
            s.label,
            s.start_ns,
            s.end_ns
        );
        assert!(s.start_ns <= s.end_ns);
        assert_eq!(
            s.statistics.as_deref().unwrap().vertex_invocations,
            gpu_counters_hal::COUNTER_ERROR_VALUE,
            "the fake counts no vertices: the error value, never 0"
        );
    }
}

/// 1,000 frames through a ring of 3 with nothing lost: every frame comes
/// back once, in order, with its one scope and its exact count.
#[test]
fn thousand_frames_through_a_ring_of_three_on_the_fake_backend() {
    let device = device();
    let profiler = Profiler::new(&device, options(3, 2, WAIT)).unwrap();
    let buffers = profiler.sample_buffer_count();
    let mut in_flight: VecDeque<FakeSubmission> = VecDeque::new();
    let mut frames: Vec<FrameResult> = Vec::new();
    for n in 0..1000u64 {
        if in_flight.len() == 3 {
            in_flight.pop_front().unwrap().wait();
        }
        let frame = profiler.begin_frame().unwrap();
        assert_eq!(frame.index(), n);
        let mut cmd = device.recorder();
        let scope = frame.scope(&mut cmd, "frame", PassKind::Compute).unwrap();
        cmd.dispatch(n + 1);
        scope.end(&mut cmd).unwrap();
        let submission = device.submit(cmd).unwrap();
        profiler.end_frame(frame, [&submission]).unwrap();
        in_flight.push_back(submission);
        frames.extend(profiler.collect().unwrap());
        assert_eq!(profiler.ring_size(), 3);
    }
    for s in &in_flight {
        s.wait();
    }
    frames.extend(profiler.wait_collect_all(Duration::from_secs(10)).unwrap());
    assert_eq!(frames.len(), 1000);
    for (n, f) in frames.iter().enumerate() {
        assert_eq!(f.index, n as u64);
        assert_eq!(f.drops, DropCounts::default());
        assert_eq!(f.scopes.len(), 1);
        assert_eq!(
            f.scopes[0]
                .statistics
                .as_deref()
                .unwrap()
                .compute_kernel_invocations,
            n as u64 + 1
        );
    }
    assert_eq!(profiler.sample_buffer_count(), buffers, "no growth");
    assert_eq!(profiler.dropped_scopes_total(), 0);
}

/// The drop report, exactly: no slot (Drop with the ring full), over
/// capacity, not ended, and abandoned (a recorder dropped unsubmitted).
#[test]
fn every_dropped_scope_is_counted_on_the_fake_backend() {
    let device = device();
    let profiler = Profiler::new(&device, options(1, 2, WhenFull::Drop)).unwrap();
    // Frame 0: three scopes into room for two; one never ended.
    let frame = profiler.begin_frame().unwrap();
    let mut cmd = device.recorder();
    let a = frame.scope(&mut cmd, "a", PassKind::Compute).unwrap();
    a.end(&mut cmd).unwrap();
    let b = frame.scope(&mut cmd, "b", PassKind::Compute).unwrap();
    let c = frame.scope(&mut cmd, "c", PassKind::Compute).unwrap();
    assert!(!c.is_recorded());
    drop(c);
    drop(b);
    let submission = device.submit(cmd).unwrap();
    profiler.end_frame(frame, [&submission]).unwrap();
    // Frame 1: the only slot is busy until frame 0 ran, so it has none.
    let frame = profiler.begin_frame().unwrap();
    assert!(!frame.has_slot());
    let mut cmd = device.recorder();
    let d = frame.scope(&mut cmd, "d", PassKind::Compute).unwrap();
    d.end(&mut cmd).unwrap();
    profiler.end_frame(frame, []).unwrap();
    submission.wait();
    // Frame 2: its recorder is dropped unsubmitted.
    let frames_01 = profiler.wait_collect_all(Duration::from_secs(10)).unwrap();
    let frame = profiler.begin_frame().unwrap();
    let mut cmd = device.recorder();
    let e = frame.scope(&mut cmd, "e", PassKind::Compute).unwrap();
    e.end(&mut cmd).unwrap();
    drop(cmd);
    profiler.end_frame(frame, []).unwrap();
    let frame_2 = profiler.wait_collect_all(Duration::from_secs(10)).unwrap();
    let frames: Vec<FrameResult> = frames_01.into_iter().chain(frame_2).collect();
    assert_eq!(frames.len(), 3);
    assert_eq!(frames[0].scopes.len(), 1);
    assert_eq!(
        frames[0].drops,
        DropCounts {
            over_capacity: 1,
            not_ended: 1,
            ..DropCounts::default()
        }
    );
    assert_eq!(
        frames[1].drops,
        DropCounts {
            no_slot: 1,
            ..DropCounts::default()
        }
    );
    assert_eq!(
        frames[2].drops,
        DropCounts {
            abandoned: 1,
            ..DropCounts::default()
        }
    );
    assert_eq!(profiler.dropped_scopes_total(), 4);
}

/// The Chrome trace, CSV and SVG exports of a fake-backend timeline: one
/// complete event per scope with the scope's own start and duration, a CSV
/// row per scope, an SVG that parses.
#[test]
fn exports_of_a_fake_backend_timeline() {
    let device = device();
    let profiler = Profiler::new(&device, options(2, 8, WAIT)).unwrap();
    let mut frames = Vec::new();
    for n in 0..3u64 {
        let frame = profiler.begin_frame().unwrap();
        let mut cmd = device.recorder();
        let outer = frame.scope(&mut cmd, "frame", PassKind::Scope).unwrap();
        let pass = frame.scope(&mut cmd, "work", PassKind::Compute).unwrap();
        cmd.dispatch(10 + n);
        pass.end(&mut cmd).unwrap();
        outer.end(&mut cmd).unwrap();
        run_frame(&device, &profiler, frame, cmd);
        frames.extend(profiler.collect().unwrap());
    }
    frames.extend(profiler.wait_collect_all(Duration::from_secs(10)).unwrap());
    assert_eq!(frames.len(), 3);
    let timeline = profiler.timeline(&frames);
    assert_eq!(timeline.device, "fake GPU");

    let mut json = Vec::new();
    export::write_chrome_trace(&timeline, &mut json).unwrap();
    let trace: serde_json::Value = serde_json::from_slice(&json).unwrap();
    let events = trace["traceEvents"].as_array().unwrap();
    let scopes: Vec<&gpu_counters_profiler::ScopeResult> =
        frames.iter().flat_map(|f| &f.scopes).collect();
    let complete: Vec<&serde_json::Value> = events
        .iter()
        .filter(|e| e["ph"] == "X" && (e["name"] == "frame" || e["name"] == "work"))
        .collect();
    assert_eq!(complete.len(), scopes.len());
    for s in &scopes {
        let e = complete
            .iter()
            .find(|e| {
                e["name"] == s.label.as_str()
                    && (e["ts"].as_f64().unwrap() - s.start_ns as f64 / 1000.0).abs() < 1e-3
            })
            .unwrap_or_else(|| panic!("no event for {} at {}", s.label, s.start_ns));
        assert!((e["dur"].as_f64().unwrap() - s.duration_ns as f64 / 1000.0).abs() < 1e-3);
    }

    let mut csv = Vec::new();
    export::write_csv(&timeline, &mut csv).unwrap();
    let text = String::from_utf8(csv).unwrap();
    assert_eq!(text.lines().count(), 1 + scopes.len(), "{text}");

    let svg = export::render_svg(&timeline, &export::SvgOptions::default()).expect("render");
    roxmltree::Document::parse(&svg).unwrap();
}

/// Options over the limits are typed errors on any backend.
#[test]
fn huge_options_are_refused_on_the_fake_backend() {
    let device = device();
    let e = Profiler::new(&device, options(usize::MAX, 1, WAIT)).unwrap_err();
    assert!(matches!(e, ProfilerError::InvalidOptions(ref m) if m.contains("frames_in_flight")));
}

/// Records one scope around a dispatch of `n` invocations into a new recorder.
fn one_scope(
    device: &FakeDevice,
    frame: &gpu_counters_profiler::Frame<'_, FakeDevice>,
    label: &str,
    n: u64,
) -> FakeRecorder {
    let mut cmd = device.recorder();
    let scope = frame.scope(&mut cmd, label, PassKind::Compute).unwrap();
    cmd.dispatch(n);
    scope.end(&mut cmd).unwrap();
    cmd
}

/// The fake recorder's ticket says when the GPU ran it, so a frame needs no
/// completion marker: it is collected as soon as its submissions ran, and
/// nothing is queued behind it. A frame nobody waits for stays in flight,
/// with no marker, until a caller blocks on it (`wait_collect_all` queues
/// one, once); a frame of two recorders waits for both.
#[test]
fn frames_of_recorders_with_tickets_queue_no_marker_on_the_fake_backend() {
    let device = device();
    let profiler = Profiler::new(&device, options(3, 4, WAIT)).unwrap();
    for n in 0..5u64 {
        let frame = profiler.begin_frame().unwrap();
        let cmd = one_scope(&device, &frame, "waited", n + 1);
        run_frame(&device, &profiler, frame, cmd);
        let got = profiler.collect().unwrap();
        assert_eq!(got.len(), 1, "frame {n} is collected once its work ran");
        assert_eq!(got[0].index, n);
        assert_eq!(got[0].scopes.len(), 1);
        let stats = got[0].scopes[0].statistics.as_deref().unwrap();
        assert_eq!(stats.compute_kernel_invocations, n + 1);
    }
    assert_eq!(device.markers_submitted(), 0);

    // Submitted and not run: nothing to collect, and nothing queued.
    let frame = profiler.begin_frame().unwrap();
    let cmd = one_scope(&device, &frame, "unwaited", 7);
    let submission = device.submit(cmd).unwrap();
    profiler.end_frame(frame, [&submission]).unwrap();
    assert!(profiler.collect().unwrap().is_empty());
    assert!(profiler.collect().unwrap().is_empty());
    assert_eq!(device.markers_submitted(), 0);
    // A caller blocked on it queues a marker behind it, once.
    for _ in 0..2 {
        assert!(matches!(
            profiler.wait_collect_all(Duration::ZERO),
            Err(ProfilerError::CollectTimeout { frame: 5, .. })
        ));
    }
    assert_eq!(device.markers_submitted(), 1);
    submission.wait();
    let got = profiler.collect().unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].index, 5);
    assert_eq!(got[0].scopes[0].label, "unwaited");

    // Two recorders: done once both ran.
    let frame = profiler.begin_frame().unwrap();
    let a = one_scope(&device, &frame, "a", 1);
    let b = one_scope(&device, &frame, "b", 2);
    let (a, b) = (device.submit(a).unwrap(), device.submit(b).unwrap());
    profiler.end_frame(frame, [&a]).unwrap();
    a.wait();
    assert!(profiler.collect().unwrap().is_empty(), "b has not run");
    b.wait();
    let got = profiler.collect().unwrap();
    assert_eq!(got.len(), 1);
    let labels: Vec<&str> = got[0].scopes.iter().map(|s| s.label.as_str()).collect();
    assert_eq!(labels, ["a", "b"]);
    assert_eq!(device.markers_submitted(), 1);
    assert_eq!(profiler.dropped_scopes_total(), 0);
}

/// Results collected into one vector, frame after frame, are overwritten
/// in place: each frame reads its own labels, threads, kinds, nesting and
/// counts, whatever the frame before it held at the same places (labels
/// that change and repeat, a thread that changes, nesting that comes and
/// goes, more and fewer scopes).
#[test]
fn results_reused_across_frames_read_each_frames_own_scopes_on_the_fake_backend() {
    let device = device();
    let profiler = Profiler::new(&device, options(2, 8, WAIT)).unwrap();
    let mut frames: Vec<FrameResult> = Vec::new();
    for n in 0..12u64 {
        let frame = profiler.begin_frame().unwrap();
        // Frames alternate between one scope with two nested in it, and
        // three flat scopes; labels cycle over three names, and every
        // third frame records on a thread of its own.
        let nested = n % 2 == 0;
        let thread_name = format!("recorder {}", n % 3);
        let record = || {
            let mut cmd = device.recorder();
            let label = |k: u64| format!("scope {}.{k}", (n + k) % 3);
            if nested {
                let outer = frame.scope(&mut cmd, &label(0), PassKind::Scope).unwrap();
                for k in 1..3 {
                    let inner = frame.scope(&mut cmd, &label(k), PassKind::Compute).unwrap();
                    cmd.dispatch(10 * n + k);
                    inner.end(&mut cmd).unwrap();
                }
                outer.end(&mut cmd).unwrap();
            } else {
                for k in 0..3 {
                    let s = frame.scope(&mut cmd, &label(k), PassKind::Blit).unwrap();
                    cmd.dispatch(10 * n + k);
                    s.end(&mut cmd).unwrap();
                }
            }
            cmd
        };
        let cmd = if n % 3 == 2 {
            std::thread::scope(|s| {
                std::thread::Builder::new()
                    .name(thread_name.clone())
                    .spawn_scoped(s, record)
                    .unwrap()
                    .join()
                    .unwrap()
            })
        } else {
            record()
        };
        run_frame(&device, &profiler, frame, cmd);
        profiler.collect_into(&mut frames).unwrap();
        let waited = profiler.wait_collect_all(Duration::from_secs(10)).unwrap();
        frames.extend(waited);
        assert_eq!(frames.len(), 1, "frame {n}");
        let f = &frames[0];
        assert_eq!(f.index, n);
        assert_eq!(f.drops, DropCounts::default());
        assert_eq!(f.scopes.len(), 3, "frame {n}");
        let main = std::thread::current();
        let expected_thread = if n % 3 == 2 {
            thread_name.as_str()
        } else {
            main.name().unwrap_or_default()
        };
        for (k, s) in f.scopes.iter().enumerate() {
            let k = k as u64;
            assert_eq!(s.label, format!("scope {}.{k}", (n + k) % 3), "frame {n}");
            if n % 3 == 2 {
                assert_eq!(s.thread, expected_thread, "frame {n}");
            } else {
                assert_ne!(s.thread, thread_name.as_str(), "frame {n}");
                assert_eq!(s.thread, f.scopes[0].thread, "frame {n}");
            }
            let count = s.statistics.as_deref().unwrap().compute_kernel_invocations;
            match (nested, k) {
                (true, 0) => {
                    assert_eq!((s.kind, s.depth, s.parent), (PassKind::Scope, 0, None));
                    assert_eq!(count, (10 * n + 1) + (10 * n + 2), "frame {n}");
                }
                (true, _) => {
                    assert_eq!((s.kind, s.depth, s.parent), (PassKind::Compute, 1, Some(0)));
                    assert_eq!(count, 10 * n + k, "frame {n}");
                }
                (false, _) => {
                    assert_eq!((s.kind, s.depth, s.parent), (PassKind::Blit, 0, None));
                    assert_eq!(count, 10 * n + k, "frame {n}");
                }
            }
            assert_eq!(s.duration_ns, s.end_ns - s.start_ns);
        }
    }
}
