//! Command buffers: recorded by gpu-counters or the caller, and submissions.

use crate::buffer::BufferRef;
use crate::device::Device;
use crate::pass_state::{OpenPass, PassEnds, SpareRelaxed};
use crate::recording::{Held, Tracker};
use crate::sample_buffer::{CounterHeap, CounterSampleBuffer};
use crate::samples::Samples;
use crate::util::vk_err;
use crate::writes::{
    barrier_stage, chain_close, chain_sample, record_claimed, write_timestamp, Chain,
};
use ash::vk;
use gpu_counters_hal::bookkeeping::{Phase, SlotState, Ticket, STILL_OPEN};
use gpu_counters_hal::{cpu_monotonic_ns, Error, InvalidInput, Result, TimestampGranularity};
use std::ops::Range;
use std::sync::Arc;

/// A command buffer that encoders record into (Metal's `MTLCommandBuffer`).
///
/// Either gpu-counters owns it ([`CommandBuffer::new`], submitted with
/// [`CommandBuffer::commit`]) or it wraps the caller's own command buffer
/// ([`CommandBuffer::from_raw`]), which the caller ends and submits.
pub struct CommandBuffer {
    pub(crate) device: Device,
    pub(crate) raw: vk::CommandBuffer,
    owned: Option<Owned>,
    /// The command-buffer-level statistic chain (see `sample_counters`).
    pub(crate) chain: Option<Chain>,
    /// The recording's ticket and what it holds.
    pub(crate) tracker: Tracker,
    /// The open encoder's state, if one began and has not ended: a leaked
    /// encoder (`mem::forget`) leaves its pass or queries open, and the
    /// command buffer cannot be ended then.
    pub(crate) open_pass: OpenPass,
    /// The relaxed-write lists of ended encoders, emptied, for the next
    /// encoders to reuse: a pass with relaxed heap writes then allocates
    /// nothing.
    pub(crate) spare_relaxed: SpareRelaxed,
    /// The open encoder's end-of-pass samples (empty while none is open).
    pub(crate) pass_ends: PassEnds,
    /// Whether [`CommandBuffer::completion`] handed out a handle.
    completion_taken: bool,
    /// Set once submitted by [`CommandBuffer::commit`]: the submission owns
    /// everything from then on.
    committed: bool,
    /// The profiler's scopes open on it (new with each recording).
    pub(crate) scope_stack: gpu_counters_hal::ScopeStack,
}

/// Tells gpu-counters that the GPU finished a caller's command buffer
/// ([`CommandBuffer::completion`]).
#[derive(Debug, Clone)]
pub struct Completion(Ticket);

impl Completion {
    /// Call once the command buffer's fence (or timeline value) has signaled:
    /// re-recorded samples then resolve to their new values, and the sample
    /// buffers, heaps and destinations it recorded into are let go.
    pub fn signal(&self) {
        self.0.complete();
    }
}

struct Owned {
    pool: vk::CommandPool,
    fence: vk::Fence,
}

impl std::fmt::Debug for CommandBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CommandBuffer")
            .field("raw", &self.raw)
            .field("owned", &self.owned.is_some())
            .finish()
    }
}

impl CommandBuffer {
    /// Allocates a command buffer on the device's queue family and begins
    /// recording.
    pub fn new(device: &Device) -> Result<Self> {
        let d = device.raw();
        let pool_info = vk::CommandPoolCreateInfo::default()
            .queue_family_index(device.queue_family_index())
            .flags(vk::CommandPoolCreateFlags::TRANSIENT);
        // SAFETY: valid create-infos; every object is destroyed on the error
        // paths below or when the submission is dropped.
        unsafe {
            let pool = d
                .create_command_pool(&pool_info, None)
                .map_err(vk_err("vkCreateCommandPool"))?;
            let alloc = vk::CommandBufferAllocateInfo::default()
                .command_pool(pool)
                .level(vk::CommandBufferLevel::PRIMARY)
                .command_buffer_count(1);
            let raw = match d.allocate_command_buffers(&alloc) {
                Ok(b) => b[0],
                Err(e) => {
                    d.destroy_command_pool(pool, None);
                    return Err(vk_err("vkAllocateCommandBuffers")(e));
                }
            };
            let fence = match d.create_fence(&vk::FenceCreateInfo::default(), None) {
                Ok(f) => f,
                Err(e) => {
                    d.destroy_command_pool(pool, None);
                    return Err(vk_err("vkCreateFence")(e));
                }
            };
            let cmd = Self {
                device: device.clone(),
                raw,
                owned: Some(Owned { pool, fence }),
                chain: None,
                tracker: Tracker::new(),
                open_pass: OpenPass::CLOSED,
                spare_relaxed: Default::default(),
                pass_ends: Default::default(),
                completion_taken: false,
                committed: false,
                scope_stack: Default::default(),
            };
            cmd.begin()?;
            Ok(cmd)
        }
    }

    fn begin(&self) -> Result<()> {
        let info = vk::CommandBufferBeginInfo::default()
            .flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT);
        // SAFETY: the buffer is in the initial state (new or pool reset).
        unsafe { self.device.raw().begin_command_buffer(self.raw, &info) }
            .map_err(vk_err("vkBeginCommandBuffer"))
    }

    /// Wraps a caller's command buffer, so encoders record counter sampling
    /// into it. The caller ends and submits it.
    ///
    /// The returned value holds every sample buffer, heap and
    /// [`crate::GpuBuffer`] it records into. Once it is dropped, they are held
    /// until its [`CommandBuffer::completion`] handle is signaled, if one was
    /// taken, and let go at once otherwise.
    ///
    /// # Safety
    /// - `raw` must be a primary command buffer of `device`, allocated from a
    ///   pool of [`Device::queue_family_index`], in the recording state, and
    ///   not recorded into elsewhere while the returned value lives.
    /// - Keep the returned value alive until the GPU has finished executing
    ///   `raw` (or until you discard `raw` unsubmitted), or take its
    ///   [`CommandBuffer::completion`] before dropping it and call
    ///   [`Completion::signal`] only once the GPU has finished `raw`: what
    ///   gpu-counters recorded into `raw` must not outlive what it references.
    /// - Call [`CommandBuffer::end_statistics`] (and check that it succeeds)
    ///   before ending `raw`.
    /// - Submit `raw` before any command buffer recorded after this value is
    ///   dropped that samples the same indices: those reset them first, on
    ///   the GPU, in submission order.
    /// - Submit `raw` to a queue whose every use is externally synchronized
    ///   with gpu-counters' own, through [`Device::queue`].
    pub unsafe fn from_raw(device: &Device, raw: vk::CommandBuffer) -> Self {
        Self {
            device: device.clone(),
            raw,
            owned: None,
            chain: None,
            tracker: Tracker::new(),
            open_pass: OpenPass::CLOSED,
            spare_relaxed: Default::default(),
            pass_ends: Default::default(),
            completion_taken: false,
            committed: false,
            scope_stack: Default::default(),
        }
    }

    /// The Vulkan command buffer, for the caller's own commands.
    pub fn raw(&self) -> vk::CommandBuffer {
        self.raw
    }

    /// The device.
    pub fn device(&self) -> &Device {
        &self.device
    }

    #[inline]
    pub(crate) fn check_device(&self, samples: &Samples, what: &'static str) -> Result<()> {
        self.device.id().check(samples.device.id(), what)
    }

    /// Samples counters between passes, outside any encoder: the building
    /// block of profiler scopes. Timestamps follow all prior work with
    /// [`TimestampGranularity::Precise`] (a barrier), or are taken when the
    /// GPU reaches them with `Relaxed`. Statistic samples of one command
    /// buffer form one chain, so nested and sequential scopes both resolve
    /// to exact end-minus-start counts, render passes in between included.
    /// While such a chain is open, encoders cannot sample statistics;
    /// [`CommandBuffer::end_statistics`] closes it (commit does too).
    ///
    /// # Errors
    /// Another device's buffer (`ForeignObject`); an encoder still open; an
    /// index out of range or already written by this recording.
    #[inline(always)]
    pub fn sample_counters(
        &mut self,
        buffer: &CounterSampleBuffer,
        index: u32,
        placement: TimestampGranularity,
    ) -> Result<()> {
        let barrier = placement == TimestampGranularity::Precise;
        let stage = barrier_stage(barrier);
        if !self.open_pass.is_open() && self.write_claimed(&buffer.inner, index, stage) {
            return Ok(());
        }
        self.sample_counters_checked(buffer, index, barrier)
    }

    /// Writes a timestamp of `samples` that this recording claimed clean
    /// (see [`LocalClaims::claim`](gpu_counters_hal::bookkeeping::LocalClaims::claim)), if it is one, with
    /// nothing else to check: the usual write, small enough to inline into
    /// the caller's loop. Returns whether it wrote.
    #[inline(always)]
    pub(crate) fn write_claimed(
        &mut self,
        samples: &Samples,
        index: u32,
        stage: vk::PipelineStageFlags2,
    ) -> bool {
        // No device or counter-set check: a set that this recording claimed
        // passed both (see `record_claimed`), and any other set has no
        // claim here.
        record_claimed(
            &self.device,
            self.raw,
            samples,
            &mut self.tracker.claims,
            index,
            stage,
        )
    }

    /// [`CommandBuffer::write_claimed`] of `index`, only if `also` (in the
    /// same block, another index) is claimed clean too, which is then
    /// noted as written as well: a pass attachment's start, with its end
    /// taken in the same lookup. The caller records `also`'s write before
    /// the recording ends (see [`LocalClaims::try_write_both`](gpu_counters_hal::bookkeeping::LocalClaims::try_write_both)); until it
    /// does, the command buffer cannot end.
    #[inline(always)]
    pub(crate) fn write_claimed_both(
        &mut self,
        samples: &Samples,
        index: u32,
        also: u32,
        stage: vk::PipelineStageFlags2,
    ) -> bool {
        if !self.tracker.claims.try_write_both(samples, index, also) {
            return false;
        }
        // SAFETY: as in `record_claimed`: the index is clean in a block this
        // recording claimed, so the set is a timestamp set of this device,
        // and `self.raw` is recording.
        unsafe {
            self.device
                .raw()
                .cmd_write_timestamp2(self.raw, stage, samples.main.raw, index)
        };
        true
    }

    /// [`CommandBuffer::write_claimed`] into `held.samples[held]`, the
    /// sets this recording holds (an end-of-pass sample), without taking a
    /// reference to the set.
    #[inline(always)]
    pub(crate) fn write_held_claimed(
        &mut self,
        held: usize,
        index: u32,
        stage: vk::PipelineStageFlags2,
    ) -> bool {
        let Tracker {
            held: h, claims, ..
        } = &mut self.tracker;
        // A held set passed the device check when it was first written.
        h.samples.get(held).is_some_and(|samples| {
            record_claimed(&self.device, self.raw, samples, claims, index, stage)
        })
    }

    /// A set this recording holds, `held.samples[held]`.
    pub(crate) fn held_samples(&self, held: usize) -> Option<Arc<Samples>> {
        self.tracker.held.samples.get(held).cloned()
    }

    /// [`CommandBuffer::sample_counters`] with every check.
    #[inline(never)]
    fn sample_counters_checked(
        &mut self,
        buffer: &CounterSampleBuffer,
        index: u32,
        barrier: bool,
    ) -> Result<()> {
        self.check_device(&buffer.inner, "counter sample buffer")?;
        self.check_no_open_encoder()?;
        match buffer.counter_set() {
            gpu_counters_hal::CommonCounterSet::Statistic => chain_sample(
                self.device.raw(),
                self.raw,
                &mut self.chain,
                &buffer.inner,
                index,
                false,
                true,
                &mut self.tracker,
            ),
            _ => write_timestamp(
                &self.device,
                self.raw,
                &buffer.inner,
                index,
                barrier_stage(barrier),
                false,
                &mut self.tracker,
            ),
        }
    }

    /// A handle to report that the GPU finished this command buffer. Only
    /// needed for a caller's command buffer ([`CommandBuffer::from_raw`]) that
    /// samples indices again without a reset: until it is signaled, those
    /// samples resolve on the CPU as not ready, never as their old values.
    pub fn completion(&mut self) -> Completion {
        self.completion_taken = true;
        Completion(self.tracker.ticket.clone())
    }

    /// Fails when an encoder of this command buffer was leaked without
    /// ending (`mem::forget`): its pass or queries are still open.
    pub(crate) fn check_no_open_encoder(&self) -> Result<()> {
        if self.open_pass.is_open() {
            return Err(InvalidInput::EncoderState(
                "an encoder of this command buffer was never ended (leaked with mem::forget?): its pass and queries are still open, so the command buffer cannot be ended or sampled outside a pass".into(),
            )
            .into());
        }
        Ok(())
    }

    /// Records a reset of `range` (outside any pass), so its samples can be
    /// written again in this command buffer without a host-side reset.
    pub fn reset_samples(&mut self, buffer: &CounterSampleBuffer, range: Range<u64>) -> Result<()> {
        self.check_device(&buffer.inner, "counter sample buffer")?;
        self.check_no_open_encoder()?;
        let (first, count) = buffer.inner.check_range(&range)?;
        let samples = &buffer.inner;
        let mut slots = samples.lock()?;
        // Check the whole range before recording anything.
        for i in first..first + count {
            if slots.open[i as usize] {
                return Err(samples.reuse(i, STILL_OPEN));
            }
            samples.prepare_write(&mut slots, i, false, &mut self.tracker)?;
        }
        for i in first..first + count {
            samples.record_reset(&mut slots, self.raw, &self.tracker, i);
            slots.state[i as usize] = SlotState::Fresh;
        }
        Ok(())
    }

    /// Ends the open command-buffer-level statistic query, if any. Call it
    /// before ending a caller's command buffer that used
    /// [`CommandBuffer::sample_counters`] with statistics.
    ///
    /// For a caller's command buffer it also fails, naming the index, when
    /// another command buffer recorded on another thread at the same time
    /// wrote an index this one wrote: do not submit it then.
    /// ([`CommandBuffer::commit`] checks that itself.)
    pub fn end_statistics(&mut self) -> Result<()> {
        self.check_no_open_encoder()?;
        chain_close(self.device.raw(), self.raw, &mut self.chain)?;
        if self.owned.is_none() {
            self.tracker.release_claims()?;
        }
        Ok(())
    }

    /// Writes a timestamp into a heap between passes
    /// (`MTL4CommandBuffer.writeTimestamp(granularity:counterHeap:index:)`).
    /// Both granularities follow all prior work here: outside a pass there is
    /// nothing to coalesce with.
    #[inline(always)]
    pub fn write_timestamp(
        &mut self,
        granularity: TimestampGranularity,
        heap: &CounterHeap,
        index: u32,
    ) -> Result<()> {
        let _ = granularity;
        if !self.open_pass.is_open()
            && self.write_claimed(&heap.inner, index, vk::PipelineStageFlags2::ALL_COMMANDS)
        {
            return Ok(());
        }
        self.write_timestamp_checked(heap, index)
    }

    /// [`CommandBuffer::write_timestamp`] with every check.
    #[inline(never)]
    fn write_timestamp_checked(&mut self, heap: &CounterHeap, index: u32) -> Result<()> {
        self.check_device(&heap.inner, "counter heap")?;
        self.check_no_open_encoder()?;
        write_timestamp(
            &self.device,
            self.raw,
            &heap.inner,
            index,
            vk::PipelineStageFlags2::ALL_COMMANDS,
            false,
            &mut self.tracker,
        )
    }

    /// Records a GPU resolve of `range` into `destination` at
    /// `destination_offset` (Metal's blit `resolveCounters`). Either storage
    /// mode may be resolved this way. The offset must be a multiple of 8 and
    /// the destination must hold the range's result structs.
    ///
    /// The resolve waits on the GPU for every sample of the range that was
    /// recorded: submit it after the command buffers that write them (in the
    /// same command buffer, after the passes, is the usual place). Samples
    /// never written resolve to the error value without waiting. Outside
    /// any encoder; inside a blit pass, [`BlitEncoder::resolve_counters`]
    /// records one.
    ///
    /// [`BlitEncoder::resolve_counters`]: crate::BlitEncoder::resolve_counters
    pub fn resolve_counters(
        &mut self,
        buffer: &CounterSampleBuffer,
        range: Range<u64>,
        destination: impl Into<BufferRef>,
        destination_offset: u64,
    ) -> Result<()> {
        self.check_device(&buffer.inner, "counter sample buffer")?;
        self.check_no_open_encoder()?;
        buffer.inner.record_resolve_gpu(
            &mut self.tracker,
            self.raw,
            range,
            destination.into(),
            destination_offset,
            &[],
        )
    }

    /// Records a GPU resolve of heap entries (Metal 4's `resolveCounterHeap`).
    pub fn resolve_counter_heap(
        &mut self,
        heap: &CounterHeap,
        range: Range<u64>,
        destination: impl Into<BufferRef>,
        destination_offset: u64,
    ) -> Result<()> {
        self.check_device(&heap.inner, "counter heap")?;
        self.check_no_open_encoder()?;
        heap.inner.record_resolve_gpu(
            &mut self.tracker,
            self.raw,
            range,
            destination.into(),
            destination_offset,
            &[],
        )
    }

    /// Ends recording and submits to the device's queue (`commit`).
    /// Only for command buffers gpu-counters allocated.
    pub fn commit(mut self) -> Result<Submission> {
        self.end_statistics()?;
        // The tables learn every claimed write before the GPU can run any.
        self.tracker.release_claims()?;
        let Some(owned) = self.owned.take() else {
            return Err(InvalidInput::EncoderState(
                "commit of a caller's command buffer: end and submit it yourself".into(),
            )
            .into());
        };
        let d = self.device.raw();
        // SAFETY: the buffer is recording (begun in new or reuse) and no
        // encoder borrows it (encoders hold &mut self).
        if let Err(e) = unsafe { d.end_command_buffer(self.raw) } {
            self.owned = Some(owned);
            return Err(vk_err("vkEndCommandBuffer")(e));
        }
        let infos = [vk::CommandBufferSubmitInfo::default().command_buffer(self.raw)];
        let submit = [vk::SubmitInfo2::default().command_buffer_infos(&infos)];
        let Ok(queue) = self.device.queue().lock() else {
            self.owned = Some(owned);
            return Err(Error::Internal("queue lock poisoned".into()));
        };
        let cpu_submit_ns = cpu_monotonic_ns();
        // SAFETY: the queue is externally synchronised by the lock; the
        // command buffer is executable and the fence unsignaled.
        if let Err(e) = unsafe { d.queue_submit2(*queue, &submit, owned.fence) } {
            drop(queue);
            self.owned = Some(owned);
            return Err(vk_err("vkQueueSubmit2")(e));
        }
        self.device.note_submitted(&self.tracker.ticket);
        drop(queue);
        self.committed = true;
        self.tracker.ticket.set_phase(Phase::Submitted);
        let Owned { pool, fence } = owned;
        let held = self.tracker.take_held();
        Ok(Submission {
            device: self.device.clone(),
            raw: self.raw,
            pool,
            fence,
            cpu_submit_ns,
            complete_ns: None,
            ticket: self.tracker.ticket.clone(),
            held,
        })
    }
}

impl Drop for CommandBuffer {
    fn drop(&mut self) {
        if self.committed {
            return;
        }
        if let Some(owned) = self.owned.take() {
            // Never submitted (commit takes `owned` only once submitted): none
            // of its commands will run.
            self.tracker.abandon();
            // SAFETY: never submitted, so no GPU work uses the pool or fence.
            unsafe {
                self.device.raw().destroy_fence(owned.fence, None);
                self.device.raw().destroy_command_pool(owned.pool, None);
            }
            return;
        }
        // A caller's command buffer: close the statistic query left open (the
        // caller ends the buffer), then the caller submits it. (The tables
        // learn every claimed write here at the latest.)
        let _ = self.end_statistics();
        let _ = self.tracker.release_claims();
        self.tracker.ticket.set_phase(Phase::External);
        let held = self.tracker.take_held();
        if self.completion_taken && !held.is_empty() {
            self.tracker.ticket.hold_until_complete(held.erased());
        }
    }
}

/// A committed command buffer. Dropping it waits for the GPU.
///
/// It holds the sample buffers, heaps and resolve destinations its commands
/// use until the GPU has finished, so dropping those early is safe.
pub struct Submission {
    device: Device,
    raw: vk::CommandBuffer,
    pool: vk::CommandPool,
    fence: vk::Fence,
    cpu_submit_ns: u64,
    complete_ns: Option<u64>,
    ticket: Ticket,
    held: Held,
}

impl std::fmt::Debug for Submission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Submission")
            .field("cpu_submit_ns", &self.cpu_submit_ns)
            .finish()
    }
}

impl Submission {
    /// [`cpu_monotonic_ns`] just before the submit call.
    pub fn cpu_submit_ns(&self) -> u64 {
        self.cpu_submit_ns
    }

    /// Whether the GPU finished, without waiting.
    ///
    /// # Errors
    /// A failed fence query (device lost).
    pub fn is_done(&self) -> Result<bool> {
        if self.fence == vk::Fence::null() {
            return Ok(true);
        }
        // SAFETY: the fence belongs to this device.
        let done = unsafe { self.device.raw().get_fence_status(self.fence) }
            .map_err(vk_err("vkGetFenceStatus"))?;
        if done {
            self.ticket.complete();
        }
        Ok(done)
    }

    /// Waits for the GPU to finish; returns [`cpu_monotonic_ns`] right
    /// after.
    ///
    /// # Errors
    /// A failed fence wait (device lost).
    pub fn wait(&self) -> Result<u64> {
        if let Some(t) = self.complete_ns {
            return Ok(t);
        }
        // SAFETY: the fence belongs to this device and was submitted.
        unsafe {
            self.device
                .raw()
                .wait_for_fences(&[self.fence], true, u64::MAX)
        }
        .map_err(map_wait_error)?;
        self.ticket.complete();
        Ok(cpu_monotonic_ns())
    }

    /// Waits, then returns the command buffer reset and recording again, so
    /// steady-state frames allocate nothing.
    pub fn reuse(mut self) -> Result<CommandBuffer> {
        self.wait()?;
        self.held = Held::default();
        let d = self.device.raw();
        // SAFETY: the work finished (waited above), so the pool and fence can
        // be reset.
        unsafe {
            d.reset_fences(&[self.fence])
                .map_err(vk_err("vkResetFences"))?;
            d.reset_command_pool(self.pool, vk::CommandPoolResetFlags::empty())
                .map_err(vk_err("vkResetCommandPool"))?;
        }
        let cmd = CommandBuffer {
            device: self.device.clone(),
            raw: self.raw,
            owned: Some(Owned {
                pool: self.pool,
                fence: self.fence,
            }),
            chain: None,
            tracker: Tracker::new(),
            open_pass: OpenPass::CLOSED,
            spare_relaxed: Default::default(),
            pass_ends: Default::default(),
            completion_taken: false,
            committed: false,
            scope_stack: Default::default(),
        };
        self.complete_ns = Some(0);
        self.pool = vk::CommandPool::null();
        self.fence = vk::Fence::null();
        cmd.begin()?;
        Ok(cmd)
    }
}

impl Drop for Submission {
    fn drop(&mut self) {
        if self.fence == vk::Fence::null() {
            return;
        }
        // SAFETY: wait for the GPU before destroying what it uses.
        unsafe {
            let d = self.device.raw();
            if d.wait_for_fences(&[self.fence], true, u64::MAX).is_err() {
                // Device lost: the work will never finish, but the fence
                // cannot be trusted either. Leak the pool, fence and held
                // objects rather than free what the GPU might touch.
                std::mem::forget(std::mem::take(&mut self.held));
                return;
            }
            self.ticket.complete();
            d.destroy_fence(self.fence, None);
            d.destroy_command_pool(self.pool, None);
        }
    }
}

fn map_wait_error(e: vk::Result) -> Error {
    vk_err("vkWaitForFences")(e)
}
