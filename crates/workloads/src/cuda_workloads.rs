//! The compute workload on a caller's cudarc stream (feature `cuda`), for
//! `gpu-counters run --backend cuda`.
//!
//! It lives here, beside the Vulkan and wgpu compute workloads, because what
//! makes its count known is shared with them: the same arithmetic per
//! invocation and the same size checks ([`check_sizes`], against the CUDA
//! device attributes of the same meaning). The kernel is PTX text that the
//! driver JIT-compiles (no NVRTC, no nvcc at build time), as
//! gpu-counters-cuda's own kernels are. Like the other workloads it never
//! creates devices and never waits; it launches on the caller's stream
//! (inside a profiler scope in the command line).
//!
//! There is no render workload (CUDA has no graphics pipeline) and no copy
//! workload (a copy on a stream is no kernel launch, so CUPTI's launch
//! callbacks, which the statistic set counts, would not see it).

use crate::compute::{check_sizes, ComputeLimits};
use crate::error::WorkloadError;
use cudarc::driver::sys::CUdevice_attribute;
use cudarc::driver::{
    CudaFunction, CudaSlice, CudaStream, DriverError, LaunchConfig, PushKernelArg,
};
use std::sync::Arc;

/// The kernel: `gc_lcg(data, len, iterations)`, one thread per element.
/// Thread `i = ctaid.x * ntid.x + tid.x`, if `i < len`, computes
/// `x = data[i] ^ i`, then `iterations` times `x = x * 1664525 + 1013904223`
/// (wrapping u32 arithmetic), and stores `data[i] = x`: the compute shader
/// of the Vulkan and wgpu workloads (`compute_source`), statement for
/// statement.
const PTX: &str = r#"
.version 7.0
.target sm_70
.address_size 64

.visible .entry gc_lcg(.param .u64 data, .param .u32 len, .param .u32 iterations)
{
    .reg .b32 %r<12>;
    .reg .b64 %rd<5>;
    .reg .pred %p<3>;
    ld.param.u64 %rd1, [data];
    ld.param.u32 %r1, [len];
    ld.param.u32 %r2, [iterations];
    mov.u32 %r3, %ctaid.x;
    mov.u32 %r4, %ntid.x;
    mov.u32 %r5, %tid.x;
    mad.lo.u32 %r6, %r3, %r4, %r5;
    setp.ge.u32 %p1, %r6, %r1;
    @%p1 bra DONE;
    cvta.to.global.u64 %rd2, %rd1;
    mul.wide.u32 %rd3, %r6, 4;
    add.u64 %rd4, %rd2, %rd3;
    ld.global.u32 %r7, [%rd4];
    xor.b32 %r7, %r7, %r6;
    mov.u32 %r8, 0;
    mov.u32 %r9, 1664525;
    mov.u32 %r10, 1013904223;
    setp.eq.u32 %p2, %r2, 0;
    @%p2 bra STORE;
LOOP:
    mad.lo.u32 %r7, %r7, %r9, %r10;
    add.u32 %r8, %r8, 1;
    setp.lt.u32 %p2, %r8, %r2;
    @%p2 bra LOOP;
STORE:
    st.global.u32 [%rd4], %r7;
DONE:
    ret;
}
"#;

/// The kernel's name in [`PTX`].
const ENTRY: &str = "gc_lcg";

/// The most bytes the storage buffer may have on any device: the kernel
/// indexes its elements with a u32, so at most 2³²−1 of 4 bytes (on a
/// device with less memory, its total memory is the tighter limit).
pub const MAX_CUDA_BUFFER_BYTES: u64 = 4 * u32::MAX as u64;

/// Maps a driver error of `what` onto [`WorkloadError::Cuda`].
fn cuda_err(what: &'static str) -> impl Fn(DriverError) -> WorkloadError {
    move |e| WorkloadError::Cuda(gpu_counters_cuda::map_driver_error(what, e))
}

/// The compute workload on CUDA: as [`crate::ComputeWorkload`], each
/// dispatch is one launch of `W` blocks (workgroups) of `S` threads
/// (invocations) of the same arithmetic on a device buffer of `W * S`
/// `u32`s, so `D` launches make exactly `D * W * S` kernel invocations
/// (grid × block threads each, as CUPTI's launch callbacks count them).
///
/// Launches on one stream run in order, so consecutive dispatches need no
/// barrier (the Vulkan workload records one with `record_barrier`).
#[derive(Debug)]
pub struct CudaComputeWorkload {
    workgroup_size: u32,
    workgroups: u32,
    iterations: u32,
    /// `W * S`, the kernel's `len`.
    len: u32,
    data: CudaSlice<u32>,
    function: CudaFunction,
}

impl CudaComputeWorkload {
    /// Builds the workload on `stream`'s context: checks the sizes against
    /// the device's attributes, loads the kernel and allocates a zeroed
    /// device buffer of `workgroup_size * workgroups` `u32`s on `stream`.
    ///
    /// # Errors
    ///
    /// - [`WorkloadError::InvalidSize`] when `workgroup_size` or
    ///   `workgroups` is 0, `workgroup_size` is over
    ///   `CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X` or
    ///   `CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK`, `workgroups` is over
    ///   `CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X`, or the buffer is over the
    ///   device's total memory or [`MAX_CUDA_BUFFER_BYTES`].
    /// - [`WorkloadError::Cuda`] when a driver call fails (reading the
    ///   attributes, loading the PTX, allocating the buffer).
    pub fn new(
        stream: &Arc<CudaStream>,
        workgroup_size: u32,
        workgroups: u32,
        iterations: u32,
    ) -> Result<Self, WorkloadError> {
        let ctx = stream.context();
        let attribute = |a| {
            ctx.attribute(a)
                .map(|v| u32::try_from(v).unwrap_or(0))
                .map_err(cuda_err("cuDeviceGetAttribute"))
        };
        let total = ctx.total_mem().map_err(cuda_err("cuDeviceTotalMem"))? as u64;
        check_sizes(
            workgroup_size,
            workgroups,
            &ComputeLimits {
                size_x: (
                    "CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X",
                    attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X)?,
                ),
                invocations: (
                    "CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK",
                    attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
                ),
                count_x: (
                    "CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X",
                    attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X)?,
                ),
                buffer: &[
                    ("the device's total memory (cuDeviceTotalMem)", total),
                    (
                        "u32 element indices (4 * 4294967295 bytes)",
                        MAX_CUDA_BUFFER_BYTES,
                    ),
                ],
            },
        )?;
        // W * S * 4 <= MAX_CUDA_BUFFER_BYTES, so W * S fits a u32.
        let len =
            u32::try_from(u64::from(workgroup_size) * u64::from(workgroups)).map_err(|_| {
                WorkloadError::invalid_size(
                    &["workgroup_size", "workgroups"],
                    "workgroup_size * workgroups is over 4294967295",
                )
            })?;
        let module = ctx
            .load_module(cudarc::nvrtc::Ptx::from_src(PTX))
            .map_err(cuda_err("cuModuleLoadData (the compute workload's PTX)"))?;
        let function = module
            .load_function(ENTRY)
            .map_err(cuda_err("cuModuleGetFunction"))?;
        let data = stream
            .alloc_zeros::<u32>(len as usize)
            .map_err(cuda_err("cuMemAlloc (the compute workload's buffer)"))?;
        Ok(Self {
            workgroup_size,
            workgroups,
            iterations,
            len,
            data,
            function,
        })
    }

    /// The device buffer the threads write, `W * S` `u32`s.
    pub fn buffer(&self) -> &CudaSlice<u32> {
        &self.data
    }

    /// The exact number of kernel invocations of `dispatches` launches:
    /// `dispatches * W * S`.
    pub fn expected_invocations(&self, dispatches: u32) -> u64 {
        u64::from(dispatches)
            .saturating_mul(u64::from(self.workgroups))
            .saturating_mul(u64::from(self.workgroup_size))
    }

    /// Launches `dispatches` dispatches on `stream`, one kernel launch of
    /// `W` blocks of `S` threads each, in order. Launch them on the stream
    /// the workload was built on (the device's stream, whose launches the
    /// profiler's samples bracket); another stream of the same context is
    /// ordered after the buffer's last use by cudarc's events.
    ///
    /// # Errors
    ///
    /// [`WorkloadError::Cuda`] when a launch fails; the dispatches before
    /// it were launched.
    pub fn launch_dispatches(
        &mut self,
        stream: &Arc<CudaStream>,
        dispatches: u32,
    ) -> Result<(), WorkloadError> {
        let config = LaunchConfig {
            grid_dim: (self.workgroups, 1, 1),
            block_dim: (self.workgroup_size, 1, 1),
            shared_mem_bytes: 0,
        };
        for _ in 0..dispatches {
            let mut launch = stream.launch_builder(&self.function);
            launch
                .arg(&mut self.data)
                .arg(&self.len)
                .arg(&self.iterations);
            // SAFETY: `gc_lcg` takes (.u64 data, .u32 len, .u32 iterations):
            // a device pointer to `self.data` (pushed as `&mut`, so cudarc
            // orders the launch after the buffer's other uses and records
            // the write), then two u32s, in that order. It touches only
            // `data[i]` for `i < len`, and `len` is `self.data`'s length
            // (allocated with `len` elements in `new`); the grid and block
            // sizes were checked against the device's attributes in `new`.
            // `self.data` outlives the launch: its drop frees it on its
            // stream after the work recorded with it.
            unsafe { launch.launch(config) }.map_err(cuda_err("cuLaunchKernel (gc_lcg)"))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The PTX declares what the launch passes, in order, and the
    /// arithmetic of the WGSL shader.
    #[test]
    fn ptx_matches_the_launch_and_the_shader() {
        assert!(PTX.contains(".version 7.0") && PTX.contains(".target sm_70"));
        assert!(PTX.contains(&format!(
            ".visible .entry {ENTRY}(.param .u64 data, .param .u32 len, .param .u32 iterations)"
        )));
        for constant in ["1664525", "1013904223"] {
            assert!(PTX.contains(constant), "{constant}");
            assert!(
                crate::compute::compute_source(1, 1).contains(constant),
                "{constant}"
            );
        }
        assert!(!PTX.contains('\0'), "cudarc refuses PTX with a NUL");
    }

    /// Without a driver there is no stream to build on; with one, device
    /// 0's limits are checked before anything is allocated.
    #[test]
    fn sizes_are_checked_against_the_device() {
        if !gpu_counters_cuda::driver_present() {
            eprintln!("skipped sizes_are_checked_against_the_device: no CUDA driver");
            return;
        }
        let Ok(ctx) = cudarc::driver::CudaContext::new(0) else {
            eprintln!("skipped sizes_are_checked_against_the_device: no CUDA device");
            return;
        };
        let stream = ctx.default_stream();
        let e = CudaComputeWorkload::new(&stream, u32::MAX, 1, 1).expect_err("too large a block");
        assert!(
            matches!(&e, WorkloadError::InvalidSize { fields, .. } if fields == &["workgroup_size"]),
            "{e}"
        );
        assert!(
            e.to_string()
                .contains("CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X"),
            "{e}"
        );
        let e = CudaComputeWorkload::new(&stream, 1, 0, 1).expect_err("no blocks");
        assert!(matches!(e, WorkloadError::InvalidSize { .. }), "{e}");
        let mut w = CudaComputeWorkload::new(&stream, 13, 7, 5).expect("a small workload");
        assert_eq!(w.expected_invocations(3), 3 * 7 * 13);
        w.launch_dispatches(&stream, 2).expect("two launches");
        let data = stream.clone_dtoh(w.buffer()).expect("read back");
        stream.synchronize().expect("the copy done");
        // Two dispatches of 5 steps each from zero, per element.
        let step = |mut x: u32, i: u32| {
            x ^= i;
            for _ in 0..5 {
                x = x.wrapping_mul(1664525).wrapping_add(1013904223);
            }
            x
        };
        for (i, v) in data.iter().enumerate() {
            let i = i as u32;
            assert_eq!(*v, step(step(0, i), i), "element {i}");
        }
    }
}
