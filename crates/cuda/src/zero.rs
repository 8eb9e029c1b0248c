//! A zero-intrusion device's side of [`crate::activity`]: the samples its
//! recorders took, written into their buffers once CUPTI's records tell
//! their values; statistic values written by the host instead of a kernel;
//! and the measured bound of CUPTI's clock (probe kernels on the
//! calibration stream, never on the caller's).

use crate::activity::{Activity, ActivityStats, Anchor, Enabled, Settled};
use crate::storage::{MappedStorage, MappedWords};
use crate::{driver_err, kernels, lock};
use cudarc::driver::{CudaFunction, CudaStream};
use gpu_counters_hal::bookkeeping::{Ticket, QUERY_FAILED};
use gpu_counters_hal::{cpu_monotonic_ns, Error, Result};
use std::sync::atomic::{AtomicI64, Ordering};
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
    /// what the latest batch of probes allows (each probe's record must
    /// enclose its two reads; the batch's 8 intervals are intersected).
    pub delta_ns: i64,
    /// The true offset is within `delta_ns ±` this (half the intersection).
    pub uncertainty_ns: u64,
    /// `CLOCK_MONOTONIC` when that batch was read.
    pub probed_at_ns: u64,
    /// Probes whose records were read.
    pub probes: u64,
    /// Probes of batches whose intervals did not meet (CUPTI's conversion
    /// moved inside the batch): the uncertainty then covers all of them.
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
    storage: Arc<MappedStorage>,
    index: u32,
    write: Write,
}

/// One probe kernel of a batch: its correlation id, and where its words
/// are in the batch's memory.
struct Probe {
    correlation: u32,
    at: usize,
}

/// Probes launched together: their intervals are intersected.
#[derive(Default)]
struct Batch {
    probes: Vec<Probe>,
    words: Option<MappedWords>,
    /// (lo, hi) of each probe read so far.
    read: Vec<(i128, i128)>,
    lost: u64,
}

/// Probe kernels per batch (one batch per calibration).
const PROBES: usize = 8;

/// A zero-intrusion device's tracing.
pub(crate) struct DeviceActivity {
    pub(crate) activity: &'static Activity,
    stream: Arc<CudaStream>,
    calibration_stream: Arc<CudaStream>,
    probe: CudaFunction,
    clock: Mutex<Option<ActivityClock>>,
    probes: Mutex<Batch>,
    pending: Mutex<Vec<Pending>>,
    tracing: crate::ActivityTracing,
    /// CUPTI's clock minus `CLOCK_MONOTONIC`, by the latest calibration
    /// pair (0 before the first).
    offset: AtomicI64,
}

impl DeviceActivity {
    /// Tracks the two streams and measures CUPTI's clock once (an error
    /// where the probe's record does not come back).
    pub(crate) fn new(
        stream: Arc<CudaStream>,
        calibration_stream: Arc<CudaStream>,
        probe: CudaFunction,
        tracing: crate::ActivityTracing,
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
            probes: Mutex::new(Batch::default()),
            pending: Mutex::new(Vec::new()),
            tracing,
            offset: AtomicI64::new(0),
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
            if lock(&d.probes).probes.is_empty() {
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

    /// Launches a batch of probes on the calibration stream with tracing
    /// on, unless one is in flight. The caller serializes launches on that
    /// stream.
    pub(crate) fn launch_probe(&self) -> Result<()> {
        let mut batch = lock(&self.probes);
        if !batch.probes.is_empty() {
            return Ok(());
        }
        let ctx = self.stream.context();
        let words = MappedWords::new(ctx, 3 * PROBES, "activity probes")?;
        let on = self.activity.enable().map_err(Error::Internal)?;
        let mut launched = Ok(());
        let mut probes = Vec::with_capacity(PROBES);
        let stream = self.calibration_stream.cu_stream();
        for k in 0..PROBES {
            // SAFETY: three words of `words`, which the batch keeps until
            // every probe's record came back (the kernel ran), or until the
            // calibration stream is synchronized in `drop`.
            launched = unsafe {
                kernels::launch_probe(
                    &self.calibration_stream,
                    &self.probe,
                    words.device_address(3 * k),
                )
            };
            if launched.is_err() {
                break;
            }
            match self.activity.hold_last(stream) {
                Some(correlation) => probes.push(Probe {
                    correlation,
                    at: 3 * k,
                }),
                None => {
                    launched = Err(cudarc::driver::DriverError(
                        cudarc::driver::sys::CUresult::CUDA_ERROR_NOT_FOUND,
                    ));
                    break;
                }
            }
        }
        drop(on);
        if let Err(e) = launched {
            // What was launched writes `words` until it ran.
            let _ = self.calibration_stream.synchronize();
            for p in &probes {
                self.activity.release_id(p.correlation);
            }
            return Err(
                if e.0 == cudarc::driver::sys::CUresult::CUDA_ERROR_NOT_FOUND {
                    Error::Internal(
                        "an activity probe's launch was not seen by CUPTI's launch callbacks"
                            .into(),
                    )
                } else {
                    driver_err("activity probe launch")(e)
                },
            );
        }
        *batch = Batch {
            probes,
            words: Some(words),
            read: Vec::new(),
            lost: 0,
        };
        Ok(())
    }

    /// Reads the probes whose records came back; once the whole batch is
    /// in, its intervals (intersected) become the clock.
    pub(crate) fn read_probes(&self) {
        let mut batch = lock(&self.probes);
        let Batch {
            probes,
            words,
            read,
            lost,
        } = &mut *batch;
        let Some(w) = words.as_ref() else {
            return;
        };
        probes.retain(|p| {
            let (settled, span) = self.activity.probe_span(p.correlation);
            let word = |i: usize| w.word(p.at + i).map_or(0, |x| x.load(Ordering::Acquire));
            match (settled, span) {
                (Settled::Value(_), Some(span)) if word(2) != 0 => {
                    // CUPTI's record encloses both reads of the same timer:
                    // record start <= first read + delta, last read + delta
                    // <= record end.
                    read.push((
                        span.start as i128 - word(0) as i128,
                        span.end as i128 - word(1) as i128,
                    ));
                    self.activity.release_id(p.correlation);
                    false
                }
                (Settled::Pending, _) | (Settled::Value(_), _) => true,
                _ => {
                    *lost += 1;
                    self.activity.release_id(p.correlation);
                    false
                }
            }
        });
        if !probes.is_empty() {
            return;
        }
        let intervals = std::mem::take(read);
        let lost = std::mem::take(lost);
        *words = None;
        self.update_clock(&intervals, lost);
    }

    /// The clock from a batch's intervals: their intersection, or, where
    /// they do not meet (CUPTI's conversion moved inside the batch), the
    /// narrowest one widened to cover them all.
    fn update_clock(&self, intervals: &[(i128, i128)], lost: u64) {
        let mut clock = lock(&self.clock);
        if intervals.is_empty() {
            if let Some(c) = clock.as_mut() {
                c.lost_probes += lost;
            }
            return;
        }
        let lo = intervals.iter().map(|i| i.0).max().unwrap_or(0);
        let hi = intervals.iter().map(|i| i.1).min().unwrap_or(0);
        let consistent = lo <= hi;
        let (l, h) = if consistent {
            (lo, hi)
        } else {
            let l = intervals.iter().map(|i| i.0.min(i.1)).min().unwrap_or(0);
            let h = intervals.iter().map(|i| i.0.max(i.1)).max().unwrap_or(0);
            (l, h)
        };
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
        c.probes += intervals.len() as u64;
        c.lost_probes += lost;
        if !consistent {
            c.inconsistent_probes += intervals.len() as u64;
        }
    }

    /// A zero-intrusion timestamp of `storage[index]` at the current point
    /// of the stream, written once `ticket`'s work is done.
    pub(crate) fn sample(
        &self,
        ticket: &Ticket,
        storage: &Arc<MappedStorage>,
        index: u32,
        precise: bool,
    ) {
        let now = cpu_monotonic_ns() as i64;
        let issued = now
            .saturating_add(self.offset.load(Ordering::Relaxed))
            .max(0) as u64;
        let arm = self.tracing == crate::ActivityTracing::LaunchesAfterSamples;
        let anchor = self
            .activity
            .anchor(self.stream.cu_stream(), issued, arm, precise);
        self.push(ticket, storage, index, Write::Timestamp { anchor, precise });
    }

    /// `value` written as `storage[index]`'s query once `ticket`'s work is
    /// done (a statistic, counted on the host).
    pub(crate) fn value(
        &self,
        ticket: &Ticket,
        storage: &Arc<MappedStorage>,
        index: u32,
        value: u64,
    ) {
        self.push(ticket, storage, index, Write::Value(value));
    }

    fn push(&self, ticket: &Ticket, storage: &Arc<MappedStorage>, index: u32, write: Write) {
        let mut pending = lock(&self.pending);
        // (A slot written before had its pending write cancelled when it
        // was recorded again: `Recorder::prepare_write`.)
        // The slot's old value, if any, is not this sample's: nothing but
        // this host writes it on a zero-intrusion device. Both words: a
        // value that is not 0 counts as available (`MappedStorage`'s read).
        storage.clear_sample(index);
        pending.push(Pending {
            ticket: ticket.clone(),
            storage: storage.clone(),
            index,
            write,
        });
    }

    /// Forgets the pending writes of `storage[first..end]` (reset, or
    /// recorded again).
    pub(crate) fn cancel(&self, storage: &MappedStorage, first: u32, end: u32) {
        let mut pending = lock(&self.pending);
        self.cancel_locked(&mut pending, storage, first, end);
    }

    fn cancel_locked(
        &self,
        pending: &mut Vec<Pending>,
        storage: &MappedStorage,
        first: u32,
        end: u32,
    ) {
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
            || !lock(&self.probes).probes.is_empty();
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

    /// Notes the latest calibration pair's offset (CUPTI's clock minus
    /// `CLOCK_MONOTONIC`), for samples' issue times.
    pub(crate) fn set_offset(&self, gpu_ticks: u64, cpu_ns: u64) {
        let d = gpu_ticks as i128 - cpu_ns as i128;
        self.offset.store(
            d.clamp(i64::MIN as i128, i64::MAX as i128) as i64,
            Ordering::Relaxed,
        );
    }

    /// Tracing on for a recorder, where every launch is traced (with
    /// [`crate::ActivityTracing::LaunchesAfterSamples`] the samples turn it
    /// on for their next launch instead).
    pub(crate) fn recorder_tracing(&self) -> Option<Result<Enabled>> {
        (self.tracing == crate::ActivityTracing::EveryLaunch)
            .then(|| self.activity.enable().map_err(Error::Internal))
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
        for p in lock(&self.probes).probes.drain(..) {
            self.activity.release_id(p.correlation);
        }
        self.activity.untrack(self.stream.cu_stream());
        self.activity.untrack(self.calibration_stream.cu_stream());
    }
}
