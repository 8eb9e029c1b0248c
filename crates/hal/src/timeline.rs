//! The timeline of labelled GPU intervals that exporters draw.
//!
//! A [`Timeline`] is a list of frames; each frame holds the CPU window it was
//! submitted and completed in and the GPU intervals (passes or scopes) it ran,
//! with calibrated `CLOCK_MONOTONIC` times, raw ticks and statistics. Nested
//! scopes point at their parent.
//!
//! A [`MultiTimeline`] holds several devices' timelines on the one CPU
//! clock: each device keeps its own frames, queues and calibration summary
//! ([`DeviceTimeline`]), and every interval of every device is a
//! `CLOCK_MONOTONIC` time, so they can be ordered against each other within
//! the two devices' bounds ([`TimelineInterval::ends_before`]).

use crate::{Calibration, CalibrationMethod, CounterResultStatistic};
#[cfg(feature = "serde")]
use serde::{Deserialize, Serialize};

/// What kind of GPU work an interval covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum PassKind {
    /// A compute pass or dispatches.
    Compute,
    /// A render pass.
    Render,
    /// A transfer (blit) pass.
    Blit,
    /// A user scope spanning other work.
    Scope,
}

impl PassKind {
    /// The kind's name: `compute`, `render`, `blit` or `scope`.
    pub fn name(self) -> &'static str {
        match self {
            PassKind::Compute => "compute",
            PassKind::Render => "render",
            PassKind::Blit => "blit",
            PassKind::Scope => "scope",
        }
    }
}

/// One labelled GPU interval.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
pub struct TimelineInterval {
    /// The user's label.
    pub label: String,
    /// What kind of work it covers.
    pub kind: PassKind,
    /// The queue it ran on (one trace track per queue).
    pub queue: String,
    /// Nesting depth: 0 for top-level intervals.
    pub depth: u32,
    /// Index of the enclosing interval in the same frame.
    pub parent: Option<usize>,
    /// The CPU thread that recorded it, if known.
    pub thread: Option<String>,
    /// Calibrated start, `CLOCK_MONOTONIC` nanoseconds.
    pub start_ns: u64,
    /// Calibrated end, `CLOCK_MONOTONIC` nanoseconds.
    pub end_ns: u64,
    /// Raw GPU ticks at the start.
    pub start_ticks: u64,
    /// Raw GPU ticks at the end.
    pub end_ticks: u64,
    /// Bound on the calibration error of `start_ns` and `end_ns`.
    pub error_bound_ns: u64,
    /// What the GPU counted in the interval, where statistics were sampled.
    pub statistics: Option<CounterResultStatistic>,
}

impl TimelineInterval {
    /// `end_ns - start_ns`.
    pub fn duration_ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.start_ns)
    }

    /// Whether this interval may have ended before `later` started, as the
    /// two calibrations allow: its earliest possible end (`end_ns -
    /// error_bound_ns`) is at most `later`'s latest possible start
    /// (`start_ns + error_bound_ns`). Work that the host ordered (it waited
    /// for this interval's work before submitting `later`'s, on the same or
    /// another device) always passes; a `false` means the timeline shows
    /// the two out of order by more than both bounds together.
    pub fn ends_before(&self, later: &TimelineInterval) -> bool {
        self.end_ns.saturating_sub(self.error_bound_ns)
            <= later.start_ns.saturating_add(later.error_bound_ns)
    }
}

/// One frame: a submission and the intervals it ran.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
pub struct TimelineFrame {
    /// Frame number.
    pub index: u64,
    /// CPU time just before the frame's submission.
    pub cpu_submit_ns: u64,
    /// CPU time just after the frame was seen complete.
    pub cpu_complete_ns: u64,
    /// The frame's intervals, parents before children.
    pub intervals: Vec<TimelineInterval>,
}

/// Frames of GPU intervals on one device.
#[derive(Debug, Clone, PartialEq, Default)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
pub struct Timeline {
    /// The device's name.
    pub device: String,
    /// The frames, oldest first.
    pub frames: Vec<TimelineFrame>,
}

/// An interval that lies outside the CPU window of its frame by more than
/// its error bound: [`Timeline::outside_cpu_windows`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
pub struct WindowViolation {
    /// The frame's number.
    pub frame: u64,
    /// The interval's index in its frame.
    pub interval: usize,
    /// The interval's label.
    pub label: String,
    /// By how many nanoseconds, beyond the bound, it starts before the
    /// frame's CPU submit time (0 if it does not).
    pub early_ns: u64,
    /// By how many nanoseconds, beyond the bound, it ends after the frame's
    /// CPU complete time (0 if it does not).
    pub late_ns: u64,
}

impl Timeline {
    /// The intervals that do not lie inside their frame's CPU window
    /// (`cpu_submit_ns - error_bound_ns ..= cpu_complete_ns +
    /// error_bound_ns`): GPU work runs after its submission and before the
    /// host sees it complete, so a calibration that holds its bound leaves
    /// this empty.
    pub fn outside_cpu_windows(&self) -> Vec<WindowViolation> {
        let mut out = Vec::new();
        for frame in &self.frames {
            for (n, i) in frame.intervals.iter().enumerate() {
                let early = frame
                    .cpu_submit_ns
                    .saturating_sub(i.start_ns.saturating_add(i.error_bound_ns));
                let late = i
                    .end_ns
                    .saturating_sub(i.error_bound_ns)
                    .saturating_sub(frame.cpu_complete_ns);
                if early > 0 || late > 0 {
                    out.push(WindowViolation {
                        frame: frame.index,
                        interval: n,
                        label: i.label.clone(),
                        early_ns: early,
                        late_ns: late,
                    });
                }
            }
        }
        out
    }

    /// Earliest start over all frames (the CPU submit time if earlier).
    pub fn start_ns(&self) -> Option<u64> {
        self.frames
            .iter()
            .flat_map(|f| {
                std::iter::once(f.cpu_submit_ns).chain(f.intervals.iter().map(|i| i.start_ns))
            })
            .min()
    }

    /// Latest end over all frames.
    pub fn end_ns(&self) -> Option<u64> {
        self.frames
            .iter()
            .flat_map(|f| {
                std::iter::once(f.cpu_complete_ns).chain(f.intervals.iter().map(|i| i.end_ns))
            })
            .max()
    }
}

/// What a device's calibration was when its timeline was taken: how its
/// GPU clock maps onto `CLOCK_MONOTONIC`, and the bound of that mapping.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
pub struct ClockSummary {
    /// How the GPU clock is tied to the CPU clock.
    pub method: CalibrationMethod,
    /// The bound for a timestamp taken at the newest anchor
    /// ([`Calibration::error_bound_ns`]); intervals carry their own.
    pub error_bound_ns: u64,
    /// Nanoseconds per GPU tick, as measured between anchors.
    pub rate_ns_per_tick: f64,
    /// Anchors (calibration pairs) the fit holds.
    pub anchors: usize,
}

impl ClockSummary {
    /// The summary of `calibration`.
    pub fn of(calibration: &Calibration) -> Self {
        Self {
            method: calibration.method(),
            error_bound_ns: calibration.error_bound_ns(),
            rate_ns_per_tick: calibration.rate_ns_per_tick(),
            anchors: calibration.anchors().count(),
        }
    }
}

/// One device's part of a [`MultiTimeline`].
#[derive(Debug, Clone, PartialEq, Default)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
pub struct DeviceTimeline {
    /// The device's frames; `timeline.device` is its name (two logical
    /// devices of one GPU may share it: the device's position in the
    /// [`MultiTimeline`] tells them apart).
    pub timeline: Timeline,
    /// Its calibration, where known.
    pub clock: Option<ClockSummary>,
}

/// Several devices' timelines on the one CPU clock (`CLOCK_MONOTONIC`):
/// one entry per device, in the order they were added; a device's id is
/// its position.
#[derive(Debug, Clone, PartialEq, Default)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
pub struct MultiTimeline {
    /// The devices, by id.
    pub devices: Vec<DeviceTimeline>,
}

/// Where an interval of a [`MultiTimeline`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IntervalRef {
    /// The device's id (its position in [`MultiTimeline::devices`]).
    pub device: usize,
    /// The frame's position in that device's frames.
    pub frame: usize,
    /// The interval's position in that frame.
    pub interval: usize,
}

impl MultiTimeline {
    /// An empty timeline.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a device's timeline; returns its id.
    pub fn push(&mut self, timeline: Timeline, clock: Option<ClockSummary>) -> usize {
        self.devices.push(DeviceTimeline { timeline, clock });
        self.devices.len() - 1
    }

    /// The name a trace gives device `id`: `<id>: <device name>`, unique
    /// even for two logical devices of one GPU. `None` for an id with no
    /// device.
    pub fn device_label(&self, id: usize) -> Option<String> {
        self.devices
            .get(id)
            .map(|d| format!("{id}: {}", d.timeline.device))
    }

    /// The interval `r` points at, if there is one.
    pub fn interval(&self, r: IntervalRef) -> Option<&TimelineInterval> {
        self.devices
            .get(r.device)?
            .timeline
            .frames
            .get(r.frame)?
            .intervals
            .get(r.interval)
    }

    /// Every interval of every device, by calibrated start time (then by
    /// device, frame and position, so parents stay before their children):
    /// the one CPU timeline.
    pub fn intervals_by_start(&self) -> Vec<IntervalRef> {
        let mut out: Vec<(u64, IntervalRef)> = Vec::new();
        for (d, dev) in self.devices.iter().enumerate() {
            for (f, frame) in dev.timeline.frames.iter().enumerate() {
                for (i, interval) in frame.intervals.iter().enumerate() {
                    out.push((
                        interval.start_ns,
                        IntervalRef {
                            device: d,
                            frame: f,
                            interval: i,
                        },
                    ));
                }
            }
        }
        out.sort_by_key(|&(t, r)| (t, r.device, r.frame, r.interval));
        out.into_iter().map(|(_, r)| r).collect()
    }

    /// Per device, its intervals outside their frames' CPU windows beyond
    /// their bounds ([`Timeline::outside_cpu_windows`]), as (device id,
    /// violation).
    pub fn outside_cpu_windows(&self) -> Vec<(usize, WindowViolation)> {
        self.devices
            .iter()
            .enumerate()
            .flat_map(|(d, dev)| {
                dev.timeline
                    .outside_cpu_windows()
                    .into_iter()
                    .map(move |v| (d, v))
            })
            .collect()
    }

    /// Earliest start over every device.
    pub fn start_ns(&self) -> Option<u64> {
        self.devices
            .iter()
            .filter_map(|d| d.timeline.start_ns())
            .min()
    }

    /// Latest end over every device.
    pub fn end_ns(&self) -> Option<u64> {
        self.devices
            .iter()
            .filter_map(|d| d.timeline.end_ns())
            .max()
    }

    /// One [`Timeline`] holding every device's frames, for exporters that
    /// draw one device (CSV, SVG): each interval's queue is prefixed with
    /// its device's label (`0: llvmpipe graphics`), frames are ordered by
    /// CPU submit time (then device), and the device name lists the
    /// devices' labels.
    pub fn flattened(&self) -> Timeline {
        let mut frames: Vec<(u64, usize, TimelineFrame)> = Vec::new();
        let mut names = Vec::new();
        for (d, dev) in self.devices.iter().enumerate() {
            let label = format!("{d}: {}", dev.timeline.device);
            for frame in &dev.timeline.frames {
                let mut frame = frame.clone();
                for i in &mut frame.intervals {
                    i.queue = format!("{label} {}", i.queue);
                }
                frames.push((frame.cpu_submit_ns, d, frame));
            }
            names.push(label);
        }
        frames.sort_by_key(|(t, d, f)| (*t, *d, f.index));
        Timeline {
            device: names.join(", "),
            frames: frames.into_iter().map(|(_, _, f)| f).collect(),
        }
    }
}
