//! The backend interface on CUDA: sample buffers and heaps over host-mapped
//! memory, recorders over the device's stream, markers as events.

use crate::storage::{MappedStorage, MappedWords};
use crate::{driver_err, kernels, Device, MAX_SAMPLE_COUNT};
use cudarc::driver::CudaEvent;
use gpu_counters_hal::backend::{Backend, BackendDevice, BackendRecorder, BackendSubmission};
use gpu_counters_hal::bookkeeping::{Held, SampleSet, Ticket, ABSENT, NONE};
use gpu_counters_hal::marker::{self, MarkerSignal};
use gpu_counters_hal::storage;
#[cfg(feature = "cupti")]
use gpu_counters_hal::Error;
#[cfg(feature = "cupti")]
use gpu_counters_hal::COUNTER_ERROR_VALUE;
use gpu_counters_hal::{
    cpu_monotonic_ns, Calibration, CommonCounterSet, CounterHeapDescriptor, CounterHeapType,
    CounterSampleBufferDescriptor, DeviceId, DeviceInfo, InvalidInput, Result, StorageMode,
    TimestampGranularity, TimestampPair,
};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The CUDA backend.
#[derive(Debug, Clone, Copy)]
pub struct Cuda;

impl Backend for Cuda {
    type Device = Device;
    type SampleBuffer = CounterSampleBuffer;
    type Heap = CounterHeap;
    type Recorder = Recorder;
    type Marker = Marker;
    type Submission = Submission;
}

/// A counter sample buffer in host-mapped memory. Cloning shares it.
pub type CounterSampleBuffer = storage::CounterSampleBuffer<MappedStorage>;

/// A Metal 4 counter heap of timestamps in host-mapped memory. Cloning
/// shares it.
pub type CounterHeap = storage::CounterHeap<MappedStorage>;

/// A completion marker: an event recorded on the device's stream.
pub type Marker = marker::Marker<StreamEvent>;

/// What signals a CUDA [`Marker`]: an event recorded on the device's
/// stream behind its work.
pub struct StreamEvent {
    event: CudaEvent,
}

impl MarkerSignal for StreamEvent {
    fn poll(&self) -> Result<bool> {
        self.event
            .try_is_complete()
            .map_err(driver_err("cuEventQuery"))
    }
}

/// A range of the device stream's work, from [`Device::recorder`] to
/// [`Device::submit`]: samples are launched on the stream as they are
/// recorded (a stream runs work as it comes), and become available once the
/// range's work is done.
pub struct Recorder {
    id: u64,
    device: Device,
    ticket: Ticket,
    /// The storages written: held until the work is done.
    held: Vec<Arc<MappedStorage>>,
    cpu_start_ns: u64,
    /// Submitted: the drop has nothing left to do.
    submitted: bool,
    /// The open statistic chain element: buffer, index, chain id, and the
    /// stream's count when it was sampled.
    chain: Option<OpenStatistic>,
    /// The profiler's scopes open on it.
    scope_stack: gpu_counters_hal::ScopeStack,
    /// The stage-utilization chain: its range-profiler session and ranges.
    #[cfg(feature = "cupti")]
    stage: Option<StageChain>,
    /// Zero-intrusion: CUPTI's tracing on while the recorder is open.
    #[cfg(feature = "cupti")]
    tracing: Option<crate::activity::Enabled>,
}

/// A recorder's stage-utilization samples: one range-profiler session from
/// the first sample to the end of the recorder's statistics; each sample
/// closes the open user range and opens its own, so an element's query is
/// `sm__cycles_elapsed.max` over the work launched until the next sample.
/// The values are decoded on the CPU when the chain ends (submit), which
/// waits for the context's work.
#[cfg(feature = "cupti")]
struct StageChain {
    session: crate::hardware::Session,
    /// The element whose range is open.
    open: Option<(Arc<MappedStorage>, u32)>,
    /// The chain id of the open element.
    chain: u64,
    /// Range `k` of the session (named `k`) is the query of element
    /// `ranges[k]`.
    ranges: Vec<(Arc<MappedStorage>, u32)>,
}

/// The last statistic sample of a recorder's chain, whose query (what the
/// stream runs from it to the next sample) is written by the next sample or
/// `end_statistics`.
#[cfg_attr(not(feature = "cupti"), allow(dead_code))]
struct OpenStatistic {
    storage: Arc<MappedStorage>,
    index: u32,
    chain: u64,
    #[cfg(feature = "cupti")]
    then: crate::launches::StreamCount,
}

#[cfg(feature = "cupti")]
fn next_chain() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

impl Recorder {
    pub(crate) fn new(device: Device) -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        // Zero-intrusion: tracing on from here. Where CUPTI refuses, the
        // samples resolve as errors (no recorded work), never as zeros.
        #[cfg(feature = "cupti")]
        let tracing = device
            .shared
            .zero
            .as_ref()
            .and_then(|z| z.recorder_tracing())
            .and_then(|t| t.ok());
        Self {
            id: NEXT.fetch_add(1, Ordering::Relaxed),
            device,
            ticket: Ticket::new(),
            held: Vec::new(),
            cpu_start_ns: cpu_monotonic_ns(),
            submitted: false,
            chain: None,
            scope_stack: Default::default(),
            #[cfg(feature = "cupti")]
            stage: None,
            #[cfg(feature = "cupti")]
            tracing,
        }
    }

    /// Zero-intrusion: the recorder's samples stop waiting for later
    /// launches, and tracing is let go (the launches made keep their
    /// records).
    fn end_tracing(&mut self) {
        #[cfg(feature = "cupti")]
        if let Some(z) = &self.device.shared.zero {
            z.close(&self.ticket);
            self.tracing = None;
        }
    }

    /// The stream to launch the measured work on (the device's).
    pub fn stream(&self) -> &Arc<cudarc::driver::CudaStream> {
        &self.device.shared.stream
    }

    /// The recording's ticket.
    pub fn ticket(&self) -> &Ticket {
        &self.ticket
    }

    fn held(&mut self) -> Held {
        std::mem::take(&mut self.held)
            .into_iter()
            .map(|s| Box::new(s) as Box<dyn std::any::Any + Send + Sync>)
            .collect()
    }

    pub(crate) fn submit(mut self) -> Result<Submission> {
        let ended = self.end_statistics();
        self.submitted = true;
        let held = self.held();
        let event = self.device.shared.enqueue(&self.ticket, held);
        self.end_tracing();
        let event = event?;
        ended?;
        Ok(Submission {
            device: self.device.clone(),
            event,
            ticket: self.ticket.clone(),
            cpu_submit_ns: self.cpu_start_ns,
        })
    }

    /// Refuses another device's buffer or heap (hal's shared check).
    #[inline]
    fn check_device(&self, storage: &MappedStorage) -> Result<()> {
        self.device
            .shared
            .id
            .check(storage.device_id, storage.samples.object_name())
    }

    /// Fails unless [`Recorder::timestamp`] of `index` (if any) would
    /// be accepted now; records nothing.
    pub(crate) fn check_timestamp(
        &self,
        storage: &MappedStorage,
        index: Option<u32>,
    ) -> Result<()> {
        let Some(index) = index else {
            return Ok(());
        };
        self.check_device(storage)?;
        let s = &storage.samples;
        let slots = s.lock()?;
        s.check_write(&slots, index, false, self.ticket.id())
            .map(|_| ())
    }

    /// A timestamp of `storage[index]`: a kernel after all prior work on
    /// the stream, or, zero-intrusion, the end of the work before
    /// (`precise`) or the start of the work after (see
    /// [`crate::TimestampSource::Activity`]).
    pub(crate) fn timestamp(
        &mut self,
        storage: &Arc<MappedStorage>,
        index: u32,
        precise: bool,
    ) -> Result<()> {
        self.check_device(storage)?;
        let s = &storage.samples;
        let mut slots = s.lock()?;
        self.prepare_write(storage, &mut slots, index)?;
        #[cfg(feature = "cupti")]
        if let Some(z) = &self.device.shared.zero {
            z.sample(&self.ticket, storage, index, precise);
            slots.mark_recorded(index, NONE, false, self.ticket.id(), 0);
            return Ok(());
        }
        let _ = precise;
        // SAFETY: the two words of sample `index` lie in `storage`'s mapped
        // memory (index checked by check_write), which this recorder holds
        // (just above) and hands to its ticket, released only once an event
        // recorded after this launch completed or the stream was
        // synchronized.
        unsafe {
            kernels::launch_timestamp(
                &self.device.shared.stream,
                &self.device.shared.timestamp,
                storage.words.device_address(2 * index as usize),
            )
        }
        .map_err(driver_err("timestamp kernel launch"))?;
        slots.mark_recorded(index, NONE, false, self.ticket.id(), 0);
        Ok(())
    }
}

impl Recorder {
    /// The hal's checks of a write of `storage[index]` by this recording, and
    /// its bookkeeping: the storage held, a dirty index noted as reset.
    fn prepare_write(
        &mut self,
        storage: &Arc<MappedStorage>,
        slots: &mut gpu_counters_hal::bookkeeping::SampleTable,
        index: u32,
    ) -> Result<()> {
        let dirty = storage
            .samples
            .check_write(slots, index, false, self.ticket.id())?;
        if !self.held.iter().any(|h| Arc::ptr_eq(h, storage)) {
            self.held.push(storage.clone());
            slots.register(&self.ticket);
        }
        if dirty {
            // The launch overwrites both words; until this range is done
            // the old value may still be what is there.
            slots.note_reset(index, &self.ticket);
            // Zero-intrusion: an earlier recording's value still waiting
            // for its record is not this one's.
            #[cfg(feature = "cupti")]
            if let Some(z) = &self.device.shared.zero {
                z.cancel(storage, index, index + 1);
            }
        }
        Ok(())
    }

    /// Writes `value` as `storage[index]`'s query once the stream gets
    /// there (zero-intrusion: the host writes it once the recording's work
    /// is done).
    fn store(&self, storage: &Arc<MappedStorage>, index: u32, value: u64) -> Result<()> {
        #[cfg(feature = "cupti")]
        if let Some(z) = &self.device.shared.zero {
            z.value(&self.ticket, storage, index, value);
            return Ok(());
        }
        // SAFETY: the two words of `index` (checked by the bookkeeping when
        // it was sampled) lie in `storage`'s mapped memory, which this
        // recorder holds and hands to its ticket, released only once an
        // event recorded after this launch completed.
        unsafe {
            kernels::launch_store(
                &self.device.shared.stream,
                &self.device.shared.store,
                storage.words.device_address(2 * index as usize),
                value,
            )
        }
        .map_err(driver_err("statistic kernel launch"))
    }

    /// A statistic sample of `storage[index]`: closes the open chain
    /// element (its query is what the stream launched since) and opens
    /// this one, in the same chain where the buffer and the stream's epoch
    /// are the same.
    #[cfg(feature = "cupti")]
    fn statistic(&mut self, storage: &Arc<MappedStorage>, index: u32) -> Result<()> {
        self.check_device(storage)?;
        let Some(launches) = self.device.shared.launches else {
            return Err(InvalidInput::UnsupportedCounterSet {
                set: CommonCounterSet::Statistic,
                device: self.device.shared.info.name.clone(),
            }
            .into());
        };
        let s = &storage.samples;
        let mut slots = s.lock()?;
        self.prepare_write(storage, &mut slots, index)?;
        let now = launches.count(self.device.shared.stream.cu_stream());
        let mut closed_elsewhere = None;
        let (link, chain) = match self.chain.take() {
            Some(open) => {
                self.store(
                    &open.storage,
                    open.index,
                    now.invocations.wrapping_sub(open.then.invocations),
                )?;
                let same_buffer = Arc::ptr_eq(&open.storage, storage);
                let link = if same_buffer && open.then.epoch == now.epoch {
                    (open.index, open.chain)
                } else {
                    (NONE, next_chain())
                };
                if same_buffer {
                    slots.open[open.index as usize] = false;
                } else {
                    // Another buffer's flag, cleared once this one's lock is
                    // released (never two bookkeeping locks at once).
                    closed_elsewhere = Some(open);
                }
                link
            }
            None => (NONE, next_chain()),
        };
        slots.mark_recorded(index, link, false, self.ticket.id(), chain);
        slots.open[index as usize] = true;
        drop(slots);
        if let Some(open) = closed_elsewhere {
            if let Ok(mut other) = open.storage.samples.lock() {
                other.open[open.index as usize] = false;
            }
        }
        self.chain = Some(OpenStatistic {
            storage: storage.clone(),
            index,
            chain,
            then: now,
        });
        Ok(())
    }

    /// A stage-utilization sample of `storage[index]`: closes the open user
    /// range (the previous element's query) and opens this element's,
    /// starting the recorder's range-profiler session at its first sample.
    #[cfg(feature = "cupti")]
    fn stage_utilization(&mut self, storage: &Arc<MappedStorage>, index: u32) -> Result<()> {
        self.check_device(storage)?;
        let hardware = match &self.device.shared.hardware {
            Ok(h) => h.clone(),
            Err(_) => {
                return Err(InvalidInput::UnsupportedCounterSet {
                    set: CommonCounterSet::StageUtilization,
                    device: self.device.shared.info.name.clone(),
                }
                .into())
            }
        };
        let s = &storage.samples;
        let mut slots = s.lock()?;
        self.prepare_write(storage, &mut slots, index)?;
        if self.stage.is_none() {
            self.stage = Some(StageChain {
                session: hardware.stage_session(crate::hardware::MAX_STAGE_RANGES)?,
                open: None,
                chain: next_chain(),
                ranges: Vec::new(),
            });
        }
        let Some(st) = self.stage.as_mut() else {
            return Err(Error::Internal("stage-utilization chain missing".into()));
        };
        if st.session.pushed() >= st.session.max_ranges() {
            return Err(crate::hardware::HardwareError::TooManyRanges {
                limit: st.session.max_ranges(),
            }
            .into());
        }
        if st.open.is_some() {
            st.session.pop()?;
        }
        // The range is not open any more even if the next push fails.
        let previous = st.open.take();
        st.session.push(&st.ranges.len().to_string())?;
        // Only the CPU writes a stage-utilization query (at the chain's
        // end): until then, nothing old shows as this sample's.
        storage.clear_sample(index);
        let mut closed_elsewhere = None;
        let link = match previous {
            Some((open, i)) if Arc::ptr_eq(&open, storage) => {
                slots.open[i as usize] = false;
                i
            }
            Some(other) => {
                st.chain = next_chain();
                closed_elsewhere = Some(other);
                NONE
            }
            None => NONE,
        };
        slots.mark_recorded(index, link, false, self.ticket.id(), st.chain);
        slots.open[index as usize] = true;
        drop(slots);
        if let Some((other, i)) = closed_elsewhere {
            if let Ok(mut slots) = other.samples.lock() {
                slots.open[i as usize] = false;
            }
        }
        st.ranges.push((storage.clone(), index));
        st.open = Some((storage.clone(), index));
        Ok(())
    }

    /// Ends the stage-utilization chain: closes its range, ends the pass,
    /// waits for the context's work, decodes, and writes each element's
    /// query (the cycles of its range).
    #[cfg(feature = "cupti")]
    fn close_stage(&mut self) -> Result<()> {
        use crate::hardware::{cycles, HardwareError};
        let Some(mut st) = self.stage.take() else {
            return Ok(());
        };
        let mut decode = || -> std::result::Result<_, HardwareError> {
            if st.open.is_some() {
                st.session.pop()?;
            }
            if !st.session.stop()? {
                return Err(HardwareError::Cupti {
                    call: "cuptiRangeProfilerStop",
                    code: 0,
                    result: "asks for another pass of a one-pass config".into(),
                });
            }
            st.session.decode()
        };
        let decoded = decode();
        if let Some((open, i)) = &st.open {
            if let Ok(mut slots) = open.samples.lock() {
                slots.open[*i as usize] = false;
            }
        }
        let (ranges, dropped) = decoded?;
        // Kept, configured, for the next recorder's chain (a 3 ms start).
        st.session.recycle();
        let mut known = vec![false; st.ranges.len()];
        for r in ranges {
            let Ok(k) = r.name.parse::<usize>() else {
                continue;
            };
            let value = r
                .values
                .first()
                .copied()
                .map_or(COUNTER_ERROR_VALUE, cycles);
            if let (Some((storage, i)), false) = (st.ranges.get(k), value == COUNTER_ERROR_VALUE) {
                storage.set_value(*i, value);
                known[k] = true;
            }
        }
        // An element whose query no later element adds (the last of its
        // chain) still resolves without it: its value is the sum of the
        // queries before it. Where CUPTI has no data for its range (an
        // empty one), its query is set to 0, which no value includes.
        for (k, known) in known.iter_mut().enumerate() {
            let (storage, i) = &st.ranges[k];
            let used = st
                .ranges
                .get(k + 1)
                .is_some_and(|next| Arc::ptr_eq(&next.0, storage));
            if !*known && !used {
                storage.set_value(*i, 0);
                *known = true;
            }
        }
        let missing = known.iter().filter(|k| !**k).count();
        if missing > 0 {
            return Err(Error::Internal(format!(
                "CUPTI decoded no data for {missing} of {} stage-utilization ranges ({dropped} dropped): those samples and the later ones of their chains stay not ready",
                st.ranges.len()
            )));
        }
        Ok(())
    }

    /// Closes the open chain element: its query is what the stream
    /// launched since it.
    fn close_chain(&mut self) -> Result<()> {
        let Some(open) = self.chain.take() else {
            return Ok(());
        };
        #[cfg(feature = "cupti")]
        let counted = self
            .device
            .shared
            .launches
            .map(|l| l.count(self.device.shared.stream.cu_stream()))
            .map(|now| now.invocations.wrapping_sub(open.then.invocations));
        #[cfg(not(feature = "cupti"))]
        let counted: Option<u64> = None;
        let stored = match counted {
            Some(v) => self.store(&open.storage, open.index, v),
            None => Ok(()),
        };
        if let Ok(mut slots) = open.storage.samples.lock() {
            slots.open[open.index as usize] = false;
        }
        stored
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        if self.submitted {
            return;
        }
        // Its launches run whatever happens: it is submitted, so that its
        // samples resolve and its storages live until they ran.
        let _ = self.end_statistics();
        let held = self.held();
        let _ = self.device.shared.enqueue(&self.ticket, held);
        self.end_tracing();
    }
}

impl BackendRecorder for Recorder {
    type Backend = Cuda;

    fn recorder_id(&self) -> u64 {
        self.id
    }

    fn device_id(&self) -> DeviceId {
        self.device.shared.id
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
}

impl Recorder {
    /// Samples `buffer[index]` between kernels: a timestamp, the stream's
    /// kernel count (statistics) or its cycles (stage utilization). A
    /// kernel on the stream runs after all prior work, so both placements
    /// are the same, except zero-intrusion, where `placement` picks the
    /// side of the sample. Statistic samples of one recorder form one
    /// chain, so any end minus start of it is exact.
    ///
    /// # Errors
    /// Another device's buffer (`ForeignObject`); an index out of range or
    /// already written by this recording; a launch the driver refused.
    pub fn sample_counters(
        &mut self,
        buffer: &CounterSampleBuffer,
        index: u32,
        placement: TimestampGranularity,
    ) -> Result<()> {
        let storage = buffer.storage().clone();
        match storage.samples.set {
            #[cfg(feature = "cupti")]
            CommonCounterSet::Statistic => self.statistic(&storage, index),
            #[cfg(feature = "cupti")]
            CommonCounterSet::StageUtilization => self.stage_utilization(&storage, index),
            _ => self.timestamp(&storage, index, placement == TimestampGranularity::Precise),
        }
    }

    /// Writes a timestamp into `heap[index]` between kernels
    /// (`writeTimestamp(granularity:counterHeap:index:)`).
    ///
    /// # Errors
    /// Another device's heap (`ForeignObject`); an index out of range or
    /// already written by this recording; a launch the driver refused.
    pub fn write_timestamp(
        &mut self,
        granularity: TimestampGranularity,
        heap: &CounterHeap,
        index: u32,
    ) -> Result<()> {
        let storage = heap.storage().clone();
        self.timestamp(
            &storage,
            index,
            granularity == TimestampGranularity::Precise,
        )
    }

    /// Ends the recorder's open statistic and stage-utilization chains, if
    /// any (submitting does too).
    ///
    /// # Errors
    /// A count or a range-profiler session that could not be read.
    pub fn end_statistics(&mut self) -> Result<()> {
        let statistics = self.close_chain();
        #[cfg(feature = "cupti")]
        let stage = self.close_stage();
        #[cfg(not(feature = "cupti"))]
        let stage: Result<()> = Ok(());
        statistics.and(stage)
    }
}

/// A submitted recorder's range of work.
#[derive(Debug)]
pub struct Submission {
    device: Device,
    event: Arc<CudaEvent>,
    ticket: Ticket,
    cpu_submit_ns: u64,
}

impl Submission {
    /// [`cpu_monotonic_ns`] when its recorder was made: the range's work
    /// may have started from then on (a stream runs work as it is
    /// launched).
    pub fn cpu_submit_ns(&self) -> u64 {
        self.cpu_submit_ns
    }

    /// Whether its work is done.
    ///
    /// # Errors
    /// A driver error while polling.
    pub fn is_done(&self) -> Result<bool> {
        self.device.shared.poll()?;
        Ok(self.ticket.is_done())
    }

    /// Waits until its work is done; returns [`cpu_monotonic_ns`] right
    /// after.
    ///
    /// # Errors
    /// A driver error while synchronizing or polling.
    pub fn wait(&self) -> Result<u64> {
        self.event
            .synchronize()
            .map_err(driver_err("cuEventSynchronize"))?;
        let now = cpu_monotonic_ns();
        self.device.shared.poll()?;
        Ok(now)
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

impl Device {
    fn make_storage(
        &self,
        label: String,
        set: CommonCounterSet,
        field_map: [u8; 8],
        storage: StorageMode,
        count: u32,
        what: &'static str,
    ) -> Result<Arc<MappedStorage>> {
        Ok(Arc::new(MappedStorage {
            samples: SampleSet::new(
                label.clone(),
                set,
                storage,
                count,
                field_map,
                u64::MAX,
                what,
            )?,
            words: MappedWords::new(&self.shared.ctx, 2 * count as usize, &label)?,
            device: Arc::downgrade(&self.shared),
            device_id: self.shared.id,
        }))
    }
}

impl Device {
    /// Everything gpu-counters reports about the device.
    pub fn info(&self) -> &DeviceInfo {
        &self.shared.info
    }

    /// Makes a counter sample buffer (Metal's `makeCounterSampleBuffer`) in
    /// host-mapped memory.
    ///
    /// # Errors
    /// A sample count of 0 or over [`MAX_SAMPLE_COUNT`]; a counter set the
    /// device does not offer (statistics and stage utilization need CUPTI,
    /// and the options that ask for them); out of host-mapped memory.
    pub fn make_counter_sample_buffer(
        &self,
        descriptor: &CounterSampleBufferDescriptor,
    ) -> Result<CounterSampleBuffer> {
        let n = descriptor.checked_sample_count(MAX_SAMPLE_COUNT)?;
        let set = descriptor.counter_set;
        if self.shared.info.counter_set(set).is_none() {
            return Err(InvalidInput::UnsupportedCounterSet {
                set,
                device: self.shared.info.name.clone(),
            }
            .into());
        }
        let mut field_map = [ABSENT; 8];
        match set {
            // compute_kernel_invocations, the one value of its queries.
            CommonCounterSet::Statistic => field_map[7] = 0,
            // total_cycles, likewise.
            CommonCounterSet::StageUtilization => field_map[0] = 0,
            CommonCounterSet::Timestamp => {}
        }
        let storage = self.make_storage(
            descriptor.label.clone(),
            set,
            field_map,
            descriptor.storage_mode,
            n,
            "sample",
        )?;
        Ok(CounterSampleBuffer::from_storage(storage))
    }

    /// Makes a Metal 4 counter heap of timestamps
    /// (`MTLDevice.makeCounterHeap`) in host-mapped memory.
    ///
    /// # Errors
    /// A count of 0 or over [`MAX_SAMPLE_COUNT`]; out of host-mapped
    /// memory.
    pub fn make_counter_heap(&self, descriptor: &CounterHeapDescriptor) -> Result<CounterHeap> {
        let n = descriptor.count;
        if n == 0 || n > MAX_SAMPLE_COUNT {
            return Err(InvalidInput::HeapCountOutOfRange {
                requested: n,
                limit: MAX_SAMPLE_COUNT,
            }
            .into());
        }
        match descriptor.heap_type {
            CounterHeapType::Timestamp => {}
        }
        let storage = self.make_storage(
            descriptor.label.clone(),
            CommonCounterSet::Timestamp,
            [ABSENT; 8],
            StorageMode::Shared,
            n,
            "heap entry",
        )?;
        Ok(CounterHeap::from_storage(storage))
    }

    /// A CPU time and a GPU timestamp taken together, with the most they
    /// may be apart (Metal's `sampleTimestamps()`).
    ///
    /// # Errors
    /// A driver error, or reads too far apart to bound.
    pub fn sample_timestamps(&self) -> Result<TimestampPair> {
        self.shared.sample_timestamps()
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

    /// Waits until the device's stream is idle and its samples resolved.
    ///
    /// # Errors
    /// A driver error while synchronizing or polling.
    pub fn wait_idle(&self) -> Result<()> {
        self.shared
            .stream
            .synchronize()
            .map_err(driver_err("cuStreamSynchronize"))?;
        self.shared.poll()
    }
}

impl BackendDevice for Device {
    type Backend = Cuda;

    fn info(&self) -> &DeviceInfo {
        Device::info(self)
    }

    fn device_id(&self) -> DeviceId {
        self.shared.id
    }

    fn queue_name(&self) -> String {
        format!("{} stream", self.shared.info.name)
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
        let event = self
            .shared
            .ctx
            .new_event(None)
            .map_err(driver_err("cuEventCreate"))?;
        Ok(Marker::new(StreamEvent { event }))
    }

    fn submit_marker(&self, marker: &Marker) -> Result<()> {
        marker.submit(|signal, _| {
            signal
                .event
                .record(&self.shared.stream)
                .map_err(driver_err("cuEventRecord"))
        })
    }

    fn wait_idle(&self) -> Result<()> {
        Device::wait_idle(self)
    }
}
