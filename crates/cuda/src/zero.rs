//! A zero-intrusion device's side of [`crate::activity`]: the samples its
//! recorders took, written into their buffers once CUPTI's records tell
//! their values; statistic values written by the host instead of a kernel;
//! and the measured bound of CUPTI's clock (probe kernels on the
//! calibration stream, never on the caller's).

use crate::activity::{Activity, ActivityStats, Anchor, Enabled, Settled};
use crate::storage::{MappedWords, Storage};
use crate::{driver_err, kernels, lock};
use cudarc::driver::{CudaFunction, CudaStream};
use gpu_counters_core::bookkeeping::{Ticket, QUERY_FAILED};
use gpu_counters_core::{cpu_monotonic_ns, Error, Result};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Relative drift allowed between CUPTI's conversion and the device's
/// `%globaltimer` calibration since the last probe: one part per million
/// (core's allowance for clocks that are not exactly affine).
const PROBE_DRIFT: f64 = 1e-6;

/// How long opening waits for the first probe's record.
const FIRST_PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// CUPTI's clock against `%globaltimer`, as the probes measured it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ActivityClock {
    /// CUPTI's `CLOCK_MONOTONIC` ns minus `%globaltimer` ns, the middle of
    /// what the latest probe allows.
    pub delta_ns: i64,
    /// The true offset is within `delta_ns ±` this (half the probe's
    /// interval).
    pub uncertainty_ns: u64,
    /// `CLOCK_MONOTONIC` when that probe's record was read.
    pub probed_at_ns: u64,
    /// Probes whose records were read.
    pub probes: u64,
    /// Probes whose reads the record did not enclose (CUPTI's conversion
    /// moved inside one probe): each widened the uncertainty to cover both.
    pub inconsistent_probes: u64,
    /// Probes whose records were lost.
    pub lost_probes: u64,
}

impl ActivityClock {
    /// What a zero-intrusion timestamp's bound adds to the `%globaltimer`
    /// calibration's at CPU time `now_ns`: the probe's uncertainty and the
    /// allowed drift since it.
    pub fn extra_bound_ns(&self, now_ns: u64) -> u64 {
        let since = now_ns.saturating_sub(self.probed_at_ns) as f64;
        self.uncertainty_ns + (PROBE_DRIFT * since).ceil() as u64
    }
}

/// What a pending write writes.
enum Write {
    /// A zero-intrusion timestamp.
    Timestamp { anchor: Anchor, precise: bool },
    /// A statistic query's value, known on the host when it was sampled.
    Value(u64),
}

/// A sample written by the host once its recording's work is done.
struct Pending {
    ticket: Ticket,
    storage: Arc<Storage>,
    index: u32,
    write: Write,
}

struct Probe {
    correlation: u32,
    words: MappedWords,
}

/// A zero-intrusion device's tracing.
pub(crate) struct DeviceActivity {
    pub(crate) activity: &'static Activity,
    stream: Arc<CudaStream>,
    calibration_stream: Arc<CudaStream>,
    probe: CudaFunction,
    clock: Mutex<Option<ActivityClock>>,
    probes: Mutex<Vec<Probe>>,
    pending: Mutex<Vec<Pending>>,
}

impl DeviceActivity {
    /// Tracks the two streams and measures CUPTI's clock once (an error
    /// where the probe's record does not come back).
    pub(crate) fn new(
        stream: Arc<CudaStream>,
        calibration_stream: Arc<CudaStream>,
        probe: CudaFunction,
    ) -> std::result::Result<Self, String> {
        let activity = Activity::get()?;
        let ctx = stream.context().cu_ctx();
        activity.track(ctx, stream.cu_stream())?;
        if let Err(e) = activity.track(ctx, calibration_stream.cu_stream()) {
            activity.untrack(stream.cu_stream());
            return Err(e);
        }
        let d = Self {
            activity,
            stream,
            calibration_stream,
            probe,
            clock: Mutex::new(None),
            probes: Mutex::new(Vec::new()),
            pending: Mutex::new(Vec::new()),
        };
        d.launch_probe().map_err(|e| e.to_string())?;
        let deadline = Instant::now() + FIRST_PROBE_TIMEOUT;
        d.calibration_stream
            .synchronize()
            .map_err(|e| format!("probe cuStreamSynchronize: {e}"))?;
        loop {
            d.activity.flush()?;
            d.read_probes();
            if lock(&d.clock).is_some() {
                return Ok(d);
            }
            if lock(&d.probes).is_empty() {
                return Err("the activity probe's record was lost".into());
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "the activity probe's record did not come back within {FIRST_PROBE_TIMEOUT:?} (CUPTI hands a buffer back only once all of its records are complete: is other traced work still running?)"
                ));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// The clock as last measured.
    pub(crate) fn clock(&self) -> Option<ActivityClock> {
        *lock(&self.clock)
    }

    /// What tracing did so far, process-wide.
    pub(crate) fn stats(&self) -> ActivityStats {
        self.activity.stats()
    }

    /// Launches a probe on the calibration stream with tracing on, unless
    /// one is in flight. The caller serializes launches on that stream.
    pub(crate) fn launch_probe(&self) -> Result<()> {
        let mut probes = lock(&self.probes);
        if !probes.is_empty() {
            return Ok(());
        }
        let ctx = self.stream.context();
        let words = MappedWords::new(ctx, 3, "activity probe")?;
        let on = self.activity.enable().map_err(Error::Internal)?;
        // SAFETY: three words of `words`, which the probe list keeps until
        // the probe's record came back (the kernel ran), or until the
        // calibration stream is synchronized in `drop`.
        let launched = unsafe {
            kernels::launch_probe(
                &self.calibration_stream,
                &self.probe,
                words.device_address(0),
            )
        };
        let correlation = self.activity.hold_last(self.calibration_stream.cu_stream());
        drop(on);
        launched.map_err(driver_err("activity probe launch"))?;
        let Some(correlation) = correlation else {
            // The launch ran, but no record will be matched to it: keep the
            // words alive until it has.
            let _ = self.calibration_stream.synchronize();
            return Err(Error::Internal(
                "the activity probe's launch was not seen by CUPTI's launch callbacks".into(),
            ));
        };
        probes.push(Probe { correlation, words });
        Ok(())
    }

    /// Reads the probes whose records came back into the clock.
    pub(crate) fn read_probes(&self) {
        let mut probes = lock(&self.probes);
        probes.retain(|p| {
            let (settled, span) = self.activity.probe_span(p.correlation);
            let done = p
                .words
                .word(2)
                .is_some_and(|w| w.load(Ordering::Acquire) != 0);
            match (settled, span) {
                (Settled::Value(_), Some(span)) if done => {
                    let g = |i| p.words.word(i).map_or(0, |w| w.load(Ordering::Acquire)) as i128;
                    // CUPTI's record encloses both reads of the same timer:
                    // record start <= first read + delta, last read + delta
                    // <= record end.
                    let lo = span.start as i128 - g(0);
                    let hi = span.end as i128 - g(1);
                    self.update_clock(lo, hi);
                    self.activity.release_id(p.correlation);
                    false
                }
                (Settled::Pending, _) | (Settled::Value(_), _) => true,
                _ => {
                    if let Some(c) = lock(&self.clock).as_mut() {
                        c.lost_probes += 1;
                    }
                    self.activity.release_id(p.correlation);
                    false
                }
            }
        });
    }

    fn update_clock(&self, lo: i128, hi: i128) {
        let mut clock = lock(&self.clock);
        let (l, h) = (lo.min(hi), lo.max(hi));
        let delta = (l + h).div_euclid(2);
        let half = (h - l + 1).div_euclid(2) + 1;
        let c = clock.get_or_insert(ActivityClock {
            delta_ns: 0,
            uncertainty_ns: 0,
            probed_at_ns: 0,
            probes: 0,
            inconsistent_probes: 0,
            lost_probes: 0,
        });
        c.delta_ns = delta.clamp(i64::MIN as i128, i64::MAX as i128) as i64;
        c.uncertainty_ns = half.clamp(0, u64::MAX as i128) as u64;
        c.probed_at_ns = cpu_monotonic_ns();
        c.probes += 1;
        if lo > hi {
            c.inconsistent_probes += 1;
        }
    }

    /// A zero-intrusion timestamp of `storage[index]` at the current point
    /// of the stream, written once `ticket`'s work is done.
    pub(crate) fn sample(
        &self,
        ticket: &Ticket,
        storage: &Arc<Storage>,
        index: u32,
        precise: bool,
    ) {
        let anchor = self.activity.anchor(self.stream.cu_stream());
        self.push(ticket, storage, index, Write::Timestamp { anchor, precise });
    }

    /// `value` written as `storage[index]`'s query once `ticket`'s work is
    /// done (a statistic, counted on the host).
    pub(crate) fn value(&self, ticket: &Ticket, storage: &Arc<Storage>, index: u32, value: u64) {
        self.push(ticket, storage, index, Write::Value(value));
    }

    fn push(&self, ticket: &Ticket, storage: &Arc<Storage>, index: u32, write: Write) {
        let mut pending = lock(&self.pending);
        self.cancel_locked(&mut pending, storage, index, index + 1);
        // The slot's old value, if any, is not this sample's: nothing but
        // this host writes it on a zero-intrusion device.
        if let Some(a) = storage.words.word(2 * index as usize + 1) {
            a.store(0, Ordering::Release);
        }
        pending.push(Pending {
            ticket: ticket.clone(),
            storage: storage.clone(),
            index,
            write,
        });
    }

    /// Forgets the pending writes of `storage[first..end]` (reset, or
    /// recorded again).
    pub(crate) fn cancel(&self, storage: &Storage, first: u32, end: u32) {
        let mut pending = lock(&self.pending);
        self.cancel_locked(&mut pending, storage, first, end);
    }

    fn cancel_locked(&self, pending: &mut Vec<Pending>, storage: &Storage, first: u32, end: u32) {
        let mut kept = Vec::with_capacity(pending.len());
        for p in pending.drain(..) {
            if std::ptr::eq(Arc::as_ptr(&p.storage), storage) && (first..end).contains(&p.index) {
                if let Write::Timestamp { anchor, .. } = p.write {
                    self.activity.release(anchor);
                }
            } else {
                kept.push(p);
            }
        }
        *pending = kept;
    }

    /// Ends the waits of `ticket`'s samples for a next launch (its recorder
    /// was submitted).
    pub(crate) fn close(&self, ticket: &Ticket) {
        for p in lock(&self.pending).iter() {
            if let Write::Timestamp { anchor, .. } = &p.write {
                if p.ticket.id() == ticket.id() {
                    self.activity.close(anchor);
                }
            }
        }
    }

    /// Writes every pending sample whose work is done and whose value is
    /// known (or known to be lost), flushing CUPTI first where a timestamp
    /// waits for records.
    pub(crate) fn settle(&self) -> Result<()> {
        let waits = lock(&self.pending)
            .iter()
            .any(|p| p.ticket.is_done() && matches!(p.write, Write::Timestamp { .. }))
            || !lock(&self.probes).is_empty();
        if waits {
            self.activity.flush().map_err(Error::Internal)?;
            self.read_probes();
        }
        let mut pending = lock(&self.pending);
        let mut kept = Vec::with_capacity(pending.len());
        for p in pending.drain(..) {
            if !p.ticket.is_done() {
                kept.push(p);
                continue;
            }
            let (value, avail) = match &p.write {
                Write::Value(v) => (*v, 1),
                Write::Timestamp { anchor, precise } => {
                    match self.activity.settle(anchor, *precise) {
                        Settled::Value(ns) => (ns, 1),
                        Settled::Pending => {
                            kept.push(p);
                            continue;
                        }
                        Settled::Lost | Settled::NoWork => (0, QUERY_FAILED),
                    }
                }
            };
            let i = 2 * p.index as usize;
            if let (Some(v), Some(a)) = (p.storage.words.word(i), p.storage.words.word(i + 1)) {
                v.store(value, Ordering::Relaxed);
                a.store(avail, Ordering::Release);
            }
            if let Write::Timestamp { anchor, .. } = p.write {
                self.activity.release(anchor);
            }
        }
        *pending = kept;
        Ok(())
    }

    /// Tracing on for a recorder.
    pub(crate) fn enable(&self) -> Result<Enabled> {
        self.activity.enable().map_err(Error::Internal)
    }
}

impl Drop for DeviceActivity {
    fn drop(&mut self) {
        // Probes write their words until they ran; the device's stream was
        // synchronized by the device's drop, so what can be known is.
        let _ = self.calibration_stream.synchronize();
        for p in lock(&self.pending).iter() {
            if let Write::Timestamp { anchor, .. } = &p.write {
                self.activity.close(anchor);
            }
        }
        let _ = self.settle();
        // What is still unknown never will be: nobody is left to write it.
        for p in lock(&self.pending).drain(..) {
            let i = 2 * p.index as usize;
            if let Write::Timestamp { anchor, .. } = p.write {
                self.activity.release(anchor);
                if let Some(a) = p.storage.words.word(i + 1) {
                    a.store(QUERY_FAILED, Ordering::Release);
                }
            }
        }
        for p in lock(&self.probes).drain(..) {
            self.activity.release_id(p.correlation);
        }
        self.activity.untrack(self.stream.cu_stream());
        self.activity.untrack(self.calibration_stream.cu_stream());
    }
}
