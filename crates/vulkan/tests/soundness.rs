//! Hostile use from safe code: early drops, open queries, reversed
//! submissions, leaked encoders, threads. Each test names the item of the
//! soundness issue it guards; each crashed, hung, returned a plausible value
//! or made the validation layer speak before the ownership and bookkeeping
//! model it checks.
mod common;

use common::sample_buffer as buffer;

use common::Gate;
use gpu_counters_hal::{
    CommonCounterSet, CounterErrorKind, CounterHeapDescriptor, CounterResultTimestamp, Error,
    InvalidInput, SampleStatus, SampleValue, TimestampGranularity,
};
use gpu_counters_vulkan::{
    CommandBuffer, ComputePassDescriptor, CounterHeap, CounterSampleBuffer, Device, GpuBuffer,
    MemoryLocation, PassSampleBufferAttachment,
};
use gpu_counters_workloads::{CallerCommandBuffer, ComputeWorkload};

fn invalid(e: Error) -> InvalidInput {
    assert_eq!(e.kind(), CounterErrorKind::Invalid, "{e}");
    e.invalid().cloned().unwrap()
}

fn heap(device: &Device, n: u32) -> CounterHeap {
    device
        .make_counter_heap(&CounterHeapDescriptor::timestamp(n))
        .unwrap()
}

fn reuse_reason(e: Error) -> &'static str {
    match invalid(e) {
        InvalidInput::SampleIndexReuse { reason, .. } => reason,
        other => panic!("expected SampleIndexReuse, got {other:?}"),
    }
}

/// Item 1: a sample buffer dropped after sampling into a command buffer, then
/// the command buffer committed (a segfault in vkQueueSubmit2 before).
#[test]
fn sample_buffer_dropped_before_commit() {
    let device = common::device();
    let times = buffer(&device, CommonCounterSet::Timestamp, "dropped early", 2);
    let stats = buffer(&device, CommonCounterSet::Statistic, "dropped early", 2);
    let mut cmd = CommandBuffer::new(&device).unwrap();
    cmd.sample_counters(&times, 0, TimestampGranularity::Precise)
        .unwrap();
    cmd.sample_counters(&stats, 0, TimestampGranularity::Relaxed)
        .unwrap();
    cmd.sample_counters(&times, 1, TimestampGranularity::Precise)
        .unwrap();
    cmd.sample_counters(&stats, 1, TimestampGranularity::Relaxed)
        .unwrap();
    drop(times);
    drop(stats);
    common::run(cmd);
    common::assert_no_validation_messages(&device);
}

/// A command buffer recording a compute pass with end-of-pass attachments
/// into `held` (sampled at 0 before the pass, so the command buffer already
/// holds it; the pass samples 1 and 2) and `fresh` (not held; the pass
/// samples its end at 1). The pass is left open.
fn pass_with_end_attachments<'a>(
    cmd: &'a mut CommandBuffer,
    held: &CounterSampleBuffer,
    fresh: &CounterSampleBuffer,
) -> gpu_counters_vulkan::ComputeEncoder<'a> {
    cmd.sample_counters(held, 0, TimestampGranularity::Precise)
        .unwrap();
    cmd.compute_encoder(&ComputePassDescriptor {
        sample_buffer_attachments: &[
            PassSampleBufferAttachment {
                sample_buffer: held,
                start_of_encoder_sample_index: Some(1),
                end_of_encoder_sample_index: Some(2),
            },
            PassSampleBufferAttachment {
                sample_buffer: fresh,
                start_of_encoder_sample_index: None,
                end_of_encoder_sample_index: Some(1),
            },
        ],
    })
    .unwrap()
}

/// Item 1: the last handles of a pass's end-of-pass attachment buffers
/// dropped while the pass is open, one the command buffer already holds and
/// one it does not: the pass still ends, and the command buffer runs with no
/// validation message (its end samples keep both sets alive).
#[test]
fn end_attachment_buffers_dropped_while_the_pass_is_open() {
    let device = common::device();
    let held = buffer(&device, CommonCounterSet::Timestamp, "held", 4);
    let fresh = buffer(&device, CommonCounterSet::Timestamp, "not held", 2);
    let mut cmd = CommandBuffer::new(&device).unwrap();
    let enc = pass_with_end_attachments(&mut cmd, &held, &fresh);
    drop(held);
    drop(fresh);
    enc.end_encoding().unwrap();
    common::run(cmd);
    common::assert_no_validation_messages(&device);
}

/// The end samples of that pass, into a set the command buffer holds and
/// one it does not, are written, and resolve to times in pass order.
#[test]
fn end_attachments_into_held_and_new_sets_are_written() {
    let device = common::device();
    let keep_held = buffer(&device, CommonCounterSet::Timestamp, "held", 4);
    let keep_fresh = buffer(&device, CommonCounterSet::Timestamp, "not held", 2);
    let mut cmd = CommandBuffer::new(&device).unwrap();
    let enc = pass_with_end_attachments(&mut cmd, &keep_held, &keep_fresh);
    enc.end_encoding().unwrap();
    common::run(cmd);
    let held = keep_held.resolve_counter_range(0..3).unwrap();
    let fresh = keep_fresh.resolve_counter_range(0..2).unwrap();
    assert!(held.all_written(), "{:?}", held.statuses());
    let t: Vec<u64> = held
        .timestamps()
        .unwrap()
        .iter()
        .map(|t| t.timestamp)
        .collect();
    assert!(t[0] <= t[1] && t[1] <= t[2], "{t:?}");
    assert_eq!(
        fresh.statuses(),
        &[SampleStatus::NotWritten, SampleStatus::Written]
    );
    assert!(matches!(
        fresh.sample::<CounterResultTimestamp>(1).unwrap(),
        SampleValue::Value(_)
    ));
    common::assert_no_validation_messages(&device);
}

/// Item 1: sample buffers and heaps dropped while their command buffer is in
/// flight (VUID-vkDestroyQueryPool-queryPool-00793, hangs and heap
/// corruption before): the submission holds them until the GPU is done.
#[test]
fn sample_buffer_and_heap_dropped_in_flight() {
    let device = common::device();
    let gate = Gate::new(&device);
    let times = buffer(&device, CommonCounterSet::Timestamp, "in flight", 2);
    let entries = heap(&device, 2);
    let mut cmd = CommandBuffer::new(&device).unwrap();
    gate.record_wait(cmd.raw());
    cmd.sample_counters(&times, 0, TimestampGranularity::Precise)
        .unwrap();
    cmd.write_timestamp(TimestampGranularity::Precise, &entries, 0)
        .unwrap();
    let submission = cmd.commit().unwrap();
    drop(times);
    drop(entries);
    gate.open();
    submission.wait().unwrap();
    drop(submission);
    common::assert_no_validation_messages(&device);
}

/// Item 1: a GPU-resolve destination dropped while the resolve is in flight
/// (lavapipe's worker thread wrote into freed memory before).
#[test]
fn resolve_destination_dropped_in_flight() {
    let device = common::device();
    let gate = Gate::new(&device);
    let times = buffer(&device, CommonCounterSet::Timestamp, "resolved", 2);
    let destination = GpuBuffer::new(&device, 16, MemoryLocation::HostVisible).unwrap();
    let mut cmd = CommandBuffer::new(&device).unwrap();
    gate.record_wait(cmd.raw());
    cmd.sample_counters(&times, 0, TimestampGranularity::Precise)
        .unwrap();
    cmd.sample_counters(&times, 1, TimestampGranularity::Precise)
        .unwrap();
    cmd.resolve_counters(&times, 0..2, &destination, 0).unwrap();
    let submission = cmd.commit().unwrap();
    drop(destination);
    drop(times);
    gate.open();
    submission.wait().unwrap();
    drop(submission);
    common::assert_no_validation_messages(&device);
}

/// Item 2: no drop order of gpu-counters objects crashes; each keeps the
/// device (and instance) alive.
#[test]
fn any_drop_order_is_safe() {
    let device = common::device();
    let instance = device.instance().clone();
    let times = buffer(&device, CommonCounterSet::Timestamp, "orphans", 4);
    let entries = heap(&device, 4);
    let destination = GpuBuffer::new(&device, 32, MemoryLocation::HostVisible).unwrap();
    let mut cmd = CommandBuffer::new(&device).unwrap();
    drop(device);
    cmd.sample_counters(&times, 0, TimestampGranularity::Precise)
        .unwrap();
    cmd.write_timestamp(TimestampGranularity::Precise, &entries, 0)
        .unwrap();
    cmd.resolve_counters(&times, 0..1, &destination, 0).unwrap();
    let submission = cmd.commit().unwrap();
    drop(entries);
    drop(times);
    let complete = submission.is_done();
    drop(destination);
    assert!(complete.is_ok());
    drop(submission);
    let messages = instance.validation_messages();
    assert!(messages.is_empty(), "{}", messages.join("\n"));
}

/// Item 3: re-sampling a statistic index whose query is still open is a
/// typed error (lavapipe crashed after QueryNotReset before): the same index
/// twice in a command buffer, a pass's start attachment then
/// `sample_counters` on it, and `reset_samples` over the open chain.
#[test]
fn open_statistic_index_cannot_be_sampled_again() {
    let device = common::device();
    let stats = buffer(&device, CommonCounterSet::Statistic, "open", 4);

    let mut cmd = CommandBuffer::new(&device).unwrap();
    cmd.sample_counters(&stats, 0, TimestampGranularity::Relaxed)
        .unwrap();
    let e = cmd
        .sample_counters(&stats, 0, TimestampGranularity::Relaxed)
        .unwrap_err();
    assert!(reuse_reason(e).contains("still being counted"));
    let e = cmd.reset_samples(&stats, 0..2).unwrap_err();
    assert!(reuse_reason(e).contains("still being counted"));
    cmd.sample_counters(&stats, 1, TimestampGranularity::Relaxed)
        .unwrap();
    common::run(cmd);

    stats.reset().unwrap();
    let mut cmd = CommandBuffer::new(&device).unwrap();
    let mut pass = cmd
        .compute_encoder(&ComputePassDescriptor {
            sample_buffer_attachments: &[PassSampleBufferAttachment {
                sample_buffer: &stats,
                start_of_encoder_sample_index: Some(2),
                end_of_encoder_sample_index: Some(3),
            }],
        })
        .unwrap();
    let e = pass.sample_counters(&stats, 2, false).unwrap_err();
    assert!(reuse_reason(e).contains("still being counted"));
    pass.end_encoding().unwrap();
    common::run(cmd);
    let resolved = stats.resolve_counter_range(2..4).unwrap();
    assert!(resolved.all_written(), "{:?}", resolved.statuses());
    common::assert_no_validation_messages(&device);
}

/// Item 4: `Device::wait_idle` on one thread while another commits: every
/// queue use is externally synchronized (UNASSIGNED-Threading-MultipleThreads
/// before).
#[test]
fn wait_idle_and_commit_on_two_threads() {
    let device = common::device();
    let times = buffer(&device, CommonCounterSet::Timestamp, "threads", 2);
    std::thread::scope(|s| {
        let d = device.clone();
        s.spawn(move || {
            for _ in 0..200 {
                d.wait_idle().unwrap();
            }
        });
        for _ in 0..200 {
            let mut cmd = CommandBuffer::new(&device).unwrap();
            cmd.sample_counters(&times, 0, TimestampGranularity::Relaxed)
                .unwrap();
            cmd.commit().unwrap().wait().unwrap();
        }
    });
    common::assert_no_validation_messages(&device);
}

/// Item 5: an index sampled in two command buffers that would be submitted
/// in reverse order: the second recording is refused while the first is not
/// submitted (before, the first wrote a query it never reset and the resolve
/// said Written with the stale value).
#[test]
fn second_recording_of_an_unsubmitted_index_is_refused() {
    let device = common::device();
    let times = buffer(&device, CommonCounterSet::Timestamp, "order", 2);
    let stats = buffer(&device, CommonCounterSet::Statistic, "order", 2);
    let mut first = CommandBuffer::new(&device).unwrap();
    first
        .sample_counters(&times, 0, TimestampGranularity::Precise)
        .unwrap();
    first
        .sample_counters(&stats, 0, TimestampGranularity::Relaxed)
        .unwrap();
    first.end_statistics().unwrap();
    let mut second = CommandBuffer::new(&device).unwrap();
    let e = second
        .sample_counters(&times, 0, TimestampGranularity::Precise)
        .unwrap_err();
    assert!(reuse_reason(e).contains("not been submitted"));
    let e = second
        .sample_counters(&stats, 0, TimestampGranularity::Relaxed)
        .unwrap_err();
    assert!(reuse_reason(e).contains("not been submitted"));
    let e = second.reset_samples(&times, 0..1).unwrap_err();
    assert!(reuse_reason(e).contains("not been submitted"));
    // Once the first is submitted, the second resets and writes after it.
    let submitted = first.commit().unwrap();
    second
        .sample_counters(&times, 0, TimestampGranularity::Precise)
        .unwrap();
    second
        .sample_counters(&times, 1, TimestampGranularity::Precise)
        .unwrap();
    let (_, _) = common::run(second);
    submitted.wait().unwrap();
    let resolved = times.resolve_counter_range(0..2).unwrap();
    assert!(resolved.all_written(), "{:?}", resolved.statuses());
    let t = resolved.timestamps().unwrap();
    assert!(t[0].timestamp <= t[1].timestamp, "{t:?}");
    common::assert_no_validation_messages(&device);
}

/// Item 6: an encoder with a statistics attachment leaked with
/// `mem::forget`, then the command buffer committed: a typed error (before:
/// VUID-vkEndCommandBuffer-commandBuffer-00061).
#[test]
fn leaked_encoder_makes_commit_fail() {
    let device = common::device();
    let stats = buffer(&device, CommonCounterSet::Statistic, "leaked", 2);
    let mut cmd = CommandBuffer::new(&device).unwrap();
    let pass = cmd
        .compute_encoder(&ComputePassDescriptor {
            sample_buffer_attachments: &[PassSampleBufferAttachment {
                sample_buffer: &stats,
                start_of_encoder_sample_index: Some(0),
                end_of_encoder_sample_index: Some(1),
            }],
        })
        .unwrap();
    std::mem::forget(pass);
    let e = cmd.commit().unwrap_err();
    assert!(
        matches!(invalid(e.clone()), InvalidInput::EncoderState(ref m) if m.contains("never ended")),
        "{e}"
    );
    // The abandoned recording leaves nothing pending.
    stats.reset().unwrap();
    common::assert_no_validation_messages(&device);
}

/// Item 8: statistic samples of different command buffers, with a dispatch
/// of 1,024 invocations in a third one between them: not a Written 0, but
/// "not comparable".
#[test]
fn statistics_across_command_buffers_are_not_comparable() {
    let device = common::device();
    let stats = buffer(&device, CommonCounterSet::Statistic, "apart", 2);
    let ctx = common::ctx(&device);
    let mut work = ComputeWorkload::new(&ctx, 64, 16, 1).unwrap();
    let mut cmd = CommandBuffer::new(&device).unwrap();
    cmd.sample_counters(&stats, 0, TimestampGranularity::Relaxed)
        .unwrap();
    common::run(cmd);
    let cmd = CommandBuffer::new(&device).unwrap();
    // SAFETY: `cmd.raw()` is recording (gpu-counters begins its command buffers)
    // outside any render pass on `device`, where the workload was built; the
    // GPU is done with it (`common::run` waits) before it is destroyed.
    unsafe { work.record_dispatch(device.raw(), cmd.raw()) };
    common::run(cmd);
    let mut cmd = CommandBuffer::new(&device).unwrap();
    cmd.sample_counters(&stats, 1, TimestampGranularity::Relaxed)
        .unwrap();
    common::run(cmd);
    let resolved = stats.resolve_counter_range(0..2).unwrap();
    assert!(resolved.all_written());
    assert_eq!(
        resolved.statistics_between(0, 1).unwrap(),
        SampleValue::NotComparable
    );
    assert_ne!(resolved.origin(0), resolved.origin(1));
    // SAFETY: the GPU finished every command buffer that used it.
    unsafe { work.destroy(device.raw()) };
    common::assert_no_validation_messages(&device);
}

/// Item 12: a heap cannot be invalidated while a GPU resolve of it is
/// recorded and unfinished (before, the GPU wrote the error value where the
/// CPU said Invalidated, or waited on a reset query for ever); afterwards
/// the GPU and CPU resolves agree.
#[test]
fn invalidate_waits_for_a_recorded_gpu_resolve() {
    let device = common::device();
    let entries = heap(&device, 2);
    let mut cmd = CommandBuffer::new(&device).unwrap();
    cmd.write_timestamp(TimestampGranularity::Precise, &entries, 0)
        .unwrap();
    cmd.write_timestamp(TimestampGranularity::Precise, &entries, 1)
        .unwrap();
    common::run(cmd);
    let destination = GpuBuffer::new(&device, 16, MemoryLocation::HostVisible).unwrap();
    let mut cmd = CommandBuffer::new(&device).unwrap();
    cmd.resolve_counter_heap(&entries, 0..2, &destination, 0)
        .unwrap();
    let e = entries.invalidate_counter_range(0..1).unwrap_err();
    assert!(e.to_string().contains("GPU resolve"), "{e}");
    common::run(cmd);
    let cpu = entries.resolve_counter_range(0..2).unwrap();
    assert_eq!(destination.read(0, 16).unwrap(), cpu.as_bytes());
    entries.invalidate_counter_range(0..1).unwrap();
    let cpu = entries.resolve_counter_range(0..2).unwrap();
    assert_eq!(cpu.statuses()[0], SampleStatus::Invalidated);
    common::assert_no_validation_messages(&device);
}

/// Item 13: a relaxed write, then a precise write to the same heap index in
/// one pass: the later, precise one wins (before, it was lost to the relaxed
/// timestamp coalesced at the pass's end).
#[test]
fn later_precise_write_wins_over_relaxed() {
    let device = common::device();
    let entries = heap(&device, 3);
    let ctx = common::ctx(&device);
    let mut work = ComputeWorkload::new(&ctx, 64, 64, 64).unwrap();
    let mut cmd = CommandBuffer::new(&device).unwrap();
    let mut pass = cmd
        .compute_encoder(&ComputePassDescriptor::default())
        .unwrap();
    pass.write_timestamp(TimestampGranularity::Relaxed, &entries, 0)
        .unwrap();
    pass.write_timestamp(TimestampGranularity::Relaxed, &entries, 1)
        .unwrap();
    pass.write_timestamp(TimestampGranularity::Precise, &entries, 0)
        .unwrap();
    pass.write_timestamp(TimestampGranularity::Precise, &entries, 2)
        .unwrap();
    // SAFETY: `pass.raw()` is recording outside any render pass (a compute encoder)
    // on `device`, where the workload was built; the GPU is done with it
    // (`common::run` waits) before it is destroyed.
    unsafe { work.record_dispatch(device.raw(), pass.raw()) };
    pass.end_encoding().unwrap();
    common::run(cmd);
    let resolved = entries.resolve_counter_range(0..3).unwrap();
    assert!(resolved.all_written(), "{:?}", resolved.statuses());
    let t: Vec<u64> = resolved
        .timestamps()
        .unwrap()
        .iter()
        .map(|t| t.timestamp)
        .collect();
    // 0 and 2 are precise, in that order, before the dispatch; 1 is the
    // pass's end, after it.
    assert!(t[0] <= t[2] && t[2] <= t[1], "{t:?}");
    assert_eq!(
        resolved.sample::<CounterResultTimestamp>(0).unwrap(),
        SampleValue::Value(CounterResultTimestamp { timestamp: t[0] })
    );
    // SAFETY: the GPU finished the command buffer that used it.
    unsafe { work.destroy(device.raw()) };
    common::assert_no_validation_messages(&device);
}

/// Item 14: indices recorded in a command buffer dropped without being
/// submitted are not pending for ever: they resolve as not written and can
/// be reset and written again (before: NotReady for ever, and reset failed
/// even after wait_idle).
#[test]
fn indices_of_an_abandoned_command_buffer_can_be_reset() {
    let device = common::device();
    let times = buffer(&device, CommonCounterSet::Timestamp, "abandoned", 2);
    let stats = buffer(&device, CommonCounterSet::Statistic, "abandoned", 2);
    let mut cmd = CommandBuffer::new(&device).unwrap();
    cmd.sample_counters(&times, 0, TimestampGranularity::Precise)
        .unwrap();
    cmd.sample_counters(&stats, 0, TimestampGranularity::Relaxed)
        .unwrap();
    cmd.sample_counters(&stats, 1, TimestampGranularity::Relaxed)
        .unwrap();
    assert!(times.reset().is_err(), "recorded, not submitted: pending");
    drop(cmd);
    let resolved = times.resolve_counter_range(0..2).unwrap();
    assert_eq!(resolved.statuses()[0], SampleStatus::NotWritten);
    let resolved = stats.resolve_counter_range(0..2).unwrap();
    assert_eq!(
        resolved.statuses(),
        &[SampleStatus::NotWritten, SampleStatus::NotWritten]
    );
    times.reset().unwrap();
    stats.reset().unwrap();
    // Written again, without a reset in between too.
    let mut cmd = CommandBuffer::new(&device).unwrap();
    cmd.sample_counters(&times, 0, TimestampGranularity::Precise)
        .unwrap();
    drop(cmd);
    let mut cmd = CommandBuffer::new(&device).unwrap();
    cmd.sample_counters(&times, 0, TimestampGranularity::Precise)
        .unwrap();
    cmd.sample_counters(&stats, 0, TimestampGranularity::Relaxed)
        .unwrap();
    cmd.sample_counters(&stats, 1, TimestampGranularity::Relaxed)
        .unwrap();
    common::run(cmd);
    assert_eq!(
        times.resolve_counter_range(0..1).unwrap().statuses(),
        &[SampleStatus::Written]
    );
    assert!(stats.resolve_counter_range(0..2).unwrap().all_written());
    common::assert_no_validation_messages(&device);
}

/// Items 1 and 2 for a caller's command buffer: the wrapper, then its
/// completion handle, hold the sample buffer until the caller signals that
/// the GPU finished, even when the caller dropped the buffer and the wrapper
/// before submitting.
#[test]
fn callers_command_buffer_holds_until_signaled() {
    let device = common::device();
    let mut caller = CallerCommandBuffer::new(&device).unwrap();
    let times = buffer(&device, CommonCounterSet::Timestamp, "caller's", 2);
    let stats = buffer(&device, CommonCounterSet::Statistic, "caller's", 2);
    // SAFETY: `caller` is recording, of the device's family, and the completion
    // is signaled only after the fence wait below.
    let mut cmd = unsafe { CommandBuffer::from_raw(&device, caller.raw()) };
    cmd.sample_counters(&times, 0, TimestampGranularity::Precise)
        .unwrap();
    cmd.sample_counters(&stats, 0, TimestampGranularity::Relaxed)
        .unwrap();
    cmd.sample_counters(&times, 1, TimestampGranularity::Precise)
        .unwrap();
    cmd.sample_counters(&stats, 1, TimestampGranularity::Relaxed)
        .unwrap();
    cmd.end_statistics().unwrap();
    let completion = cmd.completion();
    drop(cmd);
    let probe = times.clone();
    drop(times);
    drop(stats);
    // Submitted under gpu-counters' queue lock, as `Device::from_raw` asks
    // of every queue use.
    caller.submit().unwrap();
    caller.wait().unwrap();
    completion.signal();
    let resolved = probe.resolve_counter_range(0..2).unwrap();
    assert!(resolved.all_written(), "{:?}", resolved.statuses());
    drop(caller);
    common::assert_no_validation_messages(&device);
}

/// A host reset of part of a sample buffer (`reset_range`, what the
/// profiler resets of a page after a frame) resets exactly that range, is
/// refused while an index of it is pending, and leaves the rest as it was.
#[test]
fn range_reset_resets_only_its_range() {
    let device = common::device();
    let times = buffer(&device, CommonCounterSet::Timestamp, "range reset", 6);
    let mut cmd = CommandBuffer::new(&device).unwrap();
    for i in 0..4 {
        cmd.sample_counters(&times, i, TimestampGranularity::Precise)
            .unwrap();
    }
    let e = times.reset_range(2..4).unwrap_err();
    assert_eq!(
        reuse_reason(e),
        "is recorded in a command buffer that has not been submitted yet: submit or drop it first"
    );
    common::run(cmd);
    // Ranges past the end and empty ones are refused, as by resolves.
    assert!(times.reset_range(4..7).is_err());
    assert!(times.reset_range(3..3).is_err());
    times.reset_range(0..2).unwrap();
    let resolved = times.resolve_counter_range(0..6).unwrap();
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
    let values = resolved.timestamps().unwrap();
    assert_eq!(values[0].timestamp, u64::MAX, "no silent zero");
    assert_ne!(values[2].timestamp, u64::MAX);
    // The reset indices can be written again without a reset in between.
    let mut cmd = CommandBuffer::new(&device).unwrap();
    cmd.sample_counters(&times, 0, TimestampGranularity::Precise)
        .unwrap();
    cmd.sample_counters(&times, 1, TimestampGranularity::Precise)
        .unwrap();
    common::run(cmd);
    assert_eq!(
        times.resolve_counter_range(0..4).unwrap().statuses(),
        &[SampleStatus::Written; 4]
    );
    times.reset_range(0..6).unwrap();
    assert_eq!(
        times.resolve_counter_range(0..6).unwrap().statuses(),
        &[SampleStatus::NotWritten; 6]
    );
    common::assert_no_validation_messages(&device);
}

/// A host reset, range reset or invalidate of samples whose command buffer
/// was submitted and not yet seen finished fails at once with
/// `SampleIndexReuse` ("still pending on the GPU"), without asking the
/// driver: the GPU is held back behind a gate the whole time, so a reset
/// that waited for it could not return. Before, lavapipe's query read waited
/// for the device to go idle, and the reset went through once it did. Once
/// the submission is waited for, every sample is written and each reset
/// goes through. The worker's answer is awaited on a channel; the long
/// limit only turns a reset that waits for the GPU into a failure instead
/// of a hang, and a passing run never comes near it.
#[test]
fn host_reset_of_submitted_samples_fails_at_once() {
    let device = common::device();
    let times = buffer(&device, CommonCounterSet::Timestamp, "in flight", 2);
    let stats = buffer(&device, CommonCounterSet::Statistic, "in flight", 2);
    let entries = heap(&device, 2);
    let gate = Gate::new(&device);
    let mut cmd = CommandBuffer::new(&device).unwrap();
    let sample = |cmd: &mut CommandBuffer, i: u32| {
        cmd.sample_counters(&times, i, TimestampGranularity::Precise)
            .unwrap();
        cmd.sample_counters(&stats, i, TimestampGranularity::Relaxed)
            .unwrap();
        cmd.write_timestamp(TimestampGranularity::Precise, &entries, i)
            .unwrap();
    };
    sample(&mut cmd, 0);
    gate.record_wait(cmd.raw());
    sample(&mut cmd, 1);
    let submission = cmd.commit().unwrap();

    let (tx, rx) = std::sync::mpsc::channel();
    let worker = {
        let (times, stats, entries) = (times.clone(), stats.clone(), entries.clone());
        std::thread::spawn(move || {
            let answers = [
                times.reset(),
                times.reset_range(1..2),
                stats.reset(),
                entries.invalidate_counter_range(0..2),
            ];
            let _ = tx.send(answers.map(|r| r.map_err(reuse_reason)));
        })
    };
    let answers = rx.recv_timeout(std::time::Duration::from_secs(60));
    gate.open();
    worker.join().unwrap();
    let answers = answers.expect("the resets returned while the GPU was held back");
    for (what, answer) in ["reset", "range reset", "statistics reset", "invalidate"]
        .into_iter()
        .zip(answers)
    {
        assert!(
            matches!(answer, Err(reason) if reason.contains("pending on the GPU")),
            "{what}: {answer:?}"
        );
    }

    submission.wait().unwrap();
    assert!(times.resolve_counter_range(0..2).unwrap().all_written());
    assert!(stats.resolve_counter_range(0..2).unwrap().all_written());
    assert!(entries.resolve_counter_range(0..2).unwrap().all_written());
    times.reset().unwrap();
    stats.reset_range(0..2).unwrap();
    entries.invalidate_counter_range(0..2).unwrap();
    drop(submission);
    drop(gate);
    common::assert_no_validation_messages(&device);
}
