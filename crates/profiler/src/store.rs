//! What a frame records into, shared by the frame and the ring slot that
//! lends it: pages of sample buffers with a record per scope
//! ([`Page`], [`RecordCell`]), the slot's store of them and of the
//! frame's drop counts ([`FrameStore`]), and the recorders the frame's
//! scopes were recorded on ([`Recorders`]).

use crate::result::DropCounts;
use crate::shared_str::SharedStr;
use gpu_counters_hal::bookkeeping::{Phase, Ticket};
use gpu_counters_hal::timeline::PassKind;
use gpu_counters_hal::BackendDevice;
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

/// A backend's sample buffer type, for the device type `D`.
pub(crate) type Buf<D> = <<D as BackendDevice>::Backend as gpu_counters_hal::Backend>::SampleBuffer;
/// A backend's recorder type (what commands are recorded into).
pub type Recorder<D> = <<D as BackendDevice>::Backend as gpu_counters_hal::Backend>::Recorder;
/// A backend's submission type (a recorder handed to the device's queue).
pub type Submission<D> = <<D as BackendDevice>::Backend as gpu_counters_hal::Backend>::Submission;

/// One set of sample buffers, `2 * max_scopes_per_frame` samples each, and
/// the records of the scopes that sample them.
pub(crate) struct Page<D: BackendDevice> {
    pub(crate) timestamps: Buf<D>,
    pub(crate) statistics: Option<Buf<D>>,
    /// `max_scopes_per_frame` records: the one of scope `id` at `id % per`.
    pub(crate) records: Box<[RecordCell]>,
}

impl<D: BackendDevice> Page<D> {
    /// Record `at`, without the bounds check: a scope's begin and end each
    /// look theirs up, next to the driver's command.
    ///
    /// # Safety
    /// `at` is below `max_scopes_per_frame`, the number of records.
    #[inline(always)]
    #[allow(unsafe_code)]
    pub(crate) unsafe fn record_unchecked(&self, at: u32) -> &RecordCell {
        debug_assert!((at as usize) < self.records.len());
        // SAFETY: per the contract, `at` is inside `records`.
        unsafe { self.records.get_unchecked(at as usize) }
    }
}

/// No scope: the parent of an outermost scope.
pub(crate) const NO_SCOPE: u32 = u32::MAX;

/// The most scope ids a recorder claims at once (see `Frame::claim`): the
/// scopes of one group of timestamp blocks
/// ([`gpu_counters_hal::bookkeeping::GROUP_INDICES`], two samples a
/// scope), so that a full claim's samples are a whole group, written by its
/// recorder alone: its first locked write claims the whole group (the
/// block it is in and those ahead of it), and the rest of the claim's
/// writes go without the lock.
pub(crate) const MAX_CLAIM: u32 = gpu_counters_hal::bookkeeping::GROUP_INDICES / 2;

/// What became of a scope, in its record's `state`.
pub(crate) mod state {
    /// Not recorded in this frame: never claimed, claimed by a recorder
    /// that did not use it, or claimed past the room (that scope is counted
    /// in `DropCounts::over_capacity`).
    pub(crate) const UNCLAIMED: u8 = 0;
    /// Begun, not ended (yet).
    pub(crate) const OPEN: u8 = 1;
    /// Both ends recorded.
    pub(crate) const ENDED: u8 = 2;
    /// Recording a sample failed; counted in `DropCounts::failed`.
    pub(crate) const FAILED: u8 = 3;
    /// Its [`Scope`](super::Scope) was dropped unended: counted as not
    /// ended, and skipped as a parent.
    pub(crate) const DROPPED: u8 = 4;
}

/// A scope's strings for its result.
#[derive(Debug, Clone)]
pub(crate) struct ScopeMeta {
    pub(crate) label: SharedStr,
    /// The name of the thread that began it.
    pub(crate) thread: SharedStr,
}

/// The kinds of [`PassKind`] in a record's word, in this order.
const KINDS: [PassKind; 4] = [
    PassKind::Compute,
    PassKind::Render,
    PassKind::Blit,
    PassKind::Scope,
];

/// A record's word: the parent (bits 0..32), the state (32..40), the kind
/// (40..48, an index of [`KINDS`]) and whether statistics are sampled (bit
/// 48), so that beginning a scope stores them at once.
#[inline]
pub(crate) fn pack(parent: u32, state: u8, kind: PassKind, statistics: bool) -> u64 {
    let kind = match kind {
        PassKind::Compute => 0u64,
        PassKind::Render => 1,
        PassKind::Blit => 2,
        PassKind::Scope => 3,
    };
    u64::from(parent) | u64::from(state) << 32 | kind << 40 | u64::from(statistics) << 48
}

const STATE_BITS: u64 = 0xff << 32;

/// A record's word as read once ([`RecordCell::load`]), decoded.
#[derive(Clone, Copy)]
pub(crate) struct RecordWord(pub(crate) u64);

impl RecordWord {
    /// What became of the scope ([`state`]).
    #[inline]
    pub(crate) fn state(self) -> u8 {
        (self.0 >> 32) as u8
    }

    /// The innermost scope open on the recorder when this one began.
    #[inline]
    pub(crate) fn parent(self) -> u32 {
        self.0 as u32
    }

    /// The scope's kind.
    #[inline]
    pub(crate) fn kind(self) -> PassKind {
        KINDS[((self.0 >> 40) & 3) as usize]
    }

    /// The same word with state `state`.
    #[inline]
    pub(crate) fn with_state(self, state: u8) -> Self {
        Self(self.0 & !STATE_BITS | u64::from(state) << 32)
    }

    /// Whether the scope's statistics are sampled: the profiler's option,
    /// and the recorder able to where the scope began
    /// ([`BackendRecorder::samples_statistics`]).
    #[inline]
    pub(crate) fn statistics(self) -> bool {
        self.0 >> 48 & 1 != 0
    }
}

/// One scope's record, kept with its page and reused frame after frame.
///
/// `meta` is written once per frame, by [`Frame::scope`] on the recorder
/// the scope's id was handed to (from the frame's counter, alone or in a
/// block that only that recorder's `Stack` holds), before the id is put
/// on the recorder's stack. It is read only by the scope itself (for its errors),
/// by a later scope on the same recorder (for its errors; the recorder is
/// `&mut`, so it was handed over, with a happens-before edge, from the
/// thread that wrote the cell), and, once the frame ended, by the profiler
/// (ending a frame takes it by value, so no scope of it is alive). `word`
/// has one writer at a time too: the scope's recorder while the frame
/// records, the profiler once it ended.
pub(crate) struct RecordCell {
    pub(crate) meta: UnsafeCell<ScopeMeta>,
    /// The innermost scope open on the recorder when this one began, the
    /// scope's state, kind and statistics flag ([`pack`]).
    pub(crate) word: AtomicU64,
}

#[allow(unsafe_code)]
// SAFETY: `meta` is written only by the one recorder holding the id, and
// read only after that write happened-before the read (see `RecordCell`);
// `parent` and `state` are atomics. `ScopeMeta` itself is `Send + Sync`.
unsafe impl Sync for RecordCell {}

impl RecordCell {
    pub(crate) fn new() -> Self {
        Self {
            meta: UnsafeCell::new(ScopeMeta {
                label: SharedStr::default(),
                thread: SharedStr::default(),
            }),
            word: AtomicU64::new(pack(NO_SCOPE, state::UNCLAIMED, PassKind::Compute, false)),
        }
    }

    #[inline]
    pub(crate) fn state(&self) -> u8 {
        self.load().state()
    }

    /// The record's word, read once (an atomic load is never merged with
    /// another, so reading several fields through the accessors reads it
    /// several times).
    #[inline]
    pub(crate) fn load(&self) -> RecordWord {
        RecordWord(self.word.load(Ordering::Relaxed))
    }

    #[inline]
    pub(crate) fn parent(&self) -> u32 {
        self.load().parent()
    }

    /// Stores `word`; by the word's one writer.
    #[inline]
    pub(crate) fn store(&self, word: RecordWord) {
        self.word.store(word.0, Ordering::Relaxed);
    }

    /// Sets the state, keeping the rest; by the word's one writer.
    #[inline]
    pub(crate) fn set_state(&self, state: u8) {
        let w = self.word.load(Ordering::Relaxed);
        self.word
            .store(w & !STATE_BITS | u64::from(state) << 32, Ordering::Relaxed);
    }

    /// Makes the cell unrecorded, for the slot's next frame: a plain store
    /// (nothing reads the rest of an unclaimed cell's word, and beginning
    /// a scope writes all of it).
    pub(crate) fn reset(&self) {
        self.word.store(
            pack(NO_SCOPE, state::UNCLAIMED, PassKind::Compute, false),
            Ordering::Relaxed,
        );
    }

    /// The scope's label, kind, thread and statistics flag.
    ///
    /// # Safety
    /// The cell's frame has ended (ending a frame takes it by value, so no
    /// scope of it is being recorded), or the caller holds the recorder on
    /// whose stack the cell's scope was put, or is the scope.
    #[inline]
    #[allow(unsafe_code)]
    pub(crate) unsafe fn meta(&self) -> &ScopeMeta {
        // SAFETY: per the contract, the one write of this frame
        // happened-before, and no write can come while the borrow lives.
        unsafe { &*self.meta.get() }
    }
}

/// What a ring slot lends to the frame that records into it, shared with
/// the profiler: its pages of sample buffers and records, and the counts of
/// the scopes the frame dropped as it recorded. While the frame records, the
/// profiler reads it only to count what the frame held if it abandons it
/// (see [`Profiler`]): the records' words and the counts, all atomics.
pub(crate) struct FrameStore<D: BackendDevice> {
    /// Appended to while a frame records (under [`WhenFull::Grow`]); read
    /// without a lock.
    pub(crate) pages: boxcar::Vec<Page<D>>,
    /// Scopes begun without a slot ([`DropCounts::no_slot`]).
    pub(crate) no_slot: AtomicU32,
    /// Scopes past the room ([`DropCounts::over_capacity`]).
    pub(crate) over_capacity: AtomicU32,
    /// Scopes whose recording failed ([`DropCounts::failed`]).
    pub(crate) failed: AtomicU32,
    /// Set, under the profiler's state lock, when the profiler abandons the
    /// frame recording into it: the store is the frame's alone from then on,
    /// and its slot has another.
    pub(crate) abandoned: AtomicBool,
    /// What the profiler counted of it when it abandoned it
    /// ([`Held::total`]): the frame's end counts the rest.
    pub(crate) counted: AtomicU32,
}

/// What a frame's scopes came to, read from its store while it may still be
/// recording: every scope begun or dropped is in one of these.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Held {
    /// Begun, with a record that has not failed (open, ended or dropped).
    pub(crate) begun: u32,
    /// Begun, with a record that failed.
    pub(crate) failed: u32,
    /// Dropped without a slot.
    pub(crate) no_slot: u32,
    /// Dropped past the room.
    pub(crate) over_capacity: u32,
}

impl Held {
    /// All of them.
    pub(crate) fn total(&self) -> u32 {
        self.begun + self.failed + self.no_slot + self.over_capacity
    }
}

/// The recorders a frame's scopes were recorded on, each noted once, when
/// it first takes scope ids of the frame: through their tickets
/// ([`BackendRecorder::ticket`]) the profiler can tell when the GPU
/// finished the frame without queueing a marker of its own behind it.
#[derive(Default)]
pub(crate) struct Recorders {
    tickets: Vec<Ticket>,
    /// A recorder without a ticket took scope ids.
    untracked: bool,
}

impl Recorders {
    pub(crate) fn note(&mut self, ticket: Option<&Ticket>) {
        match ticket {
            Some(t) if !self.tickets.iter().any(|k| k.id() == t.id()) => {
                self.tickets.push(t.clone())
            }
            Some(_) => {}
            None => self.untracked = true,
        }
    }

    /// Whether every recorder has a ticket in `phases` (and there is one).
    fn all_in(&self, phases: &[Phase]) -> bool {
        !self.untracked
            && !self.tickets.is_empty()
            && self.tickets.iter().all(|t| phases.contains(&t.phase()))
    }

    /// Whether the backend will learn by itself when the GPU finished
    /// every recorder: each was submitted by gpu-counters (or is done, or
    /// abandoned). A caller's command buffer still recording, or handed
    /// back to its caller, is not (its completion may never be signaled).
    pub(crate) fn report_themselves(&self) -> bool {
        self.all_in(&[Phase::Submitted, Phase::Done, Phase::Abandoned])
    }

    /// Whether the GPU finished every recorder, or none of its commands
    /// will ever run: the frame's queries are no longer in use.
    pub(crate) fn retired(&self) -> bool {
        self.all_in(&[Phase::Done, Phase::Abandoned])
    }

    /// Whether a recorder is known to be still recording, or submitted and
    /// not seen finished: the GPU may still use the frame's queries.
    pub(crate) fn in_flight(&self) -> bool {
        self.tickets
            .iter()
            .any(|t| matches!(t.phase(), Phase::Recording | Phase::Submitted))
    }

    pub(crate) fn clear(&mut self) {
        self.tickets.clear();
        self.untracked = false;
    }
}

impl<D: BackendDevice> FrameStore<D> {
    /// An empty store.
    pub(crate) fn new() -> Self {
        Self {
            pages: boxcar::Vec::new(),
            no_slot: AtomicU32::new(0),
            over_capacity: AtomicU32::new(0),
            failed: AtomicU32::new(0),
            abandoned: AtomicBool::new(false),
            counted: AtomicU32::new(0),
        }
    }

    /// What its frame's scopes came to so far: every record of every page
    /// read once (those of ids never claimed are unrecorded), and the
    /// counts. A record written by a scope begun on another thread at this
    /// moment may not be seen yet.
    pub(crate) fn held(&self) -> Held {
        let mut held = Held {
            no_slot: self.no_slot.load(Ordering::Relaxed),
            over_capacity: self.over_capacity.load(Ordering::Relaxed),
            ..Held::default()
        };
        for (_, page) in self.pages.iter() {
            for cell in page.records.iter() {
                match cell.state() {
                    state::UNCLAIMED => {}
                    state::FAILED => held.failed += 1,
                    _ => held.begun += 1,
                }
            }
        }
        held
    }

    /// The drop counts of its ended frame, as its scopes dropped them while
    /// it recorded.
    pub(crate) fn drops(&self) -> DropCounts {
        DropCounts {
            no_slot: self.no_slot.load(Ordering::Relaxed),
            over_capacity: self.over_capacity.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            ..DropCounts::default()
        }
    }

    /// The pages scope ids `0..used` lie in: each page's index, the page,
    /// and how many of its records (and of its sample pairs) they take.
    pub(crate) fn used_pages(
        &self,
        used: u32,
        per: u32,
    ) -> impl Iterator<Item = (usize, &Page<D>, usize)> {
        let (used, per) = (used as usize, per as usize);
        self.pages
            .iter()
            .take(used.div_ceil(per))
            .map(move |(p, page)| (p, page, (used - p * per).min(per)))
    }

    /// Forgets the scopes of ids `0..used`, and the counts, keeping the
    /// pages.
    pub(crate) fn clear(&self, used: u32, per: u32) {
        for (_, page, n) in self.used_pages(used, per) {
            for cell in &page.records[..n] {
                cell.reset();
            }
        }
        self.no_slot.store(0, Ordering::Relaxed);
        self.over_capacity.store(0, Ordering::Relaxed);
        self.failed.store(0, Ordering::Relaxed);
    }

    /// The record of scope `id`.
    #[inline]
    pub(crate) fn cell(&self, id: u32, per: u32) -> Option<&RecordCell> {
        let (page, at) = if id < per {
            (0, id)
        } else {
            ((id / per) as usize, id % per)
        };
        self.pages.get(page)?.records.get(at as usize)
    }
}
