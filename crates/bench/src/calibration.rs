//! Calibration quality: the driver's max deviation, the error bound, drift
//! without refitting and bracket violations with refitting.

use crate::stats::median;
use crate::{BenchError, CalibrationReport, Progress};
use gpu_counters_hal::{
    cpu_monotonic_ns, CommonCounterSet, CounterSampleBufferDescriptor, SampleStatus,
    TimestampGranularity,
};
use gpu_counters_vulkan::{CommandBuffer, Device};
use std::time::{Duration, Instant};

/// Reads in the max-deviation burst.
const BURST: usize = 100;
/// Time between two drift probes.
const PROBE_INTERVAL: Duration = Duration::from_millis(50);

pub(crate) fn measure(
    device: &Device,
    drift_seconds: f64,
    progress: &Progress,
) -> Result<CalibrationReport, BenchError> {
    let method = device.info().calibration.name().to_string();
    let mut deviations = Vec::with_capacity(BURST);
    for _ in 0..BURST {
        let pair = match device.calibrated_timestamp_read()? {
            Some(p) => p,
            None => device.sample_timestamps()?,
        };
        deviations.push(pair.max_deviation_ns);
    }
    let min_max_deviation_ns = deviations.iter().copied().min().unwrap_or(0);
    let median_max_deviation_ns = median(deviations.iter().map(|&d| d as f64)).round() as u64;

    let fixed = device.calibration()?;
    let error_bound_ns = fixed.error_bound_ns();
    let mut refit = fixed.clone();
    let probe_buffer = device.make_counter_sample_buffer(&CounterSampleBufferDescriptor::new(
        CommonCounterSet::Timestamp,
        "drift probe",
        1,
    ))?;
    let bar = progress.bar((drift_seconds.ceil() as u64).max(1), "drift (s)");
    let start = Instant::now();
    let window = Duration::from_secs_f64(drift_seconds);
    let mut errors: Vec<f64> = Vec::new();
    let mut bracket_violations = 0u64;
    let mut max_refit_bound_ns = 0u64;
    loop {
        device.refresh_calibration(&mut refit)?;
        probe_buffer.reset()?;
        let mut cmd = CommandBuffer::new(device)?;
        cmd.sample_counters(&probe_buffer, 0, TimestampGranularity::Precise)?;
        let before = cpu_monotonic_ns();
        let submission = cmd.commit()?;
        submission.wait()?;
        let after = cpu_monotonic_ns();
        let resolved = probe_buffer.resolve_counter_range(0..1)?;
        if resolved.statuses()[0] != SampleStatus::Written {
            return Err(BenchError::Measurement(format!(
                "drift probe resolved as {:?}",
                resolved.statuses()[0]
            )));
        }
        let ticks = resolved.timestamps()?[0].timestamp;
        let t = refit
            .to_cpu_ns(ticks)
            .map_err(gpu_counters_hal::Error::from)?;
        // Error of the fixed calibration, with the refitted one (checked
        // against the CPU bracket just below) as the reference. The fixed
        // one's newest anchor is old: unwrap around the submission's time.
        let fixed_ns = fixed
            .to_cpu_ns_near(ticks, before)
            .map_err(gpu_counters_hal::Error::from)?
            .ns;
        errors.push(fixed_ns as f64 - t.ns as f64);
        max_refit_bound_ns = max_refit_bound_ns.max(t.error_bound_ns);
        if t.ns.saturating_add(t.error_bound_ns) < before
            || t.ns.saturating_sub(t.error_bound_ns) > after
        {
            bracket_violations += 1;
        }
        bar.set_position(start.elapsed().as_secs());
        if start.elapsed() >= window {
            break;
        }
        std::thread::sleep(PROBE_INTERVAL.min(window.saturating_sub(start.elapsed())));
    }
    bar.finish_and_clear();
    let first = errors.first().copied().unwrap_or(0.0);
    let drift_ns = errors.iter().map(|e| (e - first).abs()).fold(0.0, f64::max);
    Ok(CalibrationReport {
        min_max_deviation_ns,
        median_max_deviation_ns,
        error_bound_ns,
        drift_ns,
        drift_window_s: start.elapsed().as_secs_f64(),
        bracket_violations,
        method,
        probes: errors.len() as u64,
        max_refit_bound_ns,
    })
}
