//! Timelines into the Tracy profiler: what to hand to Tracy's client for
//! each frame, as a plain sequence of [`TracyCall`]s.
//!
//! [`TracyPlanner`] is pure: given a frame, the device's calibration and the
//! CPU time "now", it returns the calls in the order Tracy needs them. The
//! feature `tracy` adds `TracySink` (in `export::tracy_client`),
//! a thin layer that makes each call on a running Tracy client
//! (`tracy-client`, and `tracy-client-sys` where the safe API has no call),
//! and `Profiler::stream_to_tracy`, which
//! streams every frame a profiler collects, on any backend.
//!
//! # What Tracy gets
//!
//! - **One GPU context per device and queue**, named `<device> / <queue>`
//!   (and `<device> / <queue> (overlap N)` for intervals that overlap
//!   without nesting, which Tracy's zones cannot show on one context),
//!   of the backend's context type (Vulkan, CUDA, WebGPU for wgpu, Custom
//!   otherwise), created with Tracy's **calibration flag** from the
//!   calibration's latest (CPU, GPU) pair carried forward to the moment of
//!   the call: Tracy stamps its own CPU time when the context is created, so
//!   the GPU time handed to it is the GPU time of that moment. Contexts take
//!   ids from 254 down, clear of `tracy-client`'s own, which count up from 0.
//! - **Re-synced as the calibration refits**: when the calibration's latest
//!   pair changes, every context of the device gets a calibration message
//!   (`___tracy_emit_gpu_calibration`) with the GPU time of "now" and the
//!   CPU nanoseconds since the context's previous message; Tracy then maps
//!   GPU ticks through the latest anchor with the measured rate. (Tracy's
//!   time-sync message only moves uncalibrated contexts.)
//! - **Spans** as GPU zones in nesting order: outer begin, inner begin, inner
//!   end, outer end; each begin and end is followed at once by its GPU time,
//!   so a query id is free again immediately and 65536 of them never run
//!   out. The GPU times are the interval's **raw ticks**, unwrapped onto one
//!   line (the first anchor's ticks, less its top bit, plus the wrapped
//!   distance from it), so Tracy converts exactly the ticks the GPU wrote.
//!   A zone's source location names the label (zone name), the kind
//!   (function) and `gpu-counters <queue>` (file).
//! - **Plots**: each statistic of each scope, `<device> / <queue>: <label>
//!   <statistic>` (a point per scope, so one series per pass over frames;
//!   a plot starts where its value is first not 0, and
//!   [`COUNTER_ERROR_VALUE`](gpu_counters_hal::COUNTER_ERROR_VALUE), not
//!   counted, is left out), and each context's **error bound**,
//!   `<device> / <queue>: error bound ns`, a point per frame (its largest
//!   bound). Tracy stamps plot points when they are sent, not at GPU time.
//!   At most [`MAX_PLOTS`] plot names are made; points of further names are
//!   counted in [`TracyPlanner::skipped_plot_points`].
//!
//! Tracy has no past-time CPU zones, so the CPU submit→complete window is
//! not sent.
//!
//! # Names and memory
//!
//! Every name handed to Tracy (zone names, source-location files, context
//! names, plot names) is at most [`MAX_NAME_BYTES`] bytes: a longer one is
//! cut at the last character boundary within it, and each cut is counted
//! in [`TracyPlanner::truncated_names`]. Tracy's client stores a zone's
//! name, function and file in one source location whose size is a `u16`
//! (65,535 bytes), and does not check it in release builds; the cut keeps
//! every source location within it. A planner keeps at most [`MAX_PLOTS`]
//! plot names and 126 contexts, and one entry per distinct device and
//! queue name it was given.

use super::lanes::{frame_queues, queue_items, LaneEvent, Lanes};
use gpu_counters_hal::timeline::{TimelineFrame, TimelineInterval};
use gpu_counters_hal::{BackendKind, Calibration, TimestampPair};

/// Most plot names a planner makes (each is leaked by Tracy's client).
pub const MAX_PLOTS: usize = 4096;

/// Longest name handed to Tracy, in bytes: zone names, source-location
/// files, context names and plot names are cut to it (see the [module
/// documentation](self)). With a kind's name (at most 7 bytes) a source
/// location then takes at most 8,206 bytes of Tracy's 65,535.
pub const MAX_NAME_BYTES: usize = 4096;

/// `name`, cut to [`MAX_NAME_BYTES`] at a character boundary; counts a cut
/// in `cuts`.
fn cut(mut name: String, cuts: &mut u64) -> String {
    if name.len() > MAX_NAME_BYTES {
        let mut end = MAX_NAME_BYTES;
        while !name.is_char_boundary(end) {
            end -= 1;
        }
        name.truncate(end);
        *cuts += 1;
    }
    name
}

/// The context id the first context gets; later ones count down.
pub const FIRST_CONTEXT: u8 = 254;
/// Contexts stop here: ids at or below it are left to `tracy-client`.
pub const LAST_CONTEXT: u8 = 128;

/// Tracy's GPU context type (`tracy::GpuContextType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum TracyContextType {
    /// Vulkan.
    Vulkan = 2,
    /// Custom (the fake backend).
    Custom = 7,
    /// CUDA.
    Cuda = 8,
    /// WebGPU (wgpu).
    WebGpu = 10,
}

impl From<BackendKind> for TracyContextType {
    fn from(kind: BackendKind) -> Self {
        match kind {
            BackendKind::Vulkan => Self::Vulkan,
            BackendKind::Cuda => Self::Cuda,
            BackendKind::Wgpu => Self::WebGpu,
            BackendKind::Fake => Self::Custom,
        }
    }
}

/// Tracy's context flag that says the context will be sent calibrations.
pub const CONTEXT_CALIBRATION: u8 = 1;

/// What a planner needs of a device's calibration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TracyClock {
    /// The latest calibration pair.
    pub anchor: TimestampPair,
    /// The fitted nanoseconds per tick.
    pub rate_ns_per_tick: f64,
    /// The device's nominal nanoseconds per tick (Tracy's context period).
    pub period_ns: f64,
    /// The mask of the timestamps' valid bits.
    pub mask: u64,
}

impl From<&Calibration> for TracyClock {
    fn from(c: &Calibration) -> Self {
        Self {
            anchor: c.latest(),
            rate_ns_per_tick: c.rate_ns_per_tick(),
            period_ns: c.period_ns(),
            mask: c.mask(),
        }
    }
}

/// One call on Tracy's client.
#[derive(Debug, Clone, PartialEq)]
pub enum TracyCall {
    /// `___tracy_emit_gpu_new_context`: Tracy stamps its CPU time now.
    NewContext {
        /// The context id.
        context: u8,
        /// The GPU time (unwrapped ticks) of now.
        gpu_time: i64,
        /// Nanoseconds per tick.
        period: f32,
        /// [`CONTEXT_CALIBRATION`].
        flags: u8,
        /// The context type.
        kind: TracyContextType,
    },
    /// `___tracy_emit_gpu_context_name`.
    ContextName {
        /// The context id.
        context: u8,
        /// `<device> / <queue>`.
        name: String,
    },
    /// `___tracy_emit_gpu_calibration`: Tracy stamps its CPU time now.
    Calibration {
        /// The context id.
        context: u8,
        /// The GPU time (unwrapped ticks) of now.
        gpu_time: i64,
        /// CPU nanoseconds since the context's previous calibration (or its
        /// creation).
        cpu_delta_ns: i64,
    },
    /// `___tracy_emit_gpu_zone_begin_alloc_serial` with a source location
    /// of these names.
    ZoneBegin {
        /// The context id.
        context: u8,
        /// The query id whose GPU time follows.
        query: u16,
        /// The zone's name: the label.
        name: String,
        /// The source location's function: the kind.
        function: &'static str,
        /// The source location's file: `gpu-counters <queue>`.
        file: String,
    },
    /// `___tracy_emit_gpu_zone_end_serial`.
    ZoneEnd {
        /// The context id.
        context: u8,
        /// The query id whose GPU time follows.
        query: u16,
    },
    /// `___tracy_emit_gpu_time_serial`.
    GpuTime {
        /// The context id.
        context: u8,
        /// The query id.
        query: u16,
        /// Unwrapped GPU ticks.
        gpu_time: i64,
    },
    /// A plot point (`tracy_client::Client::plot`).
    Plot {
        /// The plot's name.
        name: String,
        /// The value.
        value: f64,
    },
}

#[derive(Debug)]
struct Context {
    device: String,
    queue: String,
    lane: usize,
    id: u8,
    /// The CPU time of its creation or latest calibration.
    synced_ns: u64,
}

#[derive(Debug)]
struct Device {
    name: String,
    /// The anchor the device's contexts were last synced to, and its ticks
    /// unwrapped.
    anchor: TimestampPair,
    anchor_unwrapped: i64,
    queues: Vec<(String, Lanes<usize>)>,
}

/// Turns frames into [`TracyCall`]s (see the [module documentation](self)).
#[derive(Debug, Default)]
pub struct TracyPlanner {
    devices: Vec<Device>,
    contexts: Vec<Context>,
    next_query: u16,
    plots: std::collections::HashSet<String>,
    skipped_plot_points: u64,
    skipped_zones: u64,
    truncated_names: u64,
}

/// Signed distance from `from` to `to` on a counter of `mask`'s bits.
fn wrapped_delta(from: u64, to: u64, mask: u64) -> i64 {
    let d = to.wrapping_sub(from) & mask;
    if mask == u64::MAX {
        d as i64
    } else if d > mask / 2 {
        d as i64 - (mask as i64) - 1
    } else {
        d as i64
    }
}

impl TracyPlanner {
    /// A planner with no contexts yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Plot points left out because [`MAX_PLOTS`] names were made.
    pub fn skipped_plot_points(&self) -> u64 {
        self.skipped_plot_points
    }

    /// Zones left out because no context id was left (more than 126
    /// device, queue and overlap combinations).
    pub fn skipped_zones(&self) -> u64 {
        self.skipped_zones
    }

    /// Names cut to [`MAX_NAME_BYTES`] so far, one per call that carried a
    /// cut name.
    pub fn truncated_names(&self) -> u64 {
        self.truncated_names
    }

    /// The calls for one frame of the device named `device` (of backend
    /// `kind`), with its calibration `clock`, at CPU time `now_ns`
    /// (`CLOCK_MONOTONIC`, read just before the calls are made).
    pub fn frame(
        &mut self,
        device: &str,
        kind: BackendKind,
        clock: &TracyClock,
        frame: &TimelineFrame,
        now_ns: u64,
    ) -> Vec<TracyCall> {
        let mut calls = Vec::new();
        let d = self.device(device, clock, now_ns, &mut calls);
        let ticks_now = self.ticks_at(d, clock, now_ns);

        for queue in frame_queues(frame) {
            let q = match self.devices[d].queues.iter().position(|(n, _)| n == queue) {
                Some(q) => q,
                None => {
                    self.devices[d]
                        .queues
                        .push((queue.to_string(), Lanes::default()));
                    self.devices[d].queues.len() - 1
                }
            };
            let items = queue_items(frame, queue);
            let mut events = Vec::with_capacity(items.len() * 2);
            self.devices[d].queues[q].1.place(items, |e| events.push(e));
            // The largest error bound per lane, for its plot.
            let mut bounds: Vec<(u8, u64)> = Vec::new();
            for e in events {
                let (lane, item, begin) = match e {
                    LaneEvent::Begin { lane, item, .. } => (lane, item, true),
                    LaneEvent::End { lane, item, .. } => (lane, item, false),
                };
                let Some(ctx) =
                    self.context(d, queue, lane, kind, clock, ticks_now, now_ns, &mut calls)
                else {
                    if begin {
                        self.skipped_zones += 1;
                    }
                    continue;
                };
                let i: &TimelineInterval = &frame.intervals[item];
                let query = self.next_query;
                self.next_query = self.next_query.wrapping_add(1);
                let ticks = if begin { i.start_ticks } else { i.end_ticks };
                if begin {
                    calls.push(TracyCall::ZoneBegin {
                        context: ctx,
                        query,
                        name: cut(i.label.clone(), &mut self.truncated_names),
                        function: i.kind.name(),
                        file: cut(format!("gpu-counters {queue}"), &mut self.truncated_names),
                    });
                    match bounds.iter_mut().find(|(c, _)| *c == ctx) {
                        Some((_, b)) => *b = (*b).max(i.error_bound_ns),
                        None => bounds.push((ctx, i.error_bound_ns)),
                    }
                } else {
                    calls.push(TracyCall::ZoneEnd {
                        context: ctx,
                        query,
                    });
                }
                calls.push(TracyCall::GpuTime {
                    context: ctx,
                    query,
                    gpu_time: self.unwrap(d, clock, ticks),
                });
            }
            // Statistics, scope by scope in the frame's order.
            let prefix = format!("{device} / {queue}:");
            for i in frame.intervals.iter().filter(|i| i.queue == queue) {
                let Some(stats) = &i.statistics else { continue };
                for (stat, value) in stats.named() {
                    if value == gpu_counters_hal::COUNTER_ERROR_VALUE {
                        continue;
                    }
                    self.plot(
                        format!("{prefix} {} {stat}", i.label),
                        value as f64,
                        &mut calls,
                    );
                }
            }
            for (ctx, bound) in bounds {
                let name = self
                    .contexts
                    .iter()
                    .find(|c| c.id == ctx)
                    .map(|c| context_name(&c.device, &c.queue, c.lane))
                    .unwrap_or_default();
                self.plot(format!("{name}: error bound ns"), bound as f64, &mut calls);
            }
        }
        calls
    }

    /// A point of plot `name`; a plot is made when its value is first not
    /// 0 (a pass's statistics that are always 0 make no plot).
    fn plot(&mut self, name: String, value: f64, calls: &mut Vec<TracyCall>) {
        let mut cuts = 0;
        let name = cut(name, &mut cuts);
        if !self.plots.contains(&name) {
            if value == 0.0 {
                return;
            }
            if self.plots.len() >= MAX_PLOTS {
                self.skipped_plot_points += 1;
                return;
            }
            self.plots.insert(name.clone());
        }
        self.truncated_names += cuts;
        calls.push(TracyCall::Plot { name, value });
    }

    /// The device's index; when its calibration anchor moved, calibration
    /// calls for each of its contexts.
    fn device(
        &mut self,
        name: &str,
        clock: &TracyClock,
        now_ns: u64,
        calls: &mut Vec<TracyCall>,
    ) -> usize {
        let Some(d) = self.devices.iter().position(|d| d.name == name) else {
            self.devices.push(Device {
                name: name.to_string(),
                anchor: clock.anchor,
                anchor_unwrapped: (clock.anchor.gpu_ticks & clock.mask & (i64::MAX as u64)) as i64,
                queues: Vec::new(),
            });
            return self.devices.len() - 1;
        };
        if self.devices[d].anchor != clock.anchor {
            let dev = &mut self.devices[d];
            dev.anchor_unwrapped +=
                wrapped_delta(dev.anchor.gpu_ticks, clock.anchor.gpu_ticks, clock.mask);
            dev.anchor = clock.anchor;
            let ticks_now = self.ticks_at(d, clock, now_ns);
            for c in self.contexts.iter_mut().filter(|c| c.device == name) {
                calls.push(TracyCall::Calibration {
                    context: c.id,
                    gpu_time: ticks_now,
                    cpu_delta_ns: now_ns as i64 - c.synced_ns as i64,
                });
                c.synced_ns = now_ns;
            }
        }
        d
    }

    /// Unwrapped ticks of raw `ticks` near device `d`'s anchor.
    fn unwrap(&self, d: usize, clock: &TracyClock, ticks: u64) -> i64 {
        let dev = &self.devices[d];
        dev.anchor_unwrapped + wrapped_delta(dev.anchor.gpu_ticks, ticks, clock.mask)
    }

    /// The device's GPU time at CPU time `now_ns`: its anchor carried
    /// forward at the fitted rate.
    fn ticks_at(&self, d: usize, clock: &TracyClock, now_ns: u64) -> i64 {
        let dev = &self.devices[d];
        let dt = now_ns as f64 - dev.anchor.cpu_ns as f64;
        dev.anchor_unwrapped + (dt / clock.rate_ns_per_tick).round() as i64
    }

    /// The context of a device's queue lane, with the calls that create it
    /// when new; `None` when no context id is left.
    #[allow(clippy::too_many_arguments)]
    fn context(
        &mut self,
        d: usize,
        queue: &str,
        lane: usize,
        kind: BackendKind,
        clock: &TracyClock,
        ticks_now: i64,
        now_ns: u64,
        calls: &mut Vec<TracyCall>,
    ) -> Option<u8> {
        let device = &self.devices[d].name;
        if let Some(c) = self
            .contexts
            .iter()
            .find(|c| &c.device == device && c.queue == queue && c.lane == lane)
        {
            return Some(c.id);
        }
        let id = FIRST_CONTEXT.checked_sub(u8::try_from(self.contexts.len()).ok()?)?;
        if id <= LAST_CONTEXT {
            return None;
        }
        calls.push(TracyCall::NewContext {
            context: id,
            gpu_time: ticks_now,
            period: clock.period_ns as f32,
            flags: CONTEXT_CALIBRATION,
            kind: kind.into(),
        });
        calls.push(TracyCall::ContextName {
            context: id,
            name: cut(context_name(device, queue, lane), &mut self.truncated_names),
        });
        self.contexts.push(Context {
            device: device.clone(),
            queue: queue.to_string(),
            lane,
            id,
            synced_ns: now_ns,
        });
        Some(id)
    }
}

fn context_name(device: &str, queue: &str, lane: usize) -> String {
    match lane {
        0 => format!("{device} / {queue}"),
        n => format!("{device} / {queue} (overlap {n})"),
    }
}
