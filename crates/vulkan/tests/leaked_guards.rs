//! Every guard the Vulkan backend hands out, leaked with `mem::forget`:
//! compute, blit and render encoders, a command buffer, a submission. No
//! silent zero, no hang, no panic, no validation message; a typed error
//! from every call that cannot go on.
mod common;

use common::sample_buffer as buffer;

use gpu_counters_hal::{
    CommonCounterSet, CounterErrorKind, CounterHeapDescriptor, Error, InvalidInput, RenderStage,
    SampleStatus, TimestampGranularity,
};
use gpu_counters_vulkan::ash::vk;
use gpu_counters_vulkan::{
    BlitPassDescriptor, CommandBuffer, ComputePassDescriptor, CounterHeap, CounterSampleBuffer,
    Device, GpuBuffer, MemoryLocation, PassSampleBufferAttachment, RenderPassDescriptor,
    RenderPassSampleBufferAttachment, RenderTarget,
};
use gpu_counters_workloads::RenderWorkload;

fn invalid(e: Error) -> InvalidInput {
    assert_eq!(e.kind(), CounterErrorKind::Invalid, "{e}");
    e.invalid().cloned().unwrap()
}

/// Whether `r` is the leaked-encoder error.
fn leaked<T: std::fmt::Debug>(what: &str, r: gpu_counters_hal::Result<T>) {
    match r {
        Err(e) => assert!(
            matches!(invalid(e.clone()), InvalidInput::EncoderState(ref m) if m.contains("never ended")),
            "{what}: {e}"
        ),
        Ok(v) => panic!("{what}: Ok({v:?}) with an encoder leaked"),
    }
}

fn reuse_reason(e: Error) -> &'static str {
    match invalid(e) {
        InvalidInput::SampleIndexReuse { reason, .. } => reason,
        other => panic!("expected SampleIndexReuse, got {other:?}"),
    }
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    Compute,
    Blit,
    Render,
}

/// The buffers a leaked pass samples: timestamps and statistics, two
/// samples each, and a heap it writes a relaxed timestamp into.
struct Sampled {
    times: CounterSampleBuffer,
    stats: CounterSampleBuffer,
    heap: CounterHeap,
}

impl Sampled {
    fn new(device: &Device) -> Self {
        Self {
            times: buffer(device, CommonCounterSet::Timestamp, "leaked pass", 2),
            stats: buffer(device, CommonCounterSet::Statistic, "leaked pass", 2),
            heap: device
                .make_counter_heap(&CounterHeapDescriptor::timestamp(2))
                .unwrap(),
        }
    }
}

/// Begins a pass of `kind` on `cmd` sampling `s` at its start and end,
/// writes a relaxed heap timestamp in it where the kind can, and leaks it.
fn leak_pass(kind: Kind, cmd: &mut CommandBuffer, s: &Sampled, work: &RenderWorkload) {
    let attach = |b| PassSampleBufferAttachment {
        sample_buffer: b,
        start_of_encoder_sample_index: Some(0),
        end_of_encoder_sample_index: Some(1),
    };
    let attachments = [attach(&s.times), attach(&s.stats)];
    match kind {
        Kind::Compute => {
            let mut pass = cmd
                .compute_encoder(&ComputePassDescriptor {
                    sample_buffer_attachments: &attachments,
                })
                .unwrap();
            pass.write_timestamp(TimestampGranularity::Relaxed, &s.heap, 0)
                .unwrap();
            std::mem::forget(pass);
        }
        Kind::Blit => {
            let pass = cmd
                .blit_encoder(&BlitPassDescriptor {
                    sample_buffer_attachments: &attachments,
                })
                .unwrap();
            std::mem::forget(pass);
        }
        Kind::Render => {
            let colors = [work.color_attachment()];
            let info = vk::RenderingInfo::default()
                .render_area(work.render_area())
                .layer_count(1)
                .color_attachments(&colors);
            let attach = |b| RenderPassSampleBufferAttachment {
                sample_buffer: b,
                start_of_vertex_sample_index: Some(0),
                end_of_vertex_sample_index: None,
                start_of_fragment_sample_index: None,
                end_of_fragment_sample_index: Some(1),
            };
            // SAFETY: the workload's prepare (recorded into `cmd` by the
            // caller) leaves its color view, an object of this device that
            // outlives the test's GPU work, in COLOR_ATTACHMENT_OPTIMAL; the
            // area is its whole extent in one layer; `colors` and `info`
            // outlive the call; gpu-counters' devices enable dynamic
            // rendering.
            let mut pass = unsafe {
                cmd.render_encoder(&RenderPassDescriptor {
                    target: RenderTarget::Dynamic(&info),
                    sample_buffer_attachments: &[attach(&s.times), attach(&s.stats)],
                })
            }
            .unwrap();
            pass.write_timestamp(
                TimestampGranularity::Relaxed,
                RenderStage::Fragment,
                &s.heap,
                0,
            )
            .unwrap();
            std::mem::forget(pass);
        }
    }
}

/// A compute, blit or render encoder leaked with its end samples pending
/// and a statistic query open: every later call on its command buffer that
/// would record outside the pass (a new encoder of each kind, a sample, a
/// heap write, a reset, both GPU resolves, `end_statistics`, `commit`) fails
/// naming the leaked encoder. The command buffer, dropped unsubmitted by the
/// failed commit, leaves no sample written or pending: each resolves
/// `NotWritten` and can be reset at once, and a new command buffer writes
/// them. No validation message.
#[test]
fn a_leaked_encoder_of_each_kind_fails_every_later_call() {
    let device = common::device();
    let ctx = common::ctx(&device);
    let mut work = RenderWorkload::new(&ctx, 1, 16, 16).unwrap();
    let dest = GpuBuffer::new(&device, 4096, MemoryLocation::DeviceLocal).unwrap();
    for kind in [Kind::Compute, Kind::Blit, Kind::Render] {
        let s = Sampled::new(&device);
        let other = buffer(&device, CommonCounterSet::Timestamp, "other", 2);
        let mut cmd = CommandBuffer::new(&device).unwrap();
        // SAFETY: `cmd.raw()` is recording outside any render pass on
        // `device`, where the workload was built; the GPU is done with it
        // (the device is idle) before it is destroyed.
        unsafe { work.record_prepare(device.raw(), cmd.raw()) };
        leak_pass(kind, &mut cmd, &s, &work);

        let what = format!("{kind:?}");
        leaked(
            &format!("{what}: compute encoder"),
            cmd.compute_encoder(&ComputePassDescriptor::default())
                .map(|_| ()),
        );
        leaked(
            &format!("{what}: blit encoder"),
            cmd.blit_encoder(&BlitPassDescriptor::default()).map(|_| ()),
        );
        {
            let colors = [work.color_attachment()];
            let info = vk::RenderingInfo::default()
                .render_area(work.render_area())
                .layer_count(1)
                .color_attachments(&colors);
            // SAFETY: as in `leak_pass`; the call is refused before it
            // records anything.
            let r = unsafe {
                cmd.render_encoder(&RenderPassDescriptor {
                    target: RenderTarget::Dynamic(&info),
                    sample_buffer_attachments: &[],
                })
            };
            leaked(&format!("{what}: render encoder"), r.map(|_| ()));
        }
        leaked(
            &format!("{what}: sample"),
            cmd.sample_counters(&other, 0, TimestampGranularity::Precise),
        );
        leaked(
            &format!("{what}: heap write"),
            cmd.write_timestamp(TimestampGranularity::Precise, &s.heap, 1),
        );
        leaked(&format!("{what}: reset"), cmd.reset_samples(&other, 0..2));
        leaked(
            &format!("{what}: resolve"),
            cmd.resolve_counters(&s.times, 0..2, &dest, 0),
        );
        leaked(
            &format!("{what}: heap resolve"),
            cmd.resolve_counter_heap(&s.heap, 0..2, &dest, 0),
        );
        leaked(&format!("{what}: end_statistics"), cmd.end_statistics());
        leaked(&format!("{what}: commit"), cmd.commit().map(|_| ()));

        for (label, r) in [
            ("times", s.times.resolve_counter_range(0..2).unwrap()),
            ("stats", s.stats.resolve_counter_range(0..2).unwrap()),
            ("heap", s.heap.resolve_counter_range(0..2).unwrap()),
            ("other", other.resolve_counter_range(0..2).unwrap()),
        ] {
            assert_eq!(
                r.statuses(),
                &[SampleStatus::NotWritten; 2],
                "{what}: {label}"
            );
        }
        s.times.reset().unwrap();
        s.stats.reset().unwrap();
        s.heap.invalidate_counter_range(0..2).unwrap();

        let mut cmd = CommandBuffer::new(&device).unwrap();
        for i in 0..2 {
            cmd.sample_counters(&s.times, i, TimestampGranularity::Precise)
                .unwrap();
            cmd.sample_counters(&s.stats, i, TimestampGranularity::Relaxed)
                .unwrap();
        }
        common::run(cmd);
        assert!(s.times.resolve_counter_range(0..2).unwrap().all_written());
        assert!(s.stats.resolve_counter_range(0..2).unwrap().all_written());
    }
    device.wait_idle().unwrap();
    // SAFETY: the device is idle, so no command buffer uses the workload,
    // which was built on `device`.
    unsafe { work.destroy(device.raw()) };
    drop(dest);
    common::assert_no_validation_messages(&device);
}

/// An encoder leaked in a caller's command buffer (`from_raw`):
/// `end_statistics`, which the caller must call before ending it, fails
/// naming the leaked encoder, and dropping the wrapper does not panic. The
/// caller discards the command buffer unsubmitted.
#[test]
fn a_leaked_encoder_in_a_callers_command_buffer_fails_end_statistics() {
    let device = common::device();
    let ctx = common::ctx(&device);
    let mut work = RenderWorkload::new(&ctx, 1, 16, 16).unwrap();
    for kind in [Kind::Compute, Kind::Blit, Kind::Render] {
        let s = Sampled::new(&device);
        let caller = gpu_counters_workloads::CallerCommandBuffer::new(&device).unwrap();
        // SAFETY: `caller.raw()` is a primary command buffer of the device's
        // queue family, recording; it is discarded unsubmitted after the
        // wrapper is dropped, and never ended.
        let mut cmd = unsafe { CommandBuffer::from_raw(&device, caller.raw()) };
        // SAFETY: as in the test above.
        unsafe { work.record_prepare(device.raw(), cmd.raw()) };
        leak_pass(kind, &mut cmd, &s, &work);
        leaked(&format!("{kind:?}: end_statistics"), cmd.end_statistics());
        drop(cmd);
        drop(caller);
    }
    device.wait_idle().unwrap();
    // SAFETY: the device is idle and the workload was built on it.
    unsafe { work.destroy(device.raw()) };
    common::assert_no_validation_messages(&device);
}

/// A command buffer leaked while recording: its samples resolve as not
/// ready (never a zero); another command buffer cannot write them, nor can
/// the host reset them, each with a typed error saying why; its other
/// indices stay usable. Nothing waits.
#[test]
fn a_leaked_command_buffer_keeps_its_samples_pending() {
    let device = common::device();
    let times = buffer(&device, CommonCounterSet::Timestamp, "leaked recording", 4);
    let mut cmd = CommandBuffer::new(&device).unwrap();
    cmd.sample_counters(&times, 0, TimestampGranularity::Precise)
        .unwrap();
    cmd.sample_counters(&times, 1, TimestampGranularity::Precise)
        .unwrap();
    std::mem::forget(cmd);
    let r = times.resolve_counter_range(0..2).unwrap();
    assert_eq!(r.statuses(), &[SampleStatus::NotReady; 2]);
    let mut other = CommandBuffer::new(&device).unwrap();
    let e = other
        .sample_counters(&times, 0, TimestampGranularity::Precise)
        .unwrap_err();
    assert!(reuse_reason(e).contains("not been submitted"));
    let e = times.reset_range(0..2).unwrap_err();
    assert!(reuse_reason(e).contains("not been submitted"));
    other
        .sample_counters(&times, 2, TimestampGranularity::Precise)
        .unwrap();
    other
        .sample_counters(&times, 3, TimestampGranularity::Precise)
        .unwrap();
    common::run(other);
    let r = times.resolve_counter_range(2..4).unwrap();
    assert!(r.all_written(), "{:?}", r.statuses());
    times.reset_range(2..4).unwrap();
    common::assert_no_validation_messages(&device);
}

/// A submission leaked with `mem::forget` (its drop would wait for the
/// GPU): its samples resolve written once the GPU ran them, and a host
/// reset of them is refused (nothing saw the submission finish) until
/// `Device::wait_idle`, after which it goes through.
#[test]
fn a_leaked_submission_is_finished_by_wait_idle() {
    let device = common::device();
    let times = buffer(&device, CommonCounterSet::Timestamp, "leaked submission", 2);
    let mut cmd = CommandBuffer::new(&device).unwrap();
    cmd.sample_counters(&times, 0, TimestampGranularity::Precise)
        .unwrap();
    cmd.sample_counters(&times, 1, TimestampGranularity::Precise)
        .unwrap();
    std::mem::forget(cmd.commit().unwrap());
    let e = times.reset().unwrap_err();
    assert!(reuse_reason(e).contains("pending on the GPU"));
    device.wait_idle().unwrap();
    let r = times.resolve_counter_range(0..2).unwrap();
    assert!(r.all_written(), "{:?}", r.statuses());
    times.reset().unwrap();
    common::assert_no_validation_messages(&device);
}
