//! Counters of every kernel (`record --counters M,...`): a range-profiler
//! session on each device's primary context (`KernelCounters` of
//! gpu-counters-cuda), its ranges one per kernel launch, cycled (stopped,
//! decoded, started again) when full, at each refit period and at exit;
//! each kernel's values sent as a `KernelCounters` record under the
//! correlation id its `Kernel` record carries.
//!
//! - Without replay, a CUPTI user range is pushed at the entry of each
//!   driver kernel launch on the context and popped at its exit, named by
//!   the launch's correlation id: each decoded range names its kernel.
//! - With `--replay kernel`, CUPTI makes a range per kernel and replays
//!   the kernel inside its launch; ranges come back numbered in launch
//!   order, matched with the launches recorded here in the same order.
//! - Launch calls (kernel and graph launches) of every thread go one at a
//!   time while a session runs: a process-wide launch lock, taken at the
//!   outermost call's entry and given back at its exit, so that no other
//!   launch falls inside a range and launch order is range order. A
//!   thread that waits longer than [`LOCK_WAIT`] goes on without it, and
//!   the cycle's values are dropped (one notice), never misattributed.
//! - Launches into a stream being captured get no range (their kernels
//!   run later, from the graph); nor do graph launches. Those kernels, and
//!   those launched before the session started, have no counters: the
//!   summary counts them.
//! - A cycle waits for the context's work (`cuCtxSynchronize`, the
//!   calling thread's capture mode relaxed for it) and runs on the thread
//!   whose launch found the session full, inside that launch's callback.

use crate::state::{State, GENERATION};
use gpu_counters_cuda::hardware::{HardwareCounters, KernelCounters as Session, Replay};
use gpu_counters_cuda::trace::{ApiCall, Domain, Site};
use gpu_counters_cupti_sys as cs;
use gpu_counters_record::protocol::{
    api_kind, severity, KernelCounters, MetricConfig, Record, Seq,
};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

/// Ranges (kernels) one cycle holds.
pub const CAPACITY: usize = 1024;
/// How long a launch waits for the launch lock before going on without.
pub const LOCK_WAIT: Duration = Duration::from_secs(5);

/// What a range stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entry {
    /// A kernel of the program, by the correlation id its record carries.
    Kernel(u32),
    /// A kernel of gpu-counters' own (calibration): not reported.
    Own,
    /// A launch that failed: no kernel ran.
    Failed,
}

/// Why a cycle's values were not attributed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unattributed {
    /// A launch went on without the launch lock during the cycle.
    Uncertain,
    /// CUPTI gave a different number of ranges than launches recorded.
    Count {
        /// Ranges decoded.
        ranges: usize,
        /// Launches recorded.
        launches: usize,
    },
}

/// One cycle's launches, in order, and whether their order is known.
#[derive(Debug, Default)]
pub struct Cycle {
    /// The launches, in launch order.
    pub launches: Vec<Entry>,
    /// A launch went on without the lock.
    pub uncertain: bool,
}

impl Cycle {
    /// The range name of launch `i` (user ranges): its correlation id and
    /// index, unique within the cycle.
    pub fn name(entry: Entry, i: usize) -> String {
        match entry {
            Entry::Kernel(c) => format!("{c}.{i}"),
            Entry::Own | Entry::Failed => format!("own.{i}"),
        }
    }

    /// Matches decoded ranges (name, values) with the cycle's launches:
    /// by name for user ranges, by position (CUPTI's names `0`, `1`, ...)
    /// for auto ranges. Returns each program kernel's correlation id and
    /// values; own and failed launches are left out.
    pub fn attribute(
        &self,
        named: bool,
        ranges: Vec<(String, Vec<f64>)>,
    ) -> Result<Vec<(u32, Vec<f64>)>, Unattributed> {
        if self.uncertain {
            return Err(Unattributed::Uncertain);
        }
        let mut out = Vec::new();
        if named {
            for (name, values) in ranges {
                let Some((_, index)) = name.rsplit_once('.') else {
                    continue;
                };
                let Ok(i) = index.parse::<usize>() else {
                    continue;
                };
                if let Some(Entry::Kernel(c)) = self.launches.get(i) {
                    if Cycle::name(Entry::Kernel(*c), i) == name {
                        out.push((*c, values));
                    }
                }
            }
            return Ok(out);
        }
        let launched: Vec<Entry> = self
            .launches
            .iter()
            .copied()
            .filter(|e| *e != Entry::Failed)
            .collect();
        if ranges.len() != launched.len() {
            return Err(Unattributed::Count {
                ranges: ranges.len(),
                launches: launched.len(),
            });
        }
        let mut ranges: Vec<(usize, Vec<f64>)> = ranges
            .into_iter()
            .enumerate()
            .map(|(pos, (name, v))| {
                let leaf = name.rsplit('/').next().unwrap_or(&name);
                (leaf.parse::<usize>().unwrap_or(pos), v)
            })
            .collect();
        ranges.sort_by_key(|r| r.0);
        for (i, (_, values)) in ranges.into_iter().enumerate() {
            if let Entry::Kernel(c) = launched[i] {
                out.push((c, values));
            }
        }
        Ok(out)
    }
}

/// A device's session.
struct Ctx {
    ordinal: u32,
    /// CUPTI's id of the context (what API callbacks carry).
    uid: u32,
    session: Session,
    cycle: Cycle,
    /// It failed: no more ranges.
    broken: bool,
}

/// The launch lock: the thread holding it and how deeply.
#[derive(Default)]
struct Owner {
    tid: u32,
    depth: u32,
}

struct Counters {
    owner: Mutex<Owner>,
    freed: Condvar,
    ctxs: Mutex<Vec<Ctx>>,
    generation: u64,
    named: bool,
}

static COUNTERS: OnceLock<Counters> = OnceLock::new();
static ACTIVE: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// Calls of this thread inside the launch lock (nested count).
    static HELD: Cell<u32> = const { Cell::new(0) };
    /// Calls of this thread that went on without it (nested count).
    static UNLOCKED: Cell<u32> = const { Cell::new(0) };
    /// The context (index) whose range this thread's launch opened.
    static OPENED: Cell<Option<usize>> = const { Cell::new(None) };
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Counters {
    fn acquire(&self, tid: u32, wait: Duration) -> bool {
        let until = Instant::now() + wait;
        let mut o = lock(&self.owner);
        while o.depth > 0 && o.tid != tid {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            o = self
                .freed
                .wait_timeout(o, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        o.tid = tid;
        o.depth += 1;
        true
    }

    fn release(&self) {
        let mut o = lock(&self.owner);
        o.depth = o.depth.saturating_sub(1);
        if o.depth == 0 {
            o.tid = 0;
            self.freed.notify_one();
        }
    }
}

/// Whether a session runs in this process.
pub fn active() -> bool {
    ACTIVE.load(Ordering::Acquire)
}

/// The stream of a driver kernel launch, where its parameters name one.
fn launch_stream(a: &ApiCall<'_>) -> Option<cudarc::driver::sys::CUstream> {
    use cs::CUpti_driver_api_trace_cbid_enum as Id;
    if a.domain != Domain::Driver || a.params.is_null() {
        return None;
    }
    let is = |id: Id| a.cbid == id.0;
    if is(Id::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel)
        || is(Id::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz)
    {
        // SAFETY: for these ids CUPTI's functionParams (not null) is the
        // call's cuLaunchKernel_params, valid during the callback.
        Some(unsafe { (*(a.params as *const cs::cuLaunchKernel_params_st)).hStream }.cast())
    } else if is(Id::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx)
        || is(Id::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz)
    {
        // SAFETY: as above, cuLaunchKernelEx_params; its config pointer is
        // the caller's, checked for null.
        let config = unsafe { (*(a.params as *const cs::cuLaunchKernelEx_params_st)).config };
        // SAFETY: non-null, the launch's own configuration.
        (!config.is_null()).then(|| unsafe { (*config).hStream }.cast())
    } else {
        None
    }
}

/// Whether the launch goes into a stream being captured (a query that
/// fails says no).
fn capturing(a: &ApiCall<'_>) -> bool {
    use cudarc::driver::sys as ds;
    let Some(stream) = launch_stream(a) else {
        return false;
    };
    let mut status = ds::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
    // SAFETY: a valid out-pointer; the stream is the launch's own, valid
    // during its call.
    let r = unsafe { ds::cuStreamIsCapturing(stream, &mut status) };
    r == ds::CUresult::CUDA_SUCCESS
        && status != ds::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE
}

/// Runs `f` with the calling thread's stream-capture mode relaxed (a
/// synchronization then never invalidates another thread's capture).
fn relaxed<R>(f: impl FnOnce() -> R) -> R {
    use cudarc::driver::sys as ds;
    let mut mode = ds::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED;
    // SAFETY: a valid in/out pointer; affects this thread only.
    let swapped =
        unsafe { ds::cuThreadExchangeStreamCaptureMode(&mut mode) } == ds::CUresult::CUDA_SUCCESS;
    let r = f();
    if swapped {
        // SAFETY: as above; puts the thread's own mode back.
        unsafe { ds::cuThreadExchangeStreamCaptureMode(&mut mode) };
    }
    r
}

/// Ends `c`'s cycle: decodes it, sends each kernel's values, and starts the
/// next one where `restart`. Failures are notices; a broken session gives
/// no more ranges.
fn cycle(s: &State, named: bool, c: &mut Ctx, restart: bool) {
    if c.broken {
        return;
    }
    let decoded = relaxed(|| c.session.stop_and_decode());
    let cycle = std::mem::take(&mut c.cycle);
    match decoded {
        Ok(decoded) => match cycle.attribute(named, decoded.ranges) {
            Ok(values) => {
                for (correlation, v) in values {
                    s.push(&Record::KernelCounters(KernelCounters {
                        correlation,
                        device: c.ordinal,
                        values: Seq::Slice(&v),
                    }));
                }
            }
            Err(Unattributed::Uncertain) => crate::state::notice(
                s,
                severity::WARNING,
                &format!(
                    "GPU{}: per-kernel counters of a cycle dropped: a launch went on without waiting for the one before it",
                    c.ordinal
                ),
            ),
            Err(Unattributed::Count { .. }) => crate::state::notice(
                s,
                severity::WARNING,
                &format!(
                    "GPU{}: per-kernel counters of a cycle dropped: CUPTI's ranges did not match the launches recorded",
                    c.ordinal
                ),
            ),
        },
        Err(e) => {
            c.broken = true;
            crate::state::notice(
                s,
                severity::WARNING,
                &format!("GPU{}: per-kernel counters stopped: {e}", c.ordinal),
            );
            return;
        }
    }
    if restart {
        if let Err(e) = c.session.start() {
            c.broken = true;
            crate::state::notice(
                s,
                severity::WARNING,
                &format!("GPU{}: per-kernel counters stopped: {e}", c.ordinal),
            );
        }
    }
}

/// A launch-like call's entry (kernel or graph launch of either API):
/// takes the launch lock for the outermost call of the thread and, for a
/// driver kernel launch on a profiled context, opens its range.
/// `correlation` is the id the launch's kernel record will carry; `own`
/// says the call is gpu-counters' own.
pub fn enter(s: &State, a: &ApiCall<'_>, kind: u8, correlation: u32, own: bool) {
    let Some(c) = COUNTERS.get() else { return };
    if !active() || c.generation != GENERATION.load(Ordering::Acquire) {
        return;
    }
    if HELD.get() > 0 {
        HELD.set(HELD.get() + 1);
    } else if UNLOCKED.get() > 0 {
        UNLOCKED.set(UNLOCKED.get() + 1);
    } else if c.acquire(crate::state::gettid(), LOCK_WAIT) {
        HELD.set(1);
    } else {
        UNLOCKED.set(1);
        for x in lock(&c.ctxs).iter_mut() {
            x.cycle.uncertain = true;
        }
        return;
    }
    if kind != api_kind::LAUNCH || a.domain != Domain::Driver || a.site != Site::Enter {
        return;
    }
    let mut ctxs = lock(&c.ctxs);
    let Some(i) = ctxs.iter().position(|x| x.uid == a.context_uid) else {
        return;
    };
    if ctxs[i].broken || capturing(a) {
        return;
    }
    let x = &mut ctxs[i];
    if x.cycle.launches.len() >= x.session.capacity() {
        cycle(s, c.named, x, true);
        if x.broken {
            return;
        }
    }
    let entry = if own {
        Entry::Own
    } else {
        Entry::Kernel(correlation)
    };
    let n = x.cycle.launches.len();
    if c.named {
        if let Err(e) = x.session.push(&Cycle::name(entry, n)) {
            x.broken = true;
            crate::state::notice(
                s,
                severity::WARNING,
                &format!("GPU{}: per-kernel counters stopped: {e}", x.ordinal),
            );
            return;
        }
    }
    x.cycle.launches.push(entry);
    OPENED.set(Some(i));
}

/// The matching exit: closes the range the entry opened (a failed launch's
/// is marked, its values never sent) and gives the launch lock back at the
/// outermost call's exit.
pub fn exit(s: &State, a: &ApiCall<'_>) {
    let Some(c) = COUNTERS.get() else { return };
    if c.generation != GENERATION.load(Ordering::Acquire) {
        return;
    }
    if let Some(i) = OPENED.take() {
        let mut ctxs = lock(&c.ctxs);
        if let Some(x) = ctxs.get_mut(i) {
            if c.named {
                if let Err(e) = x.session.pop() {
                    x.broken = true;
                    crate::state::notice(
                        s,
                        severity::WARNING,
                        &format!("GPU{}: per-kernel counters stopped: {e}", x.ordinal),
                    );
                }
            }
            // CUDA_SUCCESS is 0.
            if a.result != Some(0) {
                if let Some(last) = x.cycle.launches.last_mut() {
                    *last = Entry::Failed;
                }
            }
        }
    }
    if HELD.get() > 0 {
        HELD.set(HELD.get() - 1);
        if HELD.get() == 0 {
            c.release();
        }
    } else if UNLOCKED.get() > 0 {
        UNLOCKED.set(UNLOCKED.get() - 1);
    }
}

/// Starts per-kernel counters on `ctx` (device `ordinal`'s primary
/// context) where `--counters` asked for them; a failure is one notice.
pub fn start(s: &State, ordinal: u32, ctx: &Arc<cudarc::driver::CudaContext>) {
    if s.config.counters.is_empty() {
        return;
    }
    let named = !s.config.replay_kernels();
    let c = COUNTERS.get_or_init(|| Counters {
        owner: Mutex::new(Owner::default()),
        freed: Condvar::new(),
        ctxs: Mutex::new(Vec::new()),
        generation: GENERATION.load(Ordering::Acquire),
        named,
    });
    let metrics: Vec<&str> = s.config.counters.iter().map(String::as_str).collect();
    let replay = if named { Replay::None } else { Replay::Kernel };
    let fail = |e: String| {
        crate::state::notice(
            s,
            severity::WARNING,
            &format!("GPU{ordinal}: per-kernel counters not recorded: {e}"),
        )
    };
    let session = match HardwareCounters::for_context(ctx)
        .and_then(|hw| hw.kernel_counters(&metrics, CAPACITY, replay))
    {
        Ok(x) => x,
        Err(e) => return fail(e.to_string()),
    };
    let uid = match context_uid(ctx.cu_ctx() as usize) {
        Ok(u) => u,
        Err(e) => return fail(e),
    };
    let ids: Vec<u32> = session
        .metrics()
        .iter()
        .map(|m| s.intern(m.as_bytes()).unwrap_or(0))
        .collect();
    // No launch is between its entry and exit while the session starts.
    let tid = crate::state::gettid();
    if !c.acquire(tid, LOCK_WAIT) {
        return fail("the program's launches did not pause for the session to start".into());
    }
    let mut x = Ctx {
        ordinal,
        uid,
        session,
        cycle: Cycle::default(),
        broken: false,
    };
    match x.session.start() {
        Ok(()) => {
            s.push(&Record::CounterConfig(MetricConfig {
                device: ordinal,
                metrics: Seq::Slice(&ids),
            }));
            lock(&c.ctxs).push(x);
            ACTIVE.store(true, Ordering::Release);
        }
        Err(e) => fail(e.to_string()),
    }
    c.release();
}

/// CUPTI's id of context `ctx` (a `CUcontext`), as its callbacks carry it.
fn context_uid(ctx: usize) -> Result<u32, String> {
    let api = cs::cupti().map_err(str::to_string)?;
    let mut id = 0u32;
    // SAFETY: a live context (the device's primary context, retained by
    // the caller); a valid out-pointer.
    let r = unsafe { api.cuptiGetContextId(ctx as cs::CUcontext, &mut id) };
    if r != cs::CUptiResult::CUPTI_SUCCESS {
        return Err(format!("cuptiGetContextId: CUptiResult {}", r.0));
    }
    Ok(id)
}

/// Ends every session's cycle now (at a refit period, or at exit with
/// `restart` false, when the sessions are then disabled), waiting at most
/// `wait` for the launch lock. Returns whether it ran.
pub fn flush(s: &State, restart: bool, wait: Duration) -> bool {
    let Some(c) = COUNTERS.get() else { return true };
    if c.generation != GENERATION.load(Ordering::Acquire) || !active() {
        return true;
    }
    let tid = crate::state::gettid();
    if !c.acquire(tid, wait) {
        return false;
    }
    {
        let mut ctxs = lock(&c.ctxs);
        for x in ctxs.iter_mut() {
            if !x.cycle.launches.is_empty() || !restart {
                cycle(s, c.named, x, restart);
            }
        }
        if !restart {
            ACTIVE.store(false, Ordering::Release);
            // Disabled here, on this thread.
            ctxs.clear();
        }
    }
    c.release();
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(name: &str, v: f64) -> (String, Vec<f64>) {
        (name.to_string(), vec![v, v * 2.0])
    }

    /// User ranges carry their launch's name: each maps to its kernel's
    /// correlation id, whatever order CUPTI returns them in; own and
    /// failed launches and names of no launch are left out.
    #[test]
    fn named_ranges_map_to_their_launches() {
        let cycle = Cycle {
            launches: vec![
                Entry::Kernel(7),
                Entry::Own,
                Entry::Kernel(9),
                Entry::Failed,
                Entry::Kernel(12),
            ],
            uncertain: false,
        };
        assert_eq!(Cycle::name(Entry::Kernel(7), 0), "7.0");
        assert_eq!(Cycle::name(Entry::Own, 1), "own.1");
        let got = cycle
            .attribute(
                true,
                vec![
                    r("12.4", 3.0),
                    r("7.0", 1.0),
                    r("own.1", 5.0),
                    r("own.3", 0.0),
                    r("9.2", 2.0),
                    r("9.1", 8.0),
                    r("bogus", 4.0),
                ],
            )
            .unwrap();
        assert_eq!(
            got,
            vec![
                (12, vec![3.0, 6.0]),
                (7, vec![1.0, 2.0]),
                (9, vec![2.0, 4.0])
            ]
        );
    }

    /// Auto ranges are numbered in launch order: matched by number, failed
    /// launches (no kernel, no range) skipped; a count that differs drops
    /// the cycle, as does a launch that went on without the lock.
    #[test]
    fn numbered_ranges_map_by_position_or_are_dropped() {
        let cycle = Cycle {
            launches: vec![
                Entry::Kernel(1),
                Entry::Failed,
                Entry::Own,
                Entry::Kernel(4),
            ],
            uncertain: false,
        };
        let got = cycle
            .attribute(false, vec![r("2", 30.0), r("0", 10.0), r("1", 20.0)])
            .unwrap();
        assert_eq!(got, vec![(1, vec![10.0, 20.0]), (4, vec![30.0, 60.0])]);
        assert_eq!(
            cycle.attribute(false, vec![r("0", 1.0)]),
            Err(Unattributed::Count {
                ranges: 1,
                launches: 3
            })
        );
        let unsure = Cycle {
            launches: vec![Entry::Kernel(1)],
            uncertain: true,
        };
        assert_eq!(
            unsure.attribute(true, vec![r("1.0", 1.0)]),
            Err(Unattributed::Uncertain)
        );
        assert_eq!(Cycle::default().attribute(false, vec![]), Ok(vec![]));
    }

    /// The launch lock is re-entrant for its holder, excludes others until
    /// given back as often as taken, and a waiter that times out goes on.
    #[test]
    fn the_launch_lock_is_reentrant_and_waits_with_a_deadline() {
        let c = Arc::new(Counters {
            owner: Mutex::new(Owner::default()),
            freed: Condvar::new(),
            ctxs: Mutex::new(Vec::new()),
            generation: 1,
            named: true,
        });
        assert!(c.acquire(1, Duration::ZERO));
        assert!(c.acquire(1, Duration::ZERO));
        assert!(!c.acquire(2, Duration::from_millis(1)));
        c.release();
        assert!(!c.acquire(2, Duration::ZERO), "still held once");
        // A waiter wakes when the holder lets go.
        let (tx, rx) = std::sync::mpsc::channel();
        let c2 = c.clone();
        let t = std::thread::spawn(move || {
            tx.send(()).unwrap();
            c2.acquire(2, Duration::from_secs(60))
        });
        rx.recv().unwrap();
        c.release();
        assert!(t.join().unwrap());
        assert_eq!(lock(&c.owner).tid, 2);
        c.release();
        assert_eq!(lock(&c.owner).depth, 0);
    }
}
