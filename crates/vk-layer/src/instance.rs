//! What the layer keeps of an instance, the next layer's entry points, and
//! what it reads of a physical device before making a device of it. Made
//! and released by [`crate::lifecycle`].

use ash::vk;
use std::ffi::{c_char, CStr};

/// How the device resets queries on the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HostReset {
    /// It cannot: every execution resets its queries on the GPU.
    #[default]
    None,
    /// `vkResetQueryPool` (Vulkan 1.2's `hostQueryReset`).
    Core,
    /// `vkResetQueryPoolEXT` (`VK_EXT_host_query_reset`).
    Ext,
}

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
    pub(crate) unsafe fn query(inst: &InstanceData, pd: vk::PhysicalDevice) -> Caps {
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
