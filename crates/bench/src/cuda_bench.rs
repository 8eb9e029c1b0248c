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

/// The zero-intrusion stream figure: GPU time added to the N kernels by
/// two zero-intrusion samples around them, as a fraction of the
/// baseline's, per round.
#[derive(Debug, Clone, Serialize)]
pub struct ZeroIntrusionReport {
    /// The row measured.
    pub variant: String,
    /// Which launches CUPTI traced: "every launch", or "launches after
    /// samples".
    pub tracing: &'static str,
    /// Kernels in the stream.
    pub kernels: u32,
    /// `--kernel-ns` (0: the arithmetic kernel).
    pub kernel_ns: u64,
    /// Added GPU time over the baseline's, per round: median [min, max].
    pub added_gpu_fraction: Option<crate::RatioSpread>,
    /// The target: at most 1%.
    pub target: f64,
    /// Median baseline GPU ns of the N kernels.
    pub baseline_gpu_ns: f64,
    /// Median GPU ns with the two samples (every kernel traced).
    pub variant_gpu_ns: f64,
    /// Added GPU ns per kernel (median).
    pub added_gpu_ns_per_kernel: f64,
    /// CUPTI's clock against `%globaltimer` (delta ns, ± uncertainty ns),
    /// at the start and at the end of the run.
    pub activity_clock_start: Option<(i64, u64)>,
    /// At the end.
    pub activity_clock_end: Option<(i64, u64)>,
    /// Records CUPTI dropped over the run.
    pub dropped_records: u64,
}

/// The CUDA calibration figures.
#[derive(Debug, Clone, Serialize)]
pub struct CudaCalibrationReport {
    /// Smallest handshake window (after − before) of the burst, ns.
    pub best_window_ns: u64,
    /// Median window, ns.
    pub median_window_ns: u64,
    /// What the old method (best of 8, half window plus a step) bounds.
    pub best_of_8_bound_ns: u64,
    /// The calibration's error bound (32 reads intersected), median over
    /// the calibrations taken.
    pub bound_ns: u64,
    /// Handshake reads checked against their calibration (each GPU value
    /// converted must fall in its CPU window ± the bound).
    pub reads_checked: u64,
    /// Of those, outside: must be 0.
    pub reads_outside: u64,
    /// The zero-intrusion device's bound (handshake plus probe), median.
    pub zero_intrusion_bound_ns: Option<u64>,
}

/// Calibration on the harness's devices: handshake windows, the bound and
/// its check against later reads, drift as for Vulkan.
pub(crate) fn calibration(
    bench: &CudaBench,
    drift_seconds: f64,
) -> Result<(CalibrationReport, CudaCalibrationReport), BenchError> {
    let d = &bench.kernel;
    let reads = d.handshake_reads(256)?;
    let mut windows: Vec<u64> = reads.iter().map(|&(b, _, a)| a - b).collect();
    windows.sort_unstable();
    let step = d.timer_step_ns();
    let best_of_8 = reads
        .chunks(8)
        .map(|c| c.iter().map(|&(b, _, a)| a - b).min().unwrap_or(0))
        .map(|w| w / 2 + w % 2 + step)
        .collect::<Vec<_>>();
    let mut bounds = Vec::new();
    let mut deviations = Vec::new();
    let (mut checked, mut outside) = (0u64, 0u64);
    for _ in 0..20 {
        let cal = d.calibration()?;
        bounds.push(cal.error_bound_ns());
        deviations.push(cal.max_deviation_ns());
        for (before, ticks, after) in d.handshake_reads(32)? {
            let c = cal
                .to_cpu_ns(ticks)
                .map_err(gpu_counters_hal::Error::from)?;
            checked += 1;
            if c.ns + c.error_bound_ns < before || c.ns > after + c.error_bound_ns {
                outside += 1;
            }
        }
    }
    let zero_bounds: Option<Vec<u64>> = bench
        .zero
        .as_ref()
        .map(|z| {
            (0..10)
                .map(|_| z.calibration().map(|c| c.error_bound_ns()))
                .collect::<Result<Vec<_>, _>>()
        })
        .transpose()?;
    let med = |v: &[u64]| median(v.iter().map(|&x| x as f64)).round() as u64;
    let extra = CudaCalibrationReport {
        best_window_ns: windows.first().copied().unwrap_or(0),
        median_window_ns: med(&windows),
        best_of_8_bound_ns: med(&best_of_8),
        bound_ns: med(&bounds),
        reads_checked: checked,
        reads_outside: outside,
        zero_intrusion_bound_ns: zero_bounds.as_deref().map(med),
    };
    // Drift: one calibration kept, one refitted, probed by a kernel
    // timestamp bracketed by the CPU clock, as the Vulkan report does.
    let fixed = d.calibration()?;
    let mut refit = fixed.clone();
    let probe = d.make_counter_sample_buffer(&CounterSampleBufferDescriptor::new(
        CommonCounterSet::Timestamp,
        "drift probe",
        1,
    ))?;
    let start = Instant::now();
    let window = std::time::Duration::from_secs_f64(drift_seconds);
    let mut errors = Vec::new();
    let (mut violations, mut max_bound) = (0u64, 0u64);
    loop {
        d.refresh_calibration(&mut refit)?;
        probe.reset()?;
        let before = cpu_monotonic_ns();
        let mut rec = d.recorder();
        rec.sample_counters(&probe, 0, TimestampGranularity::Precise)?;
        let after = d.submit(rec)?.wait()?;
        let r = probe.resolve_counter_range(0..1)?;
        if r.statuses()[0] != SampleStatus::Written {
            return Err(BenchError::Measurement(format!(
                "drift probe resolved as {:?}",
                r.statuses()[0]
            )));
        }
        let ticks = r.timestamps()?[0].timestamp;
        let t = refit
            .to_cpu_ns(ticks)
            .map_err(gpu_counters_hal::Error::from)?;
        let f = fixed
            .to_cpu_ns_near(ticks, before)
            .map_err(gpu_counters_hal::Error::from)?;
        errors.push(f.ns as f64 - t.ns as f64);
        max_bound = max_bound.max(t.error_bound_ns);
        if t.ns + t.error_bound_ns < before || t.ns > after + t.error_bound_ns {
            violations += 1;
        }
        if start.elapsed() >= window {
            break;
        }
        std::thread::sleep(
            std::time::Duration::from_millis(50).min(window.saturating_sub(start.elapsed())),
        );
    }
    let first = errors.first().copied().unwrap_or(0.0);
    let drift_ns = errors.iter().map(|e| (e - first).abs()).fold(0.0, f64::max);
    Ok((
        CalibrationReport {
            min_max_deviation_ns: deviations.iter().copied().min().unwrap_or(0),
            median_max_deviation_ns: med(&deviations),
            error_bound_ns: med(&bounds),
            drift_ns,
            drift_window_s: start.elapsed().as_secs_f64(),
            bracket_violations: violations,
            method: d.info().calibration.name().to_string(),
            probes: errors.len() as u64,
            max_refit_bound_ns: max_bound,
        },
        extra,
    ))
}

/// Resolve throughput of a buffer of `count` kernel timestamps, against a
/// plain copy of the same bytes.
pub(crate) fn resolve(
    bench: &CudaBench,
    count: u32,
    reps: u32,
) -> Result<ResolveReport, BenchError> {
    let d = &bench.kernel;
    let buffer = d.make_counter_sample_buffer(&CounterSampleBufferDescriptor::new(
        CommonCounterSet::Timestamp,
        "resolve throughput",
        count,
    ))?;
    let mut rec = d.recorder();
    for i in 0..count {
        rec.sample_counters(&buffer, i, TimestampGranularity::Relaxed)?;
    }
    d.submit(rec)?.wait()?;
    let mut resolve = Vec::new();
    let mut fresh = Vec::new();
    let mut copy = Vec::new();
    // Each repetition's copy over its resolve: the two a moment apart.
    let mut ratios = Vec::new();
    let src = vec![1u64; count as usize];
    let mut dst = vec![0u64; count as usize];
    let mut r = gpu_counters_hal::ResolvedCounters::default();
    let all_written = |r: &gpu_counters_hal::ResolvedCounters| {
        let written = r.count(SampleStatus::Written);
        if written == count as usize {
            Ok(())
        } else {
            Err(BenchError::Measurement(format!(
                "resolve throughput: {written} of {count} timestamps written"
            )))
        }
    };
    for rep in 0..=reps {
        let t = Instant::now();
        let new = buffer.resolve_counter_range(0..u64::from(count))?;
        all_written(&new)?;
        let f = t.elapsed().as_nanos() as f64;
        black_box(new);
        if rep > 0 {
            fresh.push(f);
        }
        let t = Instant::now();
        buffer.resolve_counter_range_into(0..u64::from(count), &mut r)?;
        all_written(&r)?;
        let e = t.elapsed().as_nanos() as f64;
        black_box(&r);
        let t = Instant::now();
        dst.copy_from_slice(&src);
        black_box(&dst);
        let c = t.elapsed().as_nanos() as f64;
        if rep > 0 {
            resolve.push(e);
            copy.push(c);
            ratios.push(c.max(1.0) / e.max(1.0));
        }
    }
    let resolve_ns = median(resolve);
    let copy_ns = median(copy);
    let per_s = |ns: f64| {
        if ns > 0.0 {
            f64::from(count) / (ns / 1e9)
        } else {
            0.0
        }
    };
    Ok(ResolveReport {
        samples: count,
        samples_per_s: per_s(resolve_ns),
        ratio_to_copy: median(ratios),
        resolve_ns,
        copy_ns,
        driver_read_ns: 0.0,
        fresh_result_ns: median(fresh),
    })
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

/// Kernels a gated batch holds: few enough that their launches queue
/// without blocking while the stream waits on the gate.
const GATED_BATCH: u32 = 500;

/// Which recording a gated run makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Gated {
    Baseline,
    EveryLaunch,
    AfterSamples,
}

/// The zero-intrusion stream figure with the host taken out: the N kernels
/// run in batches of 500 (`batch`), each queued whole behind a gate kernel
/// that waits on a mapped flag the host sets once the batch is launched, so
/// the GPU runs a batch without waiting for launches; the GPU time is the
/// sum over the batches of two timing events around each batch's kernels.
#[derive(Debug, Clone, Serialize)]
pub struct GatedZeroIntrusionReport {
    /// Kernels in the stream.
    pub kernels: u32,
    /// Kernels per gated batch.
    pub batch: u32,
    /// `--kernel-ns` (0: the arithmetic kernel).
    pub kernel_ns: u64,
    /// Median GPU ns of the N kernels without samples.
    pub baseline_gpu_ns: f64,
    /// Added GPU time, every launch traced (2 samples around all N).
    pub every_launch: Option<crate::RatioSpread>,
    /// Added GPU time, only the launches after samples traced (2 samples
    /// around the first N - 1).
    pub launches_after_samples: Option<crate::RatioSpread>,
}

impl CudaBench {
    fn launch_gate(&self, want: u64) -> Result<(), BenchError> {
        let mut flag = self.stamps.device;
        let mut want = want;
        let mut args = [
            &mut flag as *mut u64 as *mut c_void,
            &mut want as *mut u64 as *mut c_void,
        ];
        // SAFETY: `gate` takes the device address of a mapped word inside
        // the stamps allocation and a u64, given; it only reads the word.
        check("cuLaunchKernel", unsafe {
            sys::cuLaunchKernel(
                self.gate,
                1,
                1,
                1,
                1,
                1,
                1,
                0,
                self.raw_stream(),
                args.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        })
    }

    fn set_gate(&self, value: u64) {
        // SAFETY: word 0 of the mapped allocation; the gate kernels only
        // read it.
        unsafe { std::ptr::write_volatile(self.stamps.host, value) };
    }

    /// One gated run: the GPU ns of the N kernels (summed over batches).
    fn run_gated(&self, mode: Gated) -> Result<f64, BenchError> {
        let n = self.n;
        let batches = n.div_ceil(GATED_BATCH);
        if self.events.len() < 2 * batches as usize {
            return Err(BenchError::Measurement(
                "too few events for the gated batches".into(),
            ));
        }
        let (device, buffer) = match mode {
            Gated::Baseline => (None, None),
            Gated::EveryLaunch => (self.zero.as_ref(), self.zero_buffer.as_ref()),
            Gated::AfterSamples => (
                self.zero_sampled.as_ref(),
                self.zero_sampled_buffer.as_ref(),
            ),
        };
        if mode != Gated::Baseline && (device.is_none() || buffer.is_none()) {
            return Err(BenchError::Cuda("no zero-intrusion device".into()));
        }
        if let Some(b) = buffer {
            b.reset()?;
        }
        self.stream
            .context()
            .bind_to_thread()
            .map_err(|e| BenchError::Cuda(e.to_string()))?;
        // The stream is idle (the last run was synchronized): no gate reads
        // the flag now.
        self.set_gate(0);
        /// Opens every gate however the run ends (a failed launch would
        /// otherwise leave the stream spinning on one).
        struct OpenGates<'a>(&'a CudaBench);
        impl Drop for OpenGates<'_> {
            fn drop(&mut self) {
                self.0.set_gate(u64::MAX);
            }
        }
        let _open = OpenGates(self);
        let mut rec = device.map(|d| d.recorder());
        for b in 0..batches {
            self.launch_gate(u64::from(b) + 1)?;
            self.record(self.events[2 * b as usize])?;
            let (k0, k1) = (b * GATED_BATCH, ((b + 1) * GATED_BATCH).min(n));
            for k in k0..k1 {
                if let (Some(r), Some(buf)) = (rec.as_mut(), buffer) {
                    if k == 0 {
                        r.sample_counters(buf, 0, TimestampGranularity::Relaxed)?;
                    }
                    if mode == Gated::AfterSamples && k == n - 1 {
                        r.sample_counters(buf, 1, TimestampGranularity::Precise)?;
                    }
                }
                self.launch_work()?;
            }
            if let (Some(r), Some(buf)) = (rec.as_mut(), buffer) {
                if mode == Gated::EveryLaunch && b == batches - 1 {
                    r.sample_counters(buf, 1, TimestampGranularity::Precise)?;
                }
            }
            self.record(self.events[2 * b as usize + 1])?;
            self.set_gate(u64::from(b) + 1);
        }
        let submission = match (device, rec) {
            (Some(d), Some(r)) => Some(d.submit(r)?),
            _ => None,
        };
        self.stream
            .synchronize()
            .map_err(|e| BenchError::Cuda(format!("cuStreamSynchronize: {e}")))?;
        if let Some(s) = &submission {
            s.wait()?;
        }
        let mut gpu = 0.0;
        for b in 0..batches as usize {
            gpu += self.elapsed_ns(self.events[2 * b], self.events[2 * b + 1])?;
        }
        if let Some(buf) = buffer {
            let r = buf.resolve_counter_range(0..2)?;
            if r.count(SampleStatus::Written) != 2 {
                return Err(BenchError::Measurement(format!(
                    "gated zero-intrusion ({mode:?}): samples {:?}",
                    r.statuses()
                )));
            }
        }
        Ok(gpu)
    }
}

/// The gated zero-intrusion figure: `reps` rounds (after one warm-up),
/// each a baseline run right before each mode's run.
pub(crate) fn gated_zero_intrusion(
    bench: &CudaBench,
    reps: u32,
) -> Result<Option<GatedZeroIntrusionReport>, BenchError> {
    if bench.zero.is_none() {
        return Ok(None);
    }
    let (mut every, mut after, mut base) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..=reps {
        let b1 = bench.run_gated(Gated::Baseline)?;
        let e = bench.run_gated(Gated::EveryLaunch)?;
        let b2 = bench.run_gated(Gated::Baseline)?;
        let a = if bench.zero_sampled.is_some() {
            Some(bench.run_gated(Gated::AfterSamples)?)
        } else {
            None
        };
        if round == 0 {
            continue;
        }
        base.extend([b1, b2]);
        if b1 > 0.0 {
            every.push((e - b1) / b1);
        }
        if let Some(a) = a.filter(|_| b2 > 0.0) {
            after.push((a - b2) / b2);
        }
    }
    let spread = |v: &[f64]| crate::RatioSpread::of(v, 0.01);
    Ok(Some(GatedZeroIntrusionReport {
        kernels: bench.n,
        batch: GATED_BATCH,
        kernel_ns: bench.kernel_ns,
        baseline_gpu_ns: median(base.iter().copied()),
        every_launch: spread(&every),
        launches_after_samples: spread(&after),
    }))
}
