//! The profiler: options, the ring of sample buffers, and collection
//! (frames begin and end in [`crate::frame`]; their samples resolve in
//! [`resolve`]).

mod resolve;

use crate::error::{ProfilerError, Result};
use crate::lock;
use crate::result::{to_timeline, DropCounts, FrameResult, ScopeResult};
use crate::shared_str::Interner;
use crate::store::{FrameStore, Page, RecordCell, Recorders};
use gpu_counters_hal::timeline::Timeline;
use gpu_counters_hal::{
    cpu_monotonic_ns, BackendDevice, BackendMarker, BackendSampleBuffer, Calibration,
    CommonCounterSet, CounterSampleBufferDescriptor, DeviceInfo,
};
use resolve::Resolved;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// What [`Profiler::begin_frame`] does when the next ring slot still holds a
/// frame the GPU has not finished, and what [`Frame::scope`](crate::Frame::scope) does when a
/// frame's slot has no room for another scope.
///
/// Whatever the policy, a frame still being recorded in that slot (not
/// ended) is abandoned, as [`Profiler`] says, and the new frame takes the
/// slot: the ring never grows for a frame that may never end, nor stalls
/// for it longer than `Wait`'s timeout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WhenFull {
    /// Poll the oldest frame until it finishes, for at most `timeout`; then
    /// fail with [`ProfilerError::RingFull`], or, if that frame is still
    /// being recorded, abandon it. Scopes past a frame's capacity are
    /// dropped and counted (waiting cannot free room in a live frame).
    Wait {
        /// The longest `begin_frame` waits.
        timeout: Duration,
    },
    /// Allocate another ring slot (the ring grows for good, see
    /// [`Profiler::ring_size`]); a frame past its capacity gets another set
    /// of sample buffers, which its slot keeps for later frames. A slot
    /// held by a frame still being recorded is not grown for: that frame is
    /// abandoned at once.
    Grow,
    /// Begin the frame without a slot: its scopes record nothing and are
    /// reported in [`DropCounts::no_slot`]. Scopes past a frame's capacity
    /// are dropped and counted in [`DropCounts::over_capacity`]. A slot held
    /// by a frame still being recorded goes to the new frame: that frame is
    /// abandoned at once.
    Drop,
}

/// The most frames a [`Profiler`] may have in flight
/// ([`ProfilerOptions::frames_in_flight`]).
pub const MAX_FRAMES_IN_FLIGHT: usize = 64;

/// The most scopes the whole ring may hold at its start:
/// [`ProfilerOptions::frames_in_flight`] times
/// [`ProfilerOptions::max_scopes_per_frame`]. Each scope takes two samples
/// per counter set, and each sample GPU and host memory, so this keeps a
/// profiler's footprint to at most a few hundred MiB.
pub const MAX_RING_SCOPES: u64 = 1 << 20;

/// How a [`Profiler`] is set up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProfilerOptions {
    /// Ring slots: how many frames may be in flight (recorded and not yet
    /// finished on the GPU) before [`ProfilerOptions::when_full`] applies. At
    /// least 1, at most [`MAX_FRAMES_IN_FLIGHT`].
    pub frames_in_flight: usize,
    /// Scopes one ring slot holds; each takes two samples per counter set.
    /// At least 1, twice it at most the device's sample count limit, and
    /// times `frames_in_flight` at most [`MAX_RING_SCOPES`].
    ///
    /// A recorder takes room for its scopes a few at a time (up to 128,
    /// never across a segment of 128 scopes of a page, and never more than
    /// the room left over four times the recorders that took room in the
    /// frame), so that most scopes cost no atomic operation, and recorders
    /// on several threads write groups of timestamp blocks of their own.
    /// What a recorder took and did not use is lost to the frame: at most
    /// 127 scopes. One recorder alone fills the frame exactly.
    pub max_scopes_per_frame: u32,
    /// Sample pipeline statistics as well as timestamps; fails at
    /// [`Profiler::new`] on a device without the statistic counter set.
    pub statistics: bool,
    /// What to do when the ring or a frame is full.
    pub when_full: WhenFull,
    /// The queue's name in results and timelines; `None` names it after the
    /// device's queue family.
    pub queue_name: Option<String>,
}

impl Default for ProfilerOptions {
    /// Three frames in flight, 256 scopes per frame, timestamps only, wait
    /// up to one second when the ring is full.
    fn default() -> Self {
        Self {
            frames_in_flight: 3,
            max_scopes_per_frame: 256,
            statistics: false,
            when_full: WhenFull::Wait {
                timeout: Duration::from_secs(1),
            },
            queue_name: None,
        }
    }
}

type Marker<D> = <<D as BackendDevice>::Backend as gpu_counters_hal::Backend>::Marker;

/// What [`Profiler::lend_slot`] hands a new frame.
pub(crate) struct Lent<D: BackendDevice> {
    /// The frame's number.
    pub(crate) index: u64,
    /// Its ring slot; `None` for a frame without one.
    pub(crate) slot: Option<usize>,
    /// The slot's store (a store of its own without a slot).
    pub(crate) store: Arc<FrameStore<D>>,
    /// The recorders the slot keeps, lent to the frame while it records.
    pub(crate) recorders: Recorders,
}

struct RingSlot<D: BackendDevice> {
    /// The buffers and records, shared with the frame recording into them.
    /// A frame the profiler abandons keeps them, and the slot gets a new
    /// store, whose first page the next frame lent the slot allocates.
    store: Arc<FrameStore<D>>,
    /// Scope ids its ended frame used: `0..used`, scope `id` at record
    /// `id % per` of page `id / per`, sampling `2 * (id % per)` and the
    /// next index.
    used: u32,
    /// What its ended frame dropped as it recorded.
    drops: DropCounts,
    /// The recorders its frame's scopes took ids on (lent to the frame
    /// while it records).
    recorders: Recorders,
    /// The frame using the slot (recording, in flight, or finished but not
    /// yet reset).
    frame: Option<u64>,
    /// Signalled by an empty submission queued behind the frame's work (the
    /// frame marker): tells the profiler, and the validation layer's
    /// tracking, that everything up to it has finished, so the slot's queries
    /// may be reset on the host.
    fence: Marker<D>,
    /// Whether the marker was submitted and the fence not reset since.
    marker: bool,
}

enum Stage {
    Recording,
    InFlight { cpu_submit_ns: Option<u64> },
    Done(FrameResult),
}

struct Pending<D: BackendDevice> {
    index: u64,
    slot: Option<usize>,
    stage: Stage,
    /// The frame's store while it is being recorded, to count what it held
    /// if it is abandoned.
    recording: Option<Arc<FrameStore<D>>>,
}

struct State<D: BackendDevice> {
    slots: Vec<RingSlot<D>>,
    /// Slot ids in ring order.
    order: Vec<usize>,
    /// Position in `order` of the slot the next frame takes.
    cursor: usize,
    next_frame: u64,
    /// Every frame begun and not yet collected, oldest first.
    pending: VecDeque<Pending<D>>,
}

/// GPU scope profiler: nested, labelled scopes around passes and command
/// ranges, from several threads, over a ring of counter sample buffers for
/// frames in flight.
///
/// Per frame: [`Profiler::begin_frame`], [`Frame::scope`](crate::Frame::scope) /
/// [`Scope::end`](crate::Scope::end) around work recorded into command
/// buffers (from any thread; a [`Frame`](crate::Frame) is shared by reference), submit the
/// command buffers yourself, [`Profiler::end_frame`], and now and then
/// [`Profiler::collect`] the frames the GPU finished. Sample buffers are
/// reset and reused, so a steady state allocates nothing on the GPU.
///
/// Nothing is lost silently: every scope begun comes back in a
/// [`FrameResult`] or is counted in its [`DropCounts`].
///
/// # Frames that never end
///
/// A frame that is never ended (leaked with `mem::forget`, or recorded for
/// longer than the ring allows) does not hold back the frames after it. It
/// is *abandoned* once it is still being recorded when
///
/// - the ring comes back to its slot ([`Profiler::begin_frame`] needs it
///   for the frame `ring_size` after it): at once under [`WhenFull::Grow`]
///   and [`WhenFull::Drop`], and once `timeout` has run out under
///   [`WhenFull::Wait`]; or
/// - [`ProfilerOptions::frames_in_flight`] frames begun after it have ended
///   (or were abandoned): this covers a frame that got no slot.
///
/// An abandoned frame comes back from [`Profiler::collect`] in its place in
/// frame order, without scopes: every scope begun in it by then is counted
/// in [`DropCounts::frame_abandoned`] (ended or not), and those it dropped
/// in their own counts, all added to [`Profiler::dropped_scopes_total`].
/// Its slot gets new sample buffers; the frame keeps the old ones, so what
/// it recorded, even submitted later, writes no other frame's samples (a
/// leaked frame's buffers are leaked with it). From then on
/// [`Frame::scope`](crate::Frame::scope),
/// [`Frame::pass_scope`](crate::Frame::pass_scope) and
/// [`Profiler::end_frame`] on it fail with [`ProfilerError::FrameAbandoned`] (its open scopes may still
/// be ended, for their command buffers' sake, and have no result);
/// [`Frame::is_abandoned`](crate::Frame::is_abandoned) tells. A
/// scope begun on another thread at the very moment of abandoning is
/// counted when the frame ends. A frame is never abandoned while at most
/// `frames_in_flight - 1` frames were begun after it: raise
/// [`ProfilerOptions::frames_in_flight`] for frames recorded across more.
pub struct Profiler<D: BackendDevice> {
    pub(crate) device: D,
    pub(crate) options: ProfilerOptions,
    queue_name: String,
    state: Mutex<State<D>>,
    calibration: Mutex<Calibration>,
    /// Labels of scopes, each kept once (a thread's recent labels are
    /// shared without it).
    pub(crate) labels: Mutex<Interner>,
    /// What frames are resolved into, per page (timestamps, statistics):
    /// kept between collects, so that resolving allocates nothing.
    resolved: Mutex<Resolved>,
    /// Emptied scope lists of results handed back to
    /// [`Profiler::collect_into`], for the next frames' results.
    spare_scopes: Mutex<Vec<Vec<ScopeResult>>>,
    pub(crate) dropped_total: AtomicU64,
    pub(crate) buffers: AtomicUsize,
    sink: Mutex<Option<Box<dyn FrameSink>>>,
}

/// Receives every frame a [`Profiler`] collects, oldest first, as
/// [`Profiler::collect`] returns it, with the calibration its times came
/// from: a live viewer's feed (see [`Profiler::set_frame_sink`]).
pub trait FrameSink: Send {
    /// One collected frame of the device `device`.
    fn frame(&mut self, device: &DeviceInfo, calibration: &Calibration, frame: &FrameResult);
}

impl<D: BackendDevice> std::fmt::Debug for Profiler<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Profiler")
            .field("device", &self.device)
            .field("options", &self.options)
            .field("ring_size", &self.ring_size())
            .finish()
    }
}

impl<D: BackendDevice> Profiler<D> {
    /// A profiler on `device` (of any backend): allocates `frames_in_flight`
    /// slots of sample buffers and calibrates the device's timestamps.
    pub fn new(device: &D, options: ProfilerOptions) -> Result<Self> {
        if options.frames_in_flight == 0 {
            return Err(ProfilerError::InvalidOptions(
                "frames_in_flight is 0; the ring needs at least one slot".into(),
            ));
        }
        if options.max_scopes_per_frame == 0 {
            return Err(ProfilerError::InvalidOptions(
                "max_scopes_per_frame is 0; a frame needs room for at least one scope".into(),
            ));
        }
        if options.frames_in_flight > MAX_FRAMES_IN_FLIGHT {
            return Err(ProfilerError::InvalidOptions(format!(
                "frames_in_flight {} is over the limit of {MAX_FRAMES_IN_FLIGHT}",
                options.frames_in_flight
            )));
        }
        let ring_scopes = options.frames_in_flight as u64 * options.max_scopes_per_frame as u64;
        if ring_scopes > MAX_RING_SCOPES {
            return Err(ProfilerError::InvalidOptions(format!(
                "frames_in_flight {} times max_scopes_per_frame {} is {ring_scopes} scopes, over the limit of {MAX_RING_SCOPES} for the whole ring",
                options.frames_in_flight, options.max_scopes_per_frame
            )));
        }
        let limit = device.info().max_sample_count;
        if options.max_scopes_per_frame > limit / 2 {
            return Err(ProfilerError::InvalidOptions(format!(
                "max_scopes_per_frame {} needs {} samples per buffer, over the device limit of {limit}",
                options.max_scopes_per_frame,
                options.max_scopes_per_frame as u64 * 2,
            )));
        }
        let calibration = device.calibration()?;
        let queue_name = options
            .queue_name
            .clone()
            .unwrap_or_else(|| device.queue_name());
        let profiler = Self {
            device: device.clone(),
            options,
            queue_name,
            state: Mutex::new(State {
                slots: Vec::new(),
                order: Vec::new(),
                cursor: 0,
                next_frame: 0,
                pending: VecDeque::new(),
            }),
            calibration: Mutex::new(calibration),
            labels: Mutex::new(Interner::default()),
            resolved: Mutex::new(Resolved::default()),
            spare_scopes: Mutex::new(Vec::new()),
            dropped_total: AtomicU64::new(0),
            buffers: AtomicUsize::new(0),
            sink: Mutex::new(None),
        };
        {
            let mut st = lock(&profiler.state);
            for _ in 0..profiler.options.frames_in_flight {
                let s = profiler.new_slot(&mut st)?;
                st.order.push(s);
            }
        }
        Ok(profiler)
    }

    /// The device.
    pub fn device(&self) -> &D {
        &self.device
    }

    /// The options the profiler was made with.
    pub fn options(&self) -> &ProfilerOptions {
        &self.options
    }

    /// The queue's name in results.
    pub fn queue_name(&self) -> &str {
        &self.queue_name
    }

    /// Ring slots now: `frames_in_flight`, plus one per growth under
    /// [`WhenFull::Grow`].
    pub fn ring_size(&self) -> usize {
        lock(&self.state).order.len()
    }

    /// Counter sample buffers the profiler has allocated in all; constant in
    /// a steady state.
    pub fn sample_buffer_count(&self) -> usize {
        self.buffers.load(Ordering::Relaxed)
    }

    /// Scopes dropped so far over all frames, collected or not (see
    /// [`DropCounts`]): a frame's are counted as it ends or is abandoned,
    /// and as its samples are resolved.
    pub fn dropped_scopes_total(&self) -> u64 {
        self.dropped_total.load(Ordering::Relaxed)
    }

    /// The current calibration of GPU timestamps onto the CPU clock.
    pub fn calibration(&self) -> Calibration {
        lock(&self.calibration).clone()
    }

    /// Takes the next ring slot (or none) for a new frame, as
    /// [`Profiler::begin_frame`] says: waits, grows the ring, or abandons
    /// the frame still recording in it, as the options decide.
    pub(crate) fn lend_slot(&self) -> Result<Lent<D>> {
        let started = Instant::now();
        let mut nap = Duration::from_micros(50);
        loop {
            let mut st = lock(&self.state);
            let s = st.order[st.cursor];
            if !self.try_free_slot(&mut st, s)? {
                if let WhenFull::Wait { timeout } = self.options.when_full {
                    let waited = started.elapsed();
                    if waited < timeout {
                        drop(st);
                        std::thread::sleep(nap.min(timeout - waited));
                        nap = (nap * 2).min(Duration::from_millis(1));
                        continue;
                    }
                }
                match self.recording_in(&st, s) {
                    // Frames that can never end must not hold the ring.
                    Some(i) => {
                        self.abandon(&mut st, i);
                        self.abandon_behind(&mut st);
                    }
                    None => match self.options.when_full {
                        WhenFull::Grow => {
                            let new = self.new_slot(&mut st)?;
                            let at = st.cursor;
                            st.order.insert(at, new);
                            return Ok(self.lend(&mut st, Some(new)));
                        }
                        WhenFull::Drop => return Ok(self.lend(&mut st, None)),
                        WhenFull::Wait { .. } => {
                            return Err(ProfilerError::RingFull {
                                busy_frame: st.slots[s].frame.unwrap_or_default(),
                                ring_size: st.order.len(),
                                waited: started.elapsed(),
                            });
                        }
                    },
                }
            }
            if st.slots[s].store.pages.count() == 0 {
                // The slot's frame was abandoned and kept its pages.
                let page = self.new_page(s, 0)?;
                st.slots[s].store.pages.push(page);
            }
            return Ok(self.lend(&mut st, Some(s)));
        }
    }

    /// The frames the GPU has finished, oldest first, never waiting. A frame
    /// is finished when all its samples are available and its recorders are
    /// known finished, or its frame marker has signalled (see
    /// [`Profiler::end_frame`]), which can be a moment after the caller's
    /// own fence. A frame is returned once every frame
    /// begun before it has been; each frame is returned exactly once. Their
    /// slots are reset for reuse.
    pub fn collect(&self) -> Result<Vec<FrameResult>> {
        let mut out = Vec::new();
        self.collect_into(&mut out)?;
        Ok(out)
    }

    /// [`Profiler::collect`] into `frames`, replacing what it held: the
    /// memory of the frames it held is reused for the new ones, so a loop
    /// that collects every frame into the same vector allocates (and
    /// page-faults) nothing per scope in steady state. On an error `frames`
    /// is left empty.
    pub fn collect_into(&self, frames: &mut Vec<FrameResult>) -> Result<()> {
        {
            let mut spare = lock(&self.spare_scopes);
            for f in frames.drain(..) {
                // Kept with its results: resolving overwrites them in place,
                // so each one's memory (cold by now) is fetched once, where
                // clearing here first fetched it a second time.
                // As many as frames can be in flight: more would never be used.
                if spare.len() <= self.options.frames_in_flight {
                    spare.push(f.scopes);
                }
            }
        }
        let out = frames;
        let mut st = lock(&self.state);
        self.finish_all(&mut st, false)?;
        while matches!(st.pending.front(), Some(p) if matches!(p.stage, Stage::Done(_))) {
            if let Some(Pending {
                stage: Stage::Done(r),
                ..
            }) = st.pending.pop_front()
            {
                out.push(r);
            }
        }
        drop(st);
        if !out.is_empty() {
            if let Some(sink) = lock(&self.sink).as_mut() {
                let calibration = self.calibration();
                for r in out.iter() {
                    sink.frame(self.device.info(), &calibration, r);
                }
            }
        }
        Ok(())
    }

    /// Hands every frame collected from now on (by [`Profiler::collect`] and
    /// [`Profiler::wait_collect_all`]) to `sink` as well, or to none with
    /// `None`. The sink runs on the collecting thread, after the frames are
    /// resolved and before they are returned.
    pub fn set_frame_sink(&self, sink: Option<Box<dyn FrameSink>>) {
        *lock(&self.sink) = sink;
    }

    /// Streams every frame collected from now on into the Tracy profiler
    /// (feature `tracy`), starting this process's Tracy client: one GPU
    /// context per device and queue, calibrated, zones, statistics and error
    /// bounds as plots (see [`crate::export::tracy`]). Replaces any sink set
    /// with [`Profiler::set_frame_sink`].
    #[cfg(feature = "tracy")]
    pub fn stream_to_tracy(&self) {
        self.set_frame_sink(Some(
            Box::new(crate::export::tracy_client::TracySink::new()),
        ));
    }

    /// Waits until every ended frame has finished, then collects them all
    /// (for shutdown). Frames still being recorded, and those after them,
    /// stay for a later `collect`. On timeout nothing is consumed.
    pub fn wait_collect_all(&self, timeout: Duration) -> Result<Vec<FrameResult>> {
        let started = Instant::now();
        let mut nap = Duration::from_micros(50);
        loop {
            {
                let mut st = lock(&self.state);
                self.finish_all(&mut st, true)?;
                let unfinished = st
                    .pending
                    .iter()
                    .take_while(|p| !matches!(p.stage, Stage::Recording))
                    .find(|p| !matches!(p.stage, Stage::Done(_)))
                    .map(|p| p.index);
                match unfinished {
                    None => break,
                    Some(frame) => {
                        let waited = started.elapsed();
                        if waited >= timeout {
                            return Err(ProfilerError::CollectTimeout { frame, waited });
                        }
                    }
                }
            }
            std::thread::sleep(nap);
            nap = (nap * 2).min(Duration::from_millis(1));
        }
        self.collect()
    }

    /// A timeline of `frames` on this profiler's device, for the exporters.
    pub fn timeline(&self, frames: &[FrameResult]) -> Timeline {
        to_timeline(&self.device.info().name, frames)
    }

    /// Hands the next slot (or none) to a new frame.
    fn lend(&self, st: &mut State<D>, slot: Option<usize>) -> Lent<D> {
        let index = st.next_frame;
        st.next_frame += 1;
        let (store, recorders) = match slot {
            Some(s) => {
                st.slots[s].frame = Some(index);
                st.cursor = (st.cursor + 1) % st.order.len();
                let slot = &mut st.slots[s];
                (slot.store.clone(), std::mem::take(&mut slot.recorders))
            }
            None => (Arc::new(FrameStore::new()), Recorders::default()),
        };
        st.pending.push_back(Pending {
            index,
            slot,
            stage: Stage::Recording,
            recording: Some(store.clone()),
        });
        Lent {
            index,
            slot,
            store,
            recorders,
        }
    }

    /// Takes back what a frame used when it ends: the ids `0..used` of
    /// `store`, its slot's, and the recorders they were recorded on.
    pub(crate) fn frame_ended(
        &self,
        index: u64,
        slot: Option<usize>,
        store: &Arc<FrameStore<D>>,
        used: u32,
        recorders: Recorders,
        cpu_submit_ns: Option<u64>,
    ) -> Result<()> {
        let mut st = lock(&self.state);
        // Set under this lock: the store is the frame's alone, its slot has
        // another, and its result was made when it was abandoned.
        if store.abandoned.load(Ordering::Relaxed) {
            let counted = store.counted.load(Ordering::Relaxed);
            // Scopes begun as it was abandoned, on another thread, that
            // were not seen then.
            let late = store.held().total().saturating_sub(counted);
            self.dropped_total
                .fetch_add(u64::from(late), Ordering::Relaxed);
            return Err(ProfilerError::FrameAbandoned { frame: index });
        }
        let drops = store.drops();
        self.dropped_total
            .fetch_add(u64::from(drops.total()), Ordering::Relaxed);
        let mut marked = Ok(());
        let stage = match slot {
            Some(s) => {
                if let Some(rs) = st.slots.get_mut(s) {
                    rs.used = used;
                    rs.drops = drops;
                    rs.recorders = recorders;
                    // Recorders the backend sees finish by themselves need
                    // no marker (on Vulkan, a submission of its own): the
                    // frame is done once their tickets are.
                    if cpu_submit_ns.is_some()
                        && rs.used > 0
                        && !rs.marker
                        && !rs.recorders.report_themselves()
                    {
                        marked = self.submit_marker(rs);
                    }
                }
                Stage::InFlight { cpu_submit_ns }
            }
            None => Stage::Done(FrameResult {
                index,
                queue: self.queue_name.clone(),
                cpu_submit_ns,
                cpu_complete_ns: cpu_monotonic_ns(),
                scopes: Vec::new(),
                dropped_scopes: drops.total(),
                drops,
            }),
        };
        if let Some(p) = st.pending.iter_mut().find(|p| p.index == index) {
            p.stage = stage;
            p.recording = None;
        }
        self.abandon_behind(&mut st);
        marked
    }

    /// The position in `pending` of the frame holding slot `s`, if it is
    /// still being recorded.
    fn recording_in(&self, st: &State<D>, s: usize) -> Option<usize> {
        let f = st.slots[s].frame?;
        st.pending
            .iter()
            .position(|p| p.index == f && p.recording.is_some())
    }

    /// Abandons every frame still being recorded once
    /// `frames_in_flight` frames begun after it have ended or were
    /// abandoned.
    fn abandon_behind(&self, st: &mut State<D>) {
        let mut later = 0usize;
        for i in (0..st.pending.len()).rev() {
            if st.pending[i].recording.is_some() {
                if later < self.options.frames_in_flight {
                    continue;
                }
                self.abandon(st, i);
            }
            later += 1;
        }
    }

    /// Abandons pending frame `i`, still being recorded: its result is made
    /// now, without scopes, every scope it held counted (in
    /// [`DropCounts::frame_abandoned`] those begun, in the other counts
    /// those it dropped), and its slot gets a new store, its frame keeping
    /// the old one (so nothing it recorded, or records still, aliases a
    /// later frame's samples).
    fn abandon(&self, st: &mut State<D>, i: usize) {
        let Some(store) = st.pending[i].recording.take() else {
            return;
        };
        store.abandoned.store(true, Ordering::Relaxed);
        let held = store.held();
        store.counted.store(held.total(), Ordering::Relaxed);
        let drops = DropCounts {
            no_slot: held.no_slot,
            over_capacity: held.over_capacity,
            failed: held.failed,
            frame_abandoned: held.begun,
            ..DropCounts::default()
        };
        self.dropped_total
            .fetch_add(u64::from(drops.total()), Ordering::Relaxed);
        let p = &mut st.pending[i];
        p.stage = Stage::Done(FrameResult {
            index: p.index,
            queue: self.queue_name.clone(),
            cpu_submit_ns: None,
            cpu_complete_ns: cpu_monotonic_ns(),
            scopes: Vec::new(),
            dropped_scopes: drops.total(),
            drops,
        });
        if let Some(s) = p.slot {
            // No marker was queued for it: it never ended.
            let slot = &mut st.slots[s];
            slot.store = Arc::new(FrameStore::new());
            slot.used = 0;
            slot.drops = DropCounts::default();
            slot.recorders = Recorders::default();
            slot.frame = None;
        }
    }

    /// Queues the frame marker: an empty submission that signals the slot's
    /// fence once all work submitted before it has finished.
    fn submit_marker(&self, slot: &mut RingSlot<D>) -> Result<()> {
        // `marker` is false: the marker is new or was reset since it last
        // signaled, so it may be submitted.
        self.device.submit_marker(&slot.fence)?;
        slot.marker = true;
        Ok(())
    }

    fn new_slot(&self, st: &mut State<D>) -> Result<usize> {
        let id = st.slots.len();
        let page = self.new_page(id, 0)?;
        let fence = self.device.make_marker()?;
        let store = FrameStore::new();
        store.pages.push(page);
        st.slots.push(RingSlot {
            store: Arc::new(store),
            used: 0,
            drops: DropCounts::default(),
            recorders: Recorders::default(),
            frame: None,
            fence,
            marker: false,
        });
        Ok(id)
    }

    /// Allocates one set of sample buffers.
    pub(crate) fn new_page(&self, slot: usize, page: usize) -> Result<Page<D>> {
        let samples = self.options.max_scopes_per_frame * 2;
        let make = |set: CommonCounterSet, what: &str| {
            self.device
                .make_counter_sample_buffer(&CounterSampleBufferDescriptor::new(
                    set,
                    format!("profiler {what} slot {slot} page {page}"),
                    samples,
                ))
                .inspect(|_| {
                    self.buffers.fetch_add(1, Ordering::Relaxed);
                })
        };
        let timestamps = make(CommonCounterSet::Timestamp, "timestamps")?;
        let statistics = if self.options.statistics {
            Some(make(CommonCounterSet::Statistic, "statistics")?)
        } else {
            None
        };
        Ok(Page {
            timestamps,
            statistics,
            records: (0..self.options.max_scopes_per_frame)
                .map(|_| RecordCell::new())
                .collect(),
        })
    }

    /// Resolves every in-flight frame whose samples are all available, and
    /// resets the slots of finished frames.
    /// `waiting`: as [`Profiler::try_finish`].
    fn finish_all(&self, st: &mut State<D>, waiting: bool) -> Result<()> {
        for i in 0..st.pending.len() {
            self.try_finish(st, i, waiting)?;
        }
        for s in 0..st.slots.len() {
            let done = st.slots[s].frame.is_some_and(|f| {
                !st.pending
                    .iter()
                    .any(|p| p.index == f && !matches!(p.stage, Stage::Done(_)))
            });
            if done {
                self.reset_slot(st, s)?;
            }
        }
        Ok(())
    }

    /// Whether slot `s` is free, finishing and resetting it if its frame is
    /// done.
    fn try_free_slot(&self, st: &mut State<D>, s: usize) -> Result<bool> {
        let Some(f) = st.slots[s].frame else {
            return Ok(true);
        };
        if let Some(i) = st.pending.iter().position(|p| p.index == f) {
            match st.pending[i].stage {
                Stage::Recording => return Ok(false),
                Stage::InFlight { .. } => {
                    if !self.try_finish(st, i, true)? {
                        return Ok(false);
                    }
                }
                Stage::Done(_) => {}
            }
        }
        self.reset_slot(st, s)?;
        Ok(true)
    }

    fn reset_slot(&self, st: &mut State<D>, s: usize) -> Result<()> {
        let slot = &mut st.slots[s];
        if slot.marker {
            // The marker was seen signaled (the frame is done).
            slot.fence.reset()?;
            slot.marker = false;
        }
        // Only the samples the frame's scopes took: scope `id` sampled
        // `2 * (id % per)` and the next index of page `id / per`, and every
        // other sample of the slot is still unwritten since the reset after
        // the frame that last used it.
        let per = self.options.max_scopes_per_frame;
        for (_, page, n) in slot.store.used_pages(slot.used, per) {
            let range = 0..2 * n as u64;
            page.timestamps.reset_range(range.clone())?;
            if let Some(stats) = &page.statistics {
                stats.reset_range(range)?;
            }
        }
        slot.store.clear(slot.used, per);
        slot.used = 0;
        slot.drops = DropCounts::default();
        slot.recorders.clear();
        slot.frame = None;
        Ok(())
    }

    /// Turns pending frame `i` into its result if it is in flight and all
    /// its samples are available. Returns whether it is done.
    ///
    /// A frame whose recorders report their own completion (see
    /// [`Profiler::end_frame`]) is done once they are; `waiting` (a caller
    /// blocks on it: `begin_frame` for its slot, `wait_collect_all`) queues
    /// a marker behind it instead, in case nobody ever looks at its
    /// submissions.
    fn try_finish(&self, st: &mut State<D>, i: usize, waiting: bool) -> Result<bool> {
        let (cpu_submit_ns, s) = match (&st.pending[i].stage, st.pending[i].slot) {
            (Stage::Done(_), _) => return Ok(true),
            (Stage::Recording, _) => return Ok(false),
            (Stage::InFlight { cpu_submit_ns }, Some(s)) => (*cpu_submit_ns, s),
            (Stage::InFlight { .. }, None) => {
                return Err(ProfilerError::Counters(gpu_counters_hal::Error::Internal(
                    "profiler: frame in flight without a slot".into(),
                )))
            }
        };
        let index = st.pending[i].index;
        let slot = &mut st.slots[s];
        let gpu_work = slot.used > 0;
        // The GPU finished every recorder of the frame: its queries are no
        // longer in use, marker or not.
        let mut retired = false;
        if gpu_work && slot.marker {
            let signalled = slot.fence.is_signaled()?;
            if !signalled {
                return Ok(false);
            }
        } else if gpu_work && slot.recorders.retired() {
            retired = true;
        } else if gpu_work && cpu_submit_ns.is_some() && slot.recorders.report_themselves() {
            // Submitted and not seen finished yet. A caller waiting for it
            // gets a marker behind it (its submissions may never be looked
            // at); otherwise the tickets will tell.
            if waiting {
                self.submit_marker(slot)?;
            }
            return Ok(false);
        }
        let result = self.resolve(&slot.store, slot.used, slot.drops, index, cpu_submit_ns)?;
        // A frame none of whose samples the GPU wrote (its command buffers
        // were dropped unsubmitted) has no work to wait for, unless a
        // recorder is known to be in flight (its scopes may all have been
        // left unended): its queries are reset only once it is seen done.
        let ran = |r: &FrameResult| !r.scopes.is_empty() || r.drops.failed > 0;
        let idle = !slot.recorders.in_flight();
        match result {
            Some((result, found))
                if slot.marker || retired || !gpu_work || (idle && !ran(&result)) =>
            {
                // Counted once, here: a frame may be resolved again before
                // it is done.
                self.dropped_total
                    .fetch_add(u64::from(found), Ordering::Relaxed);
                st.pending[i].stage = Stage::Done(result);
                Ok(true)
            }
            Some(_) => {
                // All samples are in, but nothing says the work submitted
                // with them has retired: queue the marker and wait for it
                // before the slot's queries are reset.
                self.submit_marker(slot)?;
                Ok(false)
            }
            None => {
                if slot.marker {
                    // The marker signalled before the frame's work was
                    // submitted: re-arm it once the samples are in.
                    slot.fence.reset()?;
                    slot.marker = false;
                }
                Ok(false)
            }
        }
    }
}

impl<D: BackendDevice> Drop for Profiler<D> {
    fn drop(&mut self) {
        let st = self.state.get_mut().unwrap_or_else(PoisonError::into_inner);
        if st.slots.iter().any(|s| s.marker) {
            // Markers may still be in flight: let them finish before they go
            // (each backend's marker also waits for itself when dropped).
            let _ = self.device.wait_idle();
        }
    }
}
