//! A backend on the CPU with scripted work: for testing what sits above hal
//! (the profiler, timelines, exporters) on a machine with no GPU and no
//! Vulkan loader. It is not a GPU mock for checking backends: it records
//! through the same bookkeeping ([`crate::bookkeeping`]) as real backends,
//! and "executes" a submission on the CPU when asked to.
//!
//! - Its GPU clock is the CPU's `CLOCK_MONOTONIC` plus a fixed offset, masked
//!   to the valid bits the device is made with, so converted times fall
//!   inside the CPU window that brackets their execution, exactly.
//! - Its statistic set counts compute kernel invocations only, as scripted
//!   with [`FakeRecorder::dispatch`]; every other field is absent (the error
//!   value).
//! - Submissions run in order when [`FakeSubmission::wait`] or
//!   [`FakeDevice::run_all`] is called, never on their own, so tests can look
//!   at work that is submitted and not yet done.

use crate::backend::{Backend, BackendDevice, BackendRecorder, BackendSubmission};
use crate::bookkeeping::{Phase, QueryRead, SampleSet, SampleTable, Ticket, ABSENT, NONE};
use crate::marker::{Marker, MarkerFlag, MarkerSignal};
use crate::storage::{CounterHeap, CounterSampleBuffer, SampleStorage};
use crate::{
    cpu_monotonic_ns, BackendKind, CalibrationMethod, CommonCounter, CommonCounterSet,
    CounterHeapDescriptor, CounterSampleBufferDescriptor, CounterSamplingPoint, CounterSet,
    DeviceId, DeviceInfo, DeviceType, Error, InvalidInput, Result, TimestampGranularity,
    TimestampPair,
};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// The fake backend.
#[derive(Debug, Clone, Copy)]
pub struct Fake;

impl Backend for Fake {
    type Device = FakeDevice;
    type SampleBuffer = FakeSampleBuffer;
    type Heap = FakeHeap;
    type Recorder = FakeRecorder;
    type Marker = FakeMarker;
    type Submission = FakeSubmission;
}

/// Added to `CLOCK_MONOTONIC` to make the fake GPU clock: GPU ticks never
/// equal CPU nanoseconds, so a missing conversion cannot pass for one.
const CLOCK_OFFSET: u64 = 1_000_000_007;

/// Most samples one fake sample buffer holds.
pub const FAKE_MAX_SAMPLE_COUNT: u32 = 1 << 20;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One command the fake GPU runs.
enum Op {
    Timestamp(Arc<FakeStorage>, u32),
    Begin(Arc<FakeStorage>, u32),
    End(Arc<FakeStorage>, u32),
    Reset(Arc<FakeStorage>, u32),
    Dispatch(u64),
    Marker(MarkerFlag),
    Done(Ticket),
}

struct Gpu {
    /// Compute invocations run so far.
    invocations: u64,
    /// Submitted work not run yet, in submission order, with the number of
    /// the submission each op belongs to.
    queue: VecDeque<(u64, Op)>,
    /// The number the next submission gets.
    next: u64,
    /// Markers submitted so far.
    markers: u64,
}

struct Shared {
    id: DeviceId,
    info: DeviceInfo,
    gpu: Mutex<Gpu>,
    mask: u64,
    /// Added to `CLOCK_MONOTONIC` to make this device's GPU clock.
    offset: u64,
}

/// A fake device. Cloning shares it.
#[derive(Clone)]
pub struct FakeDevice {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for FakeDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeDevice")
            .field("name", &self.shared.info.name)
            .finish()
    }
}

impl FakeDevice {
    /// A fake device named `name` whose timestamps have `valid_bits` bits
    /// (1 to 64), with the timestamp and statistic sets.
    pub fn new(name: &str, valid_bits: u32) -> Result<Self> {
        Self::with_clock_offset(name, valid_bits, CLOCK_OFFSET)
    }

    /// As [`FakeDevice::new`], with the GPU clock `CLOCK_MONOTONIC +
    /// offset` (wrapping, masked to the valid bits): two devices made with
    /// different offsets have clocks that differ, as two GPUs' do, while
    /// both still map exactly onto the CPU clock.
    pub fn with_clock_offset(name: &str, valid_bits: u32, offset: u64) -> Result<Self> {
        if !(1..=64).contains(&valid_bits) {
            return Err(InvalidInput::Argument(format!(
                "valid_bits {valid_bits} is not in 1..=64"
            ))
            .into());
        }
        let info = DeviceInfo {
            index: 0,
            name: name.to_string(),
            backend: BackendKind::Fake,
            device_type: DeviceType::Cpu,
            timestamp_period_ns: 1.0,
            timestamp_valid_bits: valid_bits,
            calibration: CalibrationMethod::Bracketing,
            calibration_source: "the fake clock".into(),
            counter_sets: vec![
                CounterSet {
                    set: CommonCounterSet::Timestamp,
                    counters: vec![CommonCounter::Timestamp],
                },
                CounterSet {
                    set: CommonCounterSet::Statistic,
                    counters: vec![CommonCounter::ComputeKernelInvocations],
                },
            ],
            sampling_points: vec![
                CounterSamplingPoint::AtStageBoundary,
                CounterSamplingPoint::AtDispatchBoundary,
            ],
            driver: "gpu-counters fake backend".into(),
            api_version: "0.0.0".into(),
            max_sample_count: FAKE_MAX_SAMPLE_COUNT,
        };
        Ok(Self {
            shared: Arc::new(Shared {
                id: DeviceId::allocate(),
                info,
                gpu: Mutex::new(Gpu {
                    invocations: 0,
                    queue: VecDeque::new(),
                    next: 1,
                    markers: 0,
                }),
                mask: if valid_bits >= 64 {
                    u64::MAX
                } else {
                    (1u64 << valid_bits) - 1
                },
                offset,
            }),
        })
    }

    /// The storage of `samples`: nothing written.
    fn make_storage(&self, samples: SampleSet) -> Arc<FakeStorage> {
        let n = samples.count as usize;
        Arc::new(FakeStorage {
            samples,
            device_id: self.shared.id,
            data: Mutex::new(vec![0; 2 * n]),
            begun: Mutex::new(vec![0; n]),
        })
    }

    /// The fake GPU clock now.
    fn ticks(&self) -> u64 {
        cpu_monotonic_ns().wrapping_add(self.shared.offset) & self.shared.mask
    }

    /// A recorder, open for recording.
    pub fn recorder(&self) -> FakeRecorder {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        FakeRecorder {
            id: NEXT.fetch_add(1, Ordering::Relaxed),
            device_id: self.shared.id,
            ops: Vec::new(),
            chain: None,
            ticket: Ticket::new(),
            held: Vec::new(),
            submitted: false,
            scope_stack: Default::default(),
        }
    }

    /// Submits `recorder`'s commands (closing its statistic chain first).
    /// They run when the submission is waited for.
    /// Another device's recorder is refused (and, dropped unsubmitted,
    /// abandoned).
    pub fn submit(&self, mut recorder: FakeRecorder) -> Result<FakeSubmission> {
        self.shared.id.check(recorder.device_id, "recorder")?;
        recorder.end_statistics()?;
        recorder.submitted = true;
        recorder.ticket.set_phase(Phase::Submitted);
        let cpu_submit_ns = cpu_monotonic_ns();
        let mut gpu = lock(&self.shared.gpu);
        let number = gpu.next;
        gpu.next += 1;
        for op in std::mem::take(&mut recorder.ops) {
            gpu.queue.push_back((number, op));
        }
        gpu.queue
            .push_back((number, Op::Done(recorder.ticket.clone())));
        Ok(FakeSubmission {
            device: self.clone(),
            number,
            ticket: recorder.ticket.clone(),
            cpu_submit_ns,
        })
    }

    /// How many completion markers were submitted
    /// ([`BackendDevice::submit_marker`]) so far.
    pub fn markers_submitted(&self) -> u64 {
        lock(&self.shared.gpu).markers
    }

    /// Runs every submitted op.
    pub fn run_all(&self) {
        self.run_through(u64::MAX);
    }

    fn run_through(&self, number: u64) {
        let mut gpu = lock(&self.shared.gpu);
        // A marker right behind finished work signals with it, as an empty
        // submission on a real queue would.
        while gpu
            .queue
            .front()
            .is_some_and(|(n, op)| *n <= number || matches!(op, Op::Marker(_)))
        {
            let Some((_, op)) = gpu.queue.pop_front() else {
                break;
            };
            match op {
                Op::Timestamp(s, i) => s.write(i, &[self.ticks()]),
                Op::Begin(s, i) => lock(&s.begun)[i as usize] = gpu.invocations,
                Op::End(s, i) => {
                    let begun = lock(&s.begun)[i as usize];
                    s.write(i, &[gpu.invocations - begun]);
                }
                Op::Reset(s, i) => s.clear_one(i),
                Op::Dispatch(n) => gpu.invocations += n,
                Op::Marker(m) => m.signal(),
                Op::Done(t) => t.complete(),
            }
        }
    }
}

/// A submitted recorder's work.
#[derive(Debug)]
pub struct FakeSubmission {
    device: FakeDevice,
    number: u64,
    /// Its recorder's ticket: done once its ops ran.
    ticket: Ticket,
    cpu_submit_ns: u64,
}

impl FakeSubmission {
    /// `CLOCK_MONOTONIC` just before it was submitted.
    pub fn cpu_submit_ns(&self) -> u64 {
        self.cpu_submit_ns
    }

    /// Whether its ops ran (the fake GPU runs them only when a submission
    /// is waited for, or [`FakeDevice::run_all`]).
    pub fn is_done(&self) -> bool {
        self.ticket.is_done()
    }

    /// Runs everything submitted up to and including this; returns
    /// `CLOCK_MONOTONIC` right after.
    pub fn wait(&self) -> u64 {
        self.device.run_through(self.number);
        cpu_monotonic_ns()
    }
}

/// The fake backend cannot fail to run its work: the trait's results are
/// always `Ok`.
impl BackendSubmission for FakeSubmission {
    fn cpu_submit_ns(&self) -> u64 {
        FakeSubmission::cpu_submit_ns(self)
    }

    fn is_done(&self) -> Result<bool> {
        Ok(FakeSubmission::is_done(self))
    }

    fn wait(&self) -> Result<u64> {
        Ok(FakeSubmission::wait(self))
    }
}

/// Query values and availability of one fake sample buffer or heap.
pub struct FakeStorage {
    samples: SampleSet,
    /// The device it belongs to.
    device_id: DeviceId,
    /// Per query: the value, then the availability word.
    data: Mutex<Vec<u64>>,
    /// Invocations counted when each statistic query began.
    begun: Mutex<Vec<u64>>,
}

impl FakeStorage {
    fn write(&self, index: u32, values: &[u64]) {
        let i = index as usize * 2;
        let mut data = lock(&self.data);
        data[i] = values[0];
        data[i + 1] = 1;
    }

    fn clear_one(&self, index: u32) {
        lock(&self.data)[index as usize * 2 + 1] = 0;
    }
}

/// Nothing to take in (the fake GPU runs only when asked to); a host reset
/// is refused while a submission that wrote the samples is not done.
impl SampleStorage for FakeStorage {
    fn samples(&self) -> &SampleSet {
        &self.samples
    }

    fn check_host_reset(&self, slots: &SampleTable, first: u32, count: u32) -> Result<()> {
        self.samples.check_not_submitted(slots, first, count)
    }

    fn clear(&self, first: u32, count: u32) {
        let mut data = lock(&self.data);
        for i in first as usize..(first + count) as usize {
            data[2 * i + 1] = 0;
        }
    }
}

impl QueryRead for FakeStorage {
    fn values(&self) -> u32 {
        1
    }

    fn read(&self, first: u32, count: u32, out: &mut [u64]) -> Result<()> {
        let data = lock(&self.data);
        let from = first as usize * 2;
        let to = from + count as usize * 2;
        let src = data.get(from..to).ok_or_else(|| {
            Error::Internal(format!("fake read of {first}+{count} past the buffer"))
        })?;
        if out.len() != src.len() {
            return Err(Error::Internal("fake read into a wrong-sized slice".into()));
        }
        out.copy_from_slice(src);
        Ok(())
    }
}

/// A fake counter sample buffer. Cloning shares it.
pub type FakeSampleBuffer = CounterSampleBuffer<FakeStorage>;

/// A fake Metal 4 counter heap of timestamps. Cloning shares it.
pub type FakeHeap = CounterHeap<FakeStorage>;

/// A fake completion marker: signaled when the fake GPU runs past it.
pub type FakeMarker = Marker<FakeSignal>;

/// What signals a [`FakeMarker`]: the fake GPU, when it runs past it.
pub struct FakeSignal;

impl MarkerSignal for FakeSignal {
    fn poll(&self) -> Result<bool> {
        Ok(false)
    }
}

/// Records fake commands.
pub struct FakeRecorder {
    id: u64,
    device_id: DeviceId,
    ops: Vec<Op>,
    /// The open statistic chain: buffer, index, chain id.
    chain: Option<(Arc<FakeStorage>, u32, u64)>,
    ticket: Ticket,
    held: Vec<Arc<FakeStorage>>,
    submitted: bool,
    /// The profiler's scopes open on it.
    scope_stack: crate::ScopeStack,
}

impl FakeRecorder {
    /// Records a dispatch of `invocations` compute kernel invocations.
    pub fn dispatch(&mut self, invocations: u64) {
        self.ops.push(Op::Dispatch(invocations));
    }

    fn hold(&mut self, s: &Arc<FakeStorage>) -> bool {
        if self.held.iter().any(|h| Arc::ptr_eq(h, s)) {
            return false;
        }
        self.held.push(s.clone());
        true
    }
}

impl Drop for FakeRecorder {
    fn drop(&mut self) {
        if self.submitted {
            return;
        }
        // Never submitted: none of it runs.
        self.ticket.set_phase(Phase::Abandoned);
        for s in &self.held {
            if let Ok(mut slots) = s.samples.lock() {
                slots.abandon(self.ticket.id());
            }
        }
    }
}

impl BackendRecorder for FakeRecorder {
    type Backend = Fake;

    fn recorder_id(&self) -> u64 {
        self.id
    }

    fn device_id(&self) -> DeviceId {
        self.device_id
    }

    fn scope_stack(&mut self) -> &mut crate::ScopeStack {
        &mut self.scope_stack
    }

    /// Done when the fake GPU runs past the recording's submission.
    fn ticket(&self) -> Option<&Ticket> {
        Some(&self.ticket)
    }

    fn sample_counters(
        &mut self,
        buffer: &FakeSampleBuffer,
        index: u32,
        _placement: TimestampGranularity,
    ) -> Result<()> {
        self.sample(buffer.storage().clone(), index, "counter sample buffer")
    }

    fn write_timestamp(
        &mut self,
        _granularity: TimestampGranularity,
        heap: &FakeHeap,
        index: u32,
    ) -> Result<()> {
        self.sample(heap.storage().clone(), index, "counter heap")
    }

    fn end_statistics(&mut self) -> Result<()> {
        if let Some((open, i, _)) = self.chain.take() {
            lock(&open.samples.slots).open[i as usize] = false;
            self.ops.push(Op::End(open, i));
        }
        Ok(())
    }
}

impl FakeRecorder {
    /// Records a sample of `s[index]`: a timestamp, or a statistic chain
    /// element. Another device's storage (`what`) is refused.
    fn sample(&mut self, s: Arc<FakeStorage>, index: u32, what: &'static str) -> Result<()> {
        self.device_id.check(s.device_id, what)?;
        let samples = &s.samples;
        let mut slots = samples.lock()?;
        let dirty = samples.check_write(&slots, index, false, self.ticket.id())?;
        if self.hold(&s) {
            slots.register(&self.ticket);
        }
        if dirty {
            slots.note_reset(index, &self.ticket);
            self.ops.push(Op::Reset(s.clone(), index));
        }
        match samples.set {
            CommonCounterSet::Statistic => {
                let (link, chain) = match self.chain.take() {
                    Some((open, i, id)) if Arc::ptr_eq(&open, &s) => {
                        slots.open[i as usize] = false;
                        self.ops.push(Op::End(open, i));
                        (i, id)
                    }
                    Some((open, i, _)) => {
                        lock(&open.samples.slots).open[i as usize] = false;
                        self.ops.push(Op::End(open, i));
                        (NONE, next_chain())
                    }
                    None => (NONE, next_chain()),
                };
                self.ops.push(Op::Begin(s.clone(), index));
                slots.mark_recorded(index, link, false, self.ticket.id(), chain);
                slots.open[index as usize] = true;
                drop(slots);
                self.chain = Some((s, index, chain));
            }
            _ => {
                self.ops.push(Op::Timestamp(s.clone(), index));
                slots.mark_recorded(index, NONE, false, self.ticket.id(), 0);
            }
        }
        Ok(())
    }
}

fn next_chain() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

impl BackendDevice for FakeDevice {
    type Backend = Fake;

    fn info(&self) -> &DeviceInfo {
        &self.shared.info
    }

    fn device_id(&self) -> DeviceId {
        self.shared.id
    }

    fn queue_name(&self) -> String {
        "fake queue".into()
    }

    fn make_counter_sample_buffer(
        &self,
        descriptor: &CounterSampleBufferDescriptor,
    ) -> Result<FakeSampleBuffer> {
        let n = descriptor.checked_sample_count(FAKE_MAX_SAMPLE_COUNT)?;
        let mut field_map = [ABSENT; 8];
        match descriptor.counter_set {
            CommonCounterSet::Timestamp => {}
            CommonCounterSet::Statistic => field_map[7] = 0,
            set => {
                return Err(InvalidInput::UnsupportedCounterSet {
                    set,
                    device: self.shared.info.name.clone(),
                }
                .into())
            }
        }
        Ok(FakeSampleBuffer::from_storage(self.make_storage(
            SampleSet::new(
                descriptor.label.clone(),
                descriptor.counter_set,
                descriptor.storage_mode,
                n,
                field_map,
                self.shared.mask,
                "sample",
            )?,
        )))
    }

    fn make_counter_heap(&self, descriptor: &CounterHeapDescriptor) -> Result<FakeHeap> {
        let n = descriptor.count;
        if n == 0 || n > FAKE_MAX_SAMPLE_COUNT {
            return Err(InvalidInput::HeapCountOutOfRange {
                requested: n,
                limit: FAKE_MAX_SAMPLE_COUNT,
            }
            .into());
        }
        Ok(FakeHeap::from_storage(self.make_storage(SampleSet::new(
            descriptor.label.clone(),
            CommonCounterSet::Timestamp,
            crate::StorageMode::Shared,
            n,
            [ABSENT; 8],
            self.shared.mask,
            "heap entry",
        )?)))
    }

    fn sample_timestamps(&self) -> Result<TimestampPair> {
        // The fake GPU clock is the CPU clock plus an offset: read exactly.
        let cpu = cpu_monotonic_ns();
        Ok(TimestampPair {
            cpu_ns: cpu,
            gpu_ticks: cpu.wrapping_add(self.shared.offset) & self.shared.mask,
            max_deviation_ns: 0,
        })
    }

    fn make_marker(&self) -> Result<FakeMarker> {
        Ok(FakeMarker::new(FakeSignal))
    }

    fn submit_marker(&self, marker: &FakeMarker) -> Result<()> {
        marker.submit(|_, flag| {
            let mut gpu = lock(&self.shared.gpu);
            let number = gpu.next;
            gpu.next += 1;
            gpu.markers += 1;
            gpu.queue.push_back((number, Op::Marker(flag.clone())));
            Ok(())
        })
    }

    fn wait_idle(&self) -> Result<()> {
        self.run_all();
        Ok(())
    }
}
