//! Calibrated timestamps on wgpu's Vulkan backend: `vkGetCalibratedTimestamps`
//! (`VK_EXT_calibrated_timestamps`, else `VK_KHR_calibrated_timestamps`)
//! through wgpu-hal's raw Vulkan device, for the device domain and the host
//! domain of [`cpu_monotonic_ns`](gpu_counters_hal::cpu_monotonic_ns)'s
//! clock: `CLOCK_MONOTONIC` (Linux, Android, FreeBSD) or
//! `QUERY_PERFORMANCE_COUNTER` (Windows, converted to ns). Calibrated reads
//! touch no queue, so nothing of wgpu's needs locking for them.

use gpu_counters_hal::{Error, Result, TimestampPair};
use std::ffi::CStr;
use std::sync::OnceLock;
use wgpu::hal::api::Vulkan;
use wgpu::hal::vulkan as hv;

/// The host time domain on the CPU clock's platform.
#[cfg(not(windows))]
const HOST_DOMAIN: ash::vk::TimeDomainKHR = ash::vk::TimeDomainKHR::CLOCK_MONOTONIC;
#[cfg(windows)]
const HOST_DOMAIN: ash::vk::TimeDomainKHR = ash::vk::TimeDomainKHR::QUERY_PERFORMANCE_COUNTER;

/// A host-domain value in ns on the CPU clock: `CLOCK_MONOTONIC` values
/// already are; a performance-counter value is scaled by its frequency.
#[cfg(not(windows))]
fn host_ns(value: u64) -> Option<u64> {
    Some(value)
}
#[cfg(windows)]
fn host_ns(value: u64) -> Option<u64> {
    gpu_counters_hal::clock::qpc_to_ns(i64::try_from(value).ok()?)
}

/// Reads in one [`read_burst`]; the one with the
/// smallest deviation is kept (as in the Vulkan backend).
const CALIBRATION_BURST: usize = 32;

/// Which calibrated-timestamps extension the reads go through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Extension {
    Ext,
    Khr,
}

impl Extension {
    pub(crate) fn name(self) -> &'static CStr {
        match self {
            Extension::Ext => ash::ext::calibrated_timestamps::NAME,
            Extension::Khr => ash::khr::calibrated_timestamps::NAME,
        }
    }
}

/// Looks at wgpu's device through wgpu-hal: `None` when it is not a Vulkan
/// device. It calibrates through the extension that is enabled on it with
/// both domains calibrateable (if any), and its queue family states the
/// timestamps' valid bits.
pub(crate) fn probe(device: &wgpu::Device) -> Option<super::Probe> {
    // SAFETY: the guard is only read from: no handle it reaches is
    // destroyed or has its state changed here, and it is dropped before
    // this function returns.
    let hal = unsafe { device.as_hal::<Vulkan>() }?;
    let enabled = hal.enabled_device_extensions();
    let instance = hal.shared_instance();
    let physical = hal.raw_physical_device();
    let extension = [Extension::Ext, Extension::Khr]
        .into_iter()
        .filter(|e| enabled.contains(&e.name()))
        .find(|&e| {
            // SAFETY: `physical` is the physical device of wgpu's device on
            // `instance`, which the guard keeps alive, and `e` is enabled on
            // that device, so the physical-device query it brings is there.
            let domains = unsafe {
                match e {
                    Extension::Ext => ash::ext::calibrated_timestamps::Instance::new(
                        instance.entry(),
                        instance.raw_instance(),
                    )
                    .get_physical_device_calibrateable_time_domains(physical),
                    Extension::Khr => ash::khr::calibrated_timestamps::Instance::new(
                        instance.entry(),
                        instance.raw_instance(),
                    )
                    .get_physical_device_calibrateable_time_domains(physical),
                }
            };
            domains.is_ok_and(|d| {
                d.contains(&ash::vk::TimeDomainKHR::DEVICE) && d.contains(&HOST_DOMAIN)
            })
        });
    // SAFETY: as above: a read-only query of the guarded physical device.
    let families = unsafe {
        instance
            .raw_instance()
            .get_physical_device_queue_family_properties(physical)
    };
    let valid_bits = families
        .get(hal.queue_family_index() as usize)
        .map(|f| f.timestamp_valid_bits);
    Some(super::Probe {
        extension: extension.map(super::Extension::Vulkan),
        valid_bits,
        period_ns: None,
    })
}

fn vk_err(what: &'static str) -> impl Fn(ash::vk::Result) -> Error {
    move |e| match e {
        ash::vk::Result::ERROR_DEVICE_LOST => Error::DeviceLost(format!("{what}: {e}")),
        e => Error::Internal(format!("{what}: {e}")),
    }
}

/// The `vkGetCalibratedTimestamps*` entry point of one wgpu device, looked
/// up once: the loader finds a device function by comparing its name with
/// each of its table's, thousands of string compares a lookup, and the
/// profiler calibrates every frame.
#[derive(Clone)]
pub(crate) enum Loaded {
    Ext(ash::ext::calibrated_timestamps::Device),
    Khr(ash::khr::calibrated_timestamps::Device),
}

/// A burst of [`CALIBRATION_BURST`] calibrated reads of wgpu's device,
/// keeping the one with the smallest deviation; device ticks masked to
/// `valid_bits`. The device must have `extension` enabled (what [`probe`]
/// found); an error if it is no longer a Vulkan device. `loaded` keeps
/// the entry point between calls: it must only ever be given this
/// `device`.
pub(crate) fn read_burst(
    device: &wgpu::Device,
    extension: Extension,
    valid_bits: u32,
    loaded: &OnceLock<Loaded>,
) -> Result<TimestampPair> {
    // SAFETY: the guard is only used to read timestamps (no handle is
    // destroyed or changed) and keeps wgpu-hal's device, hence the raw
    // `VkDevice`, alive while the loader below is used.
    let hal = unsafe { device.as_hal::<Vulkan>() }
        .ok_or_else(|| Error::Internal("wgpu device is no longer a Vulkan device".into()))?;
    let raw: &hv::Device = &hal;
    let instance = raw.shared_instance().raw_instance();
    let ash_device = raw.raw_device();
    let infos = [
        ash::vk::CalibratedTimestampInfoKHR::default().time_domain(ash::vk::TimeDomainKHR::DEVICE),
        ash::vk::CalibratedTimestampInfoKHR::default().time_domain(HOST_DOMAIN),
    ];
    // Looked up with this device's handle, which stays its for the wgpu
    // device's life; used only under the guard above, which keeps it alive.
    let loaded = loaded.get_or_init(|| match extension {
        Extension::Ext => Loaded::Ext(ash::ext::calibrated_timestamps::Device::new(
            instance, ash_device,
        )),
        Extension::Khr => Loaded::Khr(ash::khr::calibrated_timestamps::Device::new(
            instance, ash_device,
        )),
    });
    let m = super::mask(valid_bits);
    let mut best: Option<TimestampPair> = None;
    for _ in 0..CALIBRATION_BURST {
        // SAFETY: `extension` is enabled on this device and both domains
        // were found calibrateable by `probe`; `loaded` was looked up with
        // this device's handle (one `OnceLock` per device: `Shared` keeps
        // it beside the device, and its extension never changes); the
        // device is alive (the guard), and vkGetCalibratedTimestamps needs
        // no external synchronization of the device or any queue.
        let (values, deviation) = unsafe {
            match loaded {
                Loaded::Ext(ext) => ext.get_calibrated_timestamps(&infos),
                Loaded::Khr(khr) => khr.get_calibrated_timestamps(&infos),
            }
        }
        .map_err(vk_err("vkGetCalibratedTimestamps"))?;
        let cpu_ns = host_ns(values[1]).ok_or_else(|| {
            Error::Internal(format!(
                "vkGetCalibratedTimestamps: host time {} is not on the CPU clock's scale",
                values[1]
            ))
        })?;
        let pair = TimestampPair {
            cpu_ns,
            gpu_ticks: values[0] & m,
            max_deviation_ns: deviation,
        };
        if best.is_none_or(|b| pair.max_deviation_ns < b.max_deviation_ns) {
            best = Some(pair);
        }
    }
    best.ok_or_else(|| Error::Internal("no calibrated read".into()))
}

/// Opens a device on `adapter` through wgpu-hal with the calibrated
/// timestamps extension added (EXT where supported, else KHR), if the
/// adapter is a Vulkan one that supports it; `Ok(None)` otherwise.
pub(crate) fn open_with_extension(
    adapter: &wgpu::Adapter,
    desc: &wgpu::DeviceDescriptor<'_>,
) -> std::result::Result<Option<(wgpu::Device, wgpu::Queue)>, wgpu::RequestDeviceError> {
    // The checks wgpu's request_device makes, which create_device_from_hal
    // skips.
    if !adapter.features().contains(desc.required_features)
        || !desc.required_limits.check_limits(&adapter.limits())
        || desc
            .required_features
            .intersects(wgpu::Features::all_experimental_mask())
    {
        return Ok(None);
    }
    let open = {
        // SAFETY: the adapter guard is only read from and used to open a
        // device; it is dropped before the device is handed to wgpu.
        let Some(hal) = (unsafe { adapter.as_hal::<Vulkan>() }) else {
            return Ok(None);
        };
        let Some(extension) = [Extension::Ext, Extension::Khr].into_iter().find(|e| {
            hal.physical_device_capabilities()
                .supports_extension(e.name())
        }) else {
            return Ok(None);
        };
        let add: Box<hv::CreateDeviceCallback<'_>> = Box::new(move |args| {
            if !args.extensions.contains(&extension.name()) {
                args.extensions.push(extension.name());
            }
        });
        // SAFETY: the features and limits were checked against the
        // adapter's above (what `open` needs); the callback only adds an
        // extension the physical device supports, removing nothing.
        unsafe {
            hal.open_with_callback(
                desc.required_features,
                &desc.required_limits,
                &desc.memory_hints,
                Some(add),
            )
        }
        .ok()
    };
    let Some(open) = open else {
        return Ok(None);
    };
    // SAFETY: `open` was created from this adapter's wgpu-hal adapter, with
    // exactly `desc.required_features`.
    unsafe { adapter.create_device_from_hal(open, desc) }.map(Some)
}
