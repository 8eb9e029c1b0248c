//! Profiler layer of gpu-counters: scopes, frames in flight, a calibrated
//! timeline, and exporters that turn a [`gpu_counters_hal::timeline::Timeline`]
//! into a Chrome trace (Perfetto UI, `chrome://tracing`), CSV, or an SVG
//! picture.
//!
//! A [`Profiler`] keeps a ring of counter sample buffers, one slot per frame
//! in flight. Each frame, wrap passes and command ranges in nested, labelled
//! [`Scope`]s from any number of threads, submit your command buffers as
//! usual, end the frame, and [`Profiler::collect`] the frames the GPU has
//! finished: a tree of scopes per frame with calibrated CPU-clock
//! (`CLOCK_MONOTONIC`) start and end nanoseconds, their error bound, and
//! pipeline statistics. Slots are reset and reused, so a steady state
//! allocates no GPU objects. When the ring is full, the profiler waits, grows
//! or drops, as [`WhenFull`] says; a dropped scope is always counted
//! ([`DropCounts`]), never lost silently. A frame that is never ended (leaked)
//! is abandoned once the ring comes back to its slot, its scopes counted
//! ([`Profiler`] states the rule), so it holds back no later frame.
//!
//! A backend whose passes write their own start and end timestamps (wgpu's
//! profiled passes) takes [`Frame::pass_scope`] instead of a [`Scope`]: the
//! scope is begun and ended at once, and the pass writes its two samples.
//!
//! ```no_run
//! use gpu_counters_hal::timeline::PassKind;
//! use gpu_counters_profiler::{export, Profiler, ProfilerOptions};
//! use gpu_counters_vulkan::{CommandBuffer, Device, InstanceOptions};
//!
//! let device = Device::open_default(&InstanceOptions::default())?;
//! let profiler = Profiler::new(&device, ProfilerOptions::default())?;
//! let mut results = Vec::new();
//! for _ in 0..10 {
//!     let frame = profiler.begin_frame()?;
//!     let mut cmd = CommandBuffer::new(&device)?;
//!     let outer = frame.scope(&mut cmd, "frame", PassKind::Scope)?;
//!     let pass = frame.scope(&mut cmd, "shadows", PassKind::Render)?;
//!     // ... record the pass into cmd.raw() ...
//!     pass.end(&mut cmd)?;
//!     outer.end(&mut cmd)?;
//!     let submission = cmd.commit()?;
//!     profiler.end_frame(frame, [&submission])?;
//!     submission.wait()?;
//!     results.extend(profiler.collect()?);
//! }
//! results.extend(profiler.wait_collect_all(std::time::Duration::from_secs(1))?);
//! let timeline = profiler.timeline(&results);
//! export::write_chrome_trace(&timeline, &mut std::fs::File::create("trace.json")?)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![warn(missing_docs)]
// Only the Tracy client layer (feature `tracy`) calls C, and a scope's
// record cell (`store::RecordCell`) is written without a lock by the one
// thread that owns its id.
#![deny(unsafe_code)]

mod error;
pub mod export;
mod frame;
mod multi;
mod profiler;
mod result;
mod shared_str;
mod stack;
mod store;

pub use error::{ProfilerError, Result};
pub use frame::{Frame, PassScope, Scope};
pub use profiler::{
    FrameSink, Profiler, ProfilerOptions, WhenFull, MAX_FRAMES_IN_FLIGHT, MAX_RING_SCOPES,
};
pub use result::{to_timeline, DropCounts, FrameResult, ScopeResult};
pub use shared_str::SharedStr;
pub use store::{Recorder, Submission};

/// Locks `m`, whether or not a thread panicked holding it.
pub(crate) fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // The profiler's critical sections run no user code; state stays
    // consistent even if a panic interrupted one.
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
