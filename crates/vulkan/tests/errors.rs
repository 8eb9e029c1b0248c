//! Every bad input the design lists (docs/ARCHITECTURE.md) gets its own typed error: no panic,
//! no validation-layer message.
mod common;

use gpu_counters_hal::{
    CommonCounterSet, CounterErrorKind, CounterHeapDescriptor, CounterSampleBufferDescriptor,
    Error, InvalidInput, RenderStage, SampleStatus, StorageMode, TimestampGranularity,
};
use gpu_counters_vulkan::ash::vk;
use gpu_counters_vulkan::{
    BlitPassDescriptor, CommandBuffer, ComputePassDescriptor, CounterSampleBuffer, Device,
    GpuBuffer, MemoryLocation, PassSampleBufferAttachment, RenderPassDescriptor,
    RenderPassSampleBufferAttachment, RenderTarget, MAX_SAMPLE_COUNT,
};
use gpu_counters_workloads::{CallerCommandBuffer, RenderWorkload};

fn invalid(e: Error) -> InvalidInput {
    assert_eq!(e.kind(), CounterErrorKind::Invalid, "{e}");
    e.invalid().cloned().unwrap()
}

/// What a [`InvalidInput::ForeignObject`] error names.
fn foreign(e: Error) -> &'static str {
    match invalid(e) {
        InvalidInput::ForeignObject { what } => what,
        other => panic!("{other:?}"),
    }
}

fn timestamps(device: &Device, label: &str, count: u32) -> CounterSampleBuffer {
    device
        .make_counter_sample_buffer(&CounterSampleBufferDescriptor::new(
            CommonCounterSet::Timestamp,
            label,
            count,
        ))
        .unwrap()
}

fn attach(
    b: &CounterSampleBuffer,
    start: Option<u32>,
    end: Option<u32>,
) -> PassSampleBufferAttachment<'_> {
    PassSampleBufferAttachment {
        sample_buffer: b,
        start_of_encoder_sample_index: start,
        end_of_encoder_sample_index: end,
    }
}

#[test]
fn sample_count_zero() {
    let device = common::device();
    let e = device
        .make_counter_sample_buffer(&CounterSampleBufferDescriptor::new(
            CommonCounterSet::Timestamp,
            "empty",
            0,
        ))
        .unwrap_err();
    assert_eq!(
        invalid(e.clone()),
        InvalidInput::SampleCountZero {
            label: "empty".into()
        }
    );
    assert!(e.to_string().contains("sample_count"), "{e}");
    common::assert_no_validation_messages(&device);
}

#[test]
fn sample_count_over_the_limit() {
    let device = common::device();
    let e = device
        .make_counter_sample_buffer(&CounterSampleBufferDescriptor::new(
            CommonCounterSet::Statistic,
            "huge",
            MAX_SAMPLE_COUNT + 1,
        ))
        .unwrap_err();
    assert_eq!(
        invalid(e),
        InvalidInput::SampleCountTooLarge {
            label: "huge".into(),
            requested: MAX_SAMPLE_COUNT + 1,
            limit: MAX_SAMPLE_COUNT,
        }
    );
    let e = device
        .make_counter_heap(&CounterHeapDescriptor::timestamp(0))
        .unwrap_err();
    assert!(matches!(
        invalid(e),
        InvalidInput::HeapCountOutOfRange { requested: 0, .. }
    ));
    common::assert_no_validation_messages(&device);
}

#[test]
fn counter_set_the_device_lacks() {
    let device = common::device();
    let e = device
        .make_counter_sample_buffer(&CounterSampleBufferDescriptor::new(
            CommonCounterSet::StageUtilization,
            "cycles",
            4,
        ))
        .unwrap_err();
    assert_eq!(
        invalid(e),
        InvalidInput::UnsupportedCounterSet {
            set: CommonCounterSet::StageUtilization,
            device: device.info().name.clone(),
        }
    );
    common::assert_no_validation_messages(&device);
}

#[test]
fn index_out_of_range() {
    let device = common::device();
    let b = timestamps(&device, "two", 2);
    let heap = device
        .make_counter_heap(&CounterHeapDescriptor::timestamp(2))
        .unwrap();
    let mut cmd = CommandBuffer::new(&device).unwrap();
    // Pass attachment.
    let e = cmd
        .compute_encoder(&ComputePassDescriptor {
            sample_buffer_attachments: &[attach(&b, Some(0), Some(2))],
        })
        .err()
        .unwrap();
    let expected = InvalidInput::IndexOutOfRange {
        what: "sample",
        label: "two".into(),
        index: 2,
        count: 2,
    };
    assert_eq!(invalid(e), expected);
    // Encoder-level sample and heap write.
    {
        let mut pass = cmd
            .compute_encoder(&ComputePassDescriptor::default())
            .unwrap();
        assert_eq!(
            invalid(pass.sample_counters(&b, 2, true).unwrap_err()),
            expected
        );
        let e = pass
            .write_timestamp(TimestampGranularity::Precise, &heap, 5)
            .unwrap_err();
        assert!(matches!(
            invalid(e),
            InvalidInput::IndexOutOfRange {
                what: "heap entry",
                index: 5,
                count: 2,
                ..
            }
        ));
        let e = pass
            .write_timestamp(TimestampGranularity::Relaxed, &heap, 2)
            .unwrap_err();
        assert!(matches!(
            invalid(e),
            InvalidInput::IndexOutOfRange { index: 2, .. }
        ));
        pass.end_encoding().unwrap();
    }
    assert_eq!(
        invalid(
            cmd.sample_counters(&b, 7, TimestampGranularity::Precise)
                .unwrap_err()
        ),
        InvalidInput::IndexOutOfRange {
            what: "sample",
            label: "two".into(),
            index: 7,
            count: 2,
        }
    );
    common::run(cmd);
    common::assert_no_validation_messages(&device);
}

#[test]
fn range_past_the_end() {
    let device = common::device();
    let b = timestamps(&device, "three", 3);
    #[allow(clippy::reversed_empty_ranges)] // an empty and a reversed range are bad inputs too
    let ranges = [0..4, 2..5, 3..3, 2..1];
    for range in ranges {
        let e = b.resolve_counter_range(range.clone()).unwrap_err();
        assert_eq!(
            invalid(e),
            InvalidInput::RangeOutOfBounds {
                label: "three".into(),
                start: range.start,
                end: range.end,
                count: 3,
            }
        );
    }
    let dst = GpuBuffer::new(&device, 64, MemoryLocation::HostVisible).unwrap();
    let mut cmd = CommandBuffer::new(&device).unwrap();
    let e = cmd.resolve_counters(&b, 1..4, &dst, 0).unwrap_err();
    assert!(matches!(
        invalid(e),
        InvalidInput::RangeOutOfBounds {
            start: 1,
            end: 4,
            ..
        }
    ));
    let heap = device
        .make_counter_heap(&CounterHeapDescriptor::timestamp(2))
        .unwrap();
    assert!(matches!(
        invalid(heap.invalidate_counter_range(1..3).unwrap_err()),
        InvalidInput::RangeOutOfBounds {
            start: 1,
            end: 3,
            count: 2,
            ..
        }
    ));
    assert!(matches!(
        invalid(heap.resolve_counter_range(0..9).unwrap_err()),
        InvalidInput::RangeOutOfBounds { .. }
    ));
    drop(cmd);
    common::assert_no_validation_messages(&device);
}

#[test]
fn cpu_resolve_of_a_private_buffer() {
    let device = common::device();
    let b = device
        .make_counter_sample_buffer(
            &CounterSampleBufferDescriptor::new(CommonCounterSet::Statistic, "gpu only", 2)
                .with_storage_mode(StorageMode::Private),
        )
        .unwrap();
    assert_eq!(
        invalid(b.resolve_counter_range(0..2).unwrap_err()),
        InvalidInput::CpuResolveOfPrivateBuffer {
            label: "gpu only".into()
        }
    );
    common::assert_no_validation_messages(&device);
}

#[test]
fn destination_offset_unaligned() {
    let device = common::device();
    let b = timestamps(&device, "t", 2);
    let dst = GpuBuffer::new(&device, 64, MemoryLocation::HostVisible).unwrap();
    let mut cmd = CommandBuffer::new(&device).unwrap();
    assert_eq!(
        invalid(cmd.resolve_counters(&b, 0..2, &dst, 4).unwrap_err()),
        InvalidInput::DestinationOffsetUnaligned {
            offset: 4,
            alignment: 8
        }
    );
    drop(cmd);
    common::assert_no_validation_messages(&device);
}

#[test]
fn destination_too_small() {
    let device = common::device();
    let b = device
        .make_counter_sample_buffer(&CounterSampleBufferDescriptor::new(
            CommonCounterSet::Statistic,
            "s",
            2,
        ))
        .unwrap();
    let dst = GpuBuffer::new(&device, 100, MemoryLocation::HostVisible).unwrap();
    let mut cmd = CommandBuffer::new(&device).unwrap();
    assert_eq!(
        invalid(cmd.resolve_counters(&b, 0..2, &dst, 0).unwrap_err()),
        InvalidInput::DestinationTooSmall {
            offset: 0,
            needed: 128,
            available: 100
        }
    );
    assert_eq!(
        invalid(cmd.resolve_counters(&b, 0..1, &dst, 64).unwrap_err()),
        InvalidInput::DestinationTooSmall {
            offset: 64,
            needed: 64,
            available: 36
        }
    );
    assert_eq!(
        invalid(cmd.resolve_counters(&b, 0..1, &dst, 200).unwrap_err()),
        InvalidInput::DestinationTooSmall {
            offset: 200,
            needed: 64,
            available: 0
        }
    );
    drop(cmd);
    common::assert_no_validation_messages(&device);
}

#[test]
fn objects_of_another_device() {
    let a = common::device();
    let b = common::device();
    let buffer_a = timestamps(&a, "a", 2);
    let heap_a = a
        .make_counter_heap(&CounterHeapDescriptor::timestamp(2))
        .unwrap();
    let dst_a = GpuBuffer::new(&a, 16, MemoryLocation::HostVisible).unwrap();
    let buffer_b = timestamps(&b, "b", 2);
    let mut cmd = CommandBuffer::new(&b).unwrap();
    assert_eq!(
        foreign(
            cmd.sample_counters(&buffer_a, 0, TimestampGranularity::Precise)
                .unwrap_err()
        ),
        "counter sample buffer"
    );
    assert_eq!(
        foreign(
            cmd.write_timestamp(TimestampGranularity::Precise, &heap_a, 0)
                .unwrap_err()
        ),
        "counter heap"
    );
    assert_eq!(
        foreign(
            cmd.compute_encoder(&ComputePassDescriptor {
                sample_buffer_attachments: &[attach(&buffer_a, Some(0), None)],
            })
            .err()
            .unwrap()
        ),
        "counter sample buffer"
    );
    assert_eq!(
        foreign(
            cmd.resolve_counters(&buffer_b, 0..2, &dst_a, 0)
                .unwrap_err()
        ),
        "destination buffer"
    );
    assert_eq!(
        foreign(
            cmd.resolve_counters(&buffer_a, 0..2, &dst_a, 0)
                .unwrap_err()
        ),
        "counter sample buffer"
    );
    drop(cmd);
    common::assert_no_validation_messages(&a);
    common::assert_no_validation_messages(&b);
}

/// The calls `objects_of_another_device` leaves out, each refusing device
/// A's object on device B's command buffer with `ForeignObject` naming it
/// (hal's shared `DeviceId` check): a recorded reset, a heap's GPU resolve
/// (its heap and its destination), a blit pass's attachments, resolves and
/// samples, and a render pass's attachments, samples and heap writes (both
/// granularities). B's own work still runs; nothing of
/// A's is written; no validation message on either device.
#[test]
fn objects_of_another_device_in_every_call() {
    let (a, b) = (common::device(), common::device());
    let heap = |d: &Device| {
        d.make_counter_heap(&CounterHeapDescriptor::timestamp(4))
            .unwrap()
    };
    let (buffer_a, buffer_b) = (timestamps(&a, "a", 4), timestamps(&b, "b", 4));
    let (heap_a, heap_b) = (heap(&a), heap(&b));
    let dst_a = GpuBuffer::new(&a, 256, MemoryLocation::HostVisible).unwrap();
    let dst_b = GpuBuffer::new(&b, 256, MemoryLocation::HostVisible).unwrap();
    let buffer = "counter sample buffer";
    let mut cmd = CommandBuffer::new(&b).unwrap();
    assert_eq!(
        foreign(cmd.reset_samples(&buffer_a, 0..2).unwrap_err()),
        buffer
    );
    assert_eq!(
        foreign(
            cmd.resolve_counter_heap(&heap_a, 0..2, &dst_b, 0)
                .unwrap_err()
        ),
        "counter heap"
    );
    assert_eq!(
        foreign(
            cmd.resolve_counter_heap(&heap_b, 0..2, &dst_a, 0)
                .unwrap_err()
        ),
        "destination buffer"
    );
    assert_eq!(
        foreign(
            cmd.blit_encoder(&BlitPassDescriptor {
                sample_buffer_attachments: &[attach(&buffer_a, Some(0), Some(1))],
            })
            .err()
            .unwrap()
        ),
        buffer
    );
    {
        let mut blit = cmd.blit_encoder(&BlitPassDescriptor::default()).unwrap();
        assert_eq!(
            foreign(
                blit.resolve_counters(&buffer_a, 0..1, &dst_b, 0)
                    .unwrap_err()
            ),
            buffer
        );
        assert_eq!(
            foreign(blit.sample_counters(&buffer_a, 2, true).unwrap_err()),
            buffer
        );
        blit.sample_counters(&buffer_b, 0, true).unwrap();
        blit.end_encoding().unwrap();
    }
    let mut work = RenderWorkload::new(&common::ctx(&b), 1, 16, 16).unwrap();
    // SAFETY: `cmd.raw()` is recording outside any render pass on `b`, where
    // the workload was built; the GPU is done with it (`common::run` waits)
    // before it is destroyed.
    unsafe { work.record_prepare(b.raw(), cmd.raw()) };
    let colors = [work.color_attachment()];
    let info = vk::RenderingInfo::default()
        .render_area(work.render_area())
        .layer_count(1)
        .color_attachments(&colors);
    let render = |sample_buffer| RenderPassSampleBufferAttachment {
        sample_buffer,
        start_of_vertex_sample_index: Some(1),
        end_of_vertex_sample_index: None,
        start_of_fragment_sample_index: None,
        end_of_fragment_sample_index: Some(3),
    };
    // SAFETY: the rendering info names the workload's color view (an object
    // of `b`, destroyed only after the GPU is done), in
    // COLOR_ATTACHMENT_OPTIMAL as the workload's prepare barrier leaves it,
    // over its whole extent in one layer; `colors` and `info` outlive the
    // calls; gpu-counters' devices enable dynamic rendering.
    let refused = unsafe {
        cmd.render_encoder(&RenderPassDescriptor {
            target: RenderTarget::Dynamic(&info),
            sample_buffer_attachments: &[render(&buffer_a)],
        })
    };
    assert_eq!(foreign(refused.err().unwrap()), buffer);
    // SAFETY: as above.
    let mut pass = unsafe {
        cmd.render_encoder(&RenderPassDescriptor {
            target: RenderTarget::Dynamic(&info),
            sample_buffer_attachments: &[render(&buffer_b)],
        })
    }
    .unwrap();
    assert_eq!(
        foreign(pass.sample_counters(&buffer_a, 2, true).unwrap_err()),
        buffer
    );
    for granularity in [TimestampGranularity::Precise, TimestampGranularity::Relaxed] {
        assert_eq!(
            foreign(
                pass.write_timestamp(granularity, RenderStage::Fragment, &heap_a, 2)
                    .unwrap_err()
            ),
            "counter heap"
        );
    }
    // SAFETY: `pass.raw()` is recording inside the rendering instance just
    // begun with the workload's color attachment (prepared above) and no
    // depth or stencil; the workload outlives the GPU's use.
    unsafe { work.record_draw(b.raw(), pass.raw()) };
    pass.end_encoding().unwrap();
    common::run(cmd);
    let mut written = [SampleStatus::Written; 4];
    written[2] = SampleStatus::NotWritten;
    assert_eq!(
        buffer_b.resolve_counter_range(0..4).unwrap().statuses(),
        &written
    );
    assert_eq!(
        buffer_a.resolve_counter_range(0..4).unwrap().statuses(),
        &[SampleStatus::NotWritten; 4]
    );
    assert_eq!(
        heap_a.resolve_counter_range(0..4).unwrap().statuses(),
        &[SampleStatus::NotWritten; 4]
    );
    // SAFETY: the device finished every command buffer that used the
    // workload (`common::run` waits), which was built on `b`.
    unsafe { work.destroy(b.raw()) };
    common::assert_no_validation_messages(&a);
    common::assert_no_validation_messages(&b);
}

/// A command buffer holding claims (blocks it writes without the lock) on
/// its own device's sets still refuses the other device's, at the same
/// indices, on every path with a claimed fast path: command-buffer samples
/// and heap writes, encoder samples, precise and relaxed heap writes, and
/// pass attachments.
#[test]
fn objects_of_another_device_beside_claimed_blocks() {
    let (a, b) = (common::device(), common::device());
    let (buffer_a, buffer_b) = (timestamps(&a, "a", 64), timestamps(&b, "b", 64));
    let heap = |d: &Device| {
        d.make_counter_heap(&CounterHeapDescriptor::timestamp(64))
            .unwrap()
    };
    let (heap_a, heap_b) = (heap(&a), heap(&b));
    // The other device's recording claims the same indices of its own sets.
    let mut cmd_a = CommandBuffer::new(&a).unwrap();
    cmd_a
        .sample_counters(&buffer_a, 0, TimestampGranularity::Precise)
        .unwrap();
    cmd_a
        .write_timestamp(TimestampGranularity::Precise, &heap_a, 0)
        .unwrap();
    let mut cmd = CommandBuffer::new(&b).unwrap();
    // Claims on b's sets: index 0 written under the lock, 1 claimed clean.
    cmd.sample_counters(&buffer_b, 0, TimestampGranularity::Precise)
        .unwrap();
    cmd.sample_counters(&buffer_b, 1, TimestampGranularity::Precise)
        .unwrap();
    cmd.write_timestamp(TimestampGranularity::Precise, &heap_b, 0)
        .unwrap();
    cmd.write_timestamp(TimestampGranularity::Precise, &heap_b, 1)
        .unwrap();
    assert_eq!(
        foreign(
            cmd.sample_counters(&buffer_a, 2, TimestampGranularity::Precise)
                .unwrap_err()
        ),
        "counter sample buffer"
    );
    assert_eq!(
        foreign(
            cmd.write_timestamp(TimestampGranularity::Precise, &heap_a, 2)
                .unwrap_err()
        ),
        "counter heap"
    );
    {
        let mut enc = cmd
            .compute_encoder(&ComputePassDescriptor::default())
            .unwrap();
        enc.sample_counters(&buffer_b, 2, true).unwrap();
        enc.write_timestamp(TimestampGranularity::Precise, &heap_b, 2)
            .unwrap();
        assert_eq!(
            foreign(enc.sample_counters(&buffer_a, 3, true).unwrap_err()),
            "counter sample buffer"
        );
        for granularity in [TimestampGranularity::Precise, TimestampGranularity::Relaxed] {
            assert_eq!(
                foreign(enc.write_timestamp(granularity, &heap_a, 3).unwrap_err()),
                "counter heap"
            );
        }
        enc.end_encoding().unwrap();
    }
    {
        // A relaxed write of b's heap first, then a's.
        let mut enc = cmd
            .compute_encoder(&ComputePassDescriptor::default())
            .unwrap();
        enc.write_timestamp(TimestampGranularity::Relaxed, &heap_b, 4)
            .unwrap();
        assert_eq!(
            foreign(
                enc.write_timestamp(TimestampGranularity::Relaxed, &heap_a, 4)
                    .unwrap_err()
            ),
            "counter heap"
        );
        enc.end_encoding().unwrap();
    }
    assert_eq!(
        foreign(
            cmd.compute_encoder(&ComputePassDescriptor {
                sample_buffer_attachments: &[attach(&buffer_a, Some(6), Some(7))],
            })
            .err()
            .unwrap()
        ),
        "counter sample buffer"
    );
    // b's own writes all went through, and a's recording is untouched.
    cmd.commit().unwrap().wait().unwrap();
    let r = buffer_b.resolve_counter_range(0..3).unwrap();
    assert_eq!(r.statuses(), &[SampleStatus::Written; 3]);
    let r = heap_b.resolve_counter_range(0..5).unwrap();
    let mut expected = [SampleStatus::Written; 5];
    expected[3] = SampleStatus::NotWritten;
    assert_eq!(r.statuses(), &expected);
    cmd_a.commit().unwrap().wait().unwrap();
    common::assert_no_validation_messages(&a);
    common::assert_no_validation_messages(&b);
}

#[test]
fn index_reuse_inside_a_render_pass_and_attached_twice() {
    let device = common::device();
    let b = timestamps(&device, "frame", 4);
    let stats1 = device
        .make_counter_sample_buffer(&CounterSampleBufferDescriptor::new(
            CommonCounterSet::Statistic,
            "s1",
            2,
        ))
        .unwrap();
    let stats2 = device
        .make_counter_sample_buffer(&CounterSampleBufferDescriptor::new(
            CommonCounterSet::Statistic,
            "s2",
            2,
        ))
        .unwrap();
    let mut work = RenderWorkload::new(&common::ctx(&device), 1, 16, 16).unwrap();
    let mut cmd = CommandBuffer::new(&device).unwrap();
    // The same index twice in one pass.
    let e = cmd
        .compute_encoder(&ComputePassDescriptor {
            sample_buffer_attachments: &[attach(&b, Some(1), Some(1))],
        })
        .err()
        .unwrap();
    assert!(matches!(
        invalid(e),
        InvalidInput::SampleIndexReuse { index: 1, .. }
    ));
    // Two statistic buffers in one pass.
    let e = cmd
        .compute_encoder(&ComputePassDescriptor {
            sample_buffer_attachments: &[
                attach(&stats1, Some(0), None),
                attach(&stats2, Some(0), None),
            ],
        })
        .err()
        .unwrap();
    assert!(matches!(invalid(e), InvalidInput::Argument(m) if m.contains("at most one statistic")));

    // SAFETY: `cmd.raw()` is recording outside any render pass on `device`, where
    // the workload was built; the GPU is done with it (`common::run` waits)
    // before it is destroyed.
    unsafe { work.record_prepare(device.raw(), cmd.raw()) };
    let colors = [work.color_attachment()];
    let info = vk::RenderingInfo::default()
        .render_area(work.render_area())
        .layer_count(1)
        .color_attachments(&colors);
    // SAFETY: the rendering info names the workload's color view (an object of
    // `device`, destroyed only after the GPU is done), in
    // COLOR_ATTACHMENT_OPTIMAL as the workload's prepare barrier leaves it,
    // over its whole extent in one layer; `colors` and `info` outlive the
    // call; gpu-counters' devices enable dynamic rendering.
    let mut pass = unsafe {
        cmd.render_encoder(&RenderPassDescriptor {
            target: RenderTarget::Dynamic(&info),
            sample_buffer_attachments: &[RenderPassSampleBufferAttachment {
                sample_buffer: &b,
                start_of_vertex_sample_index: Some(0),
                end_of_vertex_sample_index: None,
                start_of_fragment_sample_index: None,
                end_of_fragment_sample_index: Some(3),
            }],
        })
    }
    .unwrap();
    // SAFETY: `pass.raw()` is recording inside the rendering instance just begun
    // with the workload's color attachment (prepared above) and no depth or
    // stencil; the workload outlives the GPU's use (`common::run` waits).
    unsafe { work.record_draw(device.raw(), pass.raw()) };
    // A sampling point the device lacks.
    let e = pass
        .sample_counters_at_tile_dispatch(&b, 2, true)
        .unwrap_err();
    assert_eq!(
        invalid(e),
        InvalidInput::UnsupportedSamplingPoint {
            point: gpu_counters_hal::CounterSamplingPoint::AtTileDispatchBoundary,
            device: device.info().name.clone(),
        }
    );
    pass.sample_counters(&b, 1, true).unwrap();
    // Index 0 was written at the pass's start; Vulkan cannot reset it here.
    let e = pass.sample_counters(&b, 0, true).unwrap_err();
    assert!(matches!(
        invalid(e),
        InvalidInput::SampleIndexReuse { index: 0, .. }
    ));
    pass.end_encoding().unwrap();
    common::run(cmd);
    assert!(b.resolve_counter_range(0..2).unwrap().all_written());
    // SAFETY: the device finished every command buffer that used the workload
    // (`common::run` waits), which was built on `device`.
    unsafe { work.destroy(device.raw()) };
    common::assert_no_validation_messages(&device);
}

#[test]
fn commit_of_a_callers_command_buffer() {
    let device = common::device();
    let mut caller = CallerCommandBuffer::new(&device).unwrap();
    let b = timestamps(&device, "caller's", 2);
    // SAFETY: `caller.raw()` is a primary command buffer of `device` from a
    // pool of its queue family, recording, and recorded into only through
    // `cmd`; it is submitted (to the queue, under `Device::queue`'s lock) and
    // waited for before `completion` is signaled; no statistics are sampled.
    let mut cmd = unsafe { CommandBuffer::from_raw(&device, caller.raw()) };
    cmd.sample_counters(&b, 0, TimestampGranularity::Precise)
        .unwrap();
    cmd.sample_counters(&b, 1, TimestampGranularity::Precise)
        .unwrap();
    let completion = cmd.completion();
    assert!(matches!(
        invalid(cmd.commit().unwrap_err()),
        InvalidInput::EncoderState(_)
    ));
    // The caller submits their own command buffer.
    caller.submit().unwrap();
    caller.wait().unwrap();
    completion.signal();
    assert!(b.resolve_counter_range(0..2).unwrap().all_written());
    drop(caller);
    common::assert_no_validation_messages(&device);
}
