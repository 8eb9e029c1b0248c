//! The backend authors' crate of gpu-counters (as `wgpu-hal` is to `wgpu`):
//! applications depend on the `gpu-counters` crate, which re-exports the
//! model types from here.
//!
//! This crate holds everything that a backend (Vulkan, CUDA, wgpu) shares,
//! and no GPU API: the counter sets a device can offer
//! ([`CommonCounterSet`], [`CommonCounter`]), the sampling points
//! ([`CounterSamplingPoint`]), the descriptors of counter sample buffers and
//! Metal 4 counter heaps, the packed result structs with Metal's layout and the
//! error sentinel [`COUNTER_ERROR_VALUE`], resolved data with a typed view per
//! sample ([`ResolvedCounters`], [`SampleValue`]), the mapping of GPU ticks
//! onto the CPU clock ([`Calibration`]), the timeline of labelled intervals that
//! exporters draw ([`timeline`]), and the errors ([`Error`]). It also holds
//! what every backend shares: the backend interface ([`backend`]), the
//! per-sample bookkeeping and CPU resolve ([`bookkeeping`]), sample buffers,
//! heaps and completion markers written once over a backend's storage
//! ([`storage`], [`marker`]), and a CPU-only fake backend for tests of the
//! layers above ([`fake`]).
//!
//! The names follow Apple's Metal counter-sampling API so that Metal code ports
//! line for line; `docs/ARCHITECTURE.md` in the repository has the mapping.

#![warn(missing_docs)]

pub mod backend;
pub mod bookkeeping;
mod calibration;
pub mod clock;
mod counters;
mod descriptors;
mod device_id;
mod device_info;
mod error;
pub mod fake;
pub mod marker;
mod results;
pub mod storage;
pub mod timeline;

pub use backend::{
    Backend, BackendDevice, BackendHeap, BackendMarker, BackendRecorder, BackendSampleBuffer,
    BackendSubmission, ScopeStack,
};
pub use calibration::{
    CalibratedDuration, CalibratedTime, Calibration, CalibrationMethod, ConversionError, Converter,
    TimestampPair, REFIT_INTERVAL_NS,
};
pub use clock::cpu_monotonic_ns;
pub use counters::{CommonCounter, CommonCounterSet, CounterSamplingPoint, CounterSet};
pub use descriptors::{
    CounterHeapDescriptor, CounterHeapType, CounterSampleBufferDescriptor, RenderStage,
    StorageMode, TimestampGranularity,
};
pub use device_id::DeviceId;
pub use device_info::{BackendKind, DeviceInfo, DeviceType};
pub use error::{CounterErrorKind, Error, InvalidInput, Result};
pub use results::{
    CounterResultStageUtilization, CounterResultStatistic, CounterResultTimestamp,
    ResolvedCounters, ResolvedTimestamps, SampleStatus, SampleValue, SpanEnd, COUNTER_ERROR_VALUE,
};
