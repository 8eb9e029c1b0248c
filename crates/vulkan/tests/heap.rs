//! Metal 4 counter heaps: precise and relaxed writes, invalidation.
mod common;

use gpu_counters_hal::{
    CounterHeapDescriptor, CounterHeapType, SampleStatus, TimestampGranularity, COUNTER_ERROR_VALUE,
};
use gpu_counters_vulkan::{CommandBuffer, ComputePassDescriptor, GpuBuffer, MemoryLocation};
use gpu_counters_workloads::ComputeWorkload;

#[test]
fn heap_writes_resolve_and_invalidate() {
    let device = common::device();
    let heap = device
        .make_counter_heap(&CounterHeapDescriptor::timestamp(7))
        .unwrap();
    assert_eq!(heap.count(), 7);
    assert_eq!(heap.entry_size(), 8);
    assert_eq!(
        device.size_of_counter_heap_entry(CounterHeapType::Timestamp),
        8
    );
    assert_eq!(
        heap.timestamp_frequency(),
        1e9 / device.info().timestamp_period_ns
    );
    heap.invalidate_counter_range(5..6).unwrap();

    let mut work = ComputeWorkload::new(&common::ctx(&device), 16, 4, 2).unwrap();
    let mut cmd = CommandBuffer::new(&device).unwrap();
    {
        let mut pass = cmd
            .compute_encoder(&ComputePassDescriptor::default())
            .unwrap();
        // SAFETY: `pass.raw()` is recording outside any render pass (a compute encoder)
        // on `device`, where the workload was built; the GPU is done with it
        // (`common::run` waits) before it is destroyed.
        unsafe { work.record_dispatch(device.raw(), pass.raw()) };
        pass.write_timestamp(TimestampGranularity::Precise, &heap, 0)
            .unwrap();
        // SAFETY: `pass.raw()` is recording outside any render pass (a compute encoder)
        // on `device`, where the workload was built; the GPU is done with it
        // (`common::run` waits) before it is destroyed.
        unsafe {
            work.record_barrier(device.raw(), pass.raw());
            work.record_dispatch(device.raw(), pass.raw());
        }
        pass.write_timestamp(TimestampGranularity::Relaxed, &heap, 1)
            .unwrap();
        // SAFETY: `pass.raw()` is recording outside any render pass (a compute encoder)
        // on `device`, where the workload was built; the GPU is done with it
        // (`common::run` waits) before it is destroyed.
        unsafe {
            work.record_barrier(device.raw(), pass.raw());
            work.record_dispatch(device.raw(), pass.raw());
        }
        pass.write_timestamp(TimestampGranularity::Relaxed, &heap, 2)
            .unwrap();
        pass.end_encoding().unwrap();
    }
    cmd.write_timestamp(TimestampGranularity::Relaxed, &heap, 3)
        .unwrap();
    let (submit, complete) = common::run(cmd);

    let r = heap.resolve_counter_range(0..7).unwrap();
    use SampleStatus::*;
    assert_eq!(
        r.statuses(),
        &[
            Written,
            Written,
            Written,
            Written,
            NotWritten,
            Invalidated,
            NotWritten
        ]
    );
    let t: Vec<u64> = r
        .timestamps()
        .unwrap()
        .iter()
        .map(|t| t.timestamp)
        .collect();
    assert_eq!(t[1], t[2], "relaxed writes of one pass are coalesced");
    assert!(t[0] <= t[1] && t[1] <= t[3]);
    assert_eq!(t[4], COUNTER_ERROR_VALUE);
    assert_eq!(t[5], 0);
    assert_eq!(t[6], COUNTER_ERROR_VALUE);
    let cal = device.calibration().unwrap();
    for &ticks in &t[..4] {
        let c = cal.to_cpu_ns(ticks).unwrap();
        assert!(c.ns + c.error_bound_ns >= submit && c.ns <= complete + c.error_bound_ns);
    }

    // GPU resolve gives the same bytes.
    let dst = GpuBuffer::new(&device, 56, MemoryLocation::HostVisible).unwrap();
    let mut cmd = CommandBuffer::new(&device).unwrap();
    cmd.resolve_counter_heap(&heap, 0..7, &dst, 0).unwrap();
    common::run(cmd);
    assert_eq!(dst.read(0, 56).unwrap(), r.as_bytes());

    // Invalidated entries resolve to 0, on both sides.
    heap.invalidate_counter_range(0..3).unwrap();
    let r = heap.resolve_counter_range(0..4).unwrap();
    assert_eq!(
        r.statuses(),
        &[Invalidated, Invalidated, Invalidated, Written]
    );
    assert_eq!(&r.as_bytes()[..24], &[0u8; 24]);
    let mut cmd = CommandBuffer::new(&device).unwrap();
    cmd.resolve_counter_heap(&heap, 0..4, &dst, 8).unwrap();
    common::run(cmd);
    assert_eq!(dst.read(8, 32).unwrap(), r.as_bytes());

    // Entries can be written again after invalidation.
    let mut cmd = CommandBuffer::new(&device).unwrap();
    cmd.write_timestamp(TimestampGranularity::Precise, &heap, 0)
        .unwrap();
    cmd.write_timestamp(TimestampGranularity::Precise, &heap, 3)
        .unwrap();
    common::run(cmd);
    let r = heap.resolve_counter_range(0..4).unwrap();
    assert_eq!(r.statuses(), &[Written, Invalidated, Invalidated, Written]);
    // SAFETY: the device finished every command buffer that used the workload
    // (`common::run` waits), which was built on `device`.
    unsafe { work.destroy(device.raw()) };
    common::assert_no_validation_messages(&device);
}

/// A heap carries its descriptor's label (`MTL4CounterHeap.label`), which
/// errors about its entries name; `timestamp(count)` labels it by its size.
#[test]
fn heaps_carry_their_label() {
    let device = common::device();
    let heap = device
        .make_counter_heap(&CounterHeapDescriptor::timestamp(3).with_label("frame times"))
        .unwrap();
    assert_eq!(heap.label(), "frame times");
    assert!(format!("{heap:?}").contains("frame times"));
    assert_eq!(heap.clone().label(), "frame times");
    let e = heap.resolve_counter_range(0..4).unwrap_err();
    assert_eq!(
        e.invalid(),
        Some(&gpu_counters_hal::InvalidInput::RangeOutOfBounds {
            label: "frame times".into(),
            start: 0,
            end: 4,
            count: 3,
        })
    );
    let mut cmd = CommandBuffer::new(&device).unwrap();
    let mut pass = cmd
        .compute_encoder(&ComputePassDescriptor::default())
        .unwrap();
    let e = pass
        .write_timestamp(TimestampGranularity::Precise, &heap, 3)
        .unwrap_err();
    assert!(e.to_string().contains("`frame times`"), "{e}");
    pass.end_encoding().unwrap();
    let plain = device
        .make_counter_heap(&CounterHeapDescriptor::timestamp(5))
        .unwrap();
    assert_eq!(plain.label(), "timestamp heap of 5");
    common::assert_no_validation_messages(&device);
}
