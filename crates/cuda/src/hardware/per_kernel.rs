//! Counters of every kernel of a context with the range profiler, for a
//! whole-process tracer: a session that stays enabled, its ranges one per
//! kernel, cycled (stopped, decoded, started again) when full.
//!
//! - [`Replay::None`]: CUPTI's user ranges, one pushed around each kernel
//!   launch by the caller and named by it (the launch's correlation id,
//!   say), so that each decoded range names its kernel. One pass only: a
//!   set that needs more is [`HardwareError::TooManyPasses`]. CUPTI
//!   serializes the context's kernels while the session runs.
//! - [`Replay::Kernel`]: CUPTI's auto ranges with kernel replay: each
//!   kernel launch runs its kernel once per pass, inside the launch call
//!   (which then returns when the kernel is done), device memory saved and
//!   restored between passes. Ranges are named `0`, `1`, ... in launch
//!   order since the pass started: the caller maps them to its launches.
//!
//! Every call makes the session's context current on the calling thread and
//! makes the thread's previous context current again before it returns,
//! so that it may run on any thread (inside a launch callback included).

use super::range::{RangeMode, Session};
use super::{HardwareCounters, HardwareError};
use cudarc::driver::sys as ds;
use cudarc::driver::CudaContext;
use std::mem::ManuallyDrop;
use std::sync::Arc;

/// Whether per-kernel counters may replay kernels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Replay {
    /// No replay: the metrics must be measured in one pass.
    #[default]
    None,
    /// Each kernel replayed inside its launch, once per pass.
    Kernel,
}

/// What a cycle of [`KernelCounters`] measured.
#[derive(Debug, Clone, PartialEq)]
pub struct CycleRanges {
    /// Each range's name and the metrics' values, in the order decoded.
    pub ranges: Vec<(String, Vec<f64>)>,
    /// Ranges CUPTI reported dropped.
    pub dropped: usize,
}

/// The calling thread's current context, made current again on drop.
struct RestoreCurrent(ds::CUcontext);

impl RestoreCurrent {
    fn save() -> Self {
        let mut ctx: ds::CUcontext = std::ptr::null_mut();
        // SAFETY: a valid out-pointer; reads the thread's current context.
        let r = unsafe { ds::cuCtxGetCurrent(&mut ctx) };
        if r != ds::CUresult::CUDA_SUCCESS {
            ctx = std::ptr::null_mut();
        }
        RestoreCurrent(ctx)
    }
}

impl Drop for RestoreCurrent {
    fn drop(&mut self) {
        // SAFETY: the context that was current on this thread when the
        // guard was made (or none), current again.
        let _ = unsafe { ds::cuCtxSetCurrent(self.0) };
    }
}

/// A range-profiler session measuring every kernel of a context (see the
/// module docs).
pub struct KernelCounters {
    /// Dropped in `drop`, with the thread's context restored after.
    session: ManuallyDrop<Session>,
    replay: Replay,
}

impl std::fmt::Debug for KernelCounters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KernelCounters")
            .field("metrics", &self.session.config().names)
            .field("replay", &self.replay)
            .field("capacity", &self.session.max_ranges())
            .finish()
    }
}

impl HardwareCounters {
    /// The hardware counters of context `ctx`'s device, probed once per
    /// process as [`crate::Device`] does.
    pub fn for_context(ctx: &Arc<CudaContext>) -> Result<Self, HardwareError> {
        let _restore = RestoreCurrent::save();
        let stream = ctx.default_stream();
        Self::probe(ctx.ordinal(), ctx.cu_device(), ctx, &stream)
    }

    /// A session measuring `metrics` for each kernel of the context, up to
    /// `max_kernels` per cycle, enabled and configured (not started).
    /// Without replay a set that needs several passes is
    /// [`HardwareError::TooManyPasses`] naming the metric.
    pub fn kernel_counters(
        &self,
        metrics: &[&str],
        max_kernels: usize,
        replay: Replay,
    ) -> Result<KernelCounters, HardwareError> {
        let _restore = RestoreCurrent::save();
        let config = self.profiler.config(metrics)?;
        if config.passes > 1 && replay == Replay::None {
            return Err(self.profiler.too_many_passes(&config));
        }
        let mode = match replay {
            Replay::None => RangeMode::User,
            Replay::Kernel => RangeMode::AutoKernelReplay,
        };
        let session = Session::with_mode(
            self.profiler.api,
            &self.ctx,
            config,
            max_kernels.max(1),
            mode,
        )?;
        Ok(KernelCounters {
            session: ManuallyDrop::new(session),
            replay,
        })
    }
}

impl KernelCounters {
    /// The metrics, in the order of each range's values.
    pub fn metrics(&self) -> &[String] {
        &self.session.config().names
    }

    /// The passes the metrics need (more than one only with
    /// [`Replay::Kernel`]).
    pub fn passes(&self) -> usize {
        self.session.config().passes
    }

    /// Whether kernels are replayed.
    pub fn replay(&self) -> Replay {
        self.replay
    }

    /// Ranges a cycle holds.
    pub fn capacity(&self) -> usize {
        self.session.max_ranges()
    }

    /// Ranges pushed since the cycle started ([`Replay::None`]).
    pub fn pushed(&self) -> usize {
        self.session.pushed()
    }

    /// Starts a cycle.
    pub fn start(&mut self) -> Result<(), HardwareError> {
        let _restore = RestoreCurrent::save();
        self.session.start()
    }

    /// Opens the range of the next kernel, named `name` ([`Replay::None`]).
    pub fn push(&mut self, name: &str) -> Result<(), HardwareError> {
        let _restore = RestoreCurrent::save();
        self.session.push(name)
    }

    /// Closes the open range.
    pub fn pop(&mut self) -> Result<(), HardwareError> {
        let _restore = RestoreCurrent::save();
        self.session.pop()
    }

    /// Ends the cycle: stops it, waits for the context's work, decodes and
    /// evaluates every range (its name and the metrics' values), and makes
    /// the counter data ready for the next cycle.
    pub fn stop_and_decode(&mut self) -> Result<CycleRanges, HardwareError> {
        let _restore = RestoreCurrent::save();
        let all = self.session.stop()?;
        if !all {
            return Err(HardwareError::Cupti {
                call: "cuptiRangeProfilerStop",
                code: 0,
                result: "asks for another pass where kernels are replayed in their launches".into(),
            });
        }
        let (ranges, dropped) = self.session.decode()?;
        self.session.reinitialize_counter_data()?;
        Ok(CycleRanges {
            ranges: ranges.into_iter().map(|r| (r.name, r.values)).collect(),
            dropped,
        })
    }
}

impl Drop for KernelCounters {
    fn drop(&mut self) {
        let _restore = RestoreCurrent::save();
        // SAFETY: dropped once, here, and never used after. The session's
        // drop ends what is open and disables the profiler; the guard then
        // makes the thread's context current again.
        unsafe { ManuallyDrop::drop(&mut self.session) };
    }
}
