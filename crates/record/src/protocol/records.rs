//! The records a frame carries, one type per record tag, and [`Record`],
//! which is any of them.

use super::{Name, Seq, Text, VkDevice, VkFrame, VkQueue, VkScope, VkStatNames, VkStats};

/// The first record of every connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hello<'a> {
    /// The parent process.
    pub ppid: u32,
    /// When the process's injection started, `CLOCK_MONOTONIC` ns.
    pub start_ns: u64,
    /// The injection's version (`major << 16 | minor << 8 | patch`).
    pub lib_version: u32,
    /// CUPTI's API version, 0 when not loaded.
    pub cupti_version: u32,
    /// The CUDA driver's version, 0 when not known.
    pub driver_version: i32,
    /// What the process set up so far: bits of [`init`](super::init).
    pub flags: u32,
    /// The executable's path.
    pub exe: Text<'a>,
    /// The command line, arguments separated by NUL as in `/proc/PID/cmdline`.
    pub cmdline: Text<'a>,
}

/// A string the process will refer to by id (kernel, API function, metric,
/// thread, device and registered NVTX names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Str<'a> {
    /// The id, per connection, never 0.
    pub id: u32,
    /// The string.
    pub text: Text<'a>,
}

/// A thread's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Thread {
    /// The thread id (`gettid`).
    pub tid: u32,
    /// Its name, a [`Str`] id.
    pub name: u32,
}

/// A CUDA device the process uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Device {
    /// The device's ordinal in the process (as `CUDA_VISIBLE_DEVICES` made it).
    pub ordinal: u32,
    /// Its UUID, the same in every process.
    pub uuid: [u8; 16],
    /// Streaming multiprocessors.
    pub sm_count: u32,
    /// Compute capability, major.
    pub cc_major: u16,
    /// Compute capability, minor.
    pub cc_minor: u16,
    /// Its name, a [`Str`] id.
    pub name: u32,
    /// Its chip (CUPTI's chip name), a [`Str`] id, 0 when not known.
    pub chip: u32,
}

/// A calibration of a device's activity clock against `CLOCK_MONOTONIC`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Clock {
    /// The device's ordinal in the process.
    pub device: u32,
    /// When, `CLOCK_MONOTONIC` ns.
    pub cpu_ns: u64,
    /// GPU time + `offset_ns` = CPU time.
    pub offset_ns: i64,
    /// The bound on every converted time, ns.
    pub bound_ns: u64,
}

/// An entry point of the injection ran after [`Hello`] was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Init {
    /// What is set up now: bits of [`init`](super::init).
    pub flags: u32,
    /// CUPTI's API version, 0 when not loaded.
    pub cupti_version: u32,
    /// The CUDA driver's version, 0 when not known.
    pub driver_version: i32,
}

/// Kinds of [`Api`] calls.
pub mod api_kind {
    /// A kernel launch.
    pub const LAUNCH: u8 = 1;
    /// A CUDA graph launch.
    pub const GRAPH: u8 = 2;
    /// A memory copy.
    pub const COPY: u8 = 3;
    /// A memset.
    pub const MEMSET: u8 = 4;
    /// A synchronization.
    pub const SYNC: u8 = 5;
    /// Anything else observed.
    pub const OTHER: u8 = 6;
}

/// A CUDA API call, sent at its exit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Api {
    /// The calling thread.
    pub tid: u32,
    /// CUPTI's callback domain.
    pub domain: u8,
    /// One of [`api_kind`].
    pub kind: u8,
    /// CUPTI's callback id.
    pub cbid: u32,
    /// CUPTI's correlation id: the GPU work it launched carries the same.
    pub correlation: u32,
    /// Entry, `CLOCK_MONOTONIC` ns.
    pub enter_ns: u64,
    /// Exit, `CLOCK_MONOTONIC` ns.
    pub exit_ns: u64,
    /// The call's `CUresult`.
    pub result: u32,
    /// The innermost NVTX range open on the thread, 0 for none.
    pub range_id: u64,
    /// The function's name, a [`Str`] id.
    pub name: u32,
}

/// Where a [`Kernel`], [`MemCopy`] or [`Memset`] ran and what launched it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Work {
    /// CUPTI's correlation id.
    pub correlation: u32,
    /// The device's ordinal in the process.
    pub device: u8,
    /// Bits of [`activity`](super::activity).
    pub flags: u8,
    /// The CUDA context's id.
    pub context: u32,
    /// The stream's id.
    pub stream: u32,
    /// Start, `CLOCK_MONOTONIC` ns.
    pub start_ns: u64,
    /// End, `CLOCK_MONOTONIC` ns.
    pub end_ns: u64,
    /// The CUDA graph it ran in, 0 for none.
    pub graph_id: u32,
    /// The graph node, 0 for none.
    pub graph_node: u64,
    /// The thread whose API call launched it (with [`activity::JOINED`](super::activity::JOINED)).
    pub launch_tid: u32,
    /// That call's entry, `CLOCK_MONOTONIC` ns (with [`activity::JOINED`](super::activity::JOINED)).
    pub enter_ns: u64,
    /// The innermost NVTX range open on that thread then, 0 for none.
    pub range_id: u64,
}

/// A kernel that ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Kernel {
    /// Where and when.
    pub work: Work,
    /// Registers per thread.
    pub registers: u16,
    /// Grid size.
    pub grid: [u32; 3],
    /// Block size.
    pub block: [u32; 3],
    /// Static shared memory per block, bytes.
    pub smem_static: u32,
    /// Dynamic shared memory per block, bytes.
    pub smem_dynamic: u32,
    /// The mangled name, a [`Str`] id.
    pub name: u32,
}

/// Copy directions (CUPTI's `CUpti_ActivityMemcpyKind`).
pub mod copy_kind {
    /// Host to device.
    pub const HTOD: u8 = 1;
    /// Device to host.
    pub const DTOH: u8 = 2;
    /// Host to array.
    pub const HTOA: u8 = 3;
    /// Array to host.
    pub const ATOH: u8 = 4;
    /// Array to array.
    pub const ATOA: u8 = 5;
    /// Array to device.
    pub const ATOD: u8 = 6;
    /// Device to array.
    pub const DTOA: u8 = 7;
    /// Device to device.
    pub const DTOD: u8 = 8;
    /// Host to host.
    pub const HTOH: u8 = 9;
    /// Peer to peer.
    pub const PTOP: u8 = 10;

    /// The direction's short name (`HtoD`), `unknown` for others.
    pub fn name(kind: u8) -> &'static str {
        match kind {
            HTOD => "HtoD",
            DTOH => "DtoH",
            HTOA => "HtoA",
            ATOH => "AtoH",
            ATOA => "AtoA",
            ATOD => "AtoD",
            DTOA => "DtoA",
            DTOD => "DtoD",
            HTOH => "HtoH",
            PTOP => "PtoP",
            _ => "unknown",
        }
    }
}

/// Memory kinds (CUPTI's `CUpti_ActivityMemoryKind`).
pub mod memory_kind {
    /// Pageable host memory.
    pub const PAGEABLE: u8 = 1;
    /// Pinned host memory.
    pub const PINNED: u8 = 2;
    /// Device memory.
    pub const DEVICE: u8 = 3;
    /// A CUDA array.
    pub const ARRAY: u8 = 4;
    /// Managed memory.
    pub const MANAGED: u8 = 5;
    /// Static device memory.
    pub const DEVICE_STATIC: u8 = 6;
    /// Static managed memory.
    pub const MANAGED_STATIC: u8 = 7;

    /// The kind's name (`pageable`), `unknown` for others.
    pub fn name(kind: u8) -> &'static str {
        match kind {
            PAGEABLE => "pageable",
            PINNED => "pinned",
            DEVICE => "device",
            ARRAY => "array",
            MANAGED => "managed",
            DEVICE_STATIC => "device-static",
            MANAGED_STATIC => "managed-static",
            _ => "unknown",
        }
    }
}

/// A memory copy that ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MemCopy {
    /// Where and when.
    pub work: Work,
    /// One of [`copy_kind`].
    pub kind: u8,
    /// Source memory, one of [`memory_kind`].
    pub src_kind: u8,
    /// Destination memory, one of [`memory_kind`].
    pub dst_kind: u8,
    /// Bytes copied.
    pub bytes: u64,
}

/// A memset that ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Memset {
    /// Where and when.
    pub work: Work,
    /// The memory, one of [`memory_kind`].
    pub memory_kind: u16,
    /// The value set.
    pub value: u32,
    /// Bytes set.
    pub bytes: u64,
}

/// A synchronization that ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SyncEvent {
    /// CUPTI's correlation id.
    pub correlation: u32,
    /// Event 1, stream-wait-event 2, stream 3, context 4.
    pub sync_type: u8,
    /// The context's id.
    pub context: u32,
    /// The stream's id.
    pub stream: u32,
    /// The CUDA event's id, 0 for none.
    pub cuda_event: u32,
    /// Start, `CLOCK_MONOTONIC` ns.
    pub start_ns: u64,
    /// End, `CLOCK_MONOTONIC` ns.
    pub end_ns: u64,
}

/// An NVTX range pushed or started, or a mark.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NvtxRange<'a> {
    /// The calling thread.
    pub tid: u32,
    /// When, `CLOCK_MONOTONIC` ns.
    pub ts_ns: u64,
    /// The range's id (process-wide, never 0; 0 for a mark).
    pub range_id: u64,
    /// The domain's id ([`NvtxDomain`]), 0 for the default domain.
    pub domain: u32,
    /// The message.
    pub name: Name<'a>,
    /// ARGB color, 0 for none.
    pub color: u32,
    /// The category, 0 for none.
    pub category: u32,
}

/// An NVTX push/pop range popped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NvtxPop {
    /// The calling thread.
    pub tid: u32,
    /// When, `CLOCK_MONOTONIC` ns.
    pub ts_ns: u64,
    /// The domain's id, 0 for the default domain.
    pub domain: u32,
    /// The id of the range popped.
    pub range_id: u64,
}

/// An NVTX start/end range ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NvtxEnd {
    /// The calling thread.
    pub tid: u32,
    /// When, `CLOCK_MONOTONIC` ns.
    pub ts_ns: u64,
    /// The id its start returned.
    pub range_id: u64,
}

/// An NVTX domain created.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NvtxDomain<'a> {
    /// The id, per connection, never 0.
    pub id: u32,
    /// Its name.
    pub name: Text<'a>,
}

/// The metrics of PM sampling or of per-kernel counters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MetricConfig<'a> {
    /// The device's ordinal in the process.
    pub device: u32,
    /// Metric names, [`Str`] ids, in the order of the values sent.
    pub metrics: Seq<'a, u32>,
}

/// One PM-sampling sample.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PmSample<'a> {
    /// The device's ordinal in the process.
    pub device: u32,
    /// Start, `CLOCK_MONOTONIC` ns.
    pub start_ns: u64,
    /// End, `CLOCK_MONOTONIC` ns.
    pub end_ns: u64,
    /// One value per metric of the device's [`MetricConfig`].
    pub values: Seq<'a, f64>,
}

/// A kernel's counters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KernelCounters<'a> {
    /// The kernel's correlation id.
    pub correlation: u32,
    /// The device's ordinal in the process.
    pub device: u32,
    /// One value per metric of the device's counter [`MetricConfig`].
    pub values: Seq<'a, f64>,
}

/// The process's counts so far (cumulative; the last one counts).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stats {
    /// Activity records CUPTI handed over.
    pub records: u64,
    /// Records CUPTI dropped (`cuptiActivityGetNumDroppedRecords`).
    pub cupti_dropped: u64,
    /// Buffers CUPTI asked for and did not get.
    pub buffers_refused: u64,
    /// Records with a start or end of 0 (not drawn).
    pub incomplete: u64,
    /// Records dropped because the process queue was full.
    pub queue_dropped: u64,
    /// Launches whose GPU record never came.
    pub unmatched_launches: u64,
    /// NVTX ranges still open at exit.
    pub nvtx_unterminated: u64,
    /// NVTX pops of an empty stack.
    pub nvtx_pop_empty: u64,
    /// PM-sampling hardware-buffer overflows.
    pub pm_overflows: u64,
    /// Gaps between PM samples.
    pub pm_gaps: u64,
    /// The injection's own kernels (calibration probes), not reported.
    pub own_kernels: u64,
}

impl Stats {
    /// The counts with their names, in wire order.
    pub fn named(&self) -> [(&'static str, u64); 11] {
        [
            ("records", self.records),
            ("cupti_dropped", self.cupti_dropped),
            ("buffers_refused", self.buffers_refused),
            ("incomplete", self.incomplete),
            ("queue_dropped", self.queue_dropped),
            ("unmatched_launches", self.unmatched_launches),
            ("nvtx_unterminated", self.nvtx_unterminated),
            ("nvtx_pop_empty", self.nvtx_pop_empty),
            ("pm_overflows", self.pm_overflows),
            ("pm_gaps", self.pm_gaps),
            ("own_kernels", self.own_kernels),
        ]
    }

    pub(crate) fn from_array(a: [u64; 11]) -> Self {
        Stats {
            records: a[0],
            cupti_dropped: a[1],
            buffers_refused: a[2],
            incomplete: a[3],
            queue_dropped: a[4],
            unmatched_launches: a[5],
            nvtx_unterminated: a[6],
            nvtx_pop_empty: a[7],
            pm_overflows: a[8],
            pm_gaps: a[9],
            own_kernels: a[10],
        }
    }
}

/// Severities of a [`Notice`].
pub mod severity {
    /// For information.
    pub const INFO: u8 = 0;
    /// Something was not recorded (counters forbidden, a subscriber taken).
    pub const WARNING: u8 = 1;
    /// Something failed.
    pub const ERROR: u8 = 2;
}

/// A one-line message for the summary and the trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Notice<'a> {
    /// When, `CLOCK_MONOTONIC` ns.
    pub ts_ns: u64,
    /// One of [`severity`].
    pub severity: u8,
    /// The message.
    pub text: Text<'a>,
}

/// Why a process said goodbye.
pub mod goodbye {
    /// Its `atexit` handler ran.
    pub const ATEXIT: u8 = 1;
    /// It was ended by SIGTERM (the injection's handler ran the exit sequence).
    pub const SIGTERM: u8 = 2;
    /// A forked child's inherited state was abandoned.
    pub const FORK_CHILD: u8 = 3;
}

/// The last record of a connection that ended in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Goodbye {
    /// One of [`goodbye`].
    pub reason: u8,
    /// Records still queued that will not be sent.
    pub unsent: u64,
}

/// One record.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Record<'a> {
    /// See [`Hello`].
    Hello(Hello<'a>),
    /// See [`Str`].
    Str(Str<'a>),
    /// See [`Thread`].
    Thread(Thread),
    /// See [`Device`].
    Device(Device),
    /// See [`Clock`].
    Clock(Clock),
    /// See [`Init`].
    Init(Init),
    /// See [`Api`].
    Api(Api),
    /// See [`Kernel`].
    Kernel(Kernel),
    /// See [`MemCopy`].
    Copy(MemCopy),
    /// See [`Memset`].
    Memset(Memset),
    /// See [`SyncEvent`].
    Sync(SyncEvent),
    /// A push/pop range pushed.
    NvtxPush(NvtxRange<'a>),
    /// See [`NvtxPop`].
    NvtxPop(NvtxPop),
    /// A start/end range started.
    NvtxStart(NvtxRange<'a>),
    /// See [`NvtxEnd`].
    NvtxEnd(NvtxEnd),
    /// A mark (`range_id` 0).
    NvtxMark(NvtxRange<'a>),
    /// See [`NvtxDomain`].
    NvtxDomain(NvtxDomain<'a>),
    /// The metrics of PM sampling on a device.
    PmConfig(MetricConfig<'a>),
    /// See [`PmSample`].
    PmSample(PmSample<'a>),
    /// The metrics of per-kernel counters on a device.
    CounterConfig(MetricConfig<'a>),
    /// See [`KernelCounters`].
    KernelCounters(KernelCounters<'a>),
    /// See [`Stats`].
    Stats(Stats),
    /// See [`Notice`].
    Notice(Notice<'a>),
    /// See [`Goodbye`].
    Goodbye(Goodbye),
    /// See [`VkDevice`].
    VkDevice(VkDevice),
    /// See [`VkQueue`].
    VkQueue(VkQueue),
    /// See [`VkScope`].
    VkScope(VkScope<'a>),
    /// See [`VkFrame`].
    VkFrame(VkFrame),
    /// See [`VkStatNames`].
    VkStatNames(VkStatNames<'a>),
    /// See [`VkStats`].
    VkStats(VkStats<'a>),
    /// A tag this version does not know: skipped, counted.
    Unknown {
        /// The tag.
        tag: u8,
        /// The payload.
        payload: &'a [u8],
    },
}
