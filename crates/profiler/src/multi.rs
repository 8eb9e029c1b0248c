//! Several devices in one timeline: one [`Profiler`] per device, each with
//! its own ring, calibration and bound, their frames gathered into one
//! [`MultiTimeline`] on the CPU clock.
//!
//! ```no_run
//! # use gpu_counters_hal::fake::FakeDevice;
//! # use gpu_counters_hal::timeline::{MultiTimeline, PassKind};
//! # use gpu_counters_profiler::{export, Profiler, ProfilerOptions};
//! let (a, b) = (FakeDevice::new("a", 64)?, FakeDevice::new("b", 64)?);
//! let (pa, pb) = (Profiler::new(&a, ProfilerOptions::default())?,
//!                 Profiler::new(&b, ProfilerOptions::default())?);
//! // ... frames on each device, collected into `ra` and `rb` ...
//! # let (ra, rb) = (Vec::new(), Vec::new());
//! let mut timeline = MultiTimeline::new();
//! pa.add_to(&mut timeline, &ra);
//! pb.add_to(&mut timeline, &rb);
//! export::write_chrome_trace_multi(&timeline, &mut std::fs::File::create("trace.json")?)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use crate::{FrameResult, Profiler};
use gpu_counters_hal::backend::BackendDevice;
use gpu_counters_hal::timeline::{ClockSummary, DeviceTimeline, MultiTimeline};

impl<D: BackendDevice> Profiler<D> {
    /// The frames' timeline with this profiler's calibration summary: one
    /// device's part of a [`MultiTimeline`].
    pub fn device_timeline(&self, frames: &[FrameResult]) -> DeviceTimeline {
        DeviceTimeline {
            timeline: self.timeline(frames),
            clock: Some(ClockSummary::of(&self.calibration())),
        }
    }

    /// Adds the frames, as this profiler's device, to `timeline`; returns
    /// the device's id there.
    pub fn add_to(&self, timeline: &mut MultiTimeline, frames: &[FrameResult]) -> usize {
        let d = self.device_timeline(frames);
        timeline.push(d.timeline, d.clock)
    }
}
