//! Render passes: exact vertex, clipper and fragments-passed counts.
mod common;

use gpu_counters_hal::{CommonCounterSet, CounterSampleBufferDescriptor, SampleStatus};
use gpu_counters_vulkan::ash::vk;
use gpu_counters_vulkan::{
    CommandBuffer, RenderPassDescriptor, RenderPassSampleBufferAttachment, RenderTarget,
};
use gpu_counters_workloads::RenderWorkload;

fn check(triangles: u32, width: u32, height: u32) {
    let device = common::device();
    let stats = device
        .make_counter_sample_buffer(&CounterSampleBufferDescriptor::new(
            CommonCounterSet::Statistic,
            "render stats",
            4,
        ))
        .unwrap();
    let times = device
        .make_counter_sample_buffer(&CounterSampleBufferDescriptor::new(
            CommonCounterSet::Timestamp,
            "render times",
            4,
        ))
        .unwrap();
    let mut work = RenderWorkload::new(&common::ctx(&device), triangles, width, height).unwrap();
    let mut cmd = CommandBuffer::new(&device).unwrap();
    // SAFETY: `cmd.raw()` is recording outside any render pass on `device`, where
    // the workload was built; the GPU is done with it (`common::run` waits)
    // before it is destroyed.
    unsafe { work.record_prepare(device.raw(), cmd.raw()) };
    let colors = [work.color_attachment()];
    let info = vk::RenderingInfo::default()
        .render_area(work.render_area())
        .layer_count(1)
        .color_attachments(&colors);
    let attach = |b| RenderPassSampleBufferAttachment {
        sample_buffer: b,
        start_of_vertex_sample_index: Some(0),
        end_of_vertex_sample_index: Some(1),
        start_of_fragment_sample_index: Some(2),
        end_of_fragment_sample_index: Some(3),
    };
    // SAFETY: the rendering info names the workload's color view (an object of
    // `device`, destroyed only after the GPU is done), in
    // COLOR_ATTACHMENT_OPTIMAL as the workload's prepare barrier leaves it,
    // over its whole extent in one layer; `colors` and `info` outlive the
    // call; gpu-counters' devices enable dynamic rendering.
    let pass = unsafe {
        cmd.render_encoder(&RenderPassDescriptor {
            target: RenderTarget::Dynamic(&info),
            sample_buffer_attachments: &[attach(&stats), attach(&times)],
        })
    }
    .unwrap();
    // SAFETY: `pass.raw()` is recording inside the rendering instance just begun
    // with the workload's color attachment (prepared above) and no depth or
    // stencil; the workload outlives the GPU's use (`common::run` waits).
    unsafe { work.record_draw(device.raw(), pass.raw()) };
    pass.end_encoding().unwrap();
    let (submit, complete) = common::run(cmd);
    let calibration = device.calibration().unwrap();

    let s = stats.resolve_counter_range(0..4).unwrap();
    assert!(s.all_written(), "{:?}", s.statuses());
    let st = s.statistics().unwrap();
    for (start, end) in [(0, 1), (2, 3), (0, 3)] {
        let counted = st[end].since(&st[start]);
        let t = triangles as u64;
        assert_eq!(counted.vertex_invocations, 3 * t, "T={triangles}");
        assert_eq!(counted.clipper_invocations, t);
        assert_eq!(counted.clipper_primitives_out, t);
        assert!(counted.fragment_invocations >= work.covered_pixels());
        assert_eq!(counted.fragments_passed, work.covered_pixels());
        assert_eq!(counted.compute_kernel_invocations, 0);
    }

    let t = times.resolve_counter_range(0..4).unwrap();
    assert_eq!(t.statuses(), &[SampleStatus::Written; 4]);
    let ts = t.timestamps().unwrap();
    for (start, end) in [(0, 1), (2, 3), (0, 3)] {
        assert!(calibration
            .interval_ns(ts[start].timestamp, ts[end].timestamp)
            .is_some());
    }
    for s in ts {
        let c = calibration.to_cpu_ns(s.timestamp).unwrap();
        assert!(c.ns + c.error_bound_ns >= submit && c.ns <= complete + c.error_bound_ns);
    }
    // SAFETY: the device finished every command buffer that used the workload
    // (`common::run` waits), which was built on `device`.
    unsafe { work.destroy(device.raw()) };
    common::assert_no_validation_messages(&device);
}

#[test]
fn one_triangle() {
    check(1, 64, 64);
}

#[test]
fn many_triangles() {
    check(37, 256, 128);
}

#[test]
fn odd_target() {
    check(5, 17, 9);
}

/// Relaxed heap writes in a render pass, each followed by a precise write
/// of the same entry: the precise write wins, and is valid inside the
/// render pass (no reset: the relaxed write's entry was never written).
/// Later relaxed writes of the pass share the first one's timestamp, an
/// entry written before included; a first relaxed write into an entry
/// written before is reset and written at the pass's end.
#[test]
fn relaxed_then_precise_in_a_render_pass() {
    use gpu_counters_hal::RenderStage::Fragment;
    use gpu_counters_hal::TimestampGranularity::{Precise, Relaxed};
    let device = common::device();
    let heap = device
        .make_counter_heap(&gpu_counters_hal::CounterHeapDescriptor::timestamp(8))
        .unwrap();
    let mut work = RenderWorkload::new(&common::ctx(&device), 1, 16, 16).unwrap();
    let mut cmd = CommandBuffer::new(&device).unwrap();
    // SAFETY: as in `check`.
    unsafe { work.record_prepare(device.raw(), cmd.raw()) };
    // A precise write in a compute pass claims the heap's block.
    let mut pass = cmd
        .compute_encoder(&gpu_counters_vulkan::ComputePassDescriptor::default())
        .unwrap();
    pass.write_timestamp(Precise, &heap, 0).unwrap();
    pass.end_encoding().unwrap();
    let colors = [work.color_attachment()];
    let info = vk::RenderingInfo::default()
        .render_area(work.render_area())
        .layer_count(1)
        .color_attachments(&colors);
    for round in 0..3 {
        // SAFETY: as in `check`: the workload's color view, prepared above
        // (rendering leaves it in the same layout), over its whole extent.
        let mut pass = unsafe {
            cmd.render_encoder(&RenderPassDescriptor {
                target: RenderTarget::Dynamic(&info),
                sample_buffer_attachments: &[],
            })
        }
        .unwrap();
        if round == 0 {
            // The pass's first relaxed write, then a precise one in its place.
            pass.write_timestamp(Relaxed, Fragment, &heap, 1).unwrap();
            pass.write_timestamp(Precise, Fragment, &heap, 1).unwrap();
            // Again (the first relaxed write since), and one in the lists.
            pass.write_timestamp(Relaxed, Fragment, &heap, 2).unwrap();
            pass.write_timestamp(Relaxed, Fragment, &heap, 3).unwrap();
            pass.write_timestamp(Precise, Fragment, &heap, 2).unwrap();
            pass.write_timestamp(Precise, Fragment, &heap, 3).unwrap();
            pass.write_timestamp(Relaxed, Fragment, &heap, 4).unwrap();
        } else if round == 1 {
            pass.write_timestamp(Relaxed, Fragment, &heap, 5).unwrap();
            pass.write_timestamp(Relaxed, Fragment, &heap, 6).unwrap();
            // Written before in this recording: it shares 5's timestamp
            // too, its own query untouched.
            pass.write_timestamp(Relaxed, Fragment, &heap, 0).unwrap();
        } else {
            // The pass's first relaxed write, into an entry written before
            // in this recording: it needs a reset, which the pass's end
            // (outside the render pass) records before writing it.
            pass.write_timestamp(Relaxed, Fragment, &heap, 1).unwrap();
        }
        pass.end_encoding().unwrap();
    }
    common::run(cmd);
    let r = heap.resolve_counter_range(0..8).unwrap();
    let mut expected = [SampleStatus::Written; 8];
    expected[7] = SampleStatus::NotWritten;
    assert_eq!(r.statuses(), &expected);
    let t: Vec<u64> = r
        .timestamps()
        .unwrap()
        .iter()
        .map(|s| s.timestamp)
        .collect();
    // Precise writes in program order, the relaxed one at the pass's end.
    assert!(t[2] <= t[3] && t[3] <= t[4], "{t:?}");
    // The second pass's relaxed writes share one timestamp.
    assert_eq!((t[5], t[0]), (t[6], t[6]), "{t:?}");
    // The third pass's, written after the second pass's.
    assert!(t[4] <= t[5] && t[5] <= t[1], "{t:?}");
    // SAFETY: as in `check`.
    unsafe { work.destroy(device.raw()) };
    common::assert_no_validation_messages(&device);
}
