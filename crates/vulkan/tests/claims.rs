//! Timestamp writes into claimed blocks, which skip the bookkeeping lock
//! (`gpu_counters_hal::bookkeeping::LocalClaims`): every rule of the locked
//! path still holds for them, on the real driver with validation on.
mod common;

use gpu_counters_hal::{
    CommonCounterSet, CounterErrorKind, CounterSampleBufferDescriptor, Error, InvalidInput,
    SampleStatus, SampleValue, TimestampGranularity,
};
use gpu_counters_vulkan::{CommandBuffer, CounterSampleBuffer, Device};
use std::sync::Barrier;

fn times(device: &Device, n: u32) -> CounterSampleBuffer {
    device
        .make_counter_sample_buffer(&CounterSampleBufferDescriptor::new(
            CommonCounterSet::Timestamp,
            "claims",
            n,
        ))
        .unwrap()
}

fn reuse_reason(e: Error) -> &'static str {
    assert_eq!(e.kind(), CounterErrorKind::Invalid, "{e}");
    match e.invalid().cloned().unwrap() {
        InvalidInput::SampleIndexReuse { reason, .. } => reason,
        other => panic!("expected SampleIndexReuse, got {other:?}"),
    }
}

/// Indices over several blocks, the last one partial: not ready and not
/// resettable until submitted, then all written in order.
#[test]
fn claimed_writes_are_pending_until_submitted() {
    let device = common::device();
    let n = 2 * 64 + 9;
    let buffer = times(&device, n);
    let mut cmd = CommandBuffer::new(&device).unwrap();
    for i in 0..n {
        let placement = if i % 2 == 1 {
            TimestampGranularity::Precise
        } else {
            TimestampGranularity::Relaxed
        };
        cmd.sample_counters(&buffer, i, placement).unwrap();
    }
    let before = buffer.resolve_counter_range(0..n as u64).unwrap();
    assert_eq!(before.count(SampleStatus::NotReady), n as usize);
    assert!(buffer.reset().is_err(), "recorded, not submitted");
    common::run(cmd);
    let after = buffer.resolve_counter_range(0..n as u64).unwrap();
    assert!(after.all_written(), "{:?}", after.statuses());
    let t = after.timestamps().unwrap();
    assert!(t.windows(2).all(|w| w[0].timestamp <= w[1].timestamp));
    common::assert_no_validation_messages(&device);
}

/// An index one recording wrote without the lock is refused to another
/// while the first is open; the other's write of an index of the same block
/// is then refused to the first. Both submit, every index written once.
#[test]
fn claimed_indices_are_refused_to_other_recordings() {
    let device = common::device();
    let buffer = times(&device, 64);
    let mut first = CommandBuffer::new(&device).unwrap();
    for i in 0..10 {
        first
            .sample_counters(&buffer, i, TimestampGranularity::Precise)
            .unwrap();
    }
    let mut second = CommandBuffer::new(&device).unwrap();
    let e = second
        .sample_counters(&buffer, 5, TimestampGranularity::Precise)
        .unwrap_err();
    assert!(reuse_reason(e).contains("not been submitted"));
    second
        .sample_counters(&buffer, 20, TimestampGranularity::Precise)
        .unwrap();
    let e = first
        .sample_counters(&buffer, 20, TimestampGranularity::Precise)
        .unwrap_err();
    assert!(reuse_reason(e).contains("not been submitted"));
    first
        .sample_counters(&buffer, 21, TimestampGranularity::Precise)
        .unwrap();
    common::run(first);
    common::run(second);
    let r = buffer.resolve_counter_range(0..22).unwrap();
    let written: Vec<u32> = (0..22)
        .filter(|&i| r.statuses()[i as usize] == SampleStatus::Written)
        .collect();
    let want: Vec<u32> = (0..10).chain([20, 21]).collect();
    assert_eq!(written, want);
    common::assert_no_validation_messages(&device);
}

/// Indices written again, in the same recording and in the next one without
/// a host reset, are reset first (the validation layer reports a write of a
/// query that was not reset).
#[test]
fn rewritten_claimed_indices_are_reset_first() {
    let device = common::device();
    let n = 100;
    let buffer = times(&device, n);
    let mut cmd = CommandBuffer::new(&device).unwrap();
    for _ in 0..2 {
        for i in 0..n {
            cmd.sample_counters(&buffer, i, TimestampGranularity::Precise)
                .unwrap();
        }
    }
    common::run(cmd);
    let mut cmd = CommandBuffer::new(&device).unwrap();
    for i in 0..n {
        cmd.sample_counters(&buffer, i, TimestampGranularity::Precise)
            .unwrap();
    }
    common::run(cmd);
    let r = buffer.resolve_counter_range(0..n as u64).unwrap();
    assert!(r.all_written(), "{:?}", r.statuses());
    common::assert_no_validation_messages(&device);
}

/// A dropped recording's claimed writes are forgotten: not written, not
/// pending, writable again.
#[test]
fn abandoned_claimed_writes_are_forgotten() {
    let device = common::device();
    let n = 100;
    let buffer = times(&device, n);
    let mut cmd = CommandBuffer::new(&device).unwrap();
    for i in 0..n {
        cmd.sample_counters(&buffer, i, TimestampGranularity::Precise)
            .unwrap();
    }
    drop(cmd);
    let r = buffer.resolve_counter_range(0..n as u64).unwrap();
    assert_eq!(r.count(SampleStatus::NotWritten), n as usize);
    buffer.reset().unwrap();
    let mut cmd = CommandBuffer::new(&device).unwrap();
    for i in 0..n {
        cmd.sample_counters(&buffer, i, TimestampGranularity::Precise)
            .unwrap();
    }
    common::run(cmd);
    assert!(buffer
        .resolve_counter_range(0..n as u64)
        .unwrap()
        .all_written());
    common::assert_no_validation_messages(&device);
}

/// Command buffers recorded at once on threads of their own, after a
/// barrier: thread `t` samples `lists[t]` in order, with a barrier each.
fn record_on_threads(
    device: &Device,
    buffer: &CounterSampleBuffer,
    lists: &[Vec<u32>],
) -> Vec<CommandBuffer> {
    let start = Barrier::new(lists.len());
    std::thread::scope(|s| {
        let handles: Vec<_> = lists
            .iter()
            .map(|list| {
                let start = &start;
                s.spawn(move || {
                    let mut cmd = CommandBuffer::new(device).unwrap();
                    start.wait();
                    for &i in list {
                        cmd.sample_counters(buffer, i, TimestampGranularity::Precise)
                            .unwrap();
                    }
                    cmd.end_statistics().unwrap();
                    cmd
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

/// Four threads record their own interleaved indices of the same blocks at
/// once: one claims each block, the others write under the lock, and none is
/// refused (no index is shared). Every index is written by its thread.
#[test]
fn threads_writing_disjoint_indices_of_one_block_all_submit() {
    let device = common::device();
    let (threads, per) = (4u32, 48u32);
    let n = threads * per;
    let buffer = times(&device, n);
    let lists: Vec<Vec<u32>> = (0..threads)
        .map(|t| (0..per).map(|k| k * threads + t).collect())
        .collect();
    for cmd in record_on_threads(&device, &buffer, &lists) {
        common::run(cmd);
    }
    let r = buffer.resolve_counter_range(0..n as u64).unwrap();
    assert!(r.all_written(), "{:?}", r.statuses());
    common::assert_no_validation_messages(&device);
}

/// A recording alone on a buffer claims the fresh blocks after its first
/// write's. Another recording's writes into those blocks are checked as
/// anywhere: an index the first wrote is refused to it, the index it
/// writes is then refused to the first, and both submit (in reverse order)
/// with every index written once, each by its own command buffer (order
/// kept within each).
#[test]
fn blocks_claimed_ahead_are_shared_by_the_rules() {
    let device = common::device();
    let n = 4 * 64;
    let buffer = times(&device, n);
    let mut first = CommandBuffer::new(&device).unwrap();
    // Index 0 under the lock: blocks 0 to 3 are now the first's.
    for i in [0, 1, 130, 131] {
        first
            .sample_counters(&buffer, i, TimestampGranularity::Precise)
            .unwrap();
    }
    let mut second = CommandBuffer::new(&device).unwrap();
    let e = second
        .sample_counters(&buffer, 130, TimestampGranularity::Precise)
        .unwrap_err();
    assert!(reuse_reason(e).contains("not been submitted"));
    for i in [100, 200, 201] {
        second
            .sample_counters(&buffer, i, TimestampGranularity::Precise)
            .unwrap();
    }
    for i in [100, 200] {
        let e = first
            .sample_counters(&buffer, i, TimestampGranularity::Precise)
            .unwrap_err();
        assert!(reuse_reason(e).contains("not been submitted"), "{i}");
    }
    for i in [101, 199, 202] {
        first
            .sample_counters(&buffer, i, TimestampGranularity::Precise)
            .unwrap();
    }
    // Submitted in the reverse of their recording order.
    common::run(second);
    common::run(first);
    let r = buffer.resolve_counter_range(0..n as u64).unwrap();
    let written: Vec<u32> = (0..n)
        .filter(|&i| r.statuses()[i as usize] == SampleStatus::Written)
        .collect();
    assert_eq!(written, [0, 1, 100, 101, 130, 131, 199, 200, 201, 202]);
    let t = r.timestamps().unwrap();
    let at = |i: usize| t[i].timestamp;
    for (a, b) in [
        (0, 1),
        (1, 130),
        (130, 131),
        (131, 101),
        (101, 199),
        (199, 202),
    ] {
        assert!(at(a) <= at(b), "first: {a} before {b}");
    }
    for (a, b) in [(100, 200), (200, 201)] {
        assert!(at(a) <= at(b), "second: {a} before {b}");
    }
    common::assert_no_validation_messages(&device);
}

/// Two threads each write their own run of consecutive indices, the
/// second's inside the blocks the first may claim ahead, at once: both
/// submit, every index written, each run in order.
#[test]
fn threads_writing_runs_inside_blocks_claimed_ahead_all_submit() {
    let device = common::device();
    let n = 8 * 64;
    let buffer = times(&device, n);
    // Thread 0 writes 0..192 and 320..512; thread 1 writes 192..320,
    // which lies in blocks 3 and 4.
    let runs = [
        (0..192).chain(320..n).collect::<Vec<u32>>(),
        (192..320).collect(),
    ];
    for cmd in record_on_threads(&device, &buffer, &runs) {
        common::run(cmd);
    }
    let r = buffer.resolve_counter_range(0..n as u64).unwrap();
    assert!(r.all_written(), "{:?}", r.statuses());
    let t = r.timestamps().unwrap();
    for run in &runs {
        for w in run.windows(2) {
            let (a, b) = (w[0] as usize, w[1] as usize);
            assert!(t[a].timestamp <= t[b].timestamp, "{a} before {b}");
        }
    }
    common::assert_no_validation_messages(&device);
}

/// Statistic samples at the indices of a claimed timestamp block take their
/// own (checked) path: a claim on one set never stands for another set's
/// index, whatever its counter set. Both resolve, the statistics exactly
/// (no work between their samples).
#[test]
fn statistic_samples_beside_claimed_timestamps_take_their_own_path() {
    let device = common::device();
    let times = times(&device, 64);
    let stats = device
        .make_counter_sample_buffer(&CounterSampleBufferDescriptor::new(
            CommonCounterSet::Statistic,
            "stats",
            2,
        ))
        .unwrap();
    let mut cmd = CommandBuffer::new(&device).unwrap();
    cmd.sample_counters(&times, 0, TimestampGranularity::Precise)
        .unwrap();
    cmd.sample_counters(&times, 1, TimestampGranularity::Precise)
        .unwrap();
    cmd.sample_counters(&stats, 0, TimestampGranularity::Precise)
        .unwrap();
    cmd.sample_counters(&times, 2, TimestampGranularity::Precise)
        .unwrap();
    cmd.sample_counters(&stats, 1, TimestampGranularity::Precise)
        .unwrap();
    cmd.end_statistics().unwrap();
    common::run(cmd);
    let t = times.resolve_counter_range(0..3).unwrap();
    assert!(t.all_written(), "{:?}", t.statuses());
    let s = stats.resolve_counter_range(0..2).unwrap();
    assert!(s.all_written(), "{:?}", s.statuses());
    match s.statistics_between(0, 1).unwrap() {
        SampleValue::Value(between) => {
            assert_eq!(between.compute_kernel_invocations, 0, "{between:?}")
        }
        other => panic!("no value between two statistic samples: {other:?}"),
    }
    common::assert_no_validation_messages(&device);
}
