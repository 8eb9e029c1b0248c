//! GPU counter sampling after Apple Metal's counter API, on Vulkan, wgpu and
//! CUDA: counter sample buffers and Metal 4 counter heaps, sampled at pass
//! boundaries and between passes, resolved on the CPU into Metal's result
//! structs with a typed status per sample (never a silent zero), and GPU
//! timestamps mapped onto the CPU's monotonic clock with a stated bound.
//! Above them: a profiler of nested scopes over frames in flight, and
//! exports (Chrome trace, CSV, SVG, Perfetto, Tracy).
//!
//! This is the crate an application adds. It re-exports the model types
//! (counter sets, descriptors, results and statuses, calibration, errors),
//! the [`Profiler`] and its [`export`]s, and each backend its features turn
//! on, as a module. No backend is on by default:
//!
//! | Cargo line | adds |
//! |---|---|
//! | `gpu-counters = { version = "0.1", features = ["vulkan"] }` | `gpu_counters::vulkan`: any Vulkan 1.3 driver, through ash |
//! | `gpu-counters = { version = "0.1", features = ["wgpu"] }` | `gpu_counters::wgpu`: the application's own wgpu device and queue, and `gpu_counters::wgpu::Profiler`, a drop-in for wgpu-profiler |
//! | `gpu-counters = { version = "0.1", features = ["cuda"] }` | `gpu_counters::cuda`: a cudarc context and stream (the driver and CUPTI are loaded at run time) |
//! | `gpu-counters = { version = "0.1", features = ["chrome"] }` | `export::chrome`, `export::write_chrome_trace`: Chrome trace event JSON (builds serde_json) |
//! | `gpu-counters = { version = "0.1", features = ["csv"] }` | `export::csv`, `export::write_csv` (builds the csv crate) |
//! | `gpu-counters = { version = "0.1", features = ["serde"] }` | `Serialize`/`Deserialize` on the model types and results (builds serde's derive) |
//! | `gpu-counters = { version = "0.1", features = ["perfetto"] }` | `export::perfetto`: Perfetto's protobuf trace |
//! | `gpu-counters = { version = "0.1", features = ["tracy"] }` | `Profiler::stream_to_tracy`: frames into a running Tracy |
//!
//! Each backend's device, sample buffer, heap, recorder and submission has
//! the same names (`Device`, `CounterSampleBuffer`, `CounterHeap`,
//! `CommandBuffer` on Vulkan or `Recorder` on wgpu and CUDA, `Submission`)
//! and the same methods for the same operation, callable with no trait in
//! scope.
//!
//! Timing a compute pass on Vulkan, calibrated onto the CPU clock:
//!
#![cfg_attr(feature = "vulkan", doc = "```no_run")]
#![cfg_attr(not(feature = "vulkan"), doc = "```ignore")]
//! use gpu_counters::vulkan::{
//!     CommandBuffer, ComputePassDescriptor, Device, InstanceOptions, PassSampleBufferAttachment,
//! };
//! use gpu_counters::{CommonCounterSet, CounterSampleBufferDescriptor, SampleValue};
//!
//! let device = Device::open_default(&InstanceOptions::default())?;
//! let times = device.make_counter_sample_buffer(&CounterSampleBufferDescriptor::new(
//!     CommonCounterSet::Timestamp,
//!     "pass times",
//!     2,
//! ))?;
//! let mut cmd = CommandBuffer::new(&device)?;
//! let pass = cmd.compute_encoder(&ComputePassDescriptor {
//!     sample_buffer_attachments: &[PassSampleBufferAttachment {
//!         sample_buffer: &times,
//!         start_of_encoder_sample_index: Some(0),
//!         end_of_encoder_sample_index: Some(1),
//!     }],
//! })?;
//! // ... record dispatches into pass.raw() with ash ...
//! pass.end_encoding()?;
//! cmd.commit()?.wait()?;
//! let resolved = times.resolve_counter_range(0..2)?;
//! let calibration = device.calibration()?;
//! match calibration.duration(&resolved, 0, 1)? {
//!     SampleValue::Value(d) => println!("{} ns ± {} ns", d.ns, d.error_bound_ns),
//!     lacking => println!("no duration: {lacking:?}"),
//! }
//! # Ok::<(), gpu_counters::Error>(())
//! ```
//!
//! (The example is compiled when the `vulkan` feature is on.)

#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub use gpu_counters_hal::timeline;
pub use gpu_counters_hal::{
    cpu_monotonic_ns, BackendKind, CalibratedDuration, CalibratedTime, Calibration,
    CalibrationMethod, CommonCounter, CommonCounterSet, ConversionError, Converter,
    CounterErrorKind, CounterHeapDescriptor, CounterHeapType, CounterResultStageUtilization,
    CounterResultStatistic, CounterResultTimestamp, CounterSampleBufferDescriptor,
    CounterSamplingPoint, CounterSet, DeviceInfo, DeviceType, Error, InvalidInput, RenderStage,
    ResolvedCounters, ResolvedTimestamps, Result, SampleStatus, SampleValue, SpanEnd, StorageMode,
    TimestampGranularity, TimestampPair, COUNTER_ERROR_VALUE, REFIT_INTERVAL_NS,
};
pub use gpu_counters_profiler::{
    export, to_timeline, DropCounts, Frame, FrameResult, FrameSink, PassScope, Profiler,
    ProfilerError, ProfilerOptions, Scope, ScopeResult, SharedStr, WhenFull, MAX_FRAMES_IN_FLIGHT,
    MAX_RING_SCOPES,
};

/// The Vulkan backend (feature `vulkan`): the `gpu-counters-vulkan` crate.
#[cfg(feature = "vulkan")]
pub use gpu_counters_vulkan as vulkan;

/// The CUDA backend (feature `cuda`): the `gpu-counters-cuda` crate.
#[cfg(feature = "cuda")]
pub use gpu_counters_cuda as cuda;

#[cfg(feature = "wgpu")]
pub mod wgpu;

// README.md's Vulkan example, compiled with the crate's doc tests so that it
// stays true.
#[cfg(all(doctest, feature = "vulkan"))]
#[doc = include_str!("../../../README.md")]
struct ReadmeDoctests;
