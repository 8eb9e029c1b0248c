//! The fake backend through the backend traits: what the layers above hal
//! rely on, checked without a GPU.

use gpu_counters_hal::fake::FakeDevice;
use gpu_counters_hal::{
    BackendDevice, BackendHeap, BackendRecorder, BackendSampleBuffer, CommonCounterSet,
    CounterHeapDescriptor, CounterSampleBufferDescriptor, SampleStatus, SampleValue,
    TimestampGranularity,
};

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
