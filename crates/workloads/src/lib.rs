//! Built-in Vulkan GPU workloads whose pipeline-statistic counts are known in
//! advance.
//!
//! The workloads are used by the tests, the command line and the benchmarks of
//! gpu-counters to check that counters are exact. Each workload owns the Vulkan
//! objects it needs (pipelines, buffers, images) and records commands into a
//! command buffer that the caller owns; it never creates devices, never submits
//! and never waits.
//!
//! - [`ComputeWorkload`]: `D` dispatches of `W` workgroups of `S` invocations;
//!   compute shader invocations are exactly `D * W * S`.
//! - [`RenderWorkload`]: `T` non-overlapping triangles in a color target drawn
//!   with dynamic rendering; vertex shader invocations are exactly `3 * T`,
//!   clipping invocations `T`, and the covered pixels are known exactly.
//! - [`CopyWorkload`]: a buffer-to-buffer copy of a known number of bytes.
//!
//! With the `wgpu` feature, [`WgpuComputeWorkload`] and [`WgpuRenderWorkload`]
//! are the same compute and render work, with the same counts, on a caller's
//! `wgpu::Device`. There is no wgpu copy workload: wgpu records a copy on the
//! command encoder, outside any pass, where it can be neither timed by pass
//! timestamp writes nor counted by a statistics query.
//!
//! With the `cuda` feature, [`CudaComputeWorkload`] is the same compute work,
//! with the same count, launched on a caller's cudarc stream (a PTX kernel
//! of the same arithmetic). There is no CUDA render workload (CUDA has no
//! graphics pipeline) and no CUDA copy workload.
//!
//! Shaders are written in WGSL and compiled to SPIR-V with naga
//! ([`compile_wgsl`]).
//!
//! The device must be a Vulkan 1.3 device with the `synchronization2` and
//! `dynamicRendering` features enabled (the workloads record
//! `vkCmdPipelineBarrier2` and are drawn inside `vkCmdBeginRendering`).

#![warn(missing_docs)]

mod caller;
mod compute;
mod context;
mod copy;
#[cfg(feature = "cuda")]
mod cuda_workloads;
mod error;
mod render;
mod shader;
#[cfg(feature = "wgpu")]
mod wgpu_workloads;

pub use caller::CallerCommandBuffer;
pub use compute::ComputeWorkload;
pub use context::{find_memory_type, GpuContext};
pub use copy::CopyWorkload;
#[cfg(feature = "cuda")]
pub use cuda_workloads::{CudaComputeWorkload, MAX_CUDA_BUFFER_BYTES};
pub use error::WorkloadError;
pub use render::RenderWorkload;
pub use shader::compile_wgsl;
#[cfg(feature = "wgpu")]
pub use wgpu_workloads::{WgpuComputeWorkload, WgpuRenderWorkload};
