use ash::vk;
use gpu_counters_core::Error;

/// Maps a failed Vulkan call onto Metal's error kinds, naming the call.
pub(crate) fn vk_err(call: &'static str) -> impl Fn(vk::Result) -> Error {
    move |r| match r {
        vk::Result::ERROR_OUT_OF_HOST_MEMORY | vk::Result::ERROR_OUT_OF_DEVICE_MEMORY => {
            Error::OutOfMemory(format!("{call} failed: {r:?}"))
        }
        _ => Error::Internal(format!("{call} failed: {r:?}")),
    }
}
