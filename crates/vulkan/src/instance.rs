//! The Vulkan instance, device discovery and the validation-message capture.

use crate::clock::CalibratedTimestamps;
use crate::util::vk_err;
use ash::vk;
use gpu_counters_hal::{
    BackendKind, CalibrationMethod, CommonCounter, CommonCounterSet, CounterSamplingPoint,
    CounterSet, DeviceInfo, DeviceType, Error, Result,
};
use std::ffi::{c_void, CStr};
use std::sync::{Arc, Mutex};

/// The name of the Khronos validation layer.
pub const VALIDATION_LAYER: &CStr = c"VK_LAYER_KHRONOS_validation";

/// Environment variable that turns the validation layer on for every
/// [`Instance`] (`1`), whatever its options say.
pub const VALIDATION_ENV: &str = "GPU_COUNTERS_VALIDATION";

/// Lowest Vulkan version gpu-counters drives (synchronization2 and dynamic
/// rendering are core there).
pub const MIN_API_VERSION: u32 = vk::API_VERSION_1_3;

/// How to create an [`Instance`].
#[derive(Debug, Clone, Default)]
pub struct InstanceOptions {
    /// Enable `VK_LAYER_KHRONOS_validation` and capture its messages
    /// (see [`Instance::validation_messages`]).
    pub validation: bool,
}

/// Messages captured through `VK_EXT_debug_utils`, split by where they come
/// from: the validation layer's own messages (what
/// [`Instance::validation_messages`] returns and what a validated run fails
/// on) and everything else the messenger sees (the loader's notices, driver
/// messages), kept for information only.
#[derive(Debug, Default)]
pub(crate) struct MessageLog {
    validation: Mutex<Vec<String>>,
    other: Mutex<Vec<String>>,
}

/// Whether a debug-utils message comes from the validation layer: it has the
/// VALIDATION type, or its message id name is a validation-layer id
/// (`VUID-...` for the specification's valid-usage rules, `UNASSIGNED-...`
/// for the layer's own checks). The Vulkan loader's notices (GENERAL type,
/// id name `Loader Message`, e.g. "env var 'VK_INSTANCE_LAYERS' defined")
/// and driver messages are not.
pub(crate) fn is_validation_message(
    kind: vk::DebugUtilsMessageTypeFlagsEXT,
    id_name: Option<&str>,
) -> bool {
    kind.contains(vk::DebugUtilsMessageTypeFlagsEXT::VALIDATION)
        || id_name.is_some_and(|n| n.starts_with("VUID-") || n.starts_with("UNASSIGNED-"))
}

/// A Vulkan instance opened by gpu-counters, with its optional validation
/// capture. Cloning shares the instance.
#[derive(Clone)]
pub struct Instance {
    pub(crate) shared: Arc<InstanceShared>,
}

pub(crate) struct InstanceShared {
    pub(crate) entry: ash::Entry,
    pub(crate) instance: ash::Instance,
    debug: Option<(ash::ext::debug_utils::Instance, vk::DebugUtilsMessengerEXT)>,
    /// Keeps the messenger's user data alive as long as the messenger.
    messages: Option<Box<MessageLog>>,
    pub(crate) owned: bool,
}

impl Drop for InstanceShared {
    fn drop(&mut self) {
        // SAFETY: every child object (devices, buffers) holds an Arc to this
        // struct, so none is alive here; the messenger and instance were created
        // by us and are destroyed once.
        unsafe {
            if let Some((loader, messenger)) = self.debug.take() {
                loader.destroy_debug_utils_messenger(messenger, None);
            }
            if self.owned {
                self.instance.destroy_instance(None);
            }
        }
    }
}

/// The debug-utils messenger's callback: files the message in the
/// [`MessageLog`] that `user` points at, under validation or other (see
/// [`is_validation_message`]).
unsafe extern "system" fn debug_callback(
    severity: vk::DebugUtilsMessageSeverityFlagsEXT,
    kind: vk::DebugUtilsMessageTypeFlagsEXT,
    data: *const vk::DebugUtilsMessengerCallbackDataEXT<'_>,
    user: *mut c_void,
) -> vk::Bool32 {
    if user.is_null() || data.is_null() {
        return vk::FALSE;
    }
    // SAFETY: the loader passes a valid callback-data pointer for the call's
    // duration, whose non-null string pointers are NUL-terminated; `user` is
    // the boxed MessageLog, which outlives the messenger (it is freed only
    // after the messenger is destroyed).
    let (log, message, id_name) = unsafe {
        let data = &*data;
        let text = |p: *const std::ffi::c_char| {
            (!p.is_null()).then(|| CStr::from_ptr(p).to_string_lossy().into_owned())
        };
        (
            &*(user as *const MessageLog),
            text(data.p_message).unwrap_or_else(|| String::from("(no message)")),
            text(data.p_message_id_name),
        )
    };
    let line = format!("[{severity:?} {kind:?}] {message}");
    let list = if is_validation_message(kind, id_name.as_deref()) {
        &log.validation
    } else {
        &log.other
    };
    if let Ok(mut list) = list.lock() {
        list.push(line);
    }
    vk::FALSE
}

impl Instance {
    /// Loads the Vulkan loader and creates an instance.
    pub fn new(options: &InstanceOptions) -> Result<Self> {
        let validation = options.validation
            || std::env::var(VALIDATION_ENV)
                .map(|v| v == "1")
                .unwrap_or(false);
        // SAFETY: loading the system Vulkan loader runs its initialisation code,
        // which is the documented way to reach Vulkan.
        let entry = unsafe { ash::Entry::load() }.map_err(|e| {
            Error::Internal(format!(
                "cannot load the Vulkan loader (libvulkan.so.1): {e}; install a Vulkan driver, e.g. `apt-get install mesa-vulkan-drivers libvulkan1`"
            ))
        })?;
        let app = vk::ApplicationInfo::default()
            .application_name(c"gpu-counters")
            .engine_name(c"gpu-counters")
            .api_version(MIN_API_VERSION);
        let mut layers = Vec::new();
        let mut extensions = Vec::new();
        // SAFETY: plain enumeration calls on a loaded entry.
        let available_layers = unsafe { entry.enumerate_instance_layer_properties() }
            .map_err(vk_err("vkEnumerateInstanceLayerProperties"))?;
        // SAFETY: as above; `None` asks for the implementation's own
        // extensions, not a layer's.
        let available_exts = unsafe { entry.enumerate_instance_extension_properties(None) }
            .map_err(vk_err("vkEnumerateInstanceExtensionProperties"))?;
        let has_ext = |name: &CStr| {
            available_exts
                .iter()
                .any(|e| e.extension_name_as_c_str().ok() == Some(name))
        };
        if validation {
            let found = available_layers
                .iter()
                .any(|l| l.layer_name_as_c_str().ok() == Some(VALIDATION_LAYER));
            if !found {
                return Err(Error::Internal(
                    "validation was asked for but VK_LAYER_KHRONOS_validation is not installed (apt-get install vulkan-validationlayers)".into(),
                ));
            }
            layers.push(VALIDATION_LAYER.as_ptr());
            extensions.push(ash::ext::debug_utils::NAME.as_ptr());
        }
        let portability = has_ext(ash::khr::portability_enumeration::NAME);
        if portability {
            extensions.push(ash::khr::portability_enumeration::NAME.as_ptr());
        }
        let flags = if portability {
            vk::InstanceCreateFlags::ENUMERATE_PORTABILITY_KHR
        } else {
            vk::InstanceCreateFlags::empty()
        };
        let messages: Option<Box<MessageLog>> = validation.then(Box::default);
        let mut messenger_info = vk::DebugUtilsMessengerCreateInfoEXT::default()
            .message_severity(
                vk::DebugUtilsMessageSeverityFlagsEXT::WARNING
                    | vk::DebugUtilsMessageSeverityFlagsEXT::ERROR,
            )
            .message_type(
                vk::DebugUtilsMessageTypeFlagsEXT::GENERAL
                    | vk::DebugUtilsMessageTypeFlagsEXT::VALIDATION
                    | vk::DebugUtilsMessageTypeFlagsEXT::PERFORMANCE,
            )
            .pfn_user_callback(Some(debug_callback));
        if let Some(log) = &messages {
            messenger_info.p_user_data = &**log as *const MessageLog as *mut c_void;
        }
        let mut info = vk::InstanceCreateInfo::default()
            .application_info(&app)
            .enabled_layer_names(&layers)
            .enabled_extension_names(&extensions)
            .flags(flags);
        if messages.is_some() {
            // Also catch messages from vkCreateInstance/vkDestroyInstance.
            info = info.push_next(&mut messenger_info);
        }
        // SAFETY: every pointer in `info` points at locals that outlive the call.
        let instance = unsafe { entry.create_instance(&info, None) }.map_err(|e| {
            if e == vk::Result::ERROR_INCOMPATIBLE_DRIVER {
                // What the loader says when it finds no driver at all.
                Error::Internal(format!(
                    "vkCreateInstance: {e}: the Vulkan loader found no driver it can use (none installed, or VK_DRIVER_FILES / VK_ICD_FILENAMES names none); install one, e.g. `apt-get install mesa-vulkan-drivers` for lavapipe"
                ))
            } else {
                vk_err("vkCreateInstance")(e)
            }
        })?;
        let debug = if messages.is_some() {
            let loader = ash::ext::debug_utils::Instance::new(&entry, &instance);
            // SAFETY: the user-data pointer is the boxed log kept in the
            // returned struct, which destroys the messenger before freeing it.
            match unsafe { loader.create_debug_utils_messenger(&messenger_info, None) } {
                Ok(m) => Some((loader, m)),
                Err(e) => {
                    // SAFETY: the instance was created above and has no children.
                    unsafe { instance.destroy_instance(None) };
                    return Err(vk_err("vkCreateDebugUtilsMessengerEXT")(e));
                }
            }
        } else {
            None
        };
        Ok(Self {
            shared: Arc::new(InstanceShared {
                entry,
                instance,
                debug,
                messages,
                owned: true,
            }),
        })
    }

    /// Wraps a caller's instance. gpu-counters never destroys it.
    ///
    /// # Safety
    /// `instance` must be a valid instance created from `entry` with API
    /// version 1.3 or later, and must outlive the returned value and every
    /// object made from it.
    pub unsafe fn from_raw(entry: ash::Entry, instance: ash::Instance) -> Self {
        Self {
            shared: Arc::new(InstanceShared {
                entry,
                instance,
                debug: None,
                messages: None,
                owned: false,
            }),
        }
    }

    /// The ash entry.
    pub fn entry(&self) -> &ash::Entry {
        &self.shared.entry
    }

    /// The ash instance.
    pub fn raw(&self) -> &ash::Instance {
        &self.shared.instance
    }

    /// Whether validation messages are being captured.
    pub fn validation_enabled(&self) -> bool {
        self.shared.messages.is_some()
    }

    /// Every warning and error the validation layer reported so far: only
    /// messages of the VALIDATION type or with a `VUID-`/`UNASSIGNED-` id
    /// (the loader's notices, e.g. about `VK_INSTANCE_LAYERS` being set, are
    /// in [`Instance::other_messages`] instead).
    pub fn validation_messages(&self) -> Vec<String> {
        self.shared
            .messages
            .as_ref()
            .and_then(|m| m.validation.lock().ok().map(|v| v.clone()))
            .unwrap_or_default()
    }

    /// Removes and returns the captured validation messages (see
    /// [`Instance::validation_messages`]).
    pub fn take_validation_messages(&self) -> Vec<String> {
        self.shared
            .messages
            .as_ref()
            .and_then(|m| {
                m.validation
                    .lock()
                    .ok()
                    .map(|mut v| std::mem::take(&mut *v))
            })
            .unwrap_or_default()
    }

    /// The warnings and errors captured so far that do not come from the
    /// validation layer: the Vulkan loader's notices (GENERAL type,
    /// `Loader Message`) and driver messages. Informational: nothing in
    /// gpu-counters fails on them.
    pub fn other_messages(&self) -> Vec<String> {
        self.shared
            .messages
            .as_ref()
            .and_then(|m| m.other.lock().ok().map(|v| v.clone()))
            .unwrap_or_default()
    }

    /// The physical devices gpu-counters can drive (Vulkan 1.3 or later),
    /// in the driver's order.
    pub fn physical_devices(&self) -> Result<Vec<vk::PhysicalDevice>> {
        // SAFETY: plain enumeration on a valid instance.
        let all = unsafe { self.raw().enumerate_physical_devices() }
            .map_err(vk_err("vkEnumeratePhysicalDevices"))?;
        Ok(all
            .into_iter()
            .filter(|&pd| {
                // SAFETY: `pd` comes from this instance.
                let props = unsafe { self.raw().get_physical_device_properties(pd) };
                props.api_version >= MIN_API_VERSION
            })
            .collect())
    }

    /// Everything gpu-counters reports about every device it can drive.
    pub fn devices(&self) -> Result<Vec<DeviceInfo>> {
        self.physical_devices()?
            .into_iter()
            .enumerate()
            .map(|(i, pd)| Ok(Capabilities::query(self, pd)?.info(i)))
            .collect()
    }

    /// Index of the default device: the first hardware GPU, else the first
    /// device (on a machine without a GPU, lavapipe).
    pub fn default_device_index(&self) -> Result<usize> {
        let devices = self.devices()?;
        if devices.is_empty() {
            return Err(Error::Internal(
                "no Vulkan 1.3 device found; install a driver (apt-get install mesa-vulkan-drivers for lavapipe)".into(),
            ));
        }
        Ok(devices
            .iter()
            .position(|d| d.device_type.is_hardware())
            .unwrap_or(0))
    }
}

/// What a physical device can do, read without creating a logical device.
#[derive(Debug, Clone)]
pub(crate) struct Capabilities {
    pub physical_device: vk::PhysicalDevice,
    pub name: String,
    pub device_type: DeviceType,
    pub api_version: u32,
    pub driver: String,
    pub timestamp_period_ns: f64,
    pub queue_family_index: u32,
    pub timestamp_valid_bits: u32,
    pub pipeline_statistics: bool,
    pub occlusion_precise: bool,
    pub tessellation: bool,
    pub host_query_reset: bool,
    pub push_descriptor: bool,
    pub calibration: CalibrationMethod,
    pub calibration_ext: Option<CalibratedTimestamps>,
    pub max_sample_count: u32,
}

/// Most queries one counter sample buffer may hold: Vulkan sets no limit on
/// query pools, so gpu-counters picks one that keeps a pool and its resolve
/// scratch far below every device's memory.
pub const MAX_SAMPLE_COUNT: u32 = 1 << 20;

impl Capabilities {
    pub(crate) fn query(instance: &Instance, pd: vk::PhysicalDevice) -> Result<Self> {
        let raw = instance.raw();
        // SAFETY: `pd` was enumerated from this instance; the pNext chains point
        // at locals that outlive the calls.
        unsafe {
            let props = raw.get_physical_device_properties(pd);
            let mut driver_props = vk::PhysicalDeviceDriverProperties::default();
            let mut props2 = vk::PhysicalDeviceProperties2::default().push_next(&mut driver_props);
            raw.get_physical_device_properties2(pd, &mut props2);
            let mut f12 = vk::PhysicalDeviceVulkan12Features::default();
            let mut f2 = vk::PhysicalDeviceFeatures2::default().push_next(&mut f12);
            raw.get_physical_device_features2(pd, &mut f2);
            let features = f2.features;
            let families = raw.get_physical_device_queue_family_properties(pd);
            let want = vk::QueueFlags::GRAPHICS | vk::QueueFlags::COMPUTE;
            let family = families
                .iter()
                .enumerate()
                .filter(|(_, f)| f.queue_flags.contains(want))
                .max_by_key(|(_, f)| f.timestamp_valid_bits)
                .map(|(i, _)| i as u32)
                .ok_or_else(|| {
                    Error::Internal(format!(
                        "device {} has no graphics+compute queue family",
                        CStr::from_ptr(props.device_name.as_ptr()).to_string_lossy()
                    ))
                })?;
            let exts = raw
                .enumerate_device_extension_properties(pd)
                .map_err(vk_err("vkEnumerateDeviceExtensionProperties"))?;
            let has = |name: &CStr| {
                exts.iter()
                    .any(|e| e.extension_name_as_c_str().ok() == Some(name))
            };
            // Calibrated timestamps help only if both the device and the CPU
            // monotonic clock are among the calibrateable domains.
            let calibration_ext =
                crate::clock::calibration_extension(&instance.shared.entry, raw, pd, &exts);
            let calibration = match calibration_ext {
                Some(_) => CalibrationMethod::CalibratedPair,
                None => CalibrationMethod::Bracketing,
            };
            let api = props.api_version;
            let driver = format!(
                "{} {}",
                CStr::from_ptr(driver_props.driver_name.as_ptr()).to_string_lossy(),
                CStr::from_ptr(driver_props.driver_info.as_ptr()).to_string_lossy()
            )
            .trim()
            .to_string();
            Ok(Self {
                physical_device: pd,
                name: CStr::from_ptr(props.device_name.as_ptr())
                    .to_string_lossy()
                    .into_owned(),
                device_type: match props.device_type {
                    vk::PhysicalDeviceType::DISCRETE_GPU => DeviceType::DiscreteGpu,
                    vk::PhysicalDeviceType::INTEGRATED_GPU => DeviceType::IntegratedGpu,
                    vk::PhysicalDeviceType::VIRTUAL_GPU => DeviceType::VirtualGpu,
                    vk::PhysicalDeviceType::CPU => DeviceType::Cpu,
                    _ => DeviceType::Other,
                },
                api_version: api,
                driver,
                timestamp_period_ns: props.limits.timestamp_period as f64,
                queue_family_index: family,
                timestamp_valid_bits: families[family as usize].timestamp_valid_bits,
                pipeline_statistics: features.pipeline_statistics_query == vk::TRUE,
                occlusion_precise: features.occlusion_query_precise == vk::TRUE,
                tessellation: features.tessellation_shader == vk::TRUE,
                host_query_reset: f12.host_query_reset == vk::TRUE,
                push_descriptor: has(ash::khr::push_descriptor::NAME),
                calibration,
                calibration_ext,
                max_sample_count: MAX_SAMPLE_COUNT,
            })
        }
    }

    /// The counter sets this device really offers.
    pub(crate) fn counter_sets(&self) -> Vec<CounterSet> {
        let mut sets = Vec::new();
        if self.timestamp_valid_bits > 0 {
            sets.push(CounterSet {
                set: CommonCounterSet::Timestamp,
                counters: vec![CommonCounter::Timestamp],
            });
        }
        if self.pipeline_statistics {
            let mut counters = Vec::new();
            for c in CommonCounter::STATISTICS {
                let offered = match c {
                    CommonCounter::TessellationInputPatches
                    | CommonCounter::PostTessellationVertexInvocations => self.tessellation,
                    // Without precise occlusion queries the count is only
                    // "zero or not": not a counter.
                    CommonCounter::FragmentsPassed => self.occlusion_precise,
                    _ => true,
                };
                if offered {
                    counters.push(c);
                }
            }
            sets.push(CounterSet {
                set: CommonCounterSet::Statistic,
                counters,
            });
        }
        // Stage utilization needs real cycle counters (VK_KHR_performance_query);
        // gpu-counters does not offer it on Vulkan yet, and never invents it.
        sets
    }

    pub(crate) fn sampling_points(&self) -> Vec<CounterSamplingPoint> {
        if self.timestamp_valid_bits == 0 && !self.pipeline_statistics {
            return Vec::new();
        }
        vec![
            CounterSamplingPoint::AtStageBoundary,
            CounterSamplingPoint::AtDrawBoundary,
            CounterSamplingPoint::AtDispatchBoundary,
            CounterSamplingPoint::AtBlitBoundary,
        ]
    }

    pub(crate) fn info(&self, index: usize) -> DeviceInfo {
        DeviceInfo {
            index,
            name: self.name.clone(),
            backend: BackendKind::Vulkan,
            device_type: self.device_type,
            timestamp_period_ns: self.timestamp_period_ns,
            timestamp_valid_bits: self.timestamp_valid_bits,
            calibration: self.calibration,
            calibration_source: match (self.calibration, self.calibration_ext) {
                (CalibrationMethod::CalibratedPair, Some(ext)) => {
                    ext.name().to_string_lossy().into_owned()
                }
                _ => "bracketed submission".into(),
            },
            counter_sets: self.counter_sets(),
            sampling_points: self.sampling_points(),
            driver: self.driver.clone(),
            api_version: format!(
                "{}.{}.{}",
                vk::api_version_major(self.api_version),
                vk::api_version_minor(self.api_version),
                vk::api_version_patch(self.api_version)
            ),
            max_sample_count: self.max_sample_count,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_validation_layer_messages_count_as_validation() {
        type T = vk::DebugUtilsMessageTypeFlagsEXT;
        assert!(is_validation_message(
            T::VALIDATION,
            Some("VUID-vkCmdDraw-None-08600")
        ));
        assert!(is_validation_message(T::VALIDATION, None));
        assert!(is_validation_message(
            T::GENERAL,
            Some("UNASSIGNED-CoreValidation-x")
        ));
        assert!(is_validation_message(T::PERFORMANCE, Some("VUID-x")));
        // The loader's notices, e.g. "env var 'VK_INSTANCE_LAYERS' defined".
        assert!(!is_validation_message(T::GENERAL, Some("Loader Message")));
        assert!(!is_validation_message(T::GENERAL, None));
        assert!(!is_validation_message(T::PERFORMANCE, Some("driver")));
    }
}
