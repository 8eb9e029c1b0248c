//! Resolves: error values where nothing was written or the GPU has not
//! finished, CPU and GPU resolves byte for byte, encoder-level chains.
mod common;

use gpu_counters_hal::{
    CommonCounterSet, CounterResultStatistic, CounterSampleBufferDescriptor, SampleStatus,
    SampleValue, StorageMode, TimestampGranularity, COUNTER_ERROR_VALUE,
};
use gpu_counters_vulkan::{
    CommandBuffer, ComputePassDescriptor, CounterSampleBuffer, Device, GpuBuffer, MemoryLocation,
    PassSampleBufferAttachment,
};
use gpu_counters_workloads::ComputeWorkload;

fn buffer(device: &Device, set: CommonCounterSet, count: u32) -> CounterSampleBuffer {
    device
        .make_counter_sample_buffer(&CounterSampleBufferDescriptor::new(
            set,
            format!("{set}"),
            count,
        ))
        .unwrap()
}

fn attach(b: &CounterSampleBuffer, start: u32, end: u32) -> PassSampleBufferAttachment<'_> {
    PassSampleBufferAttachment {
        sample_buffer: b,
        start_of_encoder_sample_index: Some(start),
        end_of_encoder_sample_index: Some(end),
    }
}

fn words(bytes: &[u8]) -> Vec<u64> {
    bytes
        .chunks_exact(8)
        .map(|c| u64::from_ne_bytes(c.try_into().unwrap()))
        .collect()
}

#[test]
fn unwritten_samples_resolve_to_the_error_value_on_cpu_and_gpu() {
    let device = common::device();
    let times = buffer(&device, CommonCounterSet::Timestamp, 6);
    let stats = buffer(&device, CommonCounterSet::Statistic, 6);
    let mut work = ComputeWorkload::new(&common::ctx(&device), 8, 3, 1).unwrap();
    let mut cmd = CommandBuffer::new(&device).unwrap();
    let pass = cmd
        .compute_encoder(&ComputePassDescriptor {
            sample_buffer_attachments: &[attach(&times, 1, 3), attach(&stats, 1, 3)],
        })
        .unwrap();
    // SAFETY: `pass.raw()` is recording outside any render pass (a compute encoder)
    // on `device`, where the workload was built; the GPU is done with it
    // (`common::run` waits) before it is destroyed.
    unsafe { work.record_dispatch(device.raw(), pass.raw()) };
    pass.end_encoding().unwrap();
    common::run(cmd);

    for (b, per) in [(&times, 1usize), (&stats, 8)] {
        let r = b.resolve_counter_range(0..6).unwrap();
        use SampleStatus::*;
        assert_eq!(
            r.statuses(),
            &[NotWritten, Written, NotWritten, Written, NotWritten, NotWritten]
        );
        let w = words(r.as_bytes());
        for i in [0, 2, 4, 5] {
            assert!(w[i * per..(i + 1) * per]
                .iter()
                .all(|&v| v == COUNTER_ERROR_VALUE));
        }
        // GPU resolve at an offset into a buffer pre-filled with a pattern:
        // same bytes as the CPU resolve, nothing outside the range touched.
        let size = 32 + r.as_bytes().len() as u64 + 32;
        let dst = GpuBuffer::new(&device, size, MemoryLocation::HostVisible).unwrap();
        dst.write(0, &vec![0xAB; size as usize]).unwrap();
        let mut cmd = CommandBuffer::new(&device).unwrap();
        cmd.resolve_counters(b, 0..6, &dst, 32).unwrap();
        common::run(cmd);
        let got = dst.read(0, size).unwrap();
        assert_eq!(
            &got[32..32 + r.as_bytes().len()],
            r.as_bytes(),
            "{} GPU vs CPU",
            b.label()
        );
        assert!(got[..32]
            .iter()
            .chain(&got[size as usize - 32..])
            .all(|&x| x == 0xAB));
    }
    let st = stats.resolve_counter_range(1..4).unwrap();
    let s: &[CounterResultStatistic] = st.statistics().unwrap();
    assert_eq!(s[2].since(&s[0]).compute_kernel_invocations, 24);
    // SAFETY: the device finished every command buffer that used the workload
    // (`common::run` waits), which was built on `device`.
    unsafe { work.destroy(device.raw()) };
    common::assert_no_validation_messages(&device);
}

#[test]
fn resolve_before_completion_never_yields_zeros() {
    let device = common::device();
    let times = buffer(&device, CommonCounterSet::Timestamp, 2);
    let stats = buffer(&device, CommonCounterSet::Statistic, 2);
    let gate = common::Gate::new(&device);
    let mut cmd = CommandBuffer::new(&device).unwrap();
    gate.record_wait(cmd.raw());
    let pass = cmd
        .compute_encoder(&ComputePassDescriptor {
            sample_buffer_attachments: &[attach(&times, 0, 1), attach(&stats, 0, 1)],
        })
        .unwrap();
    pass.end_encoding().unwrap();
    // Recorded, not yet submitted.
    for b in [&times, &stats] {
        let r = b.resolve_counter_range(0..2).unwrap();
        assert_eq!(r.statuses(), &[SampleStatus::NotReady; 2]);
        assert!(words(r.as_bytes())
            .iter()
            .all(|&v| v == COUNTER_ERROR_VALUE));
    }
    let submission = cmd.commit().unwrap();
    // Submitted, held back by the gate. lavapipe's vkGetQueryPoolResults waits
    // for the whole device to go idle, which would never happen behind a host
    // gate, so this part runs on hardware drivers only.
    if gate_allowed(&device) {
        for b in [&times, &stats] {
            let r = b.resolve_counter_range(0..2).unwrap();
            assert_eq!(r.statuses(), &[SampleStatus::NotReady; 2]);
            assert!(words(r.as_bytes())
                .iter()
                .all(|&v| v == COUNTER_ERROR_VALUE));
            assert!(matches!(
                r.sample::<gpu_counters_hal::CounterResultTimestamp>(0),
                Ok(SampleValue::NotReady) | Err(_)
            ));
        }
        // A reset while pending is refused.
        assert!(times.reset().is_err());
    }
    gate.open();
    submission.wait().unwrap();
    for b in [&times, &stats] {
        let r = b.resolve_counter_range(0..2).unwrap();
        assert!(r.all_written(), "{:?}", r.statuses());
    }
    times.reset().unwrap();
    assert_eq!(
        times.resolve_counter_range(0..2).unwrap().statuses(),
        &[SampleStatus::NotWritten; 2]
    );
    common::assert_no_validation_messages(&device);
}

#[test]
fn encoder_level_sampling_splits_dispatches_exactly() {
    let device = common::device();
    let times = buffer(&device, CommonCounterSet::Timestamp, 3);
    let stats = buffer(&device, CommonCounterSet::Statistic, 3);
    let mut small = ComputeWorkload::new(&common::ctx(&device), 7, 3, 1).unwrap();
    let mut big = ComputeWorkload::new(&common::ctx(&device), 64, 5, 1).unwrap();
    // Twice in a row without reset: the second use resets inline.
    for round in 0..2 {
        let mut cmd = CommandBuffer::new(&device).unwrap();
        let mut pass = cmd
            .compute_encoder(&ComputePassDescriptor::default())
            .unwrap();
        pass.sample_counters(&stats, 0, true).unwrap();
        pass.sample_counters(&times, 0, true).unwrap();
        // SAFETY: `pass.raw()` is recording outside any render pass (a compute encoder)
        // on `device`, where the workload was built; the GPU is done with it
        // (`common::run` waits) before it is destroyed.
        unsafe { small.record_dispatch(device.raw(), pass.raw()) };
        pass.sample_counters(&stats, 1, true).unwrap();
        pass.sample_counters(&times, 1, round == 0).unwrap();
        // SAFETY: `pass.raw()` is recording outside any render pass (a compute encoder)
        // on `device`, where the workload was built; the GPU is done with it
        // (`common::run` waits) before it is destroyed.
        unsafe {
            big.record_barrier(device.raw(), pass.raw());
            big.record_dispatch(device.raw(), pass.raw());
            big.record_dispatch(device.raw(), pass.raw());
        }
        pass.sample_counters(&stats, 2, false).unwrap();
        pass.sample_counters(&times, 2, true).unwrap();
        pass.end_encoding().unwrap();
        common::run(cmd);
        let r = stats.resolve_counter_range(0..3).unwrap();
        assert!(r.all_written());
        let s = r.statistics().unwrap();
        assert_eq!(s[1].since(&s[0]).compute_kernel_invocations, 21);
        assert_eq!(s[2].since(&s[1]).compute_kernel_invocations, 640);
        let t = times.resolve_counter_range(0..3).unwrap();
        assert!(t.all_written());
        let t = t.timestamps().unwrap();
        assert!(t[0].timestamp <= t[2].timestamp);
        // GPU resolve agrees.
        let dst = GpuBuffer::new(&device, 3 * 64, MemoryLocation::HostVisible).unwrap();
        let mut cmd = CommandBuffer::new(&device).unwrap();
        cmd.resolve_counters(&stats, 0..3, &dst, 0).unwrap();
        common::run(cmd);
        assert_eq!(dst.read(0, 192).unwrap(), r.as_bytes());
    }
    // SAFETY: the device finished every command buffer that used the workload
    // (`common::run` waits), which was built on `device`.
    unsafe {
        small.destroy(device.raw());
        big.destroy(device.raw());
    }
    common::assert_no_validation_messages(&device);
}

#[test]
fn command_buffer_level_statistics_nest() {
    let device = common::device();
    let stats = buffer(&device, CommonCounterSet::Statistic, 4);
    let mut work = ComputeWorkload::new(&common::ctx(&device), 9, 2, 1).unwrap();
    let mut cmd = CommandBuffer::new(&device).unwrap();
    cmd.sample_counters(&stats, 0, TimestampGranularity::Precise)
        .unwrap(); // outer start
                   // SAFETY: `cmd.raw()` is recording (gpu-counters begins its command buffers)
                   // outside any render pass on `device`, where the workload was built; the
                   // GPU is done with it (`common::run` waits) before it is destroyed.
    unsafe { work.record_dispatch(device.raw(), cmd.raw()) };
    cmd.sample_counters(&stats, 1, TimestampGranularity::Precise)
        .unwrap(); // inner start
                   // SAFETY: `cmd.raw()` is recording (gpu-counters begins its command buffers)
                   // outside any render pass on `device`, where the workload was built; the
                   // GPU is done with it (`common::run` waits) before it is destroyed.
    unsafe {
        work.record_barrier(device.raw(), cmd.raw());
        work.record_dispatch(device.raw(), cmd.raw());
        work.record_dispatch(device.raw(), cmd.raw());
    }
    cmd.sample_counters(&stats, 2, TimestampGranularity::Precise)
        .unwrap(); // inner end
                   // Statistics inside a pass are refused while the chain is open.
    {
        let mut pass = cmd
            .compute_encoder(&ComputePassDescriptor::default())
            .unwrap();
        let e = pass.sample_counters(&stats, 3, true).unwrap_err();
        assert!(e.to_string().contains("end_statistics"), "{e}");
        pass.end_encoding().unwrap();
    }
    cmd.sample_counters(&stats, 3, TimestampGranularity::Precise)
        .unwrap(); // outer end
    common::run(cmd);
    let r = stats.resolve_counter_range(0..4).unwrap();
    assert!(r.all_written());
    let s = r.statistics().unwrap();
    assert_eq!(s[3].since(&s[0]).compute_kernel_invocations, 54);
    assert_eq!(s[2].since(&s[1]).compute_kernel_invocations, 36);
    // SAFETY: the device finished every command buffer that used the workload
    // (`common::run` waits), which was built on `device`.
    unsafe { work.destroy(device.raw()) };
    common::assert_no_validation_messages(&device);
}

#[test]
fn private_buffers_resolve_on_the_gpu() {
    let device = common::device();
    let times = device
        .make_counter_sample_buffer(
            &CounterSampleBufferDescriptor::new(CommonCounterSet::Timestamp, "private", 2)
                .with_storage_mode(StorageMode::Private),
        )
        .unwrap();
    let dst = GpuBuffer::new(&device, 16, MemoryLocation::HostVisible).unwrap();
    let mut cmd = CommandBuffer::new(&device).unwrap();
    let pass = cmd
        .compute_encoder(&ComputePassDescriptor {
            sample_buffer_attachments: &[attach(&times, 0, 1)],
        })
        .unwrap();
    pass.end_encoding().unwrap();
    cmd.resolve_counters(&times, 0..2, &dst, 0).unwrap();
    let (submit, complete) = common::run(cmd);
    let w = words(&dst.read(0, 16).unwrap());
    let cal = device.calibration().unwrap();
    for v in w {
        assert_ne!(v, COUNTER_ERROR_VALUE);
        let c = cal.to_cpu_ns(v).unwrap();
        assert!(c.ns + c.error_bound_ns >= submit && c.ns <= complete + c.error_bound_ns);
    }
    common::assert_no_validation_messages(&device);
}

#[test]
fn resampled_indices_are_not_ready_until_their_command_buffer_completes() {
    let device = common::device();
    let times = buffer(&device, CommonCounterSet::Timestamp, 2);
    let stats = buffer(&device, CommonCounterSet::Statistic, 2);
    let record = |cmd: &mut CommandBuffer| {
        let pass = cmd
            .compute_encoder(&ComputePassDescriptor {
                sample_buffer_attachments: &[attach(&times, 0, 1), attach(&stats, 0, 1)],
            })
            .unwrap();
        pass.end_encoding().unwrap();
    };
    let mut cmd = CommandBuffer::new(&device).unwrap();
    record(&mut cmd);
    common::run(cmd);
    let first = times.resolve_counter_range(0..2).unwrap();
    assert!(first.all_written());

    // Sampled again without a reset: the old values are still in the pool,
    // but must not be reported as this use's results, neither while the
    // command buffer is only recorded nor (on hardware) while the GPU is held
    // back before it.
    let gate = common::Gate::new(&device);
    let gated = gate_allowed(&device);
    let mut cmd = CommandBuffer::new(&device).unwrap();
    if gated {
        gate.record_wait(cmd.raw());
    }
    record(&mut cmd);
    let check_not_ready = || {
        for b in [&times, &stats] {
            let r = b.resolve_counter_range(0..2).unwrap();
            assert_eq!(r.statuses(), &[SampleStatus::NotReady; 2], "{}", b.label());
            assert!(words(r.as_bytes())
                .iter()
                .all(|&v| v == COUNTER_ERROR_VALUE));
        }
    };
    check_not_ready();
    let submission = cmd.commit().unwrap();
    if gated {
        check_not_ready();
        gate.open();
    }
    submission.wait().unwrap();
    let second = times.resolve_counter_range(0..2).unwrap();
    assert!(second.all_written());
    assert!(second.timestamps().unwrap()[0].timestamp >= first.timestamps().unwrap()[1].timestamp);
    assert!(stats.resolve_counter_range(0..2).unwrap().all_written());

    // A recorded reset makes indices "not written" again.
    let mut cmd = CommandBuffer::new(&device).unwrap();
    cmd.reset_samples(&times, 0..2).unwrap();
    common::run(cmd);
    assert_eq!(
        times.resolve_counter_range(0..2).unwrap().statuses(),
        &[SampleStatus::NotWritten; 2]
    );
    common::assert_no_validation_messages(&device);
}

/// Whether the driver lets the host read query results while the GPU waits
/// on a host-set event (lavapipe does not: it waits for the device to idle).
fn gate_allowed(device: &Device) -> bool {
    device.info().device_type != gpu_counters_hal::DeviceType::Cpu
}

/// Resolving into a result kept between resolves gives what a new result
/// does (a large range, then a smaller one into the same memory, then a
/// heap's entries), and a bad range leaves it empty with the typed error.
#[test]
fn resolves_into_a_reused_result_match_new_ones() {
    let device = common::device();
    let n = 3 * 65536 + 5; // several resolve threads
    let times = buffer(&device, CommonCounterSet::Timestamp, n);
    let mut cmd = CommandBuffer::new(&device).unwrap();
    for i in (0..n).filter(|i| i % 3 != 1) {
        cmd.sample_counters(&times, i, TimestampGranularity::Relaxed)
            .unwrap();
    }
    common::run(cmd);
    let mut out = gpu_counters_hal::ResolvedCounters::default();
    for range in [0..u64::from(n), 7..1000, 0..u64::from(n)] {
        times
            .resolve_counter_range_into(range.clone(), &mut out)
            .unwrap();
        let fresh = times.resolve_counter_range(range.clone()).unwrap();
        assert_eq!(out, fresh, "{range:?}");
        assert_eq!(out.len(), (range.end - range.start) as usize);
        for (k, st) in out.statuses().iter().enumerate() {
            let i = range.start + k as u64;
            let want = if i % 3 == 1 {
                SampleStatus::NotWritten
            } else {
                SampleStatus::Written
            };
            assert_eq!(*st, want, "sample {i}");
        }
    }
    let err = times
        .resolve_counter_range_into(0..u64::from(n) + 1, &mut out)
        .unwrap_err();
    assert!(err.to_string().contains("range"), "{err}");
    assert_eq!(out.len(), 0);
    let heap = device
        .make_counter_heap(&gpu_counters_hal::CounterHeapDescriptor::timestamp(4))
        .unwrap();
    heap.resolve_counter_range_into(0..4, &mut out).unwrap();
    assert_eq!(out, heap.resolve_counter_range(0..4).unwrap());
    assert!(out
        .statuses()
        .iter()
        .all(|s| *s == SampleStatus::NotWritten));
}

/// Every sample of `range` as `resolve_timestamps_into` gives it, checked
/// against `resolve_counter_range` of the same range, sample by sample.
fn same_as_usual(
    out: &gpu_counters_hal::ResolvedTimestamps,
    usual: &gpu_counters_hal::ResolvedCounters,
) {
    assert_eq!(out.len(), usual.len());
    let ticks = usual.timestamps().unwrap();
    for (i, (t, st)) in ticks.iter().zip(usual.statuses()).enumerate() {
        assert_eq!(out.get(i), Some((t.timestamp, *st)), "sample {i}");
    }
    let mut spans = Vec::new();
    out.for_each_span(|_, a, b| spans.extend([a, b]));
    assert_eq!(out.span_count(), usual.len() / 2);
    assert_eq!(spans.len(), 2 * (usual.len() / 2));
    for (i, s) in spans.iter().enumerate() {
        assert_eq!(
            *s,
            (ticks[i].timestamp, usual.statuses()[i]),
            "span end {i}"
        );
    }
    assert_eq!(out.all_written(), usual.all_written());
}

/// The timestamp resolve for callers that read each sample once (the
/// profiler's) gives what `resolve_counter_range` does on a real driver:
/// every sample written, on several resolve threads; samples never written
/// among them; a heap's precise, coalesced relaxed, invalidated and unwritten
/// entries; and a statistic buffer or a bad range refused with a typed error.
#[test]
fn timestamps_resolved_for_one_read_match_the_usual_resolve() {
    let device = common::device();
    let n = 3 * 65536 + 5; // several resolve threads
    let times = buffer(&device, CommonCounterSet::Timestamp, n);
    let mut cmd = CommandBuffer::new(&device).unwrap();
    for i in 0..n {
        let placement = if i % 2 == 1 {
            TimestampGranularity::Precise
        } else {
            TimestampGranularity::Relaxed
        };
        cmd.sample_counters(&times, i, placement).unwrap();
    }
    common::run(cmd);
    let mut out = gpu_counters_hal::ResolvedTimestamps::default();
    for range in [0..u64::from(n), 7..1000] {
        times
            .resolve_timestamps_into(range.clone(), &mut out)
            .unwrap();
        assert!(out.all_written(), "{range:?}");
        same_as_usual(&out, &times.resolve_counter_range(range).unwrap());
    }
    // Samples never written among written ones.
    let gaps = buffer(&device, CommonCounterSet::Timestamp, 64);
    let mut cmd = CommandBuffer::new(&device).unwrap();
    for i in (0..64).filter(|i| i % 5 != 3) {
        cmd.sample_counters(&gaps, i, TimestampGranularity::Relaxed)
            .unwrap();
    }
    common::run(cmd);
    gaps.resolve_timestamps_into(0..64, &mut out).unwrap();
    assert_eq!(out.count(SampleStatus::NotWritten), 13);
    same_as_usual(&out, &gaps.resolve_counter_range(0..64).unwrap());
    // A heap: precise, relaxed (coalesced into the pass's end), invalidated
    // and never written entries.
    let heap = device
        .make_counter_heap(&gpu_counters_hal::CounterHeapDescriptor::timestamp(6))
        .unwrap();
    heap.invalidate_counter_range(4..5).unwrap();
    let mut cmd = CommandBuffer::new(&device).unwrap();
    {
        let mut pass = cmd
            .compute_encoder(&ComputePassDescriptor::default())
            .unwrap();
        use gpu_counters_hal::TimestampGranularity::{Precise, Relaxed};
        pass.write_timestamp(Precise, &heap, 0).unwrap();
        pass.write_timestamp(Relaxed, &heap, 1).unwrap();
        pass.write_timestamp(Relaxed, &heap, 2).unwrap();
        pass.end_encoding().unwrap();
    }
    common::run(cmd);
    for range in [0..6, 1..3, 0..1] {
        heap.resolve_timestamps_into(range.clone(), &mut out)
            .unwrap();
        same_as_usual(&out, &heap.resolve_counter_range(range).unwrap());
    }
    // Refused: another counter set, a range past the end.
    let stats = buffer(&device, CommonCounterSet::Statistic, 2);
    let err = stats.resolve_timestamps_into(0..2, &mut out).unwrap_err();
    assert!(err.to_string().contains("not timestamps"), "{err}");
    assert!(out.is_empty());
    let err = times
        .resolve_timestamps_into(0..u64::from(n) + 1, &mut out)
        .unwrap_err();
    assert!(err.to_string().contains("range"), "{err}");
    assert!(out.is_empty());
    common::assert_no_validation_messages(&device);
}
