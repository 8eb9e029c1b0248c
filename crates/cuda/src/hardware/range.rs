//! One range-profiler session on a context: enabled, configured with a
//! config image and a counter data image of its own, started, its user
//! ranges pushed and popped, stopped, decoded, evaluated, disabled.
//!
//! CUPTI's range profiler belongs to a context and runs one session at a
//! time there: a process-wide set of the contexts with a session refuses a
//! second one ([`HardwareError::Busy`]) rather than letting CUPTI fail
//! half-way.
//!
//! A finished session is kept, enabled and configured, for the next
//! measurement of the same metrics on its context ([`Session::get`],
//! [`Session::recycle`]): its counter data image initialized again, it
//! starts in about 3 ms instead of the 140 ms of a freshly configured one
//! (H200; without the re-initialization CUPTI would average the new range
//! into the old one of the same name). One idle session per context at
//! most; a measurement of other metrics disables it first, and the
//! device's drop disables it ([`release_idle`]).

use super::host::{check, params};
use super::{Config, HardwareError};
use cudarc::driver::CudaContext;
use gpu_counters_cupti_sys as cs;
use std::collections::BTreeSet;
use std::ffi::{c_char, CStr, CString};
use std::sync::{Arc, Mutex};

/// The contexts (`CUcontext` addresses) with a session.
static ACTIVE: Mutex<BTreeSet<usize>> = Mutex::new(BTreeSet::new());

/// Finished sessions kept for reuse, at most one per context.
static IDLE: Mutex<Vec<Session>> = Mutex::new(Vec::new());

/// Takes the idle session of context `ctx` (a `CUcontext` address) out of
/// [`IDLE`], if there is one.
fn take_idle(ctx: usize) -> Option<Session> {
    let mut idle = crate::lock(&IDLE);
    let i = idle.iter().position(|s| s.claim.0 == ctx)?;
    Some(idle.swap_remove(i))
}

/// Disables the idle session of context `ctx` (a `CUcontext` address), if
/// any.
pub(crate) fn release_idle(ctx: usize) {
    // Disabled by the drop, outside the lock.
    drop(take_idle(ctx));
}

/// A context's place in [`ACTIVE`], given back on drop.
struct Claim(usize);

impl Claim {
    fn take(ctx: usize) -> Result<Self, HardwareError> {
        let mut active = crate::lock(&ACTIVE);
        if !active.insert(ctx) {
            return Err(HardwareError::Busy);
        }
        Ok(Claim(ctx))
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        crate::lock(&ACTIVE).remove(&self.0);
    }
}

/// A decoded range: its name and the config's metrics' values, in the
/// config's order.
pub(crate) struct DecodedRange {
    pub(crate) name: String,
    pub(crate) values: Vec<f64>,
}

/// How a session's ranges are made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RangeMode {
    /// Ranges pushed and popped by the caller; passes replayed by the
    /// caller (CUPTI's user range and user replay).
    User,
    /// A range around each kernel, named `0`, `1`, ... in launch order
    /// within a pass; each kernel replayed inside its launch as many
    /// times as the passes need, device memory saved and restored (CUPTI's
    /// auto range and kernel replay).
    AutoKernelReplay,
}

/// A range-profiler session (see the module docs).
pub(crate) struct Session {
    api: &'static cs::Cupti,
    ctx: Arc<CudaContext>,
    config: Arc<Config>,
    mode: RangeMode,
    object: *mut cs::CUpti_RangeProfiler_Object,
    /// The counter data image CUPTI decodes into (its address is given to
    /// CUPTI: never reallocated).
    counter_data: Box<[u8]>,
    max_ranges: usize,
    pushed: usize,
    /// Ranges pushed and not popped.
    depth: usize,
    started: bool,
    claim: Claim,
}

// SAFETY: the session is used by one thread at a time (`&mut self`), and
// every call first makes its context current on the calling thread; the
// range profiler object is CUPTI's heap object, not tied to a thread.
unsafe impl Send for Session {}

impl Session {
    /// A configured session on `ctx` for `config` with room for
    /// `max_ranges` ranges: the context's idle one where it matches (its
    /// counter data initialized again), else a new one.
    pub(crate) fn get(
        api: &'static cs::Cupti,
        ctx: &Arc<CudaContext>,
        config: Arc<Config>,
        max_ranges: usize,
    ) -> Result<Self, HardwareError> {
        if let Some(mut s) = take_idle(ctx.cu_ctx() as usize) {
            if Arc::ptr_eq(&s.config, &config)
                && s.mode == RangeMode::User
                && s.max_ranges == max_ranges
                && s.reinitialize_counter_data().is_ok()
            {
                return Ok(s);
            }
            // Another config (or a failed re-initialization): disabled
            // before a new one is enabled.
            drop(s);
        }
        Self::new(api, ctx, config, max_ranges)
    }

    /// Keeps a finished session for the next measurement of its config on
    /// its context; one left mid-pass or with a range open is disabled.
    pub(crate) fn recycle(self) {
        if self.depth == 0 && !self.started {
            crate::lock(&IDLE).push(self);
        }
    }

    /// Enables the range profiler on `ctx` for `config`, with room for
    /// `max_ranges` user ranges (not nested) per pass.
    pub(crate) fn new(
        api: &'static cs::Cupti,
        ctx: &Arc<CudaContext>,
        config: Arc<Config>,
        max_ranges: usize,
    ) -> Result<Self, HardwareError> {
        Self::with_mode(api, ctx, config, max_ranges, RangeMode::User)
    }

    /// Enables the range profiler on `ctx` for `config`, its ranges made as
    /// `mode` says, with room for `max_ranges` ranges (not nested) per
    /// pass.
    pub(crate) fn with_mode(
        api: &'static cs::Cupti,
        ctx: &Arc<CudaContext>,
        config: Arc<Config>,
        max_ranges: usize,
        mode: RangeMode,
    ) -> Result<Self, HardwareError> {
        let claim = Claim::take(ctx.cu_ctx() as usize)?;
        bind(ctx)?;
        let mut enable: cs::CUpti_RangeProfiler_Enable_Params = params();
        enable.ctx = ctx.cu_ctx().cast();
        // SAFETY: valid parameters; the context is alive (held) and current.
        let r = traced("cuptiRangeProfilerEnable", || unsafe {
            api.cuptiRangeProfilerEnable(&mut enable)
        });
        check(api, "cuptiRangeProfilerEnable", r)?;
        let mut session = Self {
            api,
            ctx: ctx.clone(),
            config,
            mode,
            object: enable.pRangeProfilerObject,
            counter_data: Box::new([]),
            max_ranges,
            pushed: 0,
            depth: 0,
            started: false,
            claim,
        };
        // From here on, the session's drop disables the profiler.
        session.configure()?;
        Ok(session)
    }

    fn configure(&mut self) -> Result<(), HardwareError> {
        let api = self.api;
        let mut names: Vec<*const c_char> =
            self.config.metrics.iter().map(|m| m.as_ptr()).collect();
        let mut size: cs::CUpti_RangeProfiler_GetCounterDataSize_Params = params();
        size.pRangeProfilerObject = self.object;
        size.pMetricNames = names.as_mut_ptr();
        size.numMetrics = names.len();
        size.maxNumOfRanges = self.max_ranges;
        size.maxNumRangeTreeNodes = u32::try_from(self.max_ranges).unwrap_or(u32::MAX);
        // SAFETY: valid parameters; the names outlive the call.
        let r = traced("cuptiRangeProfilerGetCounterDataSize", || unsafe {
            api.cuptiRangeProfilerGetCounterDataSize(&mut size)
        });
        check(api, "cuptiRangeProfilerGetCounterDataSize", r)?;
        self.counter_data = vec![0u8; size.counterDataSize].into_boxed_slice();
        let mut init: cs::CUpti_RangeProfiler_CounterDataImage_Initialize_Params = params();
        init.pRangeProfilerObject = self.object;
        init.counterDataSize = self.counter_data.len();
        init.pCounterData = self.counter_data.as_mut_ptr();
        // SAFETY: the image holds the size CUPTI asked for, and stays at
        // this address for the session's life (a boxed slice, never
        // reallocated).
        let r = traced("cuptiRangeProfilerCounterDataImageInitialize", || unsafe {
            api.cuptiRangeProfilerCounterDataImageInitialize(&mut init)
        });
        check(api, "cuptiRangeProfilerCounterDataImageInitialize", r)?;
        let mut set: cs::CUpti_RangeProfiler_SetConfig_Params = params();
        set.pRangeProfilerObject = self.object;
        set.configSize = self.config.image.len();
        set.pConfig = self.config.image.as_ptr();
        set.counterDataImageSize = self.counter_data.len();
        set.pCounterDataImage = self.counter_data.as_mut_ptr();
        (set.range, set.replayMode) = match self.mode {
            RangeMode::User => (
                cs::CUpti_ProfilerRange::CUPTI_UserRange,
                cs::CUpti_ProfilerReplayMode::CUPTI_UserReplay,
            ),
            RangeMode::AutoKernelReplay => (
                cs::CUpti_ProfilerRange::CUPTI_AutoRange,
                cs::CUpti_ProfilerReplayMode::CUPTI_KernelReplay,
            ),
        };
        set.maxRangesPerPass = self.max_ranges;
        set.numNestingLevels = 1;
        set.minNestingLevel = 1;
        set.passIndex = 0;
        set.targetNestingLevel = 1;
        // SAFETY: valid parameters; the config image (held in `config`)
        // and the counter data image live as long as the session.
        let r = traced("cuptiRangeProfilerSetConfig", || unsafe {
            api.cuptiRangeProfilerSetConfig(&mut set)
        });
        check(api, "cuptiRangeProfilerSetConfig", r)
    }

    /// Initializes the counter data image again, for a new measurement (see
    /// the module docs; `experiment_restart_after_decode` shows why).
    pub(crate) fn reinitialize_counter_data(&mut self) -> Result<(), HardwareError> {
        let mut init: cs::CUpti_RangeProfiler_CounterDataImage_Initialize_Params = params();
        init.pRangeProfilerObject = self.object;
        init.counterDataSize = self.counter_data.len();
        init.pCounterData = self.counter_data.as_mut_ptr();
        // SAFETY: the session's own image, of the size CUPTI asked for, at
        // the address CUPTI was configured with.
        let r = traced("cuptiRangeProfilerCounterDataImageInitialize", || unsafe {
            self.api
                .cuptiRangeProfilerCounterDataImageInitialize(&mut init)
        });
        check(self.api, "cuptiRangeProfilerCounterDataImageInitialize", r)
    }

    /// The config measured.
    pub(crate) fn config(&self) -> &Arc<Config> {
        &self.config
    }

    /// Ranges pushed so far.
    pub(crate) fn pushed(&self) -> usize {
        self.pushed
    }

    /// The most ranges a pass holds.
    pub(crate) fn max_ranges(&self) -> usize {
        self.max_ranges
    }

    /// Starts a pass.
    pub(crate) fn start(&mut self) -> Result<(), HardwareError> {
        bind(&self.ctx)?;
        let mut p: cs::CUpti_RangeProfiler_Start_Params = params();
        p.pRangeProfilerObject = self.object;
        // SAFETY: valid parameters; our enabled object.
        let r = traced("cuptiRangeProfilerStart", || unsafe {
            self.api.cuptiRangeProfilerStart(&mut p)
        });
        check(self.api, "cuptiRangeProfilerStart", r)?;
        self.started = true;
        self.pushed = 0;
        Ok(())
    }

    /// Opens a user range named `name` (unique within the pass: CUPTI
    /// merges ranges of one name): the work launched on the context from
    /// now until [`Session::pop`] is counted in it.
    pub(crate) fn push(&mut self, name: &str) -> Result<(), HardwareError> {
        if self.pushed >= self.max_ranges {
            return Err(HardwareError::TooManyRanges {
                limit: self.max_ranges,
            });
        }
        let name = CString::new(name).map_err(|_| HardwareError::Cupti {
            call: "cuptiRangeProfilerPushRange",
            code: 0,
            result: "a range name with a NUL byte".into(),
        })?;
        bind(&self.ctx)?;
        let mut p: cs::CUpti_RangeProfiler_PushRange_Params = params();
        p.pRangeProfilerObject = self.object;
        p.pRangeName = name.as_ptr();
        // SAFETY: valid parameters; CUPTI copies the name.
        let r = traced("cuptiRangeProfilerPushRange", || unsafe {
            self.api.cuptiRangeProfilerPushRange(&mut p)
        });
        check(self.api, "cuptiRangeProfilerPushRange", r)?;
        self.pushed += 1;
        self.depth += 1;
        Ok(())
    }

    /// Closes the open user range.
    pub(crate) fn pop(&mut self) -> Result<(), HardwareError> {
        bind(&self.ctx)?;
        let mut p: cs::CUpti_RangeProfiler_PopRange_Params = params();
        p.pRangeProfilerObject = self.object;
        // SAFETY: valid parameters; our enabled object.
        let r = traced("cuptiRangeProfilerPopRange", || unsafe {
            self.api.cuptiRangeProfilerPopRange(&mut p)
        });
        self.depth = self.depth.saturating_sub(1);
        check(self.api, "cuptiRangeProfilerPopRange", r)
    }

    /// Ends the pass; whether every pass the config needs is done.
    pub(crate) fn stop(&mut self) -> Result<bool, HardwareError> {
        bind(&self.ctx)?;
        let mut p: cs::CUpti_RangeProfiler_Stop_Params = params();
        p.pRangeProfilerObject = self.object;
        // SAFETY: valid parameters; our enabled object.
        let r = traced("cuptiRangeProfilerStop", || unsafe {
            self.api.cuptiRangeProfilerStop(&mut p)
        });
        self.started = false;
        check(self.api, "cuptiRangeProfilerStop", r)?;
        Ok(p.isAllPassSubmitted != 0)
    }

    /// Waits for the context's work, then decodes what the hardware
    /// counted into the counter data image; returns its ranges, each with
    /// the config's metrics' values, and how many CUPTI dropped.
    pub(crate) fn decode(&mut self) -> Result<(Vec<DecodedRange>, usize), HardwareError> {
        bind(&self.ctx)?;
        self.ctx.synchronize().map_err(|e| HardwareError::Driver {
            call: "cuCtxSynchronize",
            error: e.to_string(),
        })?;
        let api = self.api;
        let mut p: cs::CUpti_RangeProfiler_DecodeData_Params = params();
        p.pRangeProfilerObject = self.object;
        // SAFETY: valid parameters; CUPTI writes into the counter data image
        // it was configured with, which the session holds.
        let r = traced("cuptiRangeProfilerDecodeData", || unsafe {
            api.cuptiRangeProfilerDecodeData(&mut p)
        });
        check(api, "cuptiRangeProfilerDecodeData", r)?;
        let dropped = p.numOfRangeDropped;
        let mut info: cs::CUpti_RangeProfiler_GetCounterDataInfo_Params = params();
        info.pCounterDataImage = self.counter_data.as_ptr();
        info.counterDataImageSize = self.counter_data.len();
        // SAFETY: valid parameters over the decoded image.
        let r = traced("cuptiRangeProfilerGetCounterDataInfo", || unsafe {
            api.cuptiRangeProfilerGetCounterDataInfo(&mut info)
        });
        check(api, "cuptiRangeProfilerGetCounterDataInfo", r)?;
        let host = crate::lock(&self.config.host);
        let mut ranges = Vec::with_capacity(info.numTotalRanges);
        for i in 0..info.numTotalRanges {
            let mut p: cs::CUpti_RangeProfiler_CounterData_GetRangeInfo_Params = params();
            p.pCounterDataImage = self.counter_data.as_ptr();
            p.counterDataImageSize = self.counter_data.len();
            p.rangeIndex = i;
            p.rangeDelimiter = c"/".as_ptr();
            // SAFETY: valid parameters over the decoded image, `i` below
            // its range count.
            let r = traced("cuptiRangeProfilerCounterDataGetRangeInfo", || unsafe {
                api.cuptiRangeProfilerCounterDataGetRangeInfo(&mut p)
            });
            check(api, "cuptiRangeProfilerCounterDataGetRangeInfo", r)?;
            let name = if p.rangeName.is_null() {
                String::new()
            } else {
                // SAFETY: non-null, a NUL-terminated string CUPTI returned
                // (copied at once).
                unsafe { CStr::from_ptr(p.rangeName) }
                    .to_string_lossy()
                    .into_owned()
            };
            let values = traced("cuptiProfilerHostEvaluateToGpuValues", || {
                host.evaluate(&self.counter_data, i, &self.config.metrics)
            })?;
            ranges.push(DecodedRange { name, values });
        }
        Ok((ranges, dropped))
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // Whatever state it was left in: ranges closed, the pass ended, the
        // profiler disabled on the context.
        let _ = bind(&self.ctx);
        while self.depth > 0 {
            let _ = self.pop();
        }
        if self.started {
            let _ = self.stop();
        }
        let mut p: cs::CUpti_RangeProfiler_Disable_Params = params();
        p.pRangeProfilerObject = self.object;
        // SAFETY: our enabled object, disabled once, here.
        let _ = traced("cuptiRangeProfilerDisable", || unsafe {
            self.api.cuptiRangeProfilerDisable(&mut p)
        });
    }
}

/// `f()`, timed on stderr where `GPU_COUNTERS_TRACE_CUPTI` is set (what
/// each range-profiler call costs on the CPU).
fn traced<T>(call: &str, f: impl FnOnce() -> T) -> T {
    static TRACE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    if !*TRACE.get_or_init(|| std::env::var_os("GPU_COUNTERS_TRACE_CUPTI").is_some()) {
        return f();
    }
    let t = std::time::Instant::now();
    let out = f();
    eprintln!("cupti {call}: {:.3} ms", t.elapsed().as_secs_f64() * 1e3);
    out
}

/// Makes `ctx` current on this thread (CUPTI's calls act on the current
/// context).
fn bind(ctx: &CudaContext) -> Result<(), HardwareError> {
    ctx.bind_to_thread().map_err(|e| HardwareError::Driver {
        call: "cuCtxSetCurrent",
        error: e.to_string(),
    })
}
