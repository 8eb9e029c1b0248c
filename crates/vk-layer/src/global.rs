//! The layer's instances and devices, keyed by their dispatch key: the
//! loader's dispatch-table pointer that every dispatchable handle starts
//! with, the same for an instance and its physical devices, and for a
//! device and its queues and command buffers.

use crate::device::DeviceData;
use crate::instance::InstanceData;
use ash::vk::{self, Handle};
use std::collections::HashMap;
use std::sync::{Arc, RwLock};

/// The dispatch key of a dispatchable handle.
///
/// # Safety
///
/// `h` is a valid dispatchable Vulkan handle (made by the loader, or given
/// the loader's dispatch through `vkSetDeviceLoaderData`).
pub unsafe fn key<H: Handle>(h: H) -> usize {
    // SAFETY: the caller's promise: a dispatchable object starts with a
    // pointer to its loader dispatch table.
    unsafe { *(h.as_raw() as usize as *const usize) }
}

static INSTANCES: RwLock<Option<HashMap<usize, Arc<InstanceData>>>> = RwLock::new(None);
static DEVICES: RwLock<Option<HashMap<usize, Arc<DeviceData>>>> = RwLock::new(None);

/// The instance of dispatch key `k`.
pub fn instance(k: usize) -> Option<Arc<InstanceData>> {
    let m = INSTANCES.read().unwrap_or_else(|e| e.into_inner());
    m.as_ref()?.get(&k).cloned()
}

/// Adds an instance.
pub fn add_instance(k: usize, i: Arc<InstanceData>) {
    let mut m = INSTANCES.write().unwrap_or_else(|e| e.into_inner());
    m.get_or_insert_with(HashMap::new).insert(k, i);
}

/// Removes an instance.
pub fn remove_instance(k: usize) -> Option<Arc<InstanceData>> {
    let mut m = INSTANCES.write().unwrap_or_else(|e| e.into_inner());
    m.as_mut()?.remove(&k)
}

/// The device of dispatch key `k`.
pub fn device(k: usize) -> Option<Arc<DeviceData>> {
    let m = DEVICES.read().unwrap_or_else(|e| e.into_inner());
    m.as_ref()?.get(&k).cloned()
}

/// Adds a device.
pub fn add_device(k: usize, d: Arc<DeviceData>) {
    let mut m = DEVICES.write().unwrap_or_else(|e| e.into_inner());
    m.get_or_insert_with(HashMap::new).insert(k, d);
}

/// Removes a device.
pub fn remove_device(k: usize) -> Option<Arc<DeviceData>> {
    let mut m = DEVICES.write().unwrap_or_else(|e| e.into_inner());
    m.as_mut()?.remove(&k)
}

/// Every live device.
pub fn devices() -> Vec<Arc<DeviceData>> {
    let m = DEVICES.read().unwrap_or_else(|e| e.into_inner());
    m.as_ref()
        .map(|m| m.values().cloned().collect())
        .unwrap_or_default()
}

/// The device of a dispatchable handle.
///
/// # Safety
///
/// `h` is a valid dispatchable handle of a device.
pub unsafe fn device_of<H: vk::Handle>(h: H) -> Option<Arc<DeviceData>> {
    // SAFETY: the caller's promise.
    device(unsafe { key(h) })
}
