//! Vertex, clipping and fragment invocations, an occlusion query and the
//! rendered image all agree with what the render workload says in advance.

mod common;

use ash::vk;
use common::Gpu;
use gpu_counters_workloads::RenderWorkload;

struct Counts {
    vertex: u64,
    clipping: u64,
    fragment: u64,
    occlusion: u64,
    nonzero_pixels: u64,
}

fn run(gpu: &Gpu, triangles: u32, width: u32, height: u32) -> (Counts, u64) {
    let device = &gpu.device;
    let mut workload =
        RenderWorkload::new(&gpu.ctx(), triangles, width, height).expect("RenderWorkload::new");
    assert_eq!(
        workload.expected_vertex_invocations(),
        3 * u64::from(triangles)
    );
    assert_eq!(
        workload.expected_clipper_invocations(),
        u64::from(triangles)
    );
    assert_eq!(workload.extent(), vk::Extent2D { width, height });
    assert_eq!(workload.color_format(), vk::Format::R8G8B8A8_UNORM);

    let stats = gpu.query_pool(
        vk::QueryType::PIPELINE_STATISTICS,
        vk::QueryPipelineStatisticFlags::VERTEX_SHADER_INVOCATIONS
            | vk::QueryPipelineStatisticFlags::CLIPPING_INVOCATIONS
            | vk::QueryPipelineStatisticFlags::FRAGMENT_SHADER_INVOCATIONS,
        1,
    );
    let occlusion = gpu.query_pool(
        vk::QueryType::OCCLUSION,
        vk::QueryPipelineStatisticFlags::empty(),
        1,
    );
    let pixel_bytes = u64::from(width) * u64::from(height) * 4;
    let readback = gpu.host_buffer(pixel_bytes);

    gpu.submit_and_wait(|cmd| {
        // SAFETY: recording into a command buffer of this device; all objects
        // are live; queries are begun and ended outside the rendering
        // instance, which lies entirely between them.
        unsafe {
            device.cmd_reset_query_pool(cmd, stats, 0, 1);
            device.cmd_reset_query_pool(cmd, occlusion, 0, 1);
        }
        // SAFETY: `cmd` is a recording command buffer of `device` (the harness
        // begins it), outside any render pass, and the harness waits for it to
        // finish before the workload is destroyed.
        unsafe { workload.record_prepare(device, cmd) };
        let attachments = [workload.color_attachment()];
        let rendering = vk::RenderingInfo::default()
            .render_area(workload.render_area())
            .layer_count(1)
            .color_attachments(&attachments);
        // SAFETY: as above.
        unsafe {
            device.cmd_begin_query(cmd, stats, 0, vk::QueryControlFlags::empty());
            device.cmd_begin_query(cmd, occlusion, 0, vk::QueryControlFlags::PRECISE);
            device.cmd_begin_rendering(cmd, &rendering);
        }
        // SAFETY: `cmd` is recording inside the rendering instance begun above with
        // the workload's color attachment (prepared above) and no depth or
        // stencil; the harness waits for it before the workload is destroyed.
        unsafe { workload.record_draw(device, cmd) };
        // SAFETY: as above; then the image goes to TRANSFER_SRC_OPTIMAL and is
        // copied whole into the host buffer.
        unsafe {
            device.cmd_end_rendering(cmd);
            device.cmd_end_query(cmd, occlusion, 0);
            device.cmd_end_query(cmd, stats, 0);
            let to_transfer = [vk::ImageMemoryBarrier2::default()
                .src_stage_mask(vk::PipelineStageFlags2::COLOR_ATTACHMENT_OUTPUT)
                .src_access_mask(vk::AccessFlags2::COLOR_ATTACHMENT_WRITE)
                .dst_stage_mask(vk::PipelineStageFlags2::TRANSFER)
                .dst_access_mask(vk::AccessFlags2::TRANSFER_READ)
                .old_layout(vk::ImageLayout::COLOR_ATTACHMENT_OPTIMAL)
                .new_layout(vk::ImageLayout::TRANSFER_SRC_OPTIMAL)
                .src_queue_family_index(vk::QUEUE_FAMILY_IGNORED)
                .dst_queue_family_index(vk::QUEUE_FAMILY_IGNORED)
                .image(workload.color_image())
                .subresource_range(vk::ImageSubresourceRange {
                    aspect_mask: vk::ImageAspectFlags::COLOR,
                    base_mip_level: 0,
                    level_count: 1,
                    base_array_layer: 0,
                    layer_count: 1,
                })];
            device.cmd_pipeline_barrier2(
                cmd,
                &vk::DependencyInfo::default().image_memory_barriers(&to_transfer),
            );
            let region = vk::BufferImageCopy::default()
                .buffer_offset(0)
                .image_subresource(vk::ImageSubresourceLayers {
                    aspect_mask: vk::ImageAspectFlags::COLOR,
                    mip_level: 0,
                    base_array_layer: 0,
                    layer_count: 1,
                })
                .image_extent(vk::Extent3D {
                    width,
                    height,
                    depth: 1,
                });
            device.cmd_copy_image_to_buffer(
                cmd,
                workload.color_image(),
                vk::ImageLayout::TRANSFER_SRC_OPTIMAL,
                readback.buffer,
                &[region],
            );
        }
        gpu.record_transfer_to_host(cmd);
    });

    let [vertex, clipping, fragment] = gpu.query_results::<3>(stats);
    let [occluded] = gpu.query_results::<1>(occlusion);
    let pixels = readback.bytes();
    let mut nonzero_pixels = 0u64;
    for px in pixels.chunks_exact(4) {
        if px != [0, 0, 0, 0] {
            nonzero_pixels += 1;
            // Constant color (1.0, 0.5, 0.25, 1.0) in UNORM8; 0.5 and 0.25 may
            // round either way.
            assert_eq!(px[0], 255);
            assert!((127..=128).contains(&px[1]), "green {}", px[1]);
            assert!((63..=64).contains(&px[2]), "blue {}", px[2]);
            assert_eq!(px[3], 255);
        }
    }
    let covered = workload.covered_pixels();

    readback.destroy(device);
    // SAFETY: the submission finished (waited on its fence).
    unsafe {
        device.destroy_query_pool(stats, None);
        device.destroy_query_pool(occlusion, None);
        workload.destroy(device);
    }
    (
        Counts {
            vertex,
            clipping,
            fragment,
            occlusion: occluded,
            nonzero_pixels,
        },
        covered,
    )
}

#[test]
fn render_counts_are_exact() {
    let gpu = Gpu::new();
    for (triangles, width, height) in [
        (1, 64, 64),
        (37, 256, 128),
        (1, 4, 4),
        (4, 8, 8),
        (5, 17, 9),
        (100, 100, 60),
        (7, 1000, 30),
        (1000, 256, 256),
    ] {
        let (c, covered) = run(&gpu, triangles, width, height);
        let t = u64::from(triangles);
        eprintln!(
            "T={triangles} {width}x{height}: vertex {} (expect {}), clipping {} (expect {}), \
             fragment {} (>= {covered}), occlusion {} (expect {covered}), non-zero pixels {}",
            c.vertex,
            3 * t,
            c.clipping,
            t,
            c.fragment,
            c.occlusion,
            c.nonzero_pixels
        );
        let what = format!("T={triangles} {width}x{height}");
        assert!(covered > 0, "{what}");
        assert_eq!(c.vertex, 3 * t, "vertex shader invocations, {what}");
        assert_eq!(c.clipping, t, "clipping invocations, {what}");
        assert!(
            c.fragment >= covered,
            "fragment shader invocations {} < covered {covered}, {what}",
            c.fragment
        );
        assert_eq!(c.occlusion, covered, "occlusion samples passed, {what}");
        assert_eq!(c.nonzero_pixels, covered, "non-zero pixels, {what}");
    }
    gpu.finish();
}

#[test]
fn covered_pixels_is_leg_squared_per_triangle() {
    let gpu = Gpu::new();
    let mut workload = RenderWorkload::new(&gpu.ctx(), 1, 64, 64).expect("new");
    // One triangle in a 64-pixel cell: legs 64 and 32, covering 32^2 centers.
    assert_eq!(workload.cell_size(), 64);
    assert_eq!(workload.covered_pixels(), 32 * 32);
    // SAFETY: never used on the GPU.
    unsafe { workload.destroy(&gpu.device) };
    gpu.finish();
}
