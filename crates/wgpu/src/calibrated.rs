//! Calibrated pairs through wgpu-hal's raw device, on each wgpu backend with
//! a call that reads the GPU and CPU clocks together:
//!
//! - Vulkan (feature `vulkan`; Windows, Linux, Android, FreeBSD):
//!   `vkGetCalibratedTimestamps`, whose deviation the driver states;
//! - DX12 (feature `dx12`; Windows): `ID3D12CommandQueue::GetClockCalibration`;
//! - Metal (feature `metal`; macOS, iOS): `MTLDevice.sampleTimestamps`.
//!
//! D3D12 and Metal state no bound for their pairs, so each call is bracketed
//! between two reads of the CPU clock ([`bracketed_pair`]): the pair's CPU
//! time is the middle of that window and its deviation half the window,
//! which holds whatever the driver does inside the call.
//!
//! A path is compiled where wgpu has its backend (wgpu's own cfgs: Vulkan
//! without MoltenVK, DX12 on Windows, Metal on Apple targets) and its feature
//! is on; otherwise it is `calibrated_none.rs`, whose `Extension` has no
//! values. Where no path applies (GLES, WebGPU, a path compiled out, or
//! its call failing on a device) [`probe`] finds nothing and calibration
//! brackets a timestamp-only submission through wgpu's portable API.

use gpu_counters_hal::{Result, TimestampPair};
use std::ffi::CStr;
use std::sync::OnceLock;

#[cfg(all(
    feature = "vulkan",
    any(
        windows,
        target_os = "linux",
        target_os = "android",
        target_os = "freebsd"
    )
))]
#[path = "calibrated_vulkan.rs"]
mod vulkan;
#[cfg(not(all(
    feature = "vulkan",
    any(
        windows,
        target_os = "linux",
        target_os = "android",
        target_os = "freebsd"
    )
)))]
use none as vulkan;

#[cfg(all(feature = "dx12", windows))]
#[path = "calibrated_dx12.rs"]
mod dx12;
#[cfg(not(all(feature = "dx12", windows)))]
use none as dx12;

#[cfg(all(feature = "metal", target_vendor = "apple"))]
#[path = "calibrated_metal.rs"]
mod metal;
#[cfg(not(all(feature = "metal", target_vendor = "apple")))]
use none as metal;

/// The paths compiled out.
#[path = "calibrated_none.rs"]
mod none;

/// What calibration reads through on one device: an extension or call of
/// the device's backend. A compiled-out path's variant holds a type without
/// values, so it is never built (hence `dead_code`).
#[allow(dead_code)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Extension {
    Vulkan(vulkan::Extension),
    Dx12(dx12::Extension),
    Metal(metal::Extension),
}

impl Extension {
    /// The extension's or call's name.
    pub(crate) fn name(self) -> &'static CStr {
        match self {
            Extension::Vulkan(e) => e.name(),
            Extension::Dx12(e) => e.name(),
            Extension::Metal(e) => e.name(),
        }
    }

    /// The name as a string, for `calibration_source`.
    pub(crate) fn source(self) -> String {
        self.name().to_string_lossy().into_owned()
    }
}

/// What [`probe`] found on a wgpu device.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Probe {
    /// What calibration reads through, if a call works on the device.
    pub(crate) extension: Option<Extension>,
    /// The GPU timestamps' valid bits, where the backend states them.
    pub(crate) valid_bits: Option<u32>,
    /// The GPU timestamp period in ns, where the backend gives it more
    /// precisely than wgpu's `f32` period.
    pub(crate) period_ns: Option<f64>,
}

/// Looks at wgpu's device through wgpu-hal: `None` when it is on no backend
/// with a path compiled in.
pub(crate) fn probe(device: &wgpu::Device) -> Option<Probe> {
    vulkan::probe(device)
        .or_else(|| dx12::probe(device))
        .or_else(|| metal::probe(device))
}

/// What the Vulkan path keeps between reads: its entry point, looked up once.
pub(crate) use vulkan::Loaded;

/// A calibrated pair of wgpu's device through `extension` (what [`probe`]
/// found on this `device`), the best of a short burst of reads; GPU ticks
/// masked to `valid_bits`. `loaded` keeps what the Vulkan path looks up
/// once: it must only ever be given this `device`.
pub(crate) fn read_burst(
    device: &wgpu::Device,
    extension: Extension,
    valid_bits: u32,
    loaded: &OnceLock<Loaded>,
) -> Result<TimestampPair> {
    match extension {
        Extension::Vulkan(e) => vulkan::read_burst(device, e, valid_bits, loaded),
        Extension::Dx12(e) => dx12::read_burst(device, e, valid_bits, loaded),
        Extension::Metal(e) => metal::read_burst(device, e, valid_bits, loaded),
    }
}

/// Opens a device on `adapter` through wgpu-hal with what calibration needs
/// and wgpu's `request_device` leaves off (Vulkan's calibrated-timestamps
/// extension); `Ok(None)`: open it with `request_device`. D3D12's and
/// Metal's calls need nothing enabled.
pub(crate) fn open_with_extension(
    adapter: &wgpu::Adapter,
    desc: &wgpu::DeviceDescriptor<'_>,
) -> std::result::Result<Option<(wgpu::Device, wgpu::Queue)>, wgpu::RequestDeviceError> {
    vulkan::open_with_extension(adapter, desc)
}

/// The pair in the middle of a CPU window `[before, after]` around a call
/// that read `gpu_ticks`: the GPU read happened inside the window, so the
/// middle is at most half the window (rounded up) from it. `None` if the
/// clock went backwards.
#[allow(dead_code)] // unused where no DX12 or Metal path is compiled in
pub(crate) fn bracketed_pair(before: u64, after: u64, gpu_ticks: u64) -> Option<TimestampPair> {
    let window = after.checked_sub(before)?;
    Some(TimestampPair {
        cpu_ns: before + window / 2,
        gpu_ticks,
        max_deviation_ns: window - window / 2,
    })
}

/// All ones in the low `bits` bits: the mask of GPU timestamps' valid bits.
#[allow(dead_code)] // unused where every path is compiled out
pub(crate) fn mask(bits: u32) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

/// The pair with the narrowest window of a burst of reads of a call that
/// states no bound ([`bracketed_pair`]). Fewer reads than Vulkan's 32: a
/// D3D12 or Metal call may enter the kernel.
#[allow(dead_code)] // unused where no DX12 or Metal path is compiled in
pub(crate) fn narrowest_of_burst(
    mut read: impl FnMut() -> Result<TimestampPair>,
) -> Result<TimestampPair> {
    const BURST: usize = 4;
    let mut best = read()?;
    for _ in 1..BURST {
        let pair = read()?;
        if pair.max_deviation_ns < best.max_deviation_ns {
            best = pair;
        }
    }
    Ok(best)
}

#[cfg(test)]
mod tests {
    use super::bracketed_pair;

    #[test]
    fn a_bracketed_pair_is_the_middle_of_its_window() {
        let p = bracketed_pair(1_000, 1_000, 7).unwrap();
        assert_eq!((p.cpu_ns, p.gpu_ticks, p.max_deviation_ns), (1_000, 7, 0));
        // An odd window: the bound rounds up, so both ends are within it.
        let p = bracketed_pair(1_000, 1_005, 9).unwrap();
        assert_eq!((p.cpu_ns, p.max_deviation_ns), (1_002, 3));
        assert!(p.cpu_ns - 1_000 <= p.max_deviation_ns);
        assert!(1_005 - p.cpu_ns <= p.max_deviation_ns);
        let p = bracketed_pair(u64::MAX - 1, u64::MAX, 0).unwrap();
        assert_eq!((p.cpu_ns, p.max_deviation_ns), (u64::MAX - 1, 1));
        assert_eq!(bracketed_pair(10, 9, 0), None);
    }
}
