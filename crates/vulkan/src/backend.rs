//! The Vulkan crate as a gpu-counters backend ([`gpu_counters_hal::Backend`]):
//! what the profiler and the other backend-generic layers use.

use crate::command::{CommandBuffer, Submission};
use crate::device::Device;
use crate::sample_buffer::{CounterHeap, CounterSampleBuffer};
use crate::util::vk_err;
use ash::vk;
use gpu_counters_hal::bookkeeping::Ticket;
use gpu_counters_hal::{
    Backend, BackendDevice, BackendHeap, BackendMarker, BackendRecorder, BackendSampleBuffer,
    BackendSubmission, Calibration, CounterHeapDescriptor, CounterSampleBufferDescriptor, DeviceId,
    DeviceInfo, Error, ResolvedCounters, ResolvedTimestamps, Result, TimestampGranularity,
    TimestampPair,
};
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Tickets only: a panic elsewhere leaves the list consistent.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The Vulkan backend: [`Device`], [`CounterSampleBuffer`], [`CommandBuffer`]
/// and a fence as the completion marker.
#[derive(Debug, Clone, Copy)]
pub struct Vulkan;

impl Backend for Vulkan {
    type Device = Device;
    type SampleBuffer = CounterSampleBuffer;
    type Heap = CounterHeap;
    type Recorder = CommandBuffer;
    type Marker = Marker;
    type Submission = Submission;
}

/// A fence signaled by an empty submission queued behind earlier work.
///
/// Its signal says that every command buffer submitted before it has
/// finished: seen signaled, it completes their tickets, as
/// [`Device::wait_idle`] does, so their samples may be reset on the host.
pub struct Marker {
    device: Device,
    fence: vk::Fence,
    /// Submitted and not seen signaled since.
    in_flight: AtomicBool,
    /// The tickets of the command buffers submitted before it and not seen
    /// finished when it was submitted.
    covered: Mutex<Vec<Ticket>>,
}

impl std::fmt::Debug for Marker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Marker")
            .field("fence", &self.fence)
            .finish()
    }
}

impl BackendMarker for Marker {
    fn is_signaled(&self) -> Result<bool> {
        // SAFETY: the fence belongs to this device.
        let done = unsafe { self.device.raw().get_fence_status(self.fence) }
            .map_err(vk_err("vkGetFenceStatus (marker)"))?;
        if done {
            self.in_flight.store(false, Ordering::Release);
            let covered = std::mem::take(&mut *lock(&self.covered));
            for t in covered {
                t.complete();
            }
        }
        Ok(done)
    }

    fn reset(&self) -> Result<()> {
        if !self.is_signaled()? {
            return Err(Error::Internal("marker reset before it signaled".into()));
        }
        // SAFETY: the fence signaled, so no queue operation uses it.
        unsafe { self.device.raw().reset_fences(&[self.fence]) }
            .map_err(vk_err("vkResetFences (marker)"))
    }
}

impl Drop for Marker {
    fn drop(&mut self) {
        // SAFETY: a fence in flight is waited for before it is destroyed, so
        // no queue operation uses it then.
        unsafe {
            let d = self.device.raw();
            if self.in_flight.load(Ordering::Acquire)
                && d.wait_for_fences(&[self.fence], true, u64::MAX).is_err()
            {
                // Device lost: leak the fence rather than destroy it in use.
                return;
            }
            d.destroy_fence(self.fence, None);
        }
    }
}

impl BackendDevice for Device {
    type Backend = Vulkan;

    fn info(&self) -> &DeviceInfo {
        Device::info(self)
    }

    fn device_id(&self) -> DeviceId {
        self.id()
    }

    fn queue_name(&self) -> String {
        format!("queue family {}", self.queue_family_index())
    }

    fn make_counter_sample_buffer(
        &self,
        descriptor: &CounterSampleBufferDescriptor,
    ) -> Result<CounterSampleBuffer> {
        Device::make_counter_sample_buffer(self, descriptor)
    }

    fn make_counter_heap(&self, descriptor: &CounterHeapDescriptor) -> Result<CounterHeap> {
        Device::make_counter_heap(self, descriptor)
    }

    fn sample_timestamps(&self) -> Result<TimestampPair> {
        Device::sample_timestamps(self)
    }

    fn calibration(&self) -> Result<Calibration> {
        Device::calibration(self)
    }

    fn refresh_calibration(&self, calibration: &mut Calibration) -> Result<()> {
        Device::refresh_calibration(self, calibration)
    }

    fn make_marker(&self) -> Result<Marker> {
        // SAFETY: a valid device and create-info; destroyed in Drop.
        let fence = unsafe {
            self.raw()
                .create_fence(&vk::FenceCreateInfo::default(), None)
        }
        .map_err(vk_err("vkCreateFence (marker)"))?;
        Ok(Marker {
            device: self.clone(),
            fence,
            in_flight: AtomicBool::new(false),
            covered: Mutex::new(Vec::new()),
        })
    }

    fn submit_marker(&self, marker: &Marker) -> Result<()> {
        if marker.in_flight.swap(true, Ordering::AcqRel) {
            return Err(Error::Internal("marker submitted while in flight".into()));
        }
        let queue = self
            .queue()
            .lock()
            .map_err(|_| Error::Internal("queue lock poisoned".into()))?;
        // Under the queue's lock: every one of them is submitted before the
        // marker, so its signal says they finished.
        *lock(&marker.covered) = self.submitted_unfinished();
        // SAFETY: the queue is externally synchronized by its lock; the fence
        // belongs to this device and is unsignaled (reset since it last
        // signaled, or new).
        let r = unsafe { self.raw().queue_submit2(*queue, &[], marker.fence) };
        drop(queue);
        if let Err(e) = r {
            lock(&marker.covered).clear();
            marker.in_flight.store(false, Ordering::Release);
            return Err(vk_err("vkQueueSubmit2 (marker)")(e));
        }
        Ok(())
    }

    fn wait_idle(&self) -> Result<()> {
        Device::wait_idle(self)
    }
}

impl BackendSampleBuffer for CounterSampleBuffer {
    fn sample_count(&self) -> u32 {
        CounterSampleBuffer::sample_count(self)
    }

    fn resolve_counter_range(&self, range: Range<u64>) -> Result<ResolvedCounters> {
        CounterSampleBuffer::resolve_counter_range(self, range)
    }

    fn resolve_counter_range_into(
        &self,
        range: Range<u64>,
        out: &mut ResolvedCounters,
    ) -> Result<()> {
        CounterSampleBuffer::resolve_counter_range_into(self, range, out)
    }

    fn resolve_timestamps_into(
        &self,
        range: Range<u64>,
        out: &mut ResolvedTimestamps,
    ) -> Result<()> {
        CounterSampleBuffer::resolve_timestamps_into(self, range, out)
    }

    fn reset(&self) -> Result<()> {
        CounterSampleBuffer::reset(self)
    }

    fn reset_range(&self, range: Range<u64>) -> Result<()> {
        CounterSampleBuffer::reset_range(self, range)
    }
}

impl BackendHeap for CounterHeap {
    fn count(&self) -> u32 {
        CounterHeap::count(self)
    }

    fn resolve_counter_range(&self, range: Range<u64>) -> Result<ResolvedCounters> {
        CounterHeap::resolve_counter_range(self, range)
    }

    fn resolve_counter_range_into(
        &self,
        range: Range<u64>,
        out: &mut ResolvedCounters,
    ) -> Result<()> {
        CounterHeap::resolve_counter_range_into(self, range, out)
    }

    fn resolve_timestamps_into(
        &self,
        range: Range<u64>,
        out: &mut ResolvedTimestamps,
    ) -> Result<()> {
        CounterHeap::resolve_timestamps_into(self, range, out)
    }

    fn invalidate_counter_range(&self, range: Range<u64>) -> Result<()> {
        CounterHeap::invalidate_counter_range(self, range)
    }
}

impl BackendRecorder for CommandBuffer {
    type Backend = Vulkan;

    #[inline]
    fn recorder_id(&self) -> u64 {
        use ash::vk::Handle;
        self.raw().as_raw()
    }

    #[inline]
    fn device_id(&self) -> DeviceId {
        self.device().id()
    }

    #[inline]
    fn scope_stack(&mut self) -> &mut gpu_counters_hal::ScopeStack {
        &mut self.scope_stack
    }

    #[inline]
    fn sample_counters(
        &mut self,
        buffer: &CounterSampleBuffer,
        index: u32,
        placement: TimestampGranularity,
    ) -> Result<()> {
        CommandBuffer::sample_counters(self, buffer, index, placement)
    }

    fn write_timestamp(
        &mut self,
        granularity: TimestampGranularity,
        heap: &CounterHeap,
        index: u32,
    ) -> Result<()> {
        CommandBuffer::write_timestamp(self, granularity, heap, index)
    }

    fn end_statistics(&mut self) -> Result<()> {
        CommandBuffer::end_statistics(self)
    }

    /// Done once a [`Submission`] of it is seen finished
    /// (waited for, polled, reused or dropped) or its
    /// [`Completion`](crate::Completion) is signaled; abandoned when dropped
    /// unsubmitted.
    fn ticket(&self) -> Option<&gpu_counters_hal::bookkeeping::Ticket> {
        Some(&self.tracker.ticket)
    }
}

impl BackendSubmission for Submission {
    fn cpu_submit_ns(&self) -> u64 {
        Submission::cpu_submit_ns(self)
    }

    fn is_done(&self) -> Result<bool> {
        Submission::is_done(self)
    }

    fn wait(&self) -> Result<u64> {
        Submission::wait(self)
    }
}
