//! `gpu-counters bench --backend cuda`: gpu-counters-cuda's placements
//! against raw CUDA events, a raw `%globaltimer` kernel and raw CUPTI
//! activity records, on one stream of device 0, in one run.
//!
//! The workload is `N` kernels launched back to back on one stream with
//! plain `cuLaunchKernel`: one block of 64 threads doing 16 steps of
//! integer arithmetic on their own words (the Vulkan rows' dispatch), or,
//! with `--kernel-ns T`, one thread spinning on `%globaltimer` for `T` ns
//! (kernels of a known length). The GPU time of a run is two timing
//! events recorded right before the first and right after the last
//! kernel (`cuEventElapsedTime`), the same in every row; host record time
//! is the launch loop with its sampling calls; resolve time is what it
//! takes after the stream finished to get every sample as nanoseconds.
//!
//! CUPTI's launch callbacks are subscribed in every row, the baseline
//! included (gpu-counters-cuda's statistics and zero-intrusion timestamps
//! need them, and CUPTI allows one subscriber): their host cost is in
//! every row. CUPTI's activity buffers are gpu-counters-cuda's (one
//! registration per process), so the raw CUPTI row enables the activity
//! kind itself around its kernels and flushes; the records are parsed by
//! the same buffer callback.

mod clock;
mod zero_intrusion;

pub use clock::CudaCalibrationReport;
pub(crate) use clock::{calibration, resolve};
pub(crate) use zero_intrusion::gated_zero_intrusion;
pub use zero_intrusion::{GatedZeroIntrusionReport, ZeroIntrusionReport};

use crate::stats::median;
use crate::{
    BenchError, CalibrationReport, ComparisonSpec, Harness, HarnessRow, Measurement, Placement,
    ResolveReport, Rows, Tool, Variant, VariantSpec,
};
use cudarc::driver::sys;
use gpu_counters_cuda::{self as gcu, ActivityTracing, TimestampSource};
use gpu_counters_hal::{
    cpu_monotonic_ns, Calibration, CommonCounterSet, CounterSampleBufferDescriptor, SampleStatus,
    TimestampGranularity,
};
use serde::Serialize;
use std::cell::RefCell;
use std::ffi::c_void;
use std::hint::black_box;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

const PTX: &str = r#"
.version 7.0
.target sm_70
.address_size 64

.visible .entry work(.param .u64 data)
{
    .reg .b32 %r<5>;
    .reg .b64 %rd<4>;
    .reg .pred %p;
    ld.param.u64 %rd1, [data];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd2, %r1, 4;
    add.u64 %rd3, %rd1, %rd2;
    ld.global.u32 %r2, [%rd3];
    xor.b32 %r2, %r2, %r1;
    mov.u32 %r3, 0;
LOOP:
    mad.lo.u32 %r2, %r2, 1664525, 1013904223;
    add.u32 %r3, %r3, 1;
    setp.lt.u32 %p, %r3, 16;
    @%p bra LOOP;
    st.global.u32 [%rd3], %r2;
    ret;
}

.visible .entry spin(.param .u64 ns)
{
    .reg .b64 %rd<6>;
    .reg .pred %p;
    ld.param.u64 %rd1, [ns];
    mov.u64 %rd2, %globaltimer;
WAIT:
    mov.u64 %rd3, %globaltimer;
    sub.u64 %rd4, %rd3, %rd2;
    setp.lt.u64 %p, %rd4, %rd1;
    @%p bra WAIT;
    ret;
}

.visible .entry stamp(.param .u64 slot)
{
    .reg .b64 %rd<3>;
    ld.param.u64 %rd1, [slot];
    mov.u64 %rd2, %globaltimer;
    st.volatile.global.u64 [%rd1], %rd2;
    ret;
}

.visible .entry gate(.param .u64 flag, .param .u64 want)
{
    .reg .b64 %rd<4>;
    .reg .pred %p;
    ld.param.u64 %rd1, [flag];
    ld.param.u64 %rd2, [want];
WAIT:
    ld.volatile.global.u64 %rd3, [%rd1];
    setp.lt.u64 %p, %rd3, %rd2;
    @%p bra WAIT;
    ret;
}
"#;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Baseline,
    EventAfter,
    EventsAround,
    GlobaltimerAfter,
    GlobaltimerAround,
    CuptiActivity,
    GcKernelPrecise,
    GcKernelPass,
    GcZeroPass,
    GcZeroRange,
    GcZeroRangeSampled,
}

const KINDS: [Kind; 11] = [
    Kind::Baseline,
    Kind::EventAfter,
    Kind::EventsAround,
    Kind::GlobaltimerAfter,
    Kind::GlobaltimerAround,
    Kind::CuptiActivity,
    Kind::GcKernelPrecise,
    Kind::GcKernelPass,
    Kind::GcZeroPass,
    Kind::GcZeroRange,
    Kind::GcZeroRangeSampled,
];

const BASELINE: &str = "cuda baseline (N kernels)";
const EVENT_AFTER: &str = "raw cuEventRecord after each kernel";
const EVENTS_AROUND: &str = "raw cuEventRecord before and after each kernel";
const GT_AFTER: &str = "raw %globaltimer kernel after each kernel";
const GT_AROUND: &str = "raw %globaltimer kernel before and after each kernel";
const CUPTI: &str = "raw CUPTI activity records of every kernel";
const GC_PRECISE: &str = "gpu-counters-cuda sample_counters precise after each kernel";
const GC_PASS: &str = "gpu-counters-cuda pass attachments per kernel";
const GC_ZERO_PASS: &str = "gpu-counters-cuda zero-intrusion pass attachments per kernel";
const GC_ZERO_RANGE: &str = "gpu-counters-cuda zero-intrusion: 2 samples around all N kernels";
const GC_ZERO_RANGE_SAMPLED: &str =
    "gpu-counters-cuda zero-intrusion, launches after samples traced: 2 samples around the first N-1 of N kernels";

impl Kind {
    /// (name, tool, placement, samples per kernel (None: 2 in all), baseline)
    fn describe(
        self,
    ) -> (
        &'static str,
        Tool,
        Placement,
        Option<u64>,
        Option<&'static str>,
    ) {
        use Placement as P;
        let b = Some(BASELINE);
        match self {
            Kind::Baseline => (BASELINE, Tool::RawCuda, P::None, Some(0), None),
            Kind::EventAfter => (EVENT_AFTER, Tool::CudaEvents, P::Precise, Some(1), b),
            Kind::EventsAround => (EVENTS_AROUND, Tool::CudaEvents, P::Pass, Some(2), b),
            Kind::GlobaltimerAfter => (GT_AFTER, Tool::RawCuda, P::Precise, Some(1), b),
            Kind::GlobaltimerAround => (GT_AROUND, Tool::RawCuda, P::Pass, Some(2), b),
            Kind::CuptiActivity => (CUPTI, Tool::RawCuda, P::Activity, Some(2), b),
            Kind::GcKernelPrecise => (GC_PRECISE, Tool::GpuCountersCuda, P::Precise, Some(1), b),
            Kind::GcKernelPass => (GC_PASS, Tool::GpuCountersCuda, P::Pass, Some(2), b),
            Kind::GcZeroPass => (GC_ZERO_PASS, Tool::GpuCountersCuda, P::Activity, Some(2), b),
            Kind::GcZeroRange => (GC_ZERO_RANGE, Tool::GpuCountersCuda, P::Range, None, b),
            Kind::GcZeroRangeSampled => (
                GC_ZERO_RANGE_SAMPLED,
                Tool::GpuCountersCuda,
                P::Range,
                None,
                b,
            ),
        }
    }
}

/// The comparisons: each gpu-counters-cuda row against the raw tool of its
/// placement (target 1.1), and the kernel placements against CUDA events.
fn comparisons() -> Vec<ComparisonSpec> {
    vec![
        ComparisonSpec {
            variant: GC_PRECISE,
            against: GT_AFTER,
            target: 1.1,
        },
        ComparisonSpec {
            variant: GC_PRECISE,
            against: EVENT_AFTER,
            target: 1.1,
        },
        ComparisonSpec {
            variant: GC_PASS,
            against: GT_AROUND,
            target: 1.1,
        },
        ComparisonSpec {
            variant: GC_PASS,
            against: EVENTS_AROUND,
            target: 1.1,
        },
        ComparisonSpec {
            variant: GC_ZERO_PASS,
            against: CUPTI,
            target: 1.1,
        },
    ]
}

fn check(what: &str, r: sys::CUresult) -> Result<(), BenchError> {
    if r == sys::CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(BenchError::Cuda(format!("{what}: {r:?}")))
    }
}

/// CUDA's device memory the work kernels use.
struct DeviceWords {
    ptr: sys::CUdeviceptr,
}

impl Drop for DeviceWords {
    fn drop(&mut self) {
        // SAFETY: allocated by cuMemAlloc; the stream is synchronized before
        // the harness drops (see `CudaBench::drop`).
        let _ = unsafe { sys::cuMemFree_v2(self.ptr) };
    }
}

/// Host-mapped words for the raw `%globaltimer` rows.
struct MappedStamps {
    host: *mut u64,
    device: sys::CUdeviceptr,
    len: usize,
}

impl Drop for MappedStamps {
    fn drop(&mut self) {
        // SAFETY: allocated by cuMemHostAlloc; no launch writes it any more.
        let _ = unsafe { sys::cuMemFreeHost(self.host.cast()) };
    }
}

/// Everything the CUDA rows record with: one stream, the raw objects, and
/// two gpu-counters-cuda devices on that stream (kernel timestamps and
/// zero-intrusion).
pub(crate) struct CudaBench {
    stream: Arc<cudarc::driver::CudaStream>,
    kernel: gcu::Device,
    zero: Option<gcu::Device>,
    /// Zero-intrusion with [`ActivityTracing::LaunchesAfterSamples`].
    zero_sampled: Option<gcu::Device>,
    _module: Arc<cudarc::driver::CudaModule>,
    work: sys::CUfunction,
    spin: sys::CUfunction,
    stamp: sys::CUfunction,
    gate: sys::CUfunction,
    data: DeviceWords,
    stamps: MappedStamps,
    events: Vec<sys::CUevent>,
    brackets: [sys::CUevent; 2],
    kernel_buffer: gcu::CounterSampleBuffer,
    zero_buffer: Option<gcu::CounterSampleBuffer>,
    zero_sampled_buffer: Option<gcu::CounterSampleBuffer>,
    kernel_cal: Calibration,
    zero_cal: Option<Calibration>,
    zero_sampled_cal: Option<Calibration>,
    n: u32,
    kernel_ns: u64,
    /// CUPTI's records parsed when the raw CUPTI row started.
    records_before: u64,
}

impl Drop for CudaBench {
    fn drop(&mut self) {
        let _ = self.stream.synchronize();
        for e in self.events.iter().chain(&self.brackets) {
            // SAFETY: created by cuEventCreate; the stream is idle.
            let _ = unsafe { sys::cuEventDestroy_v2(*e) };
        }
    }
}

fn event(flags: sys::CUevent_flags) -> Result<sys::CUevent, BenchError> {
    let mut e = std::ptr::null_mut();
    // SAFETY: a valid out-pointer; the context is bound.
    check("cuEventCreate", unsafe {
        sys::cuEventCreate(&mut e, flags as u32)
    })?;
    Ok(e)
}

impl CudaBench {
    /// The harness on device 0, and notes on what is not offered.
    fn new(n: u32, kernel_ns: u64, notes: &mut Vec<String>) -> Result<Self, BenchError> {
        let cuda = |e: gpu_counters_cuda::OpenError| BenchError::Cuda(e.to_string());
        let kernel = gcu::Device::open(0).map_err(cuda)?;
        let stream = kernel.stream().clone();
        let zero = match gcu::Device::from_stream_with(
            stream.clone(),
            &gcu::DeviceOptions {
                timestamps: TimestampSource::Activity,
                ..gcu::DeviceOptions::default()
            },
        ) {
            Ok(z) => Some(z),
            Err(e) => {
                notes.push(format!("zero-intrusion rows skipped: {e}"));
                None
            }
        };
        let zero_sampled = match zero.is_some().then(|| {
            gcu::Device::from_stream_with(
                stream.clone(),
                &gcu::DeviceOptions {
                    timestamps: TimestampSource::Activity,
                    activity_tracing: ActivityTracing::LaunchesAfterSamples,
                    ..gcu::DeviceOptions::default()
                },
            )
        }) {
            Some(Ok(z)) => Some(z),
            Some(Err(e)) => {
                notes.push(format!(
                    "zero-intrusion row with launches after samples traced skipped: {e}"
                ));
                None
            }
            None => None,
        };
        let ctx = stream.context().clone();
        let module = ctx
            .load_module(cudarc::nvrtc::Ptx::from_src(PTX))
            .map_err(|e| BenchError::Cuda(format!("cuModuleLoadData: {e}")))?;
        let f = |name: &str| {
            module
                .load_function(name)
                .map(|f| f.cu_function())
                .map_err(|e| BenchError::Cuda(format!("cuModuleGetFunction({name}): {e}")))
        };
        let (work, spin, stamp, gate) = (f("work")?, f("spin")?, f("stamp")?, f("gate")?);
        ctx.bind_to_thread()
            .map_err(|e| BenchError::Cuda(e.to_string()))?;
        let mut ptr = 0;
        // SAFETY: a plain allocation in the bound context.
        check("cuMemAlloc", unsafe { sys::cuMemAlloc_v2(&mut ptr, 256) })?;
        let data = DeviceWords { ptr };
        // SAFETY: as above; 256 bytes of non-zero data.
        check("cuMemsetD8", unsafe { sys::cuMemsetD8_v2(ptr, 0x5a, 256) })?;
        let len = 2 * n as usize;
        let mut host = std::ptr::null_mut();
        // SAFETY: a page-locked, device-mapped allocation of `len` words.
        check("cuMemHostAlloc", unsafe {
            sys::cuMemHostAlloc(&mut host, len * 8, sys::CU_MEMHOSTALLOC_DEVICEMAP)
        })?;
        let mut device = 0;
        // SAFETY: `host` was allocated with DEVICEMAP in this context.
        check("cuMemHostGetDevicePointer", unsafe {
            sys::cuMemHostGetDevicePointer_v2(&mut device, host, 0)
        })?;
        let stamps = MappedStamps {
            host: host.cast(),
            device,
            len,
        };
        let mut events = Vec::with_capacity(len);
        for _ in 0..len {
            events.push(event(sys::CUevent_flags::CU_EVENT_DEFAULT)?);
        }
        let brackets = [
            event(sys::CUevent_flags::CU_EVENT_DEFAULT)?,
            event(sys::CUevent_flags::CU_EVENT_DEFAULT)?,
        ];
        let buffer = |d: &gcu::Device| {
            d.make_counter_sample_buffer(&CounterSampleBufferDescriptor::new(
                CommonCounterSet::Timestamp,
                "bench samples",
                2 * n,
            ))
        };
        let kernel_buffer = buffer(&kernel)?;
        let zero_buffer = zero.as_ref().map(buffer).transpose()?;
        let zero_sampled_buffer = zero_sampled.as_ref().map(buffer).transpose()?;
        let kernel_cal = kernel.calibration()?;
        let zero_cal = zero.as_ref().map(|z| z.calibration()).transpose()?;
        let zero_sampled_cal = zero_sampled.as_ref().map(|z| z.calibration()).transpose()?;
        Ok(Self {
            stream,
            kernel,
            zero,
            zero_sampled,
            _module: module,
            work,
            spin,
            stamp,
            gate,
            data,
            stamps,
            events,
            brackets,
            kernel_buffer,
            zero_buffer,
            zero_sampled_buffer,
            kernel_cal,
            zero_cal,
            zero_sampled_cal,
            n,
            kernel_ns,
            records_before: 0,
        })
    }

    fn raw_stream(&self) -> sys::CUstream {
        self.stream.cu_stream()
    }

    /// One kernel of the workload.
    fn launch_work(&self) -> Result<(), BenchError> {
        let (f, threads) = if self.kernel_ns > 0 {
            (self.spin, 1)
        } else {
            (self.work, 64)
        };
        let mut data = self.data.ptr;
        let mut ns = self.kernel_ns;
        let mut arg = if self.kernel_ns > 0 {
            &mut ns as *mut u64 as *mut c_void
        } else {
            &mut data as *mut u64 as *mut c_void
        };
        let args = &mut arg as *mut *mut c_void;
        // SAFETY: `work` takes a device address of 64 u32s (the
        // allocation), `spin` a u64; one argument given either way.
        check("cuLaunchKernel", unsafe {
            sys::cuLaunchKernel(
                f,
                1,
                1,
                1,
                threads,
                1,
                1,
                0,
                self.raw_stream(),
                args,
                std::ptr::null_mut(),
            )
        })
    }

    /// The raw `%globaltimer` kernel into stamp `i`.
    fn launch_stamp(&self, i: usize) -> Result<(), BenchError> {
        let mut slot = self.stamps.device + 8 * i as u64;
        let mut arg = &mut slot as *mut u64 as *mut c_void;
        // SAFETY: `stamp` takes one device address of a mapped word inside
        // the allocation (i < len, checked by the callers' loops).
        check("cuLaunchKernel", unsafe {
            sys::cuLaunchKernel(
                self.stamp,
                1,
                1,
                1,
                1,
                1,
                1,
                0,
                self.raw_stream(),
                &mut arg,
                std::ptr::null_mut(),
            )
        })
    }

    fn record(&self, e: sys::CUevent) -> Result<(), BenchError> {
        // SAFETY: a valid event and stream of the bound context.
        check("cuEventRecord", unsafe {
            sys::cuEventRecord(e, self.raw_stream())
        })
    }

    fn elapsed_ns(&self, a: sys::CUevent, b: sys::CUevent) -> Result<f64, BenchError> {
        let mut ms = 0f32;
        // SAFETY: two recorded, completed events.
        check("cuEventElapsedTime", unsafe {
            sys::cuEventElapsedTime_v2(&mut ms, a, b)
        })?;
        Ok(f64::from(ms) * 1e6)
    }

    fn run(&mut self, kind: Kind) -> Result<Measurement, BenchError> {
        self.stream
            .context()
            .bind_to_thread()
            .map_err(|e| BenchError::Cuda(e.to_string()))?;
        let n = self.n as usize;
        // Buffers are reset before recording (not timed), as in the Vulkan
        // rows.
        match kind {
            Kind::GcKernelPrecise | Kind::GcKernelPass => self.kernel_buffer.reset()?,
            Kind::GcZeroPass | Kind::GcZeroRange => {
                if let Some(b) = &self.zero_buffer {
                    b.reset()?;
                }
            }
            Kind::GcZeroRangeSampled => {
                if let Some(b) = &self.zero_sampled_buffer {
                    b.reset()?;
                }
            }
            _ => {}
        }
        if matches!(kind, Kind::GlobaltimerAfter | Kind::GlobaltimerAround) {
            for i in 0..self.stamps.len {
                // SAFETY: inside the allocation; no launch writes it now
                // (the stream is idle between runs).
                unsafe { std::ptr::write_volatile(self.stamps.host.add(i), 0) };
            }
        }
        let zero = self.zero.clone();
        let zero_buffer = self.zero_buffer.clone();
        let t0 = Instant::now();
        self.record(self.brackets[0])?;
        let mut submission = None;
        match kind {
            Kind::Baseline => {
                for _ in 0..n {
                    self.launch_work()?;
                }
            }
            Kind::EventAfter => {
                for i in 0..n {
                    self.launch_work()?;
                    self.record(self.events[i])?;
                }
            }
            Kind::EventsAround => {
                for i in 0..n {
                    self.record(self.events[2 * i])?;
                    self.launch_work()?;
                    self.record(self.events[2 * i + 1])?;
                }
            }
            Kind::GlobaltimerAfter => {
                for i in 0..n {
                    self.launch_work()?;
                    self.launch_stamp(i)?;
                }
            }
            Kind::GlobaltimerAround => {
                for i in 0..n {
                    self.launch_stamp(2 * i)?;
                    self.launch_work()?;
                    self.launch_stamp(2 * i + 1)?;
                }
            }
            Kind::CuptiActivity => {
                // CUPTI hands full buffers back on its own thread while the
                // kernels run: count from here.
                self.records_before = self.zero_stats_records();
                raw_cupti(true)?;
                for _ in 0..n {
                    self.launch_work()?;
                }
                raw_cupti(false)?;
            }
            Kind::GcKernelPrecise => {
                let mut rec = self.kernel.recorder();
                for i in 0..n {
                    self.launch_work()?;
                    rec.sample_counters(
                        &self.kernel_buffer,
                        i as u32,
                        TimestampGranularity::Precise,
                    )?;
                }
                submission = Some(self.kernel.submit(rec)?);
            }
            Kind::GcKernelPass => {
                let mut rec = self.kernel.recorder();
                for i in 0..n {
                    let pass = rec.begin_compute_pass(&[gcu::PassAttachment {
                        sample_buffer: &self.kernel_buffer,
                        start_of_encoder_sample_index: Some(2 * i as u32),
                        end_of_encoder_sample_index: Some(2 * i as u32 + 1),
                    }])?;
                    self.launch_work()?;
                    pass.end()?;
                }
                submission = Some(self.kernel.submit(rec)?);
            }
            Kind::GcZeroPass | Kind::GcZeroRange => {
                let (Some(z), Some(b)) = (&zero, &zero_buffer) else {
                    return Err(BenchError::Cuda("no zero-intrusion device".into()));
                };
                let mut rec = z.recorder();
                if kind == Kind::GcZeroPass {
                    for i in 0..n {
                        let pass = rec.begin_compute_pass(&[gcu::PassAttachment {
                            sample_buffer: b,
                            start_of_encoder_sample_index: Some(2 * i as u32),
                            end_of_encoder_sample_index: Some(2 * i as u32 + 1),
                        }])?;
                        self.launch_work()?;
                        pass.end()?;
                    }
                } else {
                    rec.sample_counters(b, 0, TimestampGranularity::Relaxed)?;
                    for _ in 0..n {
                        self.launch_work()?;
                    }
                    rec.sample_counters(b, 1, TimestampGranularity::Precise)?;
                }
                submission = Some(z.submit(rec)?);
            }
            Kind::GcZeroRangeSampled => {
                let (Some(z), Some(b)) = (&self.zero_sampled, &self.zero_sampled_buffer) else {
                    return Err(BenchError::Cuda("no zero-intrusion device".into()));
                };
                // Only the launches after the two samples are traced: the
                // range's first kernel and the stream's last (whose start
                // is the range's end).
                let mut rec = z.recorder();
                rec.sample_counters(b, 0, TimestampGranularity::Relaxed)?;
                for _ in 1..n {
                    self.launch_work()?;
                }
                rec.sample_counters(b, 1, TimestampGranularity::Precise)?;
                self.launch_work()?;
                submission = Some(z.submit(rec)?);
            }
        }
        self.record(self.brackets[1])?;
        let record_ns = t0.elapsed().as_nanos() as f64;
        // SAFETY: a recorded event.
        check("cuEventSynchronize", unsafe {
            sys::cuEventSynchronize(self.brackets[1])
        })?;
        if let Some(s) = &submission {
            s.wait()?;
        }
        let gpu_ns = self.elapsed_ns(self.brackets[0], self.brackets[1])?;
        let t1 = Instant::now();
        let ns = self.resolve(kind, &zero_buffer)?;
        let resolve_ns = t1.elapsed().as_nanos() as f64;
        check_values(&ns, kind.describe().0)?;
        black_box(ns);
        Ok(Measurement {
            gpu_ns,
            record_ns,
            resolve_ns,
        })
    }

    /// Every sample of the run as ns since the first (NaN where missing).
    fn resolve(
        &self,
        kind: Kind,
        zero_buffer: &Option<gcu::CounterSampleBuffer>,
    ) -> Result<Vec<f64>, BenchError> {
        let n = self.n as usize;
        Ok(match kind {
            Kind::Baseline => Vec::new(),
            Kind::EventAfter | Kind::EventsAround => {
                let m = if kind == Kind::EventAfter { n } else { 2 * n };
                let mut out = Vec::with_capacity(m);
                for i in 0..m {
                    out.push(self.elapsed_ns(self.events[0], self.events[i])?);
                }
                out
            }
            Kind::GlobaltimerAfter | Kind::GlobaltimerAround => {
                let m = if kind == Kind::GlobaltimerAfter {
                    n
                } else {
                    2 * n
                };
                // SAFETY: inside the allocation; the stream finished.
                let read = |i: usize| unsafe { std::ptr::read_volatile(self.stamps.host.add(i)) };
                let first = read(0);
                (0..m)
                    .map(|i| match read(i) {
                        0 => f64::NAN,
                        v => v.wrapping_sub(first) as i64 as f64,
                    })
                    .collect()
            }
            Kind::CuptiActivity => {
                raw_flush()?;
                let got = self
                    .zero_stats_records()
                    .saturating_sub(self.records_before);
                // The records of all N kernels (their two timestamps each).
                vec![if got >= self.n as u64 { 0.0 } else { f64::NAN }; 1]
            }
            Kind::GcKernelPrecise | Kind::GcKernelPass => {
                let m = if kind == Kind::GcKernelPrecise {
                    n
                } else {
                    2 * n
                };
                let r = self.kernel_buffer.resolve_counter_range(0..m as u64)?;
                crate::timestamps_ns(&r, &self.kernel_cal)?
            }
            Kind::GcZeroPass | Kind::GcZeroRange | Kind::GcZeroRangeSampled => {
                let m = if kind == Kind::GcZeroPass { 2 * n } else { 2 };
                let (b, cal) = if kind == Kind::GcZeroRangeSampled {
                    (&self.zero_sampled_buffer, &self.zero_sampled_cal)
                } else {
                    (zero_buffer, &self.zero_cal)
                };
                let (Some(b), Some(cal)) = (b, cal) else {
                    return Err(BenchError::Cuda("no zero-intrusion device".into()));
                };
                let r = b.resolve_counter_range(0..m as u64)?;
                if r.statuses().contains(&SampleStatus::NotReady) {
                    return Err(BenchError::Measurement(format!(
                        "{}: samples not ready after the stream finished and CUPTI was flushed",
                        kind.describe().0
                    )));
                }
                crate::timestamps_ns(&r, cal)?
            }
        })
    }

    fn zero_stats_records(&self) -> u64 {
        self.zero
            .as_ref()
            .and_then(|z| z.activity_stats())
            .map_or(0, |s| s.records)
    }
}

fn check_values(ns: &[f64], what: &str) -> Result<(), BenchError> {
    crate::check_written(ns, what)
}

/// Raw CUPTI: the concurrent-kernel activity kind on or off.
fn raw_cupti(on: bool) -> Result<(), BenchError> {
    use cudarc::cupti::sys as cs;
    let kind = cs::CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    // SAFETY: plain CUPTI calls (gpu-counters-cuda set the activity API up
    // when the zero-intrusion device opened; the row runs only then).
    let r = unsafe {
        if on {
            cs::cuptiActivityEnable(kind)
        } else {
            cs::cuptiActivityDisable(kind)
        }
    };
    if r != cs::CUptiResult::CUPTI_SUCCESS {
        return Err(BenchError::Cuda(format!(
            "cuptiActivityEnable/Disable: {r:?}"
        )));
    }
    Ok(())
}

fn raw_flush() -> Result<(), BenchError> {
    use cudarc::cupti::sys as cs;
    // SAFETY: a plain CUPTI call.
    let r = unsafe { cs::cuptiActivityFlushAll(0) };
    if r != cs::CUptiResult::CUPTI_SUCCESS {
        return Err(BenchError::Cuda(format!("cuptiActivityFlushAll: {r:?}")));
    }
    Ok(())
}

impl Harness for CudaBench {
    type Kind = Kind;

    fn run(&mut self, kind: Kind) -> Result<Measurement, BenchError> {
        CudaBench::run(self, kind)
    }

    fn busy() -> BenchError {
        BenchError::Cuda("the CUDA harness is already running".into())
    }
}

/// The CUDA rows of `n` kernels (of `kernel_ns` ns each, 0: the arithmetic
/// kernel), their notes and comparisons, and the harness for the other
/// measurements.
pub(crate) fn variants(
    n: u32,
    kernel_ns: u64,
) -> Result<(Rows, Rc<RefCell<CudaBench>>), BenchError> {
    let mut notes = Vec::new();
    let bench = CudaBench::new(n, kernel_ns, &mut notes)?;
    let zero = bench.zero.is_some();
    let zero_sampled = bench.zero_sampled.is_some();
    let bench = Rc::new(RefCell::new(bench));
    let variants = KINDS
        .into_iter()
        .filter(|k| match k {
            Kind::GcZeroPass | Kind::GcZeroRange | Kind::CuptiActivity => zero,
            Kind::GcZeroRangeSampled => zero_sampled,
            _ => true,
        })
        .map(|kind| {
            let (name, tool, placement, per, baseline) = kind.describe();
            let samples = per.map_or(2, |p| p * u64::from(n));
            Box::new(HarnessRow {
                bench: bench.clone(),
                kind,
                spec: VariantSpec {
                    name: name.into(),
                    tool,
                    placement,
                    samples,
                    timestamps_written: if matches!(
                        placement,
                        Placement::Activity | Placement::Range
                    ) {
                        0
                    } else {
                        samples
                    },
                    baseline: baseline.map(Into::into),
                },
            }) as Box<dyn Variant>
        })
        .collect();
    Ok((
        Rows {
            variants,
            notes,
            comparisons: comparisons(),
        },
        bench,
    ))
}

impl CudaBench {
    pub(crate) fn info(&self) -> gpu_counters_hal::DeviceInfo {
        self.kernel.info().clone()
    }

    /// The zero device's clock (delta, uncertainty) and dropped records.
    pub(crate) fn zero_clock(&self) -> (Option<(i64, u64)>, u64) {
        let Some(z) = &self.zero else {
            return (None, 0);
        };
        let c = z.activity_clock().map(|c| (c.delta_ns, c.uncertainty_ns));
        (c, z.activity_stats().map_or(0, |s| s.dropped))
    }

    pub(crate) fn has_zero(&self) -> bool {
        self.zero.is_some()
    }

    pub(crate) fn kernel_ns(&self) -> u64 {
        self.kernel_ns
    }
}
