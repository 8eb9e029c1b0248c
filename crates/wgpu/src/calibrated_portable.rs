//! The portable build (feature `vulkan` off): no wgpu-hal, so no calibrated
//! timestamps; calibration always brackets a submission. The same items as
//! `calibrated.rs`, with an `Extension` that has no values.

use gpu_counters_core::{Result, TimestampPair};
use std::ffi::CStr;

/// No calibrated-timestamps extension is reachable without wgpu-hal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Extension {}

impl Extension {
    pub(crate) fn name(self) -> &'static CStr {
        match self {}
    }

    pub(crate) fn source(self) -> String {
        match self {}
    }
}

/// As in `calibrated.rs`; never built here.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Probe {
    pub(crate) extension: Option<Extension>,
    pub(crate) valid_bits: Option<u32>,
}

/// Without wgpu-hal nothing is known about the device beyond wgpu's API.
pub(crate) fn probe(_device: &wgpu::Device) -> Option<Probe> {
    None
}

/// No entry point to keep.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Loaded {}

/// Unreachable: there is no `Extension` to read through.
pub(crate) fn read_burst(
    _device: &wgpu::Device,
    extension: Extension,
    _valid_bits: u32,
    _loaded: &std::sync::OnceLock<Loaded>,
) -> Result<TimestampPair> {
    match extension {}
}

/// Never opens through wgpu-hal: the caller falls back to `request_device`.
pub(crate) fn open_with_extension(
    _adapter: &wgpu::Adapter,
    _desc: &wgpu::DeviceDescriptor<'_>,
) -> std::result::Result<Option<(wgpu::Device, wgpu::Queue)>, wgpu::RequestDeviceError> {
    Ok(None)
}
