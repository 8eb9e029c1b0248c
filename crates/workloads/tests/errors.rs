//! Bad sizes are typed errors naming the size and the limit, never panics or
//! validation errors.

mod common;

use common::Gpu;
use gpu_counters_workloads::{
    compile_wgsl, ComputeWorkload, CopyWorkload, RenderWorkload, WorkloadError,
};

fn invalid_size<T: std::fmt::Debug>(result: Result<T, WorkloadError>) -> String {
    match result {
        Err(WorkloadError::InvalidSize { message, .. }) => message,
        other => panic!("expected InvalidSize, got {other:?}"),
    }
}

#[test]
fn compute_sizes_are_checked() {
    let gpu = Gpu::new();
    let ctx = gpu.ctx();
    let limits = gpu.limits();

    let m = invalid_size(ComputeWorkload::new(&ctx, 0, 1, 1));
    assert!(m.contains("workgroup_size"), "{m}");
    let m = invalid_size(ComputeWorkload::new(&ctx, 1, 0, 1));
    assert!(m.contains("workgroups"), "{m}");

    let too_wide = limits.max_compute_work_group_size[0] + 1;
    let m = invalid_size(ComputeWorkload::new(&ctx, too_wide, 1, 1));
    assert!(m.contains("maxComputeWorkGroupSize[0]"), "{m}");
    assert!(m.contains(&too_wide.to_string()), "{m}");

    if limits.max_compute_work_group_invocations < limits.max_compute_work_group_size[0] {
        let s = limits.max_compute_work_group_invocations + 1;
        let m = invalid_size(ComputeWorkload::new(&ctx, s, 1, 1));
        assert!(m.contains("maxComputeWorkGroupInvocations"), "{m}");
    }

    if let Some(w) = limits.max_compute_work_group_count[0].checked_add(1) {
        let m = invalid_size(ComputeWorkload::new(&ctx, 1, w, 1));
        assert!(m.contains("maxComputeWorkGroupCount[0]"), "{m}");
    }

    // A buffer over maxStorageBufferRange.
    let s = limits.max_compute_work_group_size[0].min(limits.max_compute_work_group_invocations);
    let w = (u64::from(limits.max_storage_buffer_range) / 4 / u64::from(s) + 1)
        .min(u64::from(limits.max_compute_work_group_count[0])) as u32;
    if u64::from(s) * u64::from(w) * 4 > u64::from(limits.max_storage_buffer_range) {
        let m = invalid_size(ComputeWorkload::new(&ctx, s, w, 1));
        assert!(m.contains("maxStorageBufferRange"), "{m}");
    }
    gpu.finish();
}

#[test]
fn render_sizes_are_checked() {
    let gpu = Gpu::new();
    let ctx = gpu.ctx();
    let limits = gpu.limits();

    let m = invalid_size(RenderWorkload::new(&ctx, 0, 64, 64));
    assert!(m.contains("triangles"), "{m}");
    let m = invalid_size(RenderWorkload::new(&ctx, 1, 0, 64));
    assert!(m.contains("width"), "{m}");
    let m = invalid_size(RenderWorkload::new(&ctx, 1, 64, 0));
    assert!(m.contains("height"), "{m}");
    let too_big = limits.max_image_dimension2_d + 1;
    let m = invalid_size(RenderWorkload::new(&ctx, 1, too_big, 64));
    assert!(
        m.contains("width") && m.contains(&too_big.to_string()),
        "{m}"
    );
    let m = invalid_size(RenderWorkload::new(&ctx, 1, 64, too_big));
    assert!(m.contains("height"), "{m}");
    // 8x8 holds four 4x4 cells, not five; 3x3 holds none.
    let m = invalid_size(RenderWorkload::new(&ctx, 5, 8, 8));
    assert!(m.contains("triangles 5") && m.contains("at most 4"), "{m}");
    let m = invalid_size(RenderWorkload::new(&ctx, 1, 3, 3));
    assert!(m.contains("at most 0"), "{m}");
    gpu.finish();
}

#[test]
fn copy_sizes_are_checked() {
    let gpu = Gpu::new();
    let ctx = gpu.ctx();
    let m = invalid_size(CopyWorkload::new(&ctx, 0));
    assert!(m.contains("bytes"), "{m}");
    let m = invalid_size(CopyWorkload::new(&ctx, u64::MAX));
    assert!(m.contains("heap"), "{m}");
    gpu.finish();
}

#[test]
fn bad_wgsl_is_a_shader_error() {
    match compile_wgsl("@compute @workgroup_size(1) fn main() { let x: u32 = 1.0; }") {
        Err(WorkloadError::Shader(message)) => assert!(!message.is_empty()),
        other => panic!("expected a shader error, got {other:?}"),
    }
}

/// The constructor parameters an `InvalidSize` names.
fn invalid_fields<T: std::fmt::Debug>(result: Result<T, WorkloadError>) -> Vec<&'static str> {
    match result {
        Err(WorkloadError::InvalidSize { fields, .. }) => fields,
        other => panic!("expected InvalidSize, got {other:?}"),
    }
}

#[test]
fn invalid_sizes_name_their_parameters() {
    let gpu = Gpu::new();
    let ctx = gpu.ctx();
    let limits = gpu.limits();

    assert_eq!(
        invalid_fields(ComputeWorkload::new(&ctx, 0, 1, 1)),
        ["workgroup_size"]
    );
    assert_eq!(
        invalid_fields(ComputeWorkload::new(&ctx, 1, 0, 1)),
        ["workgroups"]
    );
    let too_wide = limits.max_compute_work_group_size[0] + 1;
    assert_eq!(
        invalid_fields(ComputeWorkload::new(&ctx, too_wide, 1, 1)),
        ["workgroup_size"]
    );
    if let Some(w) = limits.max_compute_work_group_count[0].checked_add(1) {
        assert_eq!(
            invalid_fields(ComputeWorkload::new(&ctx, 1, w, 1)),
            ["workgroups"]
        );
    }
    let s = limits.max_compute_work_group_size[0].min(limits.max_compute_work_group_invocations);
    let w = (u64::from(limits.max_storage_buffer_range) / 4 / u64::from(s) + 1)
        .min(u64::from(limits.max_compute_work_group_count[0])) as u32;
    if u64::from(s) * u64::from(w) * 4 > u64::from(limits.max_storage_buffer_range) {
        assert_eq!(
            invalid_fields(ComputeWorkload::new(&ctx, s, w, 1)),
            ["workgroup_size", "workgroups"]
        );
    }

    assert_eq!(
        invalid_fields(RenderWorkload::new(&ctx, 0, 64, 64)),
        ["triangles"]
    );
    assert_eq!(
        invalid_fields(RenderWorkload::new(&ctx, 1, 0, 64)),
        ["width"]
    );
    assert_eq!(
        invalid_fields(RenderWorkload::new(&ctx, 1, 64, 0)),
        ["height"]
    );
    let too_big = limits.max_image_dimension2_d + 1;
    assert_eq!(
        invalid_fields(RenderWorkload::new(&ctx, 1, too_big, 64)),
        ["width"]
    );
    assert_eq!(
        invalid_fields(RenderWorkload::new(&ctx, 5, 8, 8)),
        ["triangles"]
    );

    assert_eq!(invalid_fields(CopyWorkload::new(&ctx, 0)), ["bytes"]);
    assert_eq!(invalid_fields(CopyWorkload::new(&ctx, u64::MAX)), ["bytes"]);
    gpu.finish();
}

/// The render workload refuses a context whose device lacks
/// dynamicRendering, instead of building a pipeline the device cannot use.
#[test]
fn render_needs_dynamic_rendering() {
    let gpu = Gpu::new();
    let ctx = gpu.ctx();
    // SAFETY: the handles are the harness's, which belong together; the
    // context only claims less than the device has.
    let without = unsafe {
        gpu_counters_workloads::GpuContext::from_raw(
            &gpu.instance,
            gpu.physical_device,
            ctx.device(),
            ctx.queue_family_index(),
            false,
        )
    };
    match RenderWorkload::new(&without, 1, 16, 16) {
        Err(WorkloadError::Vulkan(e)) => assert!(e.to_string().contains("dynamicRendering"), "{e}"),
        other => panic!("expected the missing feature, got {other:?}"),
    }
}
