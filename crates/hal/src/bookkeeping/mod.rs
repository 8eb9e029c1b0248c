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
        fn $name:ident / $twin:ident = $body:ident($($arg:ident: $ty:ty),*) -> $ret:ty;
    ) => {
        $(#[$attr])*
        fn $name($($arg: $ty),*) -> $ret {
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
        unsafe fn $twin($($arg: $ty),*) -> $ret {
            $body($($arg),*)
        }
    };
}

mod claim;
mod pass;
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

    /// Resolves `range` on the CPU into Metal's layout, reading the
    /// backend's queries through `main` (and `occlusion`, for the
    /// `fragments_passed` field of statistics).
    pub fn resolve_cpu(
        &self,
        range: Range<u64>,
        main: &dyn QueryRead,
        occlusion: Option<&dyn QueryRead>,
    ) -> Result<ResolvedCounters> {
        let mut out = ResolvedCounters::default();
        self.resolve_cpu_into(range, main, occlusion, &mut out)?;
        Ok(out)
    }

    /// What every CPU resolve checks first (storage the CPU may read, a
    /// range inside the set), then the lock: the range's first index and
    /// count, and the table.
    fn lock_for_cpu_resolve(
        &self,
        range: &Range<u64>,
    ) -> Result<(u32, u32, std::sync::MutexGuard<'_, SampleTable>)> {
        if self.storage == StorageMode::Private {
            return Err(InvalidInput::CpuResolveOfPrivateBuffer {
                label: self.label.clone(),
            }
            .into());
        }
        let (first, count) = self.check_range(range)?;
        Ok((first, count, self.lock()?))
    }

    /// [`SampleSet::resolve_cpu`] into `out`, reusing its memory: a resolve
    /// of the same size as the last one into it allocates nothing (a fresh
    /// result of a million timestamps costs about 1 ms in page faults on
    /// the H200). On error `out` is left empty.
    pub fn resolve_cpu_into(
        &self,
        range: Range<u64>,
        main: &dyn QueryRead,
        occlusion: Option<&dyn QueryRead>,
        out: &mut ResolvedCounters,
    ) -> Result<()> {
        let (mut bytes, mut status) = out.take_buffers();
        let (first, count, mut slots) = self.lock_for_cpu_resolve(&range)?;
        let (lo, hi) = self.span(&slots, first, count);
        slots.prune_tickets(lo as usize..hi as usize);
        // The driver writes into scratch kept between resolves; it goes back
        // into `slots` whatever happens.
        let reader = main;
        let mut data = std::mem::take(&mut slots.scratch);
        let resolved = if self.set == CommonCounterSet::Timestamp {
            let threads = resolve_threads(hi - lo);
            self.resolve_timestamps(
                &mut slots,
                reader,
                (first, count, lo, hi),
                &mut data,
                threads,
                (&mut bytes, &mut status),
            )
        } else {
            let mut occ = std::mem::take(&mut slots.occlusion_scratch);
            let mut read = reader.read_into(lo, hi - lo, &mut data);
            if let (Ok(()), Some(o)) = (&read, occlusion) {
                read = o.read_into(lo, hi - lo, &mut occ);
            }
            let resolved = read.map(|()| {
                (bytes, status) = self.resolve_statistics(
                    &slots,
                    reader.stride(),
                    first,
                    count,
                    lo,
                    hi,
                    &data,
                    occlusion.map(|_| occ.as_slice()),
                );
            });
            slots.occlusion_scratch = occ;
            resolved.map(|()| false)
        };
        slots.scratch = data;
        // What the resolve saw written stays available until its next write
        // or reset: a host reset need not read it again. (A timestamp
        // resolve with nothing pending noted it already.)
        if !resolved? {
            let t = &mut *slots;
            let r = first as usize..(first + count) as usize;
            for ((seen, st), state) in t.seen[r.clone()].iter_mut().zip(&status).zip(&t.state[r]) {
                *seen |= (*st == SampleStatus::Written) & (*state == SlotState::Recorded);
            }
        }
        let origins = (self.set != CommonCounterSet::Timestamp).then(|| {
            (first as usize..(first + count) as usize)
                .zip(&status)
                .map(|(i, st)| match st {
                    SampleStatus::Written => slots.chain[i],
                    _ => 0,
                })
                .collect::<Vec<u64>>()
        });
        let resolved = ResolvedCounters::new(self.set, first, bytes, status)?;
        *out = match origins {
            Some(o) => resolved.with_origins(o)?,
            None => resolved,
        };
        Ok(())
    }

    /// The timestamp resolve of `first..first+count`, reading the span
    /// `lo..hi` into `scratch` (on `threads` threads, each reading a part and
    /// laying out what of the range is in it while it is still in cache):
    /// first every value as if written and complete, then a pass over the
    /// exceptions (and every index while a ticket may be pending), which are
    /// rare in the common case of a range the GPU has finished.
    ///
    /// With no ticket pending, the threads also note what they saw written
    /// in `slots.seen` and the result is `true`; otherwise (`false`) the
    /// caller does.
    pub(crate) fn resolve_timestamps(
        &self,
        slots: &mut SampleTable,
        main: &dyn QueryRead,
        (first, count, lo, hi): (u32, u32, u32, u32),
        scratch: &mut Vec<u64>,
        threads: usize,
        (bytes, status): (&mut Vec<u8>, &mut Vec<SampleStatus>),
    ) -> Result<bool> {
        let (n, f, l) = (count as usize, first as usize, lo as usize);
        let span = (hi - lo) as usize;
        if scratch.len() < 2 * span {
            scratch.resize(2 * span, 0);
        }
        let data = &mut scratch[..2 * span];
        // Nothing pending: a sample recorded and available is written, so
        // the threads can note it as seen (see `SampleTable::seen`).
        let no_tickets = slots.tickets == 0;
        let states = &slots.state[f..f + n];
        let seen = no_tickets.then(|| &mut slots.seen[f..f + n]);
        let mask = self.valid_mask;
        // Written without zero-filling first: a large output would otherwise
        // be written twice. (Both are empty: reserve makes room for n.)
        bytes.clear();
        bytes.reserve(n * 8);
        status.clear();
        status.reserve(n);
        let out = Out {
            bytes: &mut bytes.spare_capacity_mut()[..n * 8],
            status: &mut status.spare_capacity_mut()[..n],
            seen,
        };
        // Reads queries `a..` into `chunk`, then lays out the range's part of
        // them into `out`.
        let job = |(a, chunk, out): (usize, &mut [u64], Out<'_>)| -> Result<bool> {
            let b = a + chunk.len() / 2;
            main.read(a as u32, (b - a) as u32, chunk)?;
            let ia = a.clamp(f, f + n);
            let ib = b.clamp(ia, f + n);
            Ok(layout_timestamps(
                &chunk[2 * (ia - a)..2 * (ib - a)],
                &states[ia - f..ib - f],
                mask,
                out,
            ))
        };
        let all_written = if threads <= 1 {
            job((l, data, out))?
        } else {
            // Chunks of the span in order; the range's parts of them
            // partition the output in the same order.
            let per = span.div_ceil(threads);
            let mut jobs = Vec::with_capacity(threads);
            let mut rest = out;
            for (k, chunk) in data.chunks_mut(2 * per).enumerate() {
                let a = l + k * per;
                let b = a + chunk.len() / 2;
                let ia = a.clamp(f, f + n);
                let ib = b.clamp(ia, f + n);
                let (out, tail) = rest.split_at(ib - ia);
                rest = tail;
                jobs.push((a, chunk, out));
            }
            run_jobs(jobs, job)?
        };
        // SAFETY: the jobs (all of them ran and succeeded, or we returned
        // above) called `layout_timestamps` on parts that partition the first
        // `n * 8` bytes and `n` statuses of spare capacity, and it
        // initialised every one of them.
        unsafe {
            bytes.set_len(n * 8);
            status.set_len(n);
        }
        if all_written && no_tickets {
            return Ok(true);
        }
        self.fix_timestamp_exceptions(slots, (first, lo), &scratch[..2 * span], (bytes, status));
        Ok(no_tickets)
    }

    /// The exception pass of a timestamp resolve: corrects each sample of
    /// the laid-out `bytes` and `status` (from index `first`) that is not
    /// simply recorded, complete and current, reading `data` (queries from
    /// `lo`).
    fn fix_timestamp_exceptions(
        &self,
        slots: &SampleTable,
        (first, lo): (u32, u32),
        data: &[u64],
        (bytes, status): (&mut [u8], &mut [SampleStatus]),
    ) {
        let f = first as usize;
        let n = status.len();
        let at = 2 * (first - lo) as usize;
        let pairs = &data[at..at + 2 * n];
        // A pass's relaxed writes are runs of aliases of one timestamp:
        // the last alias's target (index and the generation it aliases)
        // and what it resolved to serve the rest of the run, since an
        // alias that is current resolves to its target's value and status
        // alone.
        let mut last_alias: Option<(u32, u32, u64, SampleStatus)> = None;
        for (k, (out, st)) in bytes.chunks_exact_mut(8).zip(status.iter_mut()).enumerate() {
            let i = f + k;
            let q = &pairs[2 * k..2 * k + 2];
            let state = slots.state[i];
            if state == SlotState::Recorded && available(q[1]) && !slots.stale(i) {
                continue;
            }
            let (v, s) = if state == SlotState::Alias && !slots.stale(i) {
                let key = (slots.link[i], slots.link_gen[i]);
                match last_alias {
                    Some((t, g, v, s)) if (t, g) == key => (v, s),
                    _ => {
                        let (v, s) = self.timestamp_exception(slots, i as u32, lo, data);
                        last_alias = Some((key.0, key.1, v, s));
                        (v, s)
                    }
                }
            } else {
                self.timestamp_exception(slots, i as u32, lo, data)
            };
            out.copy_from_slice(&v.to_ne_bytes());
            *st = s;
        }
    }

    /// Resolves the timestamps of `range` into `out` for a caller that
    /// reads each sample once: when every sample is recorded, complete and
    /// current, `out` keeps the driver's reads as they are (no layout pass,
    /// which would write what the caller then reads again); otherwise the
    /// layout and statuses of [`SampleSet::resolve_cpu_into`]. The same
    /// ticks and statuses either way. On error `out` is left empty.
    pub fn resolve_timestamps_into(
        &self,
        range: Range<u64>,
        main: &dyn QueryRead,
        out: &mut ResolvedTimestamps,
    ) -> Result<()> {
        out.len = 0;
        out.all_written = false;
        let resolved = self.resolve_timestamps_read(range, main, out);
        if resolved.is_err() {
            out.len = 0;
            out.all_written = false;
            out.laid = ResolvedCounters::default();
        }
        resolved
    }

    fn resolve_timestamps_read(
        &self,
        range: Range<u64>,
        main: &dyn QueryRead,
        out: &mut ResolvedTimestamps,
    ) -> Result<()> {
        if self.set != CommonCounterSet::Timestamp {
            return Err(InvalidInput::Argument(format!(
                "{} holds {} samples, not timestamps",
                self.label, self.set
            ))
            .into());
        }
        let (first, count, mut slots) = self.lock_for_cpu_resolve(&range)?;
        let (lo, hi) = self.span(&slots, first, count);
        if (lo, hi) != (first, first + count) {
            // Aliases lead outside the range: the usual resolve follows them.
            drop(slots);
            self.resolve_cpu_into(range, main, None, &mut out.laid)?;
            out.len = out.laid.len();
            return Ok(());
        }
        slots.prune_tickets(lo as usize..hi as usize);
        let (f, n) = (first as usize, count as usize);
        // The driver writes into the caller's memory, which keeps it as is
        // when every sample turns out written.
        let pairs = &mut out.pairs;
        if pairs.len() < 2 * n {
            pairs.resize(2 * n, 0);
        }
        let data = &mut pairs[..2 * n];
        let states = &slots.state[f..f + n];
        let threads = resolve_threads(count);
        let job = |(a, chunk): (usize, &mut [u64])| -> Result<bool> {
            main.read((f + a) as u32, (chunk.len() / 2) as u32, chunk)?;
            Ok(all_recorded_and_available(
                chunk,
                &states[a..a + chunk.len() / 2],
            ))
        };
        let all = if threads <= 1 {
            job((0, data))?
        } else {
            let per = n.div_ceil(threads);
            let jobs = data
                .chunks_mut(2 * per)
                .enumerate()
                .map(|(k, chunk)| (k * per, chunk))
                .collect();
            run_jobs(jobs, job)?
        };
        let no_tickets = slots.tickets == 0;
        if all && no_tickets {
            // Recorded and available with nothing pending: written (see
            // `SampleTable::seen`).
            slots.seen[f..f + n].fill(true);
            out.len = n;
            out.all_written = true;
            out.mask = self.valid_mask;
            return Ok(());
        }
        // Not all written: lay out what was read, as the usual resolve does.
        let (mut bytes, mut status) = out.laid.take_buffers();
        bytes.clear();
        bytes.reserve(n * 8);
        status.clear();
        status.reserve(n);
        let table = &mut *slots;
        let seen = if no_tickets {
            Some(&mut table.seen[f..f + n])
        } else {
            None
        };
        let laid = Out {
            bytes: &mut bytes.spare_capacity_mut()[..n * 8],
            status: &mut status.spare_capacity_mut()[..n],
            seen,
        };
        layout_timestamps(
            &out.pairs[..2 * n],
            &table.state[f..f + n],
            self.valid_mask,
            laid,
        );
        // SAFETY: `layout_timestamps` initialised every one of the first
        // `n * 8` bytes and `n` statuses of spare capacity.
        unsafe {
            bytes.set_len(n * 8);
            status.set_len(n);
        }
        self.fix_timestamp_exceptions(
            &slots,
            (first, first),
            &out.pairs[..2 * n],
            (&mut bytes, &mut status),
        );
        if !no_tickets {
            // What the resolve saw written stays so (see `resolve_cpu_into`).
            let t = &mut *slots;
            for ((seen, st), state) in t.seen[f..f + n]
                .iter_mut()
                .zip(&status)
                .zip(&t.state[f..f + n])
            {
                *seen |= (*st == SampleStatus::Written) & (*state == SlotState::Recorded);
            }
        }
        drop(slots);
        out.laid = ResolvedCounters::new(self.set, first, bytes, status)?;
        out.len = n;
        Ok(())
    }

    /// What timestamp index `s` resolves to when it is not simply recorded,
    /// complete and current.
    #[cold]
    fn timestamp_exception(
        &self,
        slots: &SampleTable,
        s: u32,
        lo: u32,
        data: &[u64],
    ) -> (u64, SampleStatus) {
        let i = s as usize;
        let at = |s: u32| 2 * (s - lo) as usize;
        let mut value = COUNTER_ERROR_VALUE;
        let status = match slots.state[i] {
            SlotState::Fresh => SampleStatus::NotWritten,
            _ if slots.stale(i) => SampleStatus::NotReady,
            SlotState::Invalidated => SampleStatus::Invalidated,
            state => {
                let (src, ok) = if state == SlotState::Alias {
                    let t = slots.link[i];
                    let same_gen = slots.gen[t as usize] == slots.link_gen[i];
                    (
                        t,
                        same_gen && slots.state[t as usize] == SlotState::Recorded,
                    )
                } else {
                    (s, true)
                };
                if !ok {
                    SampleStatus::Error
                } else if slots.stale(src as usize) {
                    SampleStatus::NotReady
                } else if data[at(src) + 1] == QUERY_FAILED {
                    SampleStatus::Error
                } else if data[at(src) + 1] != 0 {
                    value = data[at(src)] & self.valid_mask;
                    SampleStatus::Written
                } else {
                    SampleStatus::NotReady
                }
            }
        };
        if status == SampleStatus::Invalidated {
            value = 0;
        }
        (value, status)
    }

    /// The statistic resolve of `first..first+count`, whose chains lie in
    /// `lo..hi`: each sample is the sum of its chain.
    #[allow(clippy::too_many_arguments)]
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn resolve_statistics(
        &self,
        slots: &SampleTable,
        stride: usize,
        first: u32,
        count: u32,
        lo: u32,
        hi: u32,
        main: &[u64],
        occlusion: Option<&[u64]>,
    ) -> (Vec<u8>, Vec<SampleStatus>) {
        let fields = self.set.result_size() / 8;
        let mut bytes = vec![0u8; count as usize * fields * 8];
        let mut status = Vec::with_capacity(count as usize);
        let mut out = [0u64; 8];
        let out = &mut out[..fields];
        let mut sums = ChainSums::new((hi - lo) as usize);
        for (s, chunk) in (first..first + count).zip(bytes.chunks_exact_mut(fields * 8)) {
            let i = s as usize;
            let st = match slots.state[i] {
                SlotState::Fresh => SampleStatus::NotWritten,
                _ if slots.stale(i) => SampleStatus::NotReady,
                SlotState::Invalidated => SampleStatus::Invalidated,
                _ => self.chain_value(slots, stride, s, lo, main, occlusion, &mut sums, out),
            };
            match st {
                SampleStatus::Written => {}
                SampleStatus::Invalidated => out.fill(0),
                _ => out.fill(COUNTER_ERROR_VALUE),
            }
            for (dst, v) in chunk.chunks_exact_mut(8).zip(out.iter()) {
                dst.copy_from_slice(&v.to_ne_bytes());
            }
            status.push(st);
        }
        (bytes, status)
    }

    /// Sums the chain before statistic sample `s` into `out`, as walking the
    /// whole chain does, but walking each chain element once per resolve
    /// (`sums` remembers the walks from every element reached).
    #[allow(clippy::too_many_arguments)]
    fn chain_value(
        &self,
        slots: &SampleTable,
        stride: usize,
        s: u32,
        lo: u32,
        main: &[u64],
        occlusion: Option<&[u64]>,
        sums: &mut ChainSums,
        out: &mut [u64],
    ) -> SampleStatus {
        let at = |s: u32| (s - lo) as usize;
        let available = |s: u32| main[at(s) * stride + stride - 1] != 0;
        if slots.state[s as usize] != SlotState::Recorded {
            return SampleStatus::Error;
        }
        if !available(s) {
            return SampleStatus::NotReady;
        }
        out.fill(0);
        let p = slots.link[s as usize];
        if p != NONE {
            let c = p as usize;
            if slots.gen[c] != slots.link_gen[s as usize] || slots.state[c] != SlotState::Recorded {
                // The chain was broken: an earlier sample was re-recorded.
                return SampleStatus::Error;
            }
            let st = self.walk(slots, stride, p, lo, main, occlusion, sums);
            if st != SampleStatus::Written {
                return st;
            }
            out.copy_from_slice(&sums.sums[at(p) * 8..at(p) * 8 + out.len()]);
        }
        // The set's own fields only: stage utilization has 6 of the map's 8.
        for (f, &pos) in self.field_map.iter().take(out.len()).enumerate() {
            if pos == ABSENT {
                out[f] = COUNTER_ERROR_VALUE;
            }
        }
        SampleStatus::Written
    }

    /// The walk of a chain from element `c0` (whose generation its successor
    /// expects): its status and, when written, the sums of the queries of `c0`
    /// and every element before it, in `sums`. Each element is walked once:
    /// a walk stops at the first element already known and fills in the ones
    /// it passed on the way back.
    #[allow(clippy::too_many_arguments)]
    fn walk(
        &self,
        slots: &SampleTable,
        stride: usize,
        c0: u32,
        lo: u32,
        main: &[u64],
        occlusion: Option<&[u64]>,
        sums: &mut ChainSums,
    ) -> SampleStatus {
        let at = |s: u32| (s - lo) as usize;
        let uses_occlusion = self.field_map.contains(&OCCLUSION);
        // Adds the query of element `c` to `out`.
        let add_query = |c: u32, out: &mut [u64]| {
            let values = &main[at(c) * stride..at(c) * stride + stride - 1];
            for (f, &pos) in self.field_map.iter().enumerate() {
                match pos {
                    ABSENT => {}
                    OCCLUSION => {
                        if let (true, Some(o)) = (slots.occlusion[c as usize], occlusion) {
                            out[f] = out[f].wrapping_add(o[at(c) * 2]);
                        }
                    }
                    p => out[f] = out[f].wrapping_add(values[p as usize]),
                }
            }
        };
        let mut path = std::mem::take(&mut sums.path);
        let mut c = c0;
        let status = loop {
            let k = at(c);
            if let Some(st) = sums.known(k) {
                break st;
            }
            let i = c as usize;
            let occlusion_pending = uses_occlusion
                && slots.occlusion[i]
                && occlusion.is_some_and(|o| o[k * 2 + 1] == 0);
            if main[k * stride + stride - 1] == 0 || slots.stale(i) || occlusion_pending {
                sums.set(k, SampleStatus::NotReady);
                break SampleStatus::NotReady;
            }
            let next = slots.link[i];
            if next == NONE {
                let mut own = [0u64; 8];
                add_query(c, &mut own);
                sums.sums[k * 8..k * 8 + 8].copy_from_slice(&own);
                sums.set(k, SampleStatus::Written);
                break SampleStatus::Written;
            }
            let n = next as usize;
            if path.len() > self.count as usize
                || slots.gen[n] != slots.link_gen[i]
                || slots.state[n] != SlotState::Recorded
            {
                // The chain was broken: an earlier sample was re-recorded.
                sums.set(k, SampleStatus::Error);
                break SampleStatus::Error;
            }
            path.push(c);
            c = next;
        };
        // Back along the path: each element's walk is its successor's plus
        // its own query.
        let mut after = c;
        while let Some(p) = path.pop() {
            let k = at(p);
            if status == SampleStatus::Written {
                let mut own = [0u64; 8];
                own.copy_from_slice(&sums.sums[at(after) * 8..at(after) * 8 + 8]);
                add_query(p, &mut own);
                sums.sums[k * 8..k * 8 + 8].copy_from_slice(&own);
            }
            sums.set(k, status);
            after = p;
        }
        sums.path = path;
        sums.known(at(c0)).unwrap_or(SampleStatus::Error)
    }

    /// Sums the chain before statistic sample `s` into `out`, walking the
    /// whole chain: the reference the memoised `chain_value` is tested
    /// against. `main` and `occlusion` are the pools' reads from `lo`
    /// (see `QueryPool::read_into`).
    #[cfg(test)]
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn sum_chain(
        &self,
        slots: &SampleTable,
        stride: usize,
        s: u32,
        lo: u32,
        main: &[u64],
        occlusion: Option<&[u64]>,
        out: &mut [u64],
    ) -> SampleStatus {
        let at = |s: u32| (s - lo) as usize;
        let available = |s: u32| main[at(s) * stride + stride - 1] != 0;
        if slots.state[s as usize] != SlotState::Recorded {
            return SampleStatus::Error;
        }
        if !available(s) {
            return SampleStatus::NotReady;
        }
        out.fill(0);
        let mut cur = slots.link[s as usize];
        let mut cur_gen = slots.link_gen[s as usize];
        let mut steps = 0;
        while cur != NONE {
            let c = cur as usize;
            if steps > self.count
                || slots.gen[c] != cur_gen
                || slots.state[c] != SlotState::Recorded
            {
                // The chain was broken: an earlier sample was re-recorded.
                return SampleStatus::Error;
            }
            if !available(cur) || slots.stale(c) {
                return SampleStatus::NotReady;
            }
            let values = &main[at(cur) * stride..at(cur) * stride + stride - 1];
            for (f, &pos) in self.field_map.iter().enumerate() {
                match pos {
                    ABSENT => {}
                    OCCLUSION => {
                        if slots.occlusion[c] {
                            if let Some(o) = occlusion {
                                if o[at(cur) * 2 + 1] == 0 {
                                    return SampleStatus::NotReady;
                                }
                                out[f] = out[f].wrapping_add(o[at(cur) * 2]);
                            }
                        }
                    }
                    p => out[f] = out[f].wrapping_add(values[p as usize]),
                }
            }
            cur_gen = slots.link_gen[c];
            cur = slots.link[c];
            steps += 1;
        }
        for (f, &pos) in self.field_map.iter().take(out.len()).enumerate() {
            if pos == ABSENT {
                out[f] = COUNTER_ERROR_VALUE;
            }
        }
        SampleStatus::Written
    }
}

/// The chain walks of one statistic resolve, per index of its span.
struct ChainSums {
    /// 0: not walked yet; else 1 + the walk's status code.
    known: Vec<u8>,
    /// 8 sums (Metal's field order) per index, valid once walked as written.
    sums: Vec<u64>,
    /// The elements of the walk under way.
    path: Vec<u32>,
}

impl ChainSums {
    fn new(span: usize) -> Self {
        Self {
            known: vec![0; span],
            sums: vec![0; span * 8],
            path: Vec::new(),
        }
    }

    fn known(&self, k: usize) -> Option<SampleStatus> {
        match self.known[k] {
            0 => None,
            1 => Some(SampleStatus::Written),
            2 => Some(SampleStatus::NotReady),
            _ => Some(SampleStatus::Error),
        }
    }

    fn set(&mut self, k: usize, status: SampleStatus) {
        self.known[k] = match status {
            SampleStatus::Written => 1,
            SampleStatus::NotReady => 2,
            _ => 3,
        };
    }
}

/// Queries a thread of a parallel CPU resolve reads at least.
const RESOLVE_CHUNK: u32 = 1 << 15;
/// Threads a CPU resolve uses at most.
const RESOLVE_THREADS: usize = 16;

/// The CPU resolve's own thread pool, started on first use: at most
/// [`RESOLVE_THREADS`] threads; `None` where it could not be started.
///
/// Its own rather than rayon's global pool: the resolve holds its sample
/// set's lock while the parts run, and only resolve parts run here, none of
/// which takes that lock (a global pool's workers could be busy with the
/// caller's own long tasks, too).
#[cfg(feature = "rayon")]
fn resolve_pool() -> Option<&'static rayon::ThreadPool> {
    static POOL: std::sync::OnceLock<Option<rayon::ThreadPool>> = std::sync::OnceLock::new();
    POOL.get_or_init(|| {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        rayon::ThreadPoolBuilder::new()
            .num_threads(cores.min(RESOLVE_THREADS))
            .thread_name(|i| format!("gpu-counters resolve {i}"))
            .build()
            .ok()
    })
    .as_ref()
}

/// Threads for a CPU resolve reading `span` queries: 1 below two chunks'
/// worth (handing parts out would cost more than it saves), and then
/// without starting the pool: a program that only resolves small ranges
/// never starts its threads.
fn resolve_threads(span: u32) -> usize {
    let parts = (span / RESOLVE_CHUNK) as usize;
    if parts < 2 {
        return 1;
    }
    let cores = || std::thread::available_parallelism().map_or(1, |n| n.get());
    #[cfg(feature = "rayon")]
    let threads = resolve_pool().map_or_else(cores, rayon::ThreadPool::current_num_threads);
    #[cfg(not(feature = "rayon"))]
    let threads = cores();
    threads.min(RESOLVE_THREADS).min(parts).max(1)
}

/// Runs `work` on every job in parallel, on the resolve's pool (its
/// threads are started once per process, not once per resolve). Returns
/// whether every job returned `true`, or the first error.
#[cfg(feature = "rayon")]
fn run_jobs<J: Send>(jobs: Vec<J>, work: impl Fn(J) -> Result<bool> + Sync) -> Result<bool> {
    use rayon::iter::{IndexedParallelIterator, IntoParallelIterator, ParallelIterator};
    match resolve_pool() {
        // A thread of any rayon pool (the caller's own, say) that waits for
        // another pool keeps running its own pool's tasks meanwhile, and
        // one of those could want the lock this resolve holds: such a
        // caller gets threads of its own instead.
        Some(pool) if rayon::current_thread_index().is_none() => pool.install(|| {
            jobs.into_par_iter()
                // One part per task: the parts were sized for one thread each.
                .with_max_len(1)
                .map(&work)
                .try_reduce(|| true, |a, b| Ok(a & b))
        }),
        _ => run_on_scoped_threads(jobs, work),
    }
}

/// Runs `work` on every job in parallel, on scoped threads (without the
/// `rayon` feature). Returns whether every job returned `true`, or the first
/// error.
#[cfg(not(feature = "rayon"))]
fn run_jobs<J: Send>(jobs: Vec<J>, work: impl Fn(J) -> Result<bool> + Sync) -> Result<bool> {
    run_on_scoped_threads(jobs, work)
}

/// Runs `work` on every job, one scoped thread each (the first on this
/// thread; where a thread cannot be started, its job runs here). Returns
/// whether every job returned `true`, or the first error.
fn run_on_scoped_threads<J: Send>(
    jobs: Vec<J>,
    work: impl Fn(J) -> Result<bool> + Sync,
) -> Result<bool> {
    let work = &work;
    std::thread::scope(|scope| {
        let mut jobs = jobs.into_iter();
        let here = jobs.next();
        let mut inline = Vec::new();
        let mut handles = Vec::new();
        for job in jobs {
            let (tx, rx) = std::sync::mpsc::channel::<J>();
            match std::thread::Builder::new()
                .name("gpu-counters resolve".into())
                .spawn_scoped(scope, move || rx.recv().map(work))
            {
                Ok(h) => {
                    // The thread owns the receiver, so the send succeeds.
                    let _ = tx.send(job);
                    handles.push(h);
                }
                Err(_) => inline.push(job),
            }
        }
        let mut all = true;
        let mut first_error = None;
        for r in here.into_iter().chain(inline).map(work) {
            match r {
                Ok(ok) => all &= ok,
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        for h in handles {
            match h.join() {
                Ok(Ok(Ok(ok))) => all &= ok,
                Ok(Ok(Err(e))) => {
                    first_error.get_or_insert(e);
                }
                Ok(Err(_)) | Err(_) => {
                    first_error.get_or_insert(Error::Internal("a resolve thread failed".into()));
                }
            }
        }
        first_error.map_or(Ok(all), Err)
    })
}

/// Whether a timestamp query's availability word says it holds a value:
/// neither 0 nor [`QUERY_FAILED`].
#[inline]
fn available(word: u64) -> bool {
    const _: () = assert!(QUERY_FAILED == u64::MAX);
    word.wrapping_add(1) > 1
}

/// Where a part of a timestamp resolve lays out its samples: 8 bytes and a
/// status each, and (when nothing is pending) whether each was seen written.
struct Out<'a> {
    bytes: &'a mut [MaybeUninit<u8>],
    status: &'a mut [MaybeUninit<SampleStatus>],
    seen: Option<&'a mut [bool]>,
}

impl<'a> Out<'a> {
    /// The first `k` samples' part, and the rest.
    fn split_at(self, k: usize) -> (Out<'a>, Out<'a>) {
        let (b0, b1) = self.bytes.split_at_mut(8 * k);
        let (s0, s1) = self.status.split_at_mut(k);
        let (n0, n1) = match self.seen {
            Some(seen) => {
                let (n0, n1) = seen.split_at_mut(k);
                (Some(n0), Some(n1))
            }
            None => (None, None),
        };
        (
            Out {
                bytes: b0,
                status: s0,
                seen: n0,
            },
            Out {
                bytes: b1,
                status: s1,
                seen: n1,
            },
        )
    }
}

with_avx2! {
    /// Whether every timestamp sample of `states` is recorded and its query in
    /// `pairs` (value, availability) available: branch-free, so it vectorises.
    #[inline(never)]
    fn all_recorded_and_available / all_recorded_and_available_avx2 =
        all_recorded_and_available_loop(pairs: &[u64], states: &[SlotState]) -> bool;
}

#[inline(always)]
fn all_recorded_and_available_loop(pairs: &[u64], states: &[SlotState]) -> bool {
    // Two passes, each of which compiles to a tight loop: the states as
    // bytes (vectorised), then the availability words.
    let recorded = states
        .iter()
        .fold(true, |all, &state| all & (state == SlotState::Recorded));
    let unavailable = pairs
        .chunks_exact(2)
        .fold(0u8, |any, q| any | u8::from(!available(q[1])));
    recorded & (unavailable == 0) & (pairs.len() == 2 * states.len())
}

with_avx2! {
    /// Lays out the (value, availability) `pairs` of timestamp samples in
    /// `states` into `out`: the masked value where the sample is recorded and
    /// available, the error value elsewhere, and status `Written` for every
    /// sample (the caller's exception pass corrects the others when this
    /// returns `false`); where `out.seen` is given, it is set for the samples
    /// recorded and available. Returns whether every sample was. Initialises
    /// every byte and status of `out`. Branch-free, so it vectorises: with
    /// AVX2 where the CPU has it, since baseline x86-64 has no 64-bit vector
    /// compare and the loop stays scalar there (16 instructions a sample
    /// against 8 under callgrind).
    #[inline(never)]
    fn layout_timestamps / layout_timestamps_avx2 =
        layout_timestamps_loop(
            pairs: &[u64],
            states: &[SlotState],
            mask: u64,
            out: Out<'_>
        ) -> bool;
}

#[inline(always)]
fn layout_timestamps_loop(pairs: &[u64], states: &[SlotState], mask: u64, out: Out<'_>) -> bool {
    // The error value is all ones: `(!ok as u64).wrapping_neg()` selects it.
    const _: () = assert!(COUNTER_ERROR_VALUE == u64::MAX);
    let n = states.len();
    assert!(pairs.len() == 2 * n && out.bytes.len() == 8 * n && out.status.len() == n);
    let mut all = true;
    for ((dst, q), &state) in out
        .bytes
        .chunks_exact_mut(8)
        .zip(pairs.chunks_exact(2))
        .zip(states)
    {
        let ok = (state == SlotState::Recorded) & available(q[1]);
        all &= ok;
        let v = (q[0] & mask) | (!ok as u64).wrapping_neg();
        dst.copy_from_slice(&v.to_ne_bytes().map(MaybeUninit::new));
    }
    out.status.fill(MaybeUninit::new(SampleStatus::Written));
    match out.seen {
        // Every sample was: a fill, not a second pass over the pairs.
        Some(seen) if all => seen.fill(true),
        Some(seen) => {
            for ((seen, q), &state) in seen.iter_mut().zip(pairs.chunks_exact(2)).zip(states) {
                *seen |= (state == SlotState::Recorded) & available(q[1]);
            }
        }
        None => {}
    }
    all
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
