//! Zero-intrusion timestamps (CUPTI activity records) and the calibration
//! bound. Without a CUDA driver or CUPTI each GPU test prints one line
//! saying it skipped; the no-CUPTI test checks the typed error wherever
//! CUPTI is absent. Nothing here waits on time: every wait is on an event
//! or a stream.

#![cfg(feature = "cupti")]

mod common;

use cudarc::driver::sys;
use gpu_counters_cuda::{
    ActivityTracing, CounterSampleBuffer, Device, DeviceOptions, OpenError, TimestampSource,
};
use gpu_counters_hal::{
    cpu_monotonic_ns, Calibration, CommonCounterSet, CounterSampleBufferDescriptor, SampleStatus,
    SampleValue, TimestampGranularity, COUNTER_ERROR_VALUE,
};
use std::ffi::c_void;
use std::sync::{Mutex, MutexGuard};

/// CUPTI's tracing is process-wide: each test holds this, so that one
/// test's traced launches are not another's (the record counts are exact).
fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Device 0 with timestamps from `source`, or `None` after one line saying
/// why not.
fn device_with(test: &str, source: TimestampSource) -> Option<Device> {
    device_traced(test, source, ActivityTracing::EveryLaunch)
}

/// As [`device_with`], tracing `tracing`.
fn device_traced(test: &str, source: TimestampSource, tracing: ActivityTracing) -> Option<Device> {
    if !common::gpu_present(test) {
        return None;
    }
    let options = DeviceOptions {
        statistics: true,
        timestamps: source,
        activity_tracing: tracing,
        ..DeviceOptions::default()
    };
    match Device::open_with(0, &options) {
        Ok(d) => Some(d),
        Err(OpenError::Cupti { why }) => {
            eprintln!("skipped {test}: {why}");
            None
        }
        Err(e) => panic!("open_with: {e}"),
    }
}

fn zero(test: &str) -> Option<Device> {
    device_with(test, TimestampSource::Activity)
}

fn timestamps(d: &Device, n: u32) -> CounterSampleBuffer {
    d.make_counter_sample_buffer(&CounterSampleBufferDescriptor::new(
        CommonCounterSet::Timestamp,
        "timestamps",
        n,
    ))
    .unwrap()
}

/// `timed(out, n)`: `out[0] = %globaltimer` first, `n` loop iterations,
/// `out[1] = %globaltimer` last.
const TIMED_PTX: &str = r#"
.version 7.0
.target sm_70
.address_size 64
.visible .entry timed(.param .u64 out, .param .u32 n)
{
    .reg .b64 %rd<4>;
    .reg .b32 %r<3>;
    .reg .pred %p;
    mov.u64 %rd2, %globaltimer;
    ld.param.u64 %rd1, [out];
    ld.param.u32 %r1, [n];
    mov.u32 %r2, 0;
LOOP:
    add.u32 %r2, %r2, 1;
    setp.lt.u32 %p, %r2, %r1;
    @%p bra LOOP;
    mov.u64 %rd3, %globaltimer;
    st.global.u64 [%rd1], %rd2;
    st.global.u64 [%rd1+8], %rd3;
    ret;
}
"#;

/// Raw driver objects for the caller's work: device memory of `words` u64s
/// and the `timed` kernel, launched with plain `cuLaunchKernel` (so that
/// nothing but the kernel goes on the stream, and it can be captured).
struct Work {
    f: sys::CUfunction,
    mem: sys::CUdeviceptr,
    words: usize,
    _module: std::sync::Arc<cudarc::driver::CudaModule>,
}

impl Work {
    fn new(d: &Device, words: usize) -> Self {
        let module = d
            .context()
            .load_module(cudarc::nvrtc::Ptx::from_src(TIMED_PTX))
            .unwrap();
        let f = module.load_function("timed").unwrap().cu_function();
        d.context().bind_to_thread().unwrap();
        let mut mem = 0;
        // SAFETY: a plain allocation in the bound context.
        let r = unsafe { sys::cuMemAlloc_v2(&mut mem, words * 8) };
        assert_eq!(r, sys::CUresult::CUDA_SUCCESS);
        Self {
            f,
            mem,
            words,
            _module: module,
        }
    }

    /// `timed` into words `2k, 2k+1` on `stream`.
    fn launch(&self, stream: sys::CUstream, k: usize, n: u32) {
        assert!(2 * k + 1 < self.words);
        let mut out = self.mem + 16 * k as u64;
        let mut n = n;
        let mut args = [
            &mut out as *mut u64 as *mut c_void,
            &mut n as *mut u32 as *mut c_void,
        ];
        // SAFETY: `timed` takes a u64 device address and a u32, given; it
        // writes two words inside the allocation.
        let r = unsafe {
            sys::cuLaunchKernel(
                self.f,
                1,
                1,
                1,
                1,
                1,
                1,
                0,
                stream,
                args.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        };
        assert_eq!(r, sys::CUresult::CUDA_SUCCESS);
    }

    /// The words, once `stream` is idle.
    fn read(&self, stream: sys::CUstream) -> Vec<u64> {
        // SAFETY: a valid stream.
        let r = unsafe { sys::cuStreamSynchronize(stream) };
        assert_eq!(r, sys::CUresult::CUDA_SUCCESS);
        let mut host = vec![0u64; self.words];
        // SAFETY: `host` holds `words` u64s, as the allocation does.
        let r = unsafe { sys::cuMemcpyDtoH_v2(host.as_mut_ptr().cast(), self.mem, self.words * 8) };
        assert_eq!(r, sys::CUresult::CUDA_SUCCESS);
        host
    }
}

impl Drop for Work {
    fn drop(&mut self) {
        // SAFETY: allocated in `new`; every launch writing it was waited for
        // by `read` or the device's drop.
        let _ = unsafe { sys::cuMemFree_v2(self.mem) };
    }
}

/// The timestamp values of a resolve.
fn ticks(r: &gpu_counters_hal::ResolvedCounters) -> Vec<u64> {
    r.timestamps()
        .unwrap()
        .iter()
        .map(|t| t.timestamp)
        .collect()
}

/// `ticks` converted, as (earliest, latest) CPU ns it may stand for.
fn window(c: &Calibration, ticks: u64) -> (u64, u64) {
    let t = c.to_cpu_ns(ticks).unwrap();
    (
        t.ns.saturating_sub(t.error_bound_ns),
        t.ns + t.error_bound_ns,
    )
}

/// Samples around the caller's kernels resolve to their boundaries: a
/// relaxed sample before a kernel is its start, a precise one after a kernel
/// its end. Each encloses the kernels' own `%globaltimer` reads (converted
/// by a `%globaltimer` device's calibration) within the two bounds, and
/// lies inside the CPU window around the work ± its bound.
#[test]
fn zero_intrusion_samples_are_the_boundaries_of_the_callers_kernels() {
    let _serial = serial();
    let test = "zero_intrusion_samples_are_the_boundaries_of_the_callers_kernels";
    let Some(d) = zero(test) else { return };
    let Some(gt) = device_with(test, TimestampSource::Kernel) else {
        return;
    };
    let clock = d
        .activity_clock()
        .expect("a zero-intrusion device has a clock");
    eprintln!("activity clock: {clock:?}");
    let work = Work::new(&d, 8);
    let stream = d.stream().cu_stream();
    let buffer = timestamps(&d, 4);
    let cal = d.calibration().unwrap();
    let gt_cal = gt.calibration().unwrap();
    let before = cpu_monotonic_ns();
    let mut rec = d.recorder();
    rec.sample_counters(&buffer, 0, TimestampGranularity::Relaxed)
        .unwrap();
    work.launch(stream, 0, 20_000);
    rec.sample_counters(&buffer, 1, TimestampGranularity::Precise)
        .unwrap();
    work.launch(stream, 1, 1_000);
    work.launch(stream, 2, 50_000);
    rec.sample_counters(&buffer, 2, TimestampGranularity::Precise)
        .unwrap();
    let after = d.submit(rec).unwrap().wait().unwrap();
    let g = work.read(stream);
    let r = buffer.resolve_counter_range(0..4).unwrap();
    assert_eq!(
        r.statuses(),
        &[
            SampleStatus::Written,
            SampleStatus::Written,
            SampleStatus::Written,
            SampleStatus::NotWritten
        ]
    );
    let t = ticks(&r);
    assert!(t[0] <= t[1] && t[1] <= t[2], "{t:?}");
    for &ticks in &t[..3] {
        let (lo, hi) = window(&cal, ticks);
        assert!(
            hi >= before && lo <= after,
            "{lo}..{hi} outside {before}..{after}"
        );
    }
    // Kernel 0's start precedes its first read, its end follows its last.
    let (s0_lo, _) = window(&cal, t[0]);
    let (_, g00_hi) = window(&gt_cal, g[0]);
    assert!(
        s0_lo <= g00_hi,
        "start {s0_lo} after kernel 0's first read {g00_hi}"
    );
    let (_, s1_hi) = window(&cal, t[1]);
    let (g01_lo, _) = window(&gt_cal, g[1]);
    assert!(
        s1_hi >= g01_lo,
        "end {s1_hi} before kernel 0's last read {g01_lo}"
    );
    // Sample 2 is kernel 2's end: after its last read, and kernel 1 ran
    // between samples 1 and 2.
    let (_, s2_hi) = window(&cal, t[2]);
    let (g21_lo, _) = window(&gt_cal, g[5]);
    assert!(
        s2_hi >= g21_lo,
        "end {s2_hi} before kernel 2's last read {g21_lo}"
    );
    let (s1_lo, _) = window(&cal, t[1]);
    let (_, g10_hi) = window(&gt_cal, g[2]);
    assert!(
        s1_lo <= g10_hi,
        "kernel 1 started before sample 1 ({s1_lo} > {g10_hi})"
    );
    let kernel0 = g[1] - g[0];
    assert!(
        t[1] - t[0] >= kernel0,
        "kernel 0 lasted {kernel0} ns by its reads, {} by its record",
        t[1] - t[0]
    );
    let stats = d.activity_stats().unwrap();
    eprintln!("activity stats: {stats:?}");
}

/// A range with no work in it has nothing to take a boundary from: its
/// samples resolve as errors with the error value, never as 0 or a made-up
/// time; a precise sample after work in an earlier recorder still finds it.
#[test]
fn samples_with_no_work_around_them_are_errors_never_zeros() {
    let _serial = serial();
    let test = "samples_with_no_work_around_them_are_errors_never_zeros";
    let Some(d) = zero(test) else { return };
    let buffer = timestamps(&d, 3);
    let mut rec = d.recorder();
    rec.sample_counters(&buffer, 0, TimestampGranularity::Relaxed)
        .unwrap();
    rec.sample_counters(&buffer, 1, TimestampGranularity::Precise)
        .unwrap();
    d.submit(rec).unwrap().wait().unwrap();
    let r = buffer.resolve_counter_range(0..2).unwrap();
    assert_eq!(r.statuses(), &[SampleStatus::Error, SampleStatus::Error]);
    for s in r.timestamps().unwrap() {
        assert_eq!(s.timestamp, COUNTER_ERROR_VALUE);
    }
    assert_eq!(
        r.sample::<gpu_counters_hal::CounterResultTimestamp>(0)
            .unwrap(),
        SampleValue::Error
    );
    assert!(d.activity_stats().unwrap().samples_without_work >= 2);
    // Work in one recorder, then a precise sample alone in the next: it is
    // that work's end.
    let work = Work::new(&d, 2);
    let mut rec = d.recorder();
    work.launch(d.stream().cu_stream(), 0, 1000);
    d.submit(rec).unwrap().wait().unwrap();
    rec = d.recorder();
    rec.sample_counters(&buffer, 2, TimestampGranularity::Precise)
        .unwrap();
    d.submit(rec).unwrap().wait().unwrap();
    let r = buffer.resolve_counter_range(2..3).unwrap();
    assert_eq!(r.statuses(), &[SampleStatus::Written]);
}

/// Kernels inside a CUDA graph: the launch callbacks see one graph launch,
/// CUPTI a record per node with the launch's correlation id. A relaxed
/// sample before the graph launch is its first node's start, a precise one
/// after it the last node's end: they enclose every node's own reads.
/// Statistic samples on either side of the graph launch count its kernel
/// nodes (one thread each).
#[test]
fn graph_kernels_are_timed_by_their_records() {
    let _serial = serial();
    let test = "graph_kernels_are_timed_by_their_records";
    let Some(d) = zero(test) else { return };
    let Some(gt) = device_with(test, TimestampSource::Kernel) else {
        return;
    };
    const NODES: usize = 5;
    let work = Work::new(&d, 2 * NODES);
    let stream = d.stream().cu_stream();
    d.context().bind_to_thread().unwrap();
    // SAFETY: a valid stream of the bound context; the capture ends below.
    unsafe {
        let r = sys::cuStreamBeginCapture_v2(
            stream,
            sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
        );
        assert_eq!(r, sys::CUresult::CUDA_SUCCESS);
    }
    for k in 0..NODES {
        work.launch(stream, k, 5_000);
    }
    let mut graph = std::ptr::null_mut();
    let mut exec = std::ptr::null_mut();
    // SAFETY: valid out-pointers and the capturing stream; the graph and
    // its instance are destroyed at the end, after the stream finished with
    // them.
    unsafe {
        assert_eq!(
            sys::cuStreamEndCapture(stream, &mut graph),
            sys::CUresult::CUDA_SUCCESS
        );
        assert_eq!(
            sys::cuGraphInstantiateWithFlags(&mut exec, graph, 0),
            sys::CUresult::CUDA_SUCCESS
        );
    }
    let buffer = timestamps(&d, 2);
    let stats = d
        .make_counter_sample_buffer(&CounterSampleBufferDescriptor::new(
            CommonCounterSet::Statistic,
            "statistics",
            2,
        ))
        .ok();
    let cal = d.calibration().unwrap();
    let gt_cal = gt.calibration().unwrap();
    let mut rec = d.recorder();
    rec.sample_counters(&buffer, 0, TimestampGranularity::Relaxed)
        .unwrap();
    if let Some(s) = &stats {
        rec.sample_counters(s, 0, TimestampGranularity::Precise)
            .unwrap();
    }
    // SAFETY: as above.
    unsafe {
        assert_eq!(
            sys::cuGraphLaunch(exec, stream),
            sys::CUresult::CUDA_SUCCESS
        );
    }
    if let Some(s) = &stats {
        rec.sample_counters(s, 1, TimestampGranularity::Precise)
            .unwrap();
    }
    rec.sample_counters(&buffer, 1, TimestampGranularity::Precise)
        .unwrap();
    d.submit(rec).unwrap().wait().unwrap();
    let g = work.read(stream);
    let r = buffer.resolve_counter_range(0..2).unwrap();
    assert_eq!(
        r.statuses(),
        &[SampleStatus::Written, SampleStatus::Written]
    );
    let t = r.timestamps().unwrap();
    let (start_lo, _) = window(&cal, t[0].timestamp);
    let (_, end_hi) = window(&cal, t[1].timestamp);
    for k in 0..NODES {
        let (_, first_hi) = window(&gt_cal, g[2 * k]);
        let (last_lo, _) = window(&gt_cal, g[2 * k + 1]);
        assert!(
            start_lo <= first_hi,
            "node {k} read {first_hi} before the graph's start {start_lo}"
        );
        assert!(
            end_hi >= last_lo,
            "node {k} read {last_lo} after the graph's end {end_hi}"
        );
    }
    let spread = g[2 * NODES - 1] - g[0];
    assert!(
        t[1].timestamp - t[0].timestamp >= spread,
        "graph lasted {} ns by its records, its nodes' reads span {spread}",
        t[1].timestamp - t[0].timestamp
    );
    if let Some(s) = &stats {
        let r = s.resolve_counter_range(0..2).unwrap();
        match r.statistics_between(0, 1).unwrap() {
            SampleValue::Value(v) => assert_eq!(v.compute_kernel_invocations, NODES as u64),
            other => panic!("graph statistics: {other:?}"),
        }
    }
    // SAFETY: the stream finished with them (`wait` above).
    unsafe {
        sys::cuGraphExecDestroy(exec);
        sys::cuGraphDestroy(graph);
    }
}

/// An asynchronous copy is a boundary too.
#[test]
fn copies_are_boundaries() {
    let _serial = serial();
    let Some(d) = zero("copies_are_boundaries") else {
        return;
    };
    let buffer = timestamps(&d, 2);
    let host = vec![7u32; 1 << 20];
    let mut dst = d.stream().alloc_zeros::<u32>(host.len()).unwrap();
    d.stream().synchronize().unwrap();
    let mut rec = d.recorder();
    rec.sample_counters(&buffer, 0, TimestampGranularity::Relaxed)
        .unwrap();
    d.stream().memcpy_htod(&host, &mut dst).unwrap();
    rec.sample_counters(&buffer, 1, TimestampGranularity::Precise)
        .unwrap();
    d.submit(rec).unwrap().wait().unwrap();
    let r = buffer.resolve_counter_range(0..2).unwrap();
    assert_eq!(
        r.statuses(),
        &[SampleStatus::Written, SampleStatus::Written]
    );
    let t = r.timestamps().unwrap();
    assert!(t[0].timestamp < t[1].timestamp, "{t:?}");
}

/// Statistics on a zero-intrusion device are counted on the host and
/// written by it (no kernel): exact, as on a kernel device.
#[test]
fn statistics_on_a_zero_intrusion_device_are_exact() {
    let _serial = serial();
    use cudarc::driver::{LaunchConfig, PushKernelArg};
    let Some(d) = zero("statistics_on_a_zero_intrusion_device_are_exact") else {
        return;
    };
    if let Some(why) = d.statistics_unavailable() {
        eprintln!("skipped statistics_on_a_zero_intrusion_device_are_exact: {why}");
        return;
    }
    let module = d
        .context()
        .load_module(cudarc::nvrtc::Ptx::from_src(TIMED_PTX))
        .unwrap();
    let timed = module.load_function("timed").unwrap();
    let out = d.stream().alloc_zeros::<u64>(2).unwrap();
    let stats = d
        .make_counter_sample_buffer(&CounterSampleBufferDescriptor::new(
            CommonCounterSet::Statistic,
            "statistics",
            2,
        ))
        .unwrap();
    let mut rec = d.recorder();
    rec.sample_counters(&stats, 0, TimestampGranularity::Precise)
        .unwrap();
    for (grid, block) in [(3u32, 64u32), (5, 32)] {
        let n = 10u32;
        let mut l = d.stream().launch_builder(&timed);
        l.arg(&out).arg(&n);
        let cfg = LaunchConfig {
            grid_dim: (grid, 1, 1),
            block_dim: (block, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: `timed` takes a device address of two u64s and a u32; all
        // threads write the same two words.
        unsafe { l.launch(cfg) }.unwrap();
    }
    rec.sample_counters(&stats, 1, TimestampGranularity::Precise)
        .unwrap();
    d.submit(rec).unwrap().wait().unwrap();
    let r = stats.resolve_counter_range(0..2).unwrap();
    match r.statistics_between(0, 1).unwrap() {
        SampleValue::Value(v) => assert_eq!(v.compute_kernel_invocations, 3 * 64 + 5 * 32),
        other => panic!("{other:?}"),
    }
}

/// The profiler over a zero-intrusion device: every scope is its kernels'
/// span, inside the CPU window ± bound, nothing dropped.
#[test]
fn profiler_scopes_over_zero_intrusion() {
    let _serial = serial();
    use gpu_counters_hal::timeline::PassKind;
    use gpu_counters_profiler::{Profiler, ProfilerOptions};
    let Some(d) = zero("profiler_scopes_over_zero_intrusion") else {
        return;
    };
    let work = Work::new(&d, 2);
    let profiler = Profiler::new(&d, ProfilerOptions::default()).unwrap();
    for _ in 0..5 {
        let frame = profiler.begin_frame().unwrap();
        let before = cpu_monotonic_ns();
        let mut rec = d.recorder();
        let outer = frame.scope(&mut rec, "outer", PassKind::Scope).unwrap();
        let inner = frame.scope(&mut rec, "inner", PassKind::Compute).unwrap();
        work.launch(d.stream().cu_stream(), 0, 10_000);
        inner.end(&mut rec).unwrap();
        work.launch(d.stream().cu_stream(), 0, 10_000);
        outer.end(&mut rec).unwrap();
        let submission = d.submit(rec).unwrap();
        submission.wait().unwrap();
        let after = cpu_monotonic_ns();
        profiler.end_frame(frame, [&submission]).unwrap();
        let frames = profiler
            .wait_collect_all(std::time::Duration::from_secs(10))
            .unwrap();
        let f = &frames[0];
        assert_eq!(f.dropped_scopes, 0, "{:?}", f.drops);
        assert_eq!(f.scopes.len(), 2);
        for s in &f.scopes {
            assert!(s.start_ns <= s.end_ns, "{s:?}");
            assert!(
                s.start_ns + s.error_bound_ns >= before && s.end_ns <= after + s.error_bound_ns,
                "{s:?} outside {before}..{after}"
            );
        }
    }
}

/// The calibration's bound holds: every later handshake read's GPU value
/// converts to within its CPU window ± the bound (a read's window holds the
/// true time of its GPU read), on a `%globaltimer` device. The bound is
/// printed: it is what BENCHMARKS.md reports.
#[test]
fn the_calibration_bound_holds_for_later_handshake_reads() {
    let _serial = serial();
    let test = "the_calibration_bound_holds_for_later_handshake_reads";
    let Some(d) = device_with(test, TimestampSource::Kernel) else {
        return;
    };
    let mut bounds = Vec::new();
    for _ in 0..5 {
        let cal = d.calibration().unwrap();
        bounds.push(cal.error_bound_ns());
        for (before, ticks, after) in d.handshake_reads(64).unwrap() {
            let c = cal.to_cpu_ns(ticks).unwrap();
            assert!(
                c.ns + c.error_bound_ns >= before && c.ns <= after + c.error_bound_ns,
                "{c:?} outside {before}..{after}"
            );
        }
    }
    eprintln!("calibration bounds (ns): {bounds:?}");
}

/// Where CUPTI cannot be used, asking for zero-intrusion timestamps is a
/// typed error naming what is missing; runs everywhere (on a machine with
/// neither a driver nor CUPTI it checks the CUPTI side alone).
#[test]
fn without_cupti_zero_intrusion_is_a_typed_error_naming_it() {
    let _serial = serial();
    match gpu_counters_cuda::zero_intrusion_unavailable() {
        Some(why) => {
            assert!(
                why.contains("CUPTI") || why.contains("cupti") || why.contains("cuInit"),
                "{why}"
            );
            if gpu_counters_cuda::driver_present()
                && gpu_counters_cuda::device_count().unwrap_or(0) > 0
            {
                let options = DeviceOptions {
                    timestamps: TimestampSource::Activity,
                    ..DeviceOptions::default()
                };
                match Device::open_with(0, &options) {
                    Err(OpenError::Cupti { why: w }) => assert_eq!(w, why),
                    other => panic!("{other:?}"),
                }
            }
        }
        None => {
            eprintln!(
                "skipped without_cupti_zero_intrusion_is_a_typed_error_naming_it: CUPTI works here"
            );
        }
    }
}

/// Tracing only the launch after each sample: of a range's kernels only
/// the first and the one after the range's end are traced (exactly two
/// records), the range's start is its first kernel's start and its end the
/// start of the launch after it; a pass around one kernel is that kernel's
/// start and end (the end sample follows a traced launch); a sample no
/// launch follows resolves as an error. Each value encloses the kernels'
/// own `%globaltimer` reads within the two bounds.
#[test]
fn launches_after_samples_are_the_only_ones_traced() {
    let _serial = serial();
    let test = "launches_after_samples_are_the_only_ones_traced";
    let Some(d) = device_traced(
        test,
        TimestampSource::Activity,
        ActivityTracing::LaunchesAfterSamples,
    ) else {
        return;
    };
    let Some(gt) = device_with(test, TimestampSource::Kernel) else {
        return;
    };
    const MIDDLE: usize = 10;
    let work = Work::new(&d, 2 * (MIDDLE + 4));
    let stream = d.stream().cu_stream();
    let buffer = timestamps(&d, 5);
    let cal = d.calibration().unwrap();
    let gt_cal = gt.calibration().unwrap();
    // Launches traced (counted when each launch call returns; the
    // calibration's probes were launched before each count is taken).
    let counts = || {
        let s = d.activity_stats().unwrap();
        (s.launches_traced, s.launches_untraced)
    };
    let since = |(traced, untraced): (u64, u64)| {
        let now = counts();
        (now.0 - traced, now.1 - untraced)
    };

    // A range of MIDDLE + 1 kernels, then one more.
    let before = counts();
    let mut rec = d.recorder();
    rec.sample_counters(&buffer, 0, TimestampGranularity::Relaxed)
        .unwrap();
    for k in 0..=MIDDLE {
        work.launch(stream, k, 2_000);
    }
    rec.sample_counters(&buffer, 1, TimestampGranularity::Precise)
        .unwrap();
    work.launch(stream, MIDDLE + 1, 2_000);
    d.submit(rec).unwrap().wait().unwrap();
    let g = work.read(stream);
    let r = buffer.resolve_counter_range(0..2).unwrap();
    assert_eq!(
        r.statuses(),
        &[SampleStatus::Written, SampleStatus::Written]
    );
    assert_eq!(
        since(before),
        (2, MIDDLE as u64),
        "only the launches after the two samples are traced"
    );
    let t = ticks(&r);
    // Sample 0: kernel 0's start, before its first read.
    let (s0_lo, _) = window(&cal, t[0]);
    assert!(
        s0_lo <= window(&gt_cal, g[0]).1,
        "start after kernel 0 began"
    );
    // Sample 1: the start of the launch after the range: after the range's
    // last kernel's last read, before the next kernel's first read.
    let (s1_lo, s1_hi) = window(&cal, t[1]);
    let last = 2 * MIDDLE + 1;
    assert!(
        s1_hi >= window(&gt_cal, g[last]).0,
        "end before the range's last kernel ended"
    );
    assert!(
        s1_lo <= window(&gt_cal, g[last + 1]).1,
        "end after the next kernel began"
    );

    // A pass around one kernel: its start and its end, one record.
    let before = counts();
    let mut rec = d.recorder();
    rec.sample_counters(&buffer, 2, TimestampGranularity::Relaxed)
        .unwrap();
    work.launch(stream, MIDDLE + 2, 20_000);
    rec.sample_counters(&buffer, 3, TimestampGranularity::Precise)
        .unwrap();
    // A precise sample after untraced work with nothing after it.
    work.launch(stream, MIDDLE + 3, 1_000);
    rec.sample_counters(&buffer, 4, TimestampGranularity::Precise)
        .unwrap();
    d.submit(rec).unwrap().wait().unwrap();
    let g = work.read(stream);
    let r = buffer.resolve_counter_range(2..5).unwrap();
    assert_eq!(
        r.statuses(),
        &[
            SampleStatus::Written,
            SampleStatus::Written,
            SampleStatus::Error
        ]
    );
    assert_eq!(since(before), (1, 1), "only the pass's kernel is traced");
    let t = ticks(&r);
    assert_eq!(t[2], COUNTER_ERROR_VALUE);
    let k = 2 * (MIDDLE + 2);
    assert!(window(&cal, t[0]).0 <= window(&gt_cal, g[k]).1);
    assert!(window(&cal, t[1]).1 >= window(&gt_cal, g[k + 1]).0);
    assert!(
        t[1] - t[0] >= g[k + 1] - g[k],
        "the pass lasted {} ns by its samples, {} by the kernel's reads",
        t[1] - t[0],
        g[k + 1] - g[k]
    );
}
