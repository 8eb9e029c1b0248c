//! Counter sample buffers (`MTLCounterSampleBuffer`) and Metal 4 counter heaps
//! (`MTL4CounterHeap`).

use crate::device::Device;
use crate::samples::Samples;
use gpu_counters_hal::bookkeeping::SlotState;
use gpu_counters_hal::{
    CommonCounterSet, CounterHeapDescriptor, CounterHeapType, CounterSampleBufferDescriptor,
    InvalidInput, ResolvedCounters, ResolvedTimestamps, Result, StorageMode,
};
use std::ops::Range;
use std::sync::Arc;

/// A buffer the GPU saves counter samples into while it runs passes
/// (Metal's `MTLCounterSampleBuffer`). Cloning shares the buffer.
///
/// Backed by a Vulkan query pool (two for statistics: pipeline statistics and
/// a precise occlusion query for `fragments_passed`).
#[derive(Clone)]
pub struct CounterSampleBuffer {
    pub(crate) inner: Arc<Samples>,
}

impl std::fmt::Debug for CounterSampleBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CounterSampleBuffer")
            .field("label", &self.inner.label)
            .field("counter_set", &self.inner.set)
            .field("sample_count", &self.inner.count)
            .finish()
    }
}

impl Device {
    /// Makes a counter sample buffer (Metal's `makeCounterSampleBuffer`).
    ///
    /// Fails with [`InvalidInput::SampleCountZero`],
    /// [`InvalidInput::SampleCountTooLarge`] or
    /// [`InvalidInput::UnsupportedCounterSet`] for a bad descriptor, and with
    /// out-of-memory or internal errors from the driver.
    pub fn make_counter_sample_buffer(
        &self,
        descriptor: &CounterSampleBufferDescriptor,
    ) -> Result<CounterSampleBuffer> {
        descriptor.checked_sample_count(self.info().max_sample_count)?;
        self.require_set(descriptor.counter_set)?;
        Ok(CounterSampleBuffer {
            inner: Arc::new(Samples::new(
                self,
                descriptor.counter_set,
                descriptor.label.clone(),
                descriptor.storage_mode,
                descriptor.sample_count,
                "sample",
            )?),
        })
    }

    /// Makes a Metal 4 counter heap (`MTLDevice.makeCounterHeap`), with the
    /// descriptor's label.
    ///
    /// # Errors
    /// [`InvalidInput::HeapCountOutOfRange`] for a count of 0 or over the
    /// device's limit, [`InvalidInput::UnsupportedCounterSet`] on a device
    /// without timestamps, and out-of-memory or internal errors from the
    /// driver.
    pub fn make_counter_heap(&self, descriptor: &CounterHeapDescriptor) -> Result<CounterHeap> {
        let limit = self.info().max_sample_count;
        if descriptor.count == 0 || descriptor.count > limit {
            return Err(InvalidInput::HeapCountOutOfRange {
                requested: descriptor.count,
                limit,
            }
            .into());
        }
        match descriptor.heap_type {
            CounterHeapType::Timestamp => self.require_set(CommonCounterSet::Timestamp)?,
        }
        Ok(CounterHeap {
            inner: Arc::new(Samples::new(
                self,
                CommonCounterSet::Timestamp,
                descriptor.label.clone(),
                StorageMode::Shared,
                descriptor.count,
                "heap entry",
            )?),
            heap_type: descriptor.heap_type,
        })
    }

    /// Bytes of one resolved heap entry of `heap_type`
    /// (`sizeOfCounterHeapEntry`).
    pub fn size_of_counter_heap_entry(&self, heap_type: CounterHeapType) -> usize {
        match heap_type {
            CounterHeapType::Timestamp => CommonCounterSet::Timestamp.result_size(),
        }
    }
}

impl CounterSampleBuffer {
    /// The descriptor's label.
    pub fn label(&self) -> &str {
        &self.inner.label
    }

    /// The number of samples.
    pub fn sample_count(&self) -> u32 {
        self.inner.count
    }

    /// The counter set.
    pub fn counter_set(&self) -> CommonCounterSet {
        self.inner.set
    }

    /// The storage mode.
    pub fn storage_mode(&self) -> StorageMode {
        self.inner.storage
    }

    /// The device the buffer belongs to.
    pub fn device(&self) -> &Device {
        &self.inner.device
    }

    /// Resolves samples on the CPU into Metal's layout (`resolveCounterRange`).
    ///
    /// Never waits and never yields silent zeros: a sample never written, or
    /// whose GPU work has not finished, holds the error value and its status
    /// says which. Fails for private storage or a range past the end.
    ///
    /// Ranges of timestamps of 2^17 samples or more are read from the driver
    /// on several threads (one per 2^16 samples, at most 16 and at most the
    /// machine's cores).
    pub fn resolve_counter_range(&self, range: Range<u64>) -> Result<ResolvedCounters> {
        self.inner.resolve_cpu(range)
    }

    /// [`CounterSampleBuffer::resolve_counter_range`] into `out`, reusing
    /// its memory: a resolve no larger than the last one into `out`
    /// allocates nothing (a fresh result of a million timestamps costs about
    /// 1 ms in page faults on the H200). On error `out` is left empty.
    pub fn resolve_counter_range_into(
        &self,
        range: Range<u64>,
        out: &mut ResolvedCounters,
    ) -> Result<()> {
        self.inner.resolve_cpu_into(range, out)
    }

    /// Resolves the timestamps of `range` into `out` for a caller that
    /// reads each sample once, such as a profiler: the ticks and statuses of
    /// [`Self::resolve_counter_range`], kept as the driver read them when
    /// every sample was written and is complete (no pass lays them out in
    /// Metal's layout first). Fails for samples of another counter set. On
    /// error `out` is left empty.
    pub fn resolve_timestamps_into(
        &self,
        range: Range<u64>,
        out: &mut ResolvedTimestamps,
    ) -> Result<()> {
        self.inner.resolve_timestamps_into(range, out)
    }

    /// Resets every sample to "not written" on the host, so the buffer can be
    /// sampled again.
    ///
    /// Fails at once, never waiting for the GPU, with
    /// [`InvalidInput::SampleIndexReuse`] naming the first such index, while
    /// a sample may still be used by the GPU: its command buffer is still
    /// recording, or was committed and not yet seen finished (its
    /// [`Submission`](crate::Submission) waited for, polled complete, reused
    /// or dropped, [`Device::wait_idle`] returned, or a profiler's frame
    /// marker queued after it signaled), or a caller's command buffer's
    /// query is not available yet; and while a recorded GPU resolve of the
    /// buffer has not finished.
    pub fn reset(&self) -> Result<()> {
        self.inner.reset()
    }

    /// Resets the samples of `range` to "not written" on the host, as
    /// [`CounterSampleBuffer::reset`] does for every sample (one
    /// `vkResetQueryPool` of the range). Fails for a range past the end, and
    /// at once while the GPU may still use one of them (as
    /// [`CounterSampleBuffer::reset`] says).
    pub fn reset_range(&self, range: Range<u64>) -> Result<()> {
        self.inner
            .host_reset_range(&range, "resetting", SlotState::Fresh)
    }
}

/// A Metal 4 counter heap of timestamps (`MTL4CounterHeap`). Cloning shares
/// the heap.
#[derive(Clone)]
pub struct CounterHeap {
    pub(crate) inner: Arc<Samples>,
    heap_type: CounterHeapType,
}

impl std::fmt::Debug for CounterHeap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CounterHeap")
            .field("label", &self.inner.label)
            .field("type", &self.heap_type)
            .field("count", &self.inner.count)
            .finish()
    }
}

impl CounterHeap {
    /// The descriptor's label (`MTL4CounterHeap.label`).
    pub fn label(&self) -> &str {
        &self.inner.label
    }

    /// What the heap holds.
    pub fn heap_type(&self) -> CounterHeapType {
        self.heap_type
    }

    /// Number of entries.
    pub fn count(&self) -> u32 {
        self.inner.count
    }

    /// Bytes of one resolved entry.
    pub fn entry_size(&self) -> usize {
        CommonCounterSet::Timestamp.result_size()
    }

    /// Timestamp ticks per second.
    pub fn timestamp_frequency(&self) -> f64 {
        self.inner.device.timestamp_frequency()
    }

    /// The device the heap belongs to.
    pub fn device(&self) -> &Device {
        &self.inner.device
    }

    /// Resolves entries on the CPU (`resolveCounterRange`): written entries
    /// hold ticks, invalidated entries 0, entries never written or not yet
    /// complete the error value. Large ranges are read on several threads, as
    /// [`CounterSampleBuffer::resolve_counter_range`] says.
    pub fn resolve_counter_range(&self, range: Range<u64>) -> Result<ResolvedCounters> {
        self.inner.resolve_cpu(range)
    }

    /// [`CounterHeap::resolve_counter_range`] into `out`, reusing its
    /// memory (see [`CounterSampleBuffer::resolve_counter_range_into`]).
    pub fn resolve_counter_range_into(
        &self,
        range: Range<u64>,
        out: &mut ResolvedCounters,
    ) -> Result<()> {
        self.inner.resolve_cpu_into(range, out)
    }

    /// Resolves the timestamps of `range` into `out` for a caller that
    /// reads each sample once, such as a profiler: the ticks and statuses of
    /// [`Self::resolve_counter_range`], kept as the driver read them when
    /// every sample was written and is complete (no pass lays them out in
    /// Metal's layout first). Fails for samples of another counter set. On
    /// error `out` is left empty.
    pub fn resolve_timestamps_into(
        &self,
        range: Range<u64>,
        out: &mut ResolvedTimestamps,
    ) -> Result<()> {
        self.inner.resolve_timestamps_into(range, out)
    }

    /// Invalidates entries (`invalidateCounterRange`): they resolve to 0 until
    /// written again. Fails at once while the GPU may still use one of them,
    /// as [`CounterSampleBuffer::reset`] says.
    pub fn invalidate_counter_range(&self, range: Range<u64>) -> Result<()> {
        self.inner
            .host_reset_range(&range, "invalidating", SlotState::Invalidated)
    }
}
