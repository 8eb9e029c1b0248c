use ash::vk;
use gpu_counters_hal::Error;

/// Maps the result of a failed Vulkan call onto gpu-counters' errors, naming
/// the call.
///
/// This is the one mapping of [`vk::Result`] that every crate of
/// gpu-counters uses:
///
/// - `ERROR_OUT_OF_HOST_MEMORY` and `ERROR_OUT_OF_DEVICE_MEMORY` are
///   [`Error::OutOfMemory`], whose message is `"{call} failed: {result:?}"`;
/// - `ERROR_DEVICE_LOST` is [`Error::DeviceLost`], holding `call`;
/// - every other result is [`Error::Internal`], whose message is
///   `"{call} failed: {result:?}"`.
///
/// `call` names the Vulkan function (`vkQueueSubmit2`), with what it was
/// doing where that helps (`vkCreateFence (profiler frame marker)`).
///
/// ```
/// use gpu_counters_hal::{CounterErrorKind, Error};
/// use gpu_counters_vulkan::{ash::vk, map_vk_error};
///
/// let e = map_vk_error("vkQueueSubmit2", vk::Result::ERROR_DEVICE_LOST);
/// assert_eq!(e, Error::DeviceLost("vkQueueSubmit2".into()));
/// assert_eq!(e.kind(), CounterErrorKind::Internal);
/// let e = map_vk_error("vkAllocateMemory", vk::Result::ERROR_OUT_OF_DEVICE_MEMORY);
/// assert_eq!(e.kind(), CounterErrorKind::OutOfMemory);
/// ```
pub fn map_vk_error(call: &str, result: vk::Result) -> Error {
    match result {
        vk::Result::ERROR_OUT_OF_HOST_MEMORY | vk::Result::ERROR_OUT_OF_DEVICE_MEMORY => {
            Error::OutOfMemory(format!("{call} failed: {result:?}"))
        }
        vk::Result::ERROR_DEVICE_LOST => Error::DeviceLost(call.to_string()),
        _ => Error::Internal(format!("{call} failed: {result:?}")),
    }
}

/// [`map_vk_error`] as a closure for `map_err`.
pub(crate) fn vk_err(call: &'static str) -> impl Fn(vk::Result) -> Error {
    move |r| map_vk_error(call, r)
}

/// Records one global memory barrier (synchronization2).
///
/// # Safety
/// `cmd` must be a command buffer of `d` in the recording state.
pub(crate) unsafe fn barrier(
    d: &ash::Device,
    cmd: vk::CommandBuffer,
    src_stage: vk::PipelineStageFlags2,
    src_access: vk::AccessFlags2,
    dst_stage: vk::PipelineStageFlags2,
    dst_access: vk::AccessFlags2,
) {
    let barriers = [vk::MemoryBarrier2::default()
        .src_stage_mask(src_stage)
        .src_access_mask(src_access)
        .dst_stage_mask(dst_stage)
        .dst_access_mask(dst_access)];
    let dep = vk::DependencyInfo::default().memory_barriers(&barriers);
    // SAFETY: forwarded from the caller.
    unsafe { d.cmd_pipeline_barrier2(cmd, &dep) };
}

/// The mask of a timestamp with `bits` valid bits.
pub(crate) fn mask(bits: u32) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpu_counters_hal::CounterErrorKind;

    #[test]
    fn every_vulkan_result_maps_to_one_kind() {
        for r in [
            vk::Result::ERROR_OUT_OF_HOST_MEMORY,
            vk::Result::ERROR_OUT_OF_DEVICE_MEMORY,
        ] {
            let e = map_vk_error("vkAllocateMemory", r);
            assert_eq!(e.kind(), CounterErrorKind::OutOfMemory);
            assert_eq!(
                e,
                Error::OutOfMemory(format!("vkAllocateMemory failed: {r:?}"))
            );
        }
        assert_eq!(
            map_vk_error("vkQueueSubmit2", vk::Result::ERROR_DEVICE_LOST),
            Error::DeviceLost("vkQueueSubmit2".into())
        );
        for r in [
            vk::Result::ERROR_INITIALIZATION_FAILED,
            vk::Result::ERROR_UNKNOWN,
            vk::Result::TIMEOUT,
        ] {
            assert_eq!(
                map_vk_error("vkWaitForFences", r),
                Error::Internal(format!("vkWaitForFences failed: {r:?}"))
            );
        }
        assert_eq!(
            vk_err("vkCreateFence")(vk::Result::ERROR_DEVICE_LOST),
            Error::DeviceLost("vkCreateFence".into())
        );
    }
}
