//! The backend-neutral sample bookkeeping and CPU resolve: what every
//! backend's counter sample buffers and counter heaps share.
//!
//! A backend keeps, per sample buffer or heap, its raw query storage and a
//! [`SampleSet`]: the label, counter set, field layout and the
//! [`SampleTable`] of per-index state. Each index has a state (never written,
//! recorded, invalidated, or an alias of another index for coalesced relaxed
//! timestamps), a generation that grows each time it is recorded again, the
//! [`Ticket`] of the recording that last wrote it, whether its query may hold
//! a value (so the next write resets it first) and whether it is open.
//!
//! Statistic samples are a chain per encoder (or per command recorder):
//! sampling index `i` ends the query of the previous sample `p` and begins
//! query `i`, so query `p` holds what was counted between the two. Sample `i`
//! resolves to the sum of the queries before it in its chain: 0 at the
//! chain's start, and end minus start of two samples of one chain is exactly
//! what the GPU counted between them. Samples of different chains have
//! different origins ([`ResolvedCounters::origin`]) and are not comparable.
//! Stage-utilization samples (where a backend has them, from hardware
//! counters over the ranges between samples) chain the same way.
//!
//! The backend reads raw queries through [`QueryRead`]: per query its values,
//! then an availability word. The CPU resolve turns them into Metal's layout
//! with [`COUNTER_ERROR_VALUE`] and a status for every sample without a value.

/// Defines `$name`, which runs `$body` compiled for AVX2 (as `$twin`)
/// where the CPU has it, and as it is elsewhere: for the loops that
/// baseline x86-64 leaves scalar (it has no 64-bit vector compare).
macro_rules! with_avx2 {
    (
        $(#[$attr:meta])*
        $vis:vis fn $name:ident / $twin:ident = $body:ident($($arg:ident: $ty:ty),*) -> $ret:ty;
    ) => {
        $(#[$attr])*
        $vis fn $name($($arg: $ty),*) -> $ret {
            #[cfg(target_arch = "x86_64")]
            if std::arch::is_x86_feature_detected!("avx2") {
                // SAFETY: the CPU has AVX2 (detected just above), all that
                // an `enable = "avx2"` function needs beyond its safe
                // signature.
                return unsafe { $twin($($arg),*) };
            }
            $body($($arg),*)
        }

        /// The same, compiled for AVX2.
        ///
        /// # Safety
        ///
        /// The CPU must have AVX2.
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx2")]
        $vis unsafe fn $twin($($arg: $ty),*) -> $ret {
            $body($($arg),*)
        }
    };
}

mod claim;
mod pass;
mod resolve;
mod statistics;
mod table;
#[cfg(test)]
mod tests;
mod ticket;

pub use claim::{
    LocalClaims, ReleasedClaim, AHEAD, BLOCK, GROUP, GROUP_INDICES, WRITTEN_CONCURRENTLY,
};
pub use pass::{check_pass_attachments, RelaxedWrites};
pub use table::{SampleTable, SlotState, ABSENT, NONE, OCCLUSION, RECORDED_ELSEWHERE, STILL_OPEN};
use table::{NOT_SUBMITTED, PENDING};
pub use ticket::{Held, Phase, Ticket};

use crate::{
    CommonCounterSet, Error, InvalidInput, ResolvedCounters, ResolvedTimestamps, Result,
    SampleStatus, StorageMode, COUNTER_ERROR_VALUE,
};
use std::mem::MaybeUninit;
use std::ops::Range;
use std::sync::Mutex;

/// A backend's raw query storage, as the CPU resolve reads it.
pub trait QueryRead: Sync {
    /// `u64` values per query, without the availability word.
    fn values(&self) -> u32;

    /// Reads `count` queries from `first` without waiting into `out`, which
    /// holds exactly `count` strides of [`QueryRead::stride`] words: the
    /// values, then the availability word (non-zero when available;
    /// [`QUERY_FAILED`] for a timestamp query that will never have a value).
    /// The values of an unavailable query are unspecified but initialised. May be
    /// called from several threads at once for disjoint ranges.
    fn read(&self, first: u32, count: u32, out: &mut [u64]) -> Result<()>;

    /// `u64` words per query in what [`QueryRead::read`] writes.
    fn stride(&self) -> usize {
        self.values() as usize + 1
    }

    /// [`QueryRead::read`] into `data`, grown as needed (never shrunk, so
    /// steady-state reads allocate nothing).
    fn read_into(&self, first: u32, count: u32, data: &mut Vec<u64>) -> Result<()> {
        let len = count as usize * self.stride();
        if data.len() < len {
            data.resize(len, 0);
        }
        self.read(first, count, &mut data[..len])
    }
}

/// Position of the first index recorded and not seen written (see
/// [`SampleTable::seen`]): a branch-free test per block of 64, so that the
/// common case, none, costs a fraction of an instruction per index.
fn first_unseen(state: &[SlotState], seen: &[bool]) -> Option<usize> {
    const BLOCK: usize = 64;
    let unseen = |s: &SlotState, v: &bool| (*s == SlotState::Recorded) & !*v;
    for (b, (s, v)) in state.chunks(BLOCK).zip(seen.chunks(BLOCK)).enumerate() {
        let any = s
            .iter()
            .zip(v)
            .fold(false, |acc, (s, v)| acc | unseen(s, v));
        if any {
            return s
                .iter()
                .zip(v)
                .position(|(s, v)| unseen(s, v))
                .map(|p| b * BLOCK + p);
        }
    }
    None
}

/// The availability word of a timestamp query that will never have a
/// value (a backend whose samples are filled in by the host, such as CUDA's
/// activity records, knows when one was lost): it resolves as
/// [`SampleStatus::Error`] with the error value, never as data.
pub const QUERY_FAILED: u64 = u64::MAX;

/// The backend-neutral part of one counter sample buffer or heap.
pub struct SampleSet {
    /// The descriptor's label, for messages.
    pub label: String,
    /// The counter set it holds.
    pub set: CommonCounterSet,
    /// Whether the CPU may resolve it.
    pub storage: StorageMode,
    /// The number of samples.
    pub count: u32,
    /// For each field of the set's result struct (`CounterResultStatistic`;
    /// the first 6 for `CounterResultStageUtilization`): its position among
    /// the query's values, [`OCCLUSION`] or [`ABSENT`].
    pub field_map: [u8; 8],
    /// The timestamps' valid bits, as a mask.
    pub valid_mask: u64,
    /// What an index is called in messages: `sample` or `heap entry`.
    pub what: &'static str,
    /// The per-index bookkeeping. Lock it through [`SampleSet::lock`] only,
    /// which applies the writes of claimed blocks first.
    pub slots: Mutex<SampleTable>,
    /// Each block's published written indices (see [`claim`]).
    pub(crate) blocks: std::sync::Arc<[claim::BlockWords]>,
}

impl SampleSet {
    /// A set of `count` samples, all never written. Fails with an
    /// out-of-memory error where the host cannot hold its bookkeeping.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        label: String,
        set: CommonCounterSet,
        storage: StorageMode,
        count: u32,
        field_map: [u8; 8],
        valid_mask: u64,
        what: &'static str,
    ) -> Result<Self> {
        let slots = SampleTable::new(count).ok_or_else(|| {
            Error::OutOfMemory(format!(
                "host memory for the bookkeeping of {count} samples of `{label}`"
            ))
        })?;
        Ok(Self {
            blocks: slots.blocks.clone(),
            label,
            set,
            storage,
            count,
            field_map,
            valid_mask,
            what,
            slots: Mutex::new(slots),
        })
    }

    /// What the set is, as a foreign-object error names it
    /// ([`crate::DeviceId::check`]): `counter heap` for a heap's entries,
    /// `counter sample buffer` otherwise.
    pub fn object_name(&self) -> &'static str {
        if self.what == "heap entry" {
            "counter heap"
        } else {
            "counter sample buffer"
        }
    }

    #[inline]
    /// Locks the bookkeeping, with every write that recordings made into
    /// their claimed blocks so far applied (see [`LocalClaims`]).
    pub fn lock(&self) -> Result<std::sync::MutexGuard<'_, SampleTable>> {
        self.lock_applying(|_| true)
    }

    /// Locks the bookkeeping for a write of `index`, with the writes that
    /// a recording made into its claim on `index`'s block, if any, applied,
    /// and no others: what [`SampleSet::check_write`],
    /// [`SampleTable::mark_recorded`] and [`LocalClaims::claim`] of `index`
    /// read. Anything that reads other indices locks with
    /// [`SampleSet::lock`].
    #[inline]
    pub fn lock_block(&self, index: u32) -> Result<std::sync::MutexGuard<'_, SampleTable>> {
        let block = index / BLOCK;
        self.lock_applying(|c| c.block == block)
    }

    /// Locks the bookkeeping with the claims that `pick` picks applied.
    #[inline]
    fn lock_applying(
        &self,
        pick: impl Fn(&claim::TableClaim) -> bool,
    ) -> Result<std::sync::MutexGuard<'_, SampleTable>> {
        match self.slots.lock() {
            Ok(mut slots) => {
                if !slots.claims.is_empty() {
                    self.apply_claims_where(&mut slots, pick);
                }
                Ok(slots)
            }
            Err(_) => Err(self.poisoned()),
        }
    }

    #[cold]
    fn poisoned(&self) -> Error {
        Error::Internal(format!("`{}` state lock poisoned", self.label))
    }

    #[inline]
    /// Fails unless `index` is inside the set.
    pub fn check_index(&self, index: u32) -> Result<()> {
        if index >= self.count {
            return Err(self.index_out_of_range(index));
        }
        Ok(())
    }

    #[cold]
    fn index_out_of_range(&self, index: u32) -> Error {
        InvalidInput::IndexOutOfRange {
            what: self.what,
            label: self.label.clone(),
            index: index.into(),
            count: self.count.into(),
        }
        .into()
    }

    /// Fails unless `range` is a non-empty range inside the set; returns its
    /// first index and length.
    pub fn check_range(&self, range: &Range<u64>) -> Result<(u32, u32)> {
        if range.start >= range.end || range.end > self.count as u64 {
            return Err(InvalidInput::RangeOutOfBounds {
                label: self.label.clone(),
                start: range.start,
                end: range.end,
                count: self.count,
            }
            .into());
        }
        Ok((range.start as u32, (range.end - range.start) as u32))
    }

    /// Checks that `index` may be written now by the recording of ticket
    /// `ticket_id`; returns whether the index needs a reset first (its query
    /// may hold a value).
    ///
    /// Refused: an index past the end; a statistic index whose query is
    /// still open (being counted); an index last recorded by another
    /// recording that is still open (submitted after this one, its write
    /// would hit a query this one did not reset); a dirty index inside a
    /// render pass (`in_render_pass`), where it cannot be reset.
    #[inline]
    pub fn check_write(
        &self,
        slots: &SampleTable,
        index: u32,
        in_render_pass: bool,
        ticket_id: u64,
    ) -> Result<bool> {
        self.check_index(index)?;
        let i = index as usize;
        let prev = slots.rec[i];
        if prev != 0 && prev != ticket_id && slots.still_recording(prev) {
            return Err(self.reuse(index, RECORDED_ELSEWHERE));
        }
        if slots.open[i] {
            return Err(self.reuse(index, STILL_OPEN));
        }
        let dirty = slots.dirty[i];
        if dirty && in_render_pass {
            return Err(self.reuse(index, "was already written since the last reset, and it cannot be reset inside a render pass; reset the buffer or use another index"));
        }
        Ok(dirty)
    }

    #[cold]
    /// The error for an index that cannot be written or reset now, and why.
    pub fn reuse(&self, index: u32, reason: &'static str) -> Error {
        InvalidInput::SampleIndexReuse {
            label: self.label.clone(),
            index,
            reason,
        }
        .into()
    }

    /// Fails unless `first..first+count` may be reset on the host now: no
    /// index is pending on the GPU (see [`SampleSet::first_pending`]) and no
    /// GPU resolve of these samples is recorded and unfinished.
    pub fn check_host_reset(
        &self,
        slots: &mut SampleTable,
        main: &dyn QueryRead,
        first: u32,
        count: u32,
        what: &'static str,
    ) -> Result<()> {
        if slots.pending_gpu_resolve() {
            return Err(InvalidInput::EncoderState(format!(
                "`{}`: a GPU resolve of it is recorded and has not finished; wait for its submission (or signal the completion of a caller's command buffer) before {what}",
                self.label
            ))
            .into());
        }
        if let Some((index, reason)) = self.first_pending(slots, main, first, count)? {
            return Err(self.reuse(index, reason));
        }
        Ok(())
    }

    /// Fails when an index of `first..first+count` was last written or reset
    /// by a recording that was submitted and is not seen finished yet: the
    /// GPU may still use it, whatever its query's availability says, and a
    /// host reset must wait until the submission is seen finished (waited
    /// for, polled, or its backend's completion marker signalled). Asks the
    /// driver nothing, so it never waits, on drivers whose query reads wait
    /// for the GPU too. For backends whose submissions' tickets complete
    /// once their work is seen done; call it before
    /// [`SampleSet::check_host_reset`].
    pub fn check_not_submitted(&self, slots: &SampleTable, first: u32, count: u32) -> Result<()> {
        match slots.first_submitted(first as usize..(first + count) as usize) {
            Some(i) => Err(self.reuse(i as u32, PENDING)),
            None => Ok(()),
        }
    }

    /// The first index of `first..first+count` whose query the GPU may still
    /// use, and why: recorded in a command buffer not submitted yet, recorded
    /// and not available yet, or re-recorded after an inline reset the GPU
    /// may not have executed yet.
    pub fn first_pending(
        &self,
        slots: &mut SampleTable,
        main: &dyn QueryRead,
        first: u32,
        count: u32,
    ) -> Result<Option<(u32, &'static str)>> {
        let range = first as usize..(first + count) as usize;
        // Only indices recorded and not yet seen written by a CPU resolve
        // need the driver's word on their availability (a query once
        // available stays so until it is reset, and every write or reset
        // clears `seen`).
        let ask = |i: usize| slots.state[i] == SlotState::Recorded && !slots.seen[i];
        let recording = slots.any_recording();
        let Some(first_asked) =
            first_unseen(&slots.state[range.clone()], &slots.seen[range.clone()])
        else {
            // Nothing to ask the driver about: only a recording still open
            // or an inline reset not yet executed can make an index pending.
            if !recording && slots.tickets == 0 {
                return Ok(None);
            }
            return Ok(range.clone().find_map(|i| {
                let s = i as u32;
                if recording && slots.still_recording(slots.rec[i]) {
                    Some((s, NOT_SUBMITTED))
                } else if slots.stale(i) {
                    Some((s, PENDING))
                } else {
                    None
                }
            }));
        };
        let (lo, hi) = match range.clone().rev().find(|&i| ask(i)) {
            Some(hi) => ((first as usize + first_asked) as u32, hi as u32 + 1),
            None => (first, first),
        };
        let mut data = std::mem::take(&mut slots.scratch);
        let read = if hi > lo {
            main.read_into(lo, hi - lo, &mut data)
        } else {
            Ok(())
        };
        let stride = main.stride();
        let found = read.map(|()| {
            range.clone().find_map(|i| {
                let s = i as u32;
                if recording && slots.still_recording(slots.rec[i]) {
                    Some((s, NOT_SUBMITTED))
                } else if (ask(i) && data[(s - lo) as usize * stride + stride - 1] == 0)
                    || slots.stale(i)
                {
                    Some((s, PENDING))
                } else {
                    None
                }
            })
        });
        slots.scratch = data;
        found
    }

    /// The bookkeeping of a host reset of `first..first+count` (the backend
    /// resets the queries themselves): every index becomes `state`.
    pub fn host_reset_table(
        &self,
        slots: &mut SampleTable,
        first: u32,
        count: u32,
        state: SlotState,
    ) {
        let r = first as usize..(first + count) as usize;
        slots.state[r.clone()].fill(state);
        for g in &mut slots.gen[r.clone()] {
            *g = g.wrapping_add(1);
        }
        // A timestamp's link is read only in the `Alias` state, which
        // writes it (and sets `aliases`), and its chain and occlusion flag
        // never: a timestamp set that has no aliases since its last whole
        // reset skips them (the profiler's reset of every frame).
        if self.set != CommonCounterSet::Timestamp || slots.aliases {
            slots.link[r.clone()].fill(NONE);
            slots.occlusion[r.clone()].fill(false);
            slots.chain[r.clone()].fill(0);
        }
        slots.rec[r.clone()].fill(0);
        slots.dirty[r.clone()].fill(false);
        slots.open[r.clone()].fill(false);
        slots.seen[r.clone()].fill(false);
        if slots.tickets != 0 {
            for i in r {
                slots.clear_ticket(i);
            }
        }
        if first == 0 && count == self.count {
            slots.aliases = false;
        }
        // The groups wholly reset (the last one may be short).
        let (g, end) = (claim::GROUP_INDICES, first + count);
        let (lo, hi) = (
            first.div_ceil(g),
            if end == self.count {
                end.div_ceil(g)
            } else {
                end / g
            },
        );
        if lo < hi {
            slots.interleaved[lo as usize..hi as usize].fill(false);
        }
    }

    /// The indices a resolve of `first..first+count` reads: the range and every
    /// index its chains or aliases lead to, as one span.
    pub fn span(&self, slots: &SampleTable, first: u32, count: u32) -> (u32, u32) {
        let (mut lo, mut hi) = (first, first + count);
        if self.set == CommonCounterSet::Timestamp && !slots.aliases {
            // Timestamps link only as aliases.
            return (lo, hi);
        }
        // Elements whose chain onwards is already in the span: chains share
        // their tails, so each element is followed once, not once per sample
        // after it.
        let mut followed = vec![0u64; (self.count as usize).div_ceil(64)];
        for s in first..first + count {
            let mut cur = slots.link[s as usize];
            if cur == NONE {
                continue;
            }
            if slots.state[s as usize] == SlotState::Alias {
                lo = lo.min(cur);
                hi = hi.max(cur + 1);
                continue;
            }
            let mut steps = 0;
            while cur != NONE && steps <= self.count {
                let (word, bit) = (cur as usize / 64, 1u64 << (cur % 64));
                if followed[word] & bit != 0 {
                    break;
                }
                followed[word] |= bit;
                lo = lo.min(cur);
                hi = hi.max(cur + 1);
                cur = slots.link[cur as usize];
                steps += 1;
            }
        }
        (lo, hi)
    }
}

/// Whether a timestamp query's availability word says it holds a value:
/// neither 0 nor [`QUERY_FAILED`].
#[inline]
fn available(word: u64) -> bool {
    const _: () = assert!(QUERY_FAILED == u64::MAX);
    word.wrapping_add(1) > 1
}

/// Maximal runs `(first, count)` of indices in `lo..hi` for which `keep` holds.
pub fn runs(lo: u32, hi: u32, keep: impl Fn(u32) -> bool) -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    let mut i = lo;
    while i < hi {
        if !keep(i) {
            i += 1;
            continue;
        }
        let start = i;
        while i < hi && keep(i) {
            i += 1;
        }
        out.push((start, i - start));
    }
    out
}
