//! The error type of this crate.

use ash::vk;

/// Errors returned while building a workload.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkloadError {
    /// WGSL could not be parsed or validated, or SPIR-V could not be written.
    /// The message is naga's, with the source location where naga gives one.
    #[error("shader error: {0}")]
    Shader(String),
    /// A Vulkan call failed.
    #[error("Vulkan call {call} failed: {result}")]
    Vulkan {
        /// The Vulkan function that failed, e.g. `vkCreateBuffer`.
        call: &'static str,
        /// The result code it returned.
        result: vk::Result,
    },
    /// No memory type of the device fits the resource named in the message.
    #[error("no suitable memory type for {0}")]
    NoMemoryType(&'static str),
    /// A size given to a constructor is zero or over a device limit; the
    /// message names the bad size and the limit.
    #[error("invalid size: {0}")]
    InvalidSize(String),
}

/// Returns a closure that wraps a [`vk::Result`] into
/// [`WorkloadError::Vulkan`] naming `call`.
pub(crate) fn vk_err(call: &'static str) -> impl FnOnce(vk::Result) -> WorkloadError {
    move |result| WorkloadError::Vulkan { call, result }
}
