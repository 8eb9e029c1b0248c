//! The CUDA side: API calls from CUPTI's callbacks, GPU work from its
//! activity records (both through `gpu_counters_cuda::trace`), joined by
//! correlation id, and a worker thread that calibrates each device's clock
//! with the backend's own calibration.
//!
//! Launch-like calls (kernel and graph launches, copies, memsets) of both
//! the driver and the runtime API are observed, with synchronizations; a
//! call made inside another observed call of its thread (the runtime's
//! `cudaLaunchKernel` calling `cuLaunchKernel`) is joined to the outer one
//! and sends no slice of its own.

use crate::join::{Kind, Launch};
use crate::state::{self, gettid, now_ns, State};
use gpu_counters_cuda::trace::{self, ApiCall, Callback, Domain, Record as Cupti, Site};
use gpu_counters_record::protocol::{
    activity, api_kind, init, severity, Api, Clock, Device, Init, Kernel, MemCopy, Memset, Record,
    SyncEvent, Work,
};
use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Mutex, OnceLock};
use std::time::Duration;

/// What an API function is, by its name (`cuLaunchKernel`,
/// `cudaMemcpyAsync_v3020`, `cuMemsetD8Async_ptsz`): one of
/// [`api_kind`], or `None` for calls not observed.
pub fn classify(name: &str) -> Option<u8> {
    // Strip a runtime version (`_v7000`) and per-thread stream suffixes.
    let mut base = name;
    for suffix in ["_ptsz", "_ptds"] {
        base = base.strip_suffix(suffix).unwrap_or(base);
    }
    if let Some(i) = base.rfind("_v") {
        if base[i + 2..].chars().all(|c| c.is_ascii_digit()) && i + 2 < base.len() {
            base = &base[..i];
        }
    }
    for suffix in ["_ptsz", "_ptds"] {
        base = base.strip_suffix(suffix).unwrap_or(base);
    }
    let is = |names: &[&str]| names.contains(&base);
    Some(
        if is(&[
            "cuLaunchKernel",
            "cuLaunchKernelEx",
            "cuLaunchCooperativeKernel",
            "cuLaunchCooperativeKernelMultiDevice",
            "cudaLaunchKernel",
            "cudaLaunchKernelExC",
            "cudaLaunchCooperativeKernel",
            "cudaLaunchCooperativeKernelMultiDevice",
        ]) {
            api_kind::LAUNCH
        } else if is(&["cuGraphLaunch", "cudaGraphLaunch"]) {
            api_kind::GRAPH
        } else if base.starts_with("cuMemcpy") || base.starts_with("cudaMemcpy") {
            api_kind::COPY
        } else if base.starts_with("cuMemset") || base.starts_with("cudaMemset") {
            api_kind::MEMSET
        } else if is(&[
            "cuCtxSynchronize",
            "cuStreamSynchronize",
            "cuEventSynchronize",
            "cuStreamWaitEvent",
            "cudaDeviceSynchronize",
            "cudaStreamSynchronize",
            "cudaEventSynchronize",
            "cudaStreamWaitEvent",
        ]) {
            api_kind::SYNC
        } else {
            return None;
        },
    )
}

/// The kind of each observed callback id, per API domain (0: not observed).
struct Kinds {
    driver: Vec<u8>,
    runtime: Vec<u8>,
}

static KINDS: OnceLock<Kinds> = OnceLock::new();

fn kinds_of(domain: Domain) -> Vec<u8> {
    domain
        .api_ids()
        .map(|id| {
            trace::callback_name(domain, id)
                .and_then(|n| classify(&n))
                .unwrap_or(0)
        })
        .collect()
}

fn kind(domain: Domain, cbid: u32) -> u8 {
    let Some(k) = KINDS.get() else { return 0 };
    let table = match domain {
        Domain::Driver => &k.driver,
        Domain::Runtime => &k.runtime,
        _ => return 0,
    };
    table.get(cbid as usize).copied().unwrap_or(0)
}

/// One observed call open on a thread.
struct Open {
    correlation: u32,
    enter_ns: u64,
    kind: u8,
}

thread_local! {
    /// The thread's observed calls, outermost first.
    static CALLS: RefCell<Vec<Open>> = const { RefCell::new(Vec::new()) };
    /// This thread is the injection's worker: its calls are not the
    /// program's.
    static WORKER: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

fn api_call(s: &State, a: &ApiCall<'_>) {
    let k = kind(a.domain, a.cbid);
    if k == 0 {
        return;
    }
    let worker = WORKER.with(|w| w.get());
    if (k == api_kind::LAUNCH || k == api_kind::GRAPH) && crate::counters::active() {
        match a.site {
            Site::Enter => {
                // The id the launch's kernel record will carry (the join's).
                let correlation = CALLS
                    .with(|c| c.borrow().first().map(|o| o.correlation))
                    .unwrap_or(a.correlation);
                crate::counters::enter(s, a, k, correlation, worker);
            }
            Site::Exit => crate::counters::exit(s, a),
        }
    }
    if worker {
        return;
    }
    let expects = match k {
        api_kind::LAUNCH | api_kind::COPY | api_kind::MEMSET => Some(Kind::Single),
        api_kind::GRAPH => Some(Kind::Graph),
        _ => None,
    };
    match a.site {
        Site::Enter => {
            let now = now_ns();
            let outer = CALLS.with(|c| {
                let mut c = c.borrow_mut();
                let outer = c.first().map(|o| o.correlation);
                c.push(Open {
                    correlation: a.correlation,
                    enter_ns: now,
                    kind: k,
                });
                outer
            });
            if let Some(expects) = expects {
                let mut j = s.join.lock().unwrap_or_else(|e| e.into_inner());
                let launch = match outer.and_then(|o| j.launch(o)) {
                    Some(l) => l,
                    None => Launch {
                        tid: s.thread(),
                        enter_ns: now,
                        range_id: state::current_range(),
                        correlation: outer.unwrap_or(a.correlation),
                    },
                };
                j.enter(a.correlation, launch, expects);
            }
        }
        Site::Exit => {
            let now = now_ns();
            let (open, outermost) = CALLS.with(|c| {
                let mut c = c.borrow_mut();
                let i = c.iter().rposition(|o| o.correlation == a.correlation);
                let open = i.map(|i| c.remove(i));
                (open, c.is_empty())
            });
            let Some(open) = open else { return };
            // CUDA_SUCCESS and cudaSuccess are both 0.
            let ok = a.result == Some(0);
            if expects.is_some() {
                s.join.lock().unwrap_or_else(|e| e.into_inner()).exit(
                    a.correlation,
                    ok,
                    trace::newest_buffer(),
                );
            }
            if outermost && s.config.api_slices() {
                let name = match a.function {
                    // SAFETY: CUPTI's function names are static strings.
                    Some(f) => unsafe { s.intern_static(f.as_ptr()) },
                    None => 0,
                };
                s.push(&Record::Api(Api {
                    tid: s.thread(),
                    domain: a.domain.number() as u8,
                    kind: open.kind,
                    cbid: a.cbid,
                    correlation: a.correlation,
                    enter_ns: open.enter_ns,
                    exit_ns: now,
                    result: a.result.unwrap_or(0),
                    range_id: state::current_range(),
                    name,
                }));
            }
        }
    }
}

/// A resource callback id (`CUpti_CallbackIdResource`).
const CONTEXT_CREATED: u32 = 1;
/// `CUPTI_CBID_STATE_FATAL_ERROR`.
const FATAL_ERROR: u32 = 1;

struct Observer;

impl trace::ApiObserver for Observer {
    fn callback(&self, c: &Callback<'_>) {
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let Some(s) = state::current() else { return };
            if s.done.load(Ordering::Relaxed) {
                return;
            }
            match c {
                Callback::Api(a) => api_call(s, a),
                Callback::Resource { cbid, context, .. } if *cbid == CONTEXT_CREATED => {
                    if let Some(tx) = WORKER_TX.get() {
                        let tx = tx.lock().unwrap_or_else(|e| e.into_inner());
                        let _ = tx.send(*context);
                    }
                }
                Callback::State { cbid } if *cbid == FATAL_ERROR => notice(
                    s,
                    severity::ERROR,
                    "CUPTI reported a fatal error: GPU records after it may be missing",
                ),
                _ => {}
            }
        }));
    }
}

struct Sink;

fn work(s: &State, w: &trace::Work, incomplete: bool) -> Option<Work> {
    s.counts.records.fetch_add(1, Ordering::Relaxed);
    if w.ours {
        s.counts.own_kernels.fetch_add(1, Ordering::Relaxed);
        return None;
    }
    if incomplete || w.start == 0 || w.end == 0 || w.end < w.start {
        s.counts.incomplete.fetch_add(1, Ordering::Relaxed);
        return None;
    }
    let launch = s
        .join
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .record(w.correlation);
    let mut flags = 0u8;
    if w.device_launched {
        flags |= activity::DEVICE_LAUNCHED;
    }
    let (correlation, launch_tid, enter_ns, range_id) = match launch {
        Some(l) => {
            flags |= activity::JOINED;
            (l.correlation, l.tid, l.enter_ns, l.range_id)
        }
        None => (w.correlation, 0, 0, 0),
    };
    Some(Work {
        correlation,
        device: w.device.min(255) as u8,
        flags,
        context: w.context,
        stream: w.stream,
        start_ns: w.start,
        end_ns: w.end,
        graph_id: w.graph_id,
        graph_node: w.graph_node,
        launch_tid,
        enter_ns,
        range_id,
    })
}

impl trace::RecordSink for Sink {
    fn record(&self, r: &Cupti<'_>) {
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let Some(s) = state::current() else { return };
            match r {
                Cupti::Kernel(k) => {
                    let Some(w) = work(s, &k.work, false) else {
                        return;
                    };
                    let name = match k.name {
                        // SAFETY: CUPTI's kernel names live as long as the
                        // module; a freed one's address is only reused by a
                        // later module, checked by content on first sight
                        // per address.
                        Some(n) => unsafe { s.intern_static(n.as_ptr()) },
                        None => 0,
                    };
                    let u = |v: i32| v.max(0) as u32;
                    s.push(&Record::Kernel(Kernel {
                        work: w,
                        registers: k.registers,
                        grid: k.grid.map(u),
                        block: k.block.map(u),
                        smem_static: u(k.smem_static),
                        smem_dynamic: u(k.smem_dynamic),
                        name,
                    }));
                }
                Cupti::Memcpy(c) => {
                    if let Some(w) = work(s, &c.work, false) {
                        s.push(&Record::Copy(MemCopy {
                            work: w,
                            kind: c.copy_kind,
                            src_kind: c.src_kind,
                            dst_kind: c.dst_kind,
                            bytes: c.bytes,
                        }));
                    }
                }
                Cupti::Memset(m) => {
                    if let Some(w) = work(s, &m.work, false) {
                        s.push(&Record::Memset(Memset {
                            work: w,
                            memory_kind: m.memory_kind,
                            value: m.value,
                            bytes: m.bytes,
                        }));
                    }
                }
                Cupti::Sync(y) => {
                    s.counts.records.fetch_add(1, Ordering::Relaxed);
                    if y.start == 0 || y.end < y.start {
                        s.counts.incomplete.fetch_add(1, Ordering::Relaxed);
                        return;
                    }
                    s.push(&Record::Sync(SyncEvent {
                        correlation: y.correlation,
                        sync_type: y.sync_type.min(255) as u8,
                        context: y.context,
                        stream: y.stream,
                        cuda_event: y.cuda_event,
                        start_ns: y.start,
                        end_ns: y.end,
                    }));
                }
                Cupti::Other { .. } => {}
            }
        }));
    }

    fn buffers_returned(&self, n: u64) {
        if let Some(s) = state::current() {
            s.join
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .buffers_returned(n);
        }
    }
}

pub use crate::state::notice;

static OBSERVER: Observer = Observer;
static SINK: Sink = Sink;
static WORKER_TX: OnceLock<Mutex<mpsc::Sender<usize>>> = OnceLock::new();
/// The worker stops calibrating (the process is exiting).
pub static STOPPING: AtomicBool = AtomicBool::new(false);

/// The activity kinds traced: kernels (concurrent: never the serializing
/// KERNEL kind), copies, memsets and synchronizations.
const KINDS_TRACED: [u32; 4] = [
    trace::kind::CONCURRENT_KERNEL,
    trace::kind::MEMCPY,
    trace::kind::MEMSET,
    trace::kind::SYNCHRONIZATION,
];

/// CUPTI set-up, inside the first `cuInit` (no driver call here): the
/// observer and its callbacks, the record sink and its kinds, the flush
/// period, and the worker thread (which waits for the first context).
pub fn start(s: &'static State) -> Result<(), String> {
    let _ = KINDS.set(Kinds {
        driver: kinds_of(Domain::Driver),
        runtime: kinds_of(Domain::Runtime),
    });
    let k = KINDS.get().ok_or("callback kinds")?;
    let mut enable: Vec<(Domain, Option<u32>)> = Vec::new();
    for (domain, table) in [(Domain::Driver, &k.driver), (Domain::Runtime, &k.runtime)] {
        for (id, &kind) in table.iter().enumerate() {
            if kind != 0 {
                enable.push((domain, Some(id as u32)));
            }
        }
    }
    enable.push((Domain::Resource, Some(CONTEXT_CREATED)));
    enable.push((Domain::State, Some(FATAL_ERROR)));
    trace::observe_api(&OBSERVER, &enable)?;
    let _ = trace::use_system_thread_ids();
    trace::record_sink(&SINK, &KINDS_TRACED)?;
    trace::set_flush_period(100)?;
    let (tx, rx) = mpsc::channel();
    let _ = WORKER_TX.set(Mutex::new(tx));
    std::thread::Builder::new()
        .name("gpu-counters-clock".into())
        .spawn(move || worker(s, rx))
        .map_err(|e| format!("starting the clock thread: {e}"))?;
    s.push(&Record::Init(Init {
        flags: s.flags.load(Ordering::Relaxed),
        cupti_version: trace::cupti_version().unwrap_or(0),
        driver_version: driver_version(),
    }));
    Ok(())
}

fn driver_version() -> i32 {
    let mut v = 0i32;
    // SAFETY: a valid out-pointer; the driver is loaded (CUDA called us).
    let r = unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut v) };
    if r == cudarc::driver::sys::CUresult::CUDA_SUCCESS {
        v
    } else {
        0
    }
}

/// A device opened for calibration, with its ordinal and UUID.
struct Calibrated {
    ordinal: u32,
    uuid: [u8; 16],
    device: gpu_counters_cuda::Device,
}

fn open_device(s: &State, context: usize) -> Result<Calibrated, String> {
    use cudarc::driver::sys as ds;
    let ordinal = trace::context_device(context)?;
    let ctx = cudarc::driver::CudaContext::new(ordinal as usize)
        .map_err(|e| format!("cuDevicePrimaryCtxRetain: {e}"))?;
    // SAFETY: the worker's streams are its own; without event tracking,
    // making a stream does not synchronize the program's work.
    unsafe { ctx.disable_event_tracking() };
    let name = ctx.name().unwrap_or_default();
    let (major, minor) = ctx.compute_capability().unwrap_or((0, 0));
    let sms = ctx
        .attribute(ds::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
        .unwrap_or(0);
    let uuid = ctx
        .uuid()
        .map(|u| u.bytes.map(|b| b as u8))
        .unwrap_or([0; 16]);
    let name_id = s.intern(name.as_bytes()).unwrap_or(0);
    s.push(&Record::Device(Device {
        ordinal,
        uuid,
        sm_count: sms.max(0) as u32,
        cc_major: major.max(0) as u16,
        cc_minor: minor.max(0) as u16,
        name: name_id,
        chip: 0,
    }));
    let stream = ctx
        .new_stream()
        .map_err(|e| format!("cuStreamCreate: {e}"))?;
    let device = gpu_counters_cuda::Device::from_stream_with(
        stream,
        &gpu_counters_cuda::DeviceOptions {
            statistics: false,
            hardware_counters: false,
            timestamps: gpu_counters_cuda::TimestampSource::Activity,
            activity_tracing: gpu_counters_cuda::ActivityTracing::LaunchesAfterSamples,
        },
    )
    .map_err(|e| e.to_string())?;
    Ok(Calibrated {
        ordinal,
        uuid,
        device,
    })
}

fn calibrate(s: &State, d: &Calibrated) -> Result<(), String> {
    let pair = d.device.sample_timestamps().map_err(|e| e.to_string())?;
    s.push(&Record::Clock(Clock {
        device: d.ordinal,
        cpu_ns: pair.cpu_ns,
        offset_ns: pair.cpu_ns as i64 - pair.gpu_ticks as i64,
        bound_ns: pair.max_deviation_ns,
    }));
    Ok(())
}

/// Sends the process's counts (cumulative).
pub fn send_stats(s: &State, cupti: Option<gpu_counters_cuda::ActivityStats>) {
    use gpu_counters_record::protocol::Stats;
    let c = &s.counts;
    let join = s.join.lock().unwrap_or_else(|e| e.into_inner()).stats();
    if let Some(a) = cupti {
        c.cupti_dropped.store(a.dropped, Ordering::Relaxed);
        c.buffers_refused
            .store(a.buffers_refused, Ordering::Relaxed);
    }
    let l = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
    s.push(&Record::Stats(Stats {
        records: l(&c.records),
        cupti_dropped: l(&c.cupti_dropped),
        buffers_refused: l(&c.buffers_refused),
        incomplete: l(&c.incomplete),
        queue_dropped: s.queue.dropped(),
        unmatched_launches: join.unmatched + join.evicted,
        nvtx_unterminated: 0,
        nvtx_pop_empty: l(&c.nvtx_pop_empty),
        pm_overflows: l(&c.pm_overflows),
        pm_gaps: l(&c.pm_gaps),
        own_kernels: l(&c.own_kernels),
    }));
}

/// The worker: on each device's first context, a calibration device and a
/// `Device` record; then every refit period a calibration (`Clock`), a
/// flush and the counts.
fn worker(s: &'static State, rx: mpsc::Receiver<usize>) {
    WORKER.with(|w| w.set(true));
    let refit = Duration::from_secs_f64(s.config.refit_s);
    let mut devices: Vec<Calibrated> = Vec::new();
    let mut seen: Vec<u32> = Vec::new();
    let mut next_refit = std::time::Instant::now() + refit;
    let mut exchanged = false;
    loop {
        if STOPPING.load(Ordering::Acquire) {
            return;
        }
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(context) => {
                if !exchanged {
                    // Our driver calls never invalidate a graph capture of
                    // the program's (global capture mode).
                    let mut mode =
                        cudarc::driver::sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED;
                    // SAFETY: a valid in/out pointer; affects this thread only.
                    unsafe { cudarc::driver::sys::cuThreadExchangeStreamCaptureMode(&mut mode) };
                    exchanged = true;
                }
                let ordinal = trace::context_device(context).unwrap_or(u32::MAX);
                if seen.contains(&ordinal) {
                    continue;
                }
                seen.push(ordinal);
                match open_device(s, context) {
                    Ok(d) => {
                        if let Err(e) = calibrate(s, &d) {
                            notice(
                                s,
                                severity::WARNING,
                                &format!("GPU{ordinal}: clock calibration failed: {e}"),
                            );
                        }
                        crate::pm::start(s, d.ordinal, d.uuid);
                        crate::counters::start(s, d.ordinal, d.device.context());
                        devices.push(d);
                    }
                    Err(e) => notice(
                        s,
                        severity::WARNING,
                        &format!(
                            "GPU{ordinal}: no clock calibration (times are CUPTI's on CLOCK_MONOTONIC, bound unknown): {e}"
                        ),
                    ),
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => return,
        }
        if std::time::Instant::now() >= next_refit {
            next_refit += refit;
            for d in &devices {
                if STOPPING.load(Ordering::Acquire) {
                    return;
                }
                if let Err(e) = calibrate(s, d) {
                    notice(
                        s,
                        severity::WARNING,
                        &format!("GPU{}: clock calibration failed: {e}", d.ordinal),
                    );
                }
            }
            crate::counters::flush(s, true, Duration::from_millis(100));
            let stats = trace::flush(false).ok();
            send_stats(s, stats);
        }
    }
}

/// The CUDA part of the exit sequence: every buffer back (forced: records
/// of unfinished work come back incomplete and are counted).
pub fn exit_flush() -> Option<gpu_counters_cuda::ActivityStats> {
    STOPPING.store(true, Ordering::Release);
    trace::flush(true).ok()
}

/// Whether the CUDA side was set up in this process.
pub fn started() -> bool {
    WORKER_TX.get().is_some()
}

/// `init::CUDA`.
pub const FLAG: u32 = init::CUDA;

/// The calling thread's id (for tests).
pub fn tid() -> u32 {
    gettid()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Driver and runtime names, with versions and per-thread suffixes,
    /// map to their kinds; others are not observed.
    #[test]
    fn api_names_classify() {
        assert_eq!(classify("cuLaunchKernel"), Some(api_kind::LAUNCH));
        assert_eq!(classify("cuLaunchKernel_ptsz"), Some(api_kind::LAUNCH));
        assert_eq!(classify("cuLaunchKernelEx_ptsz"), Some(api_kind::LAUNCH));
        assert_eq!(classify("cudaLaunchKernel_v7000"), Some(api_kind::LAUNCH));
        assert_eq!(
            classify("cudaLaunchKernel_ptsz_v7000"),
            Some(api_kind::LAUNCH)
        );
        assert_eq!(
            classify("cudaLaunchKernelExC_v11060"),
            Some(api_kind::LAUNCH)
        );
        assert_eq!(classify("cuGraphLaunch"), Some(api_kind::GRAPH));
        assert_eq!(classify("cudaGraphLaunch_v10000"), Some(api_kind::GRAPH));
        assert_eq!(classify("cuMemcpyHtoDAsync_v2"), Some(api_kind::COPY));
        assert_eq!(classify("cudaMemcpyAsync_v3020"), Some(api_kind::COPY));
        assert_eq!(classify("cuMemsetD32Async_ptsz"), Some(api_kind::MEMSET));
        assert_eq!(classify("cudaMemsetAsync_v3020"), Some(api_kind::MEMSET));
        assert_eq!(classify("cuStreamSynchronize"), Some(api_kind::SYNC));
        assert_eq!(
            classify("cudaDeviceSynchronize_v3020"),
            Some(api_kind::SYNC)
        );
        assert_eq!(
            classify("cudaStreamWaitEvent_ptsz_v7000"),
            Some(api_kind::SYNC)
        );
        assert_eq!(classify("cuCtxGetCurrent"), None);
        assert_eq!(classify("cudaGetDevice_v3020"), None);
        assert_eq!(classify("cuLaunchHostFunc"), None);
        assert_eq!(classify(""), None);
    }
}
