//! Calibrated pairs on wgpu's Metal backend: `MTLDevice.sampleTimestamps`
//! (Metal's own calibration call) on wgpu-hal's raw device. Metal states no
//! bound for the pair, so each call is bracketed between two reads of the
//! CPU clock ([`super::bracketed_pair`]); the call's own CPU value is an
//! `MTLTimestamp` in Mach absolute time, the clock the window is read on.
//!
//! Written against wgpu-hal 30's Metal device and objc2-metal's
//! `MTLDevice`; not yet run on a Metal device.

use super::{bracketed_pair, mask, narrowest_of_burst};
use gpu_counters_hal::{cpu_monotonic_ns, Error, Result, TimestampPair};
use objc2::runtime::{NSObjectProtocol, ProtocolObject};
use objc2_metal::MTLDevice;
use std::ffi::CStr;
use std::ptr::NonNull;
use std::sync::OnceLock;
use wgpu::hal::api::Metal;

/// The call calibration reads through.
pub(crate) const NAME: &CStr = c"MTLDevice.sampleTimestamps";

/// `sampleTimestamps` (one value).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Extension;

impl Extension {
    pub(crate) fn name(self) -> &'static CStr {
        NAME
    }
}

/// Looks at wgpu's device through wgpu-hal: `None` when it is not a Metal
/// device. It calibrates through `sampleTimestamps` where the device
/// implements it (macOS 10.15, iOS 14 and later).
pub(crate) fn probe(device: &wgpu::Device) -> Option<super::Probe> {
    // SAFETY: the guard is only read from (no handle is destroyed or
    // changed) and is dropped before this function returns.
    let hal = unsafe { device.as_hal::<Metal>() }?;
    let raw: &ProtocolObject<dyn MTLDevice> = hal.raw_device();
    let works = raw.respondsToSelector(objc2::sel!(sampleTimestamps:gpuTimestamp:));
    Some(super::Probe {
        extension: works.then_some(super::Extension::Metal(Extension)),
        valid_bits: None,
        period_ns: None,
    })
}

/// One `sampleTimestamps` between two CPU clock reads, GPU ticks masked by
/// `mask`. The device must implement it ([`probe`]).
fn read(raw: &ProtocolObject<dyn MTLDevice>, mask: u64) -> Result<TimestampPair> {
    let mut cpu = 0u64;
    let mut gpu = 0u64;
    let before = cpu_monotonic_ns();
    // SAFETY: both pointers are to live, writable `MTLTimestamp`s (u64) the
    // call writes its two values into; the device is alive (the caller's
    // guard), implements the method (`probe` asked it), and MTLDevice is
    // thread-safe, so no lock of wgpu's is needed.
    unsafe { raw.sampleTimestamps_gpuTimestamp(NonNull::from(&mut cpu), NonNull::from(&mut gpu)) };
    let after = cpu_monotonic_ns();
    bracketed_pair(before, after, gpu & mask).ok_or_else(|| {
        Error::Internal("the CPU clock went backwards around MTLDevice.sampleTimestamps".into())
    })
}

/// The narrowest of a burst of calls ([`narrowest_of_burst`]), GPU ticks
/// masked to `valid_bits`. An error if the device is no longer a Metal
/// device.
pub(crate) fn read_burst(
    device: &wgpu::Device,
    _extension: Extension,
    valid_bits: u32,
    _loaded: &OnceLock<super::Loaded>,
) -> Result<TimestampPair> {
    // SAFETY: the guard is only used for calibration reads (no handle is
    // destroyed or changed) and keeps wgpu-hal's device alive while they
    // run.
    let hal = unsafe { device.as_hal::<Metal>() }
        .ok_or_else(|| Error::Internal("wgpu device is no longer a Metal device".into()))?;
    let m = mask(valid_bits);
    narrowest_of_burst(|| read(hal.raw_device(), m))
}
