//! gpu-counters on wgpu: hal's backend interface
//! ([`gpu_counters_hal::Backend`]) over the caller's own [`wgpu::Device`] and
//! [`wgpu::Queue`], recording through wgpu's own query sets.
//!
//! - A counter sample buffer (or heap) is a [`wgpu::QuerySet`] and a hal
//!   [`SampleSet`](gpu_counters_hal::bookkeeping::SampleSet). Raw values come back through `resolve_query_set` into a
//!   buffer, copied into a `MAP_READ` buffer at the end of each submission and
//!   mapped once the submission is done.
//! - wgpu has no availability word and gives 0 for queries never written, so
//!   availability comes from the bookkeeping: a sample is available once the
//!   submission that last wrote it is done and its read-back values arrived.
//!   A sample never written resolves to the error value with
//!   [`gpu_counters_hal::SampleStatus::NotWritten`], never to wgpu's 0; so
//!   does a pass timestamp write handed out and never used by a pass, once
//!   its submission is done (its 0 is read back: no GPU clock reads 0).
//! - [`Recorder`] wraps the caller's [`wgpu::CommandEncoder`]. Between
//!   passes it samples timestamps with `CommandEncoder::write_timestamp`
//!   (needs [`wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS`]); in passes,
//!   [`Recorder::compute_pass_timestamp_writes`] and
//!   [`Recorder::render_pass_timestamp_writes`] hand back the
//!   timestamp-writes struct for the caller's pass descriptor.
//! - Pipeline statistics: the set is offered where the device has
//!   [`wgpu::Features::PIPELINE_STATISTICS_QUERY`], but wgpu only allows
//!   statistics queries inside passes, so sampling them between passes is a
//!   typed error; a pass counts its statistics through
//!   [`Recorder::begin_compute_pass_with_statistics`] (or
//!   [`Recorder::begin_render_pass_with_statistics`]): each counted pass
//!   is a two-sample chain whose `statistics_between(start, end)` is the
//!   pass's work (see [`ComputePass`]).
//! - Profiler scopes: the generic profiler's scopes sample between passes
//!   (encoder timestamps, [`wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS`]).
//!   Scopes timed by a pass's own timestamp writes, as wgpu-profiler's, are
//!   `gpu_counters::wgpu::Profiler`'s (the facade crate, feature `wgpu`):
//!   this crate does not depend on the profiler.
//! - Calibration: a calibrated pair through wgpu-hal's raw device where the
//!   backend has a call for one ([`CalibrationMethod::CalibratedPair`]);
//!   otherwise a bracketed timestamp-only submission. Each path is a feature
//!   (all on by default, as in wgpu) and is compiled where wgpu has the backend:
//!   - `vulkan` (Windows, Linux, Android, FreeBSD): `vkGetCalibratedTimestamps`
//!     of the device domain and the CPU clock's (`CLOCK_MONOTONIC`, or the
//!     performance counter on Windows) with `VK_EXT_calibrated_timestamps`
//!     (or KHR) enabled, a burst of 32 reads keeping the smallest stated
//!     deviation. wgpu does not enable the extension itself:
//!     [`Device::request`] opens a device with it.
//!   - `dx12` (Windows): `ID3D12CommandQueue::GetClockCalibration`, and the
//!     exact period from `GetTimestampFrequency`.
//!   - `metal` (macOS, iOS): `MTLDevice.sampleTimestamps`.
//!
//!   D3D12 and Metal state no bound: each call is bracketed by two CPU clock
//!   reads, and the pair's bound is half that window. The DX12 and Metal
//!   paths are built for their targets in CI but have not yet run on a
//!   device.
//!
//! Every object holds clones of the wgpu handles it uses (wgpu handles are
//! reference counted), so there is no drop order to get wrong.
//!
//! Hostile use:
//!
//! - Another device's object: every sample buffer, heap and recorder keeps
//!   its device's [`gpu_counters_hal::DeviceId`], and every call that takes
//!   two of them refuses another device's with `ForeignObject` before
//!   anything reaches wgpu (a profiler frame checks the recorder itself).
//!   wgpu 30 cannot tell an encoder's device, so [`Device::wrap`] cannot
//!   check one: [`Device::submit`] catches another device's encoder in an
//!   error scope and refuses it (see there).
//! - A leaked pass guard ([`ComputePass`], [`RenderPass`], timed or
//!   counted): the recorder tracks the pass its guards hold open, so
//!   everything after the leak that would record into the locked encoder,
//!   and the submission, is refused with `EncoderState` naming the pass; the
//!   recording, dropped, is abandoned (samples `NotWritten`, profiler scopes
//!   counted as abandoned).

mod backend;
// Calibrated pairs through wgpu-hal's raw device (features `vulkan`, `dx12`,
// `metal`, where wgpu has the backend); elsewhere only wgpu's portable API.
mod calibrated;
mod stats;
mod storage;

pub use backend::{CounterHeap, CounterSampleBuffer, Marker, Wgpu, WorkDone};
pub use stats::{ComputePass, RenderPass};
pub use storage::QuerySetStorage;

use gpu_counters_hal::bookkeeping::{
    LocalClaims, Phase, SampleTable, Ticket, WRITTEN_CONCURRENTLY,
};
use gpu_counters_hal::{
    cpu_monotonic_ns, BackendKind, CalibrationMethod, CommonCounter, CommonCounterSet,
    CounterSamplingPoint, CounterSet, DeviceId, DeviceInfo, DeviceType, Error, InvalidInput,
    Result, TimestampPair,
};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Most queries one sample buffer holds: wgpu's query set limit.
pub const MAX_SAMPLE_COUNT: u32 = wgpu::QUERY_SET_MAX_QUERIES;

/// The statistics wgpu counts, in the order a query's values come back
/// (wgpu's [`wgpu::PipelineStatisticsTypes`] bit order).
const STATISTIC_TYPES: wgpu::PipelineStatisticsTypes = wgpu::PipelineStatisticsTypes::all();

struct Shared {
    /// Tells devices apart, for refusing another device's objects.
    id: DeviceId,
    device: wgpu::Device,
    queue: wgpu::Queue,
    info: DeviceInfo,
    features: wgpu::Features,
    adapter: wgpu::AdapterInfo,
    /// The calibrated-timestamps extension calibration reads through.
    calibrated: Option<calibrated::Extension>,
    /// Its entry point, looked up on the first read.
    calibrated_fn: std::sync::OnceLock<calibrated::Loaded>,
}

/// A wgpu device and queue as a gpu-counters device. Cloning shares it.
#[derive(Clone)]
pub struct Device {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Device")
            .field("name", &self.shared.info.name)
            .field("features", &self.shared.features)
            .finish()
    }
}

fn device_type(t: wgpu::DeviceType) -> DeviceType {
    match t {
        wgpu::DeviceType::DiscreteGpu => DeviceType::DiscreteGpu,
        wgpu::DeviceType::IntegratedGpu => DeviceType::IntegratedGpu,
        wgpu::DeviceType::VirtualGpu => DeviceType::VirtualGpu,
        wgpu::DeviceType::Cpu => DeviceType::Cpu,
        wgpu::DeviceType::Other => DeviceType::Other,
    }
}

/// Maps a failed poll onto hal's errors.
pub(crate) fn poll_err(what: &'static str) -> impl Fn(wgpu::PollError) -> Error {
    move |e| match e {
        wgpu::PollError::Timeout => Error::Internal(format!("{what}: wgpu poll timed out")),
        other => Error::DeviceLost(format!("{what}: {other}")),
    }
}

/// Pops `scope`, which wgpu (on its native backends) has settled by the
/// time it is popped: the error it caught, if any. Where the error is not
/// known at once (wgpu on WebGPU), `None`.
fn pop_error_scope(scope: wgpu::ErrorScopeGuard) -> Option<wgpu::Error> {
    use std::future::Future;
    let mut popped = std::pin::pin!(scope.pop());
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match popped.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(error) => error,
        std::task::Poll::Pending => None,
    }
}

/// Whether wgpu refused a submission because an object in it belongs to
/// another device: the command buffer itself (the queue's check), or, where
/// the encoder is another device's and so finished with an error there, one
/// of this device's objects recorded into it (the encoder's error, reported
/// again by the queue). wgpu-core reports both as a `DeviceMismatch`, nested
/// in error types whose fields are not all public (nor all reachable
/// through `source()`): it is found by that type name in the error's debug
/// form (the tests pin it on wgpu 30). Any other refusal is not another
/// device's object.
fn refused_as_foreign(e: &wgpu::Error) -> bool {
    matches!(e, wgpu::Error::Validation { .. }) && format!("{e:?}").contains("DeviceMismatch")
}

/// Abandons a recording refused at submit: its ticket, and its writes into
/// the storages of `readbacks` (nothing of it runs).
fn abandon(ticket: &Ticket, readbacks: &[(Arc<QuerySetStorage>, storage::Readback)]) {
    ticket.set_phase(Phase::Abandoned);
    for (storage, _) in readbacks {
        if let Ok(mut slots) = storage.samples.lock() {
            slots.abandon(ticket.id());
        }
    }
}

impl Device {
    /// Wraps the caller's `device` and `queue` (of the adapter `adapter_info`
    /// describes). Counter sets are offered where the device has the
    /// features: timestamps with [`wgpu::Features::TIMESTAMP_QUERY`],
    /// statistics with [`wgpu::Features::PIPELINE_STATISTICS_QUERY`].
    pub fn new(device: wgpu::Device, queue: wgpu::Queue, adapter_info: wgpu::AdapterInfo) -> Self {
        let features = device.features();
        let mut counter_sets = Vec::new();
        if features.contains(wgpu::Features::TIMESTAMP_QUERY) {
            counter_sets.push(CounterSet {
                set: CommonCounterSet::Timestamp,
                counters: vec![CommonCounter::Timestamp],
            });
        }
        if features.contains(wgpu::Features::PIPELINE_STATISTICS_QUERY) {
            counter_sets.push(CounterSet {
                set: CommonCounterSet::Statistic,
                counters: vec![
                    CommonCounter::VertexInvocations,
                    CommonCounter::ClipperInvocations,
                    CommonCounter::ClipperPrimitivesOut,
                    CommonCounter::FragmentInvocations,
                    CommonCounter::ComputeKernelInvocations,
                ],
            });
        }
        let mut sampling_points = Vec::new();
        if features.contains(wgpu::Features::TIMESTAMP_QUERY) {
            sampling_points.push(CounterSamplingPoint::AtStageBoundary);
        }
        let probe = calibrated::probe(&device);
        let extension = probe.and_then(|p| p.extension);
        let (calibration, calibration_source) = match extension {
            Some(e) => (CalibrationMethod::CalibratedPair, e.source()),
            None => (CalibrationMethod::Bracketing, "bracketed submission".into()),
        };
        let info = DeviceInfo {
            index: 0,
            name: adapter_info.name.clone(),
            backend: BackendKind::Wgpu,
            device_type: device_type(adapter_info.device_type),
            timestamp_period_ns: probe
                .and_then(|p| p.period_ns)
                .unwrap_or_else(|| f64::from(queue.get_timestamp_period())),
            // Vulkan's queue family says; elsewhere wgpu does not, and its
            // resolve hands back full 64-bit values.
            timestamp_valid_bits: probe
                .and_then(|p| p.valid_bits)
                .filter(|&b| b > 0)
                .unwrap_or(64),
            calibration,
            calibration_source,
            counter_sets,
            sampling_points,
            driver: format!("{} {}", adapter_info.driver, adapter_info.driver_info)
                .trim()
                .to_string(),
            api_version: format!("wgpu 30 on {:?}", adapter_info.backend),
            max_sample_count: MAX_SAMPLE_COUNT,
        };
        Self {
            shared: Arc::new(Shared {
                id: DeviceId::allocate(),
                device,
                queue,
                info,
                features,
                adapter: adapter_info,
                calibrated: extension,
                calibrated_fn: std::sync::OnceLock::new(),
            }),
        }
    }

    /// Requests a device on `adapter` as [`wgpu::Adapter::request_device`]
    /// does, and wraps it. On a Vulkan adapter supporting
    /// `VK_EXT_calibrated_timestamps` (or KHR) the device is opened through
    /// wgpu-hal with that extension enabled too, so calibration is a
    /// calibrated pair; otherwise (another backend, no such extension, or
    /// the wgpu-hal open failing) it is wgpu's plain `request_device`, and
    /// calibration brackets a submission.
    pub async fn request(
        adapter: &wgpu::Adapter,
        desc: &wgpu::DeviceDescriptor<'_>,
    ) -> std::result::Result<Self, wgpu::RequestDeviceError> {
        let (device, queue) = match calibrated::open_with_extension(adapter, desc)? {
            Some(pair) => pair,
            None => adapter.request_device(desc).await?,
        };
        Ok(Self::new(device, queue, adapter.get_info()))
    }

    /// The calibrated-timestamps extension (Vulkan) or call
    /// (`ID3D12CommandQueue::GetClockCalibration`,
    /// `MTLDevice.sampleTimestamps`) calibration reads through, if any
    /// (`None`: calibration brackets a submission).
    pub fn calibrated_timestamps_extension(&self) -> Option<&'static str> {
        self.shared
            .calibrated
            .map(|e| e.name().to_str().unwrap_or("calibrated timestamps"))
    }

    /// A CPU time and a GPU timestamp taken together: a calibrated pair
    /// where the device has a calibration call, else a bracketed submission.
    pub(crate) fn timestamp_pair(&self) -> Result<TimestampPair> {
        self.require(
            wgpu::Features::TIMESTAMP_QUERY,
            "TIMESTAMP_QUERY",
            "calibration needs a GPU timestamp",
        )?;
        match self.shared.calibrated {
            Some(e) => calibrated::read_burst(
                &self.shared.device,
                e,
                self.shared.info.timestamp_valid_bits,
                &self.shared.calibrated_fn,
            ),
            None => self.bracketed_read(),
        }
    }

    /// The wrapped wgpu device.
    pub fn device(&self) -> &wgpu::Device {
        &self.shared.device
    }

    /// The wrapped wgpu queue.
    pub fn queue(&self) -> &wgpu::Queue {
        &self.shared.queue
    }

    /// The adapter's info, as given to [`Device::new`].
    pub fn adapter_info(&self) -> &wgpu::AdapterInfo {
        &self.shared.adapter
    }

    /// The device's wgpu features.
    pub fn features(&self) -> wgpu::Features {
        self.shared.features
    }

    /// Fails with a typed error naming `feature` unless the device has it.
    #[inline]
    pub(crate) fn require(&self, feature: wgpu::Features, name: &str, why: &str) -> Result<()> {
        if self.shared.features.contains(feature) {
            return Ok(());
        }
        self.lacks(name, why)
    }

    #[cold]
    fn lacks(&self, name: &str, why: &str) -> Result<()> {
        Err(InvalidInput::Unsupported(format!(
            "device `{}` lacks wgpu::Features::{name}: {why}",
            self.shared.info.name
        ))
        .into())
    }

    /// A recorder over a new command encoder of this device.
    pub fn recorder(&self, label: Option<&str>) -> Recorder {
        let encoder = self
            .shared
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor { label });
        self.wrap(encoder)
    }

    /// A recorder over the caller's `encoder`, which must be of this
    /// device. wgpu 30 cannot tell which device an encoder belongs to, so
    /// this cannot check it; [`Device::submit`] does (another device's
    /// encoder is refused there with `ForeignObject`, naming the command
    /// encoder).
    pub fn wrap(&self, encoder: wgpu::CommandEncoder) -> Recorder {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        Recorder {
            id: NEXT.fetch_add(1, Ordering::Relaxed),
            device_id: self.shared.id,
            device: self.clone(),
            encoder: Some(encoder),
            pass: Default::default(),
            ticket: Ticket::new(),
            written: Vec::new(),
            claims: LocalClaims::default(),
            conflict: None,
            scope_stack: Default::default(),
        }
    }

    /// Finishes `recorder`'s encoder (with the resolves and read-back copies
    /// of the samples it wrote) and submits it. Its samples become available
    /// once the submission is done and the device was polled
    /// ([`Submission::wait`], or any resolve, which polls without
    /// waiting).
    ///
    /// Refused, with the recording dropped unsubmitted (its samples resolve
    /// `NotWritten`, its profiler scopes are counted as abandoned):
    ///
    /// - another device's recorder: `ForeignObject` naming the recorder,
    ///   before anything reaches wgpu;
    /// - a recorder whose pass guard was leaked (`mem::forget`): wgpu keeps
    ///   its encoder locked, so it cannot be finished; `EncoderState` naming
    ///   the pass, before anything reaches wgpu;
    /// - an encoder wgpu refuses to finish (a pass of the caller's own left
    ///   unended, or another command wgpu found invalid): `EncoderState`
    ///   with wgpu's message, caught in an error scope of this device, so
    ///   the device's error handler never sees it, and nothing is submitted;
    /// - another device's encoder given to [`Device::wrap`]: the queue
    ///   refuses its command buffer, caught in an error scope of this
    ///   device: `ForeignObject` naming the command encoder. wgpu reports
    ///   an error of its own on the encoder's device when the encoder was
    ///   invalid there (one of this device's query sets written into it):
    ///   that error goes to that device's handler, which gpu-counters cannot
    ///   reach.
    pub fn submit(&self, mut recorder: Recorder) -> Result<Submission> {
        self.shared.id.check(recorder.device_id, "recorder")?;
        recorder.pass.check()?;
        let mut encoder = recorder
            .encoder
            .take()
            .ok_or_else(|| Error::Internal("recorder without an encoder".into()))?;
        // The tables learn every write made under a claim, and a write
        // another recording made into a claimed index refuses the
        // submission (the recorder's drop then abandons its writes).
        recorder.release_claims()?;
        let written = std::mem::take(&mut recorder.written);
        let mut readbacks = Vec::with_capacity(written.len());
        for (storage, indices) in written {
            if let Some(rb) = storage.record_readback(&mut encoder, indices, &recorder.ticket) {
                readbacks.push((storage, rb));
            }
        }
        let ticket = recorder.ticket.clone();
        // The recorder is consumed: its drop must not abandon the ticket
        // (a refusal below abandons it).
        ticket.set_phase(Phase::Submitted);
        drop(recorder);
        let d = &self.shared.device;
        let finishing = d.push_error_scope(wgpu::ErrorFilter::Validation);
        let commands = encoder.finish();
        if let Some(e) = pop_error_scope(finishing) {
            abandon(&ticket, &readbacks);
            return Err(InvalidInput::EncoderState(format!(
                "wgpu refused to finish the recording's encoder, so nothing was submitted: {e}"
            ))
            .into());
        }
        let submitting = d.push_error_scope(wgpu::ErrorFilter::Validation);
        let cpu_submit_ns = cpu_monotonic_ns();
        let index = self.shared.queue.submit([commands]);
        if let Some(e) = pop_error_scope(submitting) {
            abandon(&ticket, &readbacks);
            return Err(if refused_as_foreign(&e) {
                InvalidInput::ForeignObject {
                    what: "command encoder",
                }
            } else {
                InvalidInput::Argument(format!("wgpu refused the submission: {e}"))
            }
            .into());
        }
        let mut held: gpu_counters_hal::bookkeeping::Held = Vec::new();
        for (storage, rb) in readbacks {
            storage.start_map(rb);
            held.push(Box::new(storage));
        }
        ticket.hold_until_complete(held);
        let done = ticket.clone();
        self.shared
            .queue
            .on_submitted_work_done(move || done.complete());
        Ok(Submission {
            device: self.clone(),
            index,
            ticket,
            cpu_submit_ns,
        })
    }

    /// A CPU time and a GPU timestamp taken together: one timestamp written
    /// by a submission of its own, between two CPU clock reads (the
    /// submission and the wait for it).
    pub(crate) fn bracketed_read(&self) -> Result<TimestampPair> {
        self.require(
            wgpu::Features::TIMESTAMP_QUERY,
            "TIMESTAMP_QUERY",
            "calibration needs a GPU timestamp",
        )?;
        let d = &self.shared.device;
        let set = d.create_query_set(&wgpu::QuerySetDescriptor {
            label: Some("gpu-counters calibration"),
            ty: wgpu::QueryType::Timestamp,
            count: 1,
        });
        let resolve = d.create_buffer(&wgpu::BufferDescriptor {
            label: Some("gpu-counters calibration resolve"),
            size: 8,
            usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        let read = d.create_buffer(&wgpu::BufferDescriptor {
            label: Some("gpu-counters calibration read-back"),
            size: 8,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut encoder = d.create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some("gpu-counters calibration"),
        });
        if self
            .shared
            .features
            .contains(wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS)
        {
            encoder.write_timestamp(&set, 0);
        } else {
            // An empty pass whose start timestamp is the one read.
            drop(encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("gpu-counters calibration"),
                timestamp_writes: Some(wgpu::ComputePassTimestampWrites {
                    query_set: &set,
                    beginning_of_pass_write_index: Some(0),
                    end_of_pass_write_index: None,
                }),
            }));
        }
        encoder.resolve_query_set(&set, 0..1, &resolve, 0);
        encoder.copy_buffer_to_buffer(&resolve, 0, &read, 0, 8);
        let before = cpu_monotonic_ns();
        let index = self.shared.queue.submit([encoder.finish()]);
        let mapped = Arc::new(std::sync::Mutex::new(None));
        let sink = mapped.clone();
        read.slice(..).map_async(wgpu::MapMode::Read, move |r| {
            if let Ok(mut m) = sink.lock() {
                *m = Some(r);
            }
        });
        d.poll(wgpu::PollType::Wait {
            submission_index: Some(index),
            timeout: None,
        })
        .map_err(poll_err("calibration"))?;
        let after = cpu_monotonic_ns();
        let result = mapped.lock().ok().and_then(|mut m| m.take());
        match result {
            Some(Ok(())) => {}
            Some(Err(e)) => return Err(Error::Internal(format!("calibration map_async: {e}"))),
            None => {
                return Err(Error::Internal(
                    "calibration read-back not mapped after its submission completed".into(),
                ))
            }
        }
        let ticks = {
            let view = read
                .slice(..)
                .get_mapped_range()
                .map_err(|e| Error::Internal(format!("calibration get_mapped_range: {e}")))?;
            let mut b = [0u8; 8];
            b.copy_from_slice(&view[..8]);
            u64::from_ne_bytes(b)
        };
        read.unmap();
        let half = (after - before) / 2;
        Ok(TimestampPair {
            cpu_ns: before + half,
            gpu_ticks: ticks,
            max_deviation_ns: half + (after - before) % 2,
        })
    }
}

/// A submitted recorder's work; holds its query sets and read-back buffers
/// until it is done.
#[derive(Debug)]
pub struct Submission {
    device: Device,
    index: wgpu::SubmissionIndex,
    ticket: Ticket,
    cpu_submit_ns: u64,
}

impl Submission {
    /// [`cpu_monotonic_ns`] just before it was submitted.
    pub fn cpu_submit_ns(&self) -> u64 {
        self.cpu_submit_ns
    }

    /// Whether the GPU finished it, as far as the last poll of the device
    /// saw (any resolve polls; this does not).
    ///
    /// # Errors
    /// None on wgpu; the signature is every backend's.
    pub fn is_done(&self) -> Result<bool> {
        Ok(self.ticket.is_done())
    }

    /// Waits until it finished and its samples' values arrived; returns
    /// [`cpu_monotonic_ns`] right after.
    ///
    /// # Errors
    /// A failed poll (device lost).
    pub fn wait(&self) -> Result<u64> {
        self.device
            .shared
            .device
            .poll(wgpu::PollType::Wait {
                submission_index: Some(self.index.clone()),
                timeout: None,
            })
            .map_err(poll_err("Submission::wait"))?;
        let now = cpu_monotonic_ns();
        if !self.ticket.is_done() {
            // The work-done callback runs in the poll that saw the
            // submission finish; this one did.
            self.ticket.complete();
        }
        Ok(now)
    }
}

/// Records into the caller's [`wgpu::CommandEncoder`], sampling counters
/// between passes and attaching timestamp writes to passes.
pub struct Recorder {
    id: u64,
    /// Its device's id, kept here for the checks of every write.
    device_id: DeviceId,
    device: Device,
    encoder: Option<wgpu::CommandEncoder>,
    /// The pass its guards hold open (see [`stats::PassSlot`]).
    pass: stats::PassSlot,
    ticket: Ticket,
    /// Per storage written: the indices written.
    written: Vec<(Arc<QuerySetStorage>, storage::Written)>,
    /// Blocks of timestamp indices this recording claimed, written without
    /// the bookkeeping lock (see [`gpu_counters_hal::bookkeeping::claim`]).
    claims: LocalClaims,
    /// A write another recording made into an index this one claimed:
    /// refuses the submission.
    conflict: Option<Error>,
    /// The profiler's scopes open on it.
    scope_stack: gpu_counters_hal::ScopeStack,
}

impl Recorder {
    /// The wrapped encoder, for the caller's own commands and passes.
    ///
    /// After a pass guard of this recorder was leaked (`mem::forget`), wgpu
    /// keeps the wrapped encoder locked for ever, and anything recorded
    /// into it is a wgpu error: this then hands out a detached encoder of
    /// the device instead, which is never submitted. What is recorded there
    /// never runs, and [`Device::submit`] refuses the recording, naming
    /// the leaked pass.
    pub fn encoder(&mut self) -> &mut wgpu::CommandEncoder {
        if self.pass.is_open() {
            return self.pass.detached(&self.device.shared.device);
        }
        self.wrapped_encoder()
    }

    /// The wrapped encoder (made anew where `submit` took it: only
    /// `submit` does, consuming the recorder).
    fn wrapped_encoder(&mut self) -> &mut wgpu::CommandEncoder {
        self.encoder.get_or_insert_with(|| {
            self.device
                .shared
                .device
                .create_command_encoder(&wgpu::CommandEncoderDescriptor::default())
        })
    }

    /// Begins a guarded pass labelled `label` (counting `statistics`, if
    /// any): the wrapped encoder to begin it on, and the slot its guard
    /// clears when dropped. The caller checked that no guard was leaked.
    fn guarded(
        &mut self,
        label: &str,
        statistics: Option<stats::Open>,
    ) -> (&mut wgpu::CommandEncoder, &mut stats::PassSlot) {
        self.pass.begin(label, statistics);
        let device = &self.device.shared.device;
        let encoder = self.encoder.get_or_insert_with(|| {
            device.create_command_encoder(&wgpu::CommandEncoderDescriptor::default())
        });
        (encoder, &mut self.pass)
    }

    /// The recording's ticket.
    pub fn ticket(&self) -> &Ticket {
        &self.ticket
    }

    /// Notes timestamp writes of `indices` (one or two, in order) of
    /// `storage` by this recording: without the lock where they are clean
    /// in a block this recording claimed, else hal's `check_write` for
    /// each, then `mark_recorded`, and a claim of the block of the last.
    /// All are checked before any is marked.
    ///
    /// Another device's storage is refused on the locked path, in
    /// [`Recorder::note_writes_with`]: a claim is taken only after a
    /// locked write passed that check, so a claimed write is always of this
    /// device's storage.
    #[inline]
    fn note_writes(&mut self, storage: &Arc<QuerySetStorage>, indices: &[u32]) -> Result<()> {
        if storage.samples.set != CommonCounterSet::Timestamp {
            return Err(self.not_timestamps(storage));
        }
        let claimed = match *indices {
            [i] => self.claims.try_write(&storage.samples, i),
            [i, j] => self.claims.try_write_both(&storage.samples, i, j),
            _ => false,
        };
        if claimed {
            // Noted in `written` and as the storage's latest writes when the
            // claim is released, under the lock (see `release_claim`).
            return Ok(());
        }
        self.note_writes_locked(storage, indices)
    }

    /// Why `storage`, not of timestamps, cannot be written as timestamps
    /// (or that it is another device's).
    #[cold]
    fn not_timestamps(&self, storage: &QuerySetStorage) -> Error {
        if let Err(e) = self.check_device(storage) {
            return e;
        }
        InvalidInput::Unsupported(
            "wgpu pipeline statistics queries can only be begun and ended inside a pass, not between passes or as pass timestamp writes; count a pass with Recorder::begin_compute_pass_with_statistics (or the render one)".into(),
        )
        .into()
    }

    /// Refuses another device's sample buffer or heap (hal's shared
    /// check, naming which of the two it is).
    #[inline]
    pub(crate) fn check_device(&self, storage: &QuerySetStorage) -> Result<()> {
        self.device_id
            .check(storage.device_id, storage.samples.object_name())
    }

    /// [`Recorder::note_writes`] under the bookkeeping lock.
    #[inline(never)]
    fn note_writes_locked(
        &mut self,
        storage: &Arc<QuerySetStorage>,
        indices: &[u32],
    ) -> Result<()> {
        let last = indices.last().copied();
        self.note_writes_with(storage, indices, |slots, claims, ticket| {
            for &i in indices {
                slots.mark_recorded(
                    i,
                    gpu_counters_hal::bookkeeping::NONE,
                    false,
                    ticket.id(),
                    0,
                );
            }
            if let Some(i) = last {
                claims.claim(&storage.samples, slots, i, ticket);
            }
        })
    }

    /// Ends this recording's claim on `storage` (locked into `slots`), if
    /// any, noting a conflict it reports, and noting the writes made under
    /// it in `written` and as the storage's latest writes.
    ///
    /// Under the lock, so that a host reset of a clean index (which a claim
    /// does not revoke) cannot store its "no write" after this recording's
    /// write of the index: the reset either came first, and the write is
    /// the latest, or it saw the write applied to the table and refused.
    fn release_claim(&mut self, storage: &QuerySetStorage, slots: &mut SampleTable) {
        if self.claims.is_empty() {
            return;
        }
        // A claim follows a locked write, which put the storage in
        // `written`.
        let mut written = self
            .written
            .iter_mut()
            .find(|(h, _)| std::ptr::eq(&**h, storage))
            .map(|(_, w)| w);
        let (conflict, id) = (&mut self.conflict, self.ticket.id());
        self.claims
            .release_written(&storage.samples, slots, &self.ticket, |released| {
                if let Some(index) = released.conflict {
                    conflict
                        .get_or_insert_with(|| storage.samples.reuse(index, WRITTEN_CONCURRENTLY));
                }
                if let Some(written) = written.as_deref_mut() {
                    storage.note_claimed_writes(released.first, released.written, id, written);
                }
            });
    }

    /// Ends every claim of this recording, so that the tables know all it
    /// wrote; fails if another recording wrote one of its indices too.
    fn release_claims(&mut self) -> Result<()> {
        if !self.claims.is_empty() {
            for k in 0..self.written.len() {
                let storage = self.written[k].0.clone();
                if !self.claims.holds(&storage.samples) {
                    continue;
                }
                let mut slots = storage.samples.lock()?;
                self.release_claim(&storage, &mut slots);
            }
            // A claim is taken on a storage in `written`; never keep one.
            self.claims.clear();
        }
        match &self.conflict {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    /// Notes writes of `indices` of `storage` by this recording: hal's
    /// `check_write` for each, all before `mark` marks them (under the
    /// bookkeeping's lock, with this recording's claims and ticket, after
    /// its claim on these samples ended); each is read back at the end of
    /// the submission.
    pub(crate) fn note_writes_with(
        &mut self,
        storage: &Arc<QuerySetStorage>,
        indices: &[u32],
        mark: impl FnOnce(&mut SampleTable, &mut LocalClaims, &Ticket),
    ) -> Result<()> {
        self.check_device(storage)?;
        let s = &storage.samples;
        // Writes into one block read the table only there (see hal's
        // `SampleSet::lock_block`): other threads' claims stay theirs.
        let block = gpu_counters_hal::bookkeeping::BLOCK;
        let mut slots = match indices {
            [first, rest @ ..] if rest.iter().all(|i| i / block == first / block) => {
                s.lock_block(*first)?
            }
            _ => s.lock()?,
        };
        // A locked write of this recording into these samples: its claim
        // (whose clean indices this write may change) ends first.
        self.release_claim(storage, &mut slots);
        for &i in indices {
            // wgpu queries need no reset before a write: the dirty flag
            // does not matter here.
            s.check_write(&slots, i, false, self.ticket.id())?;
        }
        let at = match self
            .written
            .iter()
            .position(|(h, _)| Arc::ptr_eq(h, storage))
        {
            Some(at) => at,
            None => {
                slots.register(&self.ticket);
                self.written
                    .push((storage.clone(), storage::Written::new(storage)));
                self.written.len() - 1
            }
        };
        storage.begin_writes(indices, self.ticket.id(), &mut self.written[at].1);
        mark(&mut slots, &mut self.claims, &self.ticket);
        Ok(())
    }

    /// A pass's start and end indices, those present, in that order (in an
    /// array: this runs for every pass).
    #[inline]
    fn pass_indices(start: Option<u32>, end: Option<u32>) -> Result<([u32; 2], usize)> {
        match (start, end) {
            (Some(a), Some(b)) if a == b => Err(Self::same_index(a)),
            (Some(a), Some(b)) => Ok(([a, b], 2)),
            (Some(a), None) | (None, Some(a)) => Ok(([a, 0], 1)),
            (None, None) => Ok(([0, 0], 0)),
        }
    }

    #[cold]
    fn same_index(a: u32) -> Error {
        InvalidInput::Argument(format!(
            "a pass's start and end timestamps are both index {a}"
        ))
        .into()
    }

    /// Checks the feature and does hal's bookkeeping for a pass's start and
    /// end timestamp indices (compute and render passes alike).
    #[inline]
    fn reserve_pass_timestamps(
        &mut self,
        buffer: &CounterSampleBuffer,
        start: Option<u32>,
        end: Option<u32>,
    ) -> Result<()> {
        self.pass.check()?;
        self.device.require(
            wgpu::Features::TIMESTAMP_QUERY,
            "TIMESTAMP_QUERY",
            "pass timestamp writes need it",
        )?;
        let (indices, count) = Self::pass_indices(start, end)?;
        self.note_writes(buffer.storage(), &indices[..count])
    }

    /// The timestamp writes of a compute pass into `buffer[start]` and
    /// `buffer[end]`, for the caller's `ComputePassDescriptor`, after hal's
    /// bookkeeping for both indices. Put it in the pass you record into this
    /// recorder's encoder: an index handed back and never written by a pass
    /// reads as wgpu's 0, which resolves `NotWritten` (the error value) once
    /// the submission is done, never as a value.
    ///
    /// Refused: another device's `buffer` (`ForeignObject`), and any write
    /// while a pass guard of this recorder was leaked (`EncoderState` naming
    /// the pass).
    #[inline]
    pub fn compute_pass_timestamp_writes<'a>(
        &mut self,
        buffer: &'a CounterSampleBuffer,
        start: Option<u32>,
        end: Option<u32>,
    ) -> Result<wgpu::ComputePassTimestampWrites<'a>> {
        self.reserve_pass_timestamps(buffer, start, end)?;
        Ok(wgpu::ComputePassTimestampWrites {
            query_set: &buffer.storage().query_set,
            beginning_of_pass_write_index: start,
            end_of_pass_write_index: end,
        })
    }

    /// As [`Recorder::compute_pass_timestamp_writes`], for a render pass.
    #[inline]
    pub fn render_pass_timestamp_writes<'a>(
        &mut self,
        buffer: &'a CounterSampleBuffer,
        start: Option<u32>,
        end: Option<u32>,
    ) -> Result<wgpu::RenderPassTimestampWrites<'a>> {
        self.reserve_pass_timestamps(buffer, start, end)?;
        Ok(wgpu::RenderPassTimestampWrites {
            query_set: &buffer.storage().query_set,
            beginning_of_pass_write_index: start,
            end_of_pass_write_index: end,
        })
    }

    /// A timestamp into `storage[index]` between passes.
    fn encoder_timestamp(&mut self, storage: &Arc<QuerySetStorage>, index: u32) -> Result<()> {
        self.pass.check()?;
        self.device.require(
            wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS,
            "TIMESTAMP_QUERY_INSIDE_ENCODERS",
            "timestamps between passes need it (pass timestamp writes still work: see Recorder::compute_pass_timestamp_writes)",
        )?;
        self.note_writes(storage, &[index])?;
        let set = storage.query_set.clone();
        self.wrapped_encoder().write_timestamp(&set, index);
        Ok(())
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        // A leaked pass's statistics query: closed first, while its
        // samples are still this recording's (so no other recording's open
        // query is closed).
        self.pass.close_leaked();
        if self.ticket.phase() != Phase::Recording {
            return;
        }
        // Never submitted by gpu-counters: none of it runs. The tables
        // learn every claimed write first, so that they forget them all.
        let _ = self.release_claims();
        self.ticket.set_phase(Phase::Abandoned);
        for (s, _) in &self.written {
            if let Ok(mut slots) = s.samples.lock() {
                slots.abandon(self.ticket.id());
            }
        }
    }
}
