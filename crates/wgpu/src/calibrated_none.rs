//! A calibration path compiled out (its backend is not in this build of
//! wgpu, or its feature is off): its `Extension` has no values, so nothing
//! reaches its reads, and probing finds nothing.

#![allow(dead_code)]

use gpu_counters_hal::{Result, TimestampPair};
use std::ffi::CStr;
use std::sync::OnceLock;

/// No extension or call: no values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Extension {}

impl Extension {
    pub(crate) fn name(self) -> &'static CStr {
        match self {}
    }
}

/// Nothing to keep between reads.
#[derive(Debug, Clone)]
pub(crate) enum Loaded {}

/// Nothing is known about the device through this path.
pub(crate) fn probe(_device: &wgpu::Device) -> Option<super::Probe> {
    None
}

/// Unreachable: there is no `Extension` to read through.
pub(crate) fn read_burst(
    _device: &wgpu::Device,
    extension: Extension,
    _valid_bits: u32,
    _loaded: &OnceLock<super::Loaded>,
) -> Result<TimestampPair> {
    match extension {}
}

/// Never opens a device: the caller falls back to `request_device`.
pub(crate) fn open_with_extension(
    _adapter: &wgpu::Adapter,
    _desc: &wgpu::DeviceDescriptor<'_>,
) -> std::result::Result<Option<(wgpu::Device, wgpu::Queue)>, wgpu::RequestDeviceError> {
    Ok(None)
}
