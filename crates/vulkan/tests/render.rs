//! Render passes: exact vertex, clipper and fragments-passed counts.
mod common;

use gpu_counters_core::{CommonCounterSet, CounterSampleBufferDescriptor, SampleStatus};
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
