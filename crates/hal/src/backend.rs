//! The backend interface: what differs per GPU API, as the layers above hal
//! (the profiler, the exporters' timelines, the command line) use it.
//!
//! Like wgpu-hal's `Api`, one trait, [`Backend`], names a backend's types;
//! each type implements a small trait of its own:
//!
//! - [`BackendDevice`]: device info and counter sets, making sample buffers,
//!   a calibration pair (through [`Calibration`]), and completion markers;
//! - [`BackendSampleBuffer`]: a counter sample buffer, resolved on the CPU
//!   into Metal's layout with statuses, and reset;
//! - [`BackendHeap`]: a Metal 4 counter heap of timestamps, resolved and
//!   invalidated;
//! - [`BackendRecorder`]: what commands are recorded into (a Vulkan command
//!   buffer, a wgpu encoder, a CUDA stream's range of work), sampled between
//!   passes at a placement;
//! - [`BackendMarker`]: signals once all work submitted before it finished;
//! - [`BackendSubmission`]: a recorder's submitted work, with its CPU submit
//!   time, polled or waited for.
//!
//! Everything backend-neutral is written once over these: the sample
//! bookkeeping and CPU resolve ([`crate::bookkeeping`]), the calibration math
//! ([`Calibration`]), and the profiler. A backend's own query storage plugs
//! into the bookkeeping through [`crate::bookkeeping::QueryRead`]. The
//! [`crate::fake`] backend implements all of it on the CPU with scripted
//! values, for tests that need no GPU.

use crate::bookkeeping::Ticket;
use crate::{
    Calibration, CounterHeapDescriptor, CounterSampleBufferDescriptor, DeviceId, DeviceInfo,
    ResolvedCounters, ResolvedTimestamps, Result, TimestampGranularity, TimestampPair,
};
use std::any::{Any, TypeId};
use std::ops::Range;

/// A GPU API gpu-counters runs on: the types it brings.
pub trait Backend: Sized + Send + Sync + 'static {
    /// A device and the queue gpu-counters submits to.
    type Device: BackendDevice<Backend = Self>;
    /// A counter sample buffer; cloning shares it.
    type SampleBuffer: BackendSampleBuffer;
    /// A Metal 4 counter heap of timestamps; cloning shares it.
    type Heap: BackendHeap;
    /// What commands are recorded into.
    type Recorder: BackendRecorder<Backend = Self>;
    /// A completion marker on the device's queue.
    type Marker: BackendMarker;
    /// Submitted work: a recorder once it was handed to the device's queue.
    type Submission: BackendSubmission;
}

/// A device, as the layers above hal use it. Cloning shares it.
pub trait BackendDevice: Clone + Send + Sync + std::fmt::Debug + 'static {
    /// The backend it belongs to.
    type Backend: Backend<Device = Self>;

    /// Everything gpu-counters reports about the device.
    fn info(&self) -> &DeviceInfo;

    /// Which device this is: what its objects are checked against
    /// ([`DeviceId::check`]).
    fn device_id(&self) -> DeviceId;

    /// The name of the queue (or stream) work is submitted to, for results.
    fn queue_name(&self) -> String;

    /// Makes a counter sample buffer (Metal's `makeCounterSampleBuffer`).
    fn make_counter_sample_buffer(
        &self,
        descriptor: &CounterSampleBufferDescriptor,
    ) -> Result<<Self::Backend as Backend>::SampleBuffer>;

    /// Makes a Metal 4 counter heap (`MTLDevice.makeCounterHeap`).
    fn make_counter_heap(
        &self,
        descriptor: &CounterHeapDescriptor,
    ) -> Result<<Self::Backend as Backend>::Heap>;

    /// A CPU `CLOCK_MONOTONIC` time and a GPU timestamp taken together,
    /// with the most they may be apart (Metal's `sampleTimestamps()`): the
    /// calibration pair.
    fn sample_timestamps(&self) -> Result<TimestampPair>;

    /// A calibration of the device's timestamps onto the CPU clock, from a
    /// fresh pair; hal's calibration math over the device's period and
    /// valid bits.
    fn calibration(&self) -> Result<Calibration> {
        let info = self.info();
        Calibration::new(
            info.calibration,
            info.timestamp_period_ns,
            info.timestamp_valid_bits,
            self.sample_timestamps()?,
        )
    }

    /// Adds a fresh pair to `calibration` if it is due for a refit.
    fn refresh_calibration(&self, calibration: &mut Calibration) -> Result<()> {
        if calibration.needs_refit(crate::cpu_monotonic_ns()) {
            calibration.add_anchor(self.sample_timestamps()?)?;
        }
        Ok(())
    }

    /// A completion marker, not yet submitted.
    fn make_marker(&self) -> Result<<Self::Backend as Backend>::Marker>;

    /// Queues `marker` behind all work submitted to the device's queue so
    /// far: it signals once that work finished. The marker must not be in
    /// flight already (submitted, and not seen signaled and reset since).
    fn submit_marker(&self, marker: &<Self::Backend as Backend>::Marker) -> Result<()>;

    /// Waits until the device is idle.
    fn wait_idle(&self) -> Result<()>;
}

/// A counter sample buffer (Metal's `MTLCounterSampleBuffer`).
pub trait BackendSampleBuffer: Clone + Send + Sync + 'static {
    /// The number of samples.
    fn sample_count(&self) -> u32;

    /// Resolves samples on the CPU into Metal's layout, never waiting and
    /// never yielding silent zeros (`resolveCounterRange`).
    fn resolve_counter_range(&self, range: Range<u64>) -> Result<ResolvedCounters>;

    /// [`BackendSampleBuffer::resolve_counter_range`] into `out`, reusing
    /// its memory, so that steady-state resolves allocate nothing. On error
    /// `out` is left empty.
    fn resolve_counter_range_into(
        &self,
        range: Range<u64>,
        out: &mut ResolvedCounters,
    ) -> Result<()> {
        *out = ResolvedCounters::default();
        *out = self.resolve_counter_range(range)?;
        Ok(())
    }

    /// Resolves the timestamps of `range` into `out` for a caller that
    /// reads each sample once (see [`ResolvedTimestamps`]): the ticks and
    /// statuses of a `resolve_counter_range` of the range, without laying
    /// out samples that were all written where the backend can. Fails for
    /// samples of another counter set. On error `out` is left empty.
    fn resolve_timestamps_into(
        &self,
        range: Range<u64>,
        out: &mut ResolvedTimestamps,
    ) -> Result<()> {
        out.resolve_laid_out(|laid| self.resolve_counter_range_into(range, laid))
    }

    /// Resets every sample to "not written" on the host; fails while one is
    /// still pending on the GPU.
    fn reset(&self) -> Result<()>;

    /// Resets at least the samples of `range` to "not written" on the host;
    /// fails while one of them (or, for a backend that resets more, any) is
    /// still pending on the GPU, and for a range past the end. The default
    /// is [`BackendSampleBuffer::reset`] of the whole buffer, so only a
    /// caller that owns every sample of the buffer may rely on it (as the
    /// profiler does for its pages).
    fn reset_range(&self, range: Range<u64>) -> Result<()> {
        if range.start >= range.end || range.end > u64::from(self.sample_count()) {
            return Err(crate::InvalidInput::Argument(format!(
                "reset range {range:?} is empty or not inside the buffer's {} samples",
                self.sample_count()
            ))
            .into());
        }
        self.reset()
    }
}

/// A Metal 4 counter heap of timestamps (`MTL4CounterHeap`).
pub trait BackendHeap: Clone + Send + Sync + 'static {
    /// The number of entries.
    fn count(&self) -> u32;

    /// Resolves entries on the CPU: written entries hold ticks, invalidated
    /// ones 0, the rest the error value (`resolveCounterRange`).
    fn resolve_counter_range(&self, range: Range<u64>) -> Result<ResolvedCounters>;

    /// [`BackendHeap::resolve_counter_range`] into `out`, reusing its
    /// memory. On error `out` is left empty.
    fn resolve_counter_range_into(
        &self,
        range: Range<u64>,
        out: &mut ResolvedCounters,
    ) -> Result<()> {
        *out = ResolvedCounters::default();
        *out = self.resolve_counter_range(range)?;
        Ok(())
    }

    /// Resolves the timestamps of `range` into `out` for a caller that
    /// reads each sample once (see [`ResolvedTimestamps`]): the ticks and
    /// statuses of a `resolve_counter_range` of the range, without laying
    /// out samples that were all written where the backend can. Fails for
    /// samples of another counter set. On error `out` is left empty.
    fn resolve_timestamps_into(
        &self,
        range: Range<u64>,
        out: &mut ResolvedTimestamps,
    ) -> Result<()> {
        out.resolve_laid_out(|laid| self.resolve_counter_range_into(range, laid))
    }

    /// Invalidates entries (`invalidateCounterRange`); fails while one is
    /// still pending on the GPU.
    fn invalidate_counter_range(&self, range: Range<u64>) -> Result<()>;
}

/// What commands are recorded into: sampled between passes.
pub trait BackendRecorder {
    /// The backend it belongs to.
    type Backend: Backend<Recorder = Self>;

    /// Tells recorders apart while they record.
    fn recorder_id(&self) -> u64;

    /// The device it records for: a layer above checks it against its own
    /// device's ([`DeviceId::check`]) before recording into it, as the
    /// profiler's frames do.
    fn device_id(&self) -> DeviceId;

    /// What the layer above keeps on this recorder (the profiler: the
    /// scopes open on it). Each recorder holds its own
    /// (`ScopeStack::default()` when it begins recording), so that scopes
    /// nest per recorder, and their state moves with it between threads,
    /// with no lock shared by every recorder. The stack is opaque to the
    /// backend: nothing it does with it can make the layer above unsound.
    fn scope_stack(&mut self) -> &mut ScopeStack;

    /// Samples `buffer[index]` between passes. Timestamps are taken after all
    /// prior work with [`TimestampGranularity::Precise`], at the cheapest
    /// legal placement with `Relaxed`. Statistic samples of one recorder form
    /// one chain, so any end minus start of it is exact.
    fn sample_counters(
        &mut self,
        buffer: &<Self::Backend as Backend>::SampleBuffer,
        index: u32,
        placement: TimestampGranularity,
    ) -> Result<()>;

    /// Writes a timestamp into `heap[index]` between passes
    /// (`writeTimestamp(granularity:counterHeap:index:)`).
    fn write_timestamp(
        &mut self,
        granularity: TimestampGranularity,
        heap: &<Self::Backend as Backend>::Heap,
        index: u32,
    ) -> Result<()>;

    /// Ends the recorder's open statistic chain, if any.
    fn end_statistics(&mut self) -> Result<()>;

    /// Whether [`BackendRecorder::sample_counters`] of a statistic sample
    /// buffer would record here and now. Backends that count statistics only
    /// inside passes (wgpu) say no between passes, so a profiler scope there
    /// is timed without statistics instead of failing.
    fn samples_statistics(&self) -> bool {
        true
    }

    /// The recording's [`Ticket`], where the backend marks it done by itself
    /// once the GPU finished the recording: the profiler then waits on the
    /// tickets of a frame's recorders instead of queueing a completion
    /// marker behind the frame. `None` (the default): the profiler queues a
    /// marker, which costs a submission on some backends (Vulkan).
    ///
    /// A ticket must reach [`Phase::Done`](crate::bookkeeping::Phase::Done)
    /// only once the GPU finished every command the recorder recorded, and
    /// [`Phase::Abandoned`](crate::bookkeeping::Phase::Abandoned) only if
    /// none of them will ever run.
    fn ticket(&self) -> Option<&Ticket> {
        None
    }
}

/// What the layer above keeps on one recorder (the profiler: the scopes
/// open on it and the scope ids it holds), so that it moves with the
/// recorder between threads and takes no lock shared by every recorder.
/// Backends hold one per recorder, made with `Default`, and hand it out
/// through [`BackendRecorder::scope_stack`].
///
/// It is opaque: a layer keeps a value of its own type here
/// ([`ScopeStack::state`]), which only the crate that names the type can
/// read or change. Whatever a backend does with the stack (drops it,
/// swaps it with another recorder's, hands out another), no layer's value
/// can be forged or copied into it, so a layer's soundness rests on its own
/// code alone.
pub struct ScopeStack {
    /// The type of the value kept (`NoState`'s while there is none),
    /// compared without a virtual call.
    kind: TypeId,
    /// The value kept, of type `kind`.
    state: Box<dyn Any + Send + Sync>,
}

/// What a [`ScopeStack`] keeps while it keeps nothing: private, so no
/// caller's type is it, and a zero-sized type, so a new stack allocates
/// nothing.
struct NoState;

impl Default for ScopeStack {
    fn default() -> Self {
        Self {
            kind: TypeId::of::<NoState>(),
            state: Box::new(NoState),
        }
    }
}

impl std::fmt::Debug for ScopeStack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScopeStack")
            .field("holds", &(self.kind != TypeId::of::<NoState>()))
            .finish()
    }
}

impl ScopeStack {
    /// The value of type `T` kept on the recorder, made with `T::default()`
    /// where it holds none, or one of another type (which is dropped: one
    /// layer's value at a time).
    #[inline]
    pub fn state<T: Any + Default + Send + Sync>(&mut self) -> &mut T {
        let value: *mut T = if self.kind == TypeId::of::<T>() {
            let value: *mut (dyn Any + Send + Sync) = &mut *self.state;
            value.cast::<T>()
        } else {
            self.replace::<T>()
        };
        // SAFETY: `value` points into the box `self.state`, which holds a
        // `T`: `kind` is the type id of what it holds (both are written
        // together, by `default` and `replace` only), and it is `T`'s. The
        // box lives, unmoved, as long as `self` is borrowed.
        unsafe { &mut *value }
    }

    /// Keeps a new `T::default()` in place of what the stack held.
    #[cold]
    #[inline(never)]
    fn replace<T: Any + Default + Send + Sync>(&mut self) -> *mut T {
        self.state = Box::new(T::default());
        self.kind = TypeId::of::<T>();
        let value: *mut (dyn Any + Send + Sync) = &mut *self.state;
        value.cast::<T>()
    }
}

/// A recorder's submitted work: when it was submitted on the CPU clock,
/// whether the GPU finished it, and a wait for it. Every backend's
/// `Submission` has these as inherent methods with the same signatures.
pub trait BackendSubmission {
    /// [`cpu_monotonic_ns`](crate::cpu_monotonic_ns) just before the work
    /// was submitted (or, where work starts as it is recorded, as on a CUDA
    /// stream, when recording began): no part of it ran earlier.
    fn cpu_submit_ns(&self) -> u64;

    /// Whether the GPU finished the work, without waiting.
    fn is_done(&self) -> Result<bool>;

    /// Waits until the GPU finished the work and its samples can be
    /// resolved; returns [`cpu_monotonic_ns`](crate::cpu_monotonic_ns)
    /// right after: no part of the work ran later.
    fn wait(&self) -> Result<u64>;
}

/// Signals once all work submitted before it finished
/// ([`BackendDevice::submit_marker`]).
pub trait BackendMarker: Send + Sync + 'static {
    /// Whether it signaled.
    fn is_signaled(&self) -> Result<bool>;

    /// Makes a signaled marker ready to be submitted again.
    fn reset(&self) -> Result<()>;
}

#[cfg(test)]
mod scope_stack_tests {
    use super::ScopeStack;

    #[derive(Default)]
    struct A(u32);
    #[derive(Default)]
    struct B(&'static str);

    /// A stack keeps one value, of one type: asking for another type's
    /// drops it and starts from that type's default.
    #[test]
    fn one_value_per_type_at_a_time() {
        let mut s = ScopeStack::default();
        assert_eq!(s.state::<A>().0, 0);
        s.state::<A>().0 = 7;
        assert_eq!(s.state::<A>().0, 7);
        s.state::<B>().0 = "b";
        assert_eq!(s.state::<B>().0, "b");
        assert_eq!(s.state::<A>().0, 0, "B's value replaced A's");
        assert_eq!(format!("{s:?}"), "ScopeStack { holds: true }");
    }
}
