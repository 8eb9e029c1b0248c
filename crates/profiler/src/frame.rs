//! Frames and the scopes recorded in them.
//!
//! Recording takes no lock shared between recorders. Scope ids come from an
//! atomic counter of the frame, a few at a time per recorder (`Frame::claim`),
//! so most scopes take no atomic operation. An id names the scope's samples
//! and its record, a cell of the page the samples are in, which only the
//! recorder that got the id writes. Which scopes are open on a recorder, and
//! which ids it holds, the recorder keeps itself (the profiler's
//! [`crate::stack::Stack`] in [`BackendRecorder::scope_stack`]), so nesting is checked on the recorder
//! that is being recorded into, and moves with it between threads. Only
//! growing a frame past its pages (under [`WhenFull::Grow`]) takes a lock.

use crate::error::{ProfilerError, Result};
use crate::lock;
use crate::profiler::{Lent, Profiler, WhenFull};
use crate::shared_str::{Interner, SharedStr};
use crate::stack::stack;
use crate::store::{
    pack, state, Buf, FrameStore, Page, RecordCell, RecordWord, Recorder, Recorders, ScopeMeta,
    Submission, MAX_CLAIM, NO_SCOPE,
};
use gpu_counters_hal::timeline::PassKind;
use gpu_counters_hal::{
    BackendDevice, BackendRecorder, BackendSubmission, DeviceId, TimestampGranularity,
};
use std::cell::RefCell;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

impl<D: BackendDevice> Profiler<D> {
    /// Begins the next frame on the next ring slot. When that slot still
    /// holds an unfinished frame,
    /// [`ProfilerOptions::when_full`](crate::ProfilerOptions::when_full)
    /// decides: wait for it, grow the ring, or begin the frame without a
    /// slot. When
    /// the frame holding it is still being recorded, it is abandoned and the
    /// new frame takes the slot: at once under [`WhenFull::Grow`] and
    /// [`WhenFull::Drop`], once the timeout ran out under
    /// [`WhenFull::Wait`] (see [`Profiler`]).
    ///
    /// # Errors
    /// [`ProfilerError::RingFull`] under [`WhenFull::Wait`] when the slot's
    /// frame, ended, is still unfinished after the timeout; the backend's
    /// error when a slot's sample buffers cannot be allocated.
    pub fn begin_frame(&self) -> Result<Frame<'_, D>> {
        Ok(Frame::new(self, self.lend_slot()?))
    }

    /// Ends `frame`'s recording. Scopes begun and not ended are counted in
    /// [`DropCounts::not_ended`](crate::DropCounts::not_ended).
    ///
    /// `submissions` are the frame's recorders as submitted to the device's
    /// queue (each backend's `Submission`, e.g. `[&submission]`, or
    /// `&submissions` for a `Vec`): the frame's CPU submit time is the
    /// earliest one's [`cpu_submit_ns`](BackendSubmission::cpu_submit_ns).
    /// Where every recorder's backend learns by itself when the GPU finished
    /// it ([`BackendRecorder::ticket`](gpu_counters_hal::BackendRecorder::ticket):
    /// the Vulkan backend's own command buffers, once committed), the frame
    /// is done when they are: on Vulkan, once their `Submission`s are waited
    /// for, polled, reused or dropped, or `Device::wait_idle` returned.
    /// Nothing is submitted for it then; only a caller blocked on the frame
    /// ([`Profiler::begin_frame`] waiting for its slot,
    /// [`Profiler::wait_collect_all`]) queues a marker behind it, in case
    /// nobody looks at those submissions. Otherwise the profiler queues a
    /// completion marker behind the frame now
    /// ([`BackendDevice::submit_marker`]), whose signal says the frame's work
    /// is done.
    ///
    /// No submissions (`[]`) says the frame's work was submitted outside
    /// gpu-counters (a caller's own command buffers or queue), or not yet:
    /// the frame has no CPU submit time, and the marker is queued once all
    /// the frame's samples are seen available. Dropping a frame ends it so.
    ///
    /// # Errors
    /// [`ProfilerError::ForeignFrame`] for a frame of another profiler;
    /// [`ProfilerError::FrameAbandoned`] for a frame the profiler abandoned
    /// (its scopes were counted then, and those begun since are counted in
    /// [`Profiler::dropped_scopes_total`] now); the backend's error when a
    /// frame marker cannot be submitted.
    pub fn end_frame<'s>(
        &self,
        mut frame: Frame<'_, D>,
        submissions: impl IntoIterator<Item = &'s Submission<D>>,
    ) -> Result<()>
    where
        Submission<D>: 's,
    {
        if !std::ptr::eq(frame.profiler, self) {
            return Err(ProfilerError::ForeignFrame);
        }
        let cpu_submit_ns = submissions
            .into_iter()
            .map(BackendSubmission::cpu_submit_ns)
            .min();
        frame.finish(cpu_submit_ns)
    }
}

const _: fn() = || {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Profiler<gpu_counters_hal::fake::FakeDevice>>();
    send_sync::<Frame<'static, gpu_counters_hal::fake::FakeDevice>>();
    send_sync::<crate::Scope<'static, gpu_counters_hal::fake::FakeDevice>>();
};

/// A thread's strings for results: its name (its id where unnamed), and the
/// labels it used last, so that a scope's label is shared without a lock.
struct ThreadStrings {
    name: SharedStr,
    labels: RefCell<RecentLabels>,
}

/// The last few labels a thread used, each shared.
#[derive(Default)]
struct RecentLabels {
    recent: [Option<SharedStr>; 4],
    next: usize,
}

impl RecentLabels {
    #[inline]
    fn get(&mut self, label: &str, interner: &Mutex<Interner>) -> SharedStr {
        for s in self.recent.iter().flatten() {
            if s.as_str() == label {
                return s.clone();
            }
        }
        self.miss(label, interner)
    }

    #[cold]
    fn miss(&mut self, label: &str, interner: &Mutex<Interner>) -> SharedStr {
        let s = lock(interner).get(label);
        self.recent[self.next] = Some(s.clone());
        self.next = (self.next + 1) % self.recent.len();
        s
    }
}

impl ThreadStrings {
    fn new() -> Self {
        let t = std::thread::current();
        let name = match t.name() {
            Some(name) => SharedStr::kept(name),
            None => SharedStr::kept(&format!("{:?}", t.id())),
        };
        Self {
            name,
            labels: RefCell::default(),
        }
    }
}

thread_local! {
    static THREAD: ThreadStrings = ThreadStrings::new();
}

/// Sets `meta`'s label to the shared copy of `label` and its thread to the
/// calling thread's name, leaving what is already right: a record reused
/// frame after frame usually holds both already. Inlined into the scope's
/// begin: as a call of its own (saving and restoring registers) it cost 6
/// instructions a profiled wgpu pass more (callgrind).
#[inline(always)]
fn set_strings(meta: &mut ScopeMeta, label: &str, interner: &Mutex<Interner>) {
    let relabel = meta.label.as_str() != label;
    let set = THREAD.try_with(|t| {
        if relabel {
            meta.label = match t.labels.try_borrow_mut() {
                Ok(mut recent) => recent.get(label, interner),
                // Not reachable (nothing in `get` begins a scope), but never
                // a panic.
                Err(_) => lock(interner).get(label),
            };
        }
        if !meta.thread.is_same(&t.name) {
            meta.thread = t.name.clone();
        }
    });
    if set.is_err() {
        // Thread-local storage is being torn down.
        meta.label = lock(interner).get(label);
        meta.thread = ThreadStrings::new().name;
    }
}

/// Where [`Frame::place`] put a scope.
struct Placed<'f, D: BackendDevice> {
    page: &'f Page<D>,
    id: u32,
    /// Its record's place in `page`.
    at: u32,
    /// The innermost scope still open on the recorder when it began (past
    /// dropped ones): its record's parent.
    parent: u32,
    /// The recorder's innermost scope, as its stack held it then.
    outer: Option<u32>,
}

/// Keys of frames, unique in the process: a recorder's
/// [`Stack`](crate::stack::Stack) entries never mistake one frame for
/// another, whichever profiler began it.
static NEXT_FRAME_KEY: AtomicU64 = AtomicU64::new(1);

/// One frame being recorded. Share it by reference between threads (it is
/// `Sync`); each thread records scopes into its own command buffers with
/// [`Frame::scope`]. Hand it to [`Profiler::end_frame`] when its command
/// buffers are submitted.
pub struct Frame<'p, D: BackendDevice> {
    pub(crate) profiler: &'p Profiler<D>,
    index: u64,
    /// Unique in the process (see [`NEXT_FRAME_KEY`]).
    key: u64,
    /// The profiler's device: a recorder of another is refused.
    device_id: DeviceId,
    slot: Option<usize>,
    /// Its slot's store (shared with the profiler, see [`FrameStore`]).
    store: Arc<FrameStore<D>>,
    /// Scope ids handed out (some past the pages: dropped), a segment (see
    /// [`Frame::segment_end`]) or part of one at a time.
    next: AtomicU64,
    /// Recorders that claimed ids in this frame.
    claimants: AtomicU32,
    /// Scopes per page: `max_scopes_per_frame`.
    per: u32,
    /// Held while adding a page.
    grow: Mutex<()>,
    /// The recorders that took scope ids (see [`Recorders`]).
    recorders: Mutex<Recorders>,
    ended: bool,
}

impl<D: BackendDevice> std::fmt::Debug for Frame<'_, D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Frame")
            .field("index", &self.index)
            .field("slot", &self.slot)
            .finish()
    }
}

impl<'p, D: BackendDevice> Frame<'p, D> {
    fn new(profiler: &'p Profiler<D>, lent: Lent<D>) -> Self {
        let Lent {
            index,
            slot,
            store,
            recorders,
        } = lent;
        Self {
            profiler,
            index,
            key: NEXT_FRAME_KEY.fetch_add(1, Ordering::Relaxed),
            device_id: profiler.device.device_id(),
            slot,
            store,
            next: AtomicU64::new(0),
            claimants: AtomicU32::new(0),
            per: profiler.options.max_scopes_per_frame,
            grow: Mutex::new(()),
            recorders: Mutex::new(recorders),
            ended: false,
        }
    }

    /// The frame's number.
    pub fn index(&self) -> u64 {
        self.index
    }

    /// Whether the frame got a ring slot; without one
    /// ([`WhenFull::Drop`] with the ring full) every scope is dropped and
    /// counted.
    pub fn has_slot(&self) -> bool {
        self.slot.is_some()
    }

    /// Scopes of this frame dropped so far.
    pub fn dropped_scopes(&self) -> u32 {
        self.store.no_slot.load(Ordering::Relaxed)
            + self.store.over_capacity.load(Ordering::Relaxed)
            + self.store.failed.load(Ordering::Relaxed)
    }

    /// Whether the profiler abandoned the frame (see [`Profiler`]): it was
    /// still being recorded when the profiler went on without it. Its
    /// scopes were counted in its result's
    /// [`DropCounts::frame_abandoned`](crate::DropCounts::frame_abandoned)
    /// (those still open may be ended, for their command buffers' sake, but
    /// have no result); new scopes are refused and ending the frame fails,
    /// with [`ProfilerError::FrameAbandoned`].
    pub fn is_abandoned(&self) -> bool {
        self.store.abandoned.load(Ordering::Relaxed)
    }

    /// Begins a scope labelled `label` in `cmd`: records a timestamp after
    /// all prior work in `cmd` (and, with statistics, starts counting).
    /// End it with [`Scope::end`] on the same command buffer. Scopes on one
    /// command buffer nest in the order they begin and end; scopes on
    /// different command buffers are independent.
    ///
    /// When the frame has no slot or no room left (see [`WhenFull`]), the
    /// scope records nothing, is counted in the frame's [`DropCounts`](crate::DropCounts), and
    /// its `end` does nothing. On a frame the profiler abandoned (see
    /// [`Profiler`]), it fails with [`ProfilerError::FrameAbandoned`] and
    /// records nothing. A recorder of another device than the profiler's is
    /// refused with `InvalidInput::ForeignObject`.
    ///
    /// With statistics, a command buffer's statistic query stays open from
    /// its first scope's start to its outermost scope's end, so encoders
    /// cannot sample statistics inside scopes, and a scope left unended keeps
    /// it open: call the recorder's `end_statistics` before ending a
    /// caller's command buffer in that case. Where the recorder cannot
    /// sample statistics at this point
    /// ([`BackendRecorder::samples_statistics`]: wgpu between passes), the
    /// scope is timed only and its result has no statistics.
    #[allow(unsafe_code)]
    #[inline]
    pub fn scope(
        &self,
        cmd: &mut Recorder<D>,
        label: &str,
        kind: PassKind,
    ) -> Result<Scope<'_, D>> {
        let statistics_here = cmd.samples_statistics();
        let Some(Placed {
            page,
            id,
            at,
            parent,
            outer,
        }) = self.place(cmd, true)?
        else {
            return Ok(Scope {
                frame: self,
                page: None,
                id: NO_SCOPE,
                index: 0,
                statistics: false,
            });
        };
        // SAFETY: `at` is below `per` (see `place`), the page's number of
        // records.
        let cell = unsafe { page.record_unchecked(at) };
        let statistics = page.statistics.as_ref().filter(|_| statistics_here);
        // SAFETY: `id` came from `next` to this recorder alone (directly or
        // in a block only its stack holds, see `claim`), so this call alone
        // writes the cell in this frame, and nothing reads its `meta` before
        // this call returns (the scope is on `cmd`'s stack, which only the
        // holder of `cmd` reaches) or the frame has ended (see
        // `RecordCell`).
        let meta = unsafe { &mut *cell.meta.get() };
        set_strings(meta, label, &self.profiler.labels);
        let index = 2 * at;
        cell.word.store(
            pack(parent, state::OPEN, kind, statistics.is_some()),
            Ordering::Relaxed,
        );
        if let Err(e) = sample::<D>(cmd, &page.timestamps, statistics, index) {
            return Err(self.unplace(cmd, cell, outer, e));
        }
        Ok(Scope {
            frame: self,
            page: Some(page),
            id,
            index,
            statistics: statistics.is_some(),
        })
    }

    /// Takes a scope whose begin failed (with `e`) off `cmd`'s stack again,
    /// where `outer` was the innermost scope before it, and notes the failure.
    #[cold]
    #[inline(never)]
    #[allow(unsafe_code)]
    fn unplace(
        &self,
        cmd: &mut Recorder<D>,
        cell: &RecordCell,
        outer: Option<u32>,
        e: ProfilerError,
    ) -> ProfilerError {
        // SAFETY: `outer` was the innermost scope on `cmd` before `place`
        // put this one above it: `None`, or a scope of this frame begun on
        // `cmd` whose record is written.
        unsafe { stack(cmd).set_innermost(self.key, outer) };
        self.failed(cell, e)
    }

    /// A scope id for a scope begun on `cmd`, its page and its record's
    /// place there (below `per`), and the scope it nests in; `None` when the
    /// scope is dropped (no slot or no room), counted. A recorder of another
    /// device than the profiler's is refused (`ForeignObject`, naming the
    /// recorder) before anything is claimed or recorded. With `push`, the
    /// scope is `cmd`'s innermost one from now on: the caller writes its
    /// record before it returns, or takes it off again
    /// ([`Frame::unplace`]). One lookup of the recorder's stack, where it
    /// holds a claimed id.
    #[inline(always)]
    #[allow(unsafe_code)]
    fn place(&self, cmd: &mut Recorder<D>, push: bool) -> Result<Option<Placed<'_, D>>> {
        self.device_id.check(cmd.device_id(), "recorder")?;
        if self.is_abandoned() {
            return Err(self.abandoned());
        }
        if self.slot.is_none() {
            self.count_dropped(&self.store.no_slot);
            return Ok(None);
        }
        let mut entry = stack(cmd).entry_mut(self.key);
        let claimed = match entry.take_claimed() {
            Some(id) => u64::from(id),
            None => {
                let first = self.claim(cmd);
                entry = stack(cmd).entry_mut(self.key);
                first
            }
        };
        let per = u64::from(self.per);
        // Ids are u32, NO_SCOPE excluded.
        if claimed >= u64::from(NO_SCOPE) {
            self.count_dropped(&self.store.over_capacity);
            return Ok(None);
        }
        let id = claimed as u32;
        let (page_no, at) = if claimed < per {
            (0, id)
        } else {
            ((claimed / per) as usize, (claimed % per) as u32)
        };
        let page = match self.store.pages.get(page_no) {
            Some(p) => p,
            None => match self.grow(page_no)? {
                Some(p) => p,
                None => {
                    self.count_dropped(&self.store.over_capacity);
                    return Ok(None);
                }
            },
        };
        let outer = entry.innermost();
        let parent = self.open_scope(outer);
        if push {
            // SAFETY: scope `id` of this frame is begun on `cmd` now: the
            // caller writes its record before it returns, or takes it off
            // again, and until then nothing reads it through the stack
            // (reached only through `cmd`, which the caller holds).
            unsafe { entry.set_innermost(Some(id)) };
        }
        Ok(Some(Placed {
            page,
            id,
            at,
            parent,
            outer,
        }))
    }

    /// Begins and ends at once a scope labelled `label` in `cmd` whose two
    /// timestamps the backend records itself, as the start and end
    /// timestamp writes of one pass (wgpu's profiled passes): nothing is
    /// recorded here. The scope nests in `cmd`'s innermost open scope, and
    /// nothing nests in it. Write the timestamps at
    /// [`PassScope::start_index`] and [`PassScope::end_index`] of
    /// [`PassScope::timestamps`], then call [`PassScope::recorded`]; a
    /// `PassScope` dropped instead is reported as not ended.
    ///
    /// Timestamps only: with the profiler's statistics on
    /// ([`Frame::samples_statistics`]), take [`Frame::scope`] and
    /// [`Scope::end`] for scopes that count them.
    ///
    /// `None` when the frame drops the scope, as [`Frame::scope`] does
    /// (counted in the frame's [`DropCounts`](crate::DropCounts)); on a frame the profiler
    /// abandoned, [`ProfilerError::FrameAbandoned`]; another device's
    /// recorder is refused, as there.
    #[allow(unsafe_code)]
    #[inline]
    pub fn pass_scope(
        &self,
        cmd: &mut Recorder<D>,
        label: &str,
        kind: PassKind,
    ) -> Result<Option<PassScope<'_, D>>> {
        let Some(Placed {
            page, at, parent, ..
        }) = self.place(cmd, false)?
        else {
            return Ok(None);
        };
        // SAFETY: `at` is below `per` (see `place`), the page's number of
        // records.
        let cell = unsafe { page.record_unchecked(at) };
        // SAFETY: as in `scope`: this call alone writes the cell in this
        // frame, and the scope never goes on a recorder's stack, so nothing
        // reads its `meta` before the frame has ended.
        let meta = unsafe { &mut *cell.meta.get() };
        set_strings(meta, label, &self.profiler.labels);
        let word = RecordWord(pack(parent, state::OPEN, kind, false));
        cell.store(word);
        Ok(Some(PassScope {
            frame: self,
            page,
            cell,
            word,
            index: 2 * at,
        }))
    }

    /// Whether scopes of this frame count pipeline statistics (the
    /// profiler's option).
    pub fn samples_statistics(&self) -> bool {
        self.profiler.options.statistics
    }

    /// Claims scope ids for a recorder that has none of this frame left:
    /// returns the first, and keeps the rest of the block on its stack.
    /// A block is twice what the recorder asked for last (from 1), at most
    /// [`MAX_CLAIM`] and the room left in the frame's pages over four times
    /// the recorders that claimed ids in it: one atomic operation serves
    /// several scopes (each one drains the CPU's store buffer, full of the
    /// driver's command writes), and the ids the recorders leave unused (at
    /// most `MAX_CLAIM - 1` each, and about a quarter of the room left in
    /// all) cost the frame little room. A recorder's first claim in the
    /// frame notes it in the frame's [`Recorders`].
    ///
    /// A claim takes ids of one segment at most ([`Frame::segment_end`]:
    /// one group of timestamp blocks), fewer where the segment has fewer
    /// left, and the next claim grows from what was asked: so recorders on
    /// several threads write whole groups of timestamps of their own once
    /// past their first claims, each claimed by its recorder for writes
    /// without the lock, instead of blocks shared by two recorders, where
    /// one recorder's writes take the lock.
    #[allow(unsafe_code)]
    #[inline(never)]
    fn claim(&self, cmd: &mut Recorder<D>) -> u64 {
        let claimants = if stack(cmd).last_claim(self.key) == 0 {
            lock(&self.recorders).note(cmd.ticket());
            self.claimants.fetch_add(1, Ordering::Relaxed) + 1
        } else {
            self.claimants.load(Ordering::Relaxed)
        };
        let stack = stack(cmd);
        let capacity = self.store.pages.count() as u64 * u64::from(self.per);
        let room = capacity.saturating_sub(self.next.load(Ordering::Relaxed));
        // At least 1: an empty claim would hand the same id out twice.
        let wanted = (2 * stack.last_claim(self.key)).clamp(1, MAX_CLAIM);
        let room_left = (room / (4 * u64::from(claimants.max(1)))).max(1);
        let (first, end) = self.claim_segment(u64::from(wanted).min(room_left));
        if first < u64::from(NO_SCOPE) {
            let end = end.min(u64::from(NO_SCOPE)) as u32;
            // SAFETY: `first..end` came from `next` to this call alone.
            unsafe { stack.keep_claimed(self.key, first as u32..end, wanted) };
        }
        first
    }

    /// The end of the segment of ids that `id` is in. Ids are claimed in
    /// segments of at most [`MAX_CLAIM`], which begin at each page's start
    /// and at every `MAX_CLAIM`th id of a page after it: a segment's
    /// timestamps are one group of blocks of its page's sample buffer.
    #[inline]
    fn segment_end(&self, id: u64) -> u64 {
        let (per, max) = (u64::from(self.per), u64::from(MAX_CLAIM));
        let in_page = id % per;
        id - in_page + ((in_page / max + 1) * max).min(per)
    }

    /// `first..end`: at most `size` ids from `next`, up to the end of the
    /// segment it is in.
    #[inline]
    fn claim_segment(&self, size: u64) -> (u64, u64) {
        let mut first = self.next.load(Ordering::Relaxed);
        loop {
            let end = (first + size).min(self.segment_end(first));
            match self
                .next
                .compare_exchange_weak(first, end, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return (first, end),
                Err(now) => first = now,
            }
        }
    }

    /// Adds pages up to `page_no` under [`WhenFull::Grow`]: the page, or
    /// `None` (and the scope is dropped) under the other policies.
    #[cold]
    fn grow(&self, page_no: usize) -> Result<Option<&Page<D>>> {
        let Some(slot) = self.slot else {
            return Ok(None);
        };
        let _adding = lock(&self.grow);
        while self.store.pages.count() <= page_no {
            if self.profiler.options.when_full != WhenFull::Grow {
                return Ok(None);
            }
            match self.profiler.new_page(slot, self.store.pages.count()) {
                Ok(p) => {
                    // Pages are added only here, under `grow`: in order.
                    self.store.pages.push(p);
                }
                Err(e) => {
                    self.store.over_capacity.fetch_add(1, Ordering::Relaxed);
                    return Err(e);
                }
            }
        }
        Ok(self.store.pages.get(page_no))
    }

    /// Counts a scope that records nothing in `why` (added to the
    /// profiler's total when the frame ends).
    #[cold]
    fn count_dropped(&self, why: &AtomicU32) {
        why.fetch_add(1, Ordering::Relaxed);
    }

    /// Notes that recording one end of the scope of `cell` failed with `e`.
    #[cold]
    #[inline(never)]
    fn failed(&self, cell: &RecordCell, e: ProfilerError) -> ProfilerError {
        cell.set_state(state::FAILED);
        self.store.failed.fetch_add(1, Ordering::Relaxed);
        e
    }

    /// The error of a scope begun on the frame once abandoned.
    #[cold]
    #[inline(never)]
    fn abandoned(&self) -> ProfilerError {
        ProfilerError::FrameAbandoned { frame: self.index }
    }

    /// The innermost scope still open from `innermost` outwards: dropped
    /// scopes are skipped.
    #[inline]
    fn open_scope(&self, innermost: Option<u32>) -> u32 {
        let mut id = innermost.unwrap_or(NO_SCOPE);
        while id != NO_SCOPE {
            match self.store.cell(id, self.per) {
                Some(c) if c.state() == state::DROPPED => id = c.parent(),
                Some(_) => break,
                None => return NO_SCOPE,
            }
        }
        id
    }

    /// Whether `id` is `from` or a scope `from` began inside, following
    /// parents from `from` (scopes of one recorder: for telling an order
    /// error from a scope ended on another recorder).
    fn encloses(&self, from: u32, id: u32) -> bool {
        let mut up = from;
        // Parents were begun before their children, so the walk ends; the
        // bound only keeps a damaged chain from looping.
        for _ in 0..=self.next.load(Ordering::Relaxed).min(u64::from(NO_SCOPE)) {
            if up == id {
                return true;
            }
            match self.store.cell(up, self.per) {
                Some(c) => up = c.parent(),
                None => return false,
            }
        }
        false
    }

    /// The label of scope `id`, owned (for errors).
    ///
    /// # Safety
    /// As [`RecordCell::meta`].
    #[allow(unsafe_code)]
    unsafe fn label_of(&self, id: u32) -> String {
        self.store
            .cell(id, self.per)
            // SAFETY: per this function's contract.
            .map(|c| unsafe { c.meta() }.label.to_string())
            .unwrap_or_default()
    }

    /// Ends the frame (once): tells the profiler what it used.
    pub(crate) fn finish(&mut self, cpu_submit_ns: Option<u64>) -> Result<()> {
        if self.ended {
            return Ok(());
        }
        self.ended = true;
        let capacity = (self.store.pages.count() as u64) * u64::from(self.per);
        let used = (*self.next.get_mut())
            .min(capacity)
            .min(u64::from(NO_SCOPE)) as u32;
        let recorders = std::mem::take(
            self.recorders
                .get_mut()
                .unwrap_or_else(PoisonError::into_inner),
        );
        self.profiler.frame_ended(
            self.index,
            self.slot,
            &self.store,
            used,
            recorders,
            cpu_submit_ns,
        )
    }
}

impl<D: BackendDevice> Drop for Frame<'_, D> {
    fn drop(&mut self) {
        // A failed marker submission is retried once the samples are in.
        let _ = self.finish(None);
    }
}

/// An open scope. End it with [`Scope::end`]; a scope dropped without
/// ending is reported in [`DropCounts::not_ended`](crate::DropCounts::not_ended).
#[must_use = "a scope must be ended with `Scope::end`, or it is reported as not ended"]
pub struct Scope<'f, D: BackendDevice> {
    frame: &'f Frame<'f, D>,
    /// Where its samples and record are; `None` for a dropped scope.
    page: Option<&'f Page<D>>,
    id: u32,
    /// Its start's sample index (the end's is the next).
    index: u32,
    statistics: bool,
}

impl<D: BackendDevice> std::fmt::Debug for Scope<'_, D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scope")
            .field("frame", &self.frame.index)
            .field("id", &self.page.map(|_| self.id))
            .finish()
    }
}

impl<'f, D: BackendDevice> Scope<'f, D> {
    /// Whether the scope records samples (it was not dropped).
    pub fn is_recorded(&self) -> bool {
        self.page.is_some()
    }

    /// Its record.
    #[inline(always)]
    #[allow(unsafe_code)]
    fn cell(&self, page: &'f Page<D>) -> &'f RecordCell {
        // SAFETY: a scope with a page was begun at record `at` of it, below
        // the page's number of records, with `index` set to `2 * at`.
        unsafe { page.record_unchecked(self.index / 2) }
    }

    /// Ends the scope in `cmd`, the command buffer it began on: records a
    /// timestamp after all prior work (and, with statistics, what was counted
    /// since the start). Inner scopes on the same command buffer must be
    /// ended first. "The same" is the same recorder value: the scopes open
    /// on a recorder are kept in it, so a Vulkan command buffer wrapped
    /// again (`CommandBuffer::from_raw`) is another recorder, and ending a
    /// scope there is [`ProfilerError::WrongCommandBuffer`]. On an error the scope is reported as not ended (or
    /// failed, if recording a sample failed). A scope of a frame the
    /// profiler abandoned (see [`Profiler`]) is ended in `cmd` as usual, so
    /// that `cmd` stays valid, but has no result: it was counted when its
    /// frame was abandoned ([`Frame::is_abandoned`] tells, and ending the
    /// frame fails).
    #[allow(unsafe_code)]
    #[inline]
    pub fn end(self, cmd: &mut Recorder<D>) -> Result<()> {
        // Ended here, whatever happens: no drop glue runs after.
        let this = std::mem::ManuallyDrop::new(self);
        let Some(page) = this.page else {
            return Ok(());
        };
        let frame = this.frame;
        let cell = this.cell(page);
        // Read once: its parent now, and the rest kept as the state changes.
        let word = cell.load();
        let outer = frame.open_scope(Some(word.parent()));
        let outer = (outer != NO_SCOPE).then_some(outer);
        // SAFETY: the stack takes `outer` only if this scope is `cmd`'s
        // innermost one, and so was begun on `cmd`: `outer` is then
        // `None` or a scope this one began inside, on this recorder.
        let ended = unsafe { stack(cmd).end_innermost(frame.key, this.id, outer) };
        if !ended {
            // Not the innermost: misplaced, or dropped scopes above it.
            this.end_under_dropped(cmd, cell, outer)?;
        }
        let statistics = page.statistics.as_ref().filter(|_| this.statistics);
        let mut recorded = sample::<D>(cmd, &page.timestamps, statistics, this.index + 1);
        if recorded.is_ok() && statistics.is_some() && stack(cmd).no_open_scopes() {
            // No scope of any frame is open on the recorder: close its
            // statistic chain (one per recorder). Nothing is counted outside
            // scopes, and a caller's command buffer can be ended as is.
            recorded = cmd.end_statistics().map_err(ProfilerError::from);
        }
        match recorded {
            Ok(()) => {
                // The word's one writer since it was read above.
                cell.store(word.with_state(state::ENDED));
                Ok(())
            }
            Err(e) => Err(frame.failed(cell, e)),
        }
    }

    /// [`Scope::end`] of a scope that is not `cmd`'s innermost one: where
    /// the scopes above it on `cmd` were dropped, it ends, and `outer` is
    /// `cmd`'s innermost scope from now on; otherwise it is misplaced (see
    /// [`Scope::misplaced`]).
    #[cold]
    #[inline(never)]
    #[allow(unsafe_code)]
    fn end_under_dropped(
        &self,
        cmd: &mut Recorder<D>,
        cell: &RecordCell,
        outer: Option<u32>,
    ) -> Result<()> {
        let frame = self.frame;
        let innermost = frame.open_scope(stack(cmd).innermost(frame.key));
        if innermost != self.id {
            return Err(self.misplaced(innermost, cell));
        }
        // SAFETY: this scope is open on `cmd` (its innermost one past
        // dropped scopes), so `outer`, from its record, is `None` or a
        // scope it began inside, on this recorder.
        unsafe { stack(cmd).set_innermost(frame.key, outer) };
        Ok(())
    }

    /// Why a scope that is not `cmd`'s innermost open one cannot end there
    /// (`innermost` is): ids are unique in a frame, and a recorder's open
    /// scopes are its innermost one and those it began inside, so the scope
    /// is open on `cmd` under another one, or was begun on another recorder
    /// (or another wrapper of the same one: scopes nest per recorder value).
    /// The scope is reported as not ended.
    #[cold]
    #[inline(never)]
    #[allow(unsafe_code)]
    fn misplaced(&self, innermost: u32, cell: &RecordCell) -> ProfilerError {
        // Not ended: counted as such when the frame ends, and skipped as a
        // parent by later scopes.
        cell.set_state(state::DROPPED);
        // SAFETY: this is the scope whose begin wrote the cell.
        let label = unsafe { cell.meta() }.label.to_string();
        if innermost != NO_SCOPE && self.frame.encloses(innermost, self.id) {
            ProfilerError::ScopeOrder {
                label,
                // SAFETY: `innermost` is on `cmd`'s stack, and `cmd` is ours.
                open: unsafe { self.frame.label_of(innermost) },
            }
        } else {
            ProfilerError::WrongCommandBuffer { label }
        }
    }
}

impl<D: BackendDevice> Drop for Scope<'_, D> {
    fn drop(&mut self) {
        if let Some(page) = self.page {
            // Counted as not ended when the frame ends; later scopes on its
            // recorder skip it as a parent.
            self.cell(page).set_state(state::DROPPED);
        }
    }
}

/// A scope begun and ended at once by [`Frame::pass_scope`], whose two
/// timestamps the backend writes as one pass's start and end.
#[must_use = "a pass scope's timestamps must be written and `PassScope::recorded` called, or it is reported as not ended"]
pub struct PassScope<'f, D: BackendDevice> {
    frame: &'f Frame<'f, D>,
    page: &'f Page<D>,
    cell: &'f RecordCell,
    /// The record's word as stored at the start.
    word: RecordWord,
    /// The start's sample index (the end's is the next).
    index: u32,
}

impl<D: BackendDevice> std::fmt::Debug for PassScope<'_, D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PassScope")
            .field("frame", &self.frame.index)
            .field("start_index", &self.index)
            .finish()
    }
}

impl<'f, D: BackendDevice> PassScope<'f, D> {
    /// The sample buffer of its timestamps.
    pub fn timestamps(&self) -> &'f Buf<D> {
        &self.page.timestamps
    }

    /// The index of its start timestamp in [`PassScope::timestamps`].
    pub fn start_index(&self) -> u32 {
        self.index
    }

    /// The index of its end timestamp in [`PassScope::timestamps`].
    pub fn end_index(&self) -> u32 {
        self.index + 1
    }

    /// Notes that both timestamps are recorded: the scope is complete. Its
    /// result is made from what the GPU wrote at the two indices: where
    /// neither was written (a recording dropped unsubmitted, or this called
    /// without recording them) it is counted as abandoned, where one was
    /// not, as failed; never a made-up time.
    pub fn recorded(self) {
        let this = std::mem::ManuallyDrop::new(self);
        this.cell.store(this.word.with_state(state::ENDED));
    }

    /// Notes that recording its timestamps failed with `e` (counted in the
    /// frame's [`DropCounts::failed`](crate::DropCounts::failed)); returns `e`.
    pub fn failed(self, e: impl Into<ProfilerError>) -> ProfilerError {
        let this = std::mem::ManuallyDrop::new(self);
        this.frame.failed(this.cell, e.into())
    }
}

impl<D: BackendDevice> Drop for PassScope<'_, D> {
    fn drop(&mut self) {
        // Counted as not ended when the frame ends.
        self.cell.set_state(state::DROPPED);
    }
}

/// Records one end of a scope: the timestamp after all prior work, then the
/// statistic sample.
#[inline(always)]
fn sample<D: BackendDevice>(
    cmd: &mut Recorder<D>,
    timestamps: &Buf<D>,
    statistics: Option<&Buf<D>>,
    index: u32,
) -> Result<()> {
    cmd.sample_counters(timestamps, index, TimestampGranularity::Precise)?;
    if let Some(stats) = statistics {
        cmd.sample_counters(stats, index, TimestampGranularity::Relaxed)?;
    }
    Ok(())
}
