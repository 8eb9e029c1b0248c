//! `compute_kernel_invocations` from the launch configurations CUPTI's
//! callback API reports: every successful `cuLaunchKernel` (and `_ptsz`,
//! `cuLaunchKernelEx`) adds grid × block threads to its stream's running
//! count, at the call's exit. A stream runs its work in launch order, so a
//! sample's count, read when the sample is launched, is exactly the
//! invocations launched on the stream before it.
//!
//! - gpu-counters' own kernels are not counted.
//! - A graph launch adds its kernel nodes' grid × block threads, read from
//!   the graph when it was instantiated (`cuGraphInstantiate*`, child
//!   graphs included), as long as nothing since could have changed them.
//!   A graph launch whose count is not known starts a new epoch of the
//!   stream's count, so samples on either side of it are not comparable
//!   (they get different chain origins), never a wrong number. Not known:
//!   a graph instantiated before the callbacks were subscribed, one with a
//!   conditional node (its kernels run a number of times only the device
//!   knows) or a node type newer than these bindings, one instantiated for
//!   device launch, and one whose instance was changed since
//!   (`cuGraphExecKernelNodeSetParams`, `cuGraphExecUpdate`,
//!   `cuGraphExecNodeSetParams`, `cuGraphExecChildGraphNodeSetParams`,
//!   `cuGraphNodeSetEnabled`).
//! - Launches into one stream from several threads at the moment a sample is
//!   taken may fall on either side of it; launches from one thread, or
//!   ordered between threads, are exact.
//!
//! - A launch into a stream being captured (`cuStreamBeginCapture`) is not
//!   counted: it runs only as part of its graph.
//!
//! The same callbacks give zero-intrusion timestamps
//! ([`crate::activity`]) the correlation id of every launch, copy and
//! memset at its exit.
//!
//! CUPTI allows one subscriber per process: with another profiler (Nsight
//! Systems, ...) attached, subscribing fails and the statistic set is not
//! offered.

use cudarc::driver::sys as ds;
use gpu_counters_cupti_sys as cs;
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::{Mutex, OnceLock};

/// What a launch callback saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LaunchKind {
    /// A kernel, copy or memset: one record.
    Single,
    /// A graph: a record per node.
    Graph,
}

/// Sees the launches, copies and memsets of the streams it tracks: the
/// zero-intrusion activity tracing registers one once it is set up
/// ([`observe_launches`]). Runs on the launching thread, inside the call.
pub(crate) trait LaunchObserver: Send + Sync {
    /// Whether it tracks `stream` (asked before anything costlier is done
    /// for a launch).
    fn tracks(&self, stream: ds::CUstream) -> bool;
    /// At the entry of every launch, copy or memset on `stream`.
    fn entering(&self, stream: ds::CUstream);
    /// A successful launch, copy or memset on a tracked `stream` (not
    /// being captured), with its correlation id, at the call's exit.
    fn launched(&self, stream: ds::CUstream, correlation: u32, kind: LaunchKind);
    /// At the exit of every launch, copy or memset (after
    /// [`LaunchObserver::launched`]), however it returns.
    fn exited(&self);
}

static OBSERVER: OnceLock<&'static dyn LaunchObserver> = OnceLock::new();

/// Registers `o` as the process's launch observer (the first holds).
pub(crate) fn observe_launches(o: &'static dyn LaunchObserver) {
    let _ = OBSERVER.set(o);
}

/// Whether the launch observer tracks `stream`.
fn tracked(stream: ds::CUstream) -> bool {
    OBSERVER.get().is_some_and(|o| o.tracks(stream))
}

/// Tells the launch observer of a launch on a tracked stream.
fn launched(stream: ds::CUstream, correlation: u32, kind: LaunchKind) {
    if let Some(o) = OBSERVER.get() {
        o.launched(stream, correlation, kind);
    }
}

/// A stream's count: invocations launched so far, and its epoch (bumped by
/// each graph launch).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StreamCount {
    pub(crate) invocations: u64,
    pub(crate) epoch: u64,
}

#[derive(Default)]
struct Counts {
    per_stream: HashMap<usize, StreamCount>,
    /// gpu-counters' own kernels (`CUfunction`s), not counted.
    ours: Vec<usize>,
    /// Instantiated graphs (`CUgraphExec`): the threads a launch of each
    /// runs, `None` where that is not known.
    graphs: HashMap<usize, Option<u64>>,
}

/// The process's launch counts, once subscribed.
pub(crate) struct Launches {
    counts: Mutex<Counts>,
    /// The subscriber (`CUpti_SubscriberHandle`), for enabling more
    /// callbacks ([`crate::trace::observe_api`]).
    pub(crate) subscriber: usize,
    pub(crate) api: &'static cs::Cupti,
}

/// Whether a device offering the statistic set was opened: only then are
/// launches counted (the callbacks run for other users too, such as
/// [`crate::trace`], which must not pay for counting).
static COUNTING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

static LAUNCHES: OnceLock<Result<Launches, String>> = OnceLock::new();

fn counts(l: &Launches) -> std::sync::MutexGuard<'_, Counts> {
    l.counts
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Launches {
    /// Subscribes to CUPTI's launch callbacks (once per process); an error
    /// says why not (no CUPTI library, another subscriber, ...).
    pub(crate) fn get() -> Result<&'static Launches, String> {
        LAUNCHES
            .get_or_init(subscribe)
            .as_ref()
            .map_err(Clone::clone)
    }

    /// Notes gpu-counters' own kernel `f`, which is never counted.
    pub(crate) fn exclude(&self, f: ds::CUfunction) {
        COUNTING.store(true, std::sync::atomic::Ordering::Release);
        let mut c = counts(self);
        if !c.ours.contains(&(f as usize)) {
            c.ours.push(f as usize);
        }
    }

    /// `stream`'s count now.
    pub(crate) fn count(&self, stream: ds::CUstream) -> StreamCount {
        counts(self)
            .per_stream
            .get(&(stream as usize))
            .copied()
            .unwrap_or_default()
    }

    fn add(&self, f: ds::CUfunction, stream: ds::CUstream, threads: u64) {
        let mut c = counts(self);
        if c.ours.contains(&(f as usize)) {
            return;
        }
        let s = c.per_stream.entry(stream as usize).or_default();
        s.invocations = s.invocations.wrapping_add(threads);
    }

    /// A launch of `exec` on `stream`: its threads counted where known,
    /// else a new epoch.
    fn graph_launched(&self, exec: ds::CUgraphExec, stream: ds::CUstream) {
        let mut c = counts(self);
        let threads = c.graphs.get(&(exec as usize)).copied().flatten();
        let s = c.per_stream.entry(stream as usize).or_default();
        match threads {
            Some(n) => s.invocations = s.invocations.wrapping_add(n),
            None => s.epoch += 1,
        }
    }

    /// `exec` was instantiated from `graph` (flags: device launch or not).
    fn graph_instantiated(&self, exec: ds::CUgraphExec, graph: ds::CUgraph, device_launch: bool) {
        let ours = counts(self).ours.clone();
        let threads = if device_launch {
            None
        } else {
            graph_threads(graph, &ours, 0)
        };
        counts(self).graphs.insert(exec as usize, threads);
    }

    /// `exec` may have changed: its launches are no longer counted.
    fn graph_changed(&self, exec: ds::CUgraphExec) {
        if let Some(t) = counts(self).graphs.get_mut(&(exec as usize)) {
            *t = None;
        }
    }

    fn graph_destroyed(&self, exec: ds::CUgraphExec) {
        counts(self).graphs.remove(&(exec as usize));
    }
}

/// Child graphs deeper than this are not followed (the count is unknown).
const MAX_GRAPH_DEPTH: u32 = 16;

/// The threads one launch of `graph` runs: its kernel nodes' grid × block
/// (gpu-counters' own kernels, `ours`, left out), child graphs included;
/// `None` where that cannot be known (a conditional node, a node type this
/// code does not know, a query that failed).
fn graph_threads(graph: ds::CUgraph, ours: &[usize], depth: u32) -> Option<u64> {
    // CUgraphNodeType's values, read as plain numbers (a value the bindings
    // lack must not become an enum).
    const KERNEL: u32 = 0;
    const GRAPH: u32 = 4;
    const NO_KERNELS: [u32; 11] = [1, 2, 3, 5, 6, 7, 8, 9, 10, 11, 12];
    if depth > MAX_GRAPH_DEPTH {
        return None;
    }
    let mut n = 0usize;
    // SAFETY: a count query (null array) on the graph the call being
    // reported was given; the driver writes `n`.
    let r = unsafe { ds::cuGraphGetNodes(graph, std::ptr::null_mut(), &mut n) };
    if r != ds::CUresult::CUDA_SUCCESS {
        return None;
    }
    let mut nodes: Vec<ds::CUgraphNode> = vec![std::ptr::null_mut(); n];
    let mut got = n;
    // SAFETY: `nodes` holds `n` entries; the driver writes at most `got`.
    let r = unsafe { ds::cuGraphGetNodes(graph, nodes.as_mut_ptr(), &mut got) };
    if r != ds::CUresult::CUDA_SUCCESS || got != n {
        return None;
    }
    let mut threads = 0u64;
    for node in nodes {
        let mut kind = 0u32;
        // SAFETY: a node of the graph; the driver writes one 32-bit value
        // (CUgraphNodeType is a C enum), read here as a number.
        let r = unsafe { ds::cuGraphNodeGetType(node, (&mut kind as *mut u32).cast()) };
        if r != ds::CUresult::CUDA_SUCCESS {
            return None;
        }
        match kind {
            KERNEL => {
                // SAFETY: all-zero is a valid value of this plain C struct
                // of integers and pointers.
                let mut p: ds::CUDA_KERNEL_NODE_PARAMS = unsafe { std::mem::zeroed() };
                // SAFETY: a kernel node of the graph; `p` is the structure
                // the call fills.
                let r = unsafe { ds::cuGraphKernelNodeGetParams_v2(node, &mut p) };
                if r != ds::CUresult::CUDA_SUCCESS {
                    return None;
                }
                if !ours.contains(&(p.func as usize)) {
                    threads = threads.saturating_add(self::threads(
                        [p.gridDimX, p.gridDimY, p.gridDimZ],
                        [p.blockDimX, p.blockDimY, p.blockDimZ],
                    ));
                }
            }
            GRAPH => {
                let mut child = std::ptr::null_mut();
                // SAFETY: a child-graph node of the graph; the driver writes
                // the child graph's handle (owned by the node).
                let r = unsafe { ds::cuGraphChildGraphNodeGetGraph(node, &mut child) };
                if r != ds::CUresult::CUDA_SUCCESS {
                    return None;
                }
                threads = threads.saturating_add(graph_threads(child, ours, depth + 1)?);
            }
            k if NO_KERNELS.contains(&k) => {}
            // Conditional nodes (13) and any type newer than this code.
            _ => return None,
        }
    }
    Some(threads)
}

/// The callbacks subscribed to: launches (counted), and asynchronous
/// copies and memsets (only their correlation ids, for zero-intrusion
/// timestamps: [`crate::activity`]).
const CALLBACKS: [cs::CUpti_driver_api_trace_cbid_enum; 28] = {
    use cs::CUpti_driver_api_trace_cbid_enum as Id;
    [
        Id::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
        Id::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
        Id::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,
        Id::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
        Id::CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch,
        Id::CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz,
        Id::CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2,
        Id::CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2_ptsz,
        Id::CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2,
        Id::CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2_ptsz,
        Id::CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync_v2,
        Id::CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync_v2_ptsz,
        Id::CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync,
        Id::CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync_ptsz,
        Id::CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async,
        Id::CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async_ptsz,
        Id::CUPTI_DRIVER_TRACE_CBID_cuMemsetD16Async,
        Id::CUPTI_DRIVER_TRACE_CBID_cuMemsetD16Async_ptsz,
        Id::CUPTI_DRIVER_TRACE_CBID_cuMemsetD32Async,
        Id::CUPTI_DRIVER_TRACE_CBID_cuMemsetD32Async_ptsz,
        Id::CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeerAsync,
        Id::CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeerAsync_ptsz,
        // Graph instances: made, changed, destroyed.
        Id::CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiate,
        Id::CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiate_v2,
        Id::CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiateWithFlags,
        Id::CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiateWithParams,
        Id::CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiateWithParams_ptsz,
        Id::CUPTI_DRIVER_TRACE_CBID_cuGraphExecDestroy,
    ]
};

/// The calls that change a graph instance (also subscribed to).
const GRAPH_CHANGES: [cs::CUpti_driver_api_trace_cbid_enum; 7] = {
    use cs::CUpti_driver_api_trace_cbid_enum as Id;
    [
        Id::CUPTI_DRIVER_TRACE_CBID_cuGraphExecKernelNodeSetParams,
        Id::CUPTI_DRIVER_TRACE_CBID_cuGraphExecKernelNodeSetParams_v2,
        Id::CUPTI_DRIVER_TRACE_CBID_cuGraphExecUpdate,
        Id::CUPTI_DRIVER_TRACE_CBID_cuGraphExecUpdate_v2,
        Id::CUPTI_DRIVER_TRACE_CBID_cuGraphExecNodeSetParams,
        Id::CUPTI_DRIVER_TRACE_CBID_cuGraphExecChildGraphNodeSetParams,
        Id::CUPTI_DRIVER_TRACE_CBID_cuGraphNodeSetEnabled,
    ]
};

/// The first two parameters every `cuGraphInstantiate*` call starts with
/// (its `_params` structures all begin so).
#[repr(C)]
struct InstantiateHead {
    exec: *mut ds::CUgraphExec,
    graph: ds::CUgraph,
}

/// `CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH`: launches may come from
/// the device, which no callback sees.
const DEVICE_LAUNCH: u64 = 4;

fn subscribe() -> Result<Launches, String> {
    let api = crate::cupti::cupti_api()?;
    let mut subscriber: cs::CUpti_SubscriberHandle = std::ptr::null_mut();
    // SAFETY: `subscriber` is a valid out-pointer; `on_launch` has the
    // callback signature and uses no user data.
    let r = unsafe { api.cuptiSubscribe(&mut subscriber, Some(on_launch), std::ptr::null_mut()) };
    if r != cs::CUptiResult::CUPTI_SUCCESS {
        return Err(format!(
            "{} (CUPTI allows one subscriber per process: is another profiler attached?)",
            crate::cupti::check("cuptiSubscribe", r).unwrap_err()
        ));
    }
    for &cbid in CALLBACKS.iter().chain(&GRAPH_CHANGES) {
        // SAFETY: `subscriber` was just subscribed; the domain and callback
        // ids are CUPTI's own constants.
        let r = unsafe {
            api.cuptiEnableCallback(
                1,
                subscriber,
                cs::CUpti_CallbackDomain::CUPTI_CB_DOMAIN_DRIVER_API,
                cbid.0,
            )
        };
        if r != cs::CUptiResult::CUPTI_SUCCESS {
            // SAFETY: the subscriber is ours; no callback of it is enabled
            // that could still be running with this failure returned.
            let _ = unsafe { api.cuptiUnsubscribe(subscriber) };
            return Err(
                crate::cupti::check(&format!("cuptiEnableCallback({})", cbid.0), r).unwrap_err(),
            );
        }
    }
    Ok(Launches {
        counts: Mutex::new(Counts::default()),
        subscriber: subscriber as usize,
        api,
    })
}

/// Threads of a launch: grid × block, in u64 (each factor is u32).
fn threads(grid: [u32; 3], block: [u32; 3]) -> u64 {
    grid.iter()
        .chain(&block)
        .fold(1u64, |n, &d| n.saturating_mul(u64::from(d)))
}

/// CUPTI's driver-API callback: counts successful launches at their exit.
unsafe extern "C" fn on_launch(
    _userdata: *mut c_void,
    domain: cs::CUpti_CallbackDomain,
    cbid: cs::CUpti_CallbackId,
    cbdata: *const c_void,
) {
    if cbdata.is_null() {
        return;
    }
    // The trace observer sees every callback first (every domain it
    // enabled), whatever this module does with it.
    // SAFETY: CUPTI's callback data for `domain`, valid during the call.
    unsafe { crate::tracer::dispatch(domain, cbid, cbdata) };
    if domain != cs::CUpti_CallbackDomain::CUPTI_CB_DOMAIN_DRIVER_API {
        return;
    }
    // Callbacks can come before subscribing finished: nothing to count into.
    let Some(Ok(launches)) = LAUNCHES.get() else {
        return;
    };
    // SAFETY: for the driver-API domain, CUPTI passes a CUpti_CallbackData
    // that is valid for the duration of the callback.
    let data = unsafe { &*(cbdata as *const cs::CUpti_CallbackData) };
    if data.functionParams.is_null() {
        return;
    }
    if data.callbackSite == cs::CUpti_ApiCallbackSite::CUPTI_API_ENTER {
        // A change to a graph instance stops its counting before it takes
        // effect (and again at the exit).
        if note_change(launches, cbid, data.functionParams) {
            return;
        }
        // Zero-intrusion samples that want this launch traced turn tracing
        // on before the driver launches it.
        if let Some(stream) = launch_stream(cbid, data.functionParams) {
            if let Some(o) = OBSERVER.get() {
                o.entering(stream);
            }
        }
        return;
    }
    if data.callbackSite != cs::CUpti_ApiCallbackSite::CUPTI_API_EXIT {
        return;
    }
    /// Lets tracing turned on at the entry go, however the exit returns.
    struct Exit;
    impl Drop for Exit {
        fn drop(&mut self) {
            if let Some(o) = OBSERVER.get() {
                o.exited();
            }
        }
    }
    let _exit = Exit;
    if data.functionReturnValue.is_null() {
        return;
    }
    if note_change(launches, cbid, data.functionParams) {
        return;
    }
    // SAFETY: at a driver-API call's exit, functionReturnValue points to
    // the call's CUresult.
    let ok =
        unsafe { *(data.functionReturnValue as *const ds::CUresult) } == ds::CUresult::CUDA_SUCCESS;
    if !ok {
        return;
    }
    use cs::CUpti_driver_api_trace_cbid_enum as Id;
    let is = |id: Id| cbid == id.0;
    let counting = COUNTING.load(std::sync::atomic::Ordering::Acquire);
    let params = data.functionParams;
    let correlation = data.correlationId;
    if is(Id::CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiate)
        || is(Id::CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiate_v2)
        || is(Id::CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiateWithFlags)
        || is(Id::CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiateWithParams)
        || is(Id::CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiateWithParams_ptsz)
    {
        // SAFETY: every cuGraphInstantiate* `_params` structure begins with
        // (phGraphExec, hGraph); at a successful call's exit the caller's
        // out-pointer (checked for null) holds the new instance.
        let head = unsafe { &*(params as *const InstantiateHead) };
        if head.exec.is_null() || !counting {
            return;
        }
        // SAFETY: as above.
        let exec = unsafe { *head.exec };
        let device_launch = if is(Id::CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiateWithFlags) {
            // SAFETY: this id's parameters are cuGraphInstantiateWithFlags_params.
            let p = unsafe { &*(params as *const cs::cuGraphInstantiateWithFlags_params_st) };
            p.flags & DEVICE_LAUNCH != 0
        } else if is(Id::CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiate)
            || is(Id::CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiate_v2)
        {
            false
        } else {
            // SAFETY: these ids' parameters are
            // cuGraphInstantiateWithParams_params; its parameter block is
            // the caller's, valid during the call (checked for null).
            let p = unsafe { &*(params as *const cs::cuGraphInstantiateWithParams_params_st) };
            // SAFETY: non-null, the call's own parameter block.
            p.instantiateParams.is_null()
                || unsafe { (*p.instantiateParams).flags } & DEVICE_LAUNCH != 0
        };
        launches.graph_instantiated(exec, head.graph, device_launch);
        return;
    }
    if is(Id::CUPTI_DRIVER_TRACE_CBID_cuGraphExecDestroy) {
        // SAFETY: cuGraphExecDestroy_params: the instance.
        let p = unsafe { &*(params as *const cs::cuGraphExecDestroy_params_st) };
        launches.graph_destroyed(p.hGraphExec.cast());
        return;
    }
    if let Some(stream) = copy_stream(cbid, params) {
        if tracked(stream) && !capturing(stream) {
            launched(stream, correlation, LaunchKind::Single);
        }
        return;
    }
    if is(Id::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel)
        || is(Id::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz)
    {
        // SAFETY: for these ids functionParams points to the call's
        // parameters, laid out as cuLaunchKernel_params (the `_ptsz`
        // variant has the same layout).
        let p = unsafe { &*(params as *const cs::cuLaunchKernel_params_st) };
        let n = threads(
            [p.gridDimX, p.gridDimY, p.gridDimZ],
            [p.blockDimX, p.blockDimY, p.blockDimZ],
        );
        let stream: ds::CUstream = p.hStream.cast();
        let tracked = tracked(stream);
        // A launch into a stream being captured runs only with its graph.
        if (counting || tracked) && !capturing(stream) {
            if counting {
                launches.add(p.f.cast(), stream, n);
            }
            if tracked {
                launched(stream, correlation, LaunchKind::Single);
            }
        }
    } else if is(Id::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx)
        || is(Id::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz)
    {
        // SAFETY: as above, cuLaunchKernelEx_params; its config pointer is
        // the caller's, valid during the call (checked for null).
        let p = unsafe { &*(params as *const cs::cuLaunchKernelEx_params_st) };
        if p.config.is_null() {
            return;
        }
        // SAFETY: non-null, the launch's own configuration.
        let c = unsafe { &*p.config };
        let n = threads(
            [c.gridDimX, c.gridDimY, c.gridDimZ],
            [c.blockDimX, c.blockDimY, c.blockDimZ],
        );
        let stream: ds::CUstream = c.hStream.cast();
        let tracked = tracked(stream);
        if (counting || tracked) && !capturing(stream) {
            if counting {
                launches.add(p.f.cast(), stream, n);
            }
            if tracked {
                launched(stream, correlation, LaunchKind::Single);
            }
        }
    } else if is(Id::CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch)
        || is(Id::CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz)
    {
        // SAFETY: as above, cuGraphLaunch_params.
        let p = unsafe { &*(params as *const cs::cuGraphLaunch_params_st) };
        let stream: ds::CUstream = p.hStream.cast();
        let tracked = tracked(stream);
        if (counting || tracked) && !capturing(stream) {
            if counting {
                launches.graph_launched(p.hGraph.cast(), stream);
            }
            if tracked {
                launched(stream, correlation, LaunchKind::Graph);
            }
        }
    }
}

/// The stream of any callback subscribed to (`None` for others, or a
/// kernel launch without its configuration). `params` is not null.
fn launch_stream(cbid: cs::CUpti_CallbackId, params: *const c_void) -> Option<ds::CUstream> {
    use cs::CUpti_driver_api_trace_cbid_enum as Id;
    let is = |id: Id| cbid == id.0;
    if let Some(s) = copy_stream(cbid, params) {
        return Some(s);
    }
    if is(Id::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel)
        || is(Id::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz)
    {
        // SAFETY: as in `on_launch`: cuLaunchKernel_params.
        Some(unsafe { (*(params as *const cs::cuLaunchKernel_params_st)).hStream }.cast())
    } else if is(Id::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx)
        || is(Id::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz)
    {
        // SAFETY: as in `on_launch`: cuLaunchKernelEx_params, whose config
        // pointer is the caller's, checked for null.
        let config = unsafe { (*(params as *const cs::cuLaunchKernelEx_params_st)).config };
        // SAFETY: non-null, the launch's own configuration.
        (!config.is_null()).then(|| unsafe { (*config).hStream }.cast())
    } else if is(Id::CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch)
        || is(Id::CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz)
    {
        // SAFETY: as in `on_launch`: cuGraphLaunch_params.
        Some(unsafe { (*(params as *const cs::cuGraphLaunch_params_st)).hStream }.cast())
    } else {
        None
    }
}

/// For the calls that change a graph instance (whether or not they
/// succeed): its launches are no longer counted. Returns whether `cbid` is
/// one. Each of these ids' `_params` structures begins with the instance,
/// `hGraphExec`; `params` is not null.
fn note_change(launches: &Launches, cbid: cs::CUpti_CallbackId, params: *const c_void) -> bool {
    if !GRAPH_CHANGES.iter().any(|&id| cbid == id.0) {
        return false;
    }
    // SAFETY: see above: the first field is the CUgraphExec.
    let exec = unsafe { *(params as *const ds::CUgraphExec) };
    launches.graph_changed(exec);
    true
}

/// Whether `stream` is being captured into a graph (its launches then run
/// only when the graph is launched). A query that fails says no.
fn capturing(stream: ds::CUstream) -> bool {
    let mut status = ds::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
    // SAFETY: a valid out-pointer; the stream was just used by the call
    // whose callback this is.
    let r = unsafe { ds::cuStreamIsCapturing(stream, &mut status) };
    r == ds::CUresult::CUDA_SUCCESS
        && status != ds::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE
}

/// The stream of an asynchronous copy or memset callback, `None` for other
/// callbacks.
fn copy_stream(cbid: cs::CUpti_CallbackId, params: *const c_void) -> Option<ds::CUstream> {
    use cs::CUpti_driver_api_trace_cbid_enum as Id;
    let is = |id: Id| cbid == id.0;
    macro_rules! stream_of {
        ($t:ty) => {
            // SAFETY: for the callback ids it is used with, CUPTI's
            // functionParams points to the call's parameters, laid out as
            // the named `_params` structure (the `_ptsz` variants have the
            // same layout); the caller checked it is not null.
            Some(unsafe { (*(params as *const $t)).hStream }.cast())
        };
    }
    if is(Id::CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2)
        || is(Id::CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2_ptsz)
    {
        stream_of!(cs::cuMemcpyHtoDAsync_v2_params_st)
    } else if is(Id::CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2)
        || is(Id::CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2_ptsz)
    {
        stream_of!(cs::cuMemcpyDtoHAsync_v2_params_st)
    } else if is(Id::CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync_v2)
        || is(Id::CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync_v2_ptsz)
    {
        stream_of!(cs::cuMemcpyDtoDAsync_v2_params_st)
    } else if is(Id::CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync)
        || is(Id::CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync_ptsz)
    {
        stream_of!(cs::cuMemcpyAsync_params_st)
    } else if is(Id::CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async)
        || is(Id::CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async_ptsz)
    {
        stream_of!(cs::cuMemsetD8Async_params_st)
    } else if is(Id::CUPTI_DRIVER_TRACE_CBID_cuMemsetD16Async)
        || is(Id::CUPTI_DRIVER_TRACE_CBID_cuMemsetD16Async_ptsz)
    {
        stream_of!(cs::cuMemsetD16Async_params_st)
    } else if is(Id::CUPTI_DRIVER_TRACE_CBID_cuMemsetD32Async)
        || is(Id::CUPTI_DRIVER_TRACE_CBID_cuMemsetD32Async_ptsz)
    {
        stream_of!(cs::cuMemsetD32Async_params_st)
    } else if is(Id::CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeerAsync)
        || is(Id::CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeerAsync_ptsz)
    {
        stream_of!(cs::cuMemcpyPeerAsync_params_st)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::threads;

    #[test]
    fn threads_multiply_without_overflow() {
        assert_eq!(threads([3, 2, 1], [64, 1, 1]), 384);
        assert_eq!(threads([1, 1, 1], [1, 1, 1]), 1);
        assert_eq!(threads([0, 1, 1], [64, 1, 1]), 0);
        assert_eq!(
            threads([u32::MAX, u32::MAX, u32::MAX], [1024, 1, 1]),
            u64::MAX
        );
    }
}
