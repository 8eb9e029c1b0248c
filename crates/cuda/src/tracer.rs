//! What the process-wide tracer registered ([`crate::trace`]) is handed:
//! the types of the callbacks and activity records it sees, the one
//! observer and the one sink, and the functions the launch callback
//! ([`crate::launches`]) and the buffer callbacks ([`crate::activity`])
//! call to reach them. A leaf: it calls no other module of this crate.

use gpu_counters_cupti_sys as cs;
use std::ffi::{c_void, CStr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// CUPTI's activity kinds, as numbers (`CUpti_ActivityKind`).
pub mod kind {
    /// Memory copies (`CUpti_ActivityMemcpy6`).
    pub const MEMCPY: u32 = 1;
    /// Memsets (`CUpti_ActivityMemset4`).
    pub const MEMSET: u32 = 2;
    /// Kernels, serialized: never enabled by a tracer.
    pub const KERNEL: u32 = 3;
    /// Devices.
    pub const DEVICE: u32 = 8;
    /// Contexts.
    pub const CONTEXT: u32 = 9;
    /// Kernels, running concurrently (`CUpti_ActivityKernel10`).
    pub const CONCURRENT_KERNEL: u32 = 10;
    /// CUPTI's and the driver's overhead.
    pub const OVERHEAD: u32 = 17;
    /// Peer-to-peer copies.
    pub const MEMCPY2: u32 = 22;
    /// Synchronizations (`CUpti_ActivitySynchronization`).
    pub const SYNCHRONIZATION: u32 = 38;
}

/// A callback domain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Domain {
    /// Driver API calls (`cu*`).
    Driver,
    /// Runtime API calls (`cuda*`).
    Runtime,
    /// Contexts and streams made and destroyed.
    Resource,
    /// Synchronizations of contexts and streams.
    Synchronize,
    /// CUPTI's state (fatal errors).
    State,
}

impl Domain {
    pub(crate) fn raw(self) -> cs::CUpti_CallbackDomain {
        use cs::CUpti_CallbackDomain as D;
        match self {
            Domain::Driver => D::CUPTI_CB_DOMAIN_DRIVER_API,
            Domain::Runtime => D::CUPTI_CB_DOMAIN_RUNTIME_API,
            Domain::Resource => D::CUPTI_CB_DOMAIN_RESOURCE,
            Domain::Synchronize => D::CUPTI_CB_DOMAIN_SYNCHRONIZE,
            Domain::State => D::CUPTI_CB_DOMAIN_STATE,
        }
    }

    fn from_raw(d: cs::CUpti_CallbackDomain) -> Option<Domain> {
        use cs::CUpti_CallbackDomain as D;
        Some(match d {
            D::CUPTI_CB_DOMAIN_DRIVER_API => Domain::Driver,
            D::CUPTI_CB_DOMAIN_RUNTIME_API => Domain::Runtime,
            D::CUPTI_CB_DOMAIN_RESOURCE => Domain::Resource,
            D::CUPTI_CB_DOMAIN_SYNCHRONIZE => Domain::Synchronize,
            D::CUPTI_CB_DOMAIN_STATE => Domain::State,
            _ => return None,
        })
    }

    /// The number CUPTI gives the domain (`CUpti_CallbackDomain`).
    pub fn number(self) -> u32 {
        self.raw().0
    }

    /// The callback ids of an API domain (0 up to CUPTI's `..._SIZE`);
    /// empty for the others.
    pub fn api_ids(self) -> std::ops::Range<u32> {
        match self {
            Domain::Driver => {
                0..cs::CUpti_driver_api_trace_cbid_enum::CUPTI_DRIVER_TRACE_CBID_SIZE.0
            }
            Domain::Runtime => {
                0..cs::CUpti_runtime_api_trace_cbid_enum::CUPTI_RUNTIME_TRACE_CBID_SIZE.0
            }
            _ => 0..0,
        }
    }
}

/// Where in an API call a callback runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Site {
    /// Before the call.
    Enter,
    /// After it.
    Exit,
}

/// One API call's callback, borrowed from CUPTI for its duration.
#[derive(Debug, Clone, Copy)]
pub struct ApiCall<'a> {
    /// Driver or runtime.
    pub domain: Domain,
    /// CUPTI's callback id (`CUpti_driver_api_trace_cbid` or
    /// `CUpti_runtime_api_trace_cbid`).
    pub cbid: u32,
    /// Entry or exit.
    pub site: Site,
    /// CUPTI's correlation id: the activity records of the work the call
    /// launched carry it.
    pub correlation: u32,
    /// The context's unique id (0 where there is none).
    pub context_uid: u32,
    /// The function's name (`cuLaunchKernel`).
    pub function: Option<&'a CStr>,
    /// The kernel's name, for launches.
    pub symbol: Option<&'a CStr>,
    /// The call's result (`CUresult` or `cudaError_t`), at the exit.
    pub result: Option<u32>,
    /// CUPTI's `functionParams`, valid during the callback.
    pub params: *const c_void,
}

/// A callback of any observed domain.
#[derive(Debug, Clone, Copy)]
pub enum Callback<'a> {
    /// A driver or runtime API call.
    Api(ApiCall<'a>),
    /// A context or stream made or destroyed (`CUpti_CallbackIdResource`);
    /// `context` and `stream` are the `CUcontext` and `CUstream` (0 where
    /// the event has none).
    Resource {
        /// The resource callback id.
        cbid: u32,
        /// The `CUcontext`.
        context: usize,
        /// The `CUstream`, for stream events.
        stream: usize,
    },
    /// A context or stream synchronized (`CUpti_CallbackIdSync`).
    Synchronize {
        /// The synchronize callback id.
        cbid: u32,
        /// The `CUcontext`.
        context: usize,
        /// The `CUstream` (0 for a context).
        stream: usize,
    },
    /// CUPTI's state changed (`CUpti_CallbackIdState`: 1, a fatal error).
    State {
        /// The state callback id.
        cbid: u32,
    },
}

/// Sees the callbacks [`observe_api`](crate::trace::observe_api) enabled.
/// Runs on the calling thread, inside the call: keep it short, take no
/// lock a CUDA call may wait on, and make no CUDA call.
pub trait ApiObserver: Send + Sync {
    /// One callback.
    fn callback(&self, c: &Callback<'_>);
}

static OBSERVER: OnceLock<&'static dyn ApiObserver> = OnceLock::new();

fn cstr<'a>(p: *const std::os::raw::c_char) -> Option<&'a CStr> {
    // SAFETY: CUPTI's strings are NUL-terminated and live at least for the
    // callback (the caller's lifetime).
    (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) })
}

/// Hands a callback to the observer.
///
/// # Safety
///
/// `cbdata` is CUPTI's non-null callback data for `domain`, valid for the
/// call.
pub(crate) unsafe fn dispatch(
    domain: cs::CUpti_CallbackDomain,
    cbid: cs::CUpti_CallbackId,
    cbdata: *const c_void,
) {
    let Some(o) = OBSERVER.get() else {
        return;
    };
    let Some(d) = Domain::from_raw(domain) else {
        return;
    };
    let c = match d {
        Domain::Driver | Domain::Runtime => {
            // SAFETY: for the API domains CUPTI passes a CUpti_CallbackData
            // (the caller's promise).
            let data = unsafe { &*(cbdata as *const cs::CUpti_CallbackData) };
            let site = if data.callbackSite == cs::CUpti_ApiCallbackSite::CUPTI_API_ENTER {
                Site::Enter
            } else {
                Site::Exit
            };
            let result = (site == Site::Exit && !data.functionReturnValue.is_null())
                // SAFETY: at an exit, functionReturnValue points to the
                // call's result, a 32-bit enum in both domains.
                .then(|| unsafe { *(data.functionReturnValue as *const u32) });
            Callback::Api(ApiCall {
                domain: d,
                cbid,
                site,
                correlation: data.correlationId,
                context_uid: data.contextUid,
                function: cstr(data.functionName),
                symbol: cstr(data.symbolName),
                result,
                params: data.functionParams,
            })
        }
        Domain::Resource => {
            // SAFETY: the resource domain's data (the caller's promise).
            let data = unsafe { &*(cbdata as *const cs::CUpti_ResourceData) };
            // SAFETY: the union's stream member is a plain pointer, read as
            // an address (0 for context events, which set no stream).
            let stream = unsafe { data.resourceHandle.stream } as usize;
            Callback::Resource {
                cbid,
                context: data.context as usize,
                stream,
            }
        }
        Domain::Synchronize => {
            // SAFETY: the synchronize domain's data (the caller's promise).
            let data = unsafe { &*(cbdata as *const cs::CUpti_SynchronizeData) };
            Callback::Synchronize {
                cbid,
                context: data.context as usize,
                stream: data.stream as usize,
            }
        }
        Domain::State => Callback::State { cbid },
    };
    o.callback(&c);
}

/// Where and when GPU work ran, from its activity record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Work {
    /// CUPTI's correlation id (of the API call that launched it).
    pub correlation: u32,
    /// The device's ordinal.
    pub device: u32,
    /// CUPTI's context id.
    pub context: u32,
    /// CUPTI's stream id.
    pub stream: u32,
    /// Start, on CUPTI's clock (`CLOCK_MONOTONIC` ns with this crate's
    /// timestamp callback); 0 for work that had not run (forced flush).
    pub start: u64,
    /// End, likewise.
    pub end: u64,
    /// The CUDA graph it ran in, 0 for none.
    pub graph_id: u32,
    /// The graph node, 0 for none.
    pub graph_node: u64,
    /// Launched from the device (dynamic parallelism, device graph launch).
    pub device_launched: bool,
    /// On a stream of a gpu-counters device in this process (its own
    /// probe and calibration kernels): not the program's work.
    pub ours: bool,
}

/// A kernel's record.
#[derive(Debug, Clone, Copy)]
pub struct KernelRecord<'a> {
    /// Where and when.
    pub work: Work,
    /// The kernel's (mangled) name, CUPTI's string, valid during
    /// [`RecordSink::record`] only.
    pub name: Option<&'a CStr>,
    /// The address of that string: the same for every launch of one
    /// function, a cheap key for interning.
    pub name_ptr: usize,
    /// Grid size.
    pub grid: [i32; 3],
    /// Block size.
    pub block: [i32; 3],
    /// Static shared memory per block.
    pub smem_static: i32,
    /// Dynamic shared memory per block.
    pub smem_dynamic: i32,
    /// Registers per thread.
    pub registers: u16,
}

/// A memory copy's record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CopyRecord {
    /// Where and when.
    pub work: Work,
    /// Bytes copied.
    pub bytes: u64,
    /// `CUpti_ActivityMemcpyKind` (1 HtoD, 2 DtoH, 8 DtoD, 10 PtoP, ...).
    pub copy_kind: u8,
    /// `CUpti_ActivityMemoryKind` of the source.
    pub src_kind: u8,
    /// `CUpti_ActivityMemoryKind` of the destination.
    pub dst_kind: u8,
    /// `CUpti_ActivityFlag` bits (asynchronous copy: 1).
    pub flags: u8,
}

/// A memset's record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemsetRecord {
    /// Where and when.
    pub work: Work,
    /// Bytes set.
    pub bytes: u64,
    /// The value.
    pub value: u32,
    /// `CUpti_ActivityMemoryKind`.
    pub memory_kind: u16,
}

/// A synchronization's record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SyncRecord {
    /// The correlation id of the synchronizing call.
    pub correlation: u32,
    /// `CUpti_ActivitySynchronizationType`: event 1, stream-wait-event 2,
    /// stream 3, context 4.
    pub sync_type: u32,
    /// CUPTI's context id.
    pub context: u32,
    /// CUPTI's stream id.
    pub stream: u32,
    /// The CUDA event's id.
    pub cuda_event: u32,
    /// Start.
    pub start: u64,
    /// End.
    pub end: u64,
}

/// One activity record.
#[derive(Debug, Clone, Copy)]
pub enum Record<'a> {
    /// A kernel ([`kind::CONCURRENT_KERNEL`] or [`kind::KERNEL`]).
    Kernel(KernelRecord<'a>),
    /// A copy ([`kind::MEMCPY`]).
    Memcpy(CopyRecord),
    /// A memset ([`kind::MEMSET`]).
    Memset(MemsetRecord),
    /// A synchronization ([`kind::SYNCHRONIZATION`]).
    Sync(SyncRecord),
    /// Any other kind, by number.
    Other {
        /// `CUpti_ActivityKind`.
        kind: u32,
    },
}

/// Sees every activity record; runs on CUPTI's thread (or the thread that
/// flushes), with this crate's activity state locked: it must not call
/// back into this crate.
pub trait RecordSink: Send + Sync {
    /// One record.
    fn record(&self, r: &Record<'_>);
    /// Every buffer up to number `n`
    /// ([`newest_buffer`](crate::trace::newest_buffer)) came back: the
    /// records of launches made while `n` was the newest are all seen.
    fn buffers_returned(&self, n: u64) {
        let _ = n;
    }
}

static SINK: OnceLock<&'static dyn RecordSink> = OnceLock::new();
/// Bit `k` set: kind `k` stays enabled for good.
static PERMANENT: AtomicU64 = AtomicU64::new(0);

/// Registers `o` as the process's API observer; `false` where one is
/// registered already (the first holds).
pub(crate) fn set_observer(o: &'static dyn ApiObserver) -> bool {
    OBSERVER.set(o).is_ok()
}

/// Registers `s` as the process's record sink; `false` where one is
/// registered already (the first holds).
pub(crate) fn set_sink(s: &'static dyn RecordSink) -> bool {
    SINK.set(s).is_ok()
}

/// Keeps activity kind `k` enabled for good (see [`permanent`]).
pub(crate) fn make_permanent(k: u32) {
    if k < 64 {
        PERMANENT.fetch_or(1 << k, Ordering::AcqRel);
    }
}

/// Whether `k` was enabled for good by
/// [`record_sink`](crate::trace::record_sink).
pub(crate) fn permanent(k: cs::CUpti_ActivityKind) -> bool {
    k.0 < 64 && PERMANENT.load(Ordering::Acquire) & (1 << k.0) != 0
}

/// Whether a sink is registered.
pub(crate) fn sinking() -> bool {
    SINK.get().is_some()
}

/// Reads a `T` at `offset` of a record.
///
/// # Safety
///
/// `offset + size_of::<T>()` must lie inside the record.
unsafe fn at<T: Copy>(record: *const u8, offset: usize) -> T {
    // SAFETY: the caller's promise; records are only 8-byte aligned.
    unsafe { std::ptr::read_unaligned(record.add(offset) as *const T) }
}

/// Parses the record at `base` (of kind `k`) and hands it to the sink.
///
/// # Safety
///
/// `base` is a whole record of CUPTI's of kind `k`, valid for the call.
pub(crate) unsafe fn sink(base: *const u8, k: u32, ours: bool) {
    let Some(s) = SINK.get() else {
        return;
    };
    use std::mem::offset_of;
    // SAFETY: each read is at an offset of the binding's structure for the
    // record's kind, CUPTI 13.0's, inside the record (the caller's
    // promise); CUPTI 12 and later keep these fields where they are (newer
    // versions only append).
    let r = unsafe {
        match k {
            kind::CONCURRENT_KERNEL | kind::KERNEL => {
                type K = cs::CUpti_ActivityKernel10;
                let name: *const std::os::raw::c_char = at(base, offset_of!(K, name));
                Record::Kernel(KernelRecord {
                    work: Work {
                        correlation: at(base, offset_of!(K, correlationId)),
                        device: at(base, offset_of!(K, deviceId)),
                        context: at(base, offset_of!(K, contextId)),
                        stream: at(base, offset_of!(K, streamId)),
                        start: at(base, offset_of!(K, start)),
                        end: at(base, offset_of!(K, end)),
                        graph_id: at(base, offset_of!(K, graphId)),
                        graph_node: at(base, offset_of!(K, graphNodeId)),
                        device_launched: at::<u8>(base, offset_of!(K, launchType)) != 0,
                        ours,
                    },
                    name: cstr(name),
                    name_ptr: name as usize,
                    grid: [
                        at(base, offset_of!(K, gridX)),
                        at(base, offset_of!(K, gridY)),
                        at(base, offset_of!(K, gridZ)),
                    ],
                    block: [
                        at(base, offset_of!(K, blockX)),
                        at(base, offset_of!(K, blockY)),
                        at(base, offset_of!(K, blockZ)),
                    ],
                    smem_static: at(base, offset_of!(K, staticSharedMemory)),
                    smem_dynamic: at(base, offset_of!(K, dynamicSharedMemory)),
                    registers: at(base, offset_of!(K, registersPerThread)),
                })
            }
            kind::MEMCPY => {
                type C = cs::CUpti_ActivityMemcpy6;
                Record::Memcpy(CopyRecord {
                    work: Work {
                        correlation: at(base, offset_of!(C, correlationId)),
                        device: at(base, offset_of!(C, deviceId)),
                        context: at(base, offset_of!(C, contextId)),
                        stream: at(base, offset_of!(C, streamId)),
                        start: at(base, offset_of!(C, start)),
                        end: at(base, offset_of!(C, end)),
                        graph_id: at(base, offset_of!(C, graphId)),
                        graph_node: at(base, offset_of!(C, graphNodeId)),
                        device_launched: at::<u8>(base, offset_of!(C, isDeviceLaunched)) != 0,
                        ours,
                    },
                    bytes: at(base, offset_of!(C, bytes)),
                    copy_kind: at(base, offset_of!(C, copyKind)),
                    src_kind: at(base, offset_of!(C, srcKind)),
                    dst_kind: at(base, offset_of!(C, dstKind)),
                    flags: at(base, offset_of!(C, flags)),
                })
            }
            kind::MEMSET => {
                type M = cs::CUpti_ActivityMemset4;
                Record::Memset(MemsetRecord {
                    work: Work {
                        correlation: at(base, offset_of!(M, correlationId)),
                        device: at(base, offset_of!(M, deviceId)),
                        context: at(base, offset_of!(M, contextId)),
                        stream: at(base, offset_of!(M, streamId)),
                        start: at(base, offset_of!(M, start)),
                        end: at(base, offset_of!(M, end)),
                        graph_id: at(base, offset_of!(M, graphId)),
                        graph_node: at(base, offset_of!(M, graphNodeId)),
                        device_launched: at::<u8>(base, offset_of!(M, isDeviceLaunched)) != 0,
                        ours,
                    },
                    bytes: at(base, offset_of!(M, bytes)),
                    value: at(base, offset_of!(M, value)),
                    memory_kind: at(base, offset_of!(M, memoryKind)),
                })
            }
            kind::SYNCHRONIZATION => {
                type S = cs::CUpti_ActivitySynchronization;
                Record::Sync(SyncRecord {
                    correlation: at(base, offset_of!(S, correlationId)),
                    sync_type: at(base, offset_of!(S, type_)),
                    context: at(base, offset_of!(S, contextId)),
                    stream: at(base, offset_of!(S, streamId)),
                    cuda_event: at(base, offset_of!(S, cudaEventId)),
                    start: at(base, offset_of!(S, start)),
                    end: at(base, offset_of!(S, end)),
                })
            }
            other => Record::Other { kind: other },
        }
    };
    s.record(&r);
}

/// Every buffer up to `n` came back (called after a buffer was freed).
pub(crate) fn buffers_returned(n: u64) {
    if let Some(s) = SINK.get() {
        s.buffers_returned(n);
    }
}
