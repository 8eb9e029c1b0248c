//! gpu-counters on CUDA: hal's backend interface
//! ([`gpu_counters_hal::Backend`]) over the caller's own cudarc context and
//! stream.
//!
//! - The driver is loaded at run time (cudarc's dynamic loading): the crate
//!   builds anywhere, and with no driver [`Device::open`] is a typed
//!   [`OpenError::NoDriver`], never a panic.
//! - A timestamp is `%globaltimer`, the GPU's 64-bit nanosecond timer, read
//!   by a one-thread kernel launched on the stream: it runs after all prior
//!   work on the stream, so both placements (precise and relaxed) are the
//!   same. The kernel writes the value, one 64-bit store (it is never 0:
//!   the host zeroes the word before it is written again, so a value that
//!   is not 0 is its own availability), into page-locked host memory
//!   mapped into the device, which hal's CPU resolve reads without a copy.
//! - A stream is not a command buffer: its work runs as soon as it is
//!   launched. A [`Recorder`] is a range of one stream's work: samples it
//!   writes become available once the work launched before
//!   [`Device::submit`] (or the recorder's drop) is done, which an event
//!   recorded there tells. Nothing is ever abandoned: a recorder dropped
//!   without being submitted is submitted by its drop.
//! - Calibration: a kernel that reads `%globaltimer` the moment it sees a
//!   flag the CPU sets through mapped memory, with the CPU clock read just
//!   before setting it and just after seeing the result: each read bounds
//!   the clocks' offset by its window; 32 reads are intersected
//!   (`calibrate.rs`), and the pair's bound is half the intersection plus
//!   the timer's measured step.
//! - Zero-intrusion timestamps ([`TimestampSource::Activity`], feature
//!   `cupti`): nothing is launched for a sample; its value is a boundary of
//!   the kernels, copies and graph nodes around it from CUPTI's activity
//!   records, on `CLOCK_MONOTONIC` (see `activity.rs` and
//!   [`Device::activity_clock`]).
//! - Counter sets: timestamps (all a device opened with the default
//!   [`DeviceOptions`] offers); statistics, where asked for
//!   ([`DeviceOptions::statistics`]; feature `cupti`, on by default), with
//!   `compute_kernel_invocations` from the launch configurations CUPTI's
//!   callback API reports, exact for a range of one stream's kernels; its
//!   other fields are the error value.
//! - Hardware counters, where asked for ([`DeviceOptions::hardware_counters`];
//!   feature `cupti`): [`Device::hardware_counters`]
//!   lists the chip's metrics through CUPTI's profiler host API, with units
//!   and replay passes, and measures chosen ones over a user range of
//!   CUPTI's range profiler (see [`hardware`]). Where they are offered, so
//!   is stage utilization: `total_cycles` is `sm__cycles_elapsed.max` over
//!   the range between two samples of one recorder, the other fields (no
//!   CUDA meaning) the error value. Where not,
//!   [`Device::hardware_counters_unavailable`] says why, and asking for
//!   stage utilization is a typed `UnsupportedCounterSet` error, never
//!   zeros.
//!
//! Every object holds what it needs (a sample buffer holds its memory,
//! every recording holds the buffers it writes until its work is done), so
//! there is no drop order to get wrong.

#[cfg(feature = "cupti")]
mod activity;
mod backend;
mod calibrate;
#[cfg(feature = "cupti")]
mod cupti;
#[cfg(feature = "cupti")]
pub mod hardware;
mod kernels;
#[cfg(feature = "cupti")]
mod launches;
mod pass;
mod storage;
#[cfg(feature = "cupti")]
pub mod trace;
#[cfg(feature = "cupti")]
mod tracer;
#[cfg(feature = "cupti")]
mod zero;

#[cfg(feature = "cupti")]
pub use activity::ActivityStats;
pub use backend::{
    CounterHeap, CounterSampleBuffer, Cuda, Marker, Recorder, StreamEvent, Submission,
};
#[cfg(feature = "cupti")]
pub use hardware::{
    BaseMetric, HardwareCounters, HardwareError, HardwareMeasurement, HardwareRange, MetricInfo,
    MetricKind, MetricValue,
};
pub use pass::{ComputePass, PassAttachment};
pub use storage::MappedStorage;
#[cfg(feature = "cupti")]
pub use zero::ActivityClock;

use cudarc::driver::{sys, CudaContext, CudaEvent, CudaFunction, CudaStream, DriverError};
use gpu_counters_hal::bookkeeping::Ticket;
use gpu_counters_hal::{
    cpu_monotonic_ns, BackendKind, CalibrationMethod, CommonCounter, CommonCounterSet,
    CounterSamplingPoint, CounterSet, DeviceId, DeviceInfo, DeviceType, Error, Result,
    TimestampPair,
};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};
use storage::MappedWords;

/// Most samples one sample buffer or heap holds (16 bytes of host-mapped
/// memory each).
pub const MAX_SAMPLE_COUNT: u32 = 1 << 24;

/// The calibration reads in one [`Device`] calibration: their offset
/// intervals are intersected (see `calibrate.rs`).
const CALIBRATION_BURST: usize = 32;

/// How long calibration waits for its kernel to start or answer before
/// giving up with an error (the GPU may be busy with other contexts' work).
const CALIBRATION_TIMEOUT: Duration = Duration::from_secs(10);

/// What cudarc's loader looks for.
const DRIVER_NAMES: &str = "libcuda.so, libcuda.so.1 (nvcuda.dll on Windows)";

/// How a [`Device`] is opened. The default is the cheap thing: timestamps
/// only, so that opening a device subscribes nothing process-wide and
/// probes no range profiler; ask for statistics and hardware counters:
///
/// ```no_run
/// use gpu_counters_cuda::{Device, DeviceOptions};
/// let device = Device::open_with(
///     0,
///     &DeviceOptions {
///         statistics: true,
///         ..DeviceOptions::default()
///     },
/// )?;
/// # Ok::<(), gpu_counters_cuda::OpenError>(())
/// ```
#[derive(Debug, Clone)]
pub struct DeviceOptions {
    /// Offer the statistic set: subscribes (once per process) to CUPTI's
    /// launch callbacks, which then run on every kernel launch of the
    /// process. Where CUPTI cannot be loaded or subscribed (another profiler
    /// attached), the set is not offered and
    /// [`Device::statistics_unavailable`] says why (also: built without
    /// the `cupti` feature). Default: off.
    pub statistics: bool,
    /// Offer hardware counters and the stage-utilization set: loads CUPTI's
    /// profiler and probes it on the device once per process (a
    /// range-profiler session enabled and disabled on the context). Where
    /// CUPTI or its profiler cannot be used (no library, an unsupported
    /// device, counters not permitted, another profiler such as Nsight
    /// Compute attached), neither is offered and
    /// [`Device::hardware_counters_unavailable`] says why (also: built
    /// without the `cupti` feature). Default: off.
    pub hardware_counters: bool,
    /// Where timestamps come from. Default: [`TimestampSource::Kernel`].
    pub timestamps: TimestampSource,
    /// Which launches CUPTI traces for zero-intrusion timestamps
    /// ([`TimestampSource::Activity`]; ignored otherwise). Default:
    /// [`ActivityTracing::EveryLaunch`].
    pub activity_tracing: ActivityTracing,
}

/// Which launches CUPTI traces on a zero-intrusion device
/// ([`TimestampSource::Activity`]). Tracing costs GPU time per traced
/// launch (CUPTI's instrumentation: about 260 ns per kernel on an H200),
/// so this is the trade between exact range ends and that cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ActivityTracing {
    /// Every launch, copy and memset on the device's stream while a
    /// recorder is open: a precise sample is the end of the work before
    /// it, exactly. Adds CUPTI's cost to every launch.
    #[default]
    EveryLaunch,
    /// Only the launch that follows each sample on the stream (tracing is
    /// turned on at that launch's entry and off at its exit): a sample is
    /// the start of that launch. A precise sample right after a traced
    /// launch (a pass around one kernel) is still that launch's end. The
    /// start of the next launch is a legal precise placement, since a
    /// stream starts a launch only once all earlier work is done, but it is
    /// later than the end of the work before by the stream's gap between
    /// the two launches, which is large where the stream goes idle between
    /// them. A sample that no launch follows before its recorder is
    /// submitted resolves as `SampleStatus::Error`. CUPTI's cost is paid
    /// once per sample instead of once per launch.
    LaunchesAfterSamples,
}

impl Default for DeviceOptions {
    fn default() -> Self {
        Self {
            statistics: false,
            hardware_counters: false,
            timestamps: TimestampSource::Kernel,
            activity_tracing: ActivityTracing::EveryLaunch,
        }
    }
}

/// Where a device's timestamps come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TimestampSource {
    /// A one-thread `%globaltimer` kernel launched on the stream per
    /// sample: after all prior work, in the GPU's ticks.
    #[default]
    Kernel,
    /// Zero-intrusion: nothing is launched for a sample; its value is a
    /// boundary of the kernels, copies and memsets around it (graph nodes
    /// included), from CUPTI's activity records, on `CLOCK_MONOTONIC`
    /// (feature `cupti`). Precise samples take the end of the work before,
    /// relaxed ones (and a pass's start) the start of the work after;
    /// statistic values are written by the host. A sample with no recorded
    /// work around it, or whose records CUPTI lost, resolves as
    /// `SampleStatus::Error`. See [`Device::activity_clock`] for the
    /// bound, and [`DeviceOptions::activity_tracing`] for which launches are
    /// traced (every one, or only those after samples).
    Activity,
}

/// Why a CUDA device could not be opened or listed.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// No CUDA driver library could be loaded.
    #[error("no CUDA driver: none of {searched} could be loaded; install NVIDIA's driver, or put the directory holding libcuda.so.1 on LD_LIBRARY_PATH")]
    NoDriver {
        /// The library names tried.
        searched: &'static str,
    },
    /// The ordinal names no device.
    #[error("CUDA device {ordinal}: no such device; {there}")]
    NoDevice {
        /// The ordinal asked for.
        ordinal: usize,
        /// How many there are, in words.
        there: String,
    },
    /// A driver call failed.
    #[error("{what}: {error}")]
    Driver {
        /// The call.
        what: &'static str,
        /// The driver's error.
        error: DriverError,
    },
    /// Zero-intrusion timestamps were asked for
    /// ([`TimestampSource::Activity`]) and CUPTI's activity records cannot be
    /// had: `why` names what is missing (the library, one of its functions,
    /// the `cupti` feature) or the call that failed.
    #[error("zero-intrusion timestamps need CUPTI's activity records: {why}")]
    Cupti {
        /// What is missing, or failed.
        why: String,
    },
    /// Setting the device up for sampling failed.
    #[error(transparent)]
    Counters(#[from] Error),
}

/// Whether a CUDA driver library can be loaded.
pub fn driver_present() -> bool {
    // SAFETY: loads (and unloads) NVIDIA's driver library by name, as
    // cudarc does on its first call; its initialisers are the driver's own.
    unsafe { sys::is_culib_present() }
}

fn require_driver() -> std::result::Result<(), OpenError> {
    if driver_present() {
        Ok(())
    } else {
        Err(OpenError::NoDriver {
            searched: DRIVER_NAMES,
        })
    }
}

/// Why zero-intrusion timestamps ([`TimestampSource::Activity`]) cannot be
/// had in this process, naming what is missing (CUPTI's library, one of its
/// functions, the `cupti` feature) or the CUPTI call that failed; `None`
/// where they can. The first call sets CUPTI's activity tracing up for the
/// process (its launch callbacks, timestamp and buffer callbacks).
pub fn zero_intrusion_unavailable() -> Option<String> {
    #[cfg(feature = "cupti")]
    {
        activity::Activity::get().err()
    }
    #[cfg(not(feature = "cupti"))]
    {
        Some("gpu-counters-cuda was built without its `cupti` feature".into())
    }
}

/// The number of CUDA devices (0 where the driver is loaded but reports no
/// device, `CUDA_ERROR_NO_DEVICE`).
pub fn device_count() -> std::result::Result<usize, OpenError> {
    require_driver()?;
    match CudaContext::device_count() {
        Ok(n) => Ok(n.max(0) as usize),
        Err(DriverError(sys::CUresult::CUDA_ERROR_NO_DEVICE)) => Ok(0),
        Err(error) => Err(OpenError::Driver {
            what: "cuDeviceGetCount",
            error,
        }),
    }
}

/// Every CUDA device, opened and described with every counter set it can
/// offer (each opened with statistics and hardware counters asked for; see
/// [`DeviceOptions`]).
pub fn devices() -> std::result::Result<Vec<DeviceInfo>, OpenError> {
    let options = DeviceOptions {
        statistics: true,
        hardware_counters: true,
        ..DeviceOptions::default()
    };
    (0..device_count()?)
        .map(|i| Device::open_with(i, &options).map(|d| d.shared.info.clone()))
        .collect()
}

/// Maps a driver error of the call `what` onto hal's errors: out of memory
/// as [`Error::OutOfMemory`], a failed or faulted launch and a destroyed
/// context as [`Error::DeviceLost`], anything else as [`Error::Internal`];
/// the message names `what` and the driver's error.
pub fn map_driver_error(what: &str, e: DriverError) -> Error {
    driver_err(what)(e)
}

/// Maps a driver error onto hal's errors.
pub(crate) fn driver_err(what: &str) -> impl Fn(DriverError) -> Error + '_ {
    move |e| match e.0 {
        sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY => Error::OutOfMemory(format!("{what}: {e}")),
        sys::CUresult::CUDA_ERROR_LAUNCH_FAILED
        | sys::CUresult::CUDA_ERROR_ILLEGAL_ADDRESS
        | sys::CUresult::CUDA_ERROR_ECC_UNCORRECTABLE
        | sys::CUresult::CUDA_ERROR_HARDWARE_STACK_ERROR
        | sys::CUresult::CUDA_ERROR_ILLEGAL_INSTRUCTION
        | sys::CUresult::CUDA_ERROR_CONTEXT_IS_DESTROYED => {
            Error::DeviceLost(format!("{what}: {e}"))
        }
        _ => Error::Internal(format!("{what}: {e}")),
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Work launched and not yet seen finished: the event recorded after it and
/// the recording's ticket.
type Pending = VecDeque<(Arc<CudaEvent>, Ticket)>;

pub(crate) struct Shared {
    /// Tells devices apart, for refusing another device's objects.
    pub(crate) id: DeviceId,
    pub(crate) ctx: Arc<CudaContext>,
    /// The caller's stream, that samples are launched on.
    pub(crate) stream: Arc<CudaStream>,
    /// A stream of our own for calibration, so that it never waits behind
    /// the caller's work.
    calibration_stream: Arc<CudaStream>,
    pub(crate) timestamp: CudaFunction,
    pub(crate) store: CudaFunction,
    calibrate: CudaFunction,
    /// The launch counts statistics come from, where offered.
    #[cfg(feature = "cupti")]
    pub(crate) launches: Option<&'static launches::Launches>,
    /// Why the statistic set is not offered, where it is not.
    statistics_unavailable: Option<String>,
    /// The hardware counters, or why there are none.
    #[cfg(feature = "cupti")]
    pub(crate) hardware: Result<hardware::HardwareCounters, hardware::HardwareError>,
    /// Why hardware counters (and stage utilization) are not offered.
    hardware_unavailable: Option<String>,
    pub(crate) info: DeviceInfo,
    /// `%globaltimer`'s step, in ns, measured at open.
    timer_step_ns: u64,
    pending: Mutex<Pending>,
    /// Calibration's flag and answer words, kept between calibrations.
    calibration_words: Mutex<Option<MappedWords>>,
    /// Zero-intrusion tracing, on a [`TimestampSource::Activity`] device.
    #[cfg(feature = "cupti")]
    pub(crate) zero: Option<zero::DeviceActivity>,
}

impl Shared {
    /// Completes the tickets of every recording whose work is done, in
    /// launch order (and, zero-intrusion, writes the samples now known).
    pub(crate) fn poll(&self) -> Result<()> {
        {
            let mut pending = lock(&self.pending);
            while let Some((event, ticket)) = pending.front() {
                match event.try_is_complete() {
                    Ok(true) => {
                        ticket.complete();
                        pending.pop_front();
                    }
                    Ok(false) => break,
                    Err(e) => return Err(driver_err("cuEventQuery")(e)),
                }
            }
        }
        #[cfg(feature = "cupti")]
        if let Some(z) = &self.zero {
            z.settle()?;
        }
        Ok(())
    }

    /// Queues `ticket`'s completion behind all work launched on the stream
    /// so far; `held` stays alive until then.
    pub(crate) fn enqueue(
        &self,
        ticket: &Ticket,
        held: gpu_counters_hal::bookkeeping::Held,
    ) -> Result<Arc<CudaEvent>> {
        ticket.set_phase(gpu_counters_hal::bookkeeping::Phase::Submitted);
        ticket.hold_until_complete(held);
        let recorded = self
            .ctx
            .new_event(None)
            .and_then(|e| e.record(&self.stream).map(|()| e));
        match recorded {
            Ok(event) => {
                let event = Arc::new(event);
                lock(&self.pending).push_back((event.clone(), ticket.clone()));
                Ok(event)
            }
            Err(e) => {
                // No event to tell when the work is done: wait for it here,
                // so nothing it writes is freed early.
                let waited = self.stream.synchronize();
                ticket.complete();
                waited.map_err(driver_err("cuStreamSynchronize"))?;
                Err(driver_err("cuEventRecord")(e))
            }
        }
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        // Every launch that writes a buffer must finish before the buffers
        // held for it are freed.
        let _ = self.stream.synchronize();
        let pending = std::mem::take(&mut *lock(&self.pending));
        for (_, ticket) in pending {
            ticket.complete();
        }
        // The range profiler kept enabled for reuse on the context is
        // disabled with the device.
        #[cfg(feature = "cupti")]
        hardware::release_idle(self.ctx.cu_ctx() as usize);
    }
}

/// A CUDA context and stream as a gpu-counters device. Cloning shares it.
#[derive(Clone)]
pub struct Device {
    pub(crate) shared: Arc<Shared>,
}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Device")
            .field("name", &self.shared.info.name)
            .field("ordinal", &self.shared.ctx.ordinal())
            .finish()
    }
}

impl Device {
    /// Opens device `ordinal`'s primary context with a new stream of its
    /// own, with the default [`DeviceOptions`]: timestamps only.
    pub fn open(ordinal: usize) -> std::result::Result<Self, OpenError> {
        Self::open_with(ordinal, &DeviceOptions::default())
    }

    /// [`Device::open`] with `options`.
    pub fn open_with(
        ordinal: usize,
        options: &DeviceOptions,
    ) -> std::result::Result<Self, OpenError> {
        let count = device_count()?;
        if ordinal >= count {
            let there = match count {
                0 => "there are no CUDA devices".to_string(),
                1 => "there is 1 device (ordinal 0)".to_string(),
                n => format!("there are {n} devices (ordinals 0 to {})", n - 1),
            };
            return Err(OpenError::NoDevice { ordinal, there });
        }
        let ctx = CudaContext::new(ordinal).map_err(|error| OpenError::Driver {
            what: "cuDevicePrimaryCtxRetain",
            error,
        })?;
        let stream = ctx.new_stream().map_err(|error| OpenError::Driver {
            what: "cuStreamCreate",
            error,
        })?;
        Self::from_stream_with(stream, options)
    }

    /// Samples on the caller's own `stream` (of the caller's cudarc
    /// context): timestamps are launched on it, after the caller's work.
    /// Default [`DeviceOptions`]: timestamps only.
    pub fn from_stream(stream: Arc<CudaStream>) -> std::result::Result<Self, OpenError> {
        Self::from_stream_with(stream, &DeviceOptions::default())
    }

    /// [`Device::from_stream`] with `options`.
    pub fn from_stream_with(
        stream: Arc<CudaStream>,
        options: &DeviceOptions,
    ) -> std::result::Result<Self, OpenError> {
        let ctx = stream.context().clone();
        let driver = |what| move |error| OpenError::Driver { what, error };
        let module = ctx
            .load_module(cudarc::nvrtc::Ptx::from_src(kernels::PTX))
            .map_err(driver("cuModuleLoadData (gpu-counters' PTX)"))?;
        let timestamp = module
            .load_function("gc_timestamp")
            .map_err(driver("cuModuleGetFunction"))?;
        let calibrate = module
            .load_function("gc_calibrate")
            .map_err(driver("cuModuleGetFunction"))?;
        let store = module
            .load_function("gc_store")
            .map_err(driver("cuModuleGetFunction"))?;
        let step_kernel = module
            .load_function("gc_timer_step")
            .map_err(driver("cuModuleGetFunction"))?;
        #[cfg(feature = "cupti")]
        let probe = module
            .load_function("gc_probe")
            .map_err(driver("cuModuleGetFunction"))?;
        #[cfg(feature = "cupti")]
        let (launches, statistics_unavailable) = if options.statistics {
            match launches::Launches::get() {
                Ok(l) => {
                    for f in [&timestamp, &calibrate, &store, &step_kernel] {
                        l.exclude(f.cu_function());
                    }
                    (Some(l), None)
                }
                Err(why) => (None, Some(why)),
            }
        } else {
            (None, Some("DeviceOptions::statistics is off".to_string()))
        };
        #[cfg(not(feature = "cupti"))]
        let statistics_unavailable = Some(if options.statistics {
            "built without the `cupti` feature".to_string()
        } else {
            "DeviceOptions::statistics is off".to_string()
        });
        #[cfg(feature = "cupti")]
        let hardware = if options.hardware_counters {
            hardware::HardwareCounters::probe(ctx.ordinal(), ctx.cu_device(), &ctx, &stream)
        } else {
            Err(hardware::HardwareError::NotSupported {
                why: "DeviceOptions::hardware_counters is off".into(),
            })
        };
        #[cfg(feature = "cupti")]
        let hardware_unavailable = match &hardware {
            Ok(_) => None,
            Err(_) if !options.hardware_counters => {
                Some("DeviceOptions::hardware_counters is off".to_string())
            }
            Err(e) => Some(e.to_string()),
        };
        #[cfg(not(feature = "cupti"))]
        let hardware_unavailable = Some(if options.hardware_counters {
            "built without the `cupti` feature".to_string()
        } else {
            "DeviceOptions::hardware_counters is off".to_string()
        });
        let mut counter_sets = vec![CounterSet {
            set: CommonCounterSet::Timestamp,
            counters: vec![CommonCounter::Timestamp],
        }];
        if hardware_unavailable.is_none() {
            counter_sets.push(CounterSet {
                set: CommonCounterSet::StageUtilization,
                counters: vec![CommonCounter::TotalCycles],
            });
        }
        if statistics_unavailable.is_none() {
            counter_sets.push(CounterSet {
                set: CommonCounterSet::Statistic,
                counters: vec![CommonCounter::ComputeKernelInvocations],
            });
        }
        let calibration_stream = ctx.new_stream().map_err(driver("cuStreamCreate"))?;
        #[cfg(feature = "cupti")]
        let zero = match options.timestamps {
            TimestampSource::Kernel => None,
            TimestampSource::Activity => Some(
                zero::DeviceActivity::new(
                    stream.clone(),
                    calibration_stream.clone(),
                    probe,
                    options.activity_tracing,
                )
                .map_err(|why| OpenError::Cupti { why })?,
            ),
        };
        #[cfg(not(feature = "cupti"))]
        if options.timestamps == TimestampSource::Activity {
            return Err(OpenError::Cupti {
                why: "gpu-counters-cuda was built without its `cupti` feature".into(),
            });
        }
        let calibration_source = match options.timestamps {
            TimestampSource::Kernel => {
                "a %globaltimer kernel answering a flag set through mapped memory (32 reads, their offset intervals intersected)"
            }
            TimestampSource::Activity => {
                "CUPTI activity records on CLOCK_MONOTONIC (cuptiActivityRegisterTimestampCallback); bound: the %globaltimer handshake's plus a %globaltimer probe kernel's enclosure by its record"
            }
        };
        let name = ctx.name().map_err(driver("cuDeviceGetName"))?;
        let (major, minor) = ctx
            .compute_capability()
            .map_err(driver("cuDeviceGetAttribute"))?;
        let mut version = 0i32;
        // SAFETY: a valid out-pointer; the driver is loaded (the context
        // exists).
        let v = unsafe { sys::cuDriverGetVersion(&mut version) };
        if v != sys::CUresult::CUDA_SUCCESS {
            return Err(driver("cuDriverGetVersion")(DriverError(v)));
        }
        let info = DeviceInfo {
            index: ctx.ordinal(),
            name,
            backend: BackendKind::Cuda,
            device_type: DeviceType::DiscreteGpu,
            timestamp_period_ns: 1.0,
            timestamp_valid_bits: 64,
            calibration: CalibrationMethod::Bracketing,
            calibration_source: calibration_source.into(),
            counter_sets,
            sampling_points: vec![CounterSamplingPoint::AtStageBoundary],
            driver: format!("CUDA driver {}.{}", version / 1000, (version % 1000) / 10),
            api_version: format!("CUDA 12.8 API, compute capability {major}.{minor}"),
            max_sample_count: MAX_SAMPLE_COUNT,
        };
        let mut shared = Shared {
            id: DeviceId::allocate(),
            ctx,
            stream,
            calibration_stream,
            timestamp,
            store,
            calibrate,
            #[cfg(feature = "cupti")]
            launches,
            statistics_unavailable,
            #[cfg(feature = "cupti")]
            hardware,
            hardware_unavailable,
            info,
            timer_step_ns: 0,
            pending: Mutex::new(VecDeque::new()),
            calibration_words: Mutex::new(None),
            #[cfg(feature = "cupti")]
            zero,
        };
        shared.timer_step_ns = shared.measure_timer_step(&step_kernel)?;
        Ok(Self {
            shared: Arc::new(shared),
        })
    }

    /// The stream samples are launched on: launch the work to measure here.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.shared.stream
    }

    /// The context.
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.shared.ctx
    }

    /// Why the statistic set is not offered (`None` where it is).
    pub fn statistics_unavailable(&self) -> Option<&str> {
        self.shared.statistics_unavailable.as_deref()
    }

    /// The hardware counter set: the chip's metrics, with units and replay
    /// passes, and measurements of them over ranges of the context's work;
    /// or why it is not offered (the typed error).
    #[cfg(feature = "cupti")]
    pub fn hardware_counters(
        &self,
    ) -> std::result::Result<&hardware::HardwareCounters, hardware::HardwareError> {
        self.shared.hardware.as_ref().map_err(Clone::clone)
    }

    /// Why hardware counters and the stage-utilization set are not offered
    /// (`None` where they are).
    pub fn hardware_counters_unavailable(&self) -> Option<&str> {
        self.shared.hardware_unavailable.as_deref()
    }

    /// `%globaltimer`'s step, as measured when the device was opened: part
    /// of every calibration's bound.
    pub fn timer_step_ns(&self) -> u64 {
        self.shared.timer_step_ns
    }

    /// Where the device's timestamps come from.
    pub fn timestamp_source(&self) -> TimestampSource {
        #[cfg(feature = "cupti")]
        if self.shared.zero.is_some() {
            return TimestampSource::Activity;
        }
        TimestampSource::Kernel
    }

    /// Zero-intrusion devices: CUPTI's clock against `%globaltimer`, as
    /// last measured by a probe kernel on the calibration stream (one per
    /// calibration, read once its record comes back). A zero-intrusion
    /// timestamp's bound is the `%globaltimer` calibration's plus
    /// [`ActivityClock::extra_bound_ns`]: every calibration pair of the
    /// device ([`BackendDevice::sample_timestamps`]) includes it. `None` on
    /// a kernel-timestamp device.
    ///
    /// [`BackendDevice::sample_timestamps`]: gpu_counters_hal::BackendDevice::sample_timestamps
    #[cfg(feature = "cupti")]
    pub fn activity_clock(&self) -> Option<ActivityClock> {
        self.shared.zero.as_ref().and_then(|z| z.clock())
    }

    /// Zero-intrusion devices: what CUPTI's activity tracing did so far in
    /// the process (records, drops, lost samples). `None` on a
    /// kernel-timestamp device.
    #[cfg(feature = "cupti")]
    pub fn activity_stats(&self) -> Option<ActivityStats> {
        self.shared.zero.as_ref().map(|z| z.stats())
    }

    /// `n` raw handshake reads, as calibration takes them: for each, the
    /// `CLOCK_MONOTONIC` ns just before the CPU set the flag, the
    /// `%globaltimer` value the GPU read once it saw it, and the ns just
    /// after the CPU saw the answer. For checking a calibration's bound
    /// (each read's GPU value must convert into its window ± the bound) and
    /// for benchmarks. On a zero-intrusion device the values are
    /// `%globaltimer`'s, not CUPTI's clock.
    pub fn handshake_reads(&self, n: usize) -> Result<Vec<(u64, u64, u64)>> {
        self.shared
            .with_calibration_words(|w| (0..n).map(|_| self.shared.calibrated_read(w)).collect())
    }

    /// A recorder: a range of the stream's work, from now until it is
    /// submitted.
    pub fn recorder(&self) -> Recorder {
        Recorder::new(self.clone())
    }

    /// Ends `recorder`'s range: its samples become available once all work
    /// launched on the stream so far is done. Another device's recorder is
    /// refused with `ForeignObject` (its drop then submits it to its own
    /// device, as for any recorder dropped unsubmitted).
    pub fn submit(&self, recorder: Recorder) -> Result<Submission> {
        self.shared.id.check(
            gpu_counters_hal::BackendRecorder::device_id(&recorder),
            "recorder",
        )?;
        recorder.submit()
    }

    /// Completes every finished recording (resolves do this themselves).
    pub fn poll(&self) -> Result<()> {
        self.shared.poll()
    }
}

impl Shared {
    /// The calibration words, made on first use: word 0 the flag, 1..4 the
    /// answer (value, done, started).
    fn with_calibration_words<T>(&self, f: impl FnOnce(&MappedWords) -> Result<T>) -> Result<T> {
        let mut words = lock(&self.calibration_words);
        if words.is_none() {
            *words = Some(MappedWords::new(&self.ctx, 4, "calibration words")?);
        }
        match words.as_ref() {
            Some(w) => f(w),
            None => Err(Error::Internal("calibration words missing".into())),
        }
    }

    /// One calibrated read: the CPU window around the GPU's read of
    /// `%globaltimer`.
    fn calibrated_read(&self, w: &MappedWords) -> Result<(u64, u64, u64)> {
        let word = |i| {
            w.word(i)
                .ok_or_else(|| Error::Internal("calibration word out of range".into()))
        };
        let (flag, value, done, started) = (word(0)?, word(1)?, word(2)?, word(3)?);
        for x in [flag, value, done, started] {
            x.store(0, Ordering::SeqCst);
        }
        // SAFETY: the four words are host-mapped memory that `w` keeps
        // allocated; it is held under `calibration_words`' lock until the
        // stream is synchronized below, after the kernel ended, on every
        // path (the flag is always set before returning).
        unsafe {
            kernels::launch_calibrate(
                &self.calibration_stream,
                &self.calibrate,
                w.device_address(0),
                w.device_address(1),
            )
        }
        .map_err(driver_err("calibration kernel launch"))?;
        let wait_for = |x: &AtomicU64| {
            let deadline = Instant::now() + CALIBRATION_TIMEOUT;
            while x.load(Ordering::Acquire) == 0 {
                if Instant::now() > deadline {
                    return false;
                }
                std::hint::spin_loop();
            }
            true
        };
        let read = if wait_for(started) {
            let before = cpu_monotonic_ns();
            flag.store(1, Ordering::SeqCst);
            let answered = wait_for(done);
            let after = cpu_monotonic_ns();
            answered.then(|| (before, value.load(Ordering::Acquire), after))
        } else {
            None
        };
        // Let the kernel end whatever happened, and wait for it.
        flag.store(1, Ordering::SeqCst);
        self.calibration_stream
            .synchronize()
            .map_err(driver_err("calibration cuStreamSynchronize"))?;
        read.ok_or_else(|| {
            Error::Internal(format!(
                "calibration: the GPU did not answer within {CALIBRATION_TIMEOUT:?}"
            ))
        })
    }

    /// `%globaltimer`'s step: the largest of 16 measurements by a kernel
    /// that waits for the timer to change twice and takes the second
    /// change's size.
    fn measure_timer_step(
        &self,
        step_kernel: &CudaFunction,
    ) -> std::result::Result<u64, OpenError> {
        const ROUNDS: usize = 16;
        let words = MappedWords::new(&self.ctx, 2 * ROUNDS, "timer step words")?;
        let mut launched = Ok(());
        for r in 0..ROUNDS {
            // SAFETY: two words at `2r` of `words`, which lives until after
            // the stream is synchronized below (on every path: a failed
            // launch only stops further ones).
            launched = unsafe {
                kernels::launch_timestamp(
                    &self.calibration_stream,
                    step_kernel,
                    words.device_address(2 * r),
                )
            };
            if launched.is_err() {
                break;
            }
        }
        let synced = self.calibration_stream.synchronize();
        launched.map_err(|error| OpenError::Driver {
            what: "timer step kernel launch",
            error,
        })?;
        synced.map_err(|error| OpenError::Driver {
            what: "cuStreamSynchronize",
            error,
        })?;
        let step = (0..ROUNDS)
            .map(|r| words.word(2 * r).map_or(0, |w| w.load(Ordering::Acquire)))
            .max()
            .unwrap_or(0);
        if step == 0 {
            return Err(OpenError::Counters(Error::Internal(
                "the timer step kernel wrote nothing".into(),
            )));
        }
        Ok(step)
    }

    /// The calibration pair: a burst of calibrated reads combined
    /// (`calibrate::combine`). Zero-intrusion: moved onto CUPTI's clock by
    /// the latest probe, its bound widened by the probe's, and a new probe
    /// launched.
    pub(crate) fn sample_timestamps(&self) -> Result<TimestampPair> {
        self.with_calibration_words(|w| {
            let mut reads = Vec::with_capacity(CALIBRATION_BURST);
            for _ in 0..CALIBRATION_BURST {
                reads.push(self.calibrated_read(w)?);
            }
            let (pair, _) = calibrate::combine(&reads, self.timer_step_ns)
                .ok_or_else(|| Error::Internal("no calibrated read".into()))?;
            #[cfg(feature = "cupti")]
            if let Some(z) = &self.zero {
                return self.activity_pair(z, pair);
            }
            Ok(pair)
        })
    }

    /// `pair` on CUPTI's clock: its GPU ticks moved by the probe's delta,
    /// its bound widened by the probe's; a new probe launched (called with
    /// the calibration words held: the calibration stream is ours).
    #[cfg(feature = "cupti")]
    fn activity_pair(
        &self,
        z: &zero::DeviceActivity,
        pair: TimestampPair,
    ) -> Result<TimestampPair> {
        z.activity.flush().map_err(Error::Internal)?;
        z.read_probes();
        let clock = z
            .clock()
            .ok_or_else(|| Error::Internal("no activity probe measured".into()))?;
        let ticks = pair.gpu_ticks as i128 + clock.delta_ns as i128;
        let ticks = u64::try_from(ticks)
            .map_err(|_| Error::Internal(format!("activity clock delta {}", clock.delta_ns)))?;
        let extra = clock.extra_bound_ns(pair.cpu_ns);
        z.set_offset(ticks, pair.cpu_ns);
        z.launch_probe()?;
        Ok(TimestampPair {
            cpu_ns: pair.cpu_ns,
            gpu_ticks: ticks,
            max_deviation_ns: pair.max_deviation_ns.saturating_add(extra),
        })
    }
}
