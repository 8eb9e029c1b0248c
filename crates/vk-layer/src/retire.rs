//! Reading results: a thread of the layer's (and the application's own
//! waits for idle) polls each queue's oldest submission's fence without
//! waiting; once it has signaled, the executions' slots are resolved by the
//! core's bookkeeping (every timestamp's status: written, not ready or an
//! error, never a silent zero), converted onto `CLOCK_MONOTONIC` by the
//! device's calibration (with its bound), paired into scopes (debug labels
//! per queue, across command buffers, in submission order), and sent.
//! Frames are sent once every execution of theirs is read.
//!
//! A lost device is reported once and its work in flight counted; nothing
//! here ever waits without a deadline.

use crate::device::Active;
pub use crate::frames::Frames;
pub use crate::queue::LabelStack;
use crate::queue::QueueState;
use crate::queue::{Execution, QueueData};
use crate::recorded::{Event, NameRef, NO_QUERY};
use crate::sink::{self, stat, Sink};
use ash::vk;
use gpu_counters_hal::bookkeeping::SlotState;
use gpu_counters_hal::{CalibratedTime, ResolvedTimestamps, SampleStatus};
use gpu_counters_record::protocol::{
    frame_flags, scope_kind, scope_status, severity, Name, Record, Seq, Text, VkFrame, VkScope,
};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, Once};
use std::time::Duration;

/// The mask of `bits` valid bits.
pub fn mask(bits: u32) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

static NEXT_EXECUTION: AtomicU64 = AtomicU64::new(1);
/// The process is exiting: the thread stops.
pub static EXITING: AtomicBool = AtomicBool::new(false);
static THREAD: Once = Once::new();
static WAKE: (Mutex<bool>, Condvar) = (Mutex::new(false), Condvar::new());

/// A new execution id (never 0).
pub fn next_execution() -> u64 {
    NEXT_EXECUTION.fetch_add(1, Ordering::Relaxed)
}

/// Notes a submission in flight and wakes the reader.
pub fn wake() {
    let (m, c) = &WAKE;
    *m.lock().unwrap_or_else(|e| e.into_inner()) = true;
    c.notify_one();
}

/// Starts the reader thread once.
pub fn start_thread() {
    THREAD.call_once(|| {
        let _ = std::thread::Builder::new()
            .name("gpu-counters-vk".into())
            .spawn(|| loop {
                let busy = crate::global::devices().into_iter().any(|d| {
                    d.active.as_ref().is_some_and(|a| {
                        a.queues
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .values()
                            .any(|q| {
                                !q.state
                                    .lock()
                                    .unwrap_or_else(|e| e.into_inner())
                                    .in_flight
                                    .is_empty()
                            })
                    })
                });
                {
                    let (m, c) = &WAKE;
                    let g = m.lock().unwrap_or_else(|e| e.into_inner());
                    let wait = if busy {
                        Duration::from_millis(2)
                    } else {
                        Duration::from_millis(100)
                    };
                    let mut g = c
                        .wait_timeout_while(g, wait, |woken| !*woken)
                        .map(|(g, _)| g)
                        .unwrap_or_else(|e| e.into_inner().0);
                    *g = false;
                }
                if EXITING.load(Ordering::Acquire) {
                    return;
                }
                for d in crate::global::devices() {
                    if let Some(a) = &d.active {
                        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                            retire_device(a, false)
                        }));
                    }
                }
            });
    });
}

/// A submission call of `total` command buffers (`untimed` of them not
/// timed) begins at `enter`: returns its frame. Before the device's first
/// present, each call is a frame of its own.
pub fn note_submit(a: &Active, total: u32, untimed: u32, enter: u64) -> u64 {
    let mut f = a.frames.lock().unwrap_or_else(|e| e.into_inner());
    if !f.presented {
        if let Some(n) = f.open.take() {
            if let Some(fr) = f.find(n) {
                fr.cpu_end = Some(enter);
            }
        }
        f.open_frame(enter);
    } else if f.open.is_none() {
        let start = f.boundary;
        f.open_frame(start);
    }
    let n = f.open.expect("opened above");
    if let Some(fr) = f.find(n) {
        fr.executions += total;
        fr.untimed += untimed;
        fr.pending += total - untimed;
    }
    n
}

/// A submission call of frame `frame` returned at `exit`.
pub fn after_submit(a: &Active, frame: u64, exit: u64) {
    let _ = frame;
    let mut f = a.frames.lock().unwrap_or_else(|e| e.into_inner());
    f.last_submit = exit;
}

/// A present was called at `enter` and returned at `exit`: it ends the
/// open frame.
pub fn note_present(a: &Active, enter: u64, exit: u64) {
    {
        let mut f = a.frames.lock().unwrap_or_else(|e| e.into_inner());
        f.presented = true;
        let n = match f.open.take() {
            Some(n) => n,
            None => {
                let start = if f.boundary == 0 { enter } else { f.boundary };
                let n = f.open_frame(start);
                f.open = None;
                n
            }
        };
        if let Some(fr) = f.find(n) {
            fr.cpu_end = Some(enter);
            fr.presented = true;
        }
        f.boundary = exit;
    }
    flush_frames(a, false);
}

/// Executions of `frame` that will never be read (not submitted, or their
/// end cannot be known).
pub fn executions_dropped(a: &Active, frame: u64, execs: &[Execution]) {
    let mut f = a.frames.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(fr) = f.find(frame) {
        let n = execs.len() as u32;
        fr.pending = fr.pending.saturating_sub(n);
        fr.untimed += n;
    }
}

fn frame_done(a: &Active, frame: u64, gpu: Option<(u64, u64, u64)>) {
    let mut f = a.frames.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(fr) = f.find(frame) {
        fr.pending = fr.pending.saturating_sub(1);
        match gpu {
            Some((s, e, b)) => {
                fr.gpu = Some(match fr.gpu {
                    None => (s, e),
                    Some((s0, e0)) => (s0.min(s), e0.max(e)),
                });
                fr.bound = fr.bound.max(b);
            }
            None => fr.untimed += 1,
        }
    }
}

/// Sends the frames that are complete, in order; with `all`, every frame
/// (the device's end: the open frame ends at its last submission).
pub fn flush_frames(a: &Active, all: bool) {
    let Some(s) = sink::get() else { return };
    let mut f = a.frames.lock().unwrap_or_else(|e| e.into_inner());
    if all {
        if let Some(n) = f.open.take() {
            let end = f.last_submit;
            if let Some(fr) = f.find(n) {
                fr.cpu_end = Some(end.max(fr.cpu_start));
            }
        }
    }
    while let Some(fr) = f.frames.front() {
        let done = fr.cpu_end.is_some() && fr.pending == 0;
        if !done && !all {
            break;
        }
        let fr = f.frames.pop_front().expect("front exists");
        let (gs, ge) = fr.gpu.unwrap_or((0, 0));
        s.push(&Record::VkFrame(VkFrame {
            device: a.id,
            frame: fr.n,
            cpu_start_ns: fr.cpu_start,
            cpu_end_ns: fr.cpu_end.unwrap_or(fr.cpu_start),
            gpu_start_ns: gs,
            gpu_end_ns: ge,
            bound_ns: fr.bound,
            executions: fr.executions,
            untimed: fr.untimed + if all { fr.pending } else { 0 },
            flags: if fr.presented {
                frame_flags::PRESENTED
            } else {
                0
            },
        }));
        s.counts.add(stat::FRAMES, 1);
    }
}

/// The device was lost: reported once; `n` executions counted.
pub fn device_lost(a: &Active, n: u64) {
    let Some(s) = sink::get() else { return };
    s.counts.add(stat::DEVICE_LOST, n);
    if !a.lost.swap(true, Ordering::AcqRel) {
        s.notice(
            severity::ERROR,
            &format!(
                "Vulkan device {} was lost: its work in flight was not timed",
                a.id
            ),
        );
    }
}

/// What a submission's executions read from the ring.
struct Read {
    ts: Option<Vec<(u64, SampleStatus)>>,
    stats: Vec<u64>,
}

/// Reads every queue's finished submissions of `a` (taking the retire
/// lock; with `wait` even where another reader holds it).
pub fn retire_device(a: &Active, wait: bool) {
    let _g = if wait {
        a.retire_lock.lock().unwrap_or_else(|e| e.into_inner())
    } else {
        match a.retire_lock.try_lock() {
            Ok(g) => g,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(_) => return,
        }
    };
    if a.destroyed.load(Ordering::Acquire) || EXITING.load(Ordering::Acquire) {
        return;
    }
    refit(a);
    let queues: Vec<Arc<QueueData>> = a
        .queues
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .values()
        .cloned()
        .collect();
    for q in &queues {
        retire_queue(a, q, None);
    }
    flush_frames(a, false);
}

/// Reads everything in flight, waiting at most 2 s per queue for the
/// layer's fences (the device's end).
///
/// # Safety
///
/// The retire lock is held and the device is not used by anyone else.
pub unsafe fn drain(a: &Active, queues: &[Arc<QueueData>]) {
    for q in queues {
        retire_queue(a, q, Some(Duration::from_secs(2)));
        let left = q.abandon();
        if left > 0 {
            if let Some(s) = sink::get() {
                s.counts.add(stat::UNRETIRED, left);
            }
        }
    }
}

/// Whether a test asked the layer to read its fences as lost
/// (`GPU_COUNTERS_VK_LAYER_FAULT=device-lost`): the path a lost device
/// takes, on a driver that never loses one.
fn fault_device_lost() -> bool {
    static FAULT: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *FAULT.get_or_init(|| {
        std::env::var("GPU_COUNTERS_VK_LAYER_FAULT").as_deref() == Ok("device-lost")
    })
}

/// Adds a calibration anchor where one is due.
fn refit(a: &Active) {
    let Some(clocks) = &a.clocks else { return };
    let mut c = clocks.lock().unwrap_or_else(|e| e.into_inner());
    let now = sink::now_ns();
    if !c.by_bits.iter().any(|(_, cal)| cal.needs_refit(now)) {
        return;
    }
    match c.clock.read_best(8) {
        Ok(pair) => {
            for (_, cal) in c.by_bits.iter_mut() {
                let _ = cal.add_anchor(pair);
            }
            if let Some(s) = sink::get() {
                crate::device::send_clock(s, a.id, a.period_ns, &pair);
            }
        }
        Err(gpu_counters_hal::Error::DeviceLost(_)) => {
            drop(c);
            device_lost(a, 0);
        }
        Err(_) => {}
    }
}

fn retire_queue(a: &Active, q: &QueueData, wait: Option<Duration>) {
    loop {
        let (flight, reads) = {
            let mut st = q.state.lock().unwrap_or_else(|e| e.into_inner());
            let Some(front) = st.in_flight.front() else {
                return;
            };
            let status = match wait {
                // SAFETY: the layer's fence.
                Some(t) => match unsafe {
                    a.ash
                        .wait_for_fences(&[front.fence], true, t.as_nanos() as u64)
                } {
                    Ok(()) => Ok(true),
                    Err(vk::Result::TIMEOUT) => Ok(false),
                    Err(e) => Err(e),
                },
                // SAFETY: the layer's fence; no external synchronization
                // is needed to read its status.
                None => unsafe { a.ash.get_fence_status(front.fence) },
            };
            let status = if fault_device_lost() {
                Err(vk::Result::ERROR_DEVICE_LOST)
            } else {
                status
            };
            match status {
                Ok(true) => {}
                Ok(false) => return,
                Err(e) => {
                    if e == vk::Result::ERROR_DEVICE_LOST {
                        // Nothing of theirs will be read: their fences and
                        // command buffers wait for the device's end.
                        let flights: Vec<_> = st.in_flight.drain(..).collect();
                        let mut n = 0;
                        for f in &flights {
                            st.free_fences.push(f.fence);
                            st.free_cbs.extend(f.cbs.iter().copied());
                        }
                        drop(st);
                        for f in &flights {
                            n += f.executions.len() as u64;
                            for e in &f.executions {
                                executions_dropped(a, e.frame, std::slice::from_ref(e));
                            }
                        }
                        device_lost(a, n);
                    }
                    return;
                }
            }
            let flight = st.in_flight.pop_front().expect("front exists");
            let reads = read_flight(&mut st, &flight.executions);
            // SAFETY: the layer's fence, signaled, used by nothing now.
            if unsafe { a.ash.reset_fences(&[flight.fence]) }.is_ok() {
                st.free_fences.push(flight.fence);
            }
            st.free_cbs.extend(flight.cbs.iter().copied());
            (flight, reads)
        };
        process(a, q, flight.executions, reads, flight.cpu_ns);
    }
}

/// Reads the slots of `executions` and frees them.
fn read_flight(st: &mut QueueState, executions: &[Execution]) -> Vec<Read> {
    let mut out = Vec::with_capacity(executions.len());
    let Some(ring) = st.ring.as_mut() else {
        return executions
            .iter()
            .map(|_| Read {
                ts: None,
                stats: Vec::new(),
            })
            .collect();
    };
    let mut resolved = ResolvedTimestamps::default();
    for e in executions {
        let mut r = Read {
            ts: None,
            stats: Vec::new(),
        };
        if let Some((off, charged)) = e.ts_slot {
            let n = e.rec.ts_used;
            let range = u64::from(off)..u64::from(off + n);
            if ring
                .set
                .resolve_timestamps_into(range, ring.reader(), &mut resolved)
                .is_ok()
            {
                r.ts = Some((0..n as usize).filter_map(|i| resolved.get(i)).collect());
            }
            if let Ok(mut slots) = ring.set.lock() {
                ring.set
                    .host_reset_table(&mut slots, off, n, SlotState::Fresh);
            }
            ring.ts.free(charged);
        }
        if let Some((off, charged)) = e.stat_slot {
            for i in 0..e.rec.stat_used {
                r.stats.extend_from_slice(ring.stat_entry(off + i));
            }
            ring.stats.free(charged);
        }
        out.push(r);
    }
    out
}

fn name_of(n: &NameRef) -> Name<'_> {
    match n {
        NameRef::Id(id) => Name::Id(*id),
        NameRef::Text(t) => Name::Text(Text::from_str(t)),
    }
}

struct Emit<'a> {
    sink: &'a Sink,
    queue: u32,
    execution: u64,
    frame: u64,
}

impl Emit<'_> {
    /// Sends a scope from its ends (or why it has none); returns its times
    /// when timed.
    fn scope(
        &self,
        kind: u8,
        name: &NameRef,
        depth: usize,
        start: Result<CalibratedTime, u8>,
        end: Result<CalibratedTime, u8>,
        stats: &[u64],
    ) -> Option<(u64, u64, u64)> {
        let (status, times) = match (start, end) {
            (Ok(s), Ok(e)) if e.ns >= s.ns => (
                scope_status::TIMED,
                Some((s.ns, e.ns, s.error_bound_ns.max(e.error_bound_ns))),
            ),
            (Ok(_), Ok(_)) => (scope_status::REVERSED, None),
            (Err(x), _) | (_, Err(x)) => (x, None),
        };
        let (s, e, b) = times.unwrap_or((0, 0, 0));
        self.sink.push(&Record::VkScope(VkScope {
            queue: self.queue,
            kind,
            status,
            depth: depth.min(u16::MAX as usize) as u16,
            execution: self.execution,
            frame: self.frame,
            start_ns: s,
            end_ns: e,
            bound_ns: b,
            name: name_of(name),
            stats: Seq::Slice(stats),
        }));
        self.sink.counts.add(stat::SCOPES, 1);
        if times.is_none() {
            let c = if status == scope_status::NOT_TIMED {
                stat::QUERY_CAP
            } else if status == scope_status::NOT_READ {
                // Counted where it was decided.
                usize::MAX
            } else {
                stat::UNAVAILABLE
            };
            if c != usize::MAX {
                self.sink.counts.add(c, 1);
            }
        }
        times
    }
}

/// Converts, pairs and sends a finished submission's executions.
fn process(a: &Active, q: &QueueData, executions: Vec<Execution>, reads: Vec<Read>, cpu_ns: u64) {
    let Some(s) = sink::get() else { return };
    let clocks = a
        .clocks
        .as_ref()
        .map(|c| c.lock().unwrap_or_else(|e| e.into_inner()));
    let cal = clocks.as_ref().and_then(|c| {
        c.by_bits
            .iter()
            .find(|(b, _)| *b == q.valid_bits)
            .map(|(_, c)| c)
    });
    let mut labels = q.labels.lock().unwrap_or_else(|e| e.into_inner());
    let cb_name = crate::device::kind_name(a, scope_kind::COMMAND_BUFFER);
    let label_name = |n: &NameRef| n.clone();
    let stat_n = a.statistics.map_or(0, |(_, n)| n);
    for (e, r) in executions.iter().zip(&reads) {
        let emit = Emit {
            sink: s,
            queue: q.id,
            execution: e.id,
            frame: e.frame,
        };
        let conv = |i: u32| -> Result<CalibratedTime, u8> {
            if i == NO_QUERY {
                return Err(scope_status::NOT_TIMED);
            }
            let Some(ts) = &r.ts else {
                return Err(e.unread.unwrap_or(scope_status::NOT_READY));
            };
            match ts.get(i as usize) {
                Some(&(t, SampleStatus::Written)) => match cal {
                    Some(c) => c.to_cpu_ns_near(t, cpu_ns).map_err(|_| scope_status::ERROR),
                    None => Err(scope_status::ERROR),
                },
                Some((_, SampleStatus::NotReady)) => Err(scope_status::NOT_READY),
                _ => Err(scope_status::ERROR),
            }
        };
        let stats_of = |i: Option<u32>| -> Vec<u64> {
            let Some(i) = i else { return Vec::new() };
            let w = stat_n + 1;
            let at = i as usize * w;
            match r.stats.get(at..at + w) {
                Some(entry) if entry[stat_n] != 0 => entry[..stat_n].to_vec(),
                _ => {
                    if stat_n > 0 {
                        s.counts.add(stat::UNAVAILABLE, 1);
                    }
                    Vec::new()
                }
            }
        };
        let end = if e.rec.end_written {
            conv(1)
        } else {
            Err(scope_status::NOT_TIMED)
        };
        let whole = emit.scope(scope_kind::COMMAND_BUFFER, &cb_name, 0, conv(0), end, &[]);
        if whole.is_some() {
            s.counts.add(stat::EXECUTIONS, 1);
        }
        frame_done(a, e.frame, whole);
        s.counts.add(stat::SECONDARY_SCOPES, e.rec.secondary_scopes);
        s.counts.add(stat::QUERY_CAP, e.rec.capped);
        for ev in &e.rec.events {
            match ev {
                Event::Scope {
                    kind,
                    name,
                    start,
                    end,
                    stat,
                } => {
                    let stats = stats_of(*stat);
                    emit.scope(
                        *kind,
                        name,
                        labels.open.len() + 1,
                        conv(*start),
                        conv(*end),
                        &stats,
                    );
                }
                Event::LabelBegin { name, q: qi } => {
                    labels
                        .open
                        .push((label_name(name), conv(*qi), e.id, e.frame));
                }
                Event::LabelEnd { q: qi } => match labels.open.pop() {
                    Some((name, start, exec, frame)) => {
                        let depth = labels.open.len() + 1;
                        let emit = Emit {
                            sink: s,
                            queue: q.id,
                            execution: exec,
                            frame,
                        };
                        emit.scope(scope_kind::LABEL, &name, depth, start, conv(*qi), &[]);
                    }
                    None => s.counts.add(stat::LABEL_UNBALANCED, 1),
                },
            }
        }
        // Its queries may be reset on the host now, unless another
        // execution of it is in flight.
        let mut rs = e.rec.reset.lock().unwrap_or_else(|e| e.into_inner());
        rs.in_flight = rs.in_flight.saturating_sub(1);
        if rs.in_flight == 0 && !rs.host_reset {
            if let Some(reset) = a.host_reset {
                for (pool, first, count, _) in e.rec.ranges() {
                    // SAFETY: no execution of this recording is in flight
                    // (its copies finished), and a new one decides whether
                    // to reset on the GPU under this same lock.
                    unsafe { reset(a.ash.handle(), pool, first, count) };
                }
                rs.host_reset = true;
            }
        }
    }
}

/// Labels still open on a queue at its device's end: counted.
pub fn unbalanced(q: &QueueData) -> u64 {
    let mut l = q.labels.lock().unwrap_or_else(|e| e.into_inner());
    let n = l.open.len() as u64;
    l.open.clear();
    n
}
