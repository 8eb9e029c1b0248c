//! Counter sample buffers and Metal 4 counter heaps written once for every
//! backend whose samples live in a storage of its own (wgpu's query sets,
//! CUDA's host-mapped words, the fake backend's memory): a backend
//! implements [`SampleStorage`] for its storage, and [`CounterSampleBuffer`]
//! and [`CounterHeap`] over it give the resolves, resets and invalidations,
//! with their checks, and implement [`BackendSampleBuffer`] and
//! [`BackendHeap`].
//!
//! A backend names them for its users:
//!
//! ```ignore
//! pub type CounterSampleBuffer = gpu_counters_hal::storage::CounterSampleBuffer<QueryStorage>;
//! pub type CounterHeap = gpu_counters_hal::storage::CounterHeap<QueryStorage>;
//! ```

use crate::backend::{BackendHeap, BackendSampleBuffer};
use crate::bookkeeping::{QueryRead, SampleSet, SampleTable, SlotState};
use crate::{
    CommonCounterSet, CounterHeapType, ResolvedCounters, ResolvedTimestamps, Result, StorageMode,
};
use std::ops::Range;
use std::sync::Arc;

/// One sample buffer's or heap's storage on a backend: its bookkeeping and
/// the values the GPU wrote, read by hal's CPU resolve ([`QueryRead`]).
pub trait SampleStorage: QueryRead + Send + Sync + 'static {
    /// The bookkeeping of its samples.
    fn samples(&self) -> &SampleSet;

    /// Takes in what the GPU finished, before a resolve or a host reset
    /// reads the storage (a poll of the device, values read back). The
    /// default does nothing.
    ///
    /// # Errors
    /// The backend's, where it could not ask the device.
    fn update(&self) -> Result<()> {
        Ok(())
    }

    /// The backend's own check of a host reset of `first..first+count`,
    /// with the bookkeeping locked, before hal's
    /// ([`SampleSet::check_host_reset`]). The default checks nothing more.
    ///
    /// # Errors
    /// Why the samples cannot be reset now.
    fn check_host_reset(&self, _slots: &SampleTable, _first: u32, _count: u32) -> Result<()> {
        Ok(())
    }

    /// Forgets the values of `first..first+count` on the host (a host reset
    /// or invalidation that was checked), with the bookkeeping locked.
    fn clear(&self, first: u32, count: u32);
}

fn resolve<S: SampleStorage>(storage: &S, range: Range<u64>) -> Result<ResolvedCounters> {
    storage.update()?;
    storage.samples().resolve_cpu(range, storage, None)
}

fn resolve_into<S: SampleStorage>(
    storage: &S,
    range: Range<u64>,
    out: &mut ResolvedCounters,
) -> Result<()> {
    // `out` keeps its memory for the resolve (emptied only on an error
    // here; the resolve empties it on its own errors).
    if let Err(e) = storage.update() {
        *out = ResolvedCounters::default();
        return Err(e);
    }
    storage
        .samples()
        .resolve_cpu_into(range, storage, None, out)
}

fn resolve_timestamps_into<S: SampleStorage>(
    storage: &S,
    range: Range<u64>,
    out: &mut ResolvedTimestamps,
) -> Result<()> {
    if let Err(e) = storage.update() {
        out.resolve_laid_out(|_| Err(e))?;
    }
    storage
        .samples()
        .resolve_timestamps_into(range, storage, out)
}

/// A host reset of `range` to `state` (`what`, for messages), refused while
/// any of it may still be written by the GPU.
fn host_reset<S: SampleStorage>(
    storage: &S,
    range: Range<u64>,
    state: SlotState,
    what: &'static str,
) -> Result<()> {
    let s = storage.samples();
    let (first, count) = s.check_range(&range)?;
    storage.update()?;
    let mut slots = s.lock()?;
    storage.check_host_reset(&slots, first, count)?;
    s.check_host_reset(&mut slots, storage, first, count, what)?;
    storage.clear(first, count);
    s.host_reset_table(&mut slots, first, count, state);
    Ok(())
}

/// A counter sample buffer (Metal's `MTLCounterSampleBuffer`) over a
/// backend's storage. Cloning shares it.
pub struct CounterSampleBuffer<S> {
    storage: Arc<S>,
}

/// A Metal 4 counter heap of timestamps (`MTL4CounterHeap`) over a backend's
/// storage. Cloning shares it.
pub struct CounterHeap<S> {
    storage: Arc<S>,
}

impl<S> Clone for CounterSampleBuffer<S> {
    fn clone(&self) -> Self {
        Self {
            storage: self.storage.clone(),
        }
    }
}

impl<S> Clone for CounterHeap<S> {
    fn clone(&self) -> Self {
        Self {
            storage: self.storage.clone(),
        }
    }
}

impl<S: SampleStorage> std::fmt::Debug for CounterSampleBuffer<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = self.storage.samples();
        f.debug_struct("CounterSampleBuffer")
            .field("label", &s.label)
            .field("counter_set", &s.set)
            .field("sample_count", &s.count)
            .finish()
    }
}

impl<S: SampleStorage> std::fmt::Debug for CounterHeap<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = self.storage.samples();
        f.debug_struct("CounterHeap")
            .field("label", &s.label)
            .field("type", &CounterHeapType::Timestamp)
            .field("count", &s.count)
            .finish()
    }
}

/// The methods a sample buffer and a heap share, written once for both.
macro_rules! shared_methods {
    ($ty:ident) => {
        /// Over `storage`, for the backend that made it.
        pub fn from_storage(storage: Arc<S>) -> Self {
            Self { storage }
        }

        /// Its storage, for the backend that made it.
        pub fn storage(&self) -> &Arc<S> {
            &self.storage
        }

        /// The descriptor's label.
        pub fn label(&self) -> &str {
            &self.storage.samples().label
        }

        /// Resolves samples on the CPU into Metal's layout with a status
        /// per sample, never waiting (`resolveCounterRange`): a sample whose
        /// work is not done yet is
        /// [`SampleStatus::NotReady`](crate::SampleStatus::NotReady), a heap
        /// entry invalidated is
        /// [`SampleStatus::Invalidated`](crate::SampleStatus::Invalidated)
        /// with 0, and one not written the error value.
        ///
        /// # Errors
        /// A range past the end or empty; the backend's error while taking
        /// in finished work (a device poll).
        pub fn resolve_counter_range(&self, range: Range<u64>) -> Result<ResolvedCounters> {
            resolve(&*self.storage, range)
        }

        #[doc = concat!("[`", stringify!($ty), "::resolve_counter_range`] into `out`, reusing")]
        /// its memory. On error `out` is left empty.
        ///
        /// # Errors
        #[doc = concat!("As [`", stringify!($ty), "::resolve_counter_range`].")]
        pub fn resolve_counter_range_into(
            &self,
            range: Range<u64>,
            out: &mut ResolvedCounters,
        ) -> Result<()> {
            resolve_into(&*self.storage, range, out)
        }

        /// The ticks and statuses of `range` into `out`, for a caller that
        /// reads each sample once (see [`ResolvedTimestamps`]). On error
        /// `out` is left empty.
        ///
        /// # Errors
        #[doc = concat!("As [`", stringify!($ty), "::resolve_counter_range`]; samples of")]
        /// another counter set than timestamps.
        pub fn resolve_timestamps_into(
            &self,
            range: Range<u64>,
            out: &mut ResolvedTimestamps,
        ) -> Result<()> {
            resolve_timestamps_into(&*self.storage, range, out)
        }
    };
}

/// The resolves of [`BackendSampleBuffer`] and [`BackendHeap`], written once
/// for both.
macro_rules! backend_resolves {
    () => {
        fn resolve_counter_range(&self, range: Range<u64>) -> Result<ResolvedCounters> {
            resolve(&*self.storage, range)
        }

        fn resolve_counter_range_into(
            &self,
            range: Range<u64>,
            out: &mut ResolvedCounters,
        ) -> Result<()> {
            resolve_into(&*self.storage, range, out)
        }

        fn resolve_timestamps_into(
            &self,
            range: Range<u64>,
            out: &mut ResolvedTimestamps,
        ) -> Result<()> {
            resolve_timestamps_into(&*self.storage, range, out)
        }
    };
}

impl<S: SampleStorage> CounterSampleBuffer<S> {
    shared_methods!(CounterSampleBuffer);

    /// The counter set its samples hold.
    pub fn counter_set(&self) -> CommonCounterSet {
        self.storage.samples().set
    }

    /// Whether the CPU may resolve it.
    pub fn storage_mode(&self) -> StorageMode {
        self.storage.samples().storage
    }

    /// The number of samples.
    pub fn sample_count(&self) -> u32 {
        self.storage.samples().count
    }

    /// Resets every sample to "not written" on the host.
    ///
    /// # Errors
    /// While a sample is still pending on the GPU.
    pub fn reset(&self) -> Result<()> {
        self.reset_range(0..u64::from(self.sample_count()))
    }

    /// Resets the samples of `range` to "not written" on the host.
    ///
    /// # Errors
    /// A range past the end or empty; while one of its samples is still
    /// pending on the GPU.
    pub fn reset_range(&self, range: Range<u64>) -> Result<()> {
        host_reset(&*self.storage, range, SlotState::Fresh, "reset")
    }
}

impl<S: SampleStorage> CounterHeap<S> {
    shared_methods!(CounterHeap);

    /// What the heap holds.
    pub fn heap_type(&self) -> CounterHeapType {
        CounterHeapType::Timestamp
    }

    /// The number of entries.
    pub fn count(&self) -> u32 {
        self.storage.samples().count
    }

    /// Invalidates entries (`invalidateCounterRange`): they resolve as
    /// [`SampleStatus::Invalidated`](crate::SampleStatus::Invalidated), 0.
    ///
    /// # Errors
    /// A range past the end or empty; while an entry is still pending on
    /// the GPU.
    pub fn invalidate_counter_range(&self, range: Range<u64>) -> Result<()> {
        host_reset(
            &*self.storage,
            range,
            SlotState::Invalidated,
            "invalidating",
        )
    }
}

impl<S: SampleStorage> BackendSampleBuffer for CounterSampleBuffer<S> {
    backend_resolves!();

    fn sample_count(&self) -> u32 {
        CounterSampleBuffer::sample_count(self)
    }

    fn reset(&self) -> Result<()> {
        CounterSampleBuffer::reset(self)
    }

    fn reset_range(&self, range: Range<u64>) -> Result<()> {
        CounterSampleBuffer::reset_range(self, range)
    }
}

impl<S: SampleStorage> BackendHeap for CounterHeap<S> {
    backend_resolves!();

    fn count(&self) -> u32 {
        CounterHeap::count(self)
    }

    fn invalidate_counter_range(&self, range: Range<u64>) -> Result<()> {
        CounterHeap::invalidate_counter_range(self, range)
    }
}
