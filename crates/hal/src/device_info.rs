use crate::{CalibrationMethod, CounterSamplingPoint, CounterSet};
#[cfg(feature = "serde")]
use serde::{Deserialize, Serialize};

/// The GPU API a device is reached through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum BackendKind {
    /// Vulkan, through `ash`.
    Vulkan,
    /// CUDA.
    Cuda,
    /// wgpu.
    Wgpu,
    /// The CPU-only fake backend of tests ([`crate::fake`]).
    Fake,
}

/// What kind of device it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum DeviceType {
    /// A GPU separate from the CPU.
    DiscreteGpu,
    /// A GPU sharing the CPU's package and memory.
    IntegratedGpu,
    /// A virtual GPU.
    VirtualGpu,
    /// A software rasterizer running on the CPU (lavapipe, SwiftShader).
    Cpu,
    /// Anything else.
    Other,
}

impl DeviceType {
    /// Whether this is real GPU hardware rather than a CPU implementation.
    pub fn is_hardware(self) -> bool {
        matches!(
            self,
            DeviceType::DiscreteGpu | DeviceType::IntegratedGpu | DeviceType::VirtualGpu
        )
    }
}

/// Everything gpu-counters reports about a device. Its JSON form is the one
/// `gpu-counters devices --json` prints.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
pub struct DeviceInfo {
    /// Position in the backend's device list.
    pub index: usize,
    /// The driver's name for the device.
    pub name: String,
    /// The backend it is reached through.
    pub backend: BackendKind,
    /// What kind of device it is.
    pub device_type: DeviceType,
    /// Nanoseconds per GPU timestamp tick.
    pub timestamp_period_ns: f64,
    /// Valid bits of a timestamp on the queue gpu-counters uses.
    pub timestamp_valid_bits: u32,
    /// How GPU timestamps are mapped onto the CPU clock.
    pub calibration: CalibrationMethod,
    /// Through what the (CPU, GPU) pairs are read, in the backend's terms
    /// (`VK_EXT_calibrated_timestamps`, `bracketed submission`, ...).
    pub calibration_source: String,
    /// The counter sets the device really offers.
    pub counter_sets: Vec<CounterSet>,
    /// Where the device can sample.
    pub sampling_points: Vec<CounterSamplingPoint>,
    /// The driver's name and version, for reports.
    pub driver: String,
    /// The API version the device supports, as `major.minor.patch`.
    pub api_version: String,
    /// The most samples one counter sample buffer may hold.
    pub max_sample_count: u32,
}

impl DeviceInfo {
    /// The counter set `set`, if the device offers it.
    pub fn counter_set(&self, set: crate::CommonCounterSet) -> Option<&CounterSet> {
        self.counter_sets.iter().find(|s| s.set == set)
    }

    /// Whether the device can sample at `point` (Metal's `supportsCounterSampling`).
    pub fn supports_counter_sampling(&self, point: CounterSamplingPoint) -> bool {
        self.sampling_points.contains(&point)
    }
}
