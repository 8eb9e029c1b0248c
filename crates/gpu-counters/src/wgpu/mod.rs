//! The wgpu backend (feature `wgpu`): the `gpu-counters-wgpu` crate's items,
//! and [`Profiler`], a drop-in for wgpu-profiler over the application's own
//! device, queue, encoders and `queue.submit`.
//!
//! ```no_run
//! # fn frame(device: &wgpu::Device, queue: &wgpu::Queue, pipeline: &wgpu::ComputePipeline) -> Result<(), gpu_counters::Error> {
//! use gpu_counters::wgpu::Profiler;
//!
//! let profiler = Profiler::new(device, queue, Default::default())?;
//! let mut encoder = device.create_command_encoder(&Default::default());
//! {
//!     let mut scope = profiler.scope("frame", &mut encoder); // ends when dropped
//!     let mut pass = scope.scoped_compute_pass("fill"); // a wgpu::ComputePass
//!     pass.set_pipeline(pipeline);
//!     pass.dispatch_workgroups(256, 1, 1);
//! }
//! queue.submit([encoder.finish()]); // the application's own submit
//! profiler.end_frame()?; // after the frame's submissions
//! device.poll(wgpu::PollType::wait_indefinitely()).ok();
//! for frame in profiler.collect()? {
//!     for s in frame.scopes() {
//!         println!("{} {} ns ± {} ns", s.label, s.duration_ns, s.error_bound_ns);
//!     }
//! }
//! # Ok(()) }
//! ```
//!
//! **How it knows what ran.** wgpu resolves a query that was never written
//! as 0, and one written in an earlier frame as that frame's value. So each
//! root scope (one begun on an encoder) also copies a marker word in its
//! encoder, and the frame's read-back, which [`Profiler::end_frame`] submits
//! after the application's submissions, reads the markers with the queries.
//! A scope whose encoder did not run by then (submitted later, or never) is
//! counted in [`DropCounts::abandoned`](gpu_counters_profiler::DropCounts)
//! and in [`ProfiledFrame::root_scopes_not_run`], never reported with a zero
//! or a stale value; the frame's query sets are then not reused, so a late
//! submission never writes into another frame, and never touches a mapped
//! buffer (no wgpu validation error).

pub use gpu_counters_wgpu::*;

mod frame;
mod results;
mod scope;

pub use results::{ProfiledFrame, TimerQueryResult};
pub use scope::{OwningScope, PassCommands, PassScope, Scope, ScopedComputePass, ScopedRenderPass};

use frame::{lock, FrameData, Readback, Resources, ScopeRecord, Untimed};
use gpu_counters_hal::timeline::{PassKind, Timeline};
use gpu_counters_hal::{cpu_monotonic_ns, Calibration, Error, InvalidInput, Result};
use gpu_counters_profiler::SharedStr;
use scope::Open;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// A root scope's marker slot where the frame had no room for it.
const NO_ROOT: u32 = u32::MAX;

/// Where a scope writes its timestamps.
#[derive(Clone, Copy, PartialEq, Eq)]
enum On {
    /// A pass's own timestamp writes.
    Pass,
    /// The encoder, between passes (`TIMESTAMP_QUERY_INSIDE_ENCODERS`).
    Encoder,
    /// Inside a pass (`TIMESTAMP_QUERY_INSIDE_PASSES`).
    InPass,
}

/// What [`Profiler`] does; `Default` is wgpu-profiler's defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProfilerSettings {
    /// Time scopes with timestamp queries (needs
    /// [`wgpu::Features::TIMESTAMP_QUERY`]; scopes over encoders also need
    /// [`wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS`]). Off: scopes
    /// only push debug groups, and are counted as failed.
    pub enable_timer_queries: bool,
    /// Push a debug group with the scope's label around each scope, so
    /// RenderDoc and the validation layers see the same names.
    pub enable_debug_groups: bool,
    /// Count each scoped pass's pipeline statistics (needs
    /// [`wgpu::Features::PIPELINE_STATISTICS_QUERY`]); scopes over encoders
    /// are timed only (wgpu counts statistics only inside passes).
    pub pipeline_statistics: bool,
    /// Scopes a frame holds; past it, scopes are counted in
    /// `drops.over_capacity`. At most 2048 (wgpu's query set limit, two
    /// timestamps a scope).
    pub max_scopes_per_frame: u32,
    /// The queue's name in results and exports.
    pub queue_name: String,
}

impl Default for ProfilerSettings {
    fn default() -> Self {
        Self {
            enable_timer_queries: true,
            enable_debug_groups: true,
            pipeline_statistics: false,
            max_scopes_per_frame: 1024,
            queue_name: "queue".into(),
        }
    }
}

/// A frame whose read-back was submitted.
struct Pending {
    frame: Arc<FrameData>,
    readback: Option<Readback>,
    cpu_end_frame_ns: u64,
}

/// GPU scopes over the application's own [`wgpu::Device`], [`wgpu::Queue`]
/// and [`wgpu::CommandEncoder`]s, in the shape of wgpu-profiler's
/// `GpuProfiler`: scopes are guards on the encoder ([`Profiler::scope`],
/// [`Scope::scoped_compute_pass`], ...), the application submits as it
/// likes (any number of encoders and `queue.submit` calls, in any order),
/// [`Profiler::end_frame`] closes the frame after its submissions, and
/// [`Profiler::collect`] returns the finished frames, on the CPU clock with
/// a bound (see the [module docs](self) for how it tells what ran).
///
/// Every method takes `&self`: scopes may be begun from several threads.
pub struct Profiler {
    device: wgpu::Device,
    queue: wgpu::Queue,
    counters: gpu_counters_wgpu::Device,
    settings: ProfilerSettings,
    /// Scopes over encoders write timestamps.
    encoder_timestamps: bool,
    /// Scopes inside passes write timestamps.
    pass_timestamps: bool,
    /// Passes count statistics.
    statistics: bool,
    /// `COPY_SRC`: one non-zero word, the root scopes' marker.
    ones: wgpu::Buffer,
    current: Mutex<Arc<FrameData>>,
    pending: Mutex<VecDeque<Pending>>,
    /// GPU objects of collected frames, for the next frames.
    pool: Mutex<Vec<Resources>>,
    calibration: Mutex<Calibration>,
    next_index: AtomicU64,
}

impl std::fmt::Debug for Profiler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Profiler")
            .field("device", &self.counters)
            .field("settings", &self.settings)
            .finish()
    }
}

thread_local! {
    /// The current thread's name (its id where unnamed), once per thread.
    static THREAD: SharedStr = {
        let t = std::thread::current();
        SharedStr::from(t.name().map_or_else(|| format!("{:?}", t.id()), str::to_string))
    };
}

impl Profiler {
    /// The features it times with: scoped passes need
    /// [`wgpu::Features::TIMESTAMP_QUERY`], scopes over encoders
    /// [`wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS`] too, and scopes
    /// inside passes [`wgpu::Features::TIMESTAMP_QUERY_INSIDE_PASSES`].
    pub const ALL_WGPU_TIMER_FEATURES: wgpu::Features = wgpu::Features::TIMESTAMP_QUERY
        .union(wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS)
        .union(wgpu::Features::TIMESTAMP_QUERY_INSIDE_PASSES);

    /// A profiler on the application's `device` and `queue`, calibrated by
    /// a bracketed submission (a device opened with
    /// [`gpu_counters_wgpu::Device::request`] gets a calibrated pair: use
    /// [`Profiler::with_device`]).
    ///
    /// # Errors
    /// `Unsupported` naming `TIMESTAMP_QUERY` where timer queries are on
    /// and the device lacks it (or `PIPELINE_STATISTICS_QUERY` where
    /// statistics are on); `Argument` for `max_scopes_per_frame` outside
    /// `1..=2048`; a failed calibration.
    pub fn new(
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        settings: ProfilerSettings,
    ) -> Result<Self> {
        let counters =
            gpu_counters_wgpu::Device::new(device.clone(), queue.clone(), device.adapter_info());
        Self::with_device(&counters, settings)
    }

    /// A profiler on a gpu-counters device (its wgpu device and queue).
    ///
    /// # Errors
    /// As [`Profiler::new`].
    pub fn with_device(
        counters: &gpu_counters_wgpu::Device,
        settings: ProfilerSettings,
    ) -> Result<Self> {
        let max = wgpu::QUERY_SET_MAX_QUERIES / 2;
        if !(1..=max).contains(&settings.max_scopes_per_frame) {
            return Err(InvalidInput::Argument(format!(
                "max_scopes_per_frame {} is outside 1..={max}",
                settings.max_scopes_per_frame
            ))
            .into());
        }
        let features = counters.features();
        let lacks = |name: &str, why: &str| -> Error {
            InvalidInput::Unsupported(format!(
                "device `{}` lacks wgpu::Features::{name}: {why}",
                counters.info().name
            ))
            .into()
        };
        if settings.enable_timer_queries && !features.contains(wgpu::Features::TIMESTAMP_QUERY) {
            return Err(lacks(
                "TIMESTAMP_QUERY",
                "timer queries need it (or turn enable_timer_queries off)",
            ));
        }
        if settings.pipeline_statistics
            && !features.contains(wgpu::Features::PIPELINE_STATISTICS_QUERY)
        {
            return Err(lacks(
                "PIPELINE_STATISTICS_QUERY",
                "pipeline_statistics needs it",
            ));
        }
        let calibration = if settings.enable_timer_queries {
            counters.calibration()?
        } else {
            // Never used: no scope has timestamps.
            Calibration::new(
                gpu_counters_hal::CalibrationMethod::Bracketing,
                1.0,
                64,
                gpu_counters_hal::TimestampPair {
                    cpu_ns: cpu_monotonic_ns(),
                    gpu_ticks: 0,
                    max_deviation_ns: 0,
                },
            )?
        };
        let device = counters.device().clone();
        let ones = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("gpu-counters profiler marker"),
            size: 8,
            usage: wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: true,
        });
        ones.slice(..)
            .get_mapped_range_mut()
            .map_err(|e| Error::Internal(format!("marker buffer: {e}")))?
            .copy_from_slice(&1u64.to_le_bytes());
        ones.unmap();
        let statistics = settings.pipeline_statistics;
        let first = Resources::new(
            &device,
            settings.max_scopes_per_frame,
            settings.enable_timer_queries,
            statistics,
        );
        Ok(Self {
            queue: counters.queue().clone(),
            counters: counters.clone(),
            encoder_timestamps: settings.enable_timer_queries
                && features.contains(wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS),
            pass_timestamps: settings.enable_timer_queries
                && features.contains(wgpu::Features::TIMESTAMP_QUERY_INSIDE_PASSES),
            statistics,
            ones,
            current: Mutex::new(Arc::new(FrameData::new(0, first))),
            pending: Mutex::default(),
            pool: Mutex::default(),
            calibration: Mutex::new(calibration),
            next_index: AtomicU64::new(1),
            settings,
            device,
        })
    }

    /// The wgpu device.
    pub fn device(&self) -> &wgpu::Device {
        &self.device
    }

    /// The settings it was made with.
    pub fn settings(&self) -> &ProfilerSettings {
        &self.settings
    }

    /// The calibration its results are converted with (refreshed by
    /// [`Profiler::collect`] when due).
    pub fn calibration(&self) -> Calibration {
        lock(&self.calibration).clone()
    }

    /// A scope over `encoder` in the current frame; ends when dropped.
    pub fn scope<'a>(
        &'a self,
        label: impl Into<String>,
        encoder: &'a mut wgpu::CommandEncoder,
    ) -> Scope<'a> {
        let open = self.begin_on_encoder(SharedStr::from(label.into()), None, encoder);
        Scope::new(open, encoder)
    }

    /// A scope that owns `encoder`; [`OwningScope::into_inner`] gives it
    /// back.
    pub fn owning_scope(
        &self,
        label: impl Into<String>,
        mut encoder: wgpu::CommandEncoder,
    ) -> OwningScope<'_> {
        let open = self.begin_on_encoder(SharedStr::from(label.into()), None, &mut encoder);
        OwningScope::new(open, encoder)
    }

    /// A compute pass on `encoder` that is a scope of the current frame
    /// (see [`Scope::scoped_compute_pass`]).
    pub fn scoped_compute_pass<'a>(
        &'a self,
        label: impl Into<String>,
        encoder: &'a mut wgpu::CommandEncoder,
    ) -> ScopedComputePass<'a> {
        scope::compute_pass(self, label.into(), None, encoder)
    }

    /// A render pass on `encoder` that is a scope of the current frame
    /// (see [`Scope::scoped_render_pass`]).
    pub fn scoped_render_pass<'a>(
        &'a self,
        label: impl Into<String>,
        encoder: &'a mut wgpu::CommandEncoder,
        desc: wgpu::RenderPassDescriptor<'_>,
    ) -> ScopedRenderPass<'a> {
        scope::render_pass(self, label.into(), None, encoder, desc)
    }

    /// Records nothing: the frame's read-back is recorded and submitted by
    /// [`Profiler::end_frame`], after the application's submissions, so the
    /// profiler can tell which encoders ran. Kept so that code written for
    /// wgpu-profiler (whose `resolve_queries` is required) compiles as it is.
    pub fn resolve_queries(&self, encoder: &mut wgpu::CommandEncoder) {
        let _ = encoder;
    }

    /// Ends the current frame and begins the next: call it after the
    /// frame's `queue.submit` calls. It submits the frame's read-back (a
    /// small command buffer of its own) and starts mapping it. Scopes
    /// still open count as not ended; encoders submitted after it count as
    /// not run (see [`ProfiledFrame`]).
    ///
    /// # Errors
    /// None today; the signature leaves room for a device loss.
    pub fn end_frame(&self) -> Result<()> {
        let res = lock(&self.pool).pop().unwrap_or_else(|| {
            Resources::new(
                &self.device,
                self.settings.max_scopes_per_frame,
                self.settings.enable_timer_queries,
                self.statistics,
            )
        });
        let next = Arc::new(FrameData::new(
            self.next_index.fetch_add(1, Ordering::Relaxed),
            res,
        ));
        let frame = std::mem::replace(&mut *lock(&self.current), next);
        let mut encoder = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("gpu-counters profiler read-back"),
            });
        let readback = frame.record_readback(&mut encoder);
        let cpu_end_frame_ns = cpu_monotonic_ns();
        if let Some(rb) = &readback {
            self.queue.submit([encoder.finish()]);
            frame.start_map(rb);
        }
        lock(&self.pending).push_back(Pending {
            frame,
            readback,
            cpu_end_frame_ns,
        });
        Ok(())
    }

    /// The ended frames whose read-back arrived, oldest first, each once.
    /// Polls the device without waiting (poll it with
    /// `wgpu::PollType::Wait` first to wait for the GPU).
    ///
    /// # Errors
    /// `DeviceLost` for a failed poll or read-back mapping (the frames not
    /// yet returned stay pending); a failed calibration refresh.
    pub fn collect(&self) -> Result<Vec<ProfiledFrame>> {
        self.device
            .poll(wgpu::PollType::Poll)
            .map_err(|e| Error::DeviceLost(format!("Profiler::collect: {e}")))?;
        let mut out = Vec::new();
        loop {
            let p = {
                let mut pending = lock(&self.pending);
                let ready = match pending.front() {
                    None => false,
                    Some(p) => p
                        .readback
                        .as_ref()
                        .is_none_or(|rb| lock(&rb.mapped).is_some()),
                };
                if !ready {
                    break;
                }
                match pending.pop_front() {
                    Some(p) => p,
                    None => break,
                }
            };
            let failed = p
                .readback
                .as_ref()
                .and_then(|rb| match lock(&rb.mapped).as_ref() {
                    Some(Err(e)) => Some(format!("frame {} read-back: {e}", p.frame.index)),
                    _ => None,
                });
            if let Some(message) = failed {
                lock(&self.pending).push_front(p);
                return Err(Error::DeviceLost(message));
            }
            let mut calibration = lock(&self.calibration);
            if self.settings.enable_timer_queries && calibration.needs_refit(cpu_monotonic_ns()) {
                self.counters.refresh_calibration(&mut calibration)?;
            }
            let (frame, reusable) = p.frame.results(
                p.readback.as_ref(),
                &calibration,
                &self.settings.queue_name,
                p.cpu_end_frame_ns,
                cpu_monotonic_ns(),
            )?;
            drop(calibration);
            if reusable {
                if let Ok(f) = Arc::try_unwrap(p.frame) {
                    lock(&self.pool).push(f.res);
                }
            }
            out.push(frame);
        }
        Ok(out)
    }

    /// `frames` as a timeline for the exporters
    /// ([`export`](gpu_counters_profiler::export)).
    pub fn timeline(&self, frames: &[ProfiledFrame]) -> Timeline {
        Timeline {
            device: self.counters.info().name.clone(),
            frames: frames
                .iter()
                .map(|f| f.result.to_timeline_frame())
                .collect(),
        }
    }

    /// Begins a scope of `kind` (a child of `parent`'s record, or a root of
    /// the current frame) and records a root's marker into `encoder`.
    pub(crate) fn begin(
        &self,
        label: SharedStr,
        kind: PassKind,
        parent: Option<(Arc<FrameData>, u32)>,
        encoder: &mut wgpu::CommandEncoder,
    ) -> Open<'_> {
        let on = if kind == PassKind::Scope {
            On::Encoder
        } else {
            On::Pass
        };
        self.begin_on(label, kind, on, parent, Some(encoder))
    }

    /// A scope inside a pass, a child of `parent`'s record.
    pub(crate) fn begin_in_pass(
        &self,
        label: SharedStr,
        parent: (Arc<FrameData>, u32),
    ) -> Open<'_> {
        self.begin_on(label, PassKind::Scope, On::InPass, Some(parent), None)
    }

    /// [`Profiler::begin`] for a scope timed as `on` says; `encoder` is
    /// where a root's marker is copied (a root always has one).
    fn begin_on(
        &self,
        label: SharedStr,
        kind: PassKind,
        on: On,
        parent: Option<(Arc<FrameData>, u32)>,
        encoder: Option<&mut wgpu::CommandEncoder>,
    ) -> Open<'_> {
        let (frame, parent) = match parent {
            Some((f, id)) => (f, Some(id)),
            None => (lock(&self.current).clone(), None),
        };
        let pass = on == On::Pass;
        let (id, root, query, statistics) = {
            let mut st = lock(&frame.state);
            let id = st.scopes.len() as u32;
            let over = id >= frame.res.capacity;
            let root = match parent {
                Some(p) => st.scopes[p as usize].root,
                None if over => NO_ROOT,
                None => {
                    st.roots += 1;
                    st.roots - 1
                }
            };
            let timed = match on {
                On::Pass => self.settings.enable_timer_queries,
                On::Encoder => self.encoder_timestamps,
                On::InPass => self.pass_timestamps,
            };
            let query = (!over && timed).then(|| {
                st.queries += 1;
                (st.queries - 1) * 2
            });
            let statistics = (!over && pass && self.statistics).then(|| {
                st.statistics += 1;
                st.statistics - 1
            });
            st.scopes.push(ScopeRecord {
                label,
                kind,
                thread: THREAD.with(Clone::clone),
                parent,
                root,
                query,
                statistics,
                ended: false,
                panicked: false,
                untimed: match (over, query) {
                    (true, _) => Some(Untimed::OverCapacity),
                    (false, None) => Some(Untimed::NoTimestamps),
                    (false, Some(_)) => None,
                },
            });
            (id, root, query, statistics)
        };
        if let (None, Some(encoder), false) = (parent, encoder, root == NO_ROOT) {
            encoder.copy_buffer_to_buffer(
                &self.ones,
                0,
                &frame.res.markers,
                u64::from(root) * 8,
                8,
            );
        }
        Open {
            profiler: self,
            frame,
            id,
            query,
            statistics,
            debug_group: self.settings.enable_debug_groups,
            ended: false,
        }
    }

    /// Begins a scope over `encoder`: its debug group and start timestamp.
    pub(crate) fn begin_on_encoder(
        &self,
        label: SharedStr,
        parent: Option<(Arc<FrameData>, u32)>,
        encoder: &mut wgpu::CommandEncoder,
    ) -> Open<'_> {
        let open = self.begin(label.clone(), PassKind::Scope, parent, encoder);
        if open.debug_group {
            encoder.push_debug_group(&label);
        }
        if let (Some(q), Some(set)) = (open.query, &open.frame.res.timestamps) {
            encoder.write_timestamp(set, q);
        }
        open
    }
}
