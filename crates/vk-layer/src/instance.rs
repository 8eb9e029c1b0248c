//! Instances: `vkCreateInstance` and `vkDestroyInstance` through the chain,
//! and `vkCreateDevice`, which turns on what the layer needs where the
//! driver offers it and the application did not ask for it:
//!
//! - a calibrated-timestamps extension (`VK_EXT_` or `VK_KHR_`
//!   `calibrated_timestamps`), to put GPU times on the CPU clock;
//! - host query reset (the `hostQueryReset` feature of Vulkan 1.2, or
//!   `VK_EXT_host_query_reset` below 1.2), to reset the layer's queries on
//!   the CPU once their results are read, so that most executions need no
//!   reset on the GPU;
//! - with statistics asked for, `pipelineStatisticsQuery`.
//!
//! The application sees none of it: what it queries of the physical device
//! is unchanged, and the layer's `vkGetDeviceProcAddr` hides the commands
//! of extensions it added. A feature is set in the application's own
//! structure for the duration of the call and restored after it; where the
//! chain has no structure for it, the layer chains one of its own in front.
//! If the driver refuses the device with the layer's additions, the
//! application's own request is made instead, untimed.

use crate::chain;
use crate::device::{DeviceData, DeviceSetup, HostReset};
use crate::global;
use crate::sink;
use ash::vk;
use std::ffi::{c_char, CStr};
use std::sync::Arc;

/// `PFN_vkGetInstanceProcAddr` of the next layer.
pub type Gipa = unsafe extern "system" fn(vk::Instance, *const c_char) -> vk::PFN_vkVoidFunction;
/// `PFN_vkGetDeviceProcAddr` of the next layer.
pub type Gdpa = unsafe extern "system" fn(vk::Device, *const c_char) -> vk::PFN_vkVoidFunction;

/// The next layer's `vkCmdBeginDebugUtilsLabelEXT` and
/// `vkCmdEndDebugUtilsLabelEXT`, where the instance has them.
pub type LabelFns = (
    Option<vk::PFN_vkCmdBeginDebugUtilsLabelEXT>,
    Option<vk::PFN_vkCmdEndDebugUtilsLabelEXT>,
);

/// What the layer keeps of an instance.
pub struct InstanceData {
    /// The instance.
    pub handle: vk::Instance,
    /// The next layer's `vkGetInstanceProcAddr`.
    pub gipa: Gipa,
    /// An entry whose `vkGetInstanceProcAddr` is the next layer's.
    pub entry: ash::Entry,
    /// The instance's commands, through the next layer.
    pub instance: ash::Instance,
    /// The `apiVersion` the application asked for (1.0 when it gave none).
    pub api_version: u32,
    /// `vkGetPhysicalDeviceProperties2` and `Features2` (or their `KHR`
    /// forms), where the application's instance may call them (Vulkan 1.1,
    /// or `VK_KHR_get_physical_device_properties2`).
    pub properties2: Option<(
        vk::PFN_vkGetPhysicalDeviceProperties2,
        vk::PFN_vkGetPhysicalDeviceFeatures2,
    )>,
    /// The next layer's label commands: the loader dispatches the
    /// debug-utils commands through the instance's chain
    /// (`vkGetInstanceProcAddr`), not the device's.
    pub labels: LabelFns,
    /// Whether the layer records (`gpu-counters record` is listening);
    /// otherwise every call passes straight through.
    pub active: bool,
}

/// The next layer's command `name` of `instance`, as `F`.
///
/// # Safety
///
/// `F` is the command's function pointer type.
pub unsafe fn load<F: Copy>(gipa: Gipa, instance: vk::Instance, name: &CStr) -> Option<F> {
    // SAFETY: the next layer's vkGetInstanceProcAddr with a valid name.
    let f = unsafe { gipa(instance, name.as_ptr()) }?;
    debug_assert_eq!(std::mem::size_of::<F>(), std::mem::size_of_val(&f));
    // SAFETY: the caller's promise about `F`; a function pointer's size.
    Some(unsafe { std::mem::transmute_copy::<unsafe extern "system" fn(), F>(&f) })
}

pub(crate) unsafe extern "system" fn create_instance(
    info: *const vk::InstanceCreateInfo<'_>,
    alloc: *const vk::AllocationCallbacks<'_>,
    out: *mut vk::Instance,
) -> vk::Result {
    // SAFETY: the loader passes a valid create info.
    let Some(gipa) = (unsafe { chain::instance_link(&*info) }) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    // SAFETY: the next layer's global command.
    let Some(create) = (unsafe {
        load::<vk::PFN_vkCreateInstance>(gipa, vk::Instance::null(), c"vkCreateInstance")
    }) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    // SAFETY: the application's arguments, passed on.
    let r = unsafe { create(info, alloc, out) };
    if r != vk::Result::SUCCESS {
        return r;
    }
    let _ = std::panic::catch_unwind(|| {
        // SAFETY: the instance was just created by the chain below; `info`
        // is the application's valid create info.
        unsafe { register_instance(gipa, *out, &*info) }
    });
    r
}

/// Keeps what the layer needs of a new instance.
///
/// # Safety
///
/// `handle` was created by the next layer's `vkCreateInstance` with `info`.
unsafe fn register_instance(gipa: Gipa, handle: vk::Instance, info: &vk::InstanceCreateInfo<'_>) {
    // SAFETY: the next layer's vkGetInstanceProcAddr serves both.
    let (entry, instance) = unsafe {
        // Only the instance-level lookup: the next layer's global commands
        // are not looked up with a null instance (some layers do not
        // answer that), and the layer calls none of them.
        let none = |_: &CStr| std::ptr::null::<std::ffi::c_void>();
        let entry = ash::Entry::from_parts_1_1(
            ash::StaticFn {
                get_instance_proc_addr: gipa,
            },
            ash::EntryFnV1_0::load(none),
            ash::EntryFnV1_1::load(none),
        );
        let instance = ash::Instance::load_with(
            |name| {
                std::mem::transmute::<vk::PFN_vkVoidFunction, *const std::ffi::c_void>(gipa(
                    handle,
                    name.as_ptr(),
                ))
            },
            handle,
        );
        (entry, instance)
    };
    // SAFETY: a valid create info's application info and extension names.
    let (api_version, exts) = unsafe {
        let api = if info.p_application_info.is_null() {
            vk::API_VERSION_1_0
        } else {
            (*info.p_application_info)
                .api_version
                .max(vk::API_VERSION_1_0)
        };
        let exts: Vec<&CStr> = (0..info.enabled_extension_count as usize)
            .map(|i| CStr::from_ptr(*info.pp_enabled_extension_names.add(i)))
            .collect();
        (api, exts)
    };
    let (p2, f2): (&CStr, &CStr) = if api_version >= vk::API_VERSION_1_1 {
        (
            c"vkGetPhysicalDeviceProperties2",
            c"vkGetPhysicalDeviceFeatures2",
        )
    } else {
        (
            c"vkGetPhysicalDeviceProperties2KHR",
            c"vkGetPhysicalDeviceFeatures2KHR",
        )
    };
    let properties2 = if api_version >= vk::API_VERSION_1_1
        || exts.contains(&ash::khr::get_physical_device_properties2::NAME)
    {
        // SAFETY: the commands' types.
        unsafe { load(gipa, handle, p2).zip(load(gipa, handle, f2)) }
    } else {
        None
    };
    let active = sink::get().is_some();
    // SAFETY: the commands' types.
    let labels = unsafe {
        (
            load(gipa, handle, c"vkCmdBeginDebugUtilsLabelEXT"),
            load(gipa, handle, c"vkCmdEndDebugUtilsLabelEXT"),
        )
    };
    // SAFETY: a dispatchable handle the loader made.
    let k = unsafe { global::key(handle) };
    global::add_instance(
        k,
        Arc::new(InstanceData {
            handle,
            gipa,
            entry,
            instance,
            api_version,
            properties2,
            labels,
            active,
        }),
    );
}

pub(crate) unsafe extern "system" fn destroy_instance(
    instance: vk::Instance,
    alloc: *const vk::AllocationCallbacks<'_>,
) {
    if instance == vk::Instance::null() {
        return;
    }
    // SAFETY: a valid instance handle of the application.
    let k = unsafe { global::key(instance) };
    if let Some(data) = global::remove_instance(k) {
        // SAFETY: the application's call, passed on.
        unsafe { (data.instance.fp_v1_0().destroy_instance)(instance, alloc) };
    }
}

/// A `VkBool32` the layer set in the application's structure, to restore.
struct Restore(*mut vk::Bool32, vk::Bool32);

/// A structure header of a `pNext` chain.
#[repr(C)]
struct BaseOut {
    s_type: vk::StructureType,
    p_next: *mut std::ffi::c_void,
}

/// The first structure of `s_type` in the chain from `p_next`.
///
/// # Safety
///
/// `p_next` is null or a valid `pNext` chain.
unsafe fn find_mut(p_next: *const std::ffi::c_void, s_type: vk::StructureType) -> *mut BaseOut {
    let mut p = p_next as *mut BaseOut;
    // SAFETY: the caller's promise: each structure starts with sType, pNext.
    unsafe {
        while !p.is_null() {
            if (*p).s_type == s_type {
                return p;
            }
            p = (*p).p_next as *mut BaseOut;
        }
    }
    std::ptr::null_mut()
}

pub(crate) unsafe extern "system" fn create_device(
    pd: vk::PhysicalDevice,
    info: *const vk::DeviceCreateInfo<'_>,
    alloc: *const vk::AllocationCallbacks<'_>,
    out: *mut vk::Device,
) -> vk::Result {
    // SAFETY: the loader passes a valid physical device and create info.
    let (inst, link) = unsafe {
        (
            global::instance(global::key(pd)),
            chain::device_link(&*info),
        )
    };
    let (Some(inst), Some((gipa, gdpa, set_data))) = (inst, link) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    // SAFETY: the next layer's instance command.
    let Some(create) =
        (unsafe { load::<vk::PFN_vkCreateDevice>(gipa, inst.handle, c"vkCreateDevice") })
    else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    if !inst.active {
        // SAFETY: the application's arguments, passed on.
        let r = unsafe { create(pd, info, alloc, out) };
        if r == vk::Result::SUCCESS {
            // SAFETY: the device was just created.
            unsafe { register_passthrough(*out, gdpa) };
        }
        return r;
    }
    // SAFETY: the application's valid arguments.
    let app = unsafe { &*info };
    let config = sink::get().map(|s| s.config).unwrap_or_default();
    // SAFETY: `pd` belongs to the instance.
    // SAFETY: `pd` belongs to the instance.
    let caps = std::panic::catch_unwind(|| unsafe { Caps::query(&inst, pd) }).unwrap_or_default();

    // What to add.
    let mut extensions: Vec<*const c_char> = (0..app.enabled_extension_count as usize)
        // SAFETY: a valid create info's extension array.
        .map(|i| unsafe { *app.pp_enabled_extension_names.add(i) })
        .collect();
    let app_has = |name: &CStr| {
        extensions
            .iter()
            // SAFETY: the application's valid NUL-terminated names.
            .any(|&p| unsafe { CStr::from_ptr(p) } == name)
    };
    let mut added: Vec<&'static CStr> = Vec::new();
    let calibration = match caps.calibration {
        Some(ext) if app_has(ash::ext::calibrated_timestamps::NAME) => {
            let _ = ext;
            Some(gpu_counters_vulkan::CalibratedTimestamps::Ext)
        }
        Some(_) if app_has(ash::khr::calibrated_timestamps::NAME) => {
            Some(gpu_counters_vulkan::CalibratedTimestamps::Khr)
        }
        Some(ext) => {
            added.push(ext.name());
            Some(ext)
        }
        None => None,
    };
    let mut restore: Vec<Restore> = Vec::new();
    let mut ours_hqr = vk::PhysicalDeviceHostQueryResetFeatures::default().host_query_reset(true);
    let mut features_copy: vk::PhysicalDeviceFeatures;
    let mut modified = *app;
    let host_reset = if caps.host_query_reset == HostReset::None {
        HostReset::None
    } else {
        let mode = caps.host_query_reset;
        // SAFETY: the application's valid chain; the structures found are
        // the application's, set for the call and restored after it.
        unsafe {
            let v12 = find_mut(
                app.p_next,
                vk::StructureType::PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
            ) as *mut vk::PhysicalDeviceVulkan12Features<'_>;
            let hqr = find_mut(
                app.p_next,
                vk::StructureType::PHYSICAL_DEVICE_HOST_QUERY_RESET_FEATURES,
            ) as *mut vk::PhysicalDeviceHostQueryResetFeatures<'_>;
            let core = mode == HostReset::Core;
            if !v12.is_null() {
                if core {
                    restore.push(Restore(
                        &mut (*v12).host_query_reset,
                        (*v12).host_query_reset,
                    ));
                    (*v12).host_query_reset = vk::TRUE;
                    HostReset::Core
                } else {
                    HostReset::None
                }
            } else if !hqr.is_null() {
                if !core && !app_has(ash::ext::host_query_reset::NAME) {
                    added.push(ash::ext::host_query_reset::NAME);
                }
                restore.push(Restore(
                    &mut (*hqr).host_query_reset,
                    (*hqr).host_query_reset,
                ));
                (*hqr).host_query_reset = vk::TRUE;
                mode
            } else {
                if !core && !app_has(ash::ext::host_query_reset::NAME) {
                    added.push(ash::ext::host_query_reset::NAME);
                }
                ours_hqr.p_next = modified.p_next as *mut _;
                modified.p_next =
                    (&mut ours_hqr as *mut vk::PhysicalDeviceHostQueryResetFeatures<'_>).cast();
                mode
            }
        }
    };
    let mut statistics = false;
    if config.statistics && caps.pipeline_statistics {
        statistics = true;
        if !app.p_enabled_features.is_null() {
            // SAFETY: the application's valid features.
            features_copy = unsafe { *app.p_enabled_features };
            features_copy.pipeline_statistics_query = vk::TRUE;
            modified.p_enabled_features = &features_copy;
        } else {
            // SAFETY: the application's valid chain.
            let f2 = unsafe { find_mut(app.p_next, vk::StructureType::PHYSICAL_DEVICE_FEATURES_2) }
                as *mut vk::PhysicalDeviceFeatures2<'_>;
            if f2.is_null() {
                features_copy =
                    vk::PhysicalDeviceFeatures::default().pipeline_statistics_query(true);
                modified.p_enabled_features = &features_copy;
            } else {
                // SAFETY: a structure of the application's valid chain.
                unsafe {
                    restore.push(Restore(
                        &mut (*f2).features.pipeline_statistics_query,
                        (*f2).features.pipeline_statistics_query,
                    ));
                    (*f2).features.pipeline_statistics_query = vk::TRUE;
                }
            }
        }
    }
    for a in &added {
        extensions.push(a.as_ptr());
    }
    modified.enabled_extension_count = extensions.len() as u32;
    modified.pp_enabled_extension_names = extensions.as_ptr();
    // SAFETY: the application's create info with the layer's additions,
    // every pointer alive for the call.
    let mut r = unsafe { create(pd, &modified, alloc, out) };
    for Restore(p, v) in restore.drain(..).rev() {
        // SAFETY: restores the application's own value where the layer set it.
        unsafe { *p = v };
    }
    let mut setup = DeviceSetup {
        calibration,
        host_reset,
        statistics,
        added,
    };
    if r != vk::Result::SUCCESS && r != vk::Result::ERROR_DEVICE_LOST {
        // The driver refused the additions: the application's request, untimed.
        // SAFETY: the application's arguments, passed on.
        r = unsafe { create(pd, info, alloc, out) };
        setup = DeviceSetup {
            calibration: None,
            host_reset: HostReset::None,
            statistics: false,
            added: Vec::new(),
        };
    }
    if r != vk::Result::SUCCESS {
        return r;
    }
    // SAFETY: the device was just created from `pd` with `setup`.
    let device = unsafe { *out };
    let _ = std::panic::catch_unwind(|| {
        // SAFETY: the device was just made from `pd` of the instance as
        // `setup` says.
        unsafe { DeviceData::register(&inst, pd, device, gdpa, set_data, &caps, setup, app) }
    });
    // Registered after the driver's own exit handlers (made while the device
    // was created), so that it runs before them.
    sink::register_exit_handler();
    r
}

/// Registers a device of an inactive layer: only its next
/// `vkGetDeviceProcAddr`, for passing calls through.
///
/// # Safety
///
/// `device` was just created by the next layer.
unsafe fn register_passthrough(device: vk::Device, gdpa: Gdpa) {
    // SAFETY: the caller's promise.
    let k = unsafe { global::key(device) };
    global::add_device(k, Arc::new(DeviceData::passthrough(device, gdpa)));
}

/// What the layer reads of a physical device before creating a device of it.
#[derive(Debug, Clone, Default)]
pub struct Caps {
    /// `apiVersion`.
    pub api_version: u32,
    /// The name.
    pub name: String,
    /// The driver's name and version, where the driver says.
    pub driver: String,
    /// `deviceUUID`, where the driver says.
    pub uuid: [u8; 16],
    /// `timestampPeriod`, ns.
    pub period_ns: f64,
    /// Per queue family: flags and `timestampValidBits`.
    pub families: Vec<(vk::QueueFlags, u32)>,
    /// The calibrated-timestamps extension that calibrates this device.
    pub calibration: Option<gpu_counters_vulkan::CalibratedTimestamps>,
    /// How host query reset can be turned on.
    pub host_query_reset: HostReset,
    /// `pipelineStatisticsQuery`.
    pub pipeline_statistics: bool,
}

impl Caps {
    /// Reads them.
    ///
    /// # Safety
    ///
    /// `pd` belongs to `inst`.
    unsafe fn query(inst: &InstanceData, pd: vk::PhysicalDevice) -> Caps {
        let raw = &inst.instance;
        // SAFETY: the caller's promise; pNext chains point at locals.
        unsafe {
            let props = raw.get_physical_device_properties(pd);
            let families = raw
                .get_physical_device_queue_family_properties(pd)
                .iter()
                .map(|f| (f.queue_flags, f.timestamp_valid_bits))
                .collect();
            let features = raw.get_physical_device_features(pd);
            let exts = raw
                .enumerate_device_extension_properties(pd)
                .unwrap_or_default();
            let has = |name: &CStr| {
                exts.iter()
                    .any(|e| e.extension_name_as_c_str().ok() == Some(name))
            };
            let mut uuid = [0u8; 16];
            let mut driver = String::new();
            let mut hqr_feature = false;
            if let Some((props2_fn, features2_fn)) = inst.properties2 {
                let mut id = vk::PhysicalDeviceIDProperties::default();
                let mut props2 = vk::PhysicalDeviceProperties2::default().push_next(&mut id);
                let mut drv = vk::PhysicalDeviceDriverProperties::default();
                let driver_known = props.api_version >= vk::API_VERSION_1_2
                    && inst.api_version >= vk::API_VERSION_1_2;
                if driver_known {
                    props2 = props2.push_next(&mut drv);
                }
                props2_fn(pd, &mut props2);
                uuid = id.device_uuid;
                if driver_known {
                    driver = format!(
                        "{} {}",
                        CStr::from_ptr(drv.driver_name.as_ptr()).to_string_lossy(),
                        CStr::from_ptr(drv.driver_info.as_ptr()).to_string_lossy()
                    )
                    .trim()
                    .to_string();
                }
                if props.api_version >= vk::API_VERSION_1_2 || has(ash::ext::host_query_reset::NAME)
                {
                    let mut h = vk::PhysicalDeviceHostQueryResetFeatures::default();
                    let mut f2 = vk::PhysicalDeviceFeatures2::default().push_next(&mut h);
                    features2_fn(pd, &mut f2);
                    hqr_feature = h.host_query_reset == vk::TRUE;
                }
            }
            let effective = inst.api_version.min(props.api_version);
            let host_query_reset = if !hqr_feature {
                HostReset::None
            } else if effective >= vk::API_VERSION_1_2 {
                HostReset::Core
            } else if has(ash::ext::host_query_reset::NAME) {
                HostReset::Ext
            } else {
                HostReset::None
            };
            let calibration =
                gpu_counters_vulkan::calibration_extension(&inst.entry, raw, pd, &exts);
            Caps {
                api_version: props.api_version,
                name: CStr::from_ptr(props.device_name.as_ptr())
                    .to_string_lossy()
                    .into_owned(),
                driver,
                uuid,
                period_ns: f64::from(props.limits.timestamp_period),
                families,
                calibration,
                host_query_reset,
                pipeline_statistics: features.pipeline_statistics_query == vk::TRUE,
            }
        }
    }
}
