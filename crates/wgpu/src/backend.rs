//! The wgpu crate as a gpu-counters backend ([`gpu_counters_hal::Backend`]).

use crate::storage::Storage;
use crate::{poll_err, Device, Recorder, Submission, MAX_SAMPLE_COUNT, STATISTIC_TYPES};
use gpu_counters_hal::bookkeeping::{SampleSet, SlotState, ABSENT};
use gpu_counters_hal::{
    Backend, BackendDevice, BackendHeap, BackendMarker, BackendRecorder, BackendSampleBuffer,
    BackendSubmission, Calibration, CommonCounterSet, CounterHeapDescriptor,
    CounterSampleBufferDescriptor, DeviceId, DeviceInfo, Error, InvalidInput, ResolvedCounters,
    ResolvedTimestamps, Result, StorageMode, TimestampGranularity, TimestampPair,
};
use std::ops::Range;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

/// The wgpu backend: [`Device`], [`CounterSampleBuffer`], [`CounterHeap`],
/// [`Recorder`] and a work-done callback as the completion marker.
#[derive(Debug, Clone, Copy)]
pub struct Wgpu;

impl Backend for Wgpu {
    type Device = Device;
    type SampleBuffer = CounterSampleBuffer;
    type Heap = CounterHeap;
    type Recorder = Recorder;
    type Marker = Marker;
    type Submission = Submission;
}

/// A counter sample buffer: a wgpu query set. Cloning shares it.
#[derive(Clone)]
pub struct CounterSampleBuffer {
    pub(crate) storage: Arc<Storage>,
}

impl CounterSampleBuffer {
    /// The wgpu query set, for the caller's own pass descriptors (record
    /// through [`Recorder`] so the bookkeeping knows of the writes).
    pub fn query_set(&self) -> &wgpu::QuerySet {
        &self.storage.query_set
    }
}

fn resolve(storage: &Storage, range: Range<u64>) -> Result<ResolvedCounters> {
    storage.harvest()?;
    storage.samples.resolve_cpu(range, storage, None)
}

fn resolve_into(storage: &Storage, range: Range<u64>, out: &mut ResolvedCounters) -> Result<()> {
    // `out` keeps its memory for the resolve (emptied only on an error
    // here; the resolve empties it on its own errors).
    if let Err(e) = storage.harvest() {
        *out = ResolvedCounters::default();
        return Err(e);
    }
    storage.samples.resolve_cpu_into(range, storage, None, out)
}

fn resolve_timestamps_into(
    storage: &Storage,
    range: Range<u64>,
    out: &mut ResolvedTimestamps,
) -> Result<()> {
    if let Err(e) = storage.harvest() {
        out.resolve_laid_out(|_| Err(e))?;
    }
    storage.samples.resolve_timestamps_into(range, storage, out)
}

fn host_reset(
    storage: &Storage,
    range: Range<u64>,
    state: SlotState,
    what: &'static str,
) -> Result<()> {
    storage.harvest()?;
    let s = &storage.samples;
    let (first, count) = s.check_range(&range)?;
    let mut slots = s.lock()?;
    s.check_host_reset(&mut slots, storage, first, count, what)?;
    storage.clear(first, count);
    s.host_reset_table(&mut slots, first, count, state);
    Ok(())
}

impl CounterSampleBuffer {
    /// The number of samples.
    pub fn sample_count(&self) -> u32 {
        self.storage.samples.count
    }

    /// Resolves samples on the CPU into Metal's layout with a status per
    /// sample, never waiting (`resolveCounterRange`): a sample whose
    /// submission is not done yet is [`SampleStatus::NotReady`](gpu_counters_hal::SampleStatus::NotReady).
    ///
    /// # Errors
    /// A range past the end or empty, a device poll that failed.
    pub fn resolve_counter_range(&self, range: Range<u64>) -> Result<ResolvedCounters> {
        resolve(&self.storage, range)
    }

    /// [`CounterSampleBuffer::resolve_counter_range`] into `out`, reusing its
    /// memory. On error `out` is left empty.
    ///
    /// # Errors
    /// As [`CounterSampleBuffer::resolve_counter_range`].
    pub fn resolve_counter_range_into(
        &self,
        range: Range<u64>,
        out: &mut ResolvedCounters,
    ) -> Result<()> {
        resolve_into(&self.storage, range, out)
    }

    /// The ticks and statuses of `range` into `out`, for a caller that
    /// reads each sample once (see [`ResolvedTimestamps`]). On error `out`
    /// is left empty.
    ///
    /// # Errors
    /// As [`CounterSampleBuffer::resolve_counter_range`]; samples of
    /// another counter set than timestamps.
    pub fn resolve_timestamps_into(
        &self,
        range: Range<u64>,
        out: &mut ResolvedTimestamps,
    ) -> Result<()> {
        resolve_timestamps_into(&self.storage, range, out)
    }

    /// Resets every sample to "not written" on the host.
    ///
    /// # Errors
    /// While a sample is still pending on the GPU.
    pub fn reset(&self) -> Result<()> {
        let n = u64::from(self.storage.samples.count);
        host_reset(&self.storage, 0..n, SlotState::Fresh, "reset")
    }

    /// Resets the samples of `range` to "not written" on the host.
    ///
    /// # Errors
    /// A range past the end or empty; while one of its samples is still
    /// pending on the GPU.
    pub fn reset_range(&self, range: Range<u64>) -> Result<()> {
        host_reset(&self.storage, range, SlotState::Fresh, "reset")
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

/// A Metal 4 counter heap of timestamps: a wgpu query set. Cloning shares
/// it.
#[derive(Clone)]
pub struct CounterHeap {
    storage: Arc<Storage>,
}

impl CounterHeap {
    /// The number of entries.
    pub fn count(&self) -> u32 {
        self.storage.samples.count
    }

    /// Resolves entries on the CPU (`resolveCounterRange`): written entries
    /// hold ticks, invalidated ones 0, the rest the error value, each with
    /// its status.
    ///
    /// # Errors
    /// A range past the end or empty, a device poll that failed.
    pub fn resolve_counter_range(&self, range: Range<u64>) -> Result<ResolvedCounters> {
        resolve(&self.storage, range)
    }

    /// [`CounterHeap::resolve_counter_range`] into `out`, reusing its
    /// memory. On error `out` is left empty.
    ///
    /// # Errors
    /// As [`CounterHeap::resolve_counter_range`].
    pub fn resolve_counter_range_into(
        &self,
        range: Range<u64>,
        out: &mut ResolvedCounters,
    ) -> Result<()> {
        resolve_into(&self.storage, range, out)
    }

    /// The ticks and statuses of `range` into `out`, for a caller that
    /// reads each entry once (see [`ResolvedTimestamps`]). On error `out`
    /// is left empty.
    ///
    /// # Errors
    /// As [`CounterHeap::resolve_counter_range`].
    pub fn resolve_timestamps_into(
        &self,
        range: Range<u64>,
        out: &mut ResolvedTimestamps,
    ) -> Result<()> {
        resolve_timestamps_into(&self.storage, range, out)
    }

    /// Invalidates entries (`invalidateCounterRange`): they resolve as
    /// [`SampleStatus::Invalidated`](gpu_counters_hal::SampleStatus::Invalidated), 0.
    ///
    /// # Errors
    /// A range past the end or empty; while an entry is still pending on
    /// the GPU.
    pub fn invalidate_counter_range(&self, range: Range<u64>) -> Result<()> {
        host_reset(&self.storage, range, SlotState::Invalidated, "invalidating")
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

const IDLE: u8 = 0;
const SUBMITTED: u8 = 1;
const SIGNALED: u8 = 2;

/// A completion marker: a `Queue::on_submitted_work_done` callback setting
/// an atomic.
pub struct Marker {
    device: wgpu::Device,
    state: Arc<AtomicU8>,
}

impl BackendMarker for Marker {
    fn is_signaled(&self) -> Result<bool> {
        if self.state.load(Ordering::Acquire) == SUBMITTED {
            // Callbacks run only when the device is polled.
            self.device
                .poll(wgpu::PollType::Poll)
                .map_err(poll_err("marker"))?;
        }
        Ok(self.state.load(Ordering::Acquire) == SIGNALED)
    }

    fn reset(&self) -> Result<()> {
        self.state
            .compare_exchange(SIGNALED, IDLE, Ordering::AcqRel, Ordering::Acquire)
            .map(|_| ())
            .map_err(|_| Error::Internal("marker reset before it signaled".into()))
    }
}

impl BackendRecorder for Recorder {
    type Backend = Wgpu;

    fn recorder_id(&self) -> u64 {
        self.id
    }

    fn device_id(&self) -> DeviceId {
        self.device_id
    }

    fn scope_stack(&mut self) -> &mut gpu_counters_hal::ScopeStack {
        &mut self.scope_stack
    }

    fn sample_counters(
        &mut self,
        buffer: &CounterSampleBuffer,
        index: u32,
        placement: TimestampGranularity,
    ) -> Result<()> {
        Recorder::sample_counters(self, buffer, index, placement)
    }

    fn write_timestamp(
        &mut self,
        granularity: TimestampGranularity,
        heap: &CounterHeap,
        index: u32,
    ) -> Result<()> {
        Recorder::write_timestamp(self, granularity, heap, index)
    }

    fn end_statistics(&mut self) -> Result<()> {
        Recorder::end_statistics(self)
    }

    fn samples_statistics(&self) -> bool {
        // Only a profiled pass's scope, whose pass holds the query.
        self.capture.active
    }
}

impl Recorder {
    /// Samples `buffer[index]` between passes: an encoder timestamp, after
    /// all prior work whatever `placement` says (wgpu has no cheaper one).
    ///
    /// # Errors
    /// Another device's buffer (`ForeignObject`); an index out of range or
    /// already written by this recording; a statistic buffer (wgpu counts
    /// statistics only inside passes: use a counted pass); a device without
    /// `TIMESTAMP_QUERY_INSIDE_ENCODERS`.
    pub fn sample_counters(
        &mut self,
        buffer: &CounterSampleBuffer,
        index: u32,
        _placement: TimestampGranularity,
    ) -> Result<()> {
        if self.capture.active {
            // A profiled pass's scope: the pass writes it.
            return self.capture_sample(buffer, index);
        }
        if buffer.storage.samples.set == CommonCounterSet::Statistic {
            return Err(InvalidInput::Unsupported(
                "wgpu cannot sample pipeline statistics between passes: its pipeline statistics queries can only be begun and ended inside a pass".into(),
            )
            .into());
        }
        // wgpu's encoder timestamps come after all prior work: both
        // placements are the same.
        let storage = buffer.storage.clone();
        self.encoder_timestamp(&storage, index)
    }

    /// Writes a timestamp into `heap[index]` between passes
    /// (`writeTimestamp(granularity:counterHeap:index:)`): after all prior
    /// work with either granularity.
    ///
    /// # Errors
    /// Another device's heap (`ForeignObject`); an index out of range or
    /// already written by this recording; a device without
    /// `TIMESTAMP_QUERY_INSIDE_ENCODERS`.
    pub fn write_timestamp(
        &mut self,
        _granularity: TimestampGranularity,
        heap: &CounterHeap,
        index: u32,
    ) -> Result<()> {
        let storage = heap.storage.clone();
        self.encoder_timestamp(&storage, index)
    }

    /// Ends the recorder's open statistic chain: none is ever open between
    /// passes on wgpu, so this does nothing.
    ///
    /// # Errors
    /// None on wgpu; the signature is every backend's.
    pub fn end_statistics(&mut self) -> Result<()> {
        Ok(())
    }
}

impl Device {
    fn make_storage(
        &self,
        label: String,
        set: CommonCounterSet,
        storage: StorageMode,
        count: u32,
        what: &'static str,
    ) -> Result<Arc<Storage>> {
        let (ty, values, field_map) = match set {
            CommonCounterSet::Timestamp => {
                self.require(
                    wgpu::Features::TIMESTAMP_QUERY,
                    "TIMESTAMP_QUERY",
                    "timestamp sample buffers need it",
                )?;
                (wgpu::QueryType::Timestamp, 1, [ABSENT; 8])
            }
            CommonCounterSet::Statistic => {
                self.require(
                    wgpu::Features::PIPELINE_STATISTICS_QUERY,
                    "PIPELINE_STATISTICS_QUERY",
                    "statistic sample buffers need it",
                )?;
                // CounterResultStatistic's fields from wgpu's values:
                // vertex 0, clipper invocations 1, clipper primitives 2,
                // fragment 3, compute 4; the rest are not counted.
                let map = [ABSENT, 0, ABSENT, 1, 2, 3, ABSENT, 4];
                (
                    wgpu::QueryType::PipelineStatistics(STATISTIC_TYPES),
                    STATISTIC_TYPES.bits().count_ones(),
                    map,
                )
            }
            set => {
                return Err(InvalidInput::UnsupportedCounterSet {
                    set,
                    device: self.info().name.clone(),
                }
                .into())
            }
        };
        let samples = SampleSet::new(label, set, storage, count, field_map, u64::MAX, what)?;
        let query_set = self.device().create_query_set(&wgpu::QuerySetDescriptor {
            label: Some(&samples.label),
            ty,
            count,
        });
        Ok(Arc::new(Storage::new(
            samples,
            query_set,
            (self.device().clone(), self.shared.id),
            values,
        )))
    }
}

impl Device {
    /// Everything gpu-counters reports about the device.
    pub fn info(&self) -> &DeviceInfo {
        &self.shared.info
    }

    /// Makes a counter sample buffer (Metal's `makeCounterSampleBuffer`):
    /// a wgpu query set of timestamps or pipeline statistics.
    ///
    /// # Errors
    /// A sample count of 0 or over [`MAX_SAMPLE_COUNT`]; a counter set the
    /// device does not offer, or whose wgpu feature it lacks.
    pub fn make_counter_sample_buffer(
        &self,
        descriptor: &CounterSampleBufferDescriptor,
    ) -> Result<CounterSampleBuffer> {
        let n = descriptor.checked_sample_count(MAX_SAMPLE_COUNT)?;
        Ok(CounterSampleBuffer {
            storage: self.make_storage(
                descriptor.label.clone(),
                descriptor.counter_set,
                descriptor.storage_mode,
                n,
                "sample",
            )?,
        })
    }

    /// Makes a Metal 4 counter heap of timestamps
    /// (`MTLDevice.makeCounterHeap`).
    ///
    /// # Errors
    /// A count of 0 or over [`MAX_SAMPLE_COUNT`]; a device without
    /// `TIMESTAMP_QUERY`.
    pub fn make_counter_heap(&self, descriptor: &CounterHeapDescriptor) -> Result<CounterHeap> {
        let n = descriptor.count;
        if n == 0 || n > MAX_SAMPLE_COUNT {
            return Err(InvalidInput::HeapCountOutOfRange {
                requested: n,
                limit: MAX_SAMPLE_COUNT,
            }
            .into());
        }
        Ok(CounterHeap {
            storage: self.make_storage(
                format!("timestamp heap of {n}"),
                CommonCounterSet::Timestamp,
                StorageMode::Shared,
                n,
                "heap entry",
            )?,
        })
    }

    /// A CPU time and a GPU timestamp taken together, with the most they
    /// may be apart (Metal's `sampleTimestamps()`): a calibrated pair where
    /// the device has a calibration call, else a bracketed submission.
    ///
    /// # Errors
    /// A device without `TIMESTAMP_QUERY`; a failed read or poll.
    pub fn sample_timestamps(&self) -> Result<TimestampPair> {
        self.timestamp_pair()
    }

    /// A calibration of the device's timestamps onto the CPU clock, from a
    /// fresh pair ([`Device::sample_timestamps`]).
    ///
    /// # Errors
    /// As [`Device::sample_timestamps`].
    pub fn calibration(&self) -> Result<Calibration> {
        BackendDevice::calibration(self)
    }

    /// Adds a fresh pair to `calibration` if it is due for a refit
    /// ([`Calibration::needs_refit`]).
    ///
    /// # Errors
    /// As [`Device::sample_timestamps`]; the calibration is unchanged then.
    pub fn refresh_calibration(&self, calibration: &mut Calibration) -> Result<()> {
        BackendDevice::refresh_calibration(self, calibration)
    }

    /// Waits until the device is idle: every submission finished, and its
    /// samples' values arrived.
    ///
    /// # Errors
    /// A failed poll.
    pub fn wait_idle(&self) -> Result<()> {
        self.device()
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(poll_err("wait_idle"))?;
        Ok(())
    }
}

impl BackendDevice for Device {
    type Backend = Wgpu;

    fn info(&self) -> &DeviceInfo {
        Device::info(self)
    }

    fn device_id(&self) -> DeviceId {
        self.shared.id
    }

    fn queue_name(&self) -> String {
        "wgpu queue".into()
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

    fn make_marker(&self) -> Result<Marker> {
        Ok(Marker {
            device: self.device().clone(),
            state: Arc::new(AtomicU8::new(IDLE)),
        })
    }

    fn submit_marker(&self, marker: &Marker) -> Result<()> {
        marker
            .state
            .compare_exchange(IDLE, SUBMITTED, Ordering::AcqRel, Ordering::Acquire)
            .map_err(|_| Error::Internal("marker submitted while in flight".into()))?;
        let state = marker.state.clone();
        self.queue().on_submitted_work_done(move || {
            state.store(SIGNALED, Ordering::Release);
        });
        Ok(())
    }

    fn wait_idle(&self) -> Result<()> {
        Device::wait_idle(self)
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
