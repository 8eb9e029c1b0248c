//! Calibrated pairs on wgpu's DX12 backend:
//! `ID3D12CommandQueue::GetClockCalibration` on the command queue of
//! wgpu-hal's raw device, and the queue's exact timestamp frequency
//! (`GetTimestampFrequency`). D3D12 states no bound for the pair, so each
//! call is bracketed between two reads of the CPU clock
//! ([`super::bracketed_pair`]); the call's own CPU value is a
//! `QueryPerformanceCounter` value, the clock the window is read on.
//!
//! Written against wgpu-hal 30's DX12 device and the `windows` crate's
//! `ID3D12CommandQueue`; not yet run on a D3D12 device.

use super::{bracketed_pair, mask, narrowest_of_burst};
use gpu_counters_hal::{cpu_monotonic_ns, Error, Result, TimestampPair};
use std::ffi::CStr;
use std::sync::OnceLock;
use wgpu::hal::api::Dx12;
use wgpu::hal::dx12 as hd;

/// The call calibration reads through.
pub(crate) const NAME: &CStr = c"ID3D12CommandQueue::GetClockCalibration";

/// `GetClockCalibration` (one value).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Extension;

impl Extension {
    pub(crate) fn name(self) -> &'static CStr {
        NAME
    }
}

/// The HRESULTs of a removed, hung or reset device (`DXGI_ERROR_DEVICE_*`).
const DEVICE_LOST: [u32; 3] = [0x887A_0005, 0x887A_0006, 0x887A_0007];

fn d3d_err(what: &str, code: i32, message: String) -> Error {
    if DEVICE_LOST.contains(&(code as u32)) {
        Error::DeviceLost(format!("{what}: {message}"))
    } else {
        Error::Internal(format!("{what}: {message} (HRESULT {:#010x})", code as u32))
    }
}

/// Looks at wgpu's device through wgpu-hal: `None` when it is not a DX12
/// device. It calibrates through `GetClockCalibration` if one call of it
/// succeeds, and its period is `1e9 / GetTimestampFrequency()` ns.
pub(crate) fn probe(device: &wgpu::Device) -> Option<super::Probe> {
    // SAFETY: the guard is only read from (a property of the queue and a
    // calibration read: no handle is destroyed or changed) and is dropped
    // before this function returns.
    let hal = unsafe { device.as_hal::<Dx12>() }?;
    // SAFETY: the queue is alive (wgpu-hal's device, kept by the guard,
    // holds a reference to it); D3D12 command queues are free-threaded, and
    // this call only reads a property of the queue.
    let frequency = unsafe { hal.raw_queue().GetTimestampFrequency() }
        .ok()
        .filter(|&f| f > 0);
    let works = read(&hal, u64::MAX).is_ok();
    Some(super::Probe {
        extension: works.then_some(super::Extension::Dx12(Extension)),
        valid_bits: None,
        period_ns: frequency.map(|f| 1e9 / f as f64),
    })
}

/// One `GetClockCalibration` between two CPU clock reads, GPU ticks masked
/// by `mask`.
fn read(hal: &hd::Device, mask: u64) -> Result<TimestampPair> {
    let mut gpu = 0u64;
    let mut qpc = 0u64;
    let before = cpu_monotonic_ns();
    // SAFETY: both pointers are to live, writable u64s the call writes its
    // two values into; the queue is alive (the caller's guard keeps
    // wgpu-hal's device, which holds a reference to it) and D3D12 command
    // queues are free-threaded, so no lock of wgpu's is needed.
    let r = unsafe { hal.raw_queue().GetClockCalibration(&mut gpu, &mut qpc) };
    let after = cpu_monotonic_ns();
    r.map_err(|e| {
        d3d_err(
            "ID3D12CommandQueue::GetClockCalibration",
            e.code().0,
            e.message(),
        )
    })?;
    bracketed_pair(before, after, gpu & mask).ok_or_else(|| {
        Error::Internal("the CPU clock went backwards around GetClockCalibration".into())
    })
}

/// The narrowest of a burst of calls ([`narrowest_of_burst`]), GPU ticks
/// masked to `valid_bits`. An error if the device is no longer a DX12
/// device or a call fails.
pub(crate) fn read_burst(
    device: &wgpu::Device,
    _extension: Extension,
    valid_bits: u32,
    _loaded: &OnceLock<super::Loaded>,
) -> Result<TimestampPair> {
    // SAFETY: the guard is only used for calibration reads (no handle is
    // destroyed or changed) and keeps wgpu-hal's device, hence its queue,
    // alive while they run.
    let hal = unsafe { device.as_hal::<Dx12>() }
        .ok_or_else(|| Error::Internal("wgpu device is no longer a DX12 device".into()))?;
    let m = mask(valid_bits);
    narrowest_of_burst(|| read(&hal, m))
}
