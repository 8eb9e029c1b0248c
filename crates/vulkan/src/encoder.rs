//! Compute, render and blit encoders with Metal's pass attachments and
//! encoder-level sampling.

use crate::buffer::BufferRef;
use crate::command::{barrier_stage, write_timestamp, write_timestamp_in, CommandBuffer, Tracker};
use crate::samples::Samples;
use crate::{CounterHeap, CounterSampleBuffer};
use ash::vk;
use gpu_counters_hal::bookkeeping::{check_pass_attachments, RelaxedWrites, SlotState, NONE};
use gpu_counters_hal::{
    CommonCounterSet, CounterSamplingPoint, InvalidInput, Result, TimestampGranularity,
};
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// An open statistic chain: the buffer and the index whose queries are
/// active, and the chain's id (the origin its samples count from).
pub(crate) struct Chain {
    samples: Arc<Samples>,
    index: u32,
    id: u64,
}

/// A chain id no other chain has; never 0.
fn next_chain_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// Where a compute or blit pass samples a buffer
/// (`MTLComputePassSampleBufferAttachmentDescriptor`); `None` is Metal's
/// `MTLCounterDontSample`.
#[derive(Debug, Clone)]
pub struct PassSampleBufferAttachment<'a> {
    /// The buffer to sample into.
    pub sample_buffer: &'a CounterSampleBuffer,
    /// Index sampled when the pass starts.
    pub start_of_encoder_sample_index: Option<u32>,
    /// Index sampled when the pass's work has finished.
    pub end_of_encoder_sample_index: Option<u32>,
}

/// Describes a compute pass (`MTLComputePassDescriptor`).
#[derive(Debug, Clone, Default)]
pub struct ComputePassDescriptor<'a> {
    /// Buffers sampled at the pass's boundaries (a slice, so that a pass
    /// needs no allocation: an array on the stack does).
    pub sample_buffer_attachments: &'a [PassSampleBufferAttachment<'a>],
}

/// Describes a blit (transfer) pass (`MTLBlitPassDescriptor`).
#[derive(Debug, Clone, Default)]
pub struct BlitPassDescriptor<'a> {
    /// Buffers sampled at the pass's boundaries (a slice, so that a pass
    /// needs no allocation: an array on the stack does).
    pub sample_buffer_attachments: &'a [PassSampleBufferAttachment<'a>],
}

/// Where a render pass samples a buffer
/// (`MTLRenderPassSampleBufferAttachmentDescriptor`).
///
/// Vulkan has no event for "fragment work started": the start indices both
/// sample when the pass begins, the end of vertex when all its
/// pre-rasterization work is done, the end of fragment when all of it is.
#[derive(Debug, Clone)]
pub struct RenderPassSampleBufferAttachment<'a> {
    /// The buffer to sample into.
    pub sample_buffer: &'a CounterSampleBuffer,
    /// Index sampled when vertex work starts.
    pub start_of_vertex_sample_index: Option<u32>,
    /// Index sampled when vertex work ends.
    pub end_of_vertex_sample_index: Option<u32>,
    /// Index sampled when fragment work starts.
    pub start_of_fragment_sample_index: Option<u32>,
    /// Index sampled when fragment work ends.
    pub end_of_fragment_sample_index: Option<u32>,
}

/// How a render encoder begins its render pass instance.
#[derive(Debug, Clone, Copy)]
pub enum RenderTarget<'a> {
    /// Dynamic rendering (`vkCmdBeginRendering`).
    Dynamic(&'a vk::RenderingInfo<'a>),
    /// A classic render pass (`vkCmdBeginRenderPass2`), inline contents.
    RenderPass(&'a vk::RenderPassBeginInfo<'a>),
}

/// Describes a render pass (`MTLRenderPassDescriptor`).
#[derive(Debug, Clone)]
pub struct RenderPassDescriptor<'a> {
    /// The attachments and area to render into.
    pub target: RenderTarget<'a>,
    /// Buffers sampled at the pass's stage boundaries (a slice, as for
    /// [`ComputePassDescriptor`]).
    pub sample_buffer_attachments: &'a [RenderPassSampleBufferAttachment<'a>],
}

#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum EncoderKind {
    Compute = 0,
    Render = 1,
    Blit = 2,
}

impl EncoderKind {
    fn point(self) -> CounterSamplingPoint {
        match self {
            EncoderKind::Compute => CounterSamplingPoint::AtDispatchBoundary,
            EncoderKind::Render => CounterSamplingPoint::AtDrawBoundary,
            EncoderKind::Blit => CounterSamplingPoint::AtBlitBoundary,
        }
    }
}

/// An end-of-pass sample to take when the encoder ends.
struct EndSample {
    samples: EndSet,
    index: u32,
    stage: vk::PipelineStageFlags2,
}

/// The set an end-of-pass sample goes into, kept alive until the pass ends.
enum EndSet {
    /// At this place in the sets the command buffer holds (an `Arc` clone
    /// and drop are two atomic operations per pass saved).
    Held(usize),
    /// A set the command buffer does not hold yet.
    Owned(Arc<Samples>),
}

/// The state of the open encoder of a command buffer (a command buffer has
/// at most one) but its few hot fields: its end-of-pass samples, its
/// statistic chain and its relaxed writes. Kept in the command buffer, not
/// in the encoder, so that an encoder stays small: making one stores a few
/// words, and it is moved as it is made and returned without copying
/// through memory (a load of what was just stored in other widths waits for
/// the CPU's stores to drain, and right after a driver call that is the
/// driver's command writes), and the lists' capacity serves every pass.
/// Empty whenever no encoder is open.
#[derive(Default)]
pub(crate) struct PassEnds {
    /// Timestamp samples, in the order of the pass's attachments.
    timestamps: Vec<EndSample>,
    /// Statistic samples, in the order of the pass's attachments.
    statistics: Vec<(Arc<Samples>, u32)>,
    /// The pass's statistic chain: the buffer and the index whose queries
    /// are active.
    chain: Option<Chain>,
    /// Relaxed heap writes waiting for the pass's end, per heap.
    relaxed: Vec<HeapRelaxed>,
    /// The pass's one relaxed write while it has only one, noted as
    /// written in a block this recording claimed when it was made (the
    /// usual pass; `relaxed` is then empty): its command is all that is
    /// left for the pass's end, where the lists' one write would be. Any
    /// other write goes into the lists.
    relaxed_one: MarkedEnd,
    /// The end sample of a pass begun by [`EncoderCore::begin_claimed`]
    /// (taken after all the pass's work, as every compute end sample).
    marked_end: MarkedEnd,
}

/// One heap's relaxed writes waiting for the pass's end.
struct HeapRelaxed {
    heap: Arc<Samples>,
    writes: RelaxedWrites,
}

/// What ended encoders leave for the next ones of their command buffer:
/// emptied write lists, each with the heap it was last used for (so that
/// the next pass writing that heap takes no new reference to it: an atomic
/// operation per pass).
#[derive(Default)]
pub(crate) struct SpareRelaxed {
    writes: Vec<HeapRelaxed>,
}

/// A pass's end sample (an attachment's end, or its one relaxed heap
/// write) that was noted as written in a block this recording claimed (so
/// clean, and no other recording's to write) when the pass began or the
/// write was made: all that is left is its command, at the pass's end. A
/// null `pool` is none.
#[derive(Clone, Copy, PartialEq, Eq)]
struct MarkedEnd {
    pool: vk::QueryPool,
    index: u32,
}

impl MarkedEnd {
    const NONE: Self = Self {
        pool: vk::QueryPool::null(),
        index: 0,
    };

    /// `samples[index]`.
    fn of(samples: &Samples, index: u32) -> Self {
        Self {
            pool: samples.main.raw,
            index,
        }
    }

    fn is_none(self) -> bool {
        self.pool == vk::QueryPool::null()
    }

    /// Makes it none: its pool alone (one store, as each pass ends).
    #[inline(always)]
    fn clear(&mut self) {
        self.pool = vk::QueryPool::null();
    }
}

impl Default for MarkedEnd {
    fn default() -> Self {
        Self::NONE
    }
}

/// The open encoder's flags, kept in its command buffer (which has at most
/// one open encoder) as one byte: beginning a pass is one store of it and
/// ending one another, and the encoder itself is only a pointer to the
/// command buffer, kept in a register. (Every word an encoder kept of its
/// own was stored as it was made, and a store right after a driver call
/// waits behind the driver's command writes.)
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct OpenPass(u8);

impl OpenPass {
    /// No encoder is open.
    pub(crate) const CLOSED: Self = Self(0);
    const OPEN: u8 = 1;
    /// The device samples at the encoder kind's point.
    const POINT: u8 = 1 << 1;
    /// A render pass instance begun by the encoder is open.
    const IN_RENDER_PASS: u8 = 1 << 2;
    /// ... begun with `vkCmdBeginRenderPass2` (else `vkCmdBeginRendering`).
    const RENDER_PASS2: u8 = 1 << 3;
    const KIND_SHIFT: u32 = 4;

    fn open(kind: EncoderKind, point_supported: bool) -> Self {
        Self(
            Self::OPEN
                | if point_supported { Self::POINT } else { 0 }
                | (kind as u8) << Self::KIND_SHIFT,
        )
    }

    /// Whether an encoder began and has not ended.
    pub(crate) fn is_open(self) -> bool {
        self.0 & Self::OPEN != 0
    }

    fn has(self, bit: u8) -> bool {
        self.0 & bit != 0
    }

    fn kind(self) -> EncoderKind {
        match self.0 >> Self::KIND_SHIFT {
            0 => EncoderKind::Compute,
            1 => EncoderKind::Render,
            _ => EncoderKind::Blit,
        }
    }
}

/// The state every encoder shares: its command buffer, where the open
/// pass's state is ([`OpenPass`], [`PassEnds`]).
struct EncoderCore<'c> {
    cmd: &'c mut CommandBuffer,
}

/// Runs `f` on an encoder core of `cmd` that does not end the pass when it
/// goes: for the out-of-line paths of an encoder, which then take the
/// command buffer's address (a register) rather than the encoder's (which
/// would have to be stored in memory as each pass begins).
#[inline(always)]
fn detached<'c, R>(cmd: &'c mut CommandBuffer, f: impl FnOnce(&mut EncoderCore<'c>) -> R) -> R {
    f(&mut std::mem::ManuallyDrop::new(EncoderCore { cmd }))
}

impl<'c> EncoderCore<'c> {
    #[inline(always)]
    fn new(cmd: &'c mut CommandBuffer, kind: EncoderKind) -> Result<Self> {
        if cmd.open_pass.is_open() {
            return Err(still_open(cmd));
        }
        cmd.open_pass = OpenPass::open(kind, cmd.device.supports_counter_sampling(kind.point()));
        Ok(Self { cmd })
    }

    fn kind(&self) -> EncoderKind {
        self.cmd.open_pass.kind()
    }

    /// Whether the encoder ended (its command buffer has no open encoder:
    /// while this one lives, no other can begin).
    #[inline(always)]
    fn ended(&self) -> bool {
        !self.cmd.open_pass.is_open()
    }

    #[inline(always)]
    fn point_supported(&self) -> bool {
        self.cmd.open_pass.has(OpenPass::POINT)
    }

    #[inline(always)]
    fn in_render_pass(&self) -> bool {
        self.cmd.open_pass.has(OpenPass::IN_RENDER_PASS)
    }

    fn device(&self) -> &crate::Device {
        &self.cmd.device
    }

    /// Validates a pass's attachments, records the resets they need (outside
    /// any render pass).
    fn prepare_attachments<'a>(
        &mut self,
        list: impl Iterator<Item = Attachment<'a>> + Clone,
    ) -> Result<()> {
        // One walk for what is checked per point: the device, and whether
        // any point samples at all or samples statistics.
        // The points are kept as they go by (up to a few), so that checking
        // them walks an array rather than the attachment iterator again.
        const FEW: usize = 8;
        let mut few = [None; FEW];
        let (mut points, mut statistic) = (0usize, false);
        for a in list.clone() {
            let Some(index) = a.index else { continue };
            self.cmd
                .check_device(&a.buffer.inner, "counter sample buffer")?;
            if let Some(slot) = few.get_mut(points) {
                *slot = Some((
                    Arc::as_ptr(&a.buffer.inner) as usize,
                    &a.buffer.inner.core,
                    index,
                ));
            }
            points += 1;
            statistic |= a.buffer.counter_set() == CommonCounterSet::Statistic;
        }
        if points > 0 {
            self.device()
                .require_point(CounterSamplingPoint::AtStageBoundary)?;
            if points <= FEW {
                check_pass_attachments(few.iter().flatten().copied())?;
            } else {
                check_pass_attachments(list.clone().filter_map(|a| {
                    a.index.map(|i| {
                        (
                            Arc::as_ptr(&a.buffer.inner) as usize,
                            &a.buffer.inner.core,
                            i,
                        )
                    })
                }))?;
            }
        }
        // Reset re-used indices now, while outside any render pass. Outside
        // render passes, start timestamps (taken at once, and nothing before
        // them can fail when no statistic buffer is attached) reset their
        // indices themselves, under the same lock as the write.
        let starts_reset_themselves = self.kind() != EncoderKind::Render && !statistic;
        for a in list {
            let Some(index) = a.index else { continue };
            if a.is_start && starts_reset_themselves {
                continue;
            }
            // Clean in a block this recording claimed: nothing to reset, and
            // no other recording can write it before this pass's end.
            if self.cmd.tracker.claims.is_clean(&a.buffer.inner, index) {
                continue;
            }
            let mut slots = a.buffer.inner.lock()?;
            if a.buffer
                .inner
                .prepare_write(&mut slots, index, false, &mut self.cmd.tracker)?
            {
                a.buffer
                    .inner
                    .record_reset(&mut slots, self.cmd.raw, &self.cmd.tracker, index);
                slots.state[index as usize] = SlotState::Fresh;
            }
        }
        Ok(())
    }

    fn sample_statistic(&mut self, samples: &Arc<Samples>, index: u32) -> Result<()> {
        if self.cmd.chain.is_some() {
            return Err(InvalidInput::EncoderState(
                "a command-buffer-level statistic sample is still open; call CommandBuffer::end_statistics before sampling statistics inside a pass".into(),
            )
            .into());
        }
        let occlusion = self.kind() == EncoderKind::Render;
        let in_render_pass = self.in_render_pass();
        chain_sample(
            self.cmd.device.raw(),
            self.cmd.raw,
            &mut self.cmd.pass_ends.chain,
            samples,
            index,
            in_render_pass,
            occlusion,
            &mut self.cmd.tracker,
        )
    }

    fn close_chain(&mut self) -> Result<()> {
        chain_close(
            self.cmd.device.raw(),
            self.cmd.raw,
            &mut self.cmd.pass_ends.chain,
        )
    }

    fn sample(
        &mut self,
        buffer: &CounterSampleBuffer,
        index: u32,
        stage: vk::PipelineStageFlags2,
    ) -> Result<()> {
        match buffer.counter_set() {
            CommonCounterSet::Timestamp => write_timestamp(
                &self.cmd.device,
                self.cmd.raw,
                &buffer.inner,
                index,
                stage,
                self.in_render_pass(),
                &mut self.cmd.tracker,
            ),
            CommonCounterSet::Statistic => self.sample_statistic(&buffer.inner, index),
            set => Err(InvalidInput::UnsupportedCounterSet {
                set,
                device: self.device().info().name.clone(),
            }
            .into()),
        }
    }

    fn check_open(&self) -> Result<()> {
        if self.ended() {
            return Err(InvalidInput::EncoderState("the encoder has already ended".into()).into());
        }
        Ok(())
    }

    /// The usual pass attachment, begun without the general checks: one
    /// timestamp buffer of this device sampled at both ends, two different
    /// indices, both clean in a block this recording claimed (so inside the
    /// buffer, needing no reset, and written by no other recording), on a
    /// device that samples at stage boundaries. Writes the start sample,
    /// notes the end one and returns true; returns false having done
    /// nothing otherwise, and the general path decides (and reports what is
    /// wrong). The same commands and bookkeeping as the general path.
    #[inline]
    fn begin_claimed(&mut self, a: &PassSampleBufferAttachment<'_>) -> bool {
        let (Some(start), Some(end)) = (
            a.start_of_encoder_sample_index,
            a.end_of_encoder_sample_index,
        ) else {
            return false;
        };
        let samples = &a.sample_buffer.inner;
        if start == end
            || !self
                .cmd
                .device
                .supports_counter_sampling(CounterSamplingPoint::AtStageBoundary)
        {
            return false;
        }
        // The start is written and the end noted as written, both in one
        // lookup of the claim (the usual attachment's two indices share a
        // block); the end's command is all that is left for the pass's end.
        if !self
            .cmd
            .write_claimed_both(samples, start, end, vk::PipelineStageFlags2::TOP_OF_PIPE)
        {
            return false;
        }
        self.cmd.pass_ends.marked_end = MarkedEnd::of(samples, end);
        true
    }

    /// Records the command of the pass's attachment [`MarkedEnd`], if any
    /// (once).
    #[inline(always)]
    fn write_marked_end(&mut self) {
        let end = self.cmd.pass_ends.marked_end;
        if !end.is_none() {
            self.cmd.pass_ends.marked_end.clear();
            self.record_marked(end);
        }
    }

    /// Records the command of the pass's relaxed [`MarkedEnd`], if any
    /// (once).
    #[inline(always)]
    fn write_relaxed_one(&mut self) {
        let one = self.cmd.pass_ends.relaxed_one;
        if !one.is_none() {
            self.cmd.pass_ends.relaxed_one.clear();
            self.record_marked(one);
        }
    }

    /// Records the timestamp command of `end`, taken out of the pass.
    #[inline(always)]
    fn record_marked(&mut self, MarkedEnd { pool, index }: MarkedEnd) {
        // SAFETY: `index` was noted as written in a block this
        // recording claimed (by the pass's begin, or by the relaxed
        // write), so it was reset and written by no one then, and
        // since then no write or reset of it was recorded: this
        // recording's claimed writes see it written; a locked sample
        // of the set in this pass demotes an attachment's mark first
        // (`demote_marked_end`), and a precise write of the relaxed
        // index records this command in its place, once
        // (`write_heap_timestamp`); another
        // recording's write applies the mark first and is refused. A
        // claim is taken on a set the recording holds, so `pool` lives
        // until the GPU is done with the command buffer; the set is of
        // this device (checked before the mark), and the command
        // buffer is recording (inside a render pass only for a precise
        // write taking the relaxed one's place: a timestamp write is
        // valid there, and no reset is needed).
        unsafe {
            self.cmd.device.raw().cmd_write_timestamp2(
                self.cmd.raw,
                vk::PipelineStageFlags2::ALL_COMMANDS,
                pool,
                index,
            )
        };
    }

    /// [`EncoderCore::begin_claimed`] of an attachment whose block this
    /// recording has not claimed yet (the first pass of every block of
    /// indices): under one lock, the end is checked (and reset if re-used),
    /// the start written, which claims the block, and the end then noted in
    /// the claim if it is clean there (else written with every check at the
    /// pass's end). The general path's checks and commands, in its order.
    /// `Ok(false)`, having done nothing, for anything but one timestamp
    /// buffer of this device with two different indices inside it on a
    /// device that samples at stage boundaries: the general path decides
    /// and reports what is wrong.
    #[cold]
    #[inline(never)]
    fn begin_claiming(&mut self, a: &PassSampleBufferAttachment<'_>) -> Result<bool> {
        let (Some(start), Some(end)) = (
            a.start_of_encoder_sample_index,
            a.end_of_encoder_sample_index,
        ) else {
            return Ok(false);
        };
        let samples = &a.sample_buffer.inner;
        let cmd = &mut *self.cmd;
        if start == end
            || start.max(end) >= samples.count
            || samples.set != CommonCounterSet::Timestamp
            || !Arc::ptr_eq(&samples.device.shared, &cmd.device.shared)
            || !cmd
                .device
                .supports_counter_sampling(CounterSamplingPoint::AtStageBoundary)
        {
            return Ok(false);
        }
        let mut slots = samples.lock()?;
        if samples.prepare_write(&mut slots, end, false, &mut cmd.tracker)? {
            samples.record_reset(&mut slots, cmd.raw, &cmd.tracker, end);
            slots.state[end as usize] = SlotState::Fresh;
        }
        write_timestamp_in(
            &cmd.device,
            cmd.raw,
            samples,
            &mut slots,
            start,
            vk::PipelineStageFlags2::TOP_OF_PIPE,
            false,
            &mut cmd.tracker,
        )?;
        drop(slots);
        if cmd.tracker.claims.try_write(samples, end) {
            self.cmd.pass_ends.marked_end = MarkedEnd::of(samples, end);
        } else {
            self.cmd
                .push_end_sample(samples, end, vk::PipelineStageFlags2::ALL_COMMANDS);
        }
        Ok(true)
    }

    /// Turns the pass's [`MarkedEnd`] into `buffer`'s, if it is one, into
    /// an end sample written with every check: before a locked sample of
    /// that buffer in the pass, which may write or reset the end's index
    /// (the end's command then follows a reset of its own).
    #[cold]
    fn demote_marked_end(&mut self, buffer: &CounterSampleBuffer) {
        let MarkedEnd { pool, index } = self.cmd.pass_ends.marked_end;
        // A live set's pool is never null: a pass without a mark matches
        // no buffer.
        if pool != buffer.inner.main.raw {
            return;
        }
        self.cmd.pass_ends.marked_end = MarkedEnd::NONE;
        self.cmd
            .push_end_sample(&buffer.inner, index, vk::PipelineStageFlags2::ALL_COMMANDS);
    }

    /// A timestamp sample into an index this recording claimed clean, at a
    /// point the device samples at: the usual sample, with nothing else to
    /// check (inlined into the caller). Returns whether it wrote.
    #[inline(always)]
    fn sample_claimed(&mut self, buffer: &CounterSampleBuffer, index: u32, barrier: bool) -> bool {
        let stage = barrier_stage(barrier);
        !self.ended()
            && self.point_supported()
            && self.cmd.write_claimed(&buffer.inner, index, stage)
    }

    #[inline(never)]
    fn sample_counters(
        &mut self,
        buffer: &CounterSampleBuffer,
        index: u32,
        barrier: bool,
    ) -> Result<()> {
        self.check_open()?;
        self.cmd
            .check_device(&buffer.inner, "counter sample buffer")?;
        self.demote_marked_end(buffer);
        if !self.point_supported() {
            self.device().require_point(self.kind().point())?;
        }
        let stage = barrier_stage(barrier);
        self.sample(buffer, index, stage)
    }

    /// A precise write into a heap entry this recording claimed clean, in a
    /// pass without relaxed writes: the usual write, with nothing else to
    /// check (inlined into the caller). Returns whether it wrote.
    #[inline(always)]
    fn write_precise_claimed(
        &mut self,
        granularity: TimestampGranularity,
        heap: &CounterHeap,
        index: u32,
    ) -> bool {
        granularity == TimestampGranularity::Precise
            && !self.ended()
            && self.cmd.pass_ends.relaxed.is_empty()
            && self.cmd.pass_ends.relaxed_one.is_none()
            && self
                .cmd
                .write_claimed(&heap.inner, index, vk::PipelineStageFlags2::ALL_COMMANDS)
    }

    /// The first relaxed write of a pass, into a heap entry of this device
    /// this recording claimed clean: noted as written now, and kept as the
    /// pass's one relaxed write, whose command the pass's end records
    /// (inlined into the caller). Returns whether it kept it.
    #[inline(always)]
    fn write_relaxed_first(
        &mut self,
        granularity: TimestampGranularity,
        heap: &CounterHeap,
        index: u32,
    ) -> bool {
        if granularity != TimestampGranularity::Relaxed
            || self.ended()
            || !self.cmd.pass_ends.relaxed.is_empty()
            || !self.cmd.pass_ends.relaxed_one.is_none()
            // A claimed heap is this device's (see `record_claimed`).
            || !self.cmd.tracker.claims.try_write(&heap.inner, index)
        {
            return false;
        }
        self.cmd.pass_ends.relaxed_one = MarkedEnd::of(&heap.inner, index);
        true
    }

    /// Whether the pass's one relaxed write is `heap[index]`.
    fn relaxed_one_is(&self, heap: &Samples, index: u32) -> bool {
        self.cmd.pass_ends.relaxed_one == MarkedEnd::of(heap, index)
    }

    #[inline(never)]
    fn write_heap_timestamp(
        &mut self,
        granularity: TimestampGranularity,
        heap: &CounterHeap,
        index: u32,
    ) -> Result<()> {
        self.check_open()?;
        self.cmd.check_device(&heap.inner, "counter heap")?;
        match granularity {
            TimestampGranularity::Precise => {
                // Later in program order than any relaxed write of the index
                // in this pass: it wins. The pass's one relaxed write is
                // noted as written and its query is still clean: this
                // write takes its place.
                if self.relaxed_one_is(&heap.inner, index) {
                    self.write_relaxed_one();
                    return Ok(());
                }
                if let Some(r) = self
                    .cmd
                    .pass_ends
                    .relaxed
                    .iter_mut()
                    .find(|r| Arc::ptr_eq(&r.heap, &heap.inner))
                {
                    r.writes.remove(index);
                }
                write_timestamp(
                    &self.cmd.device,
                    self.cmd.raw,
                    &heap.inner,
                    index,
                    vk::PipelineStageFlags2::ALL_COMMANDS,
                    self.in_render_pass(),
                    &mut self.cmd.tracker,
                )
            }
            TimestampGranularity::Relaxed => {
                // Coalesced: one timestamp at the pass's end serves every
                // relaxed write of the pass in the lists (and the one kept
                // apart has its own). Checked now, written at the end
                // (outside any render pass, where re-used entries can be
                // reset).
                heap.inner.check_index(index)?;
                if self.relaxed_one_is(&heap.inner, index) {
                    return Ok(());
                }
                // The first, into an entry claimed clean: kept apart (a
                // mark cannot join the lists, which write with every
                // check: the lists are empty while it is the first).
                if self.cmd.pass_ends.relaxed.is_empty()
                    && self.cmd.pass_ends.relaxed_one.is_none()
                    && (self.cmd.tracker.claims.try_write(&heap.inner, index)
                        || self.claim_relaxed(&heap.inner, index))
                {
                    self.cmd.pass_ends.relaxed_one = MarkedEnd::of(&heap.inner, index);
                    return Ok(());
                }
                self.insert_relaxed(&heap.inner, index);
                Ok(())
            }
        }
    }

    /// The first relaxed write of a pass into a block of `heap` this
    /// recording has not claimed (the first pass of every block): claims
    /// the block under the lock and notes `index` as written in it, as
    /// [`LocalClaims::try_write`] would have. Returns false, having claimed
    /// nothing new, where the entry cannot be written as it is (it needs a
    /// reset, is open, or is another recording's: the lists' write at the
    /// pass's end resets it, or reports what is wrong, as before).
    ///
    /// [`LocalClaims::try_write`]: gpu_counters_hal::bookkeeping::LocalClaims::try_write
    #[cold]
    #[inline(never)]
    fn claim_relaxed(&mut self, heap: &Arc<Samples>, index: u32) -> bool {
        let cmd = &mut *self.cmd;
        let Ok(mut slots) = heap.lock() else {
            return false;
        };
        // As a locked write's: this recording's claim on the heap ends,
        // the entry is checked, and the heap held.
        if !matches!(
            heap.prepare_write(&mut slots, index, false, &mut cmd.tracker),
            Ok(false)
        ) {
            return false;
        }
        let Tracker { claims, ticket, .. } = &mut cmd.tracker;
        claims.claim(heap, &mut slots, index, ticket);
        drop(slots);
        cmd.tracker.claims.try_write(heap, index)
    }

    /// Adds a relaxed write of `heap[index]` to the pass's lists.
    fn insert_relaxed(&mut self, heap: &Arc<Samples>, index: u32) {
        if let Some(r) = self
            .cmd
            .pass_ends
            .relaxed
            .iter_mut()
            .find(|r| Arc::ptr_eq(&r.heap, heap))
        {
            r.writes.insert(index);
            return;
        }
        // The emptied list last used for this heap, else any, else a new one.
        let spare = &mut self.cmd.spare_relaxed.writes;
        let mut entry = match spare.iter().rposition(|r| Arc::ptr_eq(&r.heap, heap)) {
            Some(p) => spare.swap_remove(p),
            None => match spare.pop() {
                Some(r) => HeapRelaxed {
                    heap: heap.clone(),
                    writes: r.writes,
                },
                None => HeapRelaxed {
                    heap: heap.clone(),
                    writes: RelaxedWrites::new(heap.count),
                },
            },
        };
        entry.writes.reuse(heap.count);
        entry.writes.insert(index);
        self.cmd.pass_ends.relaxed.push(entry);
    }

    /// Ends the pass: closes the statistic chain and the render pass, takes
    /// the end-of-pass samples and the coalesced relaxed timestamps. The
    /// usual pass (at most one claimed attachment's end and one relaxed
    /// write, nothing else) here, inlined into the caller; any other out of
    /// line.
    #[inline(always)]
    fn end(&mut self) -> Result<()> {
        if self.ended() {
            return Ok(());
        }
        let pending = &self.cmd.pass_ends;
        if self.in_render_pass()
            || !pending.statistics.is_empty()
            || pending.chain.is_some()
            || !pending.timestamps.is_empty()
            || !pending.relaxed.is_empty()
        {
            return detached(self.cmd, |core| core.end_general());
        }
        self.cmd.open_pass = OpenPass::CLOSED;
        // In the general path's order: the attachment's end, then the
        // relaxed write's timestamp, both noted as written already.
        self.write_marked_end();
        self.write_relaxed_one();
        Ok(())
    }

    /// [`EncoderCore::end`] of any pass.
    #[inline(never)]
    fn end_general(&mut self) -> Result<()> {
        // Ended from here on, though its kind and render pass are still
        // read below, until the render pass ends.
        self.cmd.open_pass.0 &= !OpenPass::OPEN;
        let mut first_error = None;
        let mut keep = |r: Result<()>| {
            if let Err(e) = r {
                first_error.get_or_insert(e);
            }
        };
        if !self.cmd.pass_ends.statistics.is_empty() {
            // Taken out while the samples are written (which borrow the
            // encoder), and put back empty with its capacity.
            let mut list = std::mem::take(&mut self.cmd.pass_ends.statistics);
            for (samples, index) in list.drain(..) {
                keep(self.sample_statistic(&samples, index));
            }
            self.cmd.pass_ends.statistics = list;
        }
        if self.cmd.pass_ends.chain.is_some() {
            keep(self.close_chain());
        }
        if self.in_render_pass() {
            let d = self.cmd.device.raw();
            // SAFETY: a render pass instance begun by this encoder is open.
            unsafe {
                if self.cmd.open_pass.has(OpenPass::RENDER_PASS2) {
                    d.cmd_end_render_pass2(self.cmd.raw, &vk::SubpassEndInfo::default());
                } else {
                    d.cmd_end_rendering(self.cmd.raw);
                }
            }
        }
        self.cmd.open_pass = OpenPass::CLOSED;
        // The pass's only attachment end sample, if it had one attachment.
        self.write_marked_end();
        if !self.cmd.pass_ends.timestamps.is_empty() {
            let mut list = std::mem::take(&mut self.cmd.pass_ends.timestamps);
            for end in list.drain(..) {
                keep(self.write_end(end));
            }
            self.cmd.pass_ends.timestamps = list;
        }
        let one = self.cmd.pass_ends.relaxed_one;
        self.write_relaxed_one();
        if self.cmd.pass_ends.relaxed.is_empty() {
            return first_error.map_or(Ok(()), Err);
        }
        let mut relaxed = std::mem::take(&mut self.cmd.pass_ends.relaxed);
        for entry in relaxed.drain(..) {
            let HeapRelaxed { heap, writes } = &entry;
            // The timestamp the heap's relaxed writes share, and those that
            // alias it.
            let (target, aliases) = if heap.main.raw == one.pool {
                // The heap of the pass's first relaxed write, written above.
                (one.index, writes.indices())
            } else {
                let Some((&first, rest)) = writes.indices().split_first() else {
                    self.cmd.spare_relaxed.writes.push(entry);
                    continue;
                };
                keep(write_timestamp(
                    &self.cmd.device,
                    self.cmd.raw,
                    heap,
                    first,
                    vk::PipelineStageFlags2::ALL_COMMANDS,
                    false,
                    &mut self.cmd.tracker,
                ));
                (first, rest)
            };
            if !aliases.is_empty() {
                match heap.lock() {
                    Ok(mut slots) => {
                        slots.mark_aliases(aliases, target, self.cmd.tracker.ticket.id());
                    }
                    Err(e) => keep(Err(e)),
                }
            }
            self.cmd.spare_relaxed.writes.push(entry);
        }
        // Its capacity stays for the next pass.
        self.cmd.pass_ends.relaxed = relaxed;
        first_error.map_or(Ok(()), Err)
    }
}

impl EncoderCore<'_> {
    /// Writes one end-of-pass timestamp: into a held set's claimed index
    /// here (inlined into the pass's end), anything else out of line.
    #[inline(always)]
    fn write_end(&mut self, end: EndSample) -> Result<()> {
        if let EndSet::Held(p) = end.samples {
            if self.cmd.write_held_claimed(p, end.index, end.stage) {
                return Ok(());
            }
        }
        self.write_end_checked(end)
    }

    /// [`EncoderCore::write_end`] with every check.
    #[inline(never)]
    fn write_end_checked(&mut self, end: EndSample) -> Result<()> {
        let samples = match end.samples {
            EndSet::Held(p) => self.cmd.held_samples(p).ok_or_else(|| {
                gpu_counters_hal::Error::Internal(
                    "an end-of-pass sample's set is no longer held".into(),
                )
            })?,
            EndSet::Owned(s) => s,
        };
        write_timestamp(
            &self.cmd.device,
            self.cmd.raw,
            &samples,
            end.index,
            end.stage,
            false,
            &mut self.cmd.tracker,
        )
    }
}

impl Drop for EncoderCore<'_> {
    fn drop(&mut self) {
        // An encoder dropped without end_encoding still leaves the command
        // buffer valid: close what it opened.
        let _ = self.end();
    }
}

/// Takes statistic sample `index` in a chain: ends the open query of the
/// chain (its segment ends here) and begins query `index`.
#[allow(clippy::too_many_arguments)] // the recording context, the chain and the sample
pub(crate) fn chain_sample(
    d: &ash::Device,
    cmd: vk::CommandBuffer,
    chain: &mut Option<Chain>,
    samples: &Arc<Samples>,
    index: u32,
    in_render_pass: bool,
    with_occlusion: bool,
    tracker: &mut Tracker,
) -> Result<()> {
    let mut slots = samples.lock()?;
    if samples.prepare_write(&mut slots, index, in_render_pass, tracker)? {
        samples.record_reset(&mut slots, cmd, tracker, index);
    }
    let occlusion = samples.occlusion.as_ref().filter(|_| with_occlusion);
    let mut link = NONE;
    let mut id = None;
    // The chain's reference to `samples`, when it already holds one.
    let mut held = None;
    if let Some(open) = chain.take() {
        if Arc::ptr_eq(&open.samples, samples) {
            link = open.index;
            id = Some(open.id);
            end_queries(d, cmd, samples, &mut slots, open.index);
            held = Some(open.samples);
        } else {
            let mut open_slots = open.samples.lock()?;
            end_queries(d, cmd, &open.samples, &mut open_slots, open.index);
        }
    }
    let id = id.unwrap_or_else(next_chain_id);
    // SAFETY: index < count and the query is reset and not active
    // (prepare_write); the only active queries of these pools were ended
    // above.
    unsafe {
        d.cmd_begin_query(cmd, samples.main.raw, index, vk::QueryControlFlags::empty());
        if let Some(o) = occlusion {
            d.cmd_begin_query(cmd, o.raw, index, vk::QueryControlFlags::PRECISE);
        }
    }
    slots.mark_recorded(index, link, occlusion.is_some(), tracker.ticket.id(), id);
    slots.open[index as usize] = true;
    drop(slots);
    *chain = Some(Chain {
        samples: held.unwrap_or_else(|| samples.clone()),
        index,
        id,
    });
    Ok(())
}

/// Ends the open query of a chain, if any.
pub(crate) fn chain_close(
    d: &ash::Device,
    cmd: vk::CommandBuffer,
    chain: &mut Option<Chain>,
) -> Result<()> {
    if let Some(open) = chain.take() {
        let mut slots = open.samples.lock()?;
        end_queries(d, cmd, &open.samples, &mut slots, open.index);
    }
    Ok(())
}

fn end_queries(
    d: &ash::Device,
    cmd: vk::CommandBuffer,
    samples: &Samples,
    slots: &mut crate::samples::Slots,
    index: u32,
) {
    let i = index as usize;
    // SAFETY: the queries were begun by this encoder in this command buffer
    // (and render pass instance, if any) and are still active (`open`).
    unsafe {
        d.cmd_end_query(cmd, samples.main.raw, index);
        if slots.occlusion[i] {
            if let Some(o) = &samples.occlusion {
                d.cmd_end_query(cmd, o.raw, index);
            }
        }
    }
    slots.open[i] = false;
}

macro_rules! common_encoder_methods {
    () => {
        /// The Vulkan command buffer, for the caller's own commands inside
        /// the pass.
        pub fn raw(&self) -> vk::CommandBuffer {
            self.core.cmd.raw
        }

        /// The device.
        pub fn device(&self) -> &crate::Device {
            self.core.device()
        }

        /// Samples counters between commands
        /// (`sampleCounters(sampleBuffer:sampleIndex:barrier:)`). With
        /// `barrier` the sample follows all prior work; without, it is taken
        /// when the GPU reaches it, which can be before earlier work finishes.
        #[inline(always)]
        pub fn sample_counters(
            &mut self,
            buffer: &CounterSampleBuffer,
            index: u32,
            barrier: bool,
        ) -> Result<()> {
            if self.core.sample_claimed(buffer, index, barrier) {
                return Ok(());
            }
            detached(self.core.cmd, |core| {
                core.sample_counters(buffer, index, barrier)
            })
        }

        /// Ends the pass (`endEncoding`): takes the end-of-pass samples.
        // Inlined whole: its usual path is a few checks around the
        // driver's command, and a call of its own would save and restore
        // registers on the stack beside that command each pass.
        #[inline(always)]
        pub fn end_encoding(mut self) -> Result<()> {
            let ended = self.core.end();
            // Ended: the drop would only see that.
            std::mem::forget(self);
            ended
        }
    };
}

/// Records a compute pass (`MTLComputeCommandEncoder`).
pub struct ComputeEncoder<'c> {
    core: EncoderCore<'c>,
}

impl ComputeEncoder<'_> {
    common_encoder_methods!();

    /// Writes a timestamp into a heap after all prior work
    /// (`writeTimestamp(granularity:counterHeap:index:)`). Relaxed writes of
    /// one pass share one timestamp taken when the pass ends.
    #[inline(always)]
    pub fn write_timestamp(
        &mut self,
        granularity: TimestampGranularity,
        heap: &CounterHeap,
        index: u32,
    ) -> Result<()> {
        if self.core.write_precise_claimed(granularity, heap, index)
            || self.core.write_relaxed_first(granularity, heap, index)
        {
            return Ok(());
        }
        detached(self.core.cmd, |core| {
            core.write_heap_timestamp(granularity, heap, index)
        })
    }
}

/// Records a transfer pass (`MTLBlitCommandEncoder`).
pub struct BlitEncoder<'c> {
    core: EncoderCore<'c>,
}

impl BlitEncoder<'_> {
    common_encoder_methods!();

    /// Records a GPU resolve into `destination` (`resolveCounters`).
    pub fn resolve_counters(
        &mut self,
        buffer: &CounterSampleBuffer,
        range: Range<u64>,
        destination: impl Into<BufferRef>,
        destination_offset: u64,
    ) -> Result<()> {
        self.core.check_open()?;
        self.core
            .cmd
            .resolve_counters(buffer, range, destination, destination_offset)
    }
}

/// Records a render pass (`MTLRenderCommandEncoder`).
pub struct RenderEncoder<'c> {
    core: EncoderCore<'c>,
}

impl RenderEncoder<'_> {
    common_encoder_methods!();

    /// Writes a timestamp into a heap (`writeTimestamp(granularity:...)`).
    /// Precise writes inside a render pass need an entry not written since it
    /// was last invalidated; relaxed writes are taken when the pass ends.
    #[inline(always)]
    pub fn write_timestamp(
        &mut self,
        granularity: TimestampGranularity,
        heap: &CounterHeap,
        index: u32,
    ) -> Result<()> {
        if self.core.write_precise_claimed(granularity, heap, index)
            || self.core.write_relaxed_first(granularity, heap, index)
        {
            return Ok(());
        }
        detached(self.core.cmd, |core| {
            core.write_heap_timestamp(granularity, heap, index)
        })
    }

    /// Samples counters at a tile-dispatch boundary, as Metal's tile shaders
    /// allow. Vulkan has no tile shaders, so on a device without the
    /// tile-dispatch sampling point (every Vulkan device) this fails with
    /// [`gpu_counters_hal::InvalidInput::UnsupportedSamplingPoint`]: ported
    /// Metal code gets a clear error instead of a silently missing sample.
    pub fn sample_counters_at_tile_dispatch(
        &mut self,
        buffer: &CounterSampleBuffer,
        index: u32,
        barrier: bool,
    ) -> Result<()> {
        self.device()
            .require_point(gpu_counters_hal::CounterSamplingPoint::AtTileDispatchBoundary)?;
        self.core.sample_counters(buffer, index, barrier)
    }
}

/// The error for a new encoder while another is open.
#[cold]
#[inline(never)]
fn still_open(cmd: &CommandBuffer) -> gpu_counters_hal::Error {
    match cmd.check_no_open_encoder() {
        Err(e) => e,
        Ok(()) => gpu_counters_hal::Error::Internal("an encoder is open".into()),
    }
}

/// One sampling point of a pass attachment.
#[derive(Clone, Copy)]
struct Attachment<'a> {
    buffer: &'a CounterSampleBuffer,
    index: Option<u32>,
    is_start: bool,
    stage: vk::PipelineStageFlags2,
}

/// The sampling points of compute and blit attachments, without collecting
/// them.
fn pass_attachments<'a>(
    attachments: &'a [PassSampleBufferAttachment<'a>],
) -> impl Iterator<Item = Attachment<'a>> + Clone {
    attachments.iter().flat_map(|a| {
        [
            Attachment {
                buffer: a.sample_buffer,
                index: a.start_of_encoder_sample_index,
                is_start: true,
                stage: vk::PipelineStageFlags2::TOP_OF_PIPE,
            },
            Attachment {
                buffer: a.sample_buffer,
                index: a.end_of_encoder_sample_index,
                is_start: false,
                stage: vk::PipelineStageFlags2::ALL_COMMANDS,
            },
        ]
    })
}

/// The sampling points of render attachments, without collecting them.
fn render_attachments<'a>(
    attachments: &'a [RenderPassSampleBufferAttachment<'a>],
) -> impl Iterator<Item = Attachment<'a>> + Clone {
    attachments.iter().flat_map(|a| {
        [
            Attachment {
                buffer: a.sample_buffer,
                index: a.start_of_vertex_sample_index,
                is_start: true,
                stage: vk::PipelineStageFlags2::TOP_OF_PIPE,
            },
            Attachment {
                buffer: a.sample_buffer,
                index: a.start_of_fragment_sample_index,
                is_start: true,
                stage: vk::PipelineStageFlags2::TOP_OF_PIPE,
            },
            Attachment {
                buffer: a.sample_buffer,
                index: a.end_of_vertex_sample_index,
                is_start: false,
                stage: vk::PipelineStageFlags2::PRE_RASTERIZATION_SHADERS,
            },
            Attachment {
                buffer: a.sample_buffer,
                index: a.end_of_fragment_sample_index,
                is_start: false,
                stage: vk::PipelineStageFlags2::ALL_COMMANDS,
            },
        ]
    })
}

#[inline(always)]
fn pass_encoder<'c>(
    cmd: &'c mut CommandBuffer,
    kind: EncoderKind,
    attachments: &[PassSampleBufferAttachment<'_>],
) -> Result<EncoderCore<'c>> {
    let mut core = EncoderCore::new(cmd, kind)?;
    // The out-of-line paths are detached: an error returns here, and the
    // core's drop ends the pass.
    match attachments {
        [] => {}
        [one] if core.begin_claimed(one) => {}
        [one] if detached(core.cmd, |c| c.begin_claiming(one))? => {}
        _ => detached(core.cmd, |c| {
            c.prepare_attachments(pass_attachments(attachments))?;
            start_samples(c, pass_attachments(attachments))
        })?,
    }
    Ok(core)
}

fn start_samples<'a>(
    core: &mut EncoderCore<'_>,
    list: impl Iterator<Item = Attachment<'a>>,
) -> Result<()> {
    for a in list {
        let Some(index) = a.index else { continue };
        match (a.buffer.counter_set(), a.is_start) {
            (CommonCounterSet::Statistic, true) => core.sample_statistic(&a.buffer.inner, index)?,
            (CommonCounterSet::Statistic, false) => core
                .cmd
                .pass_ends
                .statistics
                .push((a.buffer.inner.clone(), index)),
            (_, true) => core.sample(a.buffer, index, a.stage)?,
            (_, false) => core.cmd.push_end_sample(&a.buffer.inner, index, a.stage),
        }
    }
    Ok(())
}

impl CommandBuffer {
    /// Adds an end-of-pass timestamp of `samples[index]` to the open pass's
    /// list, by the set's place among those this recording holds where it
    /// holds it (no new reference to it).
    fn push_end_sample(
        &mut self,
        samples: &Arc<Samples>,
        index: u32,
        stage: vk::PipelineStageFlags2,
    ) {
        let samples = match self.tracker.held_position(samples) {
            Some(p) => EndSet::Held(p),
            None => EndSet::Owned(samples.clone()),
        };
        self.pass_ends.timestamps.push(EndSample {
            samples,
            index,
            stage,
        });
    }

    /// Begins a compute pass (`makeComputeCommandEncoder(descriptor:)`),
    /// sampling its attachments.
    #[inline]
    pub fn compute_encoder(
        &mut self,
        descriptor: &ComputePassDescriptor<'_>,
    ) -> Result<ComputeEncoder<'_>> {
        Ok(ComputeEncoder {
            core: pass_encoder(
                self,
                EncoderKind::Compute,
                descriptor.sample_buffer_attachments,
            )?,
        })
    }

    /// Begins a transfer pass (`makeBlitCommandEncoder(descriptor:)`).
    #[inline]
    pub fn blit_encoder(&mut self, descriptor: &BlitPassDescriptor<'_>) -> Result<BlitEncoder<'_>> {
        Ok(BlitEncoder {
            core: pass_encoder(
                self,
                EncoderKind::Blit,
                descriptor.sample_buffer_attachments,
            )?,
        })
    }

    /// Begins a render pass instance (`makeRenderCommandEncoder(descriptor:)`),
    /// sampling its attachments.
    ///
    /// The sampling side (the attachments' buffers, indices and sampling
    /// points) is checked and returns errors; the render target is the
    /// caller's raw Vulkan description, recorded as it is with
    /// `vkCmdBeginRendering` or `vkCmdBeginRenderPass2`.
    ///
    /// # Errors
    ///
    /// [`gpu_counters_hal::Error::Invalid`] when another encoder is open, or
    /// an attachment is of another device, out of range, attached twice, or
    /// the device cannot sample at stage boundaries.
    ///
    /// # Safety
    ///
    /// `descriptor.target` must be valid usage for the begin command it
    /// selects on this command buffer, as the Vulkan specification states it:
    ///
    /// - every handle it holds (image views, resolve views, render pass,
    ///   framebuffer, and those in its `p_next` chain) must be a live object
    ///   of this command buffer's device, and stay live until the GPU has
    ///   finished with this command buffer;
    /// - its pointers (attachment arrays, clear values, `p_next` chain) must
    ///   point to valid structures for the whole call;
    /// - the images must be in the layouts the info names when the commands
    ///   execute, the render area must lie inside the attachments, and for
    ///   [`RenderTarget::Dynamic`] the device must have `dynamicRendering`
    ///   enabled (every device gpu-counters opens does; a
    ///   [`Device::from_raw`](crate::Device::from_raw) device needs it
    ///   enabled by its creator).
    ///
    /// Within the pass, the commands recorded through
    /// [`RenderEncoder::raw`] are the caller's, under the same rules.
    pub unsafe fn render_encoder(
        &mut self,
        descriptor: &RenderPassDescriptor<'_>,
    ) -> Result<RenderEncoder<'_>> {
        let mut core = EncoderCore::new(self, EncoderKind::Render)?;
        let attachments = descriptor.sample_buffer_attachments;
        core.prepare_attachments(render_attachments(attachments))?;
        let cmd = core.cmd.raw;
        let d = core.cmd.device.raw();
        // SAFETY: the caller's begin-info is valid usage for this device and
        // command buffer, its handles live until the GPU is done (this
        // function's safety contract); the command buffer is recording
        // outside any render pass, as `EncoderCore::new` checked that no
        // other encoder is open.
        let uses_render_pass2 = unsafe {
            match descriptor.target {
                RenderTarget::Dynamic(info) => {
                    d.cmd_begin_rendering(cmd, info);
                    false
                }
                RenderTarget::RenderPass(info) => {
                    d.cmd_begin_render_pass2(
                        cmd,
                        info,
                        &vk::SubpassBeginInfo::default().contents(vk::SubpassContents::INLINE),
                    );
                    true
                }
            }
        };
        core.cmd.open_pass.0 |= OpenPass::IN_RENDER_PASS
            | if uses_render_pass2 {
                OpenPass::RENDER_PASS2
            } else {
                0
            };
        start_samples(&mut core, render_attachments(attachments))?;
        Ok(RenderEncoder { core })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An encoder is made and returned as the caller's variable, and a
    /// store costs most right after a driver call: it is only its command
    /// buffer's address (the open pass's state is in the command buffer).
    #[test]
    fn an_encoder_is_one_pointer() {
        let word = std::mem::size_of::<usize>();
        assert_eq!(std::mem::size_of::<ComputeEncoder<'static>>(), word);
        assert_eq!(std::mem::size_of::<RenderEncoder<'static>>(), word);
        assert_eq!(std::mem::size_of::<BlitEncoder<'static>>(), word);
        assert_eq!(std::mem::size_of::<OpenPass>(), 1);
    }
}
