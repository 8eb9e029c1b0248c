//! The fake backend through the backend traits: what the layers above hal
//! rely on, checked without a GPU.

use gpu_counters_hal::fake::{Fake, FakeDevice};
use gpu_counters_hal::{
    cpu_monotonic_ns, Backend, BackendDevice, BackendRecorder, BackendSubmission, CommonCounterSet,
    CounterHeapDescriptor, CounterHeapType, CounterSampleBufferDescriptor, Error, InvalidInput,
    ResolvedCounters, SampleStatus, SampleValue, TimestampGranularity,
};

/// A heap carries its descriptor's label (`MTL4CounterHeap.label`), which
/// errors about its entries name; `timestamp(count)` labels it by its size.
#[test]
fn heaps_carry_their_label() {
    let device = FakeDevice::new("fake", 32).unwrap();
    let heap = device
        .make_counter_heap(&CounterHeapDescriptor::timestamp(3).with_label("frame times"))
        .unwrap();
    assert_eq!(heap.label(), "frame times");
    assert_eq!(heap.heap_type(), CounterHeapType::Timestamp);
    assert!(format!("{heap:?}").contains("frame times"));
    assert_eq!(heap.clone().label(), "frame times");
    let e = heap.resolve_counter_range(0..4).unwrap_err();
    assert_eq!(
        e.invalid(),
        Some(&InvalidInput::RangeOutOfBounds {
            label: "frame times".into(),
            start: 0,
            end: 4,
            count: 3,
        })
    );
    let mut cmd = device.recorder();
    let e = cmd
        .write_timestamp(TimestampGranularity::Precise, &heap, 3)
        .unwrap_err();
    assert!(e.to_string().contains("`frame times`"), "{e}");
    let plain = device
        .make_counter_heap(&CounterHeapDescriptor::timestamp(5))
        .unwrap();
    assert_eq!(plain.label(), "timestamp heap of 5");
}

/// Heap writes resolve to ticks on the device's clock once run, not ready
/// before, and invalidated entries to 0; invalidating while pending fails.
#[test]
fn heap_writes_resolve_and_invalidate() {
    let device = FakeDevice::new("fake", 32).unwrap();
    let heap = device
        .make_counter_heap(&CounterHeapDescriptor::timestamp(3))
        .unwrap();
    let mut cmd = device.recorder();
    cmd.write_timestamp(TimestampGranularity::Precise, &heap, 0)
        .unwrap();
    cmd.write_timestamp(TimestampGranularity::Relaxed, &heap, 1)
        .unwrap();
    let submission = device.submit(cmd).unwrap();
    let r = heap.resolve_counter_range(0..3).unwrap();
    assert_eq!(
        r.statuses(),
        &[
            SampleStatus::NotReady,
            SampleStatus::NotReady,
            SampleStatus::NotWritten
        ]
    );
    assert!(heap.invalidate_counter_range(0..1).is_err(), "pending");
    submission.wait();
    let r = heap.resolve_counter_range(0..3).unwrap();
    assert_eq!(r.statuses()[..2], [SampleStatus::Written; 2]);
    let t = r.timestamps().unwrap();
    assert!(
        t[0].timestamp < 1 << 32 && t[1].timestamp < 1 << 32,
        "masked to 32 bits"
    );
    heap.invalidate_counter_range(0..1).unwrap();
    let r = heap.resolve_counter_range(0..1).unwrap();
    assert_eq!(r.statuses(), &[SampleStatus::Invalidated]);
    assert_eq!(r.timestamps().unwrap()[0].timestamp, 0);
}

/// Statistic samples count exactly what was dispatched between them in one
/// recorder, and samples of two recorders are not comparable.
#[test]
fn statistics_are_exact_within_a_recorder_only() {
    let device = FakeDevice::new("fake", 64).unwrap();
    let stats = device
        .make_counter_sample_buffer(&CounterSampleBufferDescriptor::new(
            CommonCounterSet::Statistic,
            "stats",
            4,
        ))
        .unwrap();
    let mut cmd = device.recorder();
    cmd.sample_counters(&stats, 0, TimestampGranularity::Relaxed)
        .unwrap();
    cmd.dispatch(1024);
    cmd.sample_counters(&stats, 1, TimestampGranularity::Relaxed)
        .unwrap();
    device.submit(cmd).unwrap().wait();
    let mut other = device.recorder();
    other
        .sample_counters(&stats, 2, TimestampGranularity::Relaxed)
        .unwrap();
    device.submit(other).unwrap().wait();
    let r = stats.resolve_counter_range(0..4).unwrap();
    match r.statistics_between(0, 1).unwrap() {
        SampleValue::Value(d) => assert_eq!(d.compute_kernel_invocations, 1024),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        r.statistics_between(1, 2).unwrap(),
        SampleValue::NotComparable
    );
    assert_eq!(r.statistics_between(2, 3).unwrap(), SampleValue::NotWritten);
}

/// What an `InvalidInput::ForeignObject` error names.
fn foreign(e: gpu_counters_hal::Error) -> &'static str {
    match e.invalid() {
        Some(gpu_counters_hal::InvalidInput::ForeignObject { what }) => what,
        other => panic!("expected ForeignObject, got {other:?} ({e})"),
    }
}

/// Two fake devices: each has its own id (its recorders the same), and
/// every call that takes two objects refuses the other device's with
/// `ForeignObject` naming it: a sample buffer, a heap, a statistic buffer on
/// a recorder, and a recorder submitted through the other device (dropped
/// unsubmitted: its samples resolve NotWritten). Nothing of the other
/// device's is written.
#[test]
fn objects_of_another_fake_device_are_refused() {
    let (a, b) = (
        FakeDevice::new("a", 64).unwrap(),
        FakeDevice::new("b", 64).unwrap(),
    );
    assert_ne!(a.device_id(), b.device_id());
    assert_eq!(a.recorder().device_id(), a.device_id());
    assert_eq!(a.clone().device_id(), a.device_id());
    let make = |d: &FakeDevice, set| {
        d.make_counter_sample_buffer(&CounterSampleBufferDescriptor::new(set, "s", 4))
            .unwrap()
    };
    let (ts_b, stats_b) = (
        make(&b, CommonCounterSet::Timestamp),
        make(&b, CommonCounterSet::Statistic),
    );
    let heap_b = b
        .make_counter_heap(&CounterHeapDescriptor::timestamp(4))
        .unwrap();
    let mut rec = a.recorder();
    let precise = TimestampGranularity::Precise;
    assert_eq!(
        foreign(rec.sample_counters(&ts_b, 0, precise).unwrap_err()),
        "counter sample buffer"
    );
    assert_eq!(
        foreign(rec.sample_counters(&stats_b, 0, precise).unwrap_err()),
        "counter sample buffer"
    );
    assert_eq!(
        foreign(rec.write_timestamp(precise, &heap_b, 0).unwrap_err()),
        "counter heap"
    );
    a.submit(rec).unwrap().wait();
    let mut rec_b = b.recorder();
    rec_b.sample_counters(&ts_b, 1, precise).unwrap();
    assert_eq!(foreign(a.submit(rec_b).unwrap_err()), "recorder");
    b.run_all();
    for r in [
        ts_b.resolve_counter_range(0..4).unwrap(),
        stats_b.resolve_counter_range(0..4).unwrap(),
        heap_b.resolve_counter_range(0..4).unwrap(),
    ] {
        assert_eq!(r.statuses(), &[SampleStatus::NotWritten; 4]);
    }
}

/// A duration between two samples is one call: both times calibrated onto
/// the CPU clock inside the window that brackets the work, their
/// difference, and the sum of their bounds; a sample without a value gives
/// its status, never a number; bad input is a typed error.
#[test]
fn a_duration_between_two_samples_is_calibrated_with_its_bound() {
    let device = FakeDevice::new("fake", 64).unwrap();
    let times = device
        .make_counter_sample_buffer(&CounterSampleBufferDescriptor::new(
            CommonCounterSet::Timestamp,
            "times",
            4,
        ))
        .unwrap();
    let mut cmd = device.recorder();
    cmd.sample_counters(&times, 0, TimestampGranularity::Precise)
        .unwrap();
    cmd.dispatch(64);
    cmd.sample_counters(&times, 1, TimestampGranularity::Precise)
        .unwrap();
    let before = cpu_monotonic_ns();
    let submission = device.submit(cmd).unwrap();
    // Index 2 is written by a submission that never runs here.
    let mut pending = device.recorder();
    pending
        .sample_counters(&times, 2, TimestampGranularity::Precise)
        .unwrap();
    let pending = device.submit(pending).unwrap();
    let after = submission.wait();
    let calibration = device.calibration().unwrap();
    let resolved = times.resolve_counter_range(0..4).unwrap();
    let d = match calibration.duration(&resolved, 0, 1).unwrap() {
        SampleValue::Value(d) => d,
        other => panic!("samples 0 and 1 were written: {other:?}"),
    };
    let ts = resolved.timestamps().unwrap();
    assert_eq!(d.start, calibration.to_cpu_ns(ts[0].timestamp).unwrap());
    assert_eq!(d.end, calibration.to_cpu_ns(ts[1].timestamp).unwrap());
    assert_eq!(d.ns, d.end.ns - d.start.ns);
    assert_eq!(
        d.error_bound_ns,
        d.start.error_bound_ns + d.end.error_bound_ns
    );
    assert!(
        d.start.ns + d.start.error_bound_ns >= before,
        "{d:?} {before}"
    );
    assert!(d.end.ns <= after + d.end.error_bound_ns, "{d:?} {after}");
    assert!(d.ns <= after - before + d.error_bound_ns, "{d:?}");
    // No value: the first sample that lacks one says why.
    assert_eq!(
        calibration.duration(&resolved, 0, 3).unwrap(),
        SampleValue::NotWritten
    );
    assert_eq!(
        calibration.duration(&resolved, 2, 3).unwrap(),
        SampleValue::NotReady
    );
    assert_eq!(
        calibration.duration(&resolved, 3, 2).unwrap(),
        SampleValue::NotWritten
    );
    assert_eq!(
        calibration.duration(&resolved, 1, 2).unwrap(),
        SampleValue::NotReady
    );
    match calibration.duration(&resolved, 0, 4).unwrap_err() {
        Error::Invalid(InvalidInput::IndexOutOfRange {
            index: 4, count: 4, ..
        }) => {}
        e => panic!("expected IndexOutOfRange, got {e:?}"),
    }
    let stats = device
        .make_counter_sample_buffer(&CounterSampleBufferDescriptor::new(
            CommonCounterSet::Statistic,
            "stats",
            2,
        ))
        .unwrap();
    let statistics = stats.resolve_counter_range(0..2).unwrap();
    match calibration.duration(&statistics, 0, 1).unwrap_err() {
        Error::Invalid(InvalidInput::Argument(m)) => assert!(m.contains("statistic"), "{m}"),
        e => panic!("expected Argument, got {e:?}"),
    }
    pending.wait();
}

/// Exact durations from known ticks (the fake's period is 1 ns), and an end
/// sample before its start sample is a typed error naming both.
#[test]
fn a_duration_is_exact_for_known_ticks_and_refuses_a_reversed_pair() {
    let device = FakeDevice::new("fake", 64).unwrap();
    let calibration = device.calibration().unwrap();
    let anchor = calibration.latest();
    let ticks = [anchor.gpu_ticks + 2_000, anchor.gpu_ticks + 1_000];
    let bytes = ticks.iter().flat_map(|t| t.to_ne_bytes()).collect();
    let resolved = ResolvedCounters::new(
        CommonCounterSet::Timestamp,
        0,
        bytes,
        vec![SampleStatus::Written; 2],
    )
    .unwrap();
    match calibration.duration(&resolved, 1, 0).unwrap() {
        SampleValue::Value(d) => {
            assert_eq!(d.ns, 1_000);
            assert_eq!(
                (d.start.ns, d.end.ns),
                (anchor.cpu_ns + 1_000, anchor.cpu_ns + 2_000)
            );
        }
        other => panic!("{other:?}"),
    }
    match calibration.duration(&resolved, 0, 0).unwrap() {
        SampleValue::Value(d) => assert_eq!(d.ns, 0),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        calibration.duration(&resolved, 0, 1).unwrap_err(),
        Error::Invalid(InvalidInput::EndBeforeStart {
            start: 0,
            end: 1,
            start_ns: anchor.cpu_ns + 2_000,
            end_ns: anchor.cpu_ns + 1_000,
        })
    );
}

/// A submission through the backend interface (`Backend::Submission`): its
/// CPU submit time precedes its work, it is not done until its work ran,
/// and a wait returns a time after it.
#[test]
fn a_submission_through_the_backend_interface() {
    fn check<B: Backend>(s: &B::Submission, before: u64) {
        assert!(s.cpu_submit_ns() >= before);
        assert!(!s.is_done().unwrap(), "the fake runs work only on a wait");
        let after = s.wait().unwrap();
        assert!(after >= s.cpu_submit_ns());
        assert!(s.is_done().unwrap());
    }
    let device = FakeDevice::new("fake", 64).unwrap();
    let before = cpu_monotonic_ns();
    let submission = device.submit(device.recorder()).unwrap();
    check::<Fake>(&submission, before);
}
