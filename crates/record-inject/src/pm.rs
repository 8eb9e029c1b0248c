//! GPU metrics over time (`record --gpu-metrics`): CUPTI's PM sampling of
//! each device the program uses, decoded every [`DECODE_PERIOD`] on a
//! thread of its own, sent as `PmConfig` and `PmSample` records.
//!
//! - One process samples a device: the holder of the lock file
//!   `$GPU_COUNTERS_RECORD_DIR/pm-<uuid>.lock` (`flock`, held while it
//!   samples); the others say so in one notice.
//! - The metrics are `record`'s (checked, or chosen from the defaults,
//!   before the program started); where it could not check them, the
//!   defaults are chosen here on the device.
//! - Sample times are CUPTI's timestamps, which the activity tracing set up
//!   by `InitializeInjection` (its timestamp callback) puts on
//!   `CLOCK_MONOTONIC`. Where the first decode shows they are not (the
//!   newest sample not within a minute before its decode), they are moved
//!   to end at their decode and a notice says so with the bound.
//! - Overflows of the hardware buffer and gaps between samples are
//!   counted (`pm_overflows`, `pm_gaps` in the process's counts); a failure
//!   is one notice, and tracing goes on without metrics.
//! - At exit, sampling stops and what is left is decoded and sent, within
//!   the exit sequence's deadline.

use crate::state::{State, GENERATION};
use gpu_counters_cuda::hardware::pm::{count_gaps, PmOptions, PmSampler};
use gpu_counters_cuda::hardware::{ChipMetrics, HardwareError, MetricsOf};
use gpu_counters_record::protocol::{severity, MetricConfig, PmSample, Record, Seq};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How often samples are decoded and sent.
pub const DECODE_PERIOD: Duration = Duration::from_millis(20);

/// Set when a decode thread has finished (sent its last samples).
type Done = Arc<(Mutex<bool>, std::sync::Condvar)>;

/// One device's decode thread, as the exit sequence sees it.
struct Running {
    generation: u64,
    stop: Arc<AtomicBool>,
    done: Done,
}

static RUNNING: Mutex<Vec<Running>> = Mutex::new(Vec::new());

/// The lock file of the device with `uuid`, locked by this process where it
/// takes it first (held while the file stays open); why not where another
/// process of the run holds it.
fn take_device(dir: &Path, uuid: [u8; 16]) -> Result<std::fs::File, String> {
    let hex: String = uuid.iter().map(|b| format!("{b:02x}")).collect();
    let path = dir.join(format!("pm-{hex}.lock"));
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    // SAFETY: flock on a descriptor we own.
    let r = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if r != 0 {
        return Err("another process of this run samples it".into());
    }
    Ok(f)
}

/// The metrics to sample on device `ordinal`: `record`'s, else the
/// defaults chosen on the device (a notice names quantities without one).
fn metrics(s: &State, ordinal: u32) -> Result<Vec<String>, HardwareError> {
    if !s.config.gpu_metrics.is_empty() {
        return Ok(s.config.gpu_metrics.clone());
    }
    let chip = ChipMetrics::for_device(ordinal as usize, MetricsOf::PmSampling)?;
    let (chosen, missing) = chip.default_pm_metrics();
    for m in missing {
        crate::state::notice(
            s,
            severity::WARNING,
            &format!(
                "GPU{ordinal}: no PM-sampling metric on {} for {m}",
                chip.chip()
            ),
        );
    }
    Ok(chosen)
}

/// Starts sampling device `ordinal` (UUID `uuid`) where `--gpu-metrics`
/// asked for it; a failure is one notice.
pub fn start(s: &'static State, ordinal: u32, uuid: [u8; 16]) {
    let Some(hz) = s.config.gpu_metrics_hz else {
        return;
    };
    let Some(dir) = std::env::var_os(gpu_counters_record::client::RECORD_DIR_VAR) else {
        return;
    };
    // Held by the decode thread; given back where sampling does not start.
    let held = match take_device(Path::new(&dir), uuid) {
        Ok(f) => f,
        Err(why) => {
            crate::state::notice(
                s,
                severity::INFO,
                &format!("GPU{ordinal}: GPU metrics not sampled by this process: {why}"),
            );
            return;
        }
    };
    let started = metrics(s, ordinal).and_then(|m| {
        if m.is_empty() {
            return Err(HardwareError::UnknownMetric {
                metric: String::new(),
                chip: String::new(),
                why: "no metric to sample".into(),
            });
        }
        let names: Vec<&str> = m.iter().map(String::as_str).collect();
        let mut options = PmOptions::at_hz(hz, DECODE_PERIOD);
        if let Some(mb) = std::env::var("GPU_COUNTERS_PM_BUFFER_MB")
            .ok()
            .and_then(|v| v.parse::<usize>().ok())
            .filter(|&mb| mb > 0)
        {
            options.hardware_buffer_bytes = mb << 20;
        }
        PmSampler::start(ordinal as usize, &names, options)
    });
    let sampler = match started {
        Ok(p) => p,
        Err(e) => {
            crate::state::notice(
                s,
                severity::WARNING,
                &format!("GPU{ordinal}: GPU metrics not recorded: {e}"),
            );
            return;
        }
    };
    let ids: Vec<u32> = sampler
        .metrics()
        .iter()
        .map(|m| s.intern(m.as_bytes()).unwrap_or(0))
        .collect();
    s.push(&Record::PmConfig(MetricConfig {
        device: ordinal,
        metrics: Seq::Slice(&ids),
    }));
    let stop = Arc::new(AtomicBool::new(false));
    let done: Done = Arc::new((Mutex::new(false), std::sync::Condvar::new()));
    let (stop2, done2) = (stop.clone(), done.clone());
    let spawned = std::thread::Builder::new()
        .name(format!("gpu-counters-pm{ordinal}"))
        .spawn(move || {
            let _held = held;
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                decode_loop(s, ordinal, sampler, &stop2)
            }));
            let (m, cv) = &*done2;
            *m.lock().unwrap_or_else(|e| e.into_inner()) = true;
            cv.notify_all();
        });
    if spawned.is_err() {
        crate::state::notice(
            s,
            severity::WARNING,
            &format!("GPU{ordinal}: GPU metrics not recorded: no decode thread"),
        );
        return;
    }
    RUNNING
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(Running {
            generation: GENERATION.load(Ordering::Acquire),
            stop,
            done,
        });
}

/// Decodes every [`DECODE_PERIOD`] until `stop`, then stops sampling and
/// sends the rest; the sampler's drop disables the session.
fn decode_loop(s: &State, ordinal: u32, mut sampler: PmSampler, stop: &AtomicBool) {
    let interval = sampler.options().interval_ns;
    let mut last_end = None;
    let mut next = Instant::now() + DECODE_PERIOD;
    let mut shift: Option<i64> = None;
    loop {
        let stopping = stop.load(Ordering::Acquire);
        let decoded = if stopping {
            sampler.stop()
        } else {
            sampler.decode()
        };
        match decoded {
            Ok(mut d) => {
                if let Some(last) = d.samples.last() {
                    let shift = *shift.get_or_insert_with(|| {
                        let now = crate::state::now_ns();
                        let off = clock_shift(now, last.end_ns);
                        if off != 0 {
                            crate::state::notice(
                                s,
                                severity::WARNING,
                                &format!(
                                    "GPU{ordinal}: PM sample times are not on CLOCK_MONOTONIC (CUPTI did not use the timestamp callback): moved by {off} ns to end at their decode, each within {} ms late",
                                    DECODE_PERIOD.as_millis() * 2
                                ),
                            );
                        }
                        off
                    });
                    for p in &mut d.samples {
                        p.start_ns = p.start_ns.saturating_add_signed(shift);
                        p.end_ns = p.end_ns.saturating_add_signed(shift);
                    }
                }
                let c = &s.counts;
                c.pm_overflows.fetch_add(d.overflows, Ordering::Relaxed);
                c.pm_gaps.fetch_add(
                    count_gaps(&mut last_end, &d.samples, interval),
                    Ordering::Relaxed,
                );
                for p in &d.samples {
                    s.push(&Record::PmSample(PmSample {
                        device: ordinal,
                        start_ns: p.start_ns,
                        end_ns: p.end_ns,
                        values: Seq::Slice(&p.values),
                    }));
                }
            }
            Err(e) => {
                crate::state::notice(
                    s,
                    severity::WARNING,
                    &format!("GPU{ordinal}: GPU metrics stopped: {e}"),
                );
                return;
            }
        }
        if stopping {
            return;
        }
        let now = Instant::now();
        if next > now {
            std::thread::sleep(next - now);
        }
        next = (next + DECODE_PERIOD).max(Instant::now());
    }
}

/// How far sample times must move to be on `CLOCK_MONOTONIC`: 0 where the
/// newest sample ends within a minute before `now` (the timestamp callback
/// put them there), else the shift that makes it end at `now` (times on
/// another clock, known only to within the decode's latency).
pub fn clock_shift(now: u64, newest_end: u64) -> i64 {
    const MINUTE: u64 = 60_000_000_000;
    if newest_end <= now.saturating_add(1_000_000_000) && newest_end + MINUTE >= now {
        0
    } else {
        (i128::from(now) - i128::from(newest_end)).clamp(i64::MIN.into(), i64::MAX.into()) as i64
    }
}

/// The exit sequence's part: every decode thread of this process stops
/// sampling and sends what is left, within `deadline`. Returns whether all
/// finished in time.
pub fn stop_all(deadline: Duration) -> bool {
    let generation = GENERATION.load(Ordering::Acquire);
    let until = Instant::now() + deadline;
    let running: Vec<(Arc<AtomicBool>, Done)> = match RUNNING.try_lock() {
        Ok(r) => r
            .iter()
            .filter(|r| r.generation == generation)
            .map(|r| (r.stop.clone(), r.done.clone()))
            .collect(),
        Err(_) => return false,
    };
    for (stop, _) in &running {
        stop.store(true, Ordering::Release);
    }
    let mut all = true;
    for (_, done) in &running {
        let (m, cv) = &**done;
        let mut finished = m.lock().unwrap_or_else(|e| e.into_inner());
        while !*finished {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                all = false;
                break;
            }
            finished = cv
                .wait_timeout(finished, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Samples that end shortly before their decode are on the same clock;
    /// ones on another clock move to end at the decode.
    #[test]
    fn sample_times_off_the_cpu_clock_are_moved() {
        let now = 5_000_000_000_000;
        assert_eq!(clock_shift(now, now - 30_000_000), 0);
        assert_eq!(clock_shift(now, now + 500_000_000), 0);
        assert_eq!(clock_shift(now, now - 120_000_000_000), 120_000_000_000);
        let unix = 1_760_000_000_000_000_000;
        assert_eq!(clock_shift(now, unix), now as i64 - unix as i64);
    }

    /// The first process to ask for a device's lock file holds it while the
    /// file is open; a second open of it (another process would be the
    /// same) is refused; another device's is free.
    #[test]
    fn one_sampler_per_device_per_run() {
        let dir = tempfile::tempdir().unwrap();
        let a = *b"device-a-uuid-00";
        let b = *b"device-b-uuid-00";
        let held = take_device(dir.path(), a).unwrap();
        assert_eq!(
            take_device(dir.path(), a).unwrap_err(),
            "another process of this run samples it"
        );
        let _other = take_device(dir.path(), b).unwrap();
        // Given back when closed.
        drop(held);
        let _again = take_device(dir.path(), a).unwrap();
        assert!(dir
            .path()
            .join("pm-6465766963652d612d757569642d3030.lock")
            .exists());
        let missing = dir.path().join("no-such-dir");
        assert!(take_device(&missing, a)
            .unwrap_err()
            .contains("no-such-dir"));
    }
}
