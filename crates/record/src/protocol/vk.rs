//! The records of the Vulkan layer (`VK_LAYER_GPU_COUNTERS_timing`).
//!
//! The layer is a connection of its own (its `Hello` carries
//! [`init::VULKAN`](super::init::VULKAN)); these tags are new in version 1
//! of the protocol, so an older collector skips and counts them as unknown
//! records. Every time is `CLOCK_MONOTONIC` nanoseconds, converted in the
//! layer with its device's calibration; every time carries its bound.

use super::{DecodeError, Name, Rd, Seq, Wr};

/// Kinds of [`VkScope`].
pub mod scope_kind {
    /// One execution of a primary command buffer (from just before its
    /// first command to just after its last).
    pub const COMMAND_BUFFER: u8 = 1;
    /// A render pass instance (`vkCmdBeginRenderPass*` or
    /// `vkCmdBeginRendering*` to its end).
    pub const RENDER_PASS: u8 = 2;
    /// A run of compute dispatches outside render passes.
    pub const COMPUTE: u8 = 3;
    /// A run of transfer commands (copies, blits, fills, clears, updates)
    /// outside render passes.
    pub const COPY: u8 = 4;
    /// A debug-utils label (`vkCmdBeginDebugUtilsLabelEXT` to its end).
    pub const LABEL: u8 = 5;
    /// One draw (`--level draw`).
    pub const DRAW: u8 = 6;
    /// One dispatch (`--level dispatch`).
    pub const DISPATCH: u8 = 7;
    /// A `vkCmdExecuteCommands` of secondary command buffers outside a
    /// render pass.
    pub const SECONDARY: u8 = 8;

    /// The kind's name, as the trace and summary print it.
    pub fn name(kind: u8) -> &'static str {
        match kind {
            COMMAND_BUFFER => "command buffer",
            RENDER_PASS => "render pass",
            COMPUTE => "compute",
            COPY => "copy",
            LABEL => "label",
            DRAW => "draw",
            DISPATCH => "dispatch",
            SECONDARY => "secondary command buffers",
            _ => "unknown",
        }
    }
}

/// Statuses of a [`VkScope`]: why it has the times it has.
pub mod scope_status {
    /// Both ends were written by the GPU and converted: the times hold.
    pub const TIMED: u8 = 0;
    /// A timestamp was not available when the layer read it (the
    /// execution's completion said it should be): no times, counted.
    pub const NOT_READY: u8 = 1;
    /// A timestamp was an error value, or could not be converted onto the
    /// CPU clock: no times, counted.
    pub const ERROR: u8 = 2;
    /// The end precedes the start after conversion (a driver whose
    /// timestamps of different stages are not ordered): no times, counted.
    pub const REVERSED: u8 = 3;
    /// No timestamp could be written where it was recorded (queries ran
    /// out, or inside a pass that allows none): no times, counted.
    pub const NOT_TIMED: u8 = 4;
    /// Its results were not read (the ring was full, or the command
    /// buffer ran on two queues at once): no times, counted.
    pub const NOT_READ: u8 = 5;
}

/// Bits of [`VkFrame::flags`].
pub mod frame_flags {
    /// The frame ended at a `vkQueuePresentKHR` (otherwise at a submission
    /// of a program that had not presented yet, or at the device's end).
    pub const PRESENTED: u8 = 1;
}

/// The correlation id of a command buffer's execution `execution` (a
/// [`VkScope::execution`]): what the layer's `Api` record of the
/// `vkQueueSubmit` that submitted it carries, so that the collector joins
/// the call with the GPU work. The top bit keeps it apart from CUDA's
/// correlation ids, which count from 1.
pub fn execution_correlation(execution: u64) -> u32 {
    0x8000_0000 | (execution as u32 & 0x3FFF_FFFF)
}

/// A Vulkan physical device the process made a device of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VkDevice {
    /// The layer's id of the `VkDevice`, per connection, never 0.
    pub id: u32,
    /// `VkPhysicalDeviceIDProperties::deviceUUID` (all zeroes where the
    /// driver does not say): the same GPU in CUDA and Vulkan has the same
    /// UUID on NVIDIA, so both go on one GPU in the trace.
    pub uuid: [u8; 16],
    /// The device's name, a [`Str`](super::Str) id.
    pub name: u32,
    /// The driver's name and version, a [`Str`](super::Str) id (0: unknown).
    pub driver: u32,
    /// `VkPhysicalDeviceProperties::apiVersion`.
    pub api_version: u32,
    /// `timestampPeriod` in picoseconds per tick.
    pub period_ps: u64,
    /// How its times reach the CPU clock: 1 calibrated timestamps, 0 none
    /// (nothing on this device is timed).
    pub calibration: u8,
}

/// A queue the process got from a device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VkQueue {
    /// The layer's id of the queue, per connection, never 0.
    pub id: u32,
    /// Its [`VkDevice::id`].
    pub device: u32,
    /// Its queue family.
    pub family: u32,
    /// Its index in the family.
    pub index: u32,
    /// The family's `VkQueueFlags`.
    pub flags: u32,
    /// The family's `timestampValidBits`: 0 means nothing submitted to it
    /// can be timed.
    pub valid_bits: u32,
}

/// A timed interval on a queue: a command buffer's execution, a pass, a
/// label, a draw or a dispatch.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VkScope<'a> {
    /// The [`VkQueue::id`] it ran on.
    pub queue: u32,
    /// One of [`scope_kind`].
    pub kind: u8,
    /// One of [`scope_status`]; the times are 0 unless it is `TIMED`.
    pub status: u8,
    /// Its depth among the scopes open on the queue (0 for a command
    /// buffer's execution).
    pub depth: u16,
    /// The execution it belongs to (per connection, never 0): a command
    /// buffer's execution has its own id here.
    pub execution: u64,
    /// The frame it was submitted in (see [`VkFrame`]).
    pub frame: u64,
    /// Start, `CLOCK_MONOTONIC` ns.
    pub start_ns: u64,
    /// End, `CLOCK_MONOTONIC` ns.
    pub end_ns: u64,
    /// Both times lie within this many ns of the truth.
    pub bound_ns: u64,
    /// What it is called: the label's text, the kind's name, or the
    /// command's name.
    pub name: Name<'a>,
    /// Pipeline statistics of a pass, in the order of its device's
    /// [`VkStatNames`]; empty where none were asked for or taken.
    pub stats: Seq<'a, u64>,
}

/// A frame: the submissions to a device between two presents (or, for a
/// program that never presents, one submission call).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VkFrame {
    /// The [`VkDevice::id`].
    pub device: u32,
    /// The frame's number on the device, from 1.
    pub frame: u64,
    /// When the frame began on the CPU (the previous present's return, or
    /// the device's first submission), `CLOCK_MONOTONIC` ns.
    pub cpu_start_ns: u64,
    /// When it ended on the CPU (its present's call).
    pub cpu_end_ns: u64,
    /// The earliest start of its timed executions (0 when none was timed).
    pub gpu_start_ns: u64,
    /// The latest end of its timed executions (0 when none was timed).
    pub gpu_end_ns: u64,
    /// The bound of both GPU times, ns.
    pub bound_ns: u64,
    /// Command buffer executions submitted in it.
    pub executions: u32,
    /// How many of them were not timed.
    pub untimed: u32,
    /// Bits of [`frame_flags`].
    pub flags: u8,
}

/// The names of a device's pipeline statistics, in the order of
/// [`VkScope::stats`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VkStatNames<'a> {
    /// The [`VkDevice::id`].
    pub device: u32,
    /// [`Str`](super::Str) ids.
    pub names: Seq<'a, u32>,
}

/// The names of [`VkStats::values`], in order. A newer layer may send more
/// values; a collector names those it knows.
pub const VK_STAT_FIELDS: [&str; 14] = [
    "vk_executions",
    "vk_scopes",
    "vk_frames",
    "vk_untimed_queue",
    "vk_ring_full",
    "vk_query_cap",
    "vk_unavailable",
    "vk_label_unbalanced",
    "vk_concurrent",
    "vk_secondary_scopes",
    "vk_device_lost",
    "vk_unretired",
    "vk_queue_dropped",
    "vk_no_calibration",
];

/// The fields of [`VK_STAT_FIELDS`] that count what was lost (the others
/// are totals).
pub const VK_STAT_LOSSES: [&str; 11] = [
    "vk_untimed_queue",
    "vk_ring_full",
    "vk_query_cap",
    "vk_unavailable",
    "vk_label_unbalanced",
    "vk_concurrent",
    "vk_secondary_scopes",
    "vk_device_lost",
    "vk_unretired",
    "vk_queue_dropped",
    "vk_no_calibration",
];

/// The layer's counts so far (cumulative; the last one counts), one per
/// name of [`VK_STAT_FIELDS`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VkStats<'a> {
    /// The values.
    pub values: Seq<'a, u64>,
}

impl<'a> VkStats<'a> {
    /// The values with their names (`vk_stat_N` for one this version does
    /// not name).
    pub fn named(&self) -> impl Iterator<Item = (std::borrow::Cow<'static, str>, u64)> + 'a {
        self.values.iter().enumerate().map(|(i, v)| {
            let name = match VK_STAT_FIELDS.get(i) {
                Some(n) => std::borrow::Cow::Borrowed(*n),
                None => std::borrow::Cow::Owned(format!("vk_stat_{i}")),
            };
            (name, v)
        })
    }
}

impl Wr<'_> {
    pub(super) fn vk_device(&mut self, d: &VkDevice) -> &mut Self {
        self.u32(d.id);
        self.0.extend_from_slice(&d.uuid);
        self.u32(d.name)
            .u32(d.driver)
            .u32(d.api_version)
            .u64(d.period_ps)
            .u8(d.calibration)
    }

    pub(super) fn vk_queue(&mut self, q: &VkQueue) -> &mut Self {
        self.u32(q.id)
            .u32(q.device)
            .u32(q.family)
            .u32(q.index)
            .u32(q.flags)
            .u32(q.valid_bits)
    }

    pub(super) fn vk_scope(&mut self, s: &VkScope<'_>) -> &mut Self {
        self.u32(s.queue)
            .u8(s.kind)
            .u8(s.status)
            .u16(s.depth)
            .u64(s.execution)
            .u64(s.frame)
            .u64(s.start_ns)
            .u64(s.end_ns)
            .u64(s.bound_ns)
            .name(s.name)
            .seq(&s.stats)
    }

    pub(super) fn vk_frame(&mut self, f: &VkFrame) -> &mut Self {
        self.u32(f.device)
            .u64(f.frame)
            .u64(f.cpu_start_ns)
            .u64(f.cpu_end_ns)
            .u64(f.gpu_start_ns)
            .u64(f.gpu_end_ns)
            .u64(f.bound_ns)
            .u32(f.executions)
            .u32(f.untimed)
            .u8(f.flags)
    }
}

impl<'a> Rd<'a> {
    pub(super) fn vk_device(&mut self) -> Result<VkDevice, DecodeError> {
        Ok(VkDevice {
            id: self.u32("id")?,
            uuid: self.arr("uuid")?,
            name: self.u32("name")?,
            driver: self.u32("driver")?,
            api_version: self.u32("api_version")?,
            period_ps: self.u64("period_ps")?,
            calibration: self.u8("calibration")?,
        })
    }

    pub(super) fn vk_queue(&mut self) -> Result<VkQueue, DecodeError> {
        Ok(VkQueue {
            id: self.u32("id")?,
            device: self.u32("device")?,
            family: self.u32("family")?,
            index: self.u32("index")?,
            flags: self.u32("flags")?,
            valid_bits: self.u32("valid_bits")?,
        })
    }

    pub(super) fn vk_scope(&mut self) -> Result<VkScope<'a>, DecodeError> {
        Ok(VkScope {
            queue: self.u32("queue")?,
            kind: self.u8("kind")?,
            status: self.u8("status")?,
            depth: self.u16("depth")?,
            execution: self.u64("execution")?,
            frame: self.u64("frame")?,
            start_ns: self.u64("start_ns")?,
            end_ns: self.u64("end_ns")?,
            bound_ns: self.u64("bound_ns")?,
            name: self.name("name")?,
            stats: self.seq("stats")?,
        })
    }

    pub(super) fn vk_frame(&mut self) -> Result<VkFrame, DecodeError> {
        Ok(VkFrame {
            device: self.u32("device")?,
            frame: self.u64("frame")?,
            cpu_start_ns: self.u64("cpu_start_ns")?,
            cpu_end_ns: self.u64("cpu_end_ns")?,
            gpu_start_ns: self.u64("gpu_start_ns")?,
            gpu_end_ns: self.u64("gpu_end_ns")?,
            bound_ns: self.u64("bound_ns")?,
            executions: self.u32("executions")?,
            untimed: self.u32("untimed")?,
            flags: self.u8("flags")?,
        })
    }
}
