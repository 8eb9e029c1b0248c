//! The wire protocol between the injected library and the collector.
//!
//! A connection (`AF_UNIX`, `SOCK_SEQPACKET`) carries **frames**; the socket
//! keeps their boundaries. A frame is a 16-byte header followed by records:
//!
//! | bytes | field | meaning |
//! |---|---|---|
//! | 0..4 | `magic` u32 | [`MAGIC`], `GCR1` |
//! | 4..6 | `version` u16 | [`VERSION`]; any other is refused |
//! | 6..8 | `flags` u16 | none defined yet; sent as 0 |
//! | 8..12 | `pid` u32 | the sending process |
//! | 12..16 | `seq` u32 | the frame's number on its connection, from 0; a gap means frames were lost in the sender |
//!
//! A record is `tag u8, 0 u8, len u16` and `len` bytes of payload. Every
//! integer is little-endian. A text is `u16` (its length in the low 15
//! bits, bit 15 set when the sender truncated it) and that many bytes,
//! at most [`MAX_TEXT`]. A frame is at most [`MAX_FRAME`] bytes.
//!
//! Decoding checks every length: a short header, a record running past the
//! frame, a field cut short, bytes left after a record's fields, a text over
//! its limit, a count that does not match the payload all give a typed
//! [`DecodeError`], never a panic. An unknown tag is not an error: it
//! decodes as [`Record::Unknown`] so that a collector can count what it
//! skipped from a newer sender of the same version.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;
use thiserror::Error;

#[path = "protocol_vk.rs"]
mod vk;
pub use vk::{
    execution_correlation, frame_flags, scope_kind, scope_status, VkDevice, VkFrame, VkQueue,
    VkScope, VkStatNames, VkStats, VK_STAT_FIELDS, VK_STAT_LOSSES,
};

/// The frame magic, `GCR1` in little-endian byte order.
pub const MAGIC: u32 = 0x3152_4347;
/// The protocol version this crate speaks.
pub const VERSION: u16 = 1;
/// Bytes in a frame header.
pub const HEADER_LEN: usize = 16;
/// Bytes in a record header (tag, padding, length).
pub const RECORD_HEADER_LEN: usize = 4;
/// The largest frame, header included: below the default socket send
/// buffer, so one `send` never fails with `EMSGSIZE`.
pub const MAX_FRAME: usize = 64 * 1024;
/// The largest record payload: one record always fits in a frame.
pub const MAX_PAYLOAD: usize = MAX_FRAME - HEADER_LEN - RECORD_HEADER_LEN;
/// The longest text in bytes; longer texts are cut and flagged.
pub const MAX_TEXT: usize = 4096;

const TEXT_TRUNCATED: u16 = 0x8000;

/// Record tags.
pub mod tag {
    /// [`Hello`](super::Hello).
    pub const HELLO: u8 = 1;
    /// [`Str`](super::Str).
    pub const STR: u8 = 2;
    /// [`Thread`](super::Thread).
    pub const THREAD: u8 = 3;
    /// [`Device`](super::Device).
    pub const DEVICE: u8 = 4;
    /// [`Clock`](super::Clock).
    pub const CLOCK: u8 = 5;
    /// [`Init`](super::Init).
    pub const INIT: u8 = 6;
    /// [`Api`](super::Api).
    pub const API: u8 = 10;
    /// [`Kernel`](super::Kernel).
    pub const KERNEL: u8 = 11;
    /// [`MemCopy`](super::MemCopy).
    pub const COPY: u8 = 12;
    /// [`Memset`](super::Memset).
    pub const MEMSET: u8 = 13;
    /// [`SyncEvent`](super::SyncEvent).
    pub const SYNC: u8 = 14;
    /// [`NvtxRange`](super::NvtxRange) pushed.
    pub const NVTX_PUSH: u8 = 20;
    /// [`NvtxPop`](super::NvtxPop).
    pub const NVTX_POP: u8 = 21;
    /// [`NvtxRange`](super::NvtxRange) started.
    pub const NVTX_START: u8 = 22;
    /// [`NvtxEnd`](super::NvtxEnd).
    pub const NVTX_END: u8 = 23;
    /// [`NvtxRange`](super::NvtxRange) marked (an instant).
    pub const NVTX_MARK: u8 = 24;
    /// [`NvtxDomain`](super::NvtxDomain).
    pub const NVTX_DOMAIN: u8 = 25;
    /// [`MetricConfig`](super::MetricConfig) of PM sampling.
    pub const PM_CONFIG: u8 = 30;
    /// [`PmSample`](super::PmSample).
    pub const PM_SAMPLE: u8 = 31;
    /// [`MetricConfig`](super::MetricConfig) of per-kernel counters.
    pub const COUNTER_CONFIG: u8 = 32;
    /// [`KernelCounters`](super::KernelCounters).
    pub const KERNEL_COUNTERS: u8 = 33;
    /// [`Stats`](super::Stats).
    pub const STATS: u8 = 40;
    /// [`Notice`](super::Notice).
    pub const NOTICE: u8 = 41;
    /// [`Goodbye`](super::Goodbye).
    pub const GOODBYE: u8 = 42;
    /// [`VkDevice`](super::VkDevice).
    pub const VK_DEVICE: u8 = 50;
    /// [`VkQueue`](super::VkQueue).
    pub const VK_QUEUE: u8 = 51;
    /// [`VkScope`](super::VkScope).
    pub const VK_SCOPE: u8 = 52;
    /// [`VkFrame`](super::VkFrame).
    pub const VK_FRAME: u8 = 53;
    /// [`VkStatNames`](super::VkStatNames).
    pub const VK_STAT_NAMES: u8 = 54;
    /// [`VkStats`](super::VkStats).
    pub const VK_STATS: u8 = 55;
}

/// Bits of [`Hello::flags`] and [`Init::flags`]: what the process set up.
pub mod init {
    /// CUDA called the injection (`InitializeInjection`): CUPTI tracing runs.
    pub const CUDA: u32 = 1;
    /// An NVTX instance called the injection (`InitializeInjectionNvtx2`).
    pub const NVTX: u32 = 2;
    /// The Vulkan layer is loaded (its connection's `Hello`).
    pub const VULKAN: u32 = 4;
}

/// Bits of the `flags` of [`Kernel`], [`MemCopy`] and [`Memset`].
pub mod activity {
    /// CUPTI returned the record with a start or end of 0 (forced flush of
    /// unfinished work): counted, never drawn.
    pub const INCOMPLETE: u8 = 1;
    /// Launched from the device (dynamic parallelism): no CPU launch.
    pub const DEVICE_LAUNCHED: u8 = 2;
    /// `launch_tid`, `enter_ns` and `range_id` are filled: the injection
    /// joined the record with its API call.
    pub const JOINED: u8 = 4;
}

/// What a frame header holds besides the magic and version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FrameHeader {
    /// Flags; none defined yet.
    pub flags: u16,
    /// The sending process.
    pub pid: u32,
    /// The frame's number on its connection, counting from 0.
    pub seq: u32,
}

impl FrameHeader {
    /// Appends the 16 header bytes to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&MAGIC.to_le_bytes());
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.extend_from_slice(&self.flags.to_le_bytes());
        out.extend_from_slice(&self.pid.to_le_bytes());
        out.extend_from_slice(&self.seq.to_le_bytes());
    }

    /// The header of `frame`, checking its length, magic and version.
    pub fn decode(frame: &[u8]) -> Result<FrameHeader, DecodeError> {
        if frame.len() < HEADER_LEN {
            return Err(DecodeError::ShortFrame { len: frame.len() });
        }
        if frame.len() > MAX_FRAME {
            return Err(DecodeError::LongFrame { len: frame.len() });
        }
        let u32_at =
            |i: usize| u32::from_le_bytes([frame[i], frame[i + 1], frame[i + 2], frame[i + 3]]);
        let u16_at = |i: usize| u16::from_le_bytes([frame[i], frame[i + 1]]);
        let magic = u32_at(0);
        if magic != MAGIC {
            return Err(DecodeError::Magic(magic));
        }
        let version = u16_at(4);
        if version != VERSION {
            return Err(DecodeError::Version(version));
        }
        Ok(FrameHeader {
            flags: u16_at(6),
            pid: u32_at(8),
            seq: u32_at(12),
        })
    }
}

/// Why a frame or record could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DecodeError {
    /// The frame is shorter than its header.
    #[error("frame of {len} bytes is shorter than the {HEADER_LEN}-byte header")]
    ShortFrame {
        /// The frame's length.
        len: usize,
    },
    /// The frame is longer than [`MAX_FRAME`].
    #[error("frame of {len} bytes is longer than the {MAX_FRAME}-byte limit")]
    LongFrame {
        /// The frame's length.
        len: usize,
    },
    /// The frame does not start with [`MAGIC`].
    #[error("bad magic {0:#010x} (expected {MAGIC:#010x}, \"GCR1\")")]
    Magic(u32),
    /// The frame's protocol version is not [`VERSION`].
    #[error("protocol version {0}; this collector speaks version {VERSION}")]
    Version(u16),
    /// Fewer than 4 bytes remain where a record header should be.
    #[error("record header at byte {offset} cut short ({left} bytes left)")]
    RecordHeader {
        /// The record's offset in the frame.
        offset: usize,
        /// Bytes left in the frame.
        left: usize,
    },
    /// A record's length runs past the end of the frame.
    #[error("record at byte {offset} (tag {tag}): length {len} runs past the frame's end ({left} bytes left)")]
    RecordLength {
        /// The record's offset in the frame.
        offset: usize,
        /// Its tag.
        tag: u8,
        /// Its stated payload length.
        len: usize,
        /// Bytes left in the frame after its header.
        left: usize,
    },
    /// A field of a record's payload is cut short.
    #[error("record at byte {offset} (tag {tag}): field `{field}` cut short")]
    Truncated {
        /// The record's offset in the frame.
        offset: usize,
        /// Its tag.
        tag: u8,
        /// The field that did not fit.
        field: &'static str,
    },
    /// Bytes remain in a record's payload after its last field.
    #[error("record at byte {offset} (tag {tag}): {extra} bytes after its last field")]
    Trailing {
        /// The record's offset in the frame.
        offset: usize,
        /// Its tag.
        tag: u8,
        /// How many bytes.
        extra: usize,
    },
    /// A text is longer than [`MAX_TEXT`].
    #[error("record at byte {offset} (tag {tag}): text `{field}` of {len} bytes is over the {MAX_TEXT}-byte limit")]
    TextTooLong {
        /// The record's offset in the frame.
        offset: usize,
        /// Its tag.
        tag: u8,
        /// The field.
        field: &'static str,
        /// The stated length.
        len: usize,
    },
}

/// Why a record could not be encoded.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum EncodeError {
    /// The payload would be over [`MAX_PAYLOAD`] bytes (a list too long).
    #[error("record (tag {tag}) of {len} bytes is over the {MAX_PAYLOAD}-byte limit")]
    TooLong {
        /// The record's tag.
        tag: u8,
        /// Its payload length.
        len: usize,
    },
}

/// A text field: bytes (UTF-8 expected, shown lossily) and whether the
/// sender cut it at [`MAX_TEXT`].
#[derive(Clone, Copy, PartialEq, Eq, Default)]
pub struct Text<'a> {
    /// The bytes, at most [`MAX_TEXT`] once encoded.
    pub bytes: &'a [u8],
    /// The original was longer and was cut.
    pub truncated: bool,
}

impl<'a> Text<'a> {
    /// A text of `bytes`, cut at [`MAX_TEXT`] (at a character boundary when
    /// the bytes are UTF-8) and flagged when cut.
    pub fn new(bytes: &'a [u8]) -> Self {
        if bytes.len() <= MAX_TEXT {
            return Text {
                bytes,
                truncated: false,
            };
        }
        let mut end = MAX_TEXT;
        if std::str::from_utf8(bytes).is_ok() {
            // Back off to the start of a character.
            while end > 0 && (bytes[end] & 0xC0) == 0x80 {
                end -= 1;
            }
        }
        Text {
            bytes: &bytes[..end],
            truncated: true,
        }
    }

    /// A text of `s`, cut as [`Text::new`] does.
    #[allow(clippy::should_implement_trait)]
    pub fn from_str(s: &'a str) -> Self {
        Self::new(s.as_bytes())
    }

    /// The text as a string, invalid UTF-8 replaced.
    pub fn lossy(&self) -> Cow<'a, str> {
        String::from_utf8_lossy(self.bytes)
    }
}

impl fmt::Debug for Text<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.lossy())?;
        if self.truncated {
            f.write_str("(truncated)")?;
        }
        Ok(())
    }
}

/// A fixed-size little-endian value in a [`Seq`].
pub trait Le: Copy + PartialEq + fmt::Debug {
    /// Bytes per value.
    const SIZE: usize;
    /// Appends the value's bytes.
    fn put(self, out: &mut Vec<u8>);
    /// The value of the first [`Le::SIZE`] bytes (`b` has at least that many).
    fn get(b: &[u8]) -> Self;
}

impl Le for u32 {
    const SIZE: usize = 4;
    fn put(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
    fn get(b: &[u8]) -> Self {
        u32::from_le_bytes([b[0], b[1], b[2], b[3]])
    }
}

impl Le for u64 {
    const SIZE: usize = 8;
    fn put(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
    fn get(b: &[u8]) -> Self {
        let mut a = [0u8; 8];
        a.copy_from_slice(&b[..8]);
        u64::from_le_bytes(a)
    }
}

impl Le for f64 {
    const SIZE: usize = 8;
    fn put(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
    fn get(b: &[u8]) -> Self {
        let mut a = [0u8; 8];
        a.copy_from_slice(&b[..8]);
        f64::from_le_bytes(a)
    }
}

/// A list of values: a slice to encode, or the bytes of a decoded record.
#[derive(Clone, Copy)]
pub enum Seq<'a, T: Le> {
    /// Values to encode.
    Slice(&'a [T]),
    /// Values as they arrived: `len × T::SIZE` bytes.
    Raw(&'a [u8], PhantomData<T>),
}

impl<'a, T: Le> Seq<'a, T> {
    /// How many values.
    pub fn len(&self) -> usize {
        match self {
            Seq::Slice(s) => s.len(),
            Seq::Raw(b, _) => b.len() / T::SIZE,
        }
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The values in order.
    pub fn iter(&self) -> impl Iterator<Item = T> + 'a {
        let (slice, raw): (&'a [T], &'a [u8]) = match *self {
            Seq::Slice(s) => (s, &[]),
            Seq::Raw(b, _) => (&[], b),
        };
        slice
            .iter()
            .copied()
            .chain(raw.chunks_exact(T::SIZE).map(T::get))
    }

    /// The `i`th value.
    pub fn get(&self, i: usize) -> Option<T> {
        match self {
            Seq::Slice(s) => s.get(i).copied(),
            Seq::Raw(b, _) => b.get(i * T::SIZE..(i + 1) * T::SIZE).map(T::get),
        }
    }
}

impl<T: Le> PartialEq for Seq<'_, T> {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().zip(other.iter()).all(|(a, b)| a == b)
    }
}

impl<T: Le> fmt::Debug for Seq<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// A name: an id of a [`Str`] the process sent, or inline text (id 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Name<'a> {
    /// A [`Str`] id (never 0).
    Id(u32),
    /// The text itself.
    Text(Text<'a>),
}

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
    /// What the process set up so far: bits of [`init`].
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
    /// What is set up now: bits of [`init`].
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
    /// Bits of [`activity`].
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
    /// The thread whose API call launched it (with [`activity::JOINED`]).
    pub launch_tid: u32,
    /// That call's entry, `CLOCK_MONOTONIC` ns (with [`activity::JOINED`]).
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

    fn from_array(a: [u64; 11]) -> Self {
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

/// Appends little-endian fields to a record's payload.
struct Wr<'o>(&'o mut Vec<u8>);

impl Wr<'_> {
    fn u8(&mut self, v: u8) -> &mut Self {
        self.0.push(v);
        self
    }
    fn u16(&mut self, v: u16) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn i32(&mut self, v: i32) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn i64(&mut self, v: i64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn text(&mut self, t: Text<'_>) -> &mut Self {
        let t = if t.bytes.len() > MAX_TEXT {
            Text {
                truncated: true,
                ..Text::new(t.bytes)
            }
        } else {
            t
        };
        let flag = if t.truncated { TEXT_TRUNCATED } else { 0 };
        self.u16(t.bytes.len() as u16 | flag);
        self.0.extend_from_slice(t.bytes);
        self
    }
    fn name(&mut self, n: Name<'_>) -> &mut Self {
        match n {
            Name::Id(id) if id != 0 => self.u32(id),
            Name::Id(_) => self.u32(0).text(Text::default()),
            Name::Text(t) => self.u32(0).text(t),
        }
    }
    fn seq<T: Le>(&mut self, s: &Seq<'_, T>) -> &mut Self {
        self.u16(s.len().min(u16::MAX as usize) as u16);
        for v in s.iter().take(u16::MAX as usize) {
            v.put(self.0);
        }
        self
    }
    fn work(&mut self, w: &Work) -> &mut Self {
        self.u32(w.correlation)
            .u8(w.device)
            .u8(w.flags)
            .u32(w.context)
            .u32(w.stream)
            .u64(w.start_ns)
            .u64(w.end_ns)
            .u32(w.graph_id)
            .u64(w.graph_node)
            .u32(w.launch_tid)
            .u64(w.enter_ns)
            .u64(w.range_id)
    }
    fn range(&mut self, r: &NvtxRange<'_>) -> &mut Self {
        self.u32(r.tid)
            .u64(r.ts_ns)
            .u64(r.range_id)
            .u32(r.domain)
            .u32(r.color)
            .u32(r.category)
            .name(r.name)
    }
}

impl Record<'_> {
    /// The record's tag.
    pub fn tag(&self) -> u8 {
        match self {
            Record::Hello(_) => tag::HELLO,
            Record::Str(_) => tag::STR,
            Record::Thread(_) => tag::THREAD,
            Record::Device(_) => tag::DEVICE,
            Record::Clock(_) => tag::CLOCK,
            Record::Init(_) => tag::INIT,
            Record::Api(_) => tag::API,
            Record::Kernel(_) => tag::KERNEL,
            Record::Copy(_) => tag::COPY,
            Record::Memset(_) => tag::MEMSET,
            Record::Sync(_) => tag::SYNC,
            Record::NvtxPush(_) => tag::NVTX_PUSH,
            Record::NvtxPop(_) => tag::NVTX_POP,
            Record::NvtxStart(_) => tag::NVTX_START,
            Record::NvtxEnd(_) => tag::NVTX_END,
            Record::NvtxMark(_) => tag::NVTX_MARK,
            Record::NvtxDomain(_) => tag::NVTX_DOMAIN,
            Record::PmConfig(_) => tag::PM_CONFIG,
            Record::PmSample(_) => tag::PM_SAMPLE,
            Record::CounterConfig(_) => tag::COUNTER_CONFIG,
            Record::KernelCounters(_) => tag::KERNEL_COUNTERS,
            Record::Stats(_) => tag::STATS,
            Record::Notice(_) => tag::NOTICE,
            Record::Goodbye(_) => tag::GOODBYE,
            Record::VkDevice(_) => tag::VK_DEVICE,
            Record::VkQueue(_) => tag::VK_QUEUE,
            Record::VkScope(_) => tag::VK_SCOPE,
            Record::VkFrame(_) => tag::VK_FRAME,
            Record::VkStatNames(_) => tag::VK_STAT_NAMES,
            Record::VkStats(_) => tag::VK_STATS,
            Record::Unknown { tag, .. } => *tag,
        }
    }

    /// Appends the record (header and payload) to `out`. On error `out` is
    /// left as it was.
    pub fn encode(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        let start = out.len();
        let tag = self.tag();
        out.extend_from_slice(&[tag, 0, 0, 0]);
        let mut w = Wr(out);
        match self {
            Record::Hello(h) => {
                w.u32(h.ppid)
                    .u64(h.start_ns)
                    .u32(h.lib_version)
                    .u32(h.cupti_version)
                    .i32(h.driver_version)
                    .u32(h.flags)
                    .text(h.exe)
                    .text(h.cmdline);
            }
            Record::Str(s) => {
                w.u32(s.id).text(s.text);
            }
            Record::Thread(t) => {
                w.u32(t.tid).u32(t.name);
            }
            Record::Device(d) => {
                w.u32(d.ordinal);
                w.0.extend_from_slice(&d.uuid);
                w.u32(d.sm_count)
                    .u16(d.cc_major)
                    .u16(d.cc_minor)
                    .u32(d.name)
                    .u32(d.chip);
            }
            Record::Clock(c) => {
                w.u32(c.device)
                    .u64(c.cpu_ns)
                    .i64(c.offset_ns)
                    .u64(c.bound_ns);
            }
            Record::Init(i) => {
                w.u32(i.flags).u32(i.cupti_version).i32(i.driver_version);
            }
            Record::Api(a) => {
                w.u32(a.tid)
                    .u8(a.domain)
                    .u8(a.kind)
                    .u32(a.cbid)
                    .u32(a.correlation)
                    .u64(a.enter_ns)
                    .u64(a.exit_ns)
                    .u32(a.result)
                    .u64(a.range_id)
                    .u32(a.name);
            }
            Record::Kernel(k) => {
                w.work(&k.work).u16(k.registers);
                for v in k.grid.iter().chain(k.block.iter()) {
                    w.u32(*v);
                }
                w.u32(k.smem_static).u32(k.smem_dynamic).u32(k.name);
            }
            Record::Copy(c) => {
                w.work(&c.work)
                    .u8(c.kind)
                    .u8(c.src_kind)
                    .u8(c.dst_kind)
                    .u64(c.bytes);
            }
            Record::Memset(m) => {
                w.work(&m.work).u16(m.memory_kind).u32(m.value).u64(m.bytes);
            }
            Record::Sync(s) => {
                w.u32(s.correlation)
                    .u8(s.sync_type)
                    .u32(s.context)
                    .u32(s.stream)
                    .u32(s.cuda_event)
                    .u64(s.start_ns)
                    .u64(s.end_ns);
            }
            Record::NvtxPush(r) | Record::NvtxStart(r) | Record::NvtxMark(r) => {
                w.range(r);
            }
            Record::NvtxPop(p) => {
                w.u32(p.tid).u64(p.ts_ns).u32(p.domain).u64(p.range_id);
            }
            Record::NvtxEnd(e) => {
                w.u32(e.tid).u64(e.ts_ns).u64(e.range_id);
            }
            Record::NvtxDomain(d) => {
                w.u32(d.id).text(d.name);
            }
            Record::PmConfig(c) | Record::CounterConfig(c) => {
                w.u32(c.device).seq(&c.metrics);
            }
            Record::PmSample(s) => {
                w.u32(s.device).u64(s.start_ns).u64(s.end_ns).seq(&s.values);
            }
            Record::KernelCounters(k) => {
                w.u32(k.correlation).u32(k.device).seq(&k.values);
            }
            Record::Stats(s) => {
                for (_, v) in s.named() {
                    w.u64(v);
                }
            }
            Record::Notice(n) => {
                w.u64(n.ts_ns).u8(n.severity).text(n.text);
            }
            Record::Goodbye(g) => {
                w.u8(g.reason).u64(g.unsent);
            }
            Record::VkDevice(d) => {
                w.vk_device(d);
            }
            Record::VkQueue(q) => {
                w.vk_queue(q);
            }
            Record::VkScope(s) => {
                w.vk_scope(s);
            }
            Record::VkFrame(f) => {
                w.vk_frame(f);
            }
            Record::VkStatNames(n) => {
                w.u32(n.device).seq(&n.names);
            }
            Record::VkStats(s) => {
                w.seq(&s.values);
            }
            Record::Unknown { payload, .. } => {
                w.0.extend_from_slice(payload);
            }
        }
        let len = out.len() - start - RECORD_HEADER_LEN;
        let too_long = len > MAX_PAYLOAD
            || matches!(self, Record::PmConfig(MetricConfig { metrics: s, .. }) | Record::CounterConfig(MetricConfig { metrics: s, .. }) if s.len() > u16::MAX as usize)
            || matches!(self, Record::PmSample(PmSample { values: s, .. }) | Record::KernelCounters(KernelCounters { values: s, .. }) if s.len() > u16::MAX as usize)
            || matches!(self, Record::VkScope(VkScope { stats: s, .. }) | Record::VkStats(VkStats { values: s }) if s.len() > u16::MAX as usize)
            || matches!(self, Record::VkStatNames(VkStatNames { names: s, .. }) if s.len() > u16::MAX as usize);
        if too_long {
            out.truncate(start);
            return Err(EncodeError::TooLong { tag, len });
        }
        out[start + 2..start + 4].copy_from_slice(&(len as u16).to_le_bytes());
        Ok(())
    }
}

/// Reads little-endian fields of one record's payload.
struct Rd<'a> {
    b: &'a [u8],
    pos: usize,
    tag: u8,
    offset: usize,
}

impl<'a> Rd<'a> {
    fn take(&mut self, n: usize, field: &'static str) -> Result<&'a [u8], DecodeError> {
        if self.b.len() - self.pos < n {
            return Err(DecodeError::Truncated {
                offset: self.offset,
                tag: self.tag,
                field,
            });
        }
        let s = &self.b[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    fn arr<const N: usize>(&mut self, field: &'static str) -> Result<[u8; N], DecodeError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N, field)?);
        Ok(a)
    }
    fn u8(&mut self, field: &'static str) -> Result<u8, DecodeError> {
        Ok(self.arr::<1>(field)?[0])
    }
    fn u16(&mut self, field: &'static str) -> Result<u16, DecodeError> {
        Ok(u16::from_le_bytes(self.arr(field)?))
    }
    fn u32(&mut self, field: &'static str) -> Result<u32, DecodeError> {
        Ok(u32::from_le_bytes(self.arr(field)?))
    }
    fn i32(&mut self, field: &'static str) -> Result<i32, DecodeError> {
        Ok(i32::from_le_bytes(self.arr(field)?))
    }
    fn u64(&mut self, field: &'static str) -> Result<u64, DecodeError> {
        Ok(u64::from_le_bytes(self.arr(field)?))
    }
    fn i64(&mut self, field: &'static str) -> Result<i64, DecodeError> {
        Ok(i64::from_le_bytes(self.arr(field)?))
    }
    fn text(&mut self, field: &'static str) -> Result<Text<'a>, DecodeError> {
        let raw = self.u16(field)?;
        let len = (raw & !TEXT_TRUNCATED) as usize;
        if len > MAX_TEXT {
            return Err(DecodeError::TextTooLong {
                offset: self.offset,
                tag: self.tag,
                field,
                len,
            });
        }
        Ok(Text {
            bytes: self.take(len, field)?,
            truncated: raw & TEXT_TRUNCATED != 0,
        })
    }
    fn name(&mut self, field: &'static str) -> Result<Name<'a>, DecodeError> {
        match self.u32(field)? {
            0 => Ok(Name::Text(self.text(field)?)),
            id => Ok(Name::Id(id)),
        }
    }
    fn seq<T: Le>(&mut self, field: &'static str) -> Result<Seq<'a, T>, DecodeError> {
        let n = self.u16(field)? as usize;
        Ok(Seq::Raw(self.take(n * T::SIZE, field)?, PhantomData))
    }
    fn work(&mut self) -> Result<Work, DecodeError> {
        Ok(Work {
            correlation: self.u32("correlation")?,
            device: self.u8("device")?,
            flags: self.u8("flags")?,
            context: self.u32("context")?,
            stream: self.u32("stream")?,
            start_ns: self.u64("start_ns")?,
            end_ns: self.u64("end_ns")?,
            graph_id: self.u32("graph_id")?,
            graph_node: self.u64("graph_node")?,
            launch_tid: self.u32("launch_tid")?,
            enter_ns: self.u64("enter_ns")?,
            range_id: self.u64("range_id")?,
        })
    }
    fn range(&mut self) -> Result<NvtxRange<'a>, DecodeError> {
        Ok(NvtxRange {
            tid: self.u32("tid")?,
            ts_ns: self.u64("ts_ns")?,
            range_id: self.u64("range_id")?,
            domain: self.u32("domain")?,
            color: self.u32("color")?,
            category: self.u32("category")?,
            name: self.name("name")?,
        })
    }

    fn record(&mut self) -> Result<Record<'a>, DecodeError> {
        let r = match self.tag {
            tag::HELLO => Record::Hello(Hello {
                ppid: self.u32("ppid")?,
                start_ns: self.u64("start_ns")?,
                lib_version: self.u32("lib_version")?,
                cupti_version: self.u32("cupti_version")?,
                driver_version: self.i32("driver_version")?,
                flags: self.u32("flags")?,
                exe: self.text("exe")?,
                cmdline: self.text("cmdline")?,
            }),
            tag::STR => Record::Str(Str {
                id: self.u32("id")?,
                text: self.text("text")?,
            }),
            tag::THREAD => Record::Thread(Thread {
                tid: self.u32("tid")?,
                name: self.u32("name")?,
            }),
            tag::DEVICE => Record::Device(Device {
                ordinal: self.u32("ordinal")?,
                uuid: self.arr("uuid")?,
                sm_count: self.u32("sm_count")?,
                cc_major: self.u16("cc_major")?,
                cc_minor: self.u16("cc_minor")?,
                name: self.u32("name")?,
                chip: self.u32("chip")?,
            }),
            tag::CLOCK => Record::Clock(Clock {
                device: self.u32("device")?,
                cpu_ns: self.u64("cpu_ns")?,
                offset_ns: self.i64("offset_ns")?,
                bound_ns: self.u64("bound_ns")?,
            }),
            tag::INIT => Record::Init(Init {
                flags: self.u32("flags")?,
                cupti_version: self.u32("cupti_version")?,
                driver_version: self.i32("driver_version")?,
            }),
            tag::API => Record::Api(Api {
                tid: self.u32("tid")?,
                domain: self.u8("domain")?,
                kind: self.u8("kind")?,
                cbid: self.u32("cbid")?,
                correlation: self.u32("correlation")?,
                enter_ns: self.u64("enter_ns")?,
                exit_ns: self.u64("exit_ns")?,
                result: self.u32("result")?,
                range_id: self.u64("range_id")?,
                name: self.u32("name")?,
            }),
            tag::KERNEL => {
                let work = self.work()?;
                let registers = self.u16("registers")?;
                let mut dims = [0u32; 6];
                for d in &mut dims {
                    *d = self.u32("grid/block")?;
                }
                Record::Kernel(Kernel {
                    work,
                    registers,
                    grid: [dims[0], dims[1], dims[2]],
                    block: [dims[3], dims[4], dims[5]],
                    smem_static: self.u32("smem_static")?,
                    smem_dynamic: self.u32("smem_dynamic")?,
                    name: self.u32("name")?,
                })
            }
            tag::COPY => Record::Copy(MemCopy {
                work: self.work()?,
                kind: self.u8("kind")?,
                src_kind: self.u8("src_kind")?,
                dst_kind: self.u8("dst_kind")?,
                bytes: self.u64("bytes")?,
            }),
            tag::MEMSET => Record::Memset(Memset {
                work: self.work()?,
                memory_kind: self.u16("memory_kind")?,
                value: self.u32("value")?,
                bytes: self.u64("bytes")?,
            }),
            tag::SYNC => Record::Sync(SyncEvent {
                correlation: self.u32("correlation")?,
                sync_type: self.u8("sync_type")?,
                context: self.u32("context")?,
                stream: self.u32("stream")?,
                cuda_event: self.u32("cuda_event")?,
                start_ns: self.u64("start_ns")?,
                end_ns: self.u64("end_ns")?,
            }),
            tag::NVTX_PUSH => Record::NvtxPush(self.range()?),
            tag::NVTX_START => Record::NvtxStart(self.range()?),
            tag::NVTX_MARK => Record::NvtxMark(self.range()?),
            tag::NVTX_POP => Record::NvtxPop(NvtxPop {
                tid: self.u32("tid")?,
                ts_ns: self.u64("ts_ns")?,
                domain: self.u32("domain")?,
                range_id: self.u64("range_id")?,
            }),
            tag::NVTX_END => Record::NvtxEnd(NvtxEnd {
                tid: self.u32("tid")?,
                ts_ns: self.u64("ts_ns")?,
                range_id: self.u64("range_id")?,
            }),
            tag::NVTX_DOMAIN => Record::NvtxDomain(NvtxDomain {
                id: self.u32("id")?,
                name: self.text("name")?,
            }),
            tag::PM_CONFIG | tag::COUNTER_CONFIG => {
                let c = MetricConfig {
                    device: self.u32("device")?,
                    metrics: self.seq("metrics")?,
                };
                if self.tag == tag::PM_CONFIG {
                    Record::PmConfig(c)
                } else {
                    Record::CounterConfig(c)
                }
            }
            tag::PM_SAMPLE => Record::PmSample(PmSample {
                device: self.u32("device")?,
                start_ns: self.u64("start_ns")?,
                end_ns: self.u64("end_ns")?,
                values: self.seq("values")?,
            }),
            tag::KERNEL_COUNTERS => Record::KernelCounters(KernelCounters {
                correlation: self.u32("correlation")?,
                device: self.u32("device")?,
                values: self.seq("values")?,
            }),
            tag::STATS => {
                let mut a = [0u64; 11];
                for v in &mut a {
                    *v = self.u64("stats")?;
                }
                Record::Stats(Stats::from_array(a))
            }
            tag::NOTICE => Record::Notice(Notice {
                ts_ns: self.u64("ts_ns")?,
                severity: self.u8("severity")?,
                text: self.text("text")?,
            }),
            tag::GOODBYE => Record::Goodbye(Goodbye {
                reason: self.u8("reason")?,
                unsent: self.u64("unsent")?,
            }),
            tag::VK_DEVICE => Record::VkDevice(self.vk_device()?),
            tag::VK_QUEUE => Record::VkQueue(self.vk_queue()?),
            tag::VK_SCOPE => Record::VkScope(self.vk_scope()?),
            tag::VK_FRAME => Record::VkFrame(self.vk_frame()?),
            tag::VK_STAT_NAMES => Record::VkStatNames(VkStatNames {
                device: self.u32("device")?,
                names: self.seq("names")?,
            }),
            tag::VK_STATS => Record::VkStats(VkStats {
                values: self.seq("values")?,
            }),
            other => {
                let payload = &self.b[self.pos..];
                self.pos = self.b.len();
                Record::Unknown {
                    tag: other,
                    payload,
                }
            }
        };
        if self.pos != self.b.len() {
            return Err(DecodeError::Trailing {
                offset: self.offset,
                tag: self.tag,
                extra: self.b.len() - self.pos,
            });
        }
        Ok(r)
    }
}

/// The records of a frame, in order; after the first error it yields no more.
#[derive(Debug, Clone)]
pub struct Records<'a> {
    frame: &'a [u8],
    pos: usize,
    failed: bool,
}

impl<'a> Records<'a> {
    /// The records of a record stream without a frame header (what a
    /// [`Queue`](crate::client::Queue) holds).
    pub fn raw(records: &'a [u8]) -> Self {
        Records {
            frame: records,
            pos: 0,
            failed: false,
        }
    }
}

impl<'a> Iterator for Records<'a> {
    type Item = Result<Record<'a>, DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.pos == self.frame.len() {
            return None;
        }
        let offset = self.pos;
        let left = self.frame.len() - offset;
        let result = if left < RECORD_HEADER_LEN {
            Err(DecodeError::RecordHeader { offset, left })
        } else {
            let h = &self.frame[offset..offset + RECORD_HEADER_LEN];
            let (tag, len) = (h[0], u16::from_le_bytes([h[2], h[3]]) as usize);
            let left = left - RECORD_HEADER_LEN;
            if len > left {
                Err(DecodeError::RecordLength {
                    offset,
                    tag,
                    len,
                    left,
                })
            } else {
                let start = offset + RECORD_HEADER_LEN;
                self.pos = start + len;
                Rd {
                    b: &self.frame[start..start + len],
                    pos: 0,
                    tag,
                    offset,
                }
                .record()
            }
        };
        self.failed = result.is_err();
        Some(result)
    }
}

/// A frame's header and an iterator over its records.
pub fn decode_frame(frame: &[u8]) -> Result<(FrameHeader, Records<'_>), DecodeError> {
    let header = FrameHeader::decode(frame)?;
    Ok((
        header,
        Records {
            frame,
            pos: HEADER_LEN,
            failed: false,
        },
    ))
}

/// Checks a whole frame: its header and every record. Returns the header
/// and how many records it holds.
pub fn validate_frame(frame: &[u8]) -> Result<(FrameHeader, usize), DecodeError> {
    let (header, records) = decode_frame(frame)?;
    let mut n = 0;
    for r in records {
        r?;
        n += 1;
    }
    Ok((header, n))
}

/// The byte ranges of the records in `records` (a stream produced by
/// [`Record::encode`]), each with its header: where a sender may cut it
/// into frames. Stops at the first malformed record header.
pub fn record_spans(records: &[u8]) -> impl Iterator<Item = std::ops::Range<usize>> + '_ {
    let mut pos = 0usize;
    std::iter::from_fn(move || {
        if records.len() - pos < RECORD_HEADER_LEN {
            return None;
        }
        let len = u16::from_le_bytes([records[pos + 2], records[pos + 3]]) as usize;
        let end = pos + RECORD_HEADER_LEN + len;
        if end > records.len() {
            return None;
        }
        let span = pos..end;
        pos = end;
        Some(span)
    })
}
