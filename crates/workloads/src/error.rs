//! The error type of this crate.

use ash::vk;

/// Errors returned while building a workload.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkloadError {
    /// WGSL could not be parsed or validated, or SPIR-V could not be written.
    /// The message is naga's, with the source location where naga gives one.
    #[error("shader error: {0}")]
    Shader(String),
    /// A Vulkan call failed, or the device lacks a format the workload
    /// needs. The error is [`gpu_counters_vulkan::map_vk_error`]'s, naming
    /// the call: [`gpu_counters_hal::Error::OutOfMemory`],
    /// [`gpu_counters_hal::Error::DeviceLost`] or
    /// [`gpu_counters_hal::Error::Internal`].
    #[error("{0}")]
    Vulkan(gpu_counters_hal::Error),
    /// A wgpu call failed while building a wgpu workload (feature `wgpu`):
    /// an error caught by the device's error scopes, naming what was being
    /// built, as [`gpu_counters_hal::Error::OutOfMemory`] or
    /// [`gpu_counters_hal::Error::Internal`].
    #[error("{0}")]
    Wgpu(gpu_counters_hal::Error),
    /// A CUDA driver call failed while building or launching the CUDA
    /// workload (feature `cuda`): gpu-counters-cuda's `map_driver_error`
    /// of the driver's error, naming the call, as
    /// [`gpu_counters_hal::Error::OutOfMemory`],
    /// [`gpu_counters_hal::Error::DeviceLost`] or
    /// [`gpu_counters_hal::Error::Internal`].
    #[error("{0}")]
    Cuda(gpu_counters_hal::Error),
    /// No memory type of the device fits the resource named in the message.
    #[error("no suitable memory type for {0}")]
    NoMemoryType(&'static str),
    /// A size given to a constructor is zero, over a device limit, or does
    /// not fit with the other sizes.
    #[error("invalid size: {message}")]
    InvalidSize {
        /// The constructor parameters at fault, by name (`workgroup_size`,
        /// `workgroups`, `triangles`, `width`, `height`, `bytes`), in the
        /// order of the constructor's parameters; several when the sizes are
        /// only wrong together (a storage buffer of `workgroup_size *
        /// workgroups` over its limit names both), none when no parameter
        /// is at fault (an internal layout error).
        fields: Vec<&'static str>,
        /// What is wrong, naming the sizes and the limit.
        message: String,
    },
}

impl WorkloadError {
    /// An [`WorkloadError::InvalidSize`] naming `fields`.
    pub(crate) fn invalid_size(fields: &[&'static str], message: impl Into<String>) -> Self {
        WorkloadError::InvalidSize {
            fields: fields.to_vec(),
            message: message.into(),
        }
    }
}

/// Returns a closure that maps a [`vk::Result`] with
/// [`gpu_counters_vulkan::map_vk_error`] into [`WorkloadError::Vulkan`],
/// naming `call`.
pub(crate) fn vk_err(call: &'static str) -> impl FnOnce(vk::Result) -> WorkloadError {
    move |result| WorkloadError::Vulkan(gpu_counters_vulkan::map_vk_error(call, result))
}
