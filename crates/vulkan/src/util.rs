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
