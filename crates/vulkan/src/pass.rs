//! The core every encoder shares ([`EncoderCore`]): beginning a pass with
//! its attachments, sampling and heap writes inside it, and ending it with
//! its end-of-pass samples and coalesced relaxed writes.

use crate::buffer::BufferRef;
use crate::command::CommandBuffer;
use crate::descriptors::{PassSampleBufferAttachment, RenderPassSampleBufferAttachment};
use crate::pass_state::{EncoderKind, EndSample, EndSet, HeapRelaxed, MarkedEnd, OpenPass};
use crate::recording::Tracker;
use crate::sample_buffer::{CounterHeap, CounterSampleBuffer};
use crate::samples::Samples;
use crate::writes::{
    barrier_stage, chain_close, chain_sample, write_timestamp, write_timestamp_in,
};
use ash::vk;
use gpu_counters_hal::bookkeeping::{check_pass_attachments, RelaxedWrites, SlotState};
use gpu_counters_hal::{
    CommonCounterSet, CounterSamplingPoint, InvalidInput, Result, TimestampGranularity,
};
use std::ops::Range;
use std::sync::Arc;

/// The state every encoder shares: its command buffer, where the open
/// pass's state is ([`OpenPass`], [`PassEnds`](crate::pass_state::PassEnds)).
pub(crate) struct EncoderCore<'c> {
    pub(crate) cmd: &'c mut CommandBuffer,
}

/// Runs `f` on an encoder core of `cmd` that does not end the pass when it
/// goes: for the out-of-line paths of an encoder, which then take the
/// command buffer's address (a register) rather than the encoder's (which
/// would have to be stored in memory as each pass begins).
#[inline(always)]
pub(crate) fn detached<'c, R>(
    cmd: &'c mut CommandBuffer,
    f: impl FnOnce(&mut EncoderCore<'c>) -> R,
) -> R {
    f(&mut std::mem::ManuallyDrop::new(EncoderCore { cmd }))
}

impl<'c> EncoderCore<'c> {
    #[inline(always)]
    pub(crate) fn new(cmd: &'c mut CommandBuffer, kind: EncoderKind) -> Result<Self> {
        if cmd.open_pass.is_open() {
            return Err(still_open(cmd));
        }
        cmd.open_pass = OpenPass::open(kind, cmd.device.supports_counter_sampling(kind.point()));
        Ok(Self { cmd })
    }

    pub(crate) fn kind(&self) -> EncoderKind {
        self.cmd.open_pass.kind()
    }

    /// Whether the encoder ended (its command buffer has no open encoder:
    /// while this one lives, no other can begin).
    #[inline(always)]
    pub(crate) fn ended(&self) -> bool {
        !self.cmd.open_pass.is_open()
    }

    #[inline(always)]
    pub(crate) fn point_supported(&self) -> bool {
        self.cmd.open_pass.has(OpenPass::POINT)
    }

    #[inline(always)]
    pub(crate) fn in_render_pass(&self) -> bool {
        self.cmd.open_pass.has(OpenPass::IN_RENDER_PASS)
    }

    pub(crate) fn device(&self) -> &crate::device::Device {
        &self.cmd.device
    }

    /// Validates a pass's attachments, records the resets they need (outside
    /// any render pass).
    pub(crate) fn prepare_attachments<'a>(
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

    pub(crate) fn sample_statistic(&mut self, samples: &Arc<Samples>, index: u32) -> Result<()> {
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

    pub(crate) fn close_chain(&mut self) -> Result<()> {
        chain_close(
            self.cmd.device.raw(),
            self.cmd.raw,
            &mut self.cmd.pass_ends.chain,
        )
    }

    pub(crate) fn sample(
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

    pub(crate) fn check_open(&self) -> Result<()> {
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
    pub(crate) fn begin_claimed(&mut self, a: &PassSampleBufferAttachment<'_>) -> bool {
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
    pub(crate) fn write_marked_end(&mut self) {
        let end = self.cmd.pass_ends.marked_end;
        if !end.is_none() {
            self.cmd.pass_ends.marked_end.clear();
            self.record_marked(end, vk::PipelineStageFlags2::ALL_COMMANDS);
        }
    }

    /// Records the command of the pass's relaxed [`MarkedEnd`], if any
    /// (once), at `stage`: after all prior work at the pass's end, or after
    /// the stage of a precise write that takes its place.
    #[inline(always)]
    pub(crate) fn write_relaxed_one(&mut self, stage: vk::PipelineStageFlags2) {
        let one = self.cmd.pass_ends.relaxed_one;
        if !one.is_none() {
            self.cmd.pass_ends.relaxed_one.clear();
            self.record_marked(one, stage);
        }
    }

    /// Records the timestamp command of `end` at `stage`, a stage valid on
    /// this device (`ALL_COMMANDS`, or one that
    /// [`Device::render_stage_flags`](crate::device::Device::render_stage_flags)
    /// gave inside a render pass).
    #[inline(always)]
    pub(crate) fn record_marked(
        &mut self,
        MarkedEnd { pool, index }: MarkedEnd,
        stage: vk::PipelineStageFlags2,
    ) {
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
        // valid there, and no reset is needed); `stage` is valid on this
        // device (the caller's contract).
        unsafe {
            self.cmd
                .device
                .raw()
                .cmd_write_timestamp2(self.cmd.raw, stage, pool, index)
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
    pub(crate) fn begin_claiming(&mut self, a: &PassSampleBufferAttachment<'_>) -> Result<bool> {
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
    pub(crate) fn demote_marked_end(&mut self, buffer: &CounterSampleBuffer) {
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
    pub(crate) fn sample_claimed(
        &mut self,
        buffer: &CounterSampleBuffer,
        index: u32,
        barrier: bool,
    ) -> bool {
        let stage = barrier_stage(barrier);
        !self.ended()
            && self.point_supported()
            && self.cmd.write_claimed(&buffer.inner, index, stage)
    }

    #[inline(never)]
    pub(crate) fn sample_counters(
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

    /// A precise write at `stage` into a heap entry this recording claimed
    /// clean, in a pass without relaxed writes: the usual write, with
    /// nothing else to check (inlined into the caller). Returns whether it
    /// wrote.
    #[inline(always)]
    pub(crate) fn write_precise_claimed(
        &mut self,
        granularity: TimestampGranularity,
        heap: &CounterHeap,
        index: u32,
        stage: vk::PipelineStageFlags2,
    ) -> bool {
        granularity == TimestampGranularity::Precise
            && !self.ended()
            && self.cmd.pass_ends.relaxed.is_empty()
            && self.cmd.pass_ends.relaxed_one.is_none()
            && self.cmd.write_claimed(&heap.inner, index, stage)
    }

    /// The first relaxed write of a pass, into a heap entry of this device
    /// this recording claimed clean: noted as written now, and kept as the
    /// pass's one relaxed write, whose command the pass's end records
    /// (inlined into the caller). Returns whether it kept it.
    #[inline(always)]
    pub(crate) fn write_relaxed_first(
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
    pub(crate) fn relaxed_one_is(&self, heap: &Samples, index: u32) -> bool {
        self.cmd.pass_ends.relaxed_one == MarkedEnd::of(heap, index)
    }

    /// A GPU resolve inside the open pass (a blit pass's
    /// `resolveCounters`), with [`CommandBuffer::resolve_counters`]'s
    /// checks. Refused while the pass samples statistics (their query is
    /// active, and would count the resolve's compute work), and for an
    /// index the resolve reads that the pass writes when it ends.
    #[inline(never)]
    pub(crate) fn resolve_counters(
        &mut self,
        buffer: &CounterSampleBuffer,
        range: Range<u64>,
        destination: BufferRef,
        destination_offset: u64,
    ) -> Result<()> {
        self.check_open()?;
        self.cmd
            .check_device(&buffer.inner, "counter sample buffer")?;
        if self.cmd.pass_ends.chain.is_some() {
            return Err(InvalidInput::EncoderState(
                "a GPU resolve inside a pass that samples statistics would count its own compute work in them: resolve after end_encoding".into(),
            )
            .into());
        }
        let pending = self.pending_writes(&buffer.inner);
        buffer.inner.record_resolve_gpu(
            &mut self.cmd.tracker,
            self.cmd.raw,
            range,
            destination,
            destination_offset,
            &pending,
        )
    }

    /// The indices of `samples` whose writes the open pass records when it
    /// ends: its attachments' end samples and its relaxed heap writes.
    fn pending_writes(&self, samples: &Arc<Samples>) -> Vec<u32> {
        let ends = &self.cmd.pass_ends;
        let mut out = Vec::new();
        for marked in [ends.marked_end, ends.relaxed_one] {
            if !marked.is_none() && marked.pool == samples.main.raw {
                out.push(marked.index);
            }
        }
        for end in &ends.timestamps {
            let same = match &end.samples {
                EndSet::Held(p) => self
                    .cmd
                    .tracker
                    .held
                    .samples
                    .get(*p)
                    .is_some_and(|h| Arc::ptr_eq(h, samples)),
                EndSet::Owned(s) => Arc::ptr_eq(s, samples),
            };
            if same {
                out.push(end.index);
            }
        }
        for (s, index) in &ends.statistics {
            if Arc::ptr_eq(s, samples) {
                out.push(*index);
            }
        }
        for r in &ends.relaxed {
            if Arc::ptr_eq(&r.heap, samples) {
                out.extend_from_slice(r.writes.indices());
            }
        }
        out
    }

    /// A heap write with every check: precise ones at `stage` now, relaxed
    /// ones coalesced into one timestamp after all of the pass's work at its
    /// end.
    #[inline(never)]
    pub(crate) fn write_heap_timestamp(
        &mut self,
        granularity: TimestampGranularity,
        heap: &CounterHeap,
        index: u32,
        stage: vk::PipelineStageFlags2,
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
                    self.write_relaxed_one(stage);
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
                    stage,
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
    pub(crate) fn claim_relaxed(&mut self, heap: &Arc<Samples>, index: u32) -> bool {
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
    pub(crate) fn insert_relaxed(&mut self, heap: &Arc<Samples>, index: u32) {
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
    pub(crate) fn end(&mut self) -> Result<()> {
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
        self.write_relaxed_one(vk::PipelineStageFlags2::ALL_COMMANDS);
        Ok(())
    }

    /// [`EncoderCore::end`] of any pass.
    #[inline(never)]
    pub(crate) fn end_general(&mut self) -> Result<()> {
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
        self.write_relaxed_one(vk::PipelineStageFlags2::ALL_COMMANDS);
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
    pub(crate) fn write_end(&mut self, end: EndSample) -> Result<()> {
        if let EndSet::Held(p) = end.samples {
            if self.cmd.write_held_claimed(p, end.index, end.stage) {
                return Ok(());
            }
        }
        self.write_end_checked(end)
    }

    /// [`EncoderCore::write_end`] with every check.
    #[inline(never)]
    pub(crate) fn write_end_checked(&mut self, end: EndSample) -> Result<()> {
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

/// The error for a new encoder while another is open.
#[cold]
#[inline(never)]
pub(crate) fn still_open(cmd: &CommandBuffer) -> gpu_counters_hal::Error {
    match cmd.check_no_open_encoder() {
        Err(e) => e,
        Ok(()) => gpu_counters_hal::Error::Internal("an encoder is open".into()),
    }
}

/// One sampling point of a pass attachment.
#[derive(Clone, Copy)]
pub(crate) struct Attachment<'a> {
    pub(crate) buffer: &'a CounterSampleBuffer,
    pub(crate) index: Option<u32>,
    pub(crate) is_start: bool,
    pub(crate) stage: vk::PipelineStageFlags2,
}

/// The sampling points of compute and blit attachments, without collecting
/// them.
pub(crate) fn pass_attachments<'a>(
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
pub(crate) fn render_attachments<'a>(
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
pub(crate) fn pass_encoder<'c>(
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

pub(crate) fn start_samples<'a>(
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
    pub(crate) fn push_end_sample(
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
}
