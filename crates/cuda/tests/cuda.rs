//! The CUDA backend. Without a CUDA driver (CI) the GPU tests each print one
//! line saying they skipped, and the no-driver test checks the typed error;
//! on a machine with one (the H200 through `device`) they all run.

mod common;

use common::{all_sets, device, timestamps};
use gpu_counters_cuda::{Device, OpenError};
use gpu_counters_hal::{
    cpu_monotonic_ns, BackendDevice, BackendRecorder, CommonCounterSet, CounterHeapDescriptor,
    CounterSampleBufferDescriptor, InvalidInput, SampleStatus, TimestampGranularity,
    COUNTER_ERROR_VALUE,
};

#[test]
fn without_a_driver_opening_is_a_typed_error() {
    if gpu_counters_cuda::driver_present() {
        // With a driver: an ordinal past the end is the typed error.
        let n = gpu_counters_cuda::device_count().unwrap();
        match Device::open(n + 3) {
            Err(OpenError::NoDevice { ordinal, there }) => {
                assert_eq!(ordinal, n + 3);
                assert!(there.contains(&n.to_string()) || n == 0, "{there}");
            }
            other => panic!("open past the end: {other:?}"),
        }
        return;
    }
    let e = Device::open(0).expect_err("no driver, yet a device");
    assert!(matches!(e, OpenError::NoDriver { .. }), "{e:?}");
    let message = e.to_string();
    assert!(message.contains("libcuda.so.1"), "{message}");
    assert!(matches!(
        gpu_counters_cuda::devices(),
        Err(OpenError::NoDriver { .. })
    ));
    assert!(matches!(
        gpu_counters_cuda::device_count(),
        Err(OpenError::NoDriver { .. })
    ));
}

/// Two timestamps on the stream: written, ordered, and calibrated inside the
/// CPU window around their work ± the bound; a sample never written is the
/// error value with NotWritten.
#[test]
fn timestamps_are_written_ordered_and_inside_the_cpu_window() {
    let Some(d) = device("timestamps_are_written_ordered_and_inside_the_cpu_window") else {
        return;
    };
    let calibration = d.calibration().unwrap();
    eprintln!(
        "calibration: {:?}, timer step {} ns",
        d.sample_timestamps().unwrap(),
        d.timer_step_ns()
    );
    let buffer = timestamps(&d, 3);
    let before = cpu_monotonic_ns();
    let mut rec = d.recorder();
    rec.sample_counters(&buffer, 0, TimestampGranularity::Precise)
        .unwrap();
    rec.sample_counters(&buffer, 1, TimestampGranularity::Relaxed)
        .unwrap();
    let submission = d.submit(rec).unwrap();
    let after = submission.wait().unwrap();
    let r = buffer.resolve_counter_range(0..3).unwrap();
    assert_eq!(
        r.statuses(),
        &[
            SampleStatus::Written,
            SampleStatus::Written,
            SampleStatus::NotWritten
        ]
    );
    let t = r.timestamps().unwrap();
    assert!(t[0].timestamp <= t[1].timestamp, "{t:?}");
    assert_eq!(t[2].timestamp, COUNTER_ERROR_VALUE);
    for s in &t[..2] {
        let c = calibration.to_cpu_ns(s.timestamp).unwrap();
        assert!(
            c.ns + c.error_bound_ns >= before && c.ns <= after + c.error_bound_ns,
            "{c:?} outside {before}..{after}"
        );
    }
}

/// A recorder dropped without being submitted: its launches ran anyway, so
/// its samples resolve as written (never a lost or made-up value), and
/// every object may be dropped in any order.
#[test]
fn a_dropped_recorder_still_resolves_and_drop_order_is_free() {
    let Some(d) = device("a_dropped_recorder_still_resolves_and_drop_order_is_free") else {
        return;
    };
    let buffer = timestamps(&d, 2);
    let heap = d
        .make_counter_heap(&CounterHeapDescriptor::timestamp(2))
        .unwrap();
    let mut rec = d.recorder();
    rec.sample_counters(&buffer, 0, TimestampGranularity::Precise)
        .unwrap();
    rec.write_timestamp(TimestampGranularity::Precise, &heap, 1)
        .unwrap();
    drop(rec);
    d.wait_idle().unwrap();
    let r = buffer.resolve_counter_range(0..2).unwrap();
    assert_eq!(r.statuses()[0], SampleStatus::Written);
    assert_eq!(r.statuses()[1], SampleStatus::NotWritten);
    let h = heap.resolve_counter_range(0..2).unwrap();
    assert_eq!(h.statuses()[1], SampleStatus::Written);
    heap.invalidate_counter_range(1..2).unwrap();
    let h = heap.resolve_counter_range(1..2).unwrap();
    assert_eq!(h.timestamps().unwrap()[0].timestamp, 0);
    // A submission, the device and the buffer dropped in that order, with
    // the submission's work possibly still running.
    let mut rec = d.recorder();
    rec.sample_counters(&buffer, 1, TimestampGranularity::Precise)
        .unwrap();
    let submission = d.submit(rec).unwrap();
    drop(d);
    drop(submission);
    let r = buffer.resolve_counter_range(1..2).unwrap();
    assert_eq!(r.statuses()[0], SampleStatus::Written);
}

/// A host reset of part of a sample buffer (`reset_range`, what the
/// profiler resets of a page after a frame) resets exactly that range, is
/// refused while an index of it is pending, and leaves the rest as it was.
#[test]
fn range_reset_resets_only_its_range() {
    let Some(d) = device("range_reset_resets_only_its_range") else {
        return;
    };
    let buffer = timestamps(&d, 6);
    let mut rec = d.recorder();
    for i in 0..4 {
        rec.sample_counters(&buffer, i, TimestampGranularity::Precise)
            .unwrap();
    }
    assert!(buffer.reset_range(2..4).is_err(), "recorded, not submitted");
    d.submit(rec).unwrap().wait().unwrap();
    // Ranges past the end and empty ones are refused, as by resolves.
    for (range, start, end) in [(4..7, 4, 7), (3..3, 3, 3)] {
        match buffer.reset_range(range).unwrap_err() {
            gpu_counters_hal::Error::Invalid(InvalidInput::RangeOutOfBounds {
                start: s,
                end: e,
                count: 6,
                ..
            }) => assert_eq!((s, e), (start, end)),
            e => panic!("expected RangeOutOfBounds, got {e:?}"),
        }
    }
    buffer.reset_range(0..2).unwrap();
    let resolved = buffer.resolve_counter_range(0..6).unwrap();
    assert_eq!(
        resolved.statuses(),
        &[
            SampleStatus::NotWritten,
            SampleStatus::NotWritten,
            SampleStatus::Written,
            SampleStatus::Written,
            SampleStatus::NotWritten,
            SampleStatus::NotWritten,
        ]
    );
}

/// A timestamp's value word is its own availability (the kernel writes
/// nothing else): a sample reset on the host resolves as never written, not
/// as its old value, and one written again (with or without a reset
/// between) resolves to the new value, after the old one.
#[test]
fn rewritten_and_reset_samples_never_show_their_old_value() {
    let Some(d) = device("rewritten_and_reset_samples_never_show_their_old_value") else {
        return;
    };
    let buffer = timestamps(&d, 2);
    let record = |indices: &[u32]| {
        let mut rec = d.recorder();
        for &i in indices {
            rec.sample_counters(&buffer, i, TimestampGranularity::Precise)
                .unwrap();
        }
        d.submit(rec).unwrap().wait().unwrap();
        let r = buffer.resolve_counter_range(0..2).unwrap();
        (r.statuses().to_vec(), r.timestamps().unwrap().to_vec())
    };
    let (st, first) = record(&[0, 1]);
    assert_eq!(st, [SampleStatus::Written; 2]);
    buffer.reset().unwrap();
    let r = buffer.resolve_counter_range(0..2).unwrap();
    assert_eq!(r.statuses(), &[SampleStatus::NotWritten; 2]);
    assert_eq!(r.timestamps().unwrap()[0].timestamp, COUNTER_ERROR_VALUE);
    // Written again after the reset: only index 0.
    let (st, second) = record(&[0]);
    assert_eq!(st, [SampleStatus::Written, SampleStatus::NotWritten]);
    assert!(
        second[0].timestamp > first[1].timestamp,
        "{first:?} {second:?}"
    );
    // Written again without a reset: the launch counts as one.
    let (st, third) = record(&[0]);
    assert_eq!(st[0], SampleStatus::Written);
    assert!(
        third[0].timestamp > second[0].timestamp,
        "{second:?} {third:?}"
    );
    // A result resolved into again keeps its memory, and holds the same.
    let mut into = gpu_counters_hal::ResolvedCounters::default();
    buffer.resolve_counter_range_into(0..2, &mut into).unwrap();
    let at = into.as_bytes().as_ptr();
    buffer.resolve_counter_range_into(0..2, &mut into).unwrap();
    assert_eq!(into.as_bytes().as_ptr(), at, "the result was reallocated");
    assert_eq!(into.timestamps().unwrap()[0].timestamp, third[0].timestamp);
    // The profiler's resolve reads the same, whether every sample is
    // written (index 0 alone) or not (both).
    let mut once = gpu_counters_hal::ResolvedTimestamps::default();
    buffer.resolve_timestamps_into(0..1, &mut once).unwrap();
    assert!(once.all_written());
    assert_eq!(
        once.get(0),
        Some((third[0].timestamp, SampleStatus::Written))
    );
    buffer.resolve_timestamps_into(0..2, &mut once).unwrap();
    assert_eq!(
        once.get(0),
        Some((third[0].timestamp, SampleStatus::Written))
    );
    assert_eq!(once.get(1).map(|(_, s)| s), Some(st[1]));
    assert!(!once.all_written() || st[1] == SampleStatus::Written);
}

/// A heap carries its descriptor's label (`MTL4CounterHeap.label`), which
/// errors about its entries name; `timestamp(count)` labels it by its size.
#[test]
fn heaps_carry_their_label() {
    let Some(d) = device("heaps_carry_their_label") else {
        return;
    };
    let heap = d
        .make_counter_heap(&CounterHeapDescriptor::timestamp(3).with_label("frame times"))
        .unwrap();
    assert_eq!(heap.label(), "frame times");
    assert!(format!("{heap:?}").contains("frame times"));
    let mut rec = d.recorder();
    let e = rec
        .write_timestamp(TimestampGranularity::Precise, &heap, 3)
        .unwrap_err();
    assert!(e.to_string().contains("`frame times`"), "{e}");
    let plain = d
        .make_counter_heap(&CounterHeapDescriptor::timestamp(5))
        .unwrap();
    assert_eq!(plain.label(), "timestamp heap of 5");
}

/// A device opened with the default options offers timestamps only:
/// statistics and hardware counters are asked for, and asking for their
/// sets on it is a typed error saying so.
#[test]
fn a_default_device_offers_timestamps_only() {
    if !common::gpu_present("a_default_device_offers_timestamps_only") {
        return;
    }
    let d = Device::open(0).expect("Device::open(0)");
    let sets: Vec<CommonCounterSet> = d.info().counter_sets.iter().map(|s| s.set).collect();
    assert_eq!(sets, [CommonCounterSet::Timestamp]);
    assert_eq!(
        d.statistics_unavailable(),
        Some("DeviceOptions::statistics is off")
    );
    assert_eq!(
        d.hardware_counters_unavailable(),
        Some("DeviceOptions::hardware_counters is off")
    );
    for set in [
        CommonCounterSet::Statistic,
        CommonCounterSet::StageUtilization,
    ] {
        let e = d
            .make_counter_sample_buffer(&CounterSampleBufferDescriptor::new(set, "x", 2))
            .expect_err("a set not asked for");
        assert!(
            matches!(
                e.invalid(),
                Some(InvalidInput::UnsupportedCounterSet { set: s, .. }) if *s == set
            ),
            "{e}"
        );
    }
    let times = timestamps(&d, 2);
    let mut rec = d.recorder();
    rec.sample_counters(&times, 0, TimestampGranularity::Precise)
        .unwrap();
    rec.sample_counters(&times, 1, TimestampGranularity::Precise)
        .unwrap();
    d.submit(rec).unwrap().wait().unwrap();
    let r = times.resolve_counter_range(0..2).unwrap();
    assert_eq!(r.statuses(), &[SampleStatus::Written; 2]);
}

/// What CUDA does not offer is a typed error naming it, never zeros.
#[test]
fn unsupported_sets_and_bad_sizes_are_typed_errors() {
    let Some(d) = device("unsupported_sets_and_bad_sizes_are_typed_errors") else {
        return;
    };
    let mut unoffered = vec![];
    if d.hardware_counters_unavailable().is_some() {
        unoffered.push(CommonCounterSet::StageUtilization);
    }
    if d.statistics_unavailable().is_some() {
        unoffered.push(CommonCounterSet::Statistic);
    }
    for set in unoffered {
        let e = d
            .make_counter_sample_buffer(&CounterSampleBufferDescriptor::new(set, "x", 4))
            .expect_err("an unoffered set");
        assert!(
            matches!(
                e.invalid(),
                Some(InvalidInput::UnsupportedCounterSet { .. })
            ),
            "{e}"
        );
    }
    let e = d
        .make_counter_sample_buffer(&CounterSampleBufferDescriptor::new(
            CommonCounterSet::Timestamp,
            "empty",
            0,
        ))
        .expect_err("zero samples");
    assert!(
        matches!(e.invalid(), Some(InvalidInput::SampleCountZero { .. })),
        "{e}"
    );
    let buffer = timestamps(&d, 2);
    let mut rec = d.recorder();
    let e = rec
        .sample_counters(&buffer, 2, TimestampGranularity::Precise)
        .expect_err("index past the end");
    assert!(
        matches!(e.invalid(), Some(InvalidInput::IndexOutOfRange { .. })),
        "{e}"
    );
    // Another device's buffer.
    let other = Device::open_with(0, &all_sets()).unwrap();
    let foreign = timestamps(&other, 1);
    let e = rec
        .sample_counters(&foreign, 0, TimestampGranularity::Precise)
        .expect_err("a foreign buffer");
    assert!(
        matches!(e.invalid(), Some(InvalidInput::ForeignObject { .. })),
        "{e}"
    );
}

/// The profiler over CUDA: nested scopes from two threads' recorders, every
/// scope inside its CPU window ± bound, nothing dropped.
#[test]
fn profiler_scopes_from_two_threads() {
    use gpu_counters_hal::timeline::PassKind;
    use gpu_counters_profiler::{Profiler, ProfilerOptions};
    let Some(d) = device("profiler_scopes_from_two_threads") else {
        return;
    };
    let profiler = Profiler::new(&d, ProfilerOptions::default()).unwrap();
    for _ in 0..10 {
        let frame = profiler.begin_frame().unwrap();
        let before = cpu_monotonic_ns();
        let submissions: Vec<_> = std::thread::scope(|s| {
            let threads: Vec<_> = (0..2)
                .map(|t| {
                    let (frame, d) = (&frame, &d);
                    s.spawn(move || {
                        let mut rec = d.recorder();
                        let outer = frame
                            .scope(&mut rec, &format!("outer {t}"), PassKind::Scope)
                            .unwrap();
                        let inner = frame
                            .scope(&mut rec, &format!("inner {t}"), PassKind::Compute)
                            .unwrap();
                        inner.end(&mut rec).unwrap();
                        outer.end(&mut rec).unwrap();
                        let submission = d.submit(rec).unwrap();
                        submission.wait().unwrap();
                        submission
                    })
                })
                .collect();
            threads.into_iter().map(|t| t.join().unwrap()).collect()
        });
        let after = cpu_monotonic_ns();
        profiler.end_frame(frame, &submissions).unwrap();
        let frames = profiler
            .wait_collect_all(std::time::Duration::from_secs(10))
            .unwrap();
        let f = &frames[0];
        assert_eq!(f.dropped_scopes, 0, "{:?}", f.drops);
        assert_eq!(f.scopes.len(), 4);
        for s in &f.scopes {
            assert!(s.start_ns <= s.end_ns, "{s:?}");
            assert!(
                s.start_ns + s.error_bound_ns >= before && s.end_ns <= after + s.error_bound_ns,
                "{s:?} outside {before}..{after}"
            );
            if s.label.starts_with("inner") {
                let parent = &f.scopes[s.parent.expect("a parent")];
                assert_eq!(parent.label, s.label.replace("inner", "outer"));
            }
        }
    }
}

/// What an `InvalidInput::ForeignObject` error names.
fn foreign(e: gpu_counters_hal::Error) -> &'static str {
    match e.invalid() {
        Some(InvalidInput::ForeignObject { what }) => what,
        other => panic!("expected ForeignObject, got {other:?} ({e})"),
    }
}

/// Two devices opened on ordinal 0 (two gpu-counters devices, one GPU):
/// every call that takes two objects refuses the other device's with
/// `ForeignObject` naming it, before anything is launched (hal's shared
/// `DeviceId` check): its sample buffer, heap and statistic buffer on a
/// recorder, its buffer as a pass attachment, its recorder submitted
/// through this device, and its profiler's frame with this device's
/// recorder. Nothing of the other device's is written; this device's
/// recording still runs and writes exactly its own samples.
#[test]
fn objects_of_another_device_are_refused() {
    use gpu_counters_cuda::PassAttachment;
    use gpu_counters_hal::timeline::PassKind;
    use gpu_counters_profiler::{Profiler, ProfilerError, ProfilerOptions};
    let Some(d) = device("objects_of_another_device_are_refused") else {
        return;
    };
    let other = Device::open_with(0, &all_sets()).unwrap();
    assert_ne!(d.device_id(), other.device_id());
    let (mine, theirs) = (timestamps(&d, 4), timestamps(&other, 4));
    let heap = other
        .make_counter_heap(&CounterHeapDescriptor::timestamp(4))
        .unwrap();
    let mut rec = d.recorder();
    assert_eq!(rec.device_id(), d.device_id());
    rec.sample_counters(&mine, 0, TimestampGranularity::Precise)
        .unwrap();
    let buffer = "counter sample buffer";
    assert_eq!(
        foreign(
            rec.sample_counters(&theirs, 0, TimestampGranularity::Precise)
                .unwrap_err()
        ),
        buffer
    );
    assert_eq!(
        foreign(
            rec.write_timestamp(TimestampGranularity::Relaxed, &heap, 0)
                .unwrap_err()
        ),
        "counter heap"
    );
    if other.statistics_unavailable().is_none() {
        let stats = other
            .make_counter_sample_buffer(&CounterSampleBufferDescriptor::new(
                CommonCounterSet::Statistic,
                "their statistics",
                2,
            ))
            .unwrap();
        assert_eq!(
            foreign(
                rec.sample_counters(&stats, 0, TimestampGranularity::Precise)
                    .unwrap_err()
            ),
            buffer
        );
        let r = stats.resolve_counter_range(0..2).unwrap();
        assert_eq!(r.statuses(), &[SampleStatus::NotWritten; 2]);
    }
    let attach = |b| PassAttachment {
        sample_buffer: b,
        start_of_encoder_sample_index: Some(1),
        end_of_encoder_sample_index: Some(2),
    };
    assert_eq!(
        foreign(
            rec.begin_compute_pass(&[attach(&mine), attach(&theirs)])
                .err()
                .unwrap()
        ),
        buffer
    );
    // Their profiler's frame with this recorder.
    let profiler = Profiler::new(&other, ProfilerOptions::default()).unwrap();
    let frame = profiler.begin_frame().unwrap();
    let refused = |e: ProfilerError| match e {
        ProfilerError::Counters(e) => foreign(e),
        other => panic!("expected a counters error, got {other:?}"),
    };
    assert_eq!(
        refused(
            frame
                .scope(&mut rec, "foreign", PassKind::Scope)
                .unwrap_err()
        ),
        "recorder"
    );
    assert_eq!(
        refused(
            frame
                .pass_scope(&mut rec, "foreign", PassKind::Compute)
                .unwrap_err()
        ),
        "recorder"
    );
    profiler.end_frame(frame, []).unwrap();
    let frames = profiler
        .wait_collect_all(std::time::Duration::from_secs(10))
        .unwrap();
    assert_eq!(frames[0].dropped_scopes, 0, "{:?}", frames[0].drops);
    // Their recorder through this device: refused (its drop submits it to
    // its own device, as any recorder dropped unsubmitted).
    let mut theirs_rec = other.recorder();
    theirs_rec
        .sample_counters(&theirs, 3, TimestampGranularity::Precise)
        .unwrap();
    assert_eq!(foreign(d.submit(theirs_rec).unwrap_err()), "recorder");
    d.submit(rec).unwrap().wait().unwrap();
    let r = mine.resolve_counter_range(0..4).unwrap();
    assert_eq!(
        r.statuses(),
        &[
            SampleStatus::Written,
            SampleStatus::NotWritten,
            SampleStatus::NotWritten,
            SampleStatus::NotWritten
        ]
    );
    other.wait_idle().unwrap();
    let r = theirs.resolve_counter_range(0..3).unwrap();
    assert_eq!(r.statuses(), &[SampleStatus::NotWritten; 3]);
    let r = heap.resolve_counter_range(0..4).unwrap();
    assert_eq!(r.statuses(), &[SampleStatus::NotWritten; 4]);
}

/// A compute pass leaked with `mem::forget`: its start sample is written,
/// its end sample never is and resolves NotWritten with the error value
/// (never a made-up value), and the recorder goes on recording and
/// submitting as usual.
#[test]
fn a_leaked_compute_pass_leaves_its_end_sample_not_written() {
    use gpu_counters_cuda::PassAttachment;
    let Some(d) = device("a_leaked_compute_pass_leaves_its_end_sample_not_written") else {
        return;
    };
    let buffer = timestamps(&d, 4);
    let mut rec = d.recorder();
    std::mem::forget(
        rec.begin_compute_pass(&[PassAttachment {
            sample_buffer: &buffer,
            start_of_encoder_sample_index: Some(0),
            end_of_encoder_sample_index: Some(1),
        }])
        .unwrap(),
    );
    rec.sample_counters(&buffer, 2, TimestampGranularity::Precise)
        .unwrap();
    d.submit(rec).unwrap().wait().unwrap();
    let r = buffer.resolve_counter_range(0..4).unwrap();
    assert_eq!(
        r.statuses(),
        &[
            SampleStatus::Written,
            SampleStatus::NotWritten,
            SampleStatus::Written,
            SampleStatus::NotWritten
        ]
    );
    let t = r.timestamps().unwrap();
    assert_eq!(t[1].timestamp, COUNTER_ERROR_VALUE);
    assert!(t[0].timestamp <= t[2].timestamp);
    // The end index is free for a later recording.
    let mut rec = d.recorder();
    rec.sample_counters(&buffer, 1, TimestampGranularity::Precise)
        .unwrap();
    d.submit(rec).unwrap().wait().unwrap();
    assert_eq!(
        buffer.resolve_counter_range(1..2).unwrap().statuses(),
        &[SampleStatus::Written]
    );
}
