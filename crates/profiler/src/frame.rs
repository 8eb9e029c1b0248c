//! Frames and the scopes recorded in them.

use crate::error::{ProfilerError, Result};
use crate::profiler::{lock, Page, Profiler, WhenFull};
use crate::result::DropCounts;
use gpu_counters_core::timeline::PassKind;
use gpu_counters_vulkan::ash::vk;
use gpu_counters_vulkan::{CommandBuffer, CounterSampleBuffer};
use std::sync::atomic::Ordering;
use std::sync::Mutex;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RecordState {
    /// Begun, not ended (yet).
    Open,
    /// Both ends recorded.
    Ended,
    /// Recording a sample failed; counted in `DropCounts::failed`.
    Failed,
}

/// One scope's bookkeeping; scope `id` samples indices `2 * (id % per)` and
/// `2 * (id % per) + 1` of page `id / per`.
pub(crate) struct ScopeRecord {
    pub(crate) label: String,
    pub(crate) kind: PassKind,
    pub(crate) thread: String,
    pub(crate) cmd: vk::CommandBuffer,
    pub(crate) parent: Option<u32>,
    pub(crate) state: RecordState,
}

/// What a ring slot holds, lent to the frame that records into it.
#[derive(Default)]
pub(crate) struct FrameStore {
    pub(crate) pages: Vec<Page>,
    pub(crate) records: Vec<ScopeRecord>,
    /// Ids of the scopes open now, in the order they began.
    pub(crate) open: Vec<u32>,
    pub(crate) drops: DropCounts,
}

impl FrameStore {
    /// Forgets the scopes, keeping the buffers and capacity.
    pub(crate) fn clear(&mut self) {
        self.records.clear();
        self.open.clear();
        self.drops = DropCounts::default();
    }

    /// The innermost open scope on `cmd`.
    fn innermost(&self, cmd: vk::CommandBuffer) -> Option<u32> {
        self.open
            .iter()
            .rev()
            .copied()
            .find(|&o| self.records[o as usize].cmd == cmd)
    }
}

/// One frame being recorded. Share it by reference between threads (it is
/// `Sync`); each thread records scopes into its own command buffers with
/// [`Frame::scope`]. Hand it to [`Profiler::end_frame`] when its command
/// buffers are submitted.
pub struct Frame<'p> {
    pub(crate) profiler: &'p Profiler,
    index: u64,
    slot: Option<usize>,
    store: Mutex<FrameStore>,
    ended: bool,
}

impl std::fmt::Debug for Frame<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Frame")
            .field("index", &self.index)
            .field("slot", &self.slot)
            .finish()
    }
}

impl<'p> Frame<'p> {
    pub(crate) fn new(
        profiler: &'p Profiler,
        index: u64,
        slot: Option<usize>,
        store: FrameStore,
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
    /// it open: call [`CommandBuffer::end_statistics`] before ending a
    /// caller's command buffer in that case.
    pub fn scope(&self, cmd: &mut CommandBuffer, label: &str, kind: PassKind) -> Result<Scope<'_>> {
        let raw = cmd.raw();
        let per = self.profiler.options.max_scopes_per_frame;
        let (id, timestamps, statistics) = {
            let mut store = lock(&self.store);
            if self.slot.is_none() {
                store.drops.no_slot += 1;
                self.count_drop();
                return Ok(Scope::dropped(self));
            }
            let id = store.records.len() as u32;
            let page = (id / per) as usize;
            if page >= store.pages.len() {
                if self.profiler.options.when_full != WhenFull::Grow {
                    store.drops.over_capacity += 1;
                    self.count_drop();
                    return Ok(Scope::dropped(self));
                }
                match self
                    .profiler
                    .new_page(self.slot.unwrap_or_default(), store.pages.len())
                {
                    Ok(p) => store.pages.push(p),
                    Err(e) => {
                        store.drops.over_capacity += 1;
                        self.count_drop();
                        return Err(e);
                    }
                }
            }
            let parent = store.innermost(raw);
            store.records.push(ScopeRecord {
                label: label.to_owned(),
                kind,
                thread: thread_name(),
                cmd: raw,
                parent,
                state: RecordState::Open,
            });
            store.open.push(id);
            let p = &store.pages[page];
            (id, p.timestamps.clone(), p.statistics.clone())
        };
        let index = 2 * (id % per);
        let mut scope = Scope {
            frame: self,
            id: Some(id),
            done: false,
        };
        if let Err(e) = sample(cmd, &timestamps, statistics.as_ref(), index) {
            scope.fail();
            return Err(e);
        }
        Ok(scope)
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
        let store = self
            .store
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let open = store
            .records
            .iter()
            .filter(|r| r.state == RecordState::Open)
            .count() as u32;
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

impl Drop for Frame<'_> {
    fn drop(&mut self) {
        // A failed marker submission is retried once the samples are in.
        let _ = self.finish(None);
    }
}

/// An open scope. End it with [`Scope::end`]; a scope dropped without
/// ending is reported in [`DropCounts::not_ended`].
#[must_use = "a scope must be ended with `Scope::end`, or it is reported as not ended"]
pub struct Scope<'f> {
    frame: &'f Frame<'f>,
    /// `None` for a dropped scope.
    id: Option<u32>,
    done: bool,
}

impl std::fmt::Debug for Scope<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scope")
            .field("frame", &self.frame.index)
            .field("id", &self.id)
            .finish()
    }
}

impl<'f> Scope<'f> {
    fn dropped(frame: &'f Frame<'f>) -> Self {
        Self {
            frame,
            id: None,
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
    pub fn end(mut self, cmd: &mut CommandBuffer) -> Result<()> {
        let Some(id) = self.id else {
            return Ok(());
        };
        let raw = cmd.raw();
        let per = self.frame.profiler.options.max_scopes_per_frame;
        let (timestamps, statistics, outermost) = {
            let mut store = lock(&self.frame.store);
            let rec = &store.records[id as usize];
            if rec.cmd != raw {
                return Err(ProfilerError::WrongCommandBuffer {
                    label: rec.label.clone(),
                });
            }
            match store.innermost(raw) {
                Some(inner) if inner != id => {
                    return Err(ProfilerError::ScopeOrder {
                        label: rec.label.clone(),
                        open: store.records[inner as usize].label.clone(),
                    });
                }
                _ => {}
            }
            store.open.retain(|&o| o != id);
            let outermost = store.innermost(raw).is_none();
            let p = &store.pages[(id / per) as usize];
            (p.timestamps.clone(), p.statistics.clone(), outermost)
        };
        let index = 2 * (id % per) + 1;
        let mut recorded = sample(cmd, &timestamps, statistics.as_ref(), index);
        if recorded.is_ok() && outermost && statistics.is_some() {
            // Close this command buffer's statistic chain: nothing is counted
            // outside scopes, and a caller's command buffer can be ended as is.
            recorded = cmd.end_statistics().map_err(ProfilerError::from);
        }
        match recorded {
            Ok(()) => {
                let mut store = lock(&self.frame.store);
                store.records[id as usize].state = RecordState::Ended;
                self.done = true;
                Ok(())
            }
            Err(e) => {
                self.fail();
                Err(e)
            }
        }
    }

    /// Marks the scope failed and counts it.
    fn fail(&mut self) {
        if let Some(id) = self.id {
            let mut store = lock(&self.frame.store);
            store.open.retain(|&o| o != id);
            if store.records[id as usize].state != RecordState::Failed {
                store.records[id as usize].state = RecordState::Failed;
                store.drops.failed += 1;
                self.frame.count_drop();
            }
        }
        self.done = true;
    }
}

impl Drop for Scope<'_> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        if let Some(id) = self.id {
            // Stays `Open`: counted as not ended when the frame ends.
            lock(&self.frame.store).open.retain(|&o| o != id);
        }
    }
}

/// Records one end of a scope: the timestamp after all prior work, then the
/// statistic sample.
fn sample(
    cmd: &mut CommandBuffer,
    timestamps: &CounterSampleBuffer,
    statistics: Option<&CounterSampleBuffer>,
    index: u32,
) -> Result<()> {
    cmd.sample_counters(timestamps, index, true)?;
    if let Some(stats) = statistics {
        cmd.sample_counters(stats, index, false)?;
    }
    Ok(())
}

fn thread_name() -> String {
    let t = std::thread::current();
    match t.name() {
        Some(name) => name.to_owned(),
        None => format!("{:?}", t.id()),
    }
}
