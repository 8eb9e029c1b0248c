//! The wgpu crate as a gpu-counters backend ([`gpu_counters_hal::Backend`]).

use crate::storage::QuerySetStorage;
use crate::{poll_err, Device, Recorder, Submission, MAX_SAMPLE_COUNT, STATISTIC_TYPES};
use gpu_counters_hal::bookkeeping::{SampleSet, ABSENT};
use gpu_counters_hal::marker::{self, MarkerSignal};
use gpu_counters_hal::storage;
use gpu_counters_hal::{
    Backend, BackendDevice, BackendRecorder, BackendSubmission, Calibration, CommonCounterSet,
    CounterHeapDescriptor, CounterSampleBufferDescriptor, DeviceId, DeviceInfo, InvalidInput,
    Result, StorageMode, TimestampGranularity, TimestampPair,
};
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
pub type CounterSampleBuffer = storage::CounterSampleBuffer<QuerySetStorage>;

/// A Metal 4 counter heap of timestamps: a wgpu query set. Cloning shares
/// it.
pub type CounterHeap = storage::CounterHeap<QuerySetStorage>;

/// A completion marker: a `Queue::on_submitted_work_done` callback that
/// signals it.
pub type Marker = marker::Marker<WorkDone>;

/// What signals a wgpu [`Marker`]: the queue's work-done callback, which
/// runs when the device is polled.
pub struct WorkDone {
    device: wgpu::Device,
}

impl MarkerSignal for WorkDone {
    fn poll(&self) -> Result<bool> {
        // Callbacks run only when the device is polled.
        self.device
            .poll(wgpu::PollType::Poll)
            .map_err(poll_err("marker"))?;
        Ok(false)
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
        // wgpu counts statistics only inside passes: a profiler scope
        // between passes is timed without them.
        false
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
        if buffer.counter_set() == CommonCounterSet::Statistic {
            return Err(InvalidInput::Unsupported(
                "wgpu cannot sample pipeline statistics between passes: its pipeline statistics queries can only be begun and ended inside a pass".into(),
            )
            .into());
        }
        // wgpu's encoder timestamps come after all prior work: both
        // placements are the same.
        let storage = buffer.storage().clone();
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
        let storage = heap.storage().clone();
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
    ) -> Result<Arc<QuerySetStorage>> {
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
        Ok(Arc::new(QuerySetStorage::new(
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
        Ok(CounterSampleBuffer::from_storage(self.make_storage(
            descriptor.label.clone(),
            descriptor.counter_set,
            descriptor.storage_mode,
            n,
            "sample",
        )?))
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
        Ok(CounterHeap::from_storage(self.make_storage(
            descriptor.label.clone(),
            CommonCounterSet::Timestamp,
            StorageMode::Shared,
            n,
            "heap entry",
        )?))
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
        Ok(Marker::new(WorkDone {
            device: self.device().clone(),
        }))
    }

    fn submit_marker(&self, marker: &Marker) -> Result<()> {
        marker.submit(|_, flag| {
            let flag = flag.clone();
            self.queue().on_submitted_work_done(move || flag.signal());
            Ok(())
        })
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
