//! The Vulkan backend of gpu-counters, through `ash`.
//!
//! Metal's counter-sampling model on any Vulkan 1.3 driver: open a [`Device`]
//! (or wrap your own with [`Device::from_raw`]), make
//! [`CounterSampleBuffer`]s and [`CounterHeap`]s, sample them from compute,
//! render and blit encoders recorded into a [`CommandBuffer`] (yours, through
//! [`CommandBuffer::from_raw`], or one gpu-counters allocates), and resolve on
//! the CPU or on the GPU into Metal's result structs.
//!
//! ```no_run
//! use gpu_counters_hal::{CommonCounterSet, CounterSampleBufferDescriptor, CounterResultTimestamp};
//! use gpu_counters_vulkan::{CommandBuffer, ComputePassDescriptor, Device, InstanceOptions, PassSampleBufferAttachment};
//!
//! let device = Device::open_default(&InstanceOptions::default())?;
//! let timestamps = device.make_counter_sample_buffer(
//!     &CounterSampleBufferDescriptor::new(CommonCounterSet::Timestamp, "pass times", 2))?;
//! let mut cmd = CommandBuffer::new(&device)?;
//! let pass = cmd.compute_encoder(&ComputePassDescriptor {
//!     sample_buffer_attachments: &[PassSampleBufferAttachment {
//!         sample_buffer: &timestamps,
//!         start_of_encoder_sample_index: Some(0),
//!         end_of_encoder_sample_index: Some(1),
//!     }],
//! })?;
//! // ... record dispatches into pass.raw() with ash ...
//! pass.end_encoding()?;
//! cmd.commit()?.wait()?;
//! let resolved = timestamps.resolve_counter_range(0..2)?;
//! let calibration = device.calibration()?;
//! for t in resolved.timestamps()? {
//!     println!("{} ns", calibration.to_cpu_ns(t.timestamp)?.ns);
//! }
//! # Ok::<(), gpu_counters_hal::Error>(())
//! ```

#![warn(missing_docs)]

mod backend;
mod buffer;
mod calibration;
mod clock;
mod command;
mod descriptors;
mod device;
mod encoder;
mod gpu_resolve;
mod instance;
mod pass;
mod pass_state;
mod query;
mod recording;
mod resolve;
mod sample_buffer;
mod samples;
mod util;
mod writes;

pub use ash;
pub use backend::{Marker, Vulkan};
pub use buffer::{BufferRef, GpuBuffer, MemoryLocation};
pub use clock::{calibration_extension, CalibratedClock, CALIBRATION_BURST};
pub use command::{CommandBuffer, Completion, Submission};
pub use descriptors::{
    BlitPassDescriptor, ComputePassDescriptor, PassSampleBufferAttachment, RenderPassDescriptor,
    RenderPassSampleBufferAttachment, RenderTarget,
};
pub use device::{Device, EnabledFeatures};
pub use encoder::{BlitEncoder, ComputeEncoder, RenderEncoder};
pub use instance::{
    CalibratedTimestamps, Instance, InstanceOptions, MAX_SAMPLE_COUNT, VALIDATION_ENV,
    VALIDATION_LAYER,
};
pub use resolve::compile_wgsl;
pub use sample_buffer::{CounterHeap, CounterSampleBuffer};
pub use samples::VK_STATISTICS;
pub use util::map_vk_error;
