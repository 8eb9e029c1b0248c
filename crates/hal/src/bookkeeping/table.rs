//! The per-sample bookkeeping of one sample buffer or heap.

use super::ticket::{Phase, Ticket};
use std::ops::Range;

/// No index: the link of a chain's first sample.
pub const NONE: u32 = u32::MAX;

/// Why an index cannot be written now: another open recording wrote it.
/// (Also used by backends in their own checks.)
pub const RECORDED_ELSEWHERE: &str = "was recorded in another command buffer that has not been submitted yet: submit (or drop) that one first, or use another index";
/// Why an index cannot be written now: its statistic query is open.
pub const STILL_OPEN: &str =
    "is still being counted (its statistic query is open): sample another index";
pub(crate) const NOT_SUBMITTED: &str =
    "is recorded in a command buffer that has not been submitted yet: submit or drop it first";
pub(crate) const PENDING: &str = "is still pending on the GPU: wait for its submission first";
/// Field map entry: the device does not count this field.
pub const ABSENT: u8 = 0xFF;
/// Field map entry: the field comes from the occlusion query.
pub const OCCLUSION: u8 = 0xFE;

/// What an index holds, as far as the bookkeeping knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum SlotState {
    /// Never written since creation or the last reset.
    Fresh = 0,
    /// A write was recorded.
    Recorded = 1,
    /// A heap entry invalidated since (resolves to 0).
    Invalidated = 2,
    /// A coalesced relaxed write: shares the timestamp of the index in
    /// `link`.
    Alias = 3,
}

/// The per-index bookkeeping of one sample buffer or heap. The recording
/// code of a backend updates it under [`super::SampleSet::slots`]' lock, as
/// it records.
pub struct SampleTable {
    /// Each index's state.
    pub state: Vec<SlotState>,
    /// The previous element of a statistic chain, or the target of an
    /// alias; [`NONE`] where there is none.
    pub link: Vec<u32>,
    /// The generation of `link` when the link was made: a link whose
    /// target has been recorded again since is broken.
    pub link_gen: Vec<u32>,
    /// Grows each time the index is recorded or reset.
    pub gen: Vec<u32>,
    /// Whether the index's statistic sample also counts occlusion.
    pub occlusion: Vec<bool>,
    /// The id of the ticket of the command buffer that last recorded a write
    /// or a reset of the index; 0 after a host reset.
    pub rec: Vec<u64>,
    /// Whether the index's query may hold a value, so that writing it again
    /// needs a reset first: set by every recorded write, cleared by resets.
    pub dirty: Vec<bool>,
    /// Whether the index's statistic query was begun and not yet ended.
    pub open: Vec<bool>,
    /// Whether a CPU resolve saw the index written (recorded, not stale,
    /// its query available) since it was last recorded or reset: its query
    /// stays available until it is reset, so a host reset need not ask the
    /// driver again. Cleared by every write, alias, reset and abandon.
    pub(crate) seen: Vec<bool>,
    /// For statistics: the chain the sample belongs to (see the module
    /// docs); samples of different chains are not comparable.
    pub chain: Vec<u64>,
    /// Tickets of command buffers that recorded into these samples, while
    /// they are still recording or submitted and not seen finished (pruned
    /// of the others as it grows).
    pub(crate) live: Vec<Ticket>,
    /// Tickets of command buffers with a GPU resolve of these samples: no
    /// host reset may happen before they finish, or the resolve, which waits
    /// on the GPU for the queries it was recorded against, would wait for
    /// ever.
    pub(crate) gpu_resolves: Vec<Ticket>,
    /// The ticket of an inline reset that the GPU may not have executed yet
    /// (the old value may still be visible until then). Set through
    /// [`SampleTable::set_ticket`] and [`SampleTable::clear_ticket`] only, so that
    /// `tickets` stays right.
    pub(crate) ticket: Vec<Option<Ticket>>,
    /// How many entries of `ticket` are `Some`: while 0, no index can be
    /// stale and resolves skip the ticket checks.
    pub(crate) tickets: usize,
    /// Whether an index may be an alias (set by `mark_alias`, cleared by a
    /// host reset of every index): while not, timestamp indices link nowhere.
    pub(crate) aliases: bool,
    /// Reused read destinations of the main and the occlusion queries (see
    /// [`super::QueryRead::read_into`]).
    pub(crate) scratch: Vec<u64>,
    pub(crate) occlusion_scratch: Vec<u64>,
    /// Blocks claimed by recordings for writes without the lock (see
    /// [`super::claim`]).
    pub(crate) claims: Vec<super::claim::TableClaim>,
    /// For each group of blocks ([`super::claim::GROUP`]): whether a
    /// recording wrote into a block of it that another recording had
    /// claimed, since the last host reset of every index of the group: the
    /// recordings' indices interleave there, so none claims blocks ahead in
    /// it (see [`super::claim::AHEAD`]).
    pub(crate) interleaved: Vec<bool>,
    /// The words of every block, shared with [`super::SampleSet::blocks`].
    pub(crate) blocks: std::sync::Arc<[super::claim::BlockWords]>,
}

impl SampleTable {
    /// The bookkeeping of `count` samples, none written; `None` where the
    /// host cannot allocate it.
    pub fn new(count: u32) -> Option<Self> {
        let n = count as usize;
        Some(Self {
            state: fallible_vec(n, SlotState::Fresh)?,
            link: fallible_vec(n, NONE)?,
            link_gen: fallible_vec(n, 0)?,
            gen: fallible_vec(n, 0)?,
            occlusion: fallible_vec(n, false)?,
            rec: fallible_vec(n, 0)?,
            dirty: fallible_vec(n, false)?,
            open: fallible_vec(n, false)?,
            seen: fallible_vec(n, false)?,
            chain: fallible_vec(n, 0)?,
            live: Vec::new(),
            gpu_resolves: Vec::new(),
            ticket: fallible_vec(n, None)?,
            tickets: 0,
            aliases: false,
            scratch: Vec::new(),
            occlusion_scratch: Vec::new(),
            claims: Vec::new(),
            interleaved: fallible_vec(count.div_ceil(super::claim::GROUP_INDICES) as usize, false)?,
            blocks: super::claim::block_words(count)?,
        })
    }

    /// Notes a recorded write of `index` by ticket `rec`, in statistic chain
    /// `chain` (0 for timestamps) after chain element `link` ([`NONE`] at a
    /// chain's start), counting `occlusion` too.
    #[inline]
    pub fn mark_recorded(&mut self, index: u32, link: u32, occlusion: bool, rec: u64, chain: u64) {
        if !self.claims.is_empty() {
            self.note_foreign(index, rec);
        }
        self.mark_recorded_unclaimed(index, link, occlusion, rec, chain);
    }

    /// [`SampleTable::mark_recorded`] without the check against claims.
    #[inline]
    pub(crate) fn mark_recorded_unclaimed(
        &mut self,
        index: u32,
        link: u32,
        occlusion: bool,
        rec: u64,
        chain: u64,
    ) {
        let i = index as usize;
        self.gen[i] = self.gen[i].wrapping_add(1);
        self.state[i] = SlotState::Recorded;
        self.link[i] = link;
        self.link_gen[i] = if link == NONE {
            0
        } else {
            self.gen[link as usize]
        };
        self.occlusion[i] = occlusion;
        self.rec[i] = rec;
        self.dirty[i] = true;
        self.seen[i] = false;
        self.chain[i] = chain;
    }

    /// Notes that relaxed write `index` shares the timestamp of `target`,
    /// recorded by ticket `rec`.
    pub fn mark_alias(&mut self, index: u32, target: u32, rec: u64) {
        self.mark_aliases(&[index], target, rec);
    }

    /// [`SampleTable::mark_alias`] of every index of `indices` (none of
    /// them `target`): a pass's relaxed writes into one heap, at its end.
    /// Another recording's claims are looked for once, not per index.
    pub fn mark_aliases(&mut self, indices: &[u32], target: u32, rec: u64) {
        if self.claims.iter().any(|c| c.ticket != rec) {
            for &index in indices {
                self.note_foreign(index, rec);
            }
        }
        self.aliases = true;
        let target_gen = self.gen[target as usize];
        // Every field cut to one length, so that an index (checked against
        // the set when it was written) is bounds-checked once, not once per
        // field.
        let n = self.gen.len();
        let (gen, state, link) = (
            &mut self.gen[..n],
            &mut self.state[..n],
            &mut self.link[..n],
        );
        let (link_gen, occlusion, seen, recs) = (
            &mut self.link_gen[..n],
            &mut self.occlusion[..n],
            &mut self.seen[..n],
            &mut self.rec[..n],
        );
        for &index in indices {
            let i = index as usize;
            gen[i] = gen[i].wrapping_add(1);
            state[i] = SlotState::Alias;
            link[i] = target;
            link_gen[i] = target_gen;
            occlusion[i] = false;
            seen[i] = false;
            recs[i] = rec;
        }
    }

    /// Notes a recorded reset of `index` by `ticket`: until the ticket is
    /// done, an older value may still be visible, so the index resolves as
    /// not ready.
    pub fn note_reset(&mut self, index: u32, ticket: &Ticket) {
        if !self.claims.is_empty() {
            self.note_foreign(index, ticket.id());
        }
        let i = index as usize;
        self.set_ticket(i, ticket);
        self.dirty[i] = false;
        self.seen[i] = false;
        self.rec[i] = ticket.id();
    }

    /// Notes a GPU resolve of these samples recorded by `ticket`: no host
    /// reset may happen before it finishes.
    pub fn add_gpu_resolve(&mut self, ticket: &Ticket) {
        self.gpu_resolves.push(ticket.clone());
    }

    /// The first index of `first..first+count` whose statistic query is
    /// open.
    pub fn first_open(&self, first: u32, count: u32) -> Option<u32> {
        (first..first + count).find(|&i| self.open[i as usize])
    }

    /// Whether the GPU may still show an older value for `i`.
    pub fn stale(&self, i: usize) -> bool {
        self.tickets != 0 && self.ticket[i].as_ref().is_some_and(|t| !t.is_done())
    }

    /// Whether ticket `id` belongs to a command buffer that recorded into
    /// these samples and is still being recorded.
    pub fn still_recording(&self, id: u64) -> bool {
        id != 0
            && self
                .live
                .iter()
                .any(|t| t.id() == id && t.phase() == Phase::Recording)
    }

    /// Whether any command buffer that recorded into these samples is still
    /// being recorded.
    pub fn any_recording(&self) -> bool {
        self.live.iter().any(|t| t.phase() == Phase::Recording)
    }

    /// Notes that `ticket`'s command buffer records into these samples.
    pub fn register(&mut self, ticket: &Ticket) {
        self.live
            .retain(|t| matches!(t.phase(), Phase::Recording | Phase::Submitted));
        self.live.push(ticket.clone());
    }

    /// The first index of `range` last written or reset by a recording that
    /// was submitted and is not seen finished yet (its ticket is
    /// [`Phase::Submitted`]). Reads only the table: no driver call.
    pub fn first_submitted(&self, range: Range<usize>) -> Option<usize> {
        let submitted = |id: u64| {
            self.live
                .iter()
                .any(|t| t.id() == id && t.phase() == Phase::Submitted)
        };
        if !self.live.iter().any(|t| t.phase() == Phase::Submitted) {
            return None;
        }
        // Recordings repeat along a range: ask about each one once.
        let mut last = (0u64, false);
        range.into_iter().find(|&i| {
            let rec = self.rec[i];
            if rec == 0 {
                return false;
            }
            if rec != last.0 {
                last = (rec, submitted(rec));
            }
            last.1
        })
    }

    /// A GPU resolve of these samples that has not finished, if any.
    pub fn pending_gpu_resolve(&mut self) -> bool {
        self.gpu_resolves
            .retain(|t| !matches!(t.phase(), Phase::Done | Phase::Abandoned));
        !self.gpu_resolves.is_empty()
    }

    /// Forgets what the abandoned command buffer of ticket `id` recorded: its
    /// commands never ran, so its samples were never written. Their queries
    /// stay dirty (an older value may be there), so the next write resets
    /// them first.
    pub fn abandon(&mut self, id: u64) {
        for i in 0..self.rec.len() {
            if self.rec[i] == id {
                self.forget(i, id);
            }
        }
    }

    /// Notes that the GPU wrote nothing into timestamp `index` for the
    /// recording of ticket `id`, which recorded the write and is done: a
    /// backend without an availability word learns so from the value its
    /// read-back found (wgpu: a pass's timestamp write handed out and never
    /// used in a pass reads as 0). The index then resolves as never written
    /// ([`SlotState::Fresh`]: `NotWritten`), not as pending for ever, and
    /// stays dirty. Returns whether it did: a later write or reset of the
    /// index since (its `rec` is another ticket's) leaves it as it is.
    pub fn forget_unwritten(&mut self, index: u32, id: u64) -> bool {
        let i = index as usize;
        if id == 0 || self.rec.get(i) != Some(&id) || self.state[i] != SlotState::Recorded {
            return false;
        }
        self.forget(i, id);
        true
    }

    /// Forgets index `i`'s write by ticket `id`: never written since, its
    /// query dirty (an older value may be there, so the next write resets
    /// it first).
    fn forget(&mut self, i: usize, id: u64) {
        self.rec[i] = 0;
        self.state[i] = SlotState::Fresh;
        self.gen[i] = self.gen[i].wrapping_add(1);
        self.link[i] = NONE;
        self.open[i] = false;
        self.occlusion[i] = false;
        self.dirty[i] = true;
        self.seen[i] = false;
        if self.ticket[i].as_ref().is_some_and(|t| t.id() == id) {
            self.clear_ticket(i);
        }
    }

    /// Notes that index `i` may show an older value until `ticket` is done.
    pub fn set_ticket(&mut self, i: usize, ticket: &Ticket) {
        if self.ticket[i].is_none() {
            self.tickets += 1;
        }
        self.ticket[i] = Some(ticket.clone());
    }

    /// Forgets the ticket of index `i` (see [`SampleTable::set_ticket`]).
    pub fn clear_ticket(&mut self, i: usize) {
        if self.ticket[i].take().is_some() {
            self.tickets -= 1;
        }
    }

    /// Drops the tickets of `range` that are already set: a set ticket is
    /// never unset, so such an index can no longer be stale, and later
    /// resolves need not look at it (nor at any ticket once none is left).
    pub fn prune_tickets(&mut self, range: Range<usize>) {
        if self.tickets == 0 {
            return;
        }
        for i in range {
            if self.ticket[i].as_ref().is_some_and(|t| t.is_done()) {
                self.clear_ticket(i);
            }
        }
    }
}

/// `n` copies of `value`, or `None` where the host cannot allocate them.
fn fallible_vec<T: Clone>(n: usize, value: T) -> Option<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).ok()?;
    v.resize(n, value);
    Some(v)
}
