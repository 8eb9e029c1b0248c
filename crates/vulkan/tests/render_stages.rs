//! Metal 4's render-stage timestamps (`writeTimestamp(granularity:after:...)`)
//! with known vertex and fragment work, and heap labels.
mod common;

use gpu_counters_hal::RenderStage::{self, Fragment, Mesh, Object, Tile, Vertex};
use gpu_counters_hal::TimestampGranularity::{Precise, Relaxed};
use gpu_counters_hal::{
    CommonCounterSet, CounterErrorKind, CounterHeapDescriptor, Error, InvalidInput, SampleStatus,
};
use gpu_counters_vulkan::ash::vk;
use gpu_counters_vulkan::{
    CommandBuffer, Device, RenderEncoder, RenderPassDescriptor, RenderPassSampleBufferAttachment,
    RenderTarget,
};
use gpu_counters_workloads::RenderWorkload;

fn invalid(e: Error) -> InvalidInput {
    assert_eq!(e.kind(), CounterErrorKind::Invalid, "{e}");
    e.invalid().cloned().unwrap()
}

/// Begins a render pass over the workload's color attachment, sampling
/// `attachments`, and runs `f` on its encoder after the workload's draw.
fn in_render_pass(
    device: &Device,
    work: &RenderWorkload,
    cmd: &mut CommandBuffer,
    attachments: &[RenderPassSampleBufferAttachment<'_>],
    f: impl FnOnce(&mut RenderEncoder<'_>),
) {
    let colors = [work.color_attachment()];
    let info = vk::RenderingInfo::default()
        .render_area(work.render_area())
        .layer_count(1)
        .color_attachments(&colors);
    // SAFETY: the rendering info names the workload's color view (an object
    // of `device`, destroyed only after the GPU is done), in
    // COLOR_ATTACHMENT_OPTIMAL as the workload's prepare barrier (recorded
    // by the caller) leaves it, and rendering leaves it so; over its whole
    // extent in one layer; `colors` and `info` outlive the call;
    // gpu-counters' devices enable dynamic rendering.
    let mut pass = unsafe {
        cmd.render_encoder(&RenderPassDescriptor {
            target: RenderTarget::Dynamic(&info),
            sample_buffer_attachments: attachments,
        })
    }
    .unwrap();
    // SAFETY: `pass.raw()` is recording inside the rendering instance just
    // begun with the workload's color attachment and no depth or stencil;
    // the workload outlives the GPU's use (the callers wait).
    unsafe { work.record_draw(device.raw(), pass.raw()) };
    f(&mut pass);
    pass.end_encoding().unwrap();
}

/// A render pass of `triangles` triangles over `width` x `height`, with a
/// precise and a relaxed timestamp after the vertex and the fragment stage:
/// the work is what the workload draws (exact statistics), the precise
/// timestamps lie between the pass's start and end samples, the relaxed
/// ones share one timestamp after both, and every one is inside the CPU
/// window that brackets the submission, give or take its bound.
fn check(triangles: u32, width: u32, height: u32) {
    let device = common::device();
    let heap = device
        .make_counter_heap(&CounterHeapDescriptor::timestamp(4).with_label("stage times"))
        .unwrap();
    assert_eq!(heap.label(), "stage times");
    let bounds = common::sample_buffer(&device, CommonCounterSet::Timestamp, "pass bounds", 2);
    let stats = common::sample_buffer(&device, CommonCounterSet::Statistic, "pass work", 2);
    let mut work = RenderWorkload::new(&common::ctx(&device), triangles, width, height).unwrap();
    let mut cmd = CommandBuffer::new(&device).unwrap();
    // SAFETY: `cmd.raw()` is recording outside any render pass on `device`,
    // where the workload was built; the GPU is done with it (`common::run`
    // waits) before it is destroyed.
    unsafe { work.record_prepare(device.raw(), cmd.raw()) };
    let attach = |b| RenderPassSampleBufferAttachment {
        sample_buffer: b,
        start_of_vertex_sample_index: Some(0),
        end_of_vertex_sample_index: None,
        start_of_fragment_sample_index: None,
        end_of_fragment_sample_index: Some(1),
    };
    in_render_pass(
        &device,
        &work,
        &mut cmd,
        &[attach(&bounds), attach(&stats)],
        |pass| {
            pass.write_timestamp(Precise, Vertex, &heap, 0).unwrap();
            pass.write_timestamp(Precise, Fragment, &heap, 1).unwrap();
            pass.write_timestamp(Relaxed, Vertex, &heap, 2).unwrap();
            pass.write_timestamp(Relaxed, Fragment, &heap, 3).unwrap();
        },
    );
    let (submit, complete) = common::run(cmd);
    let calibration = device.calibration().unwrap();

    let s = stats.resolve_counter_range(0..2).unwrap();
    let st = s.statistics().unwrap();
    let counted = st[1].since(&st[0]);
    let t = u64::from(triangles);
    assert_eq!(counted.vertex_invocations, 3 * t, "T={triangles}");
    assert_eq!(counted.clipper_primitives_out, t);
    assert_eq!(counted.fragments_passed, work.covered_pixels());

    let b = bounds.resolve_counter_range(0..2).unwrap();
    assert_eq!(b.statuses(), &[SampleStatus::Written; 2]);
    let b = b.timestamps().unwrap();
    let (start, end) = (b[0].timestamp, b[1].timestamp);
    let h = heap.resolve_counter_range(0..4).unwrap();
    assert_eq!(h.statuses(), &[SampleStatus::Written; 4]);
    let h: Vec<u64> = h
        .timestamps()
        .unwrap()
        .iter()
        .map(|s| s.timestamp)
        .collect();
    let (vertex, fragment) = (h[0], h[1]);
    assert!(start <= vertex && vertex <= end, "{start} {h:?} {end}");
    assert!(start <= fragment && fragment <= end, "{start} {h:?} {end}");
    // Relaxed writes share the pass's end timestamp, after every stage.
    assert_eq!(h[2], h[3], "{h:?}");
    assert!(vertex <= h[2] && fragment <= h[2], "{h:?}");
    for ticks in [start, end, vertex, fragment, h[2]] {
        let c = calibration.to_cpu_ns(ticks).unwrap();
        assert!(
            c.ns + c.error_bound_ns >= submit && c.ns <= complete + c.error_bound_ns,
            "{} ± {} outside {submit}..{complete}",
            c.ns,
            c.error_bound_ns
        );
    }
    // SAFETY: the device finished every command buffer that used the
    // workload (`common::run` waits), which was built on `device`.
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

/// Tile shading never exists on Vulkan, and object and mesh shading not on
/// a device gpu-counters opens (it enables no `VK_EXT_mesh_shader`): each
/// is a typed error naming the stage and the device, at either
/// granularity, recording nothing; the pass goes on, and a vertex write
/// after it is taken.
#[test]
fn a_stage_the_device_lacks_is_a_typed_error() {
    let device = common::device();
    for stage in RenderStage::ALL {
        assert_eq!(
            device.supports_render_stage(stage),
            matches!(stage, Vertex | Fragment),
            "{stage}"
        );
    }
    let heap = device
        .make_counter_heap(&CounterHeapDescriptor::timestamp(8))
        .unwrap();
    assert_eq!(heap.label(), "timestamp heap of 8");
    let mut work = RenderWorkload::new(&common::ctx(&device), 3, 32, 32).unwrap();
    let mut cmd = CommandBuffer::new(&device).unwrap();
    // SAFETY: as in `check`.
    unsafe { work.record_prepare(device.raw(), cmd.raw()) };
    in_render_pass(&device, &work, &mut cmd, &[], |pass| {
        for (i, stage) in [Tile, Object, Mesh].into_iter().enumerate() {
            for granularity in [Precise, Relaxed] {
                let e = pass
                    .write_timestamp(granularity, stage, &heap, i as u32)
                    .unwrap_err();
                assert_eq!(
                    invalid(e.clone()),
                    InvalidInput::UnsupportedRenderStage {
                        stage,
                        device: device.info().name.clone(),
                    }
                );
                assert!(e.to_string().contains(stage.name()), "{e}");
            }
        }
        pass.write_timestamp(Precise, Vertex, &heap, 3).unwrap();
    });
    common::run(cmd);
    let r = heap.resolve_counter_range(0..4).unwrap();
    use SampleStatus::{NotWritten, Written};
    assert_eq!(r.statuses(), &[NotWritten, NotWritten, NotWritten, Written]);
    // SAFETY: as in `check`.
    unsafe { work.destroy(device.raw()) };
    common::assert_no_validation_messages(&device);
}

/// Inside a render pass Vulkan cannot reset a query: a precise write after
/// a stage into an entry written before in the same recording is refused,
/// naming the entry, while a relaxed one is taken at the pass's end
/// (outside the render pass, where the entry is reset first).
#[test]
fn a_precise_stage_write_into_a_written_entry_is_refused_in_the_pass() {
    let device = common::device();
    let heap = device
        .make_counter_heap(&CounterHeapDescriptor::timestamp(4).with_label("reused"))
        .unwrap();
    let mut work = RenderWorkload::new(&common::ctx(&device), 2, 16, 16).unwrap();
    let mut cmd = CommandBuffer::new(&device).unwrap();
    // SAFETY: as in `check`.
    unsafe { work.record_prepare(device.raw(), cmd.raw()) };
    in_render_pass(&device, &work, &mut cmd, &[], |pass| {
        pass.write_timestamp(Precise, Vertex, &heap, 0).unwrap();
        pass.write_timestamp(Precise, Fragment, &heap, 1).unwrap();
    });
    let mut refused = None;
    in_render_pass(&device, &work, &mut cmd, &[], |pass| {
        refused = pass.write_timestamp(Precise, Fragment, &heap, 0).err();
        pass.write_timestamp(Relaxed, Vertex, &heap, 1).unwrap();
    });
    let e = refused.expect("a precise write into a written entry is refused");
    assert!(
        matches!(
            invalid(e.clone()),
            InvalidInput::SampleIndexReuse { index: 0, ref label, .. } if label == "reused"
        ),
        "{e}"
    );
    common::run(cmd);
    let r = heap.resolve_counter_range(0..4).unwrap();
    use SampleStatus::{NotWritten, Written};
    assert_eq!(r.statuses(), &[Written, Written, NotWritten, NotWritten]);
    let t = r.timestamps().unwrap();
    // Entry 1 holds the second pass's relaxed timestamp, after the first
    // pass's writes.
    assert!(t[0].timestamp <= t[1].timestamp, "{t:?}");
    // SAFETY: as in `check`.
    unsafe { work.destroy(device.raw()) };
    common::assert_no_validation_messages(&device);
}
