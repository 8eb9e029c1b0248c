//! Frames and the scopes recorded in them.

use crate::error::{ProfilerError, Result};
use crate::profiler::{Buf, Page, Profiler, Recorder, WhenFull};
use crate::result::DropCounts;
use crate::shared_str::SharedStr;
use gpu_counters_core::timeline::PassKind;
use gpu_counters_core::{BackendDevice, BackendRecorder, TimestampGranularity};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RecordState {
    /// Begun, not ended (yet).
    Open,
    /// Both ends recorded.
    Ended,
    /// Recording a sample failed; counted in `DropCounts::failed`.
    Failed,
}

/// No scope: the parent of an outermost scope.
pub(crate) const NO_SCOPE: u32 = u32::MAX;

/// One scope's bookkeeping, plain data so that a slot's records are reused
/// frame after frame without allocating; scope `id` samples indices
/// `2 * (id % per)` and `2 * (id % per) + 1` of page `id / per`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ScopeRecord {
    /// Where the label lies in [`FrameStore::labels`].
    pub(crate) label_start: usize,
    pub(crate) label_len: u32,
    /// The innermost scope open on `cmd` when this one began, or
    /// [`NO_SCOPE`].
    pub(crate) parent: u32,
    /// The recorder it began on ([`BackendRecorder::recorder_id`]).
    pub(crate) cmd: u64,
    /// Index in [`FrameStore::threads`] of the thread that began the scope.
    pub(crate) thread: u32,
    pub(crate) kind: PassKind,
    pub(crate) state: RecordState,
    /// Whether its statistics are sampled: the profiler's option, and the
    /// recorder able to where the scope began
    /// ([`BackendRecorder::samples_statistics`]).
    pub(crate) statistics: bool,
}

/// What a ring slot holds, lent to the frame that records into it. Clearing
/// keeps every vector's capacity, so a steady state allocates nothing here.
pub(crate) struct FrameStore<D: BackendDevice> {
    pub(crate) pages: Vec<Page<D>>,
    pub(crate) records: Vec<ScopeRecord>,
    /// The records' labels, one after another.
    pub(crate) labels: String,
    /// The threads that began scopes in the frame: their tag and name.
    pub(crate) threads: Vec<(u64, SharedStr)>,
    /// Ids of the scopes open now, in the order they began.
    pub(crate) open: Vec<u32>,
    /// Records in the `Open` state.
    pub(crate) not_ended: u32,
    /// Where the next scope's samples go: its page, and its place in the
    /// page (`records.len()` in pages of `max_scopes_per_frame`, kept
    /// without dividing).
    pub(crate) next_page: usize,
    pub(crate) next_in_page: u32,
    pub(crate) drops: DropCounts,
}

impl<D: BackendDevice> Default for FrameStore<D> {
    fn default() -> Self {
        Self::new()
    }
}

impl<D: BackendDevice> FrameStore<D> {
    /// An empty store.
    pub(crate) fn new() -> Self {
        Self {
            pages: Vec::new(),
            records: Vec::new(),
            labels: String::new(),
            threads: Vec::new(),
            open: Vec::new(),
            not_ended: 0,
            next_page: 0,
            next_in_page: 0,
            drops: DropCounts::default(),
        }
    }

    /// Forgets the scopes, keeping the buffers and capacity.
    pub(crate) fn clear(&mut self) {
        self.records.clear();
        self.labels.clear();
        self.threads.clear();
        self.open.clear();
        self.not_ended = 0;
        self.next_page = 0;
        self.next_in_page = 0;
        self.drops = DropCounts::default();
    }

    /// The label of `rec`.
    pub(crate) fn label(&self, rec: &ScopeRecord) -> &str {
        self.labels
            .get(rec.label_start..rec.label_start + rec.label_len as usize)
            .unwrap_or_default()
    }

    /// The label of scope `id`, owned (for errors).
    fn label_of(&self, id: u32) -> String {
        self.label(&self.records[id as usize]).to_owned()
    }

    /// Position in `open` of the innermost open scope on `cmd`.
    fn innermost(&self, cmd: u64) -> Option<usize> {
        self.open
            .iter()
            .rposition(|&o| self.records[o as usize].cmd == cmd)
    }

    /// Stores `label` after the others, or finds it as the last record's
    /// (a run of scopes of one label stores it once, and collection knows
    /// them one by their place).
    fn push_label(&mut self, label: &str) -> (usize, u32) {
        if let Some(last) = self.records.last() {
            if self.label(last) == label {
                return (last.label_start, last.label_len);
            }
        }
        let start = self.labels.len();
        // A label over 4 GiB keeps its first 4 GiB (at a character boundary).
        let mut len = label.len().min(u32::MAX as usize);
        while !label.is_char_boundary(len) {
            len -= 1;
        }
        self.labels.push_str(&label[..len]);
        (start, len as u32)
    }

    /// Index in `threads` of the calling thread, added on its first scope.
    fn thread_index(&mut self) -> u32 {
        THREAD
            .try_with(|tag| self.thread_of(tag))
            // Thread-local storage is being torn down: tag afresh.
            .unwrap_or_else(|_| self.thread_of(&ThreadTag::new()))
    }

    fn thread_of(&mut self, tag: &ThreadTag) -> u32 {
        match self.threads.iter().rposition(|t| t.0 == tag.key) {
            Some(i) => i as u32,
            None => {
                self.threads.push((tag.key, tag.name.clone()));
                (self.threads.len() - 1) as u32
            }
        }
    }

    /// Removes scope `id` from the open ones, if there.
    fn close(&mut self, id: u32) {
        if let Some(p) = self.open.iter().rposition(|&o| o == id) {
            self.open.remove(p);
        }
    }

    /// Marks scope `id` failed and counts it, once.
    fn fail(&mut self, id: u32, profiler: &Profiler<D>) {
        self.close(id);
        let rec = &mut self.records[id as usize];
        match rec.state {
            RecordState::Failed => {}
            state => {
                if state == RecordState::Open {
                    self.not_ended -= 1;
                }
                rec.state = RecordState::Failed;
                self.drops.failed += 1;
                profiler.dropped_total.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// A thread's identity for results: a process-unique key and its name
/// (its id where unnamed), made once per thread.
struct ThreadTag {
    key: u64,
    name: SharedStr,
}

impl ThreadTag {
    fn new() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let t = std::thread::current();
        let name = match t.name() {
            Some(name) => SharedStr::kept(name),
            None => SharedStr::kept(&format!("{:?}", t.id())),
        };
        Self {
            key: NEXT.fetch_add(1, Ordering::Relaxed),
            name,
        }
    }
}

thread_local! {
    static THREAD: ThreadTag = ThreadTag::new();
}

/// One frame being recorded. Share it by reference between threads (it is
/// `Sync`); each thread records scopes into its own command buffers with
/// [`Frame::scope`]. Hand it to [`Profiler::end_frame`] when its command
/// buffers are submitted.
pub struct Frame<'p, D: BackendDevice> {
    pub(crate) profiler: &'p Profiler<D>,
    index: u64,
    slot: Option<usize>,
    store: Mutex<FrameStore<D>>,
    ended: bool,
}

/// Locks a frame's store. Its critical sections run no user code, so the
/// state stays consistent even if a panic interrupted one.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
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
    pub(crate) fn new(
        profiler: &'p Profiler<D>,
        index: u64,
        slot: Option<usize>,
        store: FrameStore<D>,
    ) -> Self {
        Self {
            profiler,
            index,
            slot,
            store: Mutex::new(store),
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
        lock(&self.store).drops.total()
    }

    /// Begins a scope labelled `label` in `cmd`: records a timestamp after
    /// all prior work in `cmd` (and, with statistics, starts counting).
    /// End it with [`Scope::end`] on the same command buffer. Scopes on one
    /// command buffer nest in the order they begin and end; scopes on
    /// different command buffers are independent.
    ///
    /// When the frame has no slot or no room left (see [`WhenFull`]), the
    /// scope records nothing, is counted in the frame's [`DropCounts`], and
    /// its `end` does nothing.
    ///
    /// With statistics, a command buffer's statistic query stays open from
    /// its first scope's start to its outermost scope's end, so encoders
    /// cannot sample statistics inside scopes, and a scope left unended keeps
    /// it open: call the recorder's `end_statistics` before ending a
    /// caller's command buffer in that case. Where the recorder cannot
    /// sample statistics at this point
    /// ([`BackendRecorder::samples_statistics`]: wgpu between passes), the
    /// scope is timed only and its result has no statistics.
    pub fn scope(
        &self,
        cmd: &mut Recorder<D>,
        label: &str,
        kind: PassKind,
    ) -> Result<Scope<'_, D>> {
        let raw = cmd.recorder_id();
        let per = self.profiler.options.max_scopes_per_frame;
        let mut guard = lock(&self.store);
        let store = &mut *guard;
        let Some(slot) = self.slot else {
            store.drops.no_slot += 1;
            self.count_drop();
            return Ok(Scope::dropped(self));
        };
        let id = store.records.len() as u32;
        if store.next_in_page == per {
            store.next_page += 1;
            store.next_in_page = 0;
        }
        let (page, index) = (store.next_page, 2 * store.next_in_page);
        if page >= store.pages.len() {
            if self.profiler.options.when_full != WhenFull::Grow {
                store.drops.over_capacity += 1;
                self.count_drop();
                return Ok(Scope::dropped(self));
            }
            match self.profiler.new_page(slot, store.pages.len()) {
                Ok(p) => store.pages.push(p),
                Err(e) => {
                    store.drops.over_capacity += 1;
                    self.count_drop();
                    return Err(e);
                }
            }
        }
        // Sampled under the frame's lock: the sample buffer serialises
        // recording threads anyway, and the record and its samples stay in
        // step.
        let p = &store.pages[page];
        let statistics = p.statistics.as_ref().filter(|_| cmd.samples_statistics());
        let with_statistics = statistics.is_some();
        let sampled = sample::<D>(cmd, &p.timestamps, statistics, index);
        let parent = store.innermost(raw).map_or(NO_SCOPE, |i| store.open[i]);
        let thread = store.thread_index();
        let (label_start, label_len) = store.push_label(label);
        store.records.push(ScopeRecord {
            label_start,
            label_len,
            parent,
            cmd: raw,
            thread,
            kind,
            state: RecordState::Open,
            statistics: with_statistics,
        });
        store.not_ended += 1;
        store.next_in_page += 1;
        store.open.push(id);
        match sampled {
            Ok(()) => Ok(Scope {
                frame: self,
                id: Some(id),
                page: page as u32,
                index,
                done: false,
            }),
            Err(e) => {
                store.fail(id, self.profiler);
                Err(e)
            }
        }
    }

    fn count_drop(&self) {
        self.profiler.dropped_total.fetch_add(1, Ordering::Relaxed);
    }

    /// Hands the store back to the profiler (once).
    pub(crate) fn finish(&mut self, cpu_submit_ns: Option<u64>) -> Result<()> {
        if self.ended {
            return Ok(());
        }
        self.ended = true;
        let store = self.store.get_mut().unwrap_or_else(PoisonError::into_inner);
        let open = store.not_ended;
        store.drops.not_ended += open;
        store.open.clear();
        self.profiler
            .dropped_total
            .fetch_add(open as u64, Ordering::Relaxed);
        let store = std::mem::take(store);
        self.profiler
            .frame_ended(self.index, self.slot, store, cpu_submit_ns)
    }
}

impl<D: BackendDevice> Drop for Frame<'_, D> {
    fn drop(&mut self) {
        // A failed marker submission is retried once the samples are in.
        let _ = self.finish(None);
    }
}

/// An open scope. End it with [`Scope::end`]; a scope dropped without
/// ending is reported in [`DropCounts::not_ended`].
#[must_use = "a scope must be ended with `Scope::end`, or it is reported as not ended"]
pub struct Scope<'f, D: BackendDevice> {
    frame: &'f Frame<'f, D>,
    /// `None` for a dropped scope.
    id: Option<u32>,
    /// Where its samples are: page, and the start's index.
    page: u32,
    index: u32,
    done: bool,
}

impl<D: BackendDevice> std::fmt::Debug for Scope<'_, D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scope")
            .field("frame", &self.frame.index)
            .field("id", &self.id)
            .finish()
    }
}

impl<'f, D: BackendDevice> Scope<'f, D> {
    fn dropped(frame: &'f Frame<'f, D>) -> Self {
        Self {
            frame,
            id: None,
            page: 0,
            index: 0,
            done: true,
        }
    }

    /// Whether the scope records samples (it was not dropped).
    pub fn is_recorded(&self) -> bool {
        self.id.is_some()
    }

    /// Ends the scope in `cmd`, the command buffer it began on: records a
    /// timestamp after all prior work (and, with statistics, what was counted
    /// since the start). Inner scopes on the same command buffer must be
    /// ended first. On an error the scope is reported as not ended (or
    /// failed, if recording a sample failed).
    pub fn end(mut self, cmd: &mut Recorder<D>) -> Result<()> {
        let Some(id) = self.id else {
            return Ok(());
        };
        let raw = cmd.recorder_id();
        let profiler = self.frame.profiler;
        let mut guard = lock(&self.frame.store);
        let store = &mut *guard;
        if store.records[id as usize].cmd != raw {
            return Err(ProfilerError::WrongCommandBuffer {
                label: store.label_of(id),
            });
        }
        if let Some(i) = store.innermost(raw) {
            let inner = store.open[i];
            if inner != id {
                return Err(ProfilerError::ScopeOrder {
                    label: store.label_of(id),
                    open: store.label_of(inner),
                });
            }
            if i + 1 == store.open.len() {
                store.open.pop();
            } else {
                store.open.remove(i);
            }
        }
        let p = &store.pages[self.page as usize];
        let statistics = p
            .statistics
            .as_ref()
            .filter(|_| store.records[id as usize].statistics);
        let mut recorded = sample::<D>(cmd, &p.timestamps, statistics, self.index + 1);
        if recorded.is_ok() && statistics.is_some() && store.innermost(raw).is_none() {
            // Close this command buffer's statistic chain: nothing is counted
            // outside scopes, and a caller's command buffer can be ended as is.
            recorded = cmd.end_statistics().map_err(ProfilerError::from);
        }
        self.done = true;
        match recorded {
            Ok(()) => {
                store.records[id as usize].state = RecordState::Ended;
                store.not_ended -= 1;
                Ok(())
            }
            Err(e) => {
                store.fail(id, profiler);
                Err(e)
            }
        }
    }
}

impl<D: BackendDevice> Drop for Scope<'_, D> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        if let Some(id) = self.id {
            // Stays `Open`: counted as not ended when the frame ends.
            lock(&self.frame.store).close(id);
        }
    }
}

/// Records one end of a scope: the timestamp after all prior work, then the
/// statistic sample.
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
