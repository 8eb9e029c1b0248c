//! The loader's layer interface (version 2, `vk_layer.h`): the structures
//! the loader chains into `vkCreateInstance` and `vkCreateDevice`, the
//! negotiation structure, and the walk to the next layer's entry points.
//!
//! Each layer's create call finds the `VK_LAYER_LINK_INFO` structure in the
//! create info's `pNext` chain, takes the next layer's `vkGetInstanceProcAddr`
//! (and `vkGetDeviceProcAddr`) from its current link, and moves the link on
//! before calling down, so that the next layer finds its own.

use ash::vk;
use std::ffi::{c_char, c_void};

/// `VK_STRUCTURE_TYPE_LOADER_INSTANCE_CREATE_INFO`.
pub const LOADER_INSTANCE_CREATE_INFO: vk::StructureType = vk::StructureType::from_raw(47);
/// `VK_STRUCTURE_TYPE_LOADER_DEVICE_CREATE_INFO`.
pub const LOADER_DEVICE_CREATE_INFO: vk::StructureType = vk::StructureType::from_raw(48);
/// `VK_LAYER_LINK_INFO`.
pub const LAYER_LINK_INFO: u32 = 0;
/// `VK_LOADER_DATA_CALLBACK`.
pub const LOADER_DATA_CALLBACK: u32 = 1;
/// `LAYER_NEGOTIATE_INTERFACE_STRUCT`.
pub const LAYER_NEGOTIATE_INTERFACE_STRUCT: u32 = 1;
/// The loader-layer interface version this layer speaks.
pub const INTERFACE_VERSION: u32 = 2;

/// `PFN_GetPhysicalDeviceProcAddr`.
pub type GetPhysicalDeviceProcAddr =
    Option<unsafe extern "system" fn(vk::Instance, *const c_char) -> vk::PFN_vkVoidFunction>;
/// `PFN_vkSetDeviceLoaderData`.
pub type SetDeviceLoaderData =
    Option<unsafe extern "system" fn(vk::Device, *mut c_void) -> vk::Result>;

/// `VkLayerInstanceLink`.
#[repr(C)]
pub struct LayerInstanceLink {
    /// The link of the layer after the next.
    pub next: *mut LayerInstanceLink,
    /// The next layer's `vkGetInstanceProcAddr`.
    pub next_get_instance_proc_addr: vk::PFN_vkGetInstanceProcAddr,
    /// The next layer's `GetPhysicalDeviceProcAddr`.
    pub next_get_physical_device_proc_addr: GetPhysicalDeviceProcAddr,
}

/// `VkLayerInstanceCreateInfo` (its union read as its first member, or as
/// a pointer-sized word).
#[repr(C)]
pub struct LayerInstanceCreateInfo {
    /// `LOADER_INSTANCE_CREATE_INFO`.
    pub s_type: vk::StructureType,
    /// The chain.
    pub p_next: *const c_void,
    /// Which member of the union is set.
    pub function: u32,
    /// `u.pLayerInfo` when `function` is `LAYER_LINK_INFO`.
    pub layer_info: *mut LayerInstanceLink,
    /// The union's second word (unused here; the union is 16 bytes).
    pub _rest: *mut c_void,
}

/// `VkLayerDeviceLink`.
#[repr(C)]
pub struct LayerDeviceLink {
    /// The link of the layer after the next.
    pub next: *mut LayerDeviceLink,
    /// The next layer's `vkGetInstanceProcAddr`.
    pub next_get_instance_proc_addr: vk::PFN_vkGetInstanceProcAddr,
    /// The next layer's `vkGetDeviceProcAddr`.
    pub next_get_device_proc_addr: vk::PFN_vkGetDeviceProcAddr,
}

/// `VkLayerDeviceCreateInfo`.
#[repr(C)]
pub struct LayerDeviceCreateInfo {
    /// `LOADER_DEVICE_CREATE_INFO`.
    pub s_type: vk::StructureType,
    /// The chain.
    pub p_next: *const c_void,
    /// Which member of the union is set.
    pub function: u32,
    /// `u.pLayerInfo` (`LAYER_LINK_INFO`) or `u.pfnSetDeviceLoaderData`
    /// (`LOADER_DATA_CALLBACK`), as a pointer.
    pub u: *mut c_void,
}

/// `VkNegotiateLayerInterface`.
#[repr(C)]
pub struct NegotiateLayerInterface {
    /// `LAYER_NEGOTIATE_INTERFACE_STRUCT`.
    pub s_type: u32,
    /// Unused.
    pub p_next: *mut c_void,
    /// The version both sides agree on.
    pub loader_layer_interface_version: u32,
    /// This layer's `vkGetInstanceProcAddr`.
    pub get_instance_proc_addr: vk::PFN_vkGetInstanceProcAddr,
    /// This layer's `vkGetDeviceProcAddr`.
    pub get_device_proc_addr: vk::PFN_vkGetDeviceProcAddr,
    /// This layer's `GetPhysicalDeviceProcAddr` (none).
    pub get_physical_device_proc_addr: GetPhysicalDeviceProcAddr,
}

/// A structure header of a `pNext` chain.
#[repr(C)]
struct BaseIn {
    s_type: vk::StructureType,
    p_next: *const c_void,
}

/// The first structure of `s_type` with `function` in the chain from
/// `p_next`, or null.
///
/// # Safety
///
/// `p_next` is null or a valid `pNext` chain of Vulkan structures.
unsafe fn find(p_next: *const c_void, s_type: vk::StructureType, function: u32) -> *mut c_void {
    let mut p = p_next as *const BaseIn;
    while !p.is_null() {
        // SAFETY: every structure of a valid chain starts with sType and
        // pNext; the loader's structures of `s_type` start with sType,
        // pNext and function.
        unsafe {
            if (*p).s_type == s_type {
                let f = *(p.cast::<u8>().add(16) as *const u32);
                if f == function {
                    return p as *mut c_void;
                }
            }
            p = (*p).p_next as *const BaseIn;
        }
    }
    std::ptr::null_mut()
}

/// The next layer's `vkGetInstanceProcAddr` from `info`'s chain, with the
/// link moved on for the next layer. `None` where the loader left no link.
///
/// # Safety
///
/// `info` is the create info the loader passed to this layer's
/// `vkCreateInstance`.
pub unsafe fn instance_link(
    info: &vk::InstanceCreateInfo<'_>,
) -> Option<unsafe extern "system" fn(vk::Instance, *const c_char) -> vk::PFN_vkVoidFunction> {
    // SAFETY: the caller's promise; the loader's structure lives in its
    // memory for the call and is meant to be advanced by each layer.
    unsafe {
        let ci = find(info.p_next, LOADER_INSTANCE_CREATE_INFO, LAYER_LINK_INFO)
            as *mut LayerInstanceCreateInfo;
        if ci.is_null() || (*ci).layer_info.is_null() {
            return None;
        }
        let link = (*ci).layer_info;
        let gipa = (*link).next_get_instance_proc_addr;
        (*ci).layer_info = (*link).next;
        Some(gipa)
    }
}

/// The next layer's `vkGetInstanceProcAddr` and `vkGetDeviceProcAddr` from
/// `info`'s chain, with the link moved on, and the loader's
/// `vkSetDeviceLoaderData` (to give dispatchable objects this layer makes,
/// its own command buffers, the loader's dispatch). `None` where the loader
/// left no link.
///
/// # Safety
///
/// `info` is the create info the loader passed to this layer's
/// `vkCreateDevice`.
pub unsafe fn device_link(
    info: &vk::DeviceCreateInfo<'_>,
) -> Option<(
    unsafe extern "system" fn(vk::Instance, *const c_char) -> vk::PFN_vkVoidFunction,
    unsafe extern "system" fn(vk::Device, *const c_char) -> vk::PFN_vkVoidFunction,
    SetDeviceLoaderData,
)> {
    // SAFETY: as in `instance_link`.
    unsafe {
        let ci = find(info.p_next, LOADER_DEVICE_CREATE_INFO, LAYER_LINK_INFO)
            as *mut LayerDeviceCreateInfo;
        if ci.is_null() || (*ci).u.is_null() {
            return None;
        }
        let link = (*ci).u as *mut LayerDeviceLink;
        let gipa = (*link).next_get_instance_proc_addr;
        let gdpa = (*link).next_get_device_proc_addr;
        (*ci).u = (*link).next.cast();
        let data = find(info.p_next, LOADER_DEVICE_CREATE_INFO, LOADER_DATA_CALLBACK)
            as *const LayerDeviceCreateInfo;
        let set_data: SetDeviceLoaderData = if data.is_null() || (*data).u.is_null() {
            None
        } else {
            Some(std::mem::transmute::<
                *mut c_void,
                unsafe extern "system" fn(vk::Device, *mut c_void) -> vk::Result,
            >((*data).u))
        };
        Some((gipa, gdpa, set_data))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The layouts match `vk_layer.h` on 64-bit targets.
    #[test]
    fn layouts_match_vk_layer_h() {
        assert_eq!(std::mem::size_of::<LayerInstanceCreateInfo>(), 40);
        assert_eq!(std::mem::offset_of!(LayerInstanceCreateInfo, function), 16);
        assert_eq!(
            std::mem::offset_of!(LayerInstanceCreateInfo, layer_info),
            24
        );
        assert_eq!(std::mem::offset_of!(LayerDeviceCreateInfo, u), 24);
        assert_eq!(std::mem::size_of::<LayerInstanceLink>(), 24);
        assert_eq!(std::mem::size_of::<LayerDeviceLink>(), 24);
        assert_eq!(std::mem::size_of::<NegotiateLayerInterface>(), 48);
    }
}
