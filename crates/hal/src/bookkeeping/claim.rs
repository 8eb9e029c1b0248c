//! Block claims: timestamp writes without the bookkeeping lock.
//!
//! Taking a sample set's lock for every timestamp write costs about as much
//! as the driver's own command. So a recording claims a block of
//! [`BLOCK`] indices once, under the lock, with a snapshot of which of them
//! it may write as they are ("clean": no reset needed, not open, not
//! recorded by another open recording). Unless the set's recordings
//! interleave there, it also claims the next blocks of its [`GROUP`] that
//! are wholly fresh (see [`AHEAD`]), each a claim of its own. It then
//! writes clean indices of the block without the lock: it notes each in
//! its own [`LocalClaims`] and publishes it in the block's atomic word of
//! written indices, of which it is the only writer (a plain store).
//!
//! Whoever takes the lock to read the table ([`SampleSet::lock`]) first
//! applies the published writes to it, as [`SampleTable::mark_recorded`]
//! by the claiming recording, so every reader sees them as if each had been
//! recorded under the lock. A write that another thread has not seen yet is
//! one it saw before the write happened: the recording has not been
//! submitted, so the GPU cannot have run it either. A locked write reads
//! the table only at its own block (and at blocks nobody claims, which
//! hold nothing unapplied), so it applies only the claim on that block
//! ([`SampleSet::lock_block`]), and a recording applies its own claims'
//! writes when it releases them: with several threads recording into one
//! set, none applies the others' writes under the lock, or reads the
//! cache lines they are storing into.
//!
//! A claim is exclusive: another recording's write into a claimed block
//! takes the locked path, which sees the applied writes (and refuses an
//! index the claimant wrote), and revokes the index it writes from the
//! claim, so that the claimant's own write of it takes the locked path too
//! (and is refused). Only a true race, both writing one index at once on
//! two threads, gets past both checks: the revocation then shows it when the
//! claimant releases the claim (at its next locked write into that set, at
//! commit, or when dropped), and the claimant's command buffer is refused.
//! Within one thread, or between threads that synchronize, the second write
//! is refused at once, as under the lock.

use super::table::{SampleTable, NONE};
use super::ticket::Ticket;
use super::SampleSet;
use crate::CommonCounterSet;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};

/// Indices per claimed block.
pub const BLOCK: u32 = 64;

/// Blocks a recording claims past the one its locked write is in, when they
/// are wholly fresh and in the same [`GROUP`]: one lock, release and claim
/// serve up to `(1 + AHEAD) * BLOCK` sequential writes instead of `BLOCK`.
/// Not where the set's recordings interleave, whose writes into blocks
/// claimed ahead would take the lock: while another recording holds a
/// claim in the group, or once one recording wrote into another's claim in
/// the group (until a host reset of every index of the group). Recordings
/// into ranges of their own (a thread's range each, or a profiler's
/// segments of whole groups) claim ahead side by side.
pub const AHEAD: u32 = 3;

/// Blocks per group: claims ahead stay inside the aligned group of the
/// block whose locked write claims them, so that recordings whose indices
/// are whole groups of their own never claim into each other's.
pub const GROUP: u32 = AHEAD + 1;

/// Indices per [`GROUP`].
pub const GROUP_INDICES: u32 = GROUP * BLOCK;

/// Why a recording that claimed an index cannot be submitted: another
/// recording wrote the same index while it was being recorded.
pub const WRITTEN_CONCURRENTLY: &str = "was also written by another command buffer recorded at the same time on another thread: this command buffer cannot be submitted; give each recording its own indices";

/// The table's side of a claim.
pub(crate) struct TableClaim {
    pub(crate) block: u32,
    /// The claiming recording's ticket id (registered in the table's live
    /// tickets by its first locked write, so no clone is kept here: a
    /// clone is an atomic operation per block).
    pub(crate) ticket: u64,
    /// The published writes already applied to the table.
    pub(crate) applied: u64,
}

/// What a claimed block shares between its claimant and everyone else, as
/// masks: bit `i` of block `b` is index `b * BLOCK + i`. A cache line of
/// its own: the claimant stores into `written` at every write, and two
/// threads' blocks side by side (a profiler's scopes) would otherwise take
/// the line from each other at every write.
#[derive(Default)]
#[repr(align(64))]
pub(crate) struct BlockWords {
    /// The indices the claimant wrote without the lock: only it stores here.
    written: AtomicU64,
    /// The indices other recordings wrote or reset since the claim: only
    /// they set bits here, under the lock.
    revoked: AtomicU64,
}

/// The words of every block of a set of `count` samples.
pub(crate) fn block_words(count: u32) -> Option<std::sync::Arc<[BlockWords]>> {
    let n = count.div_ceil(BLOCK) as usize;
    let mut v = Vec::new();
    v.try_reserve_exact(n).ok()?;
    v.resize_with(n, BlockWords::default);
    Some(v.into())
}

/// A claim as it ended ([`LocalClaims::release_written`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReleasedClaim {
    /// The block's first index.
    pub first: u32,
    /// The indices the recording wrote under the claim: bit `i` is index
    /// `first + i`.
    pub written: u64,
    /// An index that another recording wrote too, if any.
    pub conflict: Option<u32>,
}

/// One recording's claim on a block of one set.
struct LocalClaim {
    /// The set's address: the recording holds the set while it records.
    key: usize,
    block: u32,
    /// Indices it could write without the lock when it claimed the block;
    /// those it wrote since are in the block's `written` word (its only
    /// writer is this claim, so a load of it is this claim's own mask: one
    /// store per write, not three).
    clean: u64,
    /// The set's block words, kept alive while the claim lasts: the hot
    /// copy ([`HotClaim`]) points into them.
    blocks: std::sync::Arc<[BlockWords]>,
}

impl LocalClaim {
    /// Its copy, with its block's words' address.
    fn hot(&self) -> HotClaim {
        // `block` is inside the set (a claimed block).
        match self.blocks.get(self.block as usize) {
            Some(words) => HotClaim {
                key: self.key,
                block: self.block,
                clean: self.clean,
                words,
            },
            None => HotClaim::NONE,
        }
    }

    /// Whether `index` (in this claim's block) may still be written.
    fn is_clean(&self, set: &SampleSet, index: u32) -> bool {
        let bit = 1u64 << (index % BLOCK);
        self.block == index / BLOCK
            && set.blocks.get(self.block as usize).is_some_and(|w| {
                let written = w.written.load(Ordering::Relaxed);
                self.clean & !written & !w.revoked.load(Ordering::Relaxed) & bit != 0
            })
    }
}

/// A copy of a claim of [`LocalClaims`]' list (a claim never changes once
/// made) with the address of its block's words, so that the usual write
/// goes to them without reading the set's block list (its address and
/// length) first.
#[derive(Clone, Copy)]
struct HotClaim {
    key: usize,
    block: u32,
    clean: u64,
    /// `&blocks[block]` of the list's claim of `key`, which keeps them
    /// alive; [`NO_WORDS`] for [`HotClaim::NONE`]. Never null, so that a
    /// write matching the key checks nothing else.
    words: *const BlockWords,
}

/// The words of [`HotClaim::NONE`]: nothing is clean there, so nothing is
/// ever stored into them.
static NO_WORDS: BlockWords = BlockWords {
    written: AtomicU64::new(0),
    revoked: AtomicU64::new(0),
};

impl HotClaim {
    /// No claim: no set lives at address 0, and nothing is clean.
    const NONE: Self = Self {
        key: 0,
        block: 0,
        clean: 0,
        words: &NO_WORDS,
    };

    /// Notes and publishes a write of `index` (of this claim's set) if it
    /// is clean here, not written yet and not revoked, and `also` (in the
    /// same block; `index` itself for a single write) is too, and notes and
    /// publishes `also` as well (its write is the caller's to record).
    #[inline(always)]
    fn write_pair(&self, index: u32, also: u32) -> bool {
        let bits = (1u64 << (index % BLOCK)) | (1u64 << (also % BLOCK));
        if self.block != index / BLOCK || self.block != also / BLOCK {
            return false;
        }
        // SAFETY: `words` is the static `NO_WORDS` (NONE) or the words of
        // a claim in the list (`LocalClaims` sets `hot` only so, and makes
        // it NONE before that claim leaves the list), whose `blocks` keeps
        // them alive.
        let words = unsafe { &*self.words };
        // The claimant is the `written` word's only writer while the claim
        // lasts, so this load reads its own last store.
        let written = words.written.load(Ordering::Relaxed);
        let writable = self.clean & !written & !words.revoked.load(Ordering::Relaxed);
        if writable & bits != bits {
            return false;
        }
        words.written.store(written | bits, Ordering::Relaxed);
        true
    }
}

/// A recording's claims: one block per set, or a few consecutive ones
/// (see [`AHEAD`]). Not shared: it lives in the recording (a command
/// buffer's tracker).
pub struct LocalClaims {
    list: Vec<LocalClaim>,
    /// A copy of the claim used last (a claim never changes once made),
    /// tried first: kept inline, so that the usual write reads it without
    /// going through the list (fewer loads beside the driver's command).
    /// [`HotClaim::NONE`] when it is not in the list any more.
    hot: HotClaim,
}

// SAFETY: what is not `Send` and `Sync` in it is the hot copy's pointer to
// block words that the list's `Arc` holds: atomics, shared between threads
// by design, and alive while the pointer is (see `HotClaim::words`).
unsafe impl Send for LocalClaims {}
// SAFETY: as for `Send`; `&LocalClaims` reads the pointer, never writes
// through it.
unsafe impl Sync for LocalClaims {}

impl Default for LocalClaims {
    fn default() -> Self {
        Self {
            list: Vec::new(),
            hot: HotClaim::NONE,
        }
    }
}

impl LocalClaims {
    /// Whether `index` of `set` is clean in a block this recording claimed.
    /// If so, the write is noted and published, and the caller records it
    /// without the lock: call this only right before recording the write.
    #[inline(always)]
    pub fn try_write(&mut self, set: &SampleSet, index: u32) -> bool {
        self.try_write_pair(set, index, index)
    }

    /// [`LocalClaims::try_write`] of two different indices of one block at
    /// once: both are noted and published as written, though only `index`
    /// is recorded now. For a write that the caller is certain to record
    /// later in this recording before anything can reset or write `also`
    /// (a pass attachment's end sample, recorded by the encoder's end or
    /// drop; a leaked encoder keeps its command buffer from ending, so the
    /// mark is never submitted without the write).
    #[inline(always)]
    pub fn try_write_both(&mut self, set: &SampleSet, index: u32, also: u32) -> bool {
        index != also && self.try_write_pair(set, index, also)
    }

    #[inline(always)]
    fn try_write_pair(&mut self, set: &SampleSet, index: u32, also: u32) -> bool {
        let key = set as *const SampleSet as usize;
        if self.hot.key == key && self.hot.block == index / BLOCK {
            return self.hot.write_pair(index, also);
        }
        self.try_write_cold(key, index, also)
    }

    /// [`LocalClaims::try_write_pair`] through a claim other than the hot
    /// one: of another set, or of another block of the same set (claimed
    /// ahead).
    #[inline(never)]
    fn try_write_cold(&mut self, key: usize, index: u32, also: u32) -> bool {
        let block = index / BLOCK;
        let Some(claim) = self.list.iter().find(|c| c.key == key && c.block == block) else {
            return false;
        };
        self.hot = claim.hot();
        self.hot.write_pair(index, also)
    }

    /// Whether `index` of `set` is clean in a block this recording claimed
    /// (a write of it would not need the lock), without writing it.
    pub fn is_clean(&self, set: &SampleSet, index: u32) -> bool {
        let key = set as *const SampleSet as usize;
        self.list
            .iter()
            .any(|c| c.key == key && c.is_clean(set, index))
    }

    /// Whether this recording holds a claim on `set`.
    pub fn holds(&self, set: &SampleSet) -> bool {
        let key = set as *const SampleSet as usize;
        self.list.iter().any(|c| c.key == key)
    }

    /// Ends this recording's claims on `set`, if any, with `slots` locked
    /// from `set` (which applied their writes). Returns an index that
    /// another recording wrote too (see the module docs), if any.
    pub fn release(
        &mut self,
        set: &SampleSet,
        slots: &mut SampleTable,
        ticket: &Ticket,
    ) -> Option<u32> {
        let mut conflict = None;
        self.release_written(set, slots, ticket, |c| conflict = conflict.or(c.conflict));
        conflict
    }

    /// [`LocalClaims::release`], also saying, block by block (`each`),
    /// which indices the recording wrote under the claims: for a backend
    /// that keeps state of its own per write and updates it here, under
    /// the lock, rather than per write.
    pub fn release_written(
        &mut self,
        set: &SampleSet,
        slots: &mut SampleTable,
        ticket: &Ticket,
        mut each: impl FnMut(ReleasedClaim),
    ) {
        let key = set as *const SampleSet as usize;
        if !self.list.iter().any(|c| c.key == key) {
            return;
        }
        if self.hot.key == key {
            self.hot = HotClaim::NONE;
        }
        // Its own writes only: another recording's claims stay theirs to
        // apply (see `SampleSet::lock_block`).
        let me = ticket.id();
        set.apply_claims_where(slots, |c| c.ticket == me);
        let mut k = 0;
        while k < self.list.len() {
            if self.list[k].key != key {
                k += 1;
                continue;
            }
            let local = self.list.swap_remove(k);
            let Some(t) = slots
                .claims
                .iter()
                .position(|c| c.block == local.block && c.ticket == ticket.id())
            else {
                continue;
            };
            slots.claims.swap_remove(t);
            let words = &set.blocks[local.block as usize];
            let written = words.written.load(Ordering::Relaxed);
            let both = words.revoked.load(Ordering::Relaxed) & written;
            each(ReleasedClaim {
                first: local.block * BLOCK,
                written,
                conflict: (both != 0).then(|| local.block * BLOCK + both.trailing_zeros()),
            });
        }
    }

    /// Claims the block of `index` in `set` for this recording, with `slots`
    /// locked from `set` (by [`SampleSet::lock`], or [`SampleSet::lock_block`]
    /// of `index`), unless another open recording holds it; and, unless the
    /// set's recordings interleave in its group (see [`AHEAD`]), the wholly
    /// fresh blocks after it in its group. Call it after
    /// [`LocalClaims::release`] of `set`, once the locked write of `index`
    /// is noted in `slots`.
    pub fn claim(&mut self, set: &SampleSet, slots: &mut SampleTable, index: u32, ticket: &Ticket) {
        let block = index / BLOCK;
        if let Some(pos) = slots.claims.iter().position(|c| c.block == block) {
            if slots.still_recording(slots.claims[pos].ticket) {
                return;
            }
            // Its recording ended without releasing it (leaked): once its
            // published writes are applied, it is done.
            set.apply_claims_where(slots, |c| c.block == block);
            slots.claims.swap_remove(pos);
        }
        let clean = clean_mask(set, slots, index, ticket.id());
        if clean == 0 {
            return;
        }
        self.push_claim(set, slots, block, clean, ticket.id());
        self.hot = self.list.last().map_or(HotClaim::NONE, LocalClaim::hot);
        if !slots.interleaved[(block / GROUP) as usize]
            && !others_claim_in_group(slots, block, ticket.id())
        {
            self.claim_ahead(set, slots, block, ticket.id());
        }
    }

    /// Claims the blocks after `block` in its group while each is wholly
    /// fresh and nobody's claim.
    #[inline(never)]
    fn claim_ahead(&mut self, set: &SampleSet, slots: &mut SampleTable, block: u32, me: u64) {
        // The blocks of the group up to the first one claimed (by a leaked
        // recording): no claim there, so nothing of theirs is unapplied...
        let blocks = set.count.div_ceil(BLOCK);
        let group_end = (block / GROUP + 1) * GROUP;
        let mut end = block + 1;
        while end < group_end.min(blocks) && !slots.claims.iter().any(|c| c.block == end) {
            end += 1;
        }
        // ...all fresh (usually): one pass over them.
        let first = ((block + 1) * BLOCK) as usize;
        let last = ((end * BLOCK) as usize).min(set.count as usize);
        if first >= last {
            return;
        }
        let indices = |b: u32| (b * BLOCK) as usize..((b + 1) * BLOCK).min(set.count) as usize;
        let fresh_to = if all_fresh(slots, first..last) {
            end
        } else {
            (block + 1..end)
                .find(|&b| !all_fresh(slots, indices(b)))
                .unwrap_or(end)
        };
        for b in block + 1..fresh_to {
            let n = ((b + 1) * BLOCK).min(set.count) - b * BLOCK;
            self.push_claim(set, slots, b, u64::MAX >> (BLOCK - n), me);
        }
    }

    /// Notes a claim of `block`, whose `clean` indices recording `me` may
    /// write without the lock, in the table and in this list.
    fn push_claim(
        &mut self,
        set: &SampleSet,
        slots: &mut SampleTable,
        block: u32,
        clean: u64,
        me: u64,
    ) {
        let words = &set.blocks[block as usize];
        words.written.store(0, Ordering::Relaxed);
        words.revoked.store(0, Ordering::Relaxed);
        slots.claims.push(TableClaim {
            block,
            ticket: me,
            applied: 0,
        });
        self.list.push(LocalClaim {
            key: set as *const SampleSet as usize,
            block,
            clean,
            blocks: set.blocks.clone(),
        });
    }

    /// Whether the recording holds no claim.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Forgets every claim without releasing it: for a recording whose sets
    /// are gone or released otherwise.
    pub fn clear(&mut self) {
        self.hot = HotClaim::NONE;
        self.list.clear();
    }
}

/// Whether a recording other than `me` holds a claim on `set` in the group
/// of `block`: recordings whose indices interleave there (scopes from
/// several threads, or indices handed out by a shared counter), whose next
/// writes would land in blocks claimed ahead and take the lock there.
/// Recordings into ranges of their own meet only where the ranges do.
fn others_claim_in_group(slots: &SampleTable, block: u32, me: u64) -> bool {
    let group = block / GROUP;
    slots
        .claims
        .iter()
        .any(|c| c.ticket != me && c.block / GROUP == group && slots.still_recording(c.ticket))
}

/// The indices of the block of `written` (the index whose locked write
/// claims it) that recording `me` may write without a reset and without
/// conflict: exactly those that [`SampleSet::check_write`] would accept
/// without a reset.
fn clean_mask(set: &SampleSet, slots: &SampleTable, written: u32, me: u64) -> u64 {
    let block = written / BLOCK;
    let first = (block * BLOCK) as usize;
    let end = (first + BLOCK as usize).min(set.count as usize);
    let r = first..end;
    // The usual block: none open, none another recording's, and none dirty
    // but `written` (the index whose locked write is claiming the block).
    // Folded without early exits, so that the compiler vectorizes them.
    let w = written as usize;
    if (first..end).contains(&w) {
        let dirty: u32 = slots.dirty[r.clone()].iter().map(|&d| u32::from(d)).sum();
        let open = slots.open[r.clone()].iter().fold(false, |a, &o| a | o);
        // Usually every other index is fresh (0), or every one is this
        // recording's; any other mix takes the general way below.
        let or = |s: &[u64]| s.iter().fold(0, |a, &rec| a | rec);
        let others = or(&slots.rec[first..w]) | or(&slots.rec[w + 1..end]);
        let not_mine = || {
            slots.rec[r.clone()]
                .iter()
                .fold(0, |a, &rec| a | (rec ^ me))
        };
        let all = u64::MAX >> (BLOCK as usize - (end - first));
        if dirty == u32::from(slots.dirty[w]) && !open && (others == 0 || not_mine() == 0) {
            return all & !(u64::from(slots.dirty[w]) << (w - first));
        }
        // Next most usual: every index fresh or this recording's, some of
        // them dirty (a pass's start and end, written at once under the
        // lock): the clean ones are those not dirty.
        // Counted, not or-ed, so that the compiler vectorizes it (`me` is
        // never 0: no index is both).
        let fresh_or_mine: u32 = slots.rec[r.clone()]
            .iter()
            .map(|&rec| u32::from(rec == 0) + u32::from(rec == me))
            .sum();
        if !open && fresh_or_mine as usize == end - first {
            return all & !bits_of(&slots.dirty[r]);
        }
    }
    // Branch-free over the block; indices another recording wrote are
    // looked at one by one below (rare: blocks are usually one recording's).
    let (mut writable, mut others) = (0u64, 0u64);
    for (j, ((&dirty, &open), &rec)) in slots.dirty[r.clone()]
        .iter()
        .zip(&slots.open[r.clone()])
        .zip(&slots.rec[r])
        .enumerate()
    {
        let free = !(dirty | open);
        let other = rec != 0 && rec != me;
        writable |= u64::from(free & !other) << j;
        others |= u64::from(free & other) << j;
    }
    // Recordings repeat along a block: ask about each one once.
    let mut last = (0u64, false);
    while others != 0 {
        let j = others.trailing_zeros();
        others &= others - 1;
        let rec = slots.rec[first + j as usize];
        if rec != last.0 {
            last = (rec, !slots.still_recording(rec));
        }
        if last.1 {
            writable |= 1 << j;
        }
    }
    writable
}

with_avx2! {
    /// Whether every index of `r` is fresh: not dirty, not open, written by
    /// no recording since its last host reset.
    fn all_fresh / all_fresh_avx2 = all_fresh_loop(slots: &SampleTable, r: Range<usize>) -> bool;
}

#[inline(always)]
fn all_fresh_loop(slots: &SampleTable, r: Range<usize>) -> bool {
    // Folded without early exits, so that the compiler vectorizes them.
    let dirty = slots.dirty[r.clone()].iter().fold(false, |a, &d| a | d);
    let open = slots.open[r.clone()].iter().fold(false, |a, &o| a | o);
    let rec = slots.rec[r].iter().fold(0, |a, &rec| a | rec);
    !(dirty | open | (rec != 0))
}

/// Bit `j` set where `flags[j]` is (at most 64 flags).
fn bits_of(flags: &[bool]) -> u64 {
    // SAFETY: a `bool` is one byte, 0 or 1, aligned as a `u8`: every `bool`
    // slice is a valid `u8` slice of the same length.
    let bytes = unsafe { std::slice::from_raw_parts(flags.as_ptr().cast::<u8>(), flags.len()) };
    let mut bits = 0u64;
    for (k, chunk) in bytes.chunks(8).take(8).enumerate() {
        let mut word = [0u8; 8];
        word[..chunk.len()].copy_from_slice(chunk);
        // Byte `i` (0 or 1) of the word lands on bit 56 + i of the product.
        let packed = u64::from_le_bytes(word).wrapping_mul(0x0102_0408_1020_4080) >> 56;
        bits |= packed << (8 * k);
    }
    bits
}

impl SampleSet {
    /// Applies the published writes that the table has not seen of the
    /// claims that `pick` picks.
    #[inline]
    pub(crate) fn apply_claims_where(
        &self,
        slots: &mut SampleTable,
        pick: impl Fn(&TableClaim) -> bool,
    ) {
        // A run of consecutive indices of one recording, marked at once:
        // blocks claimed together are consecutive and usually written
        // whole, so their writes make one run, not one per block.
        let mut run = (0u32, 0u32, 0u64);
        let links = self.set != CommonCounterSet::Timestamp || slots.aliases;
        for k in 0..slots.claims.len() {
            let c = &slots.claims[k];
            if !pick(c) {
                continue;
            }
            let written = self.blocks[c.block as usize]
                .written
                .load(Ordering::Relaxed);
            let new = written & !c.applied;
            if new == 0 {
                continue;
            }
            let (first, id) = (c.block * BLOCK, c.ticket);
            slots.claims[k].applied = written;
            let mut m = new;
            while m != 0 {
                let start = m.trailing_zeros();
                let len = (m >> start).trailing_ones();
                m &= !(((1u128 << len) - 1) << start) as u64;
                let (a, b) = (first + start, first + start + len);
                if a == run.1 && id == run.2 {
                    run.1 = b;
                } else {
                    slots.mark_run_recorded(run.0..run.1, run.2, links);
                    run = (a, b, id);
                }
            }
        }
        slots.mark_run_recorded(run.0..run.1, run.2, links);
    }
}

impl SampleTable {
    /// [`SampleTable::mark_recorded`] of the indices in `run`, timestamps
    /// by recording `rec`, filled at once.
    ///
    /// The link, its generation, the chain and the occlusion flag are
    /// filled only where `links` says they may differ from what a write
    /// leaves there: in a timestamp set without aliases since its last
    /// whole reset (the usual profiler page or scope buffer) every index
    /// already holds no link, generation 0, chain 0 and no occlusion
    /// (`SampleSet::host_reset_table` skips them too). This runs under the
    /// set's lock, where threads recording into one set wait for each
    /// other, so it writes only the lines it must: 14 bytes an index
    /// instead of 33.
    fn mark_run_recorded(&mut self, run: Range<u32>, rec: u64, links: bool) {
        let r = run.start as usize..run.end as usize;
        if r.is_empty() {
            return;
        }
        for g in &mut self.gen[r.clone()] {
            *g = g.wrapping_add(1);
        }
        self.state[r.clone()].fill(super::SlotState::Recorded);
        self.rec[r.clone()].fill(rec);
        self.dirty[r.clone()].fill(true);
        self.seen[r.clone()].fill(false);
        if links {
            self.link[r.clone()].fill(NONE);
            self.link_gen[r.clone()].fill(0);
            self.occlusion[r.clone()].fill(false);
            self.chain[r].fill(0);
        }
    }

    /// Notes that recording `rec` wrote or reset `index`: revoked from a
    /// claim on its block by another recording.
    #[inline(never)]
    pub(crate) fn note_foreign(&mut self, index: u32, rec: u64) {
        let block = index / BLOCK;
        for c in &self.claims {
            if c.block == block && c.ticket != rec {
                self.interleaved[(block / GROUP) as usize] = true;
                self.blocks[block as usize]
                    .revoked
                    .fetch_or(1 << (index % BLOCK), Ordering::Relaxed);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::bits_of;

    /// The AVX2 build of the freshness check agrees with the portable one,
    /// and both find a single dirty, open or recorded index anywhere in a
    /// range of three blocks.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_avx2_freshness_check_matches_the_portable_one() {
        use super::{all_fresh_avx2, all_fresh_loop};
        if !std::arch::is_x86_feature_detected!("avx2") {
            eprintln!("no AVX2 on this CPU: nothing to compare");
            return;
        }
        let n = 3 * 64 + 5;
        let mut t = super::SampleTable::new(n as u32).unwrap();
        let check = |t: &super::SampleTable, r: std::ops::Range<usize>, want: bool| {
            // SAFETY: AVX2 was detected above.
            let avx2 = unsafe { all_fresh_avx2(t, r.clone()) };
            assert_eq!((all_fresh_loop(t, r.clone()), avx2), (want, want), "{r:?}");
        };
        check(&t, 0..n, true);
        for i in 0..n {
            for field in 0..3 {
                match field {
                    0 => t.dirty[i] = true,
                    1 => t.open[i] = true,
                    _ => t.rec[i] = 7,
                }
                check(&t, 0..n, false);
                check(&t, i..i + 1, false);
                check(&t, (i + 1).min(n)..n, true);
                t.dirty[i] = false;
                t.open[i] = false;
                t.rec[i] = 0;
            }
        }
    }

    #[test]
    fn bits_of_sets_the_bit_of_each_flag_and_no_other() {
        for n in [0usize, 1, 7, 8, 9, 31, 63, 64] {
            let reference = |f: &[bool]| {
                f.iter()
                    .enumerate()
                    .fold(0u64, |a, (j, &b)| a | (u64::from(b) << j))
            };
            let all = vec![true; n];
            assert_eq!(bits_of(&all), reference(&all), "{n} set");
            let alternating: Vec<bool> = (0..n).map(|j| j % 3 == 1).collect();
            assert_eq!(bits_of(&alternating), reference(&alternating));
            for one in 0..n {
                let single: Vec<bool> = (0..n).map(|j| j == one).collect();
                assert_eq!(bits_of(&single), 1u64 << one, "{n} flags, flag {one}");
            }
        }
    }
}
