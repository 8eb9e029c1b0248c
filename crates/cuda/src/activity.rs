//! Zero-intrusion timestamps: kernel and copy boundaries from CUPTI's
//! Activity API, correlated to the samples of a recorder by the launch
//! callbacks' correlation ids. Nothing is launched for a sample.
//!
//! # How a sample finds its boundary
//!
//! The launch callbacks ([`crate::launches`]) tell, for every stream a
//! zero-intrusion device tracks, the correlation id of each successful
//! kernel launch (`cuLaunchKernel`, `cuLaunchKernelEx`), graph launch
//! (`cuGraphLaunch`) and asynchronous copy or memset, at the call's exit. A
//! sample taken at a point of the stream is an *anchor*: the last launch
//! recorded on the stream before it (`prior`) and the first one after it
//! (`next`, filled in by that launch; none once the recorder is submitted).
//! It resolves to
//!
//! - precise: the end of `prior` (after all prior work), or the moment the
//!   sample was taken where that is later (the stream was idle: the GPU
//!   reached the sample's point as it was issued); with no prior work
//!   recorded, the start of `next`;
//! - relaxed: the start of `next` (the cheapest legal placement: before
//!   all later work), or, with no later work in the recorder, what a
//!   precise sample takes.
//!
//! A stream runs its work in order and a launch after the sample starts
//! after the sample was taken, so every value lies between the end of the
//! work before the sample (and the sample's issue) and the start of the
//! work after it: what a timestamp written on the GPU at that point could
//! read. A graph
//! launch is one correlation id with a record per kernel, copy or memset
//! node: its span is the earliest start to the latest end of them.
//!
//! # When a value is known, and when it never will be
//!
//! CUPTI creates a launch's records in its current buffer during the launch
//! call and hands a buffer back (`cuptiActivityFlushAll(0)`, or when full)
//! only once every record in it is complete. So a sample resolves
//! `NotReady` until its recorder's work is done and its record came back. A
//! single-record launch is known once its record arrived; a graph launch
//! once every buffer handed to CUPTI up to its launch call came back (its
//! records are all in those). A launch none of whose records are in the
//! buffers returned by then, or whose record is incomplete, is lost
//! (dropped by CUPTI, counted by `cuptiActivityGetNumDroppedRecords`): the
//! sample resolves as `Error`, with the error value. So does a sample with
//! no recorded work on either side (an empty range). Never a 0.
//!
//! # Clock
//!
//! CUPTI converts the GPU's timestamps onto the clock of a timestamp
//! callback: ours returns `CLOCK_MONOTONIC` ns, so records are on the CPU
//! clock. The bound of that conversion is measured, not assumed: a probe
//! kernel reads `%globaltimer` first and last, and its record must enclose
//! both reads. That bounds CUPTI's offset from `%globaltimer` (`delta`,
//! within ± its half-width `u`), and the device's `%globaltimer`
//! calibration bounds the rest: see [`crate::Device::activity_clock`].
//!
//! # Process-wide
//!
//! CUPTI's activity buffers and timestamp callback are process-wide: this
//! module owns them (one registration per process). Activity kinds are
//! enabled while any zero-intrusion recorder of an
//! [`crate::ActivityTracing::EveryLaunch`] device is open (and for probes),
//! so launches outside recorders are not traced at all.
//!
//! # Tracing only the launches after samples
//!
//! CUPTI's instrumentation costs GPU time for every traced launch (about
//! 260 ns per kernel on an H200). With
//! [`crate::ActivityTracing::LaunchesAfterSamples`] a sample *arms* its
//! stream instead: the launch callback turns tracing on at the entry of the
//! stream's next launch and off at its exit, so that launch alone is
//! traced. A launch made while tracing is off leaves the stream's last
//! launch unknown (`prior` of later samples is none), so such samples take
//! the start of the next (armed) launch. A precise sample right after a
//! traced launch does not arm: that launch's end is its value.

mod buffers;

use crate::cupti::{check, cupti_api};
use crate::launches::{LaunchKind, LaunchObserver, Launches};
use crate::lock;
use cudarc::driver::sys as ds;
use gpu_counters_cupti_sys as cs;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// Records kept for launches whose callback has not run yet (the race
/// between CUPTI's worker thread and a launch's exit), at most.
const MAX_EARLY: usize = 4096;

/// The activity kinds traced.
const KINDS: [cs::CUpti_ActivityKind; 3] = [
    cs::CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
    cs::CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_MEMCPY,
    cs::CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_MEMSET,
];

/// A launch's records as they arrive: the earliest start, the latest end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Span {
    pub(crate) start: u64,
    pub(crate) end: u64,
    pub(crate) records: u32,
    /// A record came back incomplete (no start or end).
    pub(crate) bad: bool,
}

impl Span {
    fn add(&mut self, start: u64, end: u64) {
        if start == 0 || end < start {
            self.bad = true;
            return;
        }
        if self.records == 0 {
            (self.start, self.end) = (start, end);
        } else {
            self.start = self.start.min(start);
            self.end = self.end.max(end);
        }
        self.records += 1;
    }
}

/// A launch some anchor (or a stream's latest launch) may need.
#[derive(Debug)]
struct Wanted {
    refs: u32,
    span: Span,
    kind: LaunchKind,
    /// The newest buffer handed to CUPTI when the launch call returned:
    /// its records are in buffers up to this one.
    last_buffer: u64,
}

/// A zero-intrusion sample's next launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Next {
    Waiting,
    Launched(u32),
    Closed,
}

struct Track {
    refs: u32,
    last: Option<u32>,
    waiting: Vec<Arc<Mutex<Next>>>,
    /// Of `waiting`, the samples that want the stream's next launch traced
    /// ([`crate::ActivityTracing::LaunchesAfterSamples`]).
    armed: u32,
}

#[derive(Default)]
pub(crate) struct State {
    /// Tracked streams, by `CUstream`.
    streams: HashMap<usize, Track>,
    /// CUPTI's (context id, stream id) of the tracked streams.
    pub(crate) ids: HashSet<(u32, u32)>,
    wanted: HashMap<u32, Wanted>,
    /// Records of tracked streams whose launch callback has not run yet.
    early: HashMap<u32, Span>,
    /// The newest correlation id whose launch callback ran.
    newest: u32,
    /// Buffers handed to CUPTI so far (the newest one's number).
    requested: u64,
    /// Buffers handed out and not returned, by number.
    outstanding: BTreeSet<u64>,
    /// Buffer number by address.
    numbers: HashMap<usize, u64>,
    pub(crate) stats: ActivityStats,
}

impl State {
    /// Whether every buffer up to number `n` came back.
    fn returned_up_to(&self, n: u64) -> bool {
        self.outstanding.first().is_none_or(|&m| m > n)
    }

    fn retain(&mut self, c: u32) {
        if let Some(w) = self.wanted.get_mut(&c) {
            w.refs += 1;
        }
    }

    fn release(&mut self, c: u32) {
        if let Some(w) = self.wanted.get_mut(&c) {
            w.refs -= 1;
            if w.refs == 0 {
                self.wanted.remove(&c);
            }
        }
    }
}

/// What CUPTI's activity tracing did so far in this process.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ActivityStats {
    /// Kernel, copy and memset records parsed.
    pub records: u64,
    /// Of those, records of launches a sample or probe needed.
    pub records_used: u64,
    /// Records CUPTI reported it dropped
    /// (`cuptiActivityGetNumDroppedRecords`, summed).
    pub dropped: u64,
    /// Buffers handed to CUPTI, and returned by it.
    pub buffers_requested: u64,
    /// Buffers CUPTI handed back.
    pub buffers_returned: u64,
    /// Buffers CUPTI asked for that could not be allocated (their records
    /// are dropped).
    pub buffers_refused: u64,
    /// Samples that resolved as errors: their launch's records were lost.
    pub samples_lost: u64,
    /// Samples that resolved as errors: no recorded work on either side.
    pub samples_without_work: u64,
    /// Launches, copies and memsets on tracked streams made while tracing
    /// was on: their records are expected (counted at the launch's exit,
    /// so exact as soon as the launch call returned).
    pub launches_traced: u64,
    /// Of those streams' launches, those made while tracing was off.
    pub launches_untraced: u64,
}

/// The process's CUPTI activity tracing, once set up.
pub(crate) struct Activity {
    pub(crate) api: &'static cs::Cupti,
    pub(crate) state: Mutex<State>,
    /// Open users of tracing (recorders, probes): kinds are enabled while
    /// this is above 0.
    enabled: Mutex<u32>,
}

static ACTIVITY: OnceLock<Result<Activity, String>> = OnceLock::new();

/// How many users have tracing on right now (read by the launch callback).
static ENABLED: AtomicU32 = AtomicU32::new(0);
/// Samples waiting for their stream's next launch to be traced, over all
/// streams (read by the launch callback at every launch's entry, so that
/// with none it takes no lock).
static ARMED: AtomicU32 = AtomicU32::new(0);

thread_local! {
    /// Tracing turned on at this thread's launch entry for a sample that
    /// armed the stream, turned off at the launch's exit.
    static LAUNCH_TRACING: std::cell::RefCell<Option<Enabled>> =
        const { std::cell::RefCell::new(None) };
}
/// The newest buffer number handed out (read by the launch callback without
/// the state lock).
static REQUESTED: AtomicU64 = AtomicU64::new(0);

/// CUPTI's timestamp callback: `CLOCK_MONOTONIC` ns.
unsafe extern "C" fn monotonic_ns() -> u64 {
    gpu_counters_hal::cpu_monotonic_ns()
}

impl Activity {
    /// Sets tracing up (once per process): the launch callbacks, the
    /// timestamp callback, the buffer callbacks, and one enable and disable
    /// of the kinds (CUPTI's own start-up, paid here). An error says what is
    /// missing or which call failed.
    pub(crate) fn get() -> Result<&'static Activity, String> {
        ACTIVITY.get_or_init(set_up).as_ref().map_err(Clone::clone)
    }

    /// Starts tracking `stream` (of `ctx`): its launches become anchors.
    pub(crate) fn track(&self, ctx: ds::CUcontext, stream: ds::CUstream) -> Result<(), String> {
        let (mut context_id, mut stream_id) = (0u32, 0u32);
        // SAFETY: valid out-pointers; the context and stream are live (the
        // caller holds them).
        check("cuptiGetContextId", unsafe {
            self.api.cuptiGetContextId(ctx.cast(), &mut context_id)
        })?;
        // SAFETY: as above.
        check("cuptiGetStreamIdEx", unsafe {
            self.api
                .cuptiGetStreamIdEx(ctx.cast(), stream.cast(), 0, &mut stream_id)
        })?;
        let mut st = lock(&self.state);
        st.ids.insert((context_id, stream_id));
        st.streams
            .entry(stream as usize)
            .or_insert_with(|| Track {
                refs: 0,
                last: None,
                waiting: Vec::new(),
                armed: 0,
            })
            .refs += 1;
        Ok(())
    }

    /// Stops tracking `stream` (once per [`Activity::track`]).
    pub(crate) fn untrack(&self, stream: ds::CUstream) {
        let mut st = lock(&self.state);
        let gone = match st.streams.get_mut(&(stream as usize)) {
            Some(t) => {
                t.refs -= 1;
                t.refs == 0
            }
            None => false,
        };
        if gone {
            if let Some(t) = st.streams.remove(&(stream as usize)) {
                ARMED.fetch_sub(t.armed, Ordering::AcqRel);
                for w in &t.waiting {
                    *lock(w) = Next::Closed;
                }
                if let Some(c) = t.last {
                    st.release(c);
                }
            }
        }
    }

    /// Tracing on until the guard drops.
    pub(crate) fn enable(&'static self) -> Result<Enabled, String> {
        let mut n = lock(&self.enabled);
        if *n == 0 {
            for (i, kind) in KINDS.into_iter().enumerate() {
                // SAFETY: a plain CUPTI call with a kind of its own enum.
                let r = unsafe { self.api.cuptiActivityEnable(kind) };
                if let Err(e) = check("cuptiActivityEnable", r) {
                    for k in &KINDS[..i] {
                        if !crate::tracer::permanent(*k) {
                            // SAFETY: as above.
                            let _ = unsafe { self.api.cuptiActivityDisable(*k) };
                        }
                    }
                    return Err(format!("{e} (kind {})", kind.0));
                }
            }
        }
        *n += 1;
        ENABLED.store(*n, Ordering::Release);
        Ok(Enabled { activity: self })
    }

    /// Hands every buffer whose records are all complete back
    /// (`cuptiActivityFlushAll(0)`) and adds up CUPTI's dropped records.
    /// Takes no lock while CUPTI runs the buffer callbacks.
    pub(crate) fn flush(&self) -> Result<(), String> {
        self.flush_with(0)
    }

    /// [`Activity::flush`] with CUPTI's flush flags
    /// (`CUPTI_ACTIVITY_FLAG_FLUSH_FORCED`: also buffers holding records of
    /// unfinished work, which come back incomplete).
    pub(crate) fn flush_with(&self, flags: u32) -> Result<(), String> {
        // SAFETY: a plain CUPTI call; the buffer callbacks it runs lock the
        // state themselves, and no lock is held here.
        check("cuptiActivityFlushAll", unsafe {
            self.api.cuptiActivityFlushAll(flags)
        })?;
        let mut dropped = 0usize;
        // SAFETY: a valid out-pointer; a null context asks for the global
        // queue's count.
        let r = unsafe {
            self.api
                .cuptiActivityGetNumDroppedRecords(std::ptr::null_mut(), 0, &mut dropped)
        };
        check("cuptiActivityGetNumDroppedRecords", r)?;
        if dropped > 0 {
            lock(&self.state).stats.dropped += dropped as u64;
        }
        Ok(())
    }

    /// A sample at the current point of `stream`. With `arm`, the stream's
    /// next launch is traced for it (tracing is not on for the recorder:
    /// [`crate::ActivityTracing::LaunchesAfterSamples`]), unless `precise`
    /// and the launch before it was traced (its end is the value).
    pub(crate) fn anchor(
        &self,
        stream: ds::CUstream,
        issued: u64,
        arm: bool,
        precise: bool,
    ) -> Anchor {
        let mut st = lock(&self.state);
        let next = Arc::new(Mutex::new(Next::Waiting));
        let mut armed = false;
        let prior = match st.streams.get_mut(&(stream as usize)) {
            Some(t) => {
                t.waiting.push(next.clone());
                if arm && !(precise && t.last.is_some()) {
                    armed = true;
                    t.armed += 1;
                    ARMED.fetch_add(1, Ordering::AcqRel);
                }
                t.last
            }
            None => {
                *lock(&next) = Next::Closed;
                None
            }
        };
        if let Some(c) = prior {
            st.retain(c);
        }
        Anchor {
            prior,
            next,
            stream: stream as usize,
            issued,
            armed,
        }
    }

    /// Ends `anchor`'s wait for a next launch (its recorder was submitted).
    pub(crate) fn close(&self, anchor: &Anchor) {
        let mut st = lock(&self.state);
        let mut next = lock(&anchor.next);
        if *next == Next::Waiting {
            *next = Next::Closed;
            drop(next);
            if let Some(t) = st.streams.get_mut(&anchor.stream) {
                t.waiting.retain(|w| !Arc::ptr_eq(w, &anchor.next));
                if anchor.armed && t.armed > 0 {
                    t.armed -= 1;
                    ARMED.fetch_sub(1, Ordering::AcqRel);
                }
            }
        }
    }

    /// What `anchor` resolves to now, for its recorder's work done.
    pub(crate) fn settle(&self, anchor: &Anchor, precise: bool) -> Settled {
        let mut st = lock(&self.state);
        let next = match *lock(&anchor.next) {
            Next::Launched(c) => Some(c),
            _ => None,
        };
        let out = decide(
            precise,
            anchor.prior,
            next,
            anchor.issued,
            |c| st.wanted.get(&c).map(|w| (w.span, w.kind, w.last_buffer)),
            |n| st.returned_up_to(n),
        );
        match out {
            Settled::Lost => st.stats.samples_lost += 1,
            Settled::NoWork => st.stats.samples_without_work += 1,
            _ => {}
        }
        out
    }

    /// Lets go of `anchor`'s launches.
    pub(crate) fn release(&self, anchor: Anchor) {
        self.close(&anchor);
        let mut st = lock(&self.state);
        if let Some(c) = anchor.prior {
            st.release(c);
        }
        if let Next::Launched(c) = *lock(&anchor.next) {
            st.release(c);
        }
    }

    /// The newest recorded launch on `stream`, held until
    /// [`Activity::release_id`] (for probes).
    pub(crate) fn hold_last(&self, stream: ds::CUstream) -> Option<u32> {
        let mut st = lock(&self.state);
        let c = st.streams.get(&(stream as usize))?.last?;
        st.retain(c);
        Some(c)
    }

    /// What is known of launch `c` (held by [`Activity::hold_last`]), as a
    /// relaxed sample taken before it would resolve: its start, or pending
    /// or lost; and its span once known.
    pub(crate) fn probe_span(&self, c: u32) -> (Settled, Option<Span>) {
        let st = lock(&self.state);
        let out = decide(
            false,
            None,
            Some(c),
            0,
            |c| st.wanted.get(&c).map(|w| (w.span, w.kind, w.last_buffer)),
            |n| st.returned_up_to(n),
        );
        let span = st.wanted.get(&c).map(|w| w.span);
        (out, span)
    }

    /// Lets go of a launch held by [`Activity::hold_last`].
    pub(crate) fn release_id(&self, c: u32) {
        lock(&self.state).release(c);
    }

    /// What tracing did so far.
    pub(crate) fn stats(&self) -> ActivityStats {
        lock(&self.state).stats
    }

    /// The launch callback's part: `stream` launched `c` (successfully).
    fn launched(&self, stream: ds::CUstream, c: u32, kind: LaunchKind) {
        let mut st = lock(&self.state);
        st.newest = st.newest.max(c);
        if st.early.len() > MAX_EARLY {
            let newest = st.newest;
            st.early.retain(|&id, _| id > newest);
        }
        let traced = ENABLED.load(Ordering::Acquire) > 0;
        if !st.streams.contains_key(&(stream as usize)) {
            return;
        }
        if traced {
            st.stats.launches_traced += 1;
        } else {
            st.stats.launches_untraced += 1;
        }
        let Some(t) = st.streams.get_mut(&(stream as usize)) else {
            return;
        };
        if !traced {
            // No record will come: the waiting samples take the next traced
            // launch, and the stream's last launch is unknown.
            if let Some(p) = t.last.take() {
                st.release(p);
            }
            return;
        }
        let prev = t.last.replace(c);
        ARMED.fetch_sub(std::mem::take(&mut t.armed), Ordering::AcqRel);
        let mut refs = 1;
        for w in std::mem::take(&mut t.waiting) {
            let mut n = lock(&w);
            if *n == Next::Waiting {
                *n = Next::Launched(c);
                refs += 1;
            }
        }
        let span = st.early.remove(&c).unwrap_or_default();
        st.wanted.insert(
            c,
            Wanted {
                refs,
                span,
                kind,
                last_buffer: REQUESTED.load(Ordering::Acquire),
            },
        );
        if let Some(p) = prev {
            st.release(p);
        }
    }

    fn record(&self, st: &mut State, context: u32, stream: u32, c: u32, start: u64, end: u64) {
        st.stats.records += 1;
        if let Some(w) = st.wanted.get_mut(&c) {
            w.span.add(start, end);
            st.stats.records_used += 1;
        } else if c > st.newest && st.ids.contains(&(context, stream)) {
            st.early.entry(c).or_default().add(start, end);
        }
    }
}

/// The choice of [`Activity::settle`], on what is known of the launches
/// (`known(c)`: the records so far, the launch kind and its last buffer;
/// `returned(n)`: whether every buffer up to `n` came back), for a sample
/// issued at `issued` (on CUPTI's clock).
pub(crate) fn decide(
    precise: bool,
    prior: Option<u32>,
    next: Option<u32>,
    issued: u64,
    known: impl Fn(u32) -> Option<(Span, LaunchKind, u64)>,
    returned: impl Fn(u64) -> bool,
) -> Settled {
    let pick = if precise {
        prior.map(|c| (c, false)).or(next.map(|c| (c, true)))
    } else {
        next.map(|c| (c, true)).or(prior.map(|c| (c, false)))
    };
    let Some((c, start)) = pick else {
        return Settled::NoWork;
    };
    let Some((span, kind, last_buffer)) = known(c) else {
        return Settled::Lost;
    };
    let all_back = returned(last_buffer);
    let complete = match kind {
        LaunchKind::Single => span.records > 0,
        LaunchKind::Graph => all_back && span.records > 0,
    };
    if span.bad {
        Settled::Lost
    } else if complete {
        Settled::Value(if start {
            span.start
        } else {
            span.end.max(issued)
        })
    } else if all_back {
        Settled::Lost
    } else {
        Settled::Pending
    }
}

/// What a zero-intrusion sample resolves to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Settled {
    /// `CLOCK_MONOTONIC` ns, from CUPTI.
    Value(u64),
    /// Not yet known.
    Pending,
    /// The launch's records were lost.
    Lost,
    /// No recorded work on either side.
    NoWork,
}

/// A sample's place on its stream.
#[derive(Debug)]
pub(crate) struct Anchor {
    prior: Option<u32>,
    next: Arc<Mutex<Next>>,
    stream: usize,
    /// When the sample was taken, on CUPTI's clock.
    issued: u64,
    /// It wants its stream's next launch traced (counted in the stream's
    /// [`Track::armed`] while it waits).
    armed: bool,
}

/// Tracing on, until dropped.
pub(crate) struct Enabled {
    activity: &'static Activity,
}

impl Drop for Enabled {
    fn drop(&mut self) {
        let mut n = lock(&self.activity.enabled);
        *n = n.saturating_sub(1);
        ENABLED.store(*n, Ordering::Release);
        if *n == 0 {
            for kind in KINDS {
                if crate::tracer::permanent(kind) {
                    continue;
                }
                // SAFETY: a plain CUPTI call. Launches already made keep
                // their records (seen on the H200).
                let _ = unsafe { self.activity.api.cuptiActivityDisable(kind) };
            }
        }
    }
}

/// The launch callback's observer: activity tracing's side of every
/// launch (registered by [`set_up`]).
struct LaunchHooks;

impl LaunchObserver for LaunchHooks {
    fn tracks(&self, stream: ds::CUstream) -> bool {
        tracks(stream)
    }
    fn entering(&self, stream: ds::CUstream) {
        launch_entering(stream);
    }
    fn launched(&self, stream: ds::CUstream, correlation: u32, kind: LaunchKind) {
        launched(stream, correlation, kind);
    }
    fn exited(&self) {
        launch_exited();
    }
}

/// Called by the launch callback for every successful launch, copy or
/// memset on `stream`, with its correlation id.
fn launched(stream: ds::CUstream, c: u32, kind: LaunchKind) {
    if let Some(Ok(a)) = ACTIVITY.get() {
        a.launched(stream, c, kind);
    }
}

/// The newest activity buffer handed to CUPTI (its number; buffers are
/// numbered from 1 in the order CUPTI asked for them).
pub(crate) fn newest_buffer() -> u64 {
    REQUESTED.load(Ordering::Acquire)
}

/// Whether a zero-intrusion device tracks `stream` (only those streams'
/// launches are noted; asked before anything costlier is done for one).
fn tracks(stream: ds::CUstream) -> bool {
    match ACTIVITY.get() {
        Some(Ok(a)) => lock(&a.state).streams.contains_key(&(stream as usize)),
        _ => false,
    }
}

/// Called by the launch callback at the entry of every launch, copy or
/// memset on `stream`: where a sample armed the stream, tracing is turned
/// on for this launch (until [`launch_exited`] on this thread).
fn launch_entering(stream: ds::CUstream) {
    if ARMED.load(Ordering::Acquire) == 0 {
        return;
    }
    let Some(Ok(a)) = ACTIVITY.get() else {
        return;
    };
    let armed = lock(&a.state)
        .streams
        .get(&(stream as usize))
        .is_some_and(|t| t.armed > 0);
    if armed {
        // Where CUPTI refuses, the launch is not traced: its samples take
        // the next traced launch, or resolve as errors.
        if let Ok(on) = a.enable() {
            LAUNCH_TRACING.with(|t| *t.borrow_mut() = Some(on));
        }
    }
}

/// Called by the launch callback at the exit of every launch (after
/// [`launched`]): tracing turned on at its entry is let go.
fn launch_exited() {
    // `try_with`: a launch from a thread being torn down has nothing here.
    let _ = LAUNCH_TRACING.try_with(|t| t.borrow_mut().take());
}

fn set_up() -> Result<Activity, String> {
    let api = cupti_api()?;
    // The correlation ids of launches come from the launch callbacks.
    Launches::get()?;
    crate::launches::observe_launches(&LaunchHooks);
    // SAFETY: registers a function of CUPTI's callback type; before any
    // activity kind is enabled, as CUPTI asks.
    check("cuptiActivityRegisterTimestampCallback", unsafe {
        api.cuptiActivityRegisterTimestampCallback(Some(monotonic_ns))
    })?;
    // SAFETY: registers two functions of CUPTI's buffer callback types.
    check("cuptiActivityRegisterCallbacks", unsafe {
        api.cuptiActivityRegisterCallbacks(
            Some(buffers::buffer_requested),
            Some(buffers::buffer_completed),
        )
    })?;
    let a = Activity {
        api,
        state: Mutex::new(State::default()),
        enabled: Mutex::new(0),
    };
    // CUPTI's own start-up, paid once here rather than in a recorder.
    for kind in KINDS {
        // SAFETY: plain CUPTI calls.
        let r = unsafe { api.cuptiActivityEnable(kind) };
        check("cuptiActivityEnable", r).map_err(|e| format!("{e} (kind {})", kind.0))?;
        if !crate::tracer::permanent(kind) {
            // SAFETY: as above.
            let _ = unsafe { api.cuptiActivityDisable(kind) };
        }
    }
    Ok(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(start: u64, end: u64, records: u32) -> Span {
        Span {
            start,
            end,
            records,
            bad: false,
        }
    }

    /// Precise takes the end of the work before; relaxed the start of the
    /// work after; each falls back to the other side; no side is NoWork.
    #[test]
    fn placements_pick_their_side_and_fall_back() {
        let known = |c: u32| match c {
            1 => Some((span(100, 200, 1), LaunchKind::Single, 1)),
            2 => Some((span(300, 400, 1), LaunchKind::Single, 1)),
            _ => None,
        };
        let all = |_| true;
        let d = |precise, prior, next, issued| decide(precise, prior, next, issued, known, all);
        assert_eq!(d(true, Some(1), Some(2), 150), Settled::Value(200));
        assert_eq!(d(false, Some(1), Some(2), 150), Settled::Value(300));
        assert_eq!(d(true, None, Some(2), 150), Settled::Value(300));
        assert_eq!(d(false, Some(1), None, 150), Settled::Value(200));
        assert_eq!(d(true, None, None, 150), Settled::NoWork);
        assert_eq!(d(false, None, None, 150), Settled::NoWork);
        // Taken once the work before had ended (the stream was idle): the
        // sample's own moment, not the old work's end.
        assert_eq!(d(true, Some(1), Some(2), 250), Settled::Value(250));
        assert_eq!(d(false, Some(1), None, 250), Settled::Value(250));
        assert_eq!(d(false, Some(1), Some(2), 250), Settled::Value(300));
    }

    /// A record not back yet is pending while its buffers may still come
    /// back, and lost once they all did without it; an incomplete record
    /// is lost; a graph waits for every buffer up to its launch.
    #[test]
    fn pending_lost_and_graph_completeness() {
        let none = |_: u32| Some((Span::default(), LaunchKind::Single, 5));
        assert_eq!(
            decide(true, Some(1), None, 0, none, |n| n < 5),
            Settled::Pending
        );
        assert_eq!(
            decide(true, Some(1), None, 0, none, |_| true),
            Settled::Lost
        );
        let bad = |_: u32| {
            Some((
                Span {
                    bad: true,
                    ..span(1, 2, 1)
                },
                LaunchKind::Single,
                5,
            ))
        };
        assert_eq!(decide(true, Some(1), None, 0, bad, |_| true), Settled::Lost);
        let graph = |_: u32| Some((span(10, 90, 3), LaunchKind::Graph, 7));
        assert_eq!(
            decide(true, Some(1), None, 0, graph, |n| n < 7),
            Settled::Pending
        );
        assert_eq!(
            decide(true, Some(1), None, 0, graph, |_| true),
            Settled::Value(90)
        );
        assert_eq!(
            decide(false, None, Some(1), 0, graph, |_| true),
            Settled::Value(10)
        );
        // A launch nothing wanted any more: lost, never a made-up value.
        assert_eq!(
            decide(true, Some(9), None, 0, |_| None, |_| true),
            Settled::Lost
        );
    }

    /// Spans take the earliest start and the latest end; a record with no
    /// start marks the span incomplete.
    #[test]
    fn spans_merge_and_flag_incomplete_records() {
        let mut s = Span::default();
        s.add(50, 60);
        s.add(40, 55);
        s.add(70, 90);
        assert_eq!(s, span(40, 90, 3));
        let mut t = Span::default();
        t.add(0, 10);
        assert!(t.bad);
    }
}
