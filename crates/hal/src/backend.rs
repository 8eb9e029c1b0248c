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

    /// The profiler's record of the scopes open on this recorder. Each
    /// recorder holds its own (new and empty when it begins recording), so
    /// that scopes nest per recorder, and their state moves with it between
    /// threads, with no lock shared by every recorder.
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

/// The profiler's state on one recorder, per frame: the innermost scope open
/// on it (the profiler keeps each scope's parent, so this is a whole stack),
/// and the scope ids it claimed from the frame and has not used yet.
/// Backends hold one per recorder and hand it out through
/// [`BackendRecorder::scope_stack`]; only the profiler reads and changes it.
///
/// Frames are told apart by a key unique in the process. A recorder rarely
/// has scopes of more than one frame open, so the first frame's entry is
/// kept inline: a recorder allocates nothing here in the usual case.
///
/// The profiler writes a scope's record without a lock because each id is
/// handed to one recorder only, and a recorder's innermost scope was begun
/// on it. So a stack cannot be cloned, and what changes it is `unsafe`.
#[derive(Debug, Default)]
pub struct ScopeStack {
    first: StackEntry,
    /// Entries of further frames.
    more: Vec<StackEntry>,
}

/// One frame's entry in a [`ScopeStack`]; frame 0 is no entry.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct StackEntry {
    frame: u64,
    innermost: Option<u32>,
    /// Claimed ids not used yet: `next..end`.
    next: u32,
    end: u32,
    /// How many ids the recorder asked for in its last claim (it may have
    /// got fewer).
    block: u32,
}

impl ScopeStack {
    #[inline]
    fn entry(&self, frame: u64) -> Option<&StackEntry> {
        if frame == 0 {
            return None;
        }
        if self.first.frame == frame {
            return Some(&self.first);
        }
        self.more.iter().find(|e| e.frame == frame)
    }

    /// The entry of `frame`, if there is one.
    #[inline]
    fn existing_mut(&mut self, frame: u64) -> Option<&mut StackEntry> {
        if frame == 0 {
            return None;
        }
        if self.first.frame == frame {
            return Some(&mut self.first);
        }
        self.more.iter_mut().find(|e| e.frame == frame)
    }

    /// The entry of `frame`, made if there is none. A new entry takes the
    /// place of one with no scope open (its unused ids are given up).
    #[inline]
    fn entry_mut(&mut self, frame: u64) -> &mut StackEntry {
        if self.first.frame != frame {
            if self.first.innermost.is_some() {
                return self.more_mut(frame);
            }
            if let Some(i) = self.more.iter().position(|e| e.frame == frame) {
                std::mem::swap(&mut self.first, &mut self.more[i]);
            } else {
                self.first = StackEntry {
                    frame,
                    ..StackEntry::default()
                };
            }
        }
        &mut self.first
    }

    #[cold]
    fn more_mut(&mut self, frame: u64) -> &mut StackEntry {
        let fresh = StackEntry {
            frame,
            ..StackEntry::default()
        };
        let i = match self.more.iter().position(|e| e.frame == frame) {
            Some(i) => i,
            None => match self.more.iter().position(|e| e.innermost.is_none()) {
                Some(i) => {
                    self.more[i] = fresh;
                    i
                }
                None => {
                    self.more.push(fresh);
                    self.more.len() - 1
                }
            },
        };
        &mut self.more[i]
    }

    /// The innermost scope open on the recorder in frame `frame`, as the
    /// profiler last set it.
    #[inline]
    pub fn innermost(&self, frame: u64) -> Option<u32> {
        self.entry(frame).and_then(|e| e.innermost)
    }

    /// Sets the innermost open scope of frame `frame` (`None`: no scope of
    /// the frame is open on the recorder). Frame 0 is ignored.
    ///
    /// # Safety
    /// `scope` is a scope of frame `frame` begun on this stack's recorder
    /// (and, once it is set, its record was written): the profiler reads
    /// the record of the innermost scope without a lock.
    #[inline]
    pub unsafe fn set_innermost(&mut self, frame: u64, scope: Option<u32>) {
        if frame == 0 || (scope.is_none() && self.entry(frame).is_none()) {
            return;
        }
        self.entry_mut(frame).innermost = scope;
    }

    /// Ends the innermost scope of frame `frame`, `from`, if it is the
    /// innermost one: sets `outer` in its place and returns true, in one
    /// lookup of the frame's entry; returns false, changing nothing,
    /// otherwise.
    ///
    /// # Safety
    /// As [`ScopeStack::set_innermost`] of `outer`.
    #[inline]
    pub unsafe fn end_innermost(&mut self, frame: u64, from: u32, outer: Option<u32>) -> bool {
        match self.existing_mut(frame) {
            Some(e) if e.innermost == Some(from) => {
                e.innermost = outer;
                true
            }
            _ => false,
        }
    }

    /// Takes the next unused id this recorder claimed from frame `frame`.
    #[inline]
    pub fn take_claimed(&mut self, frame: u64) -> Option<u32> {
        let e = self.existing_mut(frame)?;
        if e.next < e.end {
            e.next += 1;
            Some(e.next - 1)
        } else {
            None
        }
    }

    /// How many ids the recorder asked for when it last claimed from frame
    /// `frame` (0 if it did not).
    #[inline]
    pub fn last_claim(&self, frame: u64) -> u32 {
        self.entry(frame).map_or(0, |e| e.block)
    }

    /// Keeps the ids of `claim`, claimed from frame `frame` when `asked`
    /// were asked for, but its first (which the caller uses), for
    /// [`ScopeStack::take_claimed`], in place of what was left of the last
    /// claim. Frame 0 is ignored.
    ///
    /// # Safety
    /// `claim` was claimed from frame `frame`'s counter for this stack
    /// alone: the profiler writes the record of an id it takes from here
    /// without a lock.
    pub unsafe fn keep_claimed(&mut self, frame: u64, claim: std::ops::Range<u32>, asked: u32) {
        if frame == 0 {
            return;
        }
        let e = self.entry_mut(frame);
        e.block = asked;
        (e.next, e.end) = (claim.start.saturating_add(1), claim.end);
    }

    /// Whether no scope of any frame is open on the recorder (as far as the
    /// profiler set it).
    #[inline]
    pub fn no_open_scopes(&self) -> bool {
        self.first.innermost.is_none() && self.more.iter().all(|e| e.innermost.is_none())
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

    /// Entries per frame: the innermost scope and the claimed ids of each
    /// frame are kept apart, a second frame goes beside the first, and an
    /// entry with no scope open makes room for another frame.
    #[test]
    #[allow(unsafe_code)]
    fn entries_per_frame() {
        let mut s = ScopeStack::default();
        assert_eq!(s.innermost(1), None);
        assert_eq!(s.take_claimed(1), None);
        assert!(s.no_open_scopes());
        // SAFETY: a test of the bookkeeping alone; no records are read.
        unsafe {
            s.keep_claimed(1, 10..14, 4);
            s.set_innermost(1, Some(10));
            s.keep_claimed(2, 20..22, 3);
            s.set_innermost(2, Some(20));
        }
        assert_eq!(s.last_claim(1), 4);
        assert_eq!(s.last_claim(2), 3, "what it asked for");
        assert_eq!((s.take_claimed(1), s.take_claimed(1)), (Some(11), Some(12)));
        assert_eq!((s.take_claimed(2), s.take_claimed(2)), (Some(21), None));
        assert_eq!((s.innermost(1), s.innermost(2)), (Some(10), Some(20)));
        assert!(!s.no_open_scopes());
        // SAFETY: as above.
        unsafe { s.set_innermost(1, None) };
        assert_eq!(s.innermost(1), None);
        // Frame 1 keeps its ids while it has no scope open...
        assert_eq!(s.take_claimed(1), Some(13));
        // SAFETY: as above.
        unsafe {
            s.set_innermost(2, None);
            // ...until a new frame takes its place.
            s.keep_claimed(3, 30..31, 1);
        }
        assert!(s.no_open_scopes());
        assert_eq!(s.take_claimed(3), None, "the first id is the caller's");
        assert_eq!(s.last_claim(3), 1);
        // Frame 0 is no frame.
        // SAFETY: as above.
        unsafe {
            s.set_innermost(0, Some(1));
            s.keep_claimed(0, 0..8, 8);
        }
        assert_eq!((s.innermost(0), s.take_claimed(0)), (None, None));
    }
}
