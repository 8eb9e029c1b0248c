//! Compute shader invocations counted by a pipeline-statistics query equal
//! `D * W * S` exactly, and every invocation wrote its element.

mod common;

use ash::vk;
use common::Gpu;
use gpu_counters_workloads::ComputeWorkload;

/// The value one invocation leaves in element `i` after `dispatches`
/// dispatches of `iterations` steps, starting from 0.
fn expected_value(i: u32, dispatches: u32, iterations: u32) -> u32 {
    let mut x = 0u32;
    for _ in 0..dispatches {
        x ^= i;
        for _ in 0..iterations {
            x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        }
    }
    x
}

/// Runs `dispatches` dispatches (barriers between) inside one statistics
/// query; returns the counted invocations and checks the buffer contents.
fn run(gpu: &Gpu, workgroup_size: u32, workgroups: u32, dispatches: u32, iterations: u32) -> u64 {
    let device = &gpu.device;
    let mut workload = ComputeWorkload::new(&gpu.ctx(), workgroup_size, workgroups, iterations)
        .expect("ComputeWorkload::new");
    let pool = gpu.query_pool(
        vk::QueryType::PIPELINE_STATISTICS,
        vk::QueryPipelineStatisticFlags::COMPUTE_SHADER_INVOCATIONS,
        1,
    );
    let readback = gpu.host_buffer(workload.buffer_size());
    gpu.submit_and_wait(|cmd| {
        // SAFETY: recording into a command buffer of this device, outside a
        // render pass; all objects are live.
        unsafe {
            device.cmd_fill_buffer(cmd, workload.buffer(), 0, vk::WHOLE_SIZE, 0);
            let to_compute = [vk::MemoryBarrier2::default()
                .src_stage_mask(vk::PipelineStageFlags2::TRANSFER)
                .src_access_mask(vk::AccessFlags2::TRANSFER_WRITE)
                .dst_stage_mask(vk::PipelineStageFlags2::COMPUTE_SHADER)
                .dst_access_mask(
                    vk::AccessFlags2::SHADER_STORAGE_READ | vk::AccessFlags2::SHADER_STORAGE_WRITE,
                )];
            device.cmd_pipeline_barrier2(
                cmd,
                &vk::DependencyInfo::default().memory_barriers(&to_compute),
            );
            device.cmd_reset_query_pool(cmd, pool, 0, 1);
            device.cmd_begin_query(cmd, pool, 0, vk::QueryControlFlags::empty());
        }
        for d in 0..dispatches {
            if d > 0 {
                // SAFETY: `cmd` is a recording command buffer of `device` (the harness
                // begins it), outside any render pass, and the harness waits for it to
                // finish before the workload is destroyed.
                unsafe { workload.record_barrier(device, cmd) };
            }
            // SAFETY: `cmd` is a recording command buffer of `device` (the harness
            // begins it), outside any render pass, and the harness waits for it to
            // finish before the workload is destroyed.
            unsafe { workload.record_dispatch(device, cmd) };
        }
        // SAFETY: as above.
        unsafe {
            device.cmd_end_query(cmd, pool, 0);
            let to_transfer = [vk::MemoryBarrier2::default()
                .src_stage_mask(vk::PipelineStageFlags2::COMPUTE_SHADER)
                .src_access_mask(vk::AccessFlags2::SHADER_STORAGE_WRITE)
                .dst_stage_mask(vk::PipelineStageFlags2::TRANSFER)
                .dst_access_mask(vk::AccessFlags2::TRANSFER_READ)];
            device.cmd_pipeline_barrier2(
                cmd,
                &vk::DependencyInfo::default().memory_barriers(&to_transfer),
            );
            device.cmd_copy_buffer(
                cmd,
                workload.buffer(),
                readback.buffer,
                &[vk::BufferCopy {
                    src_offset: 0,
                    dst_offset: 0,
                    size: workload.buffer_size(),
                }],
            );
        }
        gpu.record_transfer_to_host(cmd);
    });
    let [invocations] = gpu.query_results::<1>(pool);

    let values: &[u32] = bytemuck::cast_slice(readback.bytes());
    assert_eq!(
        values.len() as u64,
        u64::from(workgroup_size) * u64::from(workgroups)
    );
    for (i, &v) in values.iter().enumerate() {
        assert_eq!(
            v,
            expected_value(i as u32, dispatches, iterations),
            "element {i} (S={workgroup_size} W={workgroups} D={dispatches})"
        );
    }

    readback.destroy(device);
    // SAFETY: the submission finished (waited on its fence).
    unsafe {
        device.destroy_query_pool(pool, None);
        workload.destroy(device);
    }
    invocations
}

#[test]
fn compute_invocations_are_exact() {
    let gpu = Gpu::new();
    // (D, W, S)
    for (dispatches, workgroups, workgroup_size) in [
        (1, 1, 1),
        (3, 7, 13),
        (5, 17, 64),
        (2, 1, 1),
        (4, 33, 1),
        (1, 1000, 3),
        (7, 5, 128),
    ] {
        let workload_iterations = 16;
        let got = run(
            &gpu,
            workgroup_size,
            workgroups,
            dispatches,
            workload_iterations,
        );
        let expected = u64::from(dispatches) * u64::from(workgroups) * u64::from(workgroup_size);
        eprintln!("D={dispatches} W={workgroups} S={workgroup_size}: invocations {got}, expected {expected}");
        assert_eq!(
            got, expected,
            "D={dispatches} W={workgroups} S={workgroup_size}"
        );
    }
    gpu.finish();
}

#[test]
fn expected_invocations_is_d_w_s() {
    let gpu = Gpu::new();
    let mut workload = ComputeWorkload::new(&gpu.ctx(), 13, 7, 0).expect("new");
    assert_eq!(workload.expected_invocations(3), 3 * 7 * 13);
    assert_eq!(workload.expected_invocations(0), 0);
    assert_eq!(workload.workgroup_size(), 13);
    assert_eq!(workload.workgroups(), 7);
    assert_eq!(workload.buffer_size(), 7 * 13 * 4);
    // SAFETY: never used on the GPU. Destroying twice is a no-op.
    unsafe {
        workload.destroy(&gpu.device);
        workload.destroy(&gpu.device);
    }
    gpu.finish();
}
