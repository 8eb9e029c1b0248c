//! The thin layer that makes [`TracyCall`]s on a running Tracy client
//! (feature `tracy`): the GPU calls through `tracy-client-sys`, because
//! `tracy-client`'s safe API creates GPU contexts without the calibration
//! flag and has no calibration call; plots through `tracy-client`'s safe
//! API. All the ordering and content is [`TracyPlanner`]'s, tested without
//! a client.

use super::tracy::{TracyCall, TracyClock, TracyPlanner};
use gpu_counters_hal::timeline::TimelineFrame;
use gpu_counters_hal::{cpu_monotonic_ns, BackendKind, Calibration};
use std::collections::HashMap;
use tracy_client::{Client, PlotName};
use tracy_client_sys as sys;

/// Streams frames into the Tracy client of this process, which it starts.
pub struct TracySink {
    client: Client,
    planner: TracyPlanner,
    plots: HashMap<String, PlotName>,
}

impl std::fmt::Debug for TracySink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TracySink")
            .field("planner", &self.planner)
            .finish_non_exhaustive()
    }
}

impl Default for TracySink {
    fn default() -> Self {
        Self::new()
    }
}

impl TracySink {
    /// Starts the Tracy client (if it is not running yet).
    pub fn new() -> Self {
        Self {
            client: Client::start(),
            planner: TracyPlanner::new(),
            plots: HashMap::new(),
        }
    }

    /// The planner, for its counts of what was left out.
    pub fn planner(&self) -> &TracyPlanner {
        &self.planner
    }

    /// Sends one frame of the device named `device` (of backend `kind`),
    /// whose times come from `calibration`.
    pub fn send(
        &mut self,
        device: &str,
        kind: BackendKind,
        calibration: &Calibration,
        frame: &TimelineFrame,
    ) {
        let clock = TracyClock::from(calibration);
        let now = cpu_monotonic_ns();
        for call in self.planner.frame(device, kind, &clock, frame, now) {
            self.call(call);
        }
    }

    fn call(&mut self, call: TracyCall) {
        match call {
            TracyCall::NewContext {
                context,
                gpu_time,
                period,
                flags,
                kind,
            } => {
                let data = sys::___tracy_gpu_new_context_data {
                    gpuTime: gpu_time,
                    period,
                    context,
                    flags,
                    type_: kind as u8,
                };
                // SAFETY: `self.client` keeps Tracy's profiler running; the
                // data is plain values, copied by the call.
                unsafe { sys::___tracy_emit_gpu_new_context_serial(data) };
            }
            TracyCall::ContextName { context, name } => {
                let len = name.len().min(usize::from(u16::MAX));
                let data = sys::___tracy_gpu_context_name_data {
                    context,
                    name: name.as_ptr().cast(),
                    len: len as u16,
                };
                // SAFETY: the client is running; `name` outlives the call,
                // which copies `len` bytes of it (no NUL needed).
                unsafe { sys::___tracy_emit_gpu_context_name_serial(data) };
            }
            TracyCall::Calibration {
                context,
                gpu_time,
                cpu_delta_ns,
            } => {
                let data = sys::___tracy_gpu_calibration_data {
                    gpuTime: gpu_time,
                    cpuDelta: cpu_delta_ns,
                    context,
                };
                // SAFETY: the client is running; plain values, copied. The
                // context was created with the calibration flag.
                unsafe { sys::___tracy_emit_gpu_calibration_serial(data) };
            }
            TracyCall::ZoneBegin {
                context,
                query,
                name,
                function,
                file,
            } => {
                // SAFETY: the client is running; the three strings outlive
                // the call, which copies the given number of bytes of each
                // into a source location that Tracy frees once sent. Tracy
                // sizes that allocation with a `u16` of 10 + function + 1 +
                // file + 1 + name bytes, unchecked in release builds: the
                // planner cuts `file` and `name` to `MAX_NAME_BYTES` (4096)
                // and `function` is a kind's name (at most 7 bytes), so the
                // size is at most 8,206 and never wraps.
                let srcloc = unsafe {
                    sys::___tracy_alloc_srcloc_name(
                        0,
                        file.as_ptr().cast(),
                        file.len(),
                        function.as_ptr().cast(),
                        function.len(),
                        name.as_ptr().cast(),
                        name.len(),
                        0,
                    )
                };
                let data = sys::___tracy_gpu_zone_begin_data {
                    srcloc,
                    queryId: query,
                    context,
                };
                // SAFETY: the client is running; `srcloc` was just allocated
                // by Tracy and is handed over to it here, once.
                unsafe { sys::___tracy_emit_gpu_zone_begin_alloc_serial(data) };
            }
            TracyCall::ZoneEnd { context, query } => {
                let data = sys::___tracy_gpu_zone_end_data {
                    queryId: query,
                    context,
                };
                // SAFETY: the client is running; plain values, copied.
                unsafe { sys::___tracy_emit_gpu_zone_end_serial(data) };
            }
            TracyCall::GpuTime {
                context,
                query,
                gpu_time,
            } => {
                let data = sys::___tracy_gpu_time_data {
                    gpuTime: gpu_time,
                    queryId: query,
                    context,
                };
                // SAFETY: the client is running; plain values, copied.
                unsafe { sys::___tracy_emit_gpu_time_serial(data) };
            }
            TracyCall::Plot { name, value } => {
                let plot = *self
                    .plots
                    .entry(name)
                    .or_insert_with_key(|n| PlotName::new_leak(n.clone()));
                self.client.plot(plot, value);
            }
        }
    }
}

impl crate::FrameSink for TracySink {
    fn frame(
        &mut self,
        device: &gpu_counters_hal::DeviceInfo,
        calibration: &Calibration,
        frame: &crate::FrameResult,
    ) {
        self.send(
            &device.name,
            device.backend,
            calibration,
            &frame.to_timeline_frame(),
        );
    }
}
