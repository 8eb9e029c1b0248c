//! `VK_LAYER_GPU_COUNTERS_timing`: a Vulkan layer that times any Vulkan
//! program's GPU work for `gpu-counters record`, without changing the
//! program.
//!
//! The loader loads `libgpu_counters_vk_layer.so` through its manifest
//! (`VkLayer_gpu_counters_timing.json`; `gpu-counters record` writes one
//! and enables the layer with `VK_ADD_LAYER_PATH` and `VK_INSTANCE_LAYERS`)
//! and negotiates version 2 of the loader-layer interface
//! ([`vkNegotiateLoaderLayerInterfaceVersion`]). Outside `gpu-counters
//! record` (no `GPU_COUNTERS_RECORD_DIR`) every call passes through.
//!
//! - [`instance`]: instance and device creation, which turns on calibrated
//!   timestamps and host query reset where the driver offers them (and
//!   pipeline statistics on request), invisibly to the application.
//! - [`hooks`]: the recording side: timestamps at the boundaries of render
//!   passes, runs of dispatches and of copies, debug labels, and (with
//!   `--level draw|dispatch`) each draw or dispatch ([`recording`]), into
//!   query blocks ([`blocks`]).
//! - [`submit`]: the layer's command buffers around each execution (start,
//!   end, resets), the copy of its results into a per-queue ring, and a
//!   fence of the layer's after the application's submission.
//! - [`retire`]: reading finished results without waiting, through the
//!   core's bookkeeping and calibration, pairing labels across command
//!   buffers, frames, and the records sent to the collector ([`sink`]).
//!
//! Every entry point catches panics of the layer's own logic; the
//! application's call is always passed on.

pub mod blocks;
pub mod chain;
pub mod config;
pub mod device;
pub mod frames;
pub mod global;
pub mod hooks;
pub mod instance;
pub mod lifecycle;
pub mod queue;
pub mod recorded;
pub mod recording;
pub mod retire;
pub mod sink;
pub mod submit;

use ash::vk;
use std::ffi::{c_char, CStr};

pub use gpu_counters_record::vk_layer::LAYER_NAME;

fn as_void(f: *const ()) -> unsafe extern "system" fn() {
    // SAFETY: `f` is one of this crate's `extern "system"` entry points;
    // the caller casts it back to the command's type.
    unsafe { std::mem::transmute::<*const (), unsafe extern "system" fn()>(f) }
}

/// The loader-layer interface negotiation (version 2): this layer's
/// `vkGetInstanceProcAddr` and `vkGetDeviceProcAddr`.
///
/// # Safety
///
/// The loader passes a valid, writable `VkNegotiateLayerInterface`.
#[no_mangle]
pub unsafe extern "system" fn vkNegotiateLoaderLayerInterfaceVersion(
    v: *mut chain::NegotiateLayerInterface,
) -> vk::Result {
    if v.is_null() {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    }
    // SAFETY: the caller's promise.
    let v = unsafe { &mut *v };
    if v.s_type != chain::LAYER_NEGOTIATE_INTERFACE_STRUCT || v.loader_layer_interface_version < 2 {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    }
    v.loader_layer_interface_version = chain::INTERFACE_VERSION;
    // The layer's own functions, not the exported symbols: a reference to
    // an exported symbol may bind to the loader's function of the same
    // name, which the process loaded first.
    v.get_instance_proc_addr = get_instance_proc_addr;
    v.get_device_proc_addr = hooks::get_device_proc_addr;
    v.get_physical_device_proc_addr = None;
    vk::Result::SUCCESS
}

/// The layer's `vkGetInstanceProcAddr` (for loaders that look the symbol
/// up rather than negotiate).
///
/// # Safety
///
/// `name` is a NUL-terminated command name; `instance` is null or valid.
#[no_mangle]
pub unsafe extern "system" fn vkGetInstanceProcAddr(
    instance: vk::Instance,
    name: *const c_char,
) -> vk::PFN_vkVoidFunction {
    // SAFETY: the caller's promise.
    unsafe { get_instance_proc_addr(instance, name) }
}

/// The layer's `vkGetInstanceProcAddr`: its instance and device commands,
/// the next layer's for the rest.
///
/// # Safety
///
/// `name` is a NUL-terminated command name; `instance` is null or valid.
unsafe extern "system" fn get_instance_proc_addr(
    instance: vk::Instance,
    name: *const c_char,
) -> vk::PFN_vkVoidFunction {
    if name.is_null() {
        return None;
    }
    // SAFETY: the caller's promise.
    let n = unsafe { CStr::from_ptr(name) };
    let own = match n.to_bytes() {
        b"vkGetInstanceProcAddr" => Some(get_instance_proc_addr as *const ()),
        b"vkCreateInstance" => Some(lifecycle::create_instance as *const ()),
        b"vkDestroyInstance" => Some(lifecycle::destroy_instance as *const ()),
        b"vkCreateDevice" => Some(lifecycle::create_device as *const ()),
        b"vkGetDeviceProcAddr" => Some(hooks::get_device_proc_addr as *const ()),
        _ => None,
    };
    if let Some(f) = own {
        return Some(as_void(f));
    }
    if instance == vk::Instance::null() {
        return None;
    }
    // SAFETY: a valid instance handle.
    let inst = global::instance(unsafe { global::key(instance) })?;
    if inst.active {
        let label = match n.to_bytes() {
            b"vkCmdBeginDebugUtilsLabelEXT" if inst.labels.0.is_some() => {
                Some(hooks::cmd_begin_debug_utils_label as *const ())
            }
            b"vkCmdEndDebugUtilsLabelEXT" if inst.labels.1.is_some() => {
                Some(hooks::cmd_end_debug_utils_label as *const ())
            }
            _ => None,
        };
        if let Some(f) = label {
            return Some(as_void(f));
        }
    }
    // SAFETY: the next layer's vkGetInstanceProcAddr.
    unsafe { (inst.gipa)(instance, name) }
}

/// The layer's `vkGetDeviceProcAddr`.
///
/// # Safety
///
/// `name` is a NUL-terminated command name; `device` is null or valid.
#[no_mangle]
pub unsafe extern "system" fn vkGetDeviceProcAddr(
    device: vk::Device,
    name: *const c_char,
) -> vk::PFN_vkVoidFunction {
    // SAFETY: the caller's promise.
    unsafe { hooks::get_device_proc_addr(device, name) }
}
