//! Reading a device's timestamp clock and `CLOCK_MONOTONIC` together
//! through `VK_KHR/EXT_calibrated_timestamps`: what [`crate::Device`]
//! calibrates with, usable on any `ash` device that enabled one of the
//! extensions (the Vulkan layer's devices, for one).

use crate::util::{mask, vk_err};
use ash::vk;
use gpu_counters_hal::{Error, Result, TimestampPair};
use std::ffi::CStr;

/// The extensions that read the GPU and CPU clocks together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CalibratedTimestamps {
    /// `VK_KHR_calibrated_timestamps`.
    Khr,
    /// `VK_EXT_calibrated_timestamps`.
    Ext,
}

impl CalibratedTimestamps {
    /// The extension's name.
    pub fn name(self) -> &'static CStr {
        match self {
            CalibratedTimestamps::Khr => ash::khr::calibrated_timestamps::NAME,
            CalibratedTimestamps::Ext => ash::ext::calibrated_timestamps::NAME,
        }
    }
}

/// Calibration reads taken per [`CalibratedClock::read_best`] call that
/// [`crate::Device::sample_timestamps`] makes; the one with the smallest
/// max deviation wins. On NVIDIA a read takes about 5.5 us and its
/// deviation varies from about 3 to 15 us, so a burst of 32 (about 0.2 ms)
/// almost always finds one near the driver's best.
pub const CALIBRATION_BURST: usize = 32;

enum Loader {
    Khr(ash::khr::calibrated_timestamps::Device),
    Ext(ash::ext::calibrated_timestamps::Device),
}

/// Reads a device's clock (`VK_TIME_DOMAIN_DEVICE`, masked to the valid
/// bits) and `CLOCK_MONOTONIC` in one `vkGetCalibratedTimestamps` call.
/// The call needs no external synchronization: any thread may read.
pub struct CalibratedClock {
    loader: Loader,
    mask: u64,
}

impl std::fmt::Debug for CalibratedClock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CalibratedClock")
            .field("mask", &self.mask)
            .finish_non_exhaustive()
    }
}

impl CalibratedClock {
    /// The clock of `device`, through extension `ext`, its ticks masked to
    /// `valid_bits`.
    ///
    /// # Safety
    ///
    /// `device` was created from `instance` with `ext` enabled, and its
    /// physical device offers the `DEVICE` and `CLOCK_MONOTONIC` time
    /// domains ([`calibration_extension`] says so); both outlive the clock.
    pub unsafe fn new(
        instance: &ash::Instance,
        device: &ash::Device,
        ext: CalibratedTimestamps,
        valid_bits: u32,
    ) -> Self {
        let loader = match ext {
            CalibratedTimestamps::Khr => Loader::Khr(ash::khr::calibrated_timestamps::Device::new(
                instance, device,
            )),
            CalibratedTimestamps::Ext => Loader::Ext(ash::ext::calibrated_timestamps::Device::new(
                instance, device,
            )),
        };
        Self {
            loader,
            mask: mask(valid_bits),
        }
    }

    /// One read: the CPU time, the GPU ticks and the driver's max deviation.
    ///
    /// # Errors
    ///
    /// The driver's failure, through [`crate::map_vk_error`]
    /// ([`Error::DeviceLost`] for a lost device).
    pub fn read(&self) -> Result<TimestampPair> {
        let infos = [
            vk::CalibratedTimestampInfoKHR::default().time_domain(vk::TimeDomainKHR::DEVICE),
            vk::CalibratedTimestampInfoKHR::default()
                .time_domain(vk::TimeDomainKHR::CLOCK_MONOTONIC),
        ];
        // SAFETY: the extension is enabled on the device and both domains
        // are calibrateable (the contract of `new`).
        let (values, deviation) = unsafe {
            match &self.loader {
                Loader::Khr(l) => l.get_calibrated_timestamps(&infos),
                Loader::Ext(l) => l.get_calibrated_timestamps(&infos),
            }
        }
        .map_err(vk_err("vkGetCalibratedTimestamps"))?;
        Ok(TimestampPair {
            cpu_ns: values[1],
            gpu_ticks: values[0] & self.mask,
            max_deviation_ns: deviation,
        })
    }

    /// The read with the smallest max deviation of `reads` reads (at least
    /// one).
    ///
    /// # Errors
    ///
    /// As [`CalibratedClock::read`], at the first read that fails.
    pub fn read_best(&self, reads: usize) -> Result<TimestampPair> {
        let mut best: Option<TimestampPair> = None;
        for _ in 0..reads.max(1) {
            let pair = self.read()?;
            if best.is_none_or(|b| pair.max_deviation_ns < b.max_deviation_ns) {
                best = Some(pair);
            }
        }
        best.ok_or_else(|| Error::Internal("no calibration read".into()))
    }
}

/// The calibrated-timestamps extension that calibrates `physical_device`'s
/// clock against `CLOCK_MONOTONIC`, if any: one of `extensions` (the
/// device's), whose `DEVICE` and `CLOCK_MONOTONIC` time domains the device
/// offers. Where a driver has both, EXT is taken, because older validation
/// layers (Debian 12's 1.3.239) know only EXT and warn about KHR.
///
/// # Safety
///
/// `physical_device` belongs to `instance`, which was created from `entry`.
pub unsafe fn calibration_extension(
    entry: &ash::Entry,
    instance: &ash::Instance,
    physical_device: vk::PhysicalDevice,
    extensions: &[vk::ExtensionProperties],
) -> Option<CalibratedTimestamps> {
    let has = |name: &std::ffi::CStr| {
        extensions
            .iter()
            .any(|e| e.extension_name_as_c_str().ok() == Some(name))
    };
    let ext = if has(ash::ext::calibrated_timestamps::NAME) {
        CalibratedTimestamps::Ext
    } else if has(ash::khr::calibrated_timestamps::NAME) {
        CalibratedTimestamps::Khr
    } else {
        return None;
    };
    // SAFETY: the caller's promise; the extension's instance command exists
    // since the device offers the extension.
    let domains = unsafe {
        match ext {
            CalibratedTimestamps::Khr => {
                ash::khr::calibrated_timestamps::Instance::new(entry, instance)
                    .get_physical_device_calibrateable_time_domains(physical_device)
            }
            CalibratedTimestamps::Ext => {
                ash::ext::calibrated_timestamps::Instance::new(entry, instance)
                    .get_physical_device_calibrateable_time_domains(physical_device)
            }
        }
    }
    .unwrap_or_default();
    (domains.contains(&vk::TimeDomainKHR::DEVICE)
        && domains.contains(&vk::TimeDomainKHR::CLOCK_MONOTONIC))
    .then_some(ext)
}
