//! Command buffers: recorded by gpu-counters or the caller, and submissions.

use crate::buffer::BufferRef;
use crate::samples::{Samples, SlotState, Ticket};
use crate::util::vk_err;
use crate::{CounterHeap, CounterSampleBuffer, Device};
use ash::vk;
use gpu_counters_core::{cpu_monotonic_ns, Error, InvalidInput, Result, TimestampGranularity};
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
    pub(crate) chain: Option<(Arc<Samples>, u32)>,
    /// Set when the GPU finished this recording.
    pub(crate) ticket: Ticket,
}

/// Tells gpu-counters that the GPU finished a caller's command buffer
/// ([`CommandBuffer::completion`]).
#[derive(Debug, Clone)]
pub struct Completion(Ticket);

impl Completion {
    /// Call once the command buffer's fence (or timeline value) has signaled.
    pub fn signal(&self) {
        self.0.store(true, std::sync::atomic::Ordering::Release);
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
                ticket: Ticket::default(),
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
    /// # Safety
    /// `raw` must be a primary command buffer of `device`, allocated from a
    /// pool of [`Device::queue_family_index`], in the recording state, and not
    /// recorded into elsewhere while the returned value lives.
    pub unsafe fn from_raw(device: &Device, raw: vk::CommandBuffer) -> Self {
        Self {
            device: device.clone(),
            raw,
            owned: None,
            chain: None,
            ticket: Ticket::default(),
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
        if !Arc::ptr_eq(&samples.device.shared, &self.device.shared) {
            return Err(InvalidInput::ForeignObject { what }.into());
        }
        Ok(())
    }

    /// Samples counters between passes, outside any encoder: the building
    /// block of profiler scopes. Timestamps follow all prior work with
    /// `barrier`, or are taken when the GPU reaches them without. Statistic
    /// samples of one command buffer form one chain, so nested and sequential
    /// scopes both resolve to exact end-minus-start counts, render passes in
    /// between included. While such a chain is open, encoders cannot sample
    /// statistics; [`CommandBuffer::end_statistics`] closes it (commit does too).
    pub fn sample_counters(
        &mut self,
        buffer: &CounterSampleBuffer,
        index: u32,
        barrier: bool,
    ) -> Result<()> {
        self.check_device(&buffer.inner, "counter sample buffer")?;
        match buffer.counter_set() {
            gpu_counters_core::CommonCounterSet::Statistic => crate::encoder::chain_sample(
                self.device.raw(),
                self.raw,
                &mut self.chain,
                &buffer.inner,
                index,
                false,
                true,
                &self.ticket,
            ),
            _ => write_timestamp(
                &self.device,
                self.raw,
                &buffer.inner,
                index,
                if barrier {
                    vk::PipelineStageFlags2::ALL_COMMANDS
                } else {
                    vk::PipelineStageFlags2::TOP_OF_PIPE
                },
                false,
                &self.ticket,
            ),
        }
    }

    /// A handle to report that the GPU finished this command buffer. Only
    /// needed for a caller's command buffer ([`CommandBuffer::from_raw`]) that
    /// samples indices again without a reset: until it is signaled, those
    /// samples resolve on the CPU as not ready, never as their old values.
    pub fn completion(&self) -> Completion {
        Completion(self.ticket.clone())
    }

    /// Records a reset of `range` (outside any pass), so its samples can be
    /// written again in this command buffer without a host-side reset.
    pub fn reset_samples(&mut self, buffer: &CounterSampleBuffer, range: Range<u64>) -> Result<()> {
        self.check_device(&buffer.inner, "counter sample buffer")?;
        let (first, count) = buffer.inner.check_range(&range)?;
        let mut slots = buffer.inner.lock()?;
        for i in first..first + count {
            buffer
                .inner
                .record_reset(&mut slots, self.raw, &self.ticket, i);
            slots.state[i as usize] = SlotState::Fresh;
        }
        Ok(())
    }

    /// Ends the open command-buffer-level statistic query, if any. Call it
    /// before ending a caller's command buffer that used
    /// [`CommandBuffer::sample_counters`] with statistics.
    pub fn end_statistics(&mut self) -> Result<()> {
        crate::encoder::chain_close(self.device.raw(), self.raw, &mut self.chain)
    }

    /// Writes a timestamp into a heap between passes
    /// (`MTL4CommandBuffer.writeTimestamp(granularity:counterHeap:index:)`).
    /// Both granularities follow all prior work here: outside a pass there is
    /// nothing to coalesce with.
    pub fn write_timestamp(
        &mut self,
        granularity: TimestampGranularity,
        heap: &CounterHeap,
        index: u32,
    ) -> Result<()> {
        let _ = granularity;
        self.check_device(&heap.inner, "counter heap")?;
        write_timestamp(
            &self.device,
            self.raw,
            &heap.inner,
            index,
            vk::PipelineStageFlags2::ALL_COMMANDS,
            false,
            &self.ticket,
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
    /// never written resolve to the error value without waiting.
    pub fn resolve_counters(
        &mut self,
        buffer: &CounterSampleBuffer,
        range: Range<u64>,
        destination: impl Into<BufferRef>,
        destination_offset: u64,
    ) -> Result<()> {
        self.check_device(&buffer.inner, "counter sample buffer")?;
        buffer
            .inner
            .record_resolve_gpu(self.raw, range, destination.into(), destination_offset)
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
        heap.inner
            .record_resolve_gpu(self.raw, range, destination.into(), destination_offset)
    }

    /// Ends recording and submits to the device's queue (`commit`).
    /// Only for command buffers gpu-counters allocated.
    pub fn commit(mut self) -> Result<Submission> {
        self.end_statistics()?;
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
        drop(queue);
        let Owned { pool, fence } = owned;
        let ticket = self.ticket.clone();
        let device = self.device.clone();
        let raw = self.raw;
        Ok(Submission {
            device,
            raw,
            pool,
            fence,
            cpu_submit_ns,
            complete_ns: None,
            ticket,
        })
    }
}

impl Drop for CommandBuffer {
    fn drop(&mut self) {
        let _ = self.end_statistics();
        if let Some(owned) = self.owned.take() {
            // SAFETY: never submitted (commit takes `owned`), so no GPU work
            // uses the pool or fence.
            unsafe {
                self.device.raw().destroy_fence(owned.fence, None);
                self.device.raw().destroy_command_pool(owned.pool, None);
            }
        }
    }
}

/// A committed command buffer. Dropping it waits for the GPU.
pub struct Submission {
    device: Device,
    raw: vk::CommandBuffer,
    pool: vk::CommandPool,
    fence: vk::Fence,
    cpu_submit_ns: u64,
    complete_ns: Option<u64>,
    ticket: Ticket,
}

impl std::fmt::Debug for Submission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Submission")
            .field("cpu_submit_ns", &self.cpu_submit_ns)
            .finish()
    }
}

impl Submission {
    /// `CLOCK_MONOTONIC` just before the submit call.
    pub fn cpu_submit_ns(&self) -> u64 {
        self.cpu_submit_ns
    }

    /// Whether the GPU finished.
    pub fn is_complete(&self) -> Result<bool> {
        // SAFETY: the fence belongs to this device.
        let done = unsafe { self.device.raw().get_fence_status(self.fence) }
            .map_err(vk_err("vkGetFenceStatus"))?;
        if done {
            self.ticket
                .store(true, std::sync::atomic::Ordering::Release);
        }
        Ok(done)
    }

    /// Waits for the GPU to finish; returns `CLOCK_MONOTONIC` right after.
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
        .map_err(vk_err("vkWaitForFences"))?;
        self.ticket
            .store(true, std::sync::atomic::Ordering::Release);
        Ok(cpu_monotonic_ns())
    }

    /// Waits, then returns the command buffer reset and recording again, so
    /// steady-state frames allocate nothing.
    pub fn reuse(mut self) -> Result<CommandBuffer> {
        self.wait()?;
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
            ticket: Ticket::default(),
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
            let _ = d.wait_for_fences(&[self.fence], true, u64::MAX);
            d.destroy_fence(self.fence, None);
            d.destroy_command_pool(self.pool, None);
        }
    }
}

#[cold]
fn not_timestamps(samples: &Samples) -> Error {
    InvalidInput::Argument(format!(
        "`{}` holds {} samples, not timestamps",
        samples.label, samples.set
    ))
    .into()
}

/// Records one timestamp into `samples[index]` at `stage`.
#[inline]
pub(crate) fn write_timestamp(
    device: &Device,
    cmd: vk::CommandBuffer,
    samples: &Arc<Samples>,
    index: u32,
    stage: vk::PipelineStageFlags2,
    in_render_pass: bool,
    ticket: &Ticket,
) -> Result<()> {
    if samples.set != gpu_counters_core::CommonCounterSet::Timestamp {
        return Err(not_timestamps(samples));
    }
    let mut slots = samples.lock()?;
    if samples.prepare_write(&slots, index, in_render_pass)? {
        samples.record_reset(&mut slots, cmd, ticket, index);
    }
    // SAFETY: index < count (prepare_write), the query was reset (on the host
    // at creation/reset, or inline just above), and `cmd` is recording.
    unsafe {
        device
            .raw()
            .cmd_write_timestamp2(cmd, stage, samples.main.raw, index)
    };
    Samples::mark_recorded(&mut slots, index, crate::samples::NONE, false);
    Ok(())
}
