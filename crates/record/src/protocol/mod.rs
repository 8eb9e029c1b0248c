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

mod codec;
mod records;
mod vk;

use codec::Rd;
pub(crate) use codec::Wr;
pub use records::*;
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
