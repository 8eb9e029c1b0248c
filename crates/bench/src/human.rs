//! The report as text for people: one table per backend, its ratios with
//! their spreads, and the resolve and calibration results.

use crate::*;

pub(crate) fn fmt_opt(v: Option<f64>) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{v:.2}"))
}

/// A spread of fractions as percentages with `digits` decimals.
pub(crate) fn fmt_percent(r: Option<&RatioSpread>, digits: usize) -> String {
    r.map_or_else(
        || "-".into(),
        |r| {
            format!(
                "{:.d$}% [{:.d$}%, {:.d$}%] of {} rounds ({})",
                100.0 * r.median,
                100.0 * r.min,
                100.0 * r.max,
                r.rounds,
                r.verdict(),
                d = digits
            )
        },
    )
}

pub(crate) fn fmt_spread(r: Option<RatioSpread>) -> String {
    r.map_or_else(
        || "- (below the noise)".into(),
        |r| {
            let interval = match (r.median_low, r.median_high) {
                (Some(low), Some(high)) => format!(", median within [{low:.2}, {high:.2}]"),
                _ => String::new(),
            };
            format!(
                "{:.2} [{:.2}, {:.2}] of {} rounds{interval}, {}",
                r.median,
                r.min,
                r.max,
                r.rounds,
                r.verdict()
            )
        },
    )
}

/// Prints the report as tables for a person on stdout ([`write_human`]);
/// fails where stdout does (a closed pipe, a full disk).
pub fn print_human(report: &BenchReport) -> std::io::Result<()> {
    write_human(report, &mut std::io::stdout().lock())
}

/// Writes the report as tables for a person to `w`; fails where `w` does,
/// never panics.
pub fn write_human(report: &BenchReport, w: &mut dyn std::io::Write) -> std::io::Result<()> {
    let d = &report.device;
    writeln!(
        w,
        "device {}: {} ({}), timestamp period {} ns, {} valid bits, calibration {}",
        d.index,
        d.name,
        d.driver,
        d.timestamp_period_ns,
        d.timestamp_valid_bits,
        d.calibration.name()
    )?;
    let wgpu_reps = match report.wgpu_reps {
        Some(n) if n != report.reps => format!(" ({n} for the wgpu rows)"),
        _ => String::new(),
    };
    writeln!(
        w,
        "workload: {}; medians of {} reps{wgpu_reps}",
        report.workload, report.reps
    )?;
    writeln!(w)?;
    let name_w = report
        .variants
        .iter()
        .map(|v| v.name.len())
        .max()
        .unwrap_or(7)
        .max(7);
    writeln!(
        w,
        "{:<name_w$}  {:<17}  {:<12}  {:>7}  {:>9}  {:>10}  {:>10}  {:>10}  {:>9}  {:>9}",
        "variant",
        "tool",
        "placement",
        "samples",
        "written",
        "GPU ns/s",
        "record ns/s",
        "resolve ns/s",
        "host/raw",
        "GPU/raw"
    )?;
    for v in &report.variants {
        if v.placement == Placement::None {
            continue;
        }
        writeln!(
            w,
            "{:<name_w$}  {:<17}  {:<12}  {:>7}  {:>9}  {:>10.1}  {:>11.1}  {:>12.1}  {:>9}  {:>9}",
            v.name,
            v.tool.name(),
            v.placement.name(),
            v.samples,
            v.timestamps_written,
            v.gpu_ns_per_sample,
            v.host_record_ns_per_sample,
            v.host_resolve_ns_per_sample,
            fmt_opt(v.host_ratio_to_raw),
            fmt_opt(v.gpu_ratio_to_raw),
        )?;
    }
    if !report.comparisons.is_empty() {
        writeln!(w)?;
        writeln!(
            w,
            "comparisons (added cost per scope, ratio taken per round: median [min, max], the median's 95% interval; targets are reported, not enforced):"
        )?;
        for c in &report.comparisons {
            writeln!(
                w,
                "  {} / {} (target ≤ {:.2}):",
                c.variant, c.against, c.target
            )?;
            writeln!(
                w,
                "    GPU  {:>10.1} / {:>10.1} ns per scope: {}",
                c.variant_gpu_ns_per_scope,
                c.against_gpu_ns_per_scope,
                fmt_spread(c.gpu_ratio)
            )?;
            writeln!(
                w,
                "    host {:>10.1} / {:>10.1} ns per scope: {}",
                c.variant_host_ns_per_scope,
                c.against_host_ns_per_scope,
                fmt_spread(c.host_ratio)
            )?;
            writeln!(
                w,
                "    ratio of the medians: GPU {}, host {}",
                fmt_opt(c.gpu_ratio_of_medians),
                fmt_opt(c.host_ratio_of_medians)
            )?;
        }
    }
    if !report.samples_alone.is_empty() {
        writeln!(w)?;
        let wgpu = match report.wgpu_samples_alone_reps {
            Some(r) => format!("; the wgpu rows with empty passes, {r} rounds"),
            None => String::new(),
        };
        writeln!(
            w,
            "samples alone (the Vulkan rows without the dispatches, {} rounds{wgpu}; added host ns per scope, ratio per round: median [min, max]):",
            report.samples_alone_reps.unwrap_or(0)
        )?;
        for c in &report.samples_alone {
            writeln!(
                w,
                "  {} / {} (target ≤ {:.2}): host {:>8.1} / {:>8.1} ns per scope: {}",
                c.variant,
                c.against,
                c.target,
                c.variant_host_ns_per_scope,
                c.against_host_ns_per_scope,
                fmt_spread(c.host_ratio)
            )?;
        }
    }
    writeln!(w)?;
    writeln!(w, "baselines (absolute medians per submission):")?;
    for v in report
        .variants
        .iter()
        .filter(|v| v.placement == Placement::None)
    {
        writeln!(
            w,
            "  {:<name_w$}  GPU {:>12.0} ns  record {:>10.0} ns",
            v.name, v.gpu_total_ns, v.record_total_ns
        )?;
    }
    let r = &report.resolve;
    writeln!(w)?;
    writeln!(
            w,
        "resolve: {} timestamps in {:.2} ms = {:.1} M samples/s (into a result reused); plain copy of the same {} bytes {:.3} ms; ratio to copy {:.3}",
        r.samples,
        r.resolve_ns / 1e6,
        r.samples_per_s / 1e6,
        r.samples as u64 * 8,
        r.copy_ns / 1e6,
        r.ratio_to_copy
    )?;
    writeln!(
        w,
        "         a new result each time (resolve_counter_range): {:.2} ms, ratio to copy {:.3}",
        r.fresh_result_ns / 1e6,
        if r.fresh_result_ns > 0.0 {
            r.copy_ns / r.fresh_result_ns
        } else {
            0.0
        }
    )?;
    // Only the Vulkan harness reads a raw query pool.
    if r.driver_read_ns > 0.0 {
        writeln!(
            w,
            "         the driver's vkGetQueryPoolResults alone, on one thread: {:.2} ms ({:.0}% of the resolve)",
            r.driver_read_ns / 1e6,
            if r.resolve_ns > 0.0 {
                100.0 * r.driver_read_ns / r.resolve_ns
            } else {
                0.0
            }
        )?;
    }
    if let Some(g) = &report.zero_intrusion_gated {
        let f = |r: &Option<RatioSpread>| fmt_percent(r.as_ref(), 3);
        writeln!(w)?;
        writeln!(
            w,
            "zero-intrusion, gated (the {} kernels queued in batches of {} behind a gate, so the GPU never waits for a launch; baseline {:.0} ns): every launch traced adds {}, launches after samples {} of GPU time (target ≤ 1%)",
            g.kernels,
            g.batch,
            g.baseline_gpu_ns,
            f(&g.every_launch),
            f(&g.launches_after_samples)
        )?;
    }
    for z in &report.zero_intrusion {
        writeln!(w)?;
        writeln!(
            w,
            "zero-intrusion ({} traced): 2 samples around {} kernels add {} of GPU time (target ≤ {:.0}%): {:.0} → {:.0} ns, {:.1} ns per kernel; CUPTI dropped {} records",
            z.tracing,
            z.kernels,
            fmt_percent(z.added_gpu_fraction.as_ref(), 2),
            100.0 * z.target,
            z.baseline_gpu_ns,
            z.variant_gpu_ns,
            z.added_gpu_ns_per_kernel,
            z.dropped_records
        )?;
        writeln!(
            w,
            "  CUPTI clock - %globaltimer: {:?} at the start, {:?} at the end (delta ns, ± ns)",
            z.activity_clock_start, z.activity_clock_end
        )?;
    }
    if let Some(c) = &report.cuda_calibration {
        writeln!(w)?;
        writeln!(
            w,
            "cuda handshake: window best {} ns, median {} ns; bound {} ns (32 reads intersected) vs {} ns (best of 8, the old method); {} of {} later reads outside their window ± bound; zero-intrusion bound {}",
            c.best_window_ns,
            c.median_window_ns,
            c.bound_ns,
            c.best_of_8_bound_ns,
            c.reads_outside,
            c.reads_checked,
            c.zero_intrusion_bound_ns.map_or_else(|| "-".into(), |b| format!("{b} ns"))
        )?;
    }
    let c = &report.calibration;
    writeln!(w)?;
    writeln!(
        w,
        "calibration ({}): max deviation min {} ns, median {} ns; error bound {} ns",
        c.method, c.min_max_deviation_ns, c.median_max_deviation_ns, c.error_bound_ns
    )?;
    writeln!(
            w,
        "  drift over {:.1} s without refit: {:.1} ns; with refit {} of {} probes outside bracket ± bound (largest bound {} ns)",
        c.drift_window_s, c.drift_ns, c.bracket_violations, c.probes, c.max_refit_bound_ns
    )?;
    if !report.notes.is_empty() {
        writeln!(w)?;
        for n in &report.notes {
            writeln!(w, "note: {n}")?;
        }
    }
    if report.validation_enabled {
        writeln!(
            w,
            "validation: {} message(s) on gpu-counters' instance",
            report.validation_messages.len()
        )?;
    }
    Ok(())
}
