//! CUDA's clock figures: the calibration's handshake windows and bound,
//! checked against later reads, and the resolve throughput of kernel
//! timestamps.

use super::*;

/// The CUDA calibration figures.
#[derive(Debug, Clone, Serialize)]
pub struct CudaCalibrationReport {
    /// Smallest handshake window (after − before) of the burst, ns.
    pub best_window_ns: u64,
    /// Median window, ns.
    pub median_window_ns: u64,
    /// What the old method (best of 8, half window plus a step) bounds.
    pub best_of_8_bound_ns: u64,
    /// The calibration's error bound (32 reads intersected), median over
    /// the calibrations taken.
    pub bound_ns: u64,
    /// Handshake reads checked against their calibration (each GPU value
    /// converted must fall in its CPU window ± the bound).
    pub reads_checked: u64,
    /// Of those, outside: must be 0.
    pub reads_outside: u64,
    /// The zero-intrusion device's bound (handshake plus probe), median.
    pub zero_intrusion_bound_ns: Option<u64>,
}

/// Calibration on the harness's devices: handshake windows, the bound and
/// its check against later reads, drift as for Vulkan.
pub(crate) fn calibration(
    bench: &CudaBench,
    drift_seconds: f64,
) -> Result<(CalibrationReport, CudaCalibrationReport), BenchError> {
    let d = &bench.kernel;
    let reads = d.handshake_reads(256)?;
    let mut windows: Vec<u64> = reads.iter().map(|&(b, _, a)| a - b).collect();
    windows.sort_unstable();
    let step = d.timer_step_ns();
    let best_of_8 = reads
        .chunks(8)
        .map(|c| c.iter().map(|&(b, _, a)| a - b).min().unwrap_or(0))
        .map(|w| w / 2 + w % 2 + step)
        .collect::<Vec<_>>();
    let mut bounds = Vec::new();
    let mut deviations = Vec::new();
    let (mut checked, mut outside) = (0u64, 0u64);
    for _ in 0..20 {
        let cal = d.calibration()?;
        bounds.push(cal.error_bound_ns());
        deviations.push(cal.max_deviation_ns());
        for (before, ticks, after) in d.handshake_reads(32)? {
            let c = cal
                .to_cpu_ns(ticks)
                .map_err(gpu_counters_hal::Error::from)?;
            checked += 1;
            if c.ns + c.error_bound_ns < before || c.ns > after + c.error_bound_ns {
                outside += 1;
            }
        }
    }
    let zero_bounds: Option<Vec<u64>> = bench
        .zero
        .as_ref()
        .map(|z| {
            (0..10)
                .map(|_| z.calibration().map(|c| c.error_bound_ns()))
                .collect::<Result<Vec<_>, _>>()
        })
        .transpose()?;
    let med = |v: &[u64]| median(v.iter().map(|&x| x as f64)).round() as u64;
    let extra = CudaCalibrationReport {
        best_window_ns: windows.first().copied().unwrap_or(0),
        median_window_ns: med(&windows),
        best_of_8_bound_ns: med(&best_of_8),
        bound_ns: med(&bounds),
        reads_checked: checked,
        reads_outside: outside,
        zero_intrusion_bound_ns: zero_bounds.as_deref().map(med),
    };
    // Drift: one calibration kept, one refitted, probed by a kernel
    // timestamp bracketed by the CPU clock, as the Vulkan report does.
    let fixed = d.calibration()?;
    let mut refit = fixed.clone();
    let probe = d.make_counter_sample_buffer(&CounterSampleBufferDescriptor::new(
        CommonCounterSet::Timestamp,
        "drift probe",
        1,
    ))?;
    let start = Instant::now();
    let window = std::time::Duration::from_secs_f64(drift_seconds);
    let mut errors = Vec::new();
    let (mut violations, mut max_bound) = (0u64, 0u64);
    loop {
        d.refresh_calibration(&mut refit)?;
        probe.reset()?;
        let before = cpu_monotonic_ns();
        let mut rec = d.recorder();
        rec.sample_counters(&probe, 0, TimestampGranularity::Precise)?;
        let after = d.submit(rec)?.wait()?;
        let r = probe.resolve_counter_range(0..1)?;
        if r.statuses()[0] != SampleStatus::Written {
            return Err(BenchError::Measurement(format!(
                "drift probe resolved as {:?}",
                r.statuses()[0]
            )));
        }
        let ticks = r.timestamps()?[0].timestamp;
        let t = refit
            .to_cpu_ns(ticks)
            .map_err(gpu_counters_hal::Error::from)?;
        let f = fixed
            .to_cpu_ns_near(ticks, before)
            .map_err(gpu_counters_hal::Error::from)?;
        errors.push(f.ns as f64 - t.ns as f64);
        max_bound = max_bound.max(t.error_bound_ns);
        if t.ns + t.error_bound_ns < before || t.ns > after + t.error_bound_ns {
            violations += 1;
        }
        if start.elapsed() >= window {
            break;
        }
        std::thread::sleep(
            std::time::Duration::from_millis(50).min(window.saturating_sub(start.elapsed())),
        );
    }
    let first = errors.first().copied().unwrap_or(0.0);
    let drift_ns = errors.iter().map(|e| (e - first).abs()).fold(0.0, f64::max);
    Ok((
        CalibrationReport {
            min_max_deviation_ns: deviations.iter().copied().min().unwrap_or(0),
            median_max_deviation_ns: med(&deviations),
            error_bound_ns: med(&bounds),
            drift_ns,
            drift_window_s: start.elapsed().as_secs_f64(),
            bracket_violations: violations,
            method: d.info().calibration.name().to_string(),
            probes: errors.len() as u64,
            max_refit_bound_ns: max_bound,
        },
        extra,
    ))
}

/// Resolve throughput of a buffer of `count` kernel timestamps, against a
/// plain copy of the same bytes.
pub(crate) fn resolve(
    bench: &CudaBench,
    count: u32,
    reps: u32,
) -> Result<ResolveReport, BenchError> {
    let d = &bench.kernel;
    let buffer = d.make_counter_sample_buffer(&CounterSampleBufferDescriptor::new(
        CommonCounterSet::Timestamp,
        "resolve throughput",
        count,
    ))?;
    let mut rec = d.recorder();
    for i in 0..count {
        rec.sample_counters(&buffer, i, TimestampGranularity::Relaxed)?;
    }
    d.submit(rec)?.wait()?;
    let mut resolve = Vec::new();
    let mut fresh = Vec::new();
    let mut copy = Vec::new();
    // Each repetition's copy over its resolve: the two a moment apart.
    let mut ratios = Vec::new();
    let src = vec![1u64; count as usize];
    let mut dst = vec![0u64; count as usize];
    let mut r = gpu_counters_hal::ResolvedCounters::default();
    let all_written = |r: &gpu_counters_hal::ResolvedCounters| {
        let written = r.count(SampleStatus::Written);
        if written == count as usize {
            Ok(())
        } else {
            Err(BenchError::Measurement(format!(
                "resolve throughput: {written} of {count} timestamps written"
            )))
        }
    };
    for rep in 0..=reps {
        let t = Instant::now();
        let new = buffer.resolve_counter_range(0..u64::from(count))?;
        all_written(&new)?;
        let f = t.elapsed().as_nanos() as f64;
        black_box(new);
        if rep > 0 {
            fresh.push(f);
        }
        let t = Instant::now();
        buffer.resolve_counter_range_into(0..u64::from(count), &mut r)?;
        all_written(&r)?;
        let e = t.elapsed().as_nanos() as f64;
        black_box(&r);
        let t = Instant::now();
        dst.copy_from_slice(&src);
        black_box(&dst);
        let c = t.elapsed().as_nanos() as f64;
        if rep > 0 {
            resolve.push(e);
            copy.push(c);
            ratios.push(c.max(1.0) / e.max(1.0));
        }
    }
    let resolve_ns = median(resolve);
    let copy_ns = median(copy);
    let per_s = |ns: f64| {
        if ns > 0.0 {
            f64::from(count) / (ns / 1e9)
        } else {
            0.0
        }
    };
    Ok(ResolveReport {
        samples: count,
        samples_per_s: per_s(resolve_ns),
        ratio_to_copy: median(ratios),
        resolve_ns,
        copy_ns,
        driver_read_ns: 0.0,
        fresh_result_ns: median(fresh),
    })
}
