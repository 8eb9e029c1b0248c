//! `gpu-counters bench`: what counter sampling costs, measured side by side
//! in one process against the raw API and the other tools: raw Vulkan
//! (ash), wgpu and wgpu-profiler for gpu-counters on Vulkan and on wgpu,
//! and raw CUDA events, `%globaltimer` kernels and CUPTI activity for
//! gpu-counters-cuda; plus the CPU resolve throughput and the quality of
//! the GPU-to-CPU clock calibration.
//!
//! The command line wires [`BenchArgs`] as `gpu-counters bench`, calls
//! [`run`] and prints the [`BenchReport`] with [`print_human`] or as JSON
//! (`serde_json::to_string_pretty`); each field of the report says what it
//! holds.
//!
//! How it measures, in short: the workload is `N` (`--samples`) tiny
//! compute dispatches (on CUDA, kernels) in one submission. Every row
//! records the same work and differs only in how it samples; each sampling
//! row runs right after a baseline of its own tool that does not sample, in
//! an order shuffled every round, and keeps the fastest of 3 runs. A
//! warm-up round is thrown away, `R` (`--reps`) rounds are measured, and
//! every number is a median over them. Comparisons ([`ComparisonReport`])
//! take each ratio round by round and judge its median against a target;
//! the samples-alone rows ([`HostComparisonReport`]) measure the host side
//! again without the workload's dispatches. Targets are reported, never
//! asserted. BENCHMARKS.md's "How we measure" gives the method in full, and
//! holds the latest results.
//!
//! Every row implements one small trait, `Variant` (its description and
//! one measured run); a backend's harness hands out its rows, and the
//! scheduling is written once over them.

#![warn(missing_docs)]

mod calibration;
mod cuda_bench;
mod harness;
mod human;
mod report;
mod resolve;
mod stats;
mod vulkan;
mod wgpu_bench;

pub use cuda_bench::{CudaCalibrationReport, GatedZeroIntrusionReport, ZeroIntrusionReport};
use gpu_counters_hal::DeviceInfo;
use gpu_counters_vulkan::{Device, Instance, InstanceOptions};
pub(crate) use harness::*;
pub use human::{print_human, write_human};
pub use report::*;
use serde::Serialize;
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;
pub use wgpu_bench::{
    check_drop_in_frames, drop_in_settings, RawWgpuQueries, TinyCompute, DROP_IN_MAX_SCOPES,
};

/// Arguments of `gpu-counters bench`.
#[derive(Debug, Clone, PartialEq, clap::Args)]
pub struct BenchArgs {
    /// Print the report as JSON instead of tables (and draw no progress bars).
    #[arg(long)]
    pub json: bool,
    /// Dispatches in the workload (N); each variant samples once or twice per
    /// dispatch. At most 524288 (2N samples fill one counter sample buffer,
    /// which holds at most 1048576).
    #[arg(long, default_value_t = 4096, value_name = "N")]
    pub samples: u32,
    /// Measured repetitions of every variant (R); medians are reported. At
    /// most 1000 (each one runs every variant and its baseline 3 times).
    #[arg(long, default_value_t = 5, value_name = "R")]
    pub reps: u32,
    /// Measured repetitions of the wgpu rows, which run as a group of
    /// their own after the Vulkan rows; R when absent. A wgpu pass costs
    /// microseconds of host time that move from round to round by about
    /// what sampling adds, so the wgpu verdicts need more rounds than the
    /// Vulkan rows' to settle (see `settled`). At most 1000.
    #[arg(long, value_name = "R")]
    pub wgpu_reps: Option<u32>,
    /// Measured repetitions of the samples-alone rows (`samples_alone`):
    /// the Vulkan rows again without the workload's dispatches, and the
    /// wgpu pass rows with empty passes, whose host cost is the samples'
    /// own. A Vulkan round takes milliseconds; a wgpu round takes longer,
    /// wgpu's own work for every empty pass. At most 1000.
    #[arg(long, default_value_t = 40, value_name = "R")]
    pub host_reps: u32,
    /// Measured repetitions of the wgpu samples-alone rows (empty passes),
    /// `--host-reps` when absent: a wgpu round costs far more than a
    /// Vulkan one, so a run can give the Vulkan rows many rounds and the
    /// wgpu rows fewer. At most 1000.
    #[arg(long, value_name = "R")]
    pub wgpu_host_reps: Option<u32>,
    /// Index of the Vulkan device (as `gpu-counters devices` lists them);
    /// the default device when absent.
    #[arg(long, value_name = "N")]
    pub device: Option<usize>,
    /// Length in seconds of the calibration drift run: a number from 0 to
    /// 86400 (one day).
    #[arg(long, default_value_t = 60.0, value_name = "S")]
    pub drift_seconds: f64,
    /// Timestamps in the CPU resolve throughput test. At most 1048576 (they
    /// fill one counter sample buffer). CUDA writes each with a kernel
    /// launch of its own, so a million take a few seconds there.
    #[arg(long, default_value_t = 1_000_000, value_name = "M")]
    pub resolve_samples: u32,
    /// What to benchmark: `vulkan` (raw ash, gpu-counters on Vulkan, wgpu,
    /// wgpu-profiler and gpu-counters-wgpu) or `cuda` (gpu-counters-cuda's
    /// placements against raw CUDA events, a raw %globaltimer kernel and raw
    /// CUPTI activity, on CUDA device 0; N kernels, at most 65536).
    #[arg(long, value_enum, default_value_t = BenchBackend::Vulkan)]
    pub backend: BenchBackend,
    /// CUDA only: each of the N kernels spins this many ns on %globaltimer
    /// (kernels of a known length); 0, the default: the 64-thread
    /// arithmetic kernel of the Vulkan rows. At most 10000000.
    #[arg(long, default_value_t = 0, value_name = "NS")]
    pub kernel_ns: u64,
}

/// The backend `gpu-counters bench` measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BenchBackend {
    /// Vulkan and wgpu.
    #[default]
    Vulkan,
    /// CUDA.
    Cuda,
}

/// Most `--samples` (kernels) of `--backend cuda`: one CUDA event per
/// sample is made up front for the raw event rows.
pub const MAX_CUDA_SAMPLES: u32 = 65_536;
/// Most `--kernel-ns`: 10 ms.
pub const MAX_KERNEL_NS: u64 = 10_000_000;

/// Most `--samples`: 2N samples must fit one counter sample buffer
/// ([`gpu_counters_vulkan::MAX_SAMPLE_COUNT`]).
pub const MAX_SAMPLES: u32 = gpu_counters_vulkan::MAX_SAMPLE_COUNT / 2;
/// Most `--reps`: every rep runs each variant and its baseline 3 times, so
/// the run's length grows with it.
pub const MAX_REPS: u32 = 1000;
/// Most `--resolve-samples`: they fill one counter sample buffer.
pub const MAX_RESOLVE_SAMPLES: u32 = gpu_counters_vulkan::MAX_SAMPLE_COUNT;
/// Most `--drift-seconds`: one day.
pub const MAX_DRIFT_SECONDS: f64 = 86_400.0;

impl BenchArgs {
    /// Checks every size against its limit (at least 1, at most `MAX_*`;
    /// `--drift-seconds` a number from 0 to [`MAX_DRIFT_SECONDS`]) without
    /// touching any device, so that [`run`] fails at once on bad input.
    ///
    /// # Errors
    ///
    /// [`BenchError::InvalidArgument`], naming the option and its limit.
    pub fn validate(&self) -> Result<(), BenchError> {
        for (flag, value, max) in [
            ("--samples", self.samples, MAX_SAMPLES),
            ("--reps", self.reps, MAX_REPS),
            ("--wgpu-reps", self.wgpu_reps.unwrap_or(self.reps), MAX_REPS),
            ("--host-reps", self.host_reps, MAX_REPS),
            (
                "--wgpu-host-reps",
                self.wgpu_host_reps.unwrap_or(self.host_reps),
                MAX_REPS,
            ),
            (
                "--resolve-samples",
                self.resolve_samples,
                MAX_RESOLVE_SAMPLES,
            ),
        ] {
            if value == 0 {
                return Err(BenchError::InvalidArgument(format!(
                    "{flag} must be at least 1"
                )));
            }
            if value > max {
                return Err(BenchError::InvalidArgument(format!(
                    "{flag} {value}: must be at most {max}"
                )));
            }
        }
        if self.backend == BenchBackend::Cuda && self.samples > MAX_CUDA_SAMPLES {
            return Err(BenchError::InvalidArgument(format!(
                "--samples {} with --backend cuda: must be at most {MAX_CUDA_SAMPLES}",
                self.samples
            )));
        }
        if self.kernel_ns > MAX_KERNEL_NS {
            return Err(BenchError::InvalidArgument(format!(
                "--kernel-ns {}: must be at most {MAX_KERNEL_NS}",
                self.kernel_ns
            )));
        }
        let s = self.drift_seconds;
        if !(s.is_finite() && (0.0..=MAX_DRIFT_SECONDS).contains(&s)) {
            // `1e300` as typed, not its 301 digits.
            let shown = if s.abs() < 1e9 {
                s.to_string()
            } else {
                format!("{s:e}")
            };
            return Err(BenchError::InvalidArgument(format!(
                "--drift-seconds {shown}: must be a number of seconds from 0 to {MAX_DRIFT_SECONDS}"
            )));
        }
        Ok(())
    }
}

impl Default for BenchArgs {
    fn default() -> Self {
        Self {
            json: false,
            samples: 4096,
            reps: 5,
            wgpu_reps: None,
            host_reps: 40,
            wgpu_host_reps: None,
            device: None,
            drift_seconds: 60.0,
            resolve_samples: 1_000_000,
            backend: BenchBackend::Vulkan,
            kernel_ns: 0,
        }
    }
}

/// What went wrong in a benchmark run.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// An argument is out of range.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// gpu-counters reported an error, or a raw Vulkan call failed (mapped
    /// with [`gpu_counters_vulkan::map_vk_error`], naming the call).
    #[error(transparent)]
    Counters(#[from] gpu_counters_hal::Error),
    /// The profiler layer reported an error.
    #[error("profiler: {0}")]
    Profiler(#[from] gpu_counters_profiler::ProfilerError),
    /// The built-in workload could not be built.
    #[error("workload: {0}")]
    Workload(#[from] gpu_counters_workloads::WorkloadError),
    /// wgpu or wgpu-profiler reported an error.
    #[error("wgpu: {0}")]
    Wgpu(String),
    /// A measurement came out inconsistent (a sample was not written, a
    /// timestamp went backwards).
    #[error("measurement: {0}")]
    Measurement(String),
    /// CUDA (the driver, a raw call, or CUPTI) reported an error.
    #[error("cuda: {0}")]
    Cuda(String),
}

/// Maps a raw Vulkan call's failure with
/// [`gpu_counters_vulkan::map_vk_error`] into [`BenchError::Counters`].
pub(crate) fn vk_err(call: &'static str) -> impl Fn(ash::vk::Result) -> BenchError {
    move |result| BenchError::Counters(gpu_counters_vulkan::map_vk_error(call, result))
}

/// Every timestamp of `resolved` in nanoseconds since its first, through
/// `calibration`, as a gpu-counters variant's resolve converts them; NaN
/// where a sample has no value (see [`check_written`]).
pub fn timestamps_ns(
    resolved: &gpu_counters_hal::ResolvedCounters,
    calibration: &gpu_counters_hal::Calibration,
) -> Result<Vec<f64>, BenchError> {
    let stamps = resolved.timestamps()?;
    let first = stamps.first().map_or(0, |s| s.timestamp);
    let ns: Vec<f64> = stamps
        .iter()
        .zip(resolved.statuses())
        .map(|(s, st)| match st {
            gpu_counters_hal::SampleStatus::Written => calibration
                .interval_ns(first, s.timestamp)
                .unwrap_or(f64::NEG_INFINITY),
            _ => f64::NAN,
        })
        .collect();
    Ok(ns)
}

/// Fails, naming `what`, when a value of [`timestamps_ns`] is missing, so
/// that no number is made up (outside the timed resolve).
pub fn check_written(ns: &[f64], what: &str) -> Result<(), BenchError> {
    let missing = ns.iter().filter(|v| v.is_nan()).count();
    if missing > 0 {
        return Err(BenchError::Measurement(format!(
            "{what}: {missing} of {} samples did not resolve to a value",
            ns.len()
        )));
    }
    Ok(())
}

/// Fails unless `frames`, what a profiler collected after one run, are one
/// frame holding a scope for each of the `n` dispatches and none dropped.
pub(crate) fn check_profiler_frames(
    frames: &[gpu_counters_profiler::FrameResult],
    n: u32,
    who: &str,
) -> Result<(), BenchError> {
    let scopes: usize = frames.iter().map(|f| f.scopes.len()).sum();
    let dropped: u32 = frames.iter().map(|f| f.dropped_scopes).sum();
    if frames.len() != 1 || scopes != n as usize || dropped != 0 {
        return Err(BenchError::Measurement(format!(
            "{who} returned {} frame(s) with {scopes} scopes ({dropped} dropped) for {n} dispatches",
            frames.len()
        )));
    }
    Ok(())
}

/// Runs the benchmark on a new instance with default options
/// (`GPU_COUNTERS_VALIDATION=1` turns validation on).
pub fn run(args: &BenchArgs) -> Result<BenchReport, BenchError> {
    run_with_options(args, &InstanceOptions::default())
}

/// Runs the benchmark on a new instance made with `options`.
pub fn run_with_options(
    args: &BenchArgs,
    options: &InstanceOptions,
) -> Result<BenchReport, BenchError> {
    args.validate()?;
    if args.backend == BenchBackend::Cuda {
        return run_cuda(args);
    }
    let instance = Instance::new(options)?;
    let index = match args.device {
        Some(i) => i,
        None => instance.default_device_index()?,
    };
    let device = Device::open(&instance, index)?;
    let info = device.info().clone();
    let limit = info.max_sample_count as u64;
    for (what, needed) in [
        (
            "--samples (2 samples per dispatch)",
            2 * args.samples as u64,
        ),
        ("--resolve-samples", args.resolve_samples as u64),
    ] {
        if needed > limit {
            return Err(BenchError::InvalidArgument(format!(
                "{what} needs {needed} samples in one buffer; the device allows {limit}"
            )));
        }
    }
    let progress = Progress::new(!args.json);
    let mut notes = Vec::new();

    let mut variants: Variants = vulkan::variants(&device, args.samples, true)?;
    let mut wanted = vulkan::comparisons();
    // The wgpu rows are a group of their own, with their own rounds: every
    // comparison is within one group.
    let mut wgpu_variants: Variants = Vec::new();
    // The wgpu samples-alone rows (empty passes) where wgpu's rows run.
    let mut wgpu_alone: Variants = Vec::new();
    match wgpu_bench::variants(&info, args.samples, true) {
        Ok(rows) => {
            wgpu_variants = rows.variants;
            notes.extend(rows.notes);
            wanted.extend(rows.comparisons);
            match wgpu_bench::variants(&info, args.samples, false) {
                Ok(rows) => wgpu_alone = rows.variants,
                Err(e) => notes.push(format!("wgpu samples-alone rows skipped: {e}")),
            }
        }
        Err(e) => notes.push(format!("wgpu variants skipped: {e}")),
    }
    let wgpu_reps = args.wgpu_reps.unwrap_or(args.reps);
    let wgpu_host_reps = args.wgpu_host_reps.unwrap_or(args.host_reps);
    let runs = |v: &Variants, reps: u32| {
        (reps as usize + 1) * v.iter().filter(|v| v.baseline().is_some()).count()
    };
    let mut alone: Variants = vulkan::variants(&device, args.samples, false)?;
    let bar = progress.bar(
        (runs(&variants, args.reps)
            + runs(&wgpu_variants, wgpu_reps)
            + runs(&alone, args.host_reps)
            + runs(&wgpu_alone, wgpu_host_reps)) as u64,
        "variants",
    );
    let mut measured = schedule(&mut variants, args.reps, &bar)?;
    let wgpu_ran = !wgpu_variants.is_empty();
    measured.extend(schedule(&mut wgpu_variants, wgpu_reps, &bar)?);
    variants.extend(wgpu_variants);
    // The samples-alone rows last, a group of their own: the Vulkan rows'
    // comparisons again, host side only.
    let alone_measured = schedule(&mut alone, args.host_reps, &bar)?;
    let wgpu_alone_measured = schedule(&mut wgpu_alone, wgpu_host_reps, &bar)?;
    let wgpu_alone_ran = !wgpu_alone.is_empty();
    bar.finish_and_clear();
    let specs: Vec<&VariantSpec> = variants.iter().map(|v| v.spec()).collect();
    let variants_report = summarize(&specs, &measured);
    let comparisons = compare(&specs, &measured, &wanted, args.samples);
    let alone_specs: Vec<&VariantSpec> = alone.iter().map(|v| v.spec()).collect();
    let wgpu_alone_specs: Vec<&VariantSpec> = wgpu_alone.iter().map(|v| v.spec()).collect();
    let samples_alone = compare(
        &alone_specs,
        &alone_measured,
        &vulkan::comparisons(),
        args.samples,
    )
    .into_iter()
    .chain(compare(
        &wgpu_alone_specs,
        &wgpu_alone_measured,
        &wgpu_bench::comparisons(),
        args.samples,
    ))
    .map(HostComparisonReport::from)
    .collect();
    // The harnesses (wgpu's instance, the Vulkan objects) go with their
    // last variant; the Vulkan harness waits for the device first.
    drop(specs);
    drop(variants);
    drop(alone_specs);
    drop(alone);
    drop(wgpu_alone_specs);
    drop(wgpu_alone);

    let spinner = progress.spinner("resolve throughput");
    let resolve = resolve::measure(&device, args.resolve_samples, args.reps)?;
    spinner.finish_and_clear();

    let calibration = calibration::measure(&device, args.drift_seconds, &progress)?;
    if calibration.method == "bracketing" {
        notes.push(
            "the device has no calibrated timestamps: the deviation burst uses bracketed reads"
                .into(),
        );
    }
    device.wait_idle()?;
    Ok(BenchReport {
        device: info,
        samples: args.samples,
        reps: args.reps,
        wgpu_reps: wgpu_ran.then_some(wgpu_reps),
        variants: variants_report,
        comparisons,
        samples_alone_reps: Some(args.host_reps),
        wgpu_samples_alone_reps: wgpu_alone_ran.then_some(wgpu_host_reps),
        samples_alone,
        resolve,
        calibration,
        zero_intrusion: Vec::new(),
        zero_intrusion_gated: None,
        cuda_calibration: None,
        workload: format!(
            "{} tiny compute dispatches serialized by barriers in one submission",
            args.samples
        ),
        notes,
        validation_messages: instance.validation_messages(),
        validation_enabled: instance.validation_enabled(),
    })
}

/// `--backend cuda`: the CUDA rows, then resolve throughput and calibration
/// on the same devices.
fn run_cuda(args: &BenchArgs) -> Result<BenchReport, BenchError> {
    let n = args.samples;
    let progress = Progress::new(!args.json);
    let (rows, bench) = cuda_bench::variants(n, args.kernel_ns)?;
    let mut notes = rows.notes;
    notes.push("CUPTI's launch callbacks are subscribed in every row, the baseline included; the raw CUPTI row enables CONCURRENT_KERNEL around its kernels and flushes (gpu-counters-cuda owns the process's activity buffers, so their parsing is shared)".into());
    let clock_start = bench.borrow().zero_clock().0;
    let mut variants = rows.variants;
    let bar = progress.bar(
        ((args.reps as usize + 1) * variants.iter().filter(|v| v.baseline().is_some()).count())
            as u64,
        "variants",
    );
    let measured = schedule(&mut variants, args.reps, &bar)?;
    bar.finish_and_clear();
    let specs: Vec<&VariantSpec> = variants.iter().map(|v| v.spec()).collect();
    let variants_report = summarize(&specs, &measured);
    let comparisons = compare(&specs, &measured, &rows.comparisons, n);
    let zero_intrusion = specs
        .iter()
        .enumerate()
        .filter(|(_, s)| s.placement == Placement::Range)
        .map(|(i, spec)| {
            let pairs = &measured[i];
            let fractions: Vec<f64> = pairs
                .iter()
                .filter(|p| p.base.gpu_ns > 0.0)
                .map(|p| (p.variant.gpu_ns - p.base.gpu_ns) / p.base.gpu_ns)
                .collect();
            let spread = RatioSpread::of(&fractions, 0.01);
            let b = bench.borrow();
            let (clock_end, dropped) = b.zero_clock();
            ZeroIntrusionReport {
                variant: spec.name.clone(),
                tracing: if spec.name.contains("launches after samples") {
                    "launches after samples"
                } else {
                    "every launch"
                },
                kernels: n,
                kernel_ns: b.kernel_ns(),
                added_gpu_fraction: spread,
                target: 0.01,
                baseline_gpu_ns: stats::median(pairs.iter().map(|p| p.base.gpu_ns)),
                variant_gpu_ns: stats::median(pairs.iter().map(|p| p.variant.gpu_ns)),
                added_gpu_ns_per_kernel: stats::median(
                    pairs
                        .iter()
                        .map(|p| (p.variant.gpu_ns - p.base.gpu_ns) / f64::from(n.max(1))),
                ),
                activity_clock_start: clock_start,
                activity_clock_end: clock_end,
                dropped_records: dropped,
            }
        })
        .collect();
    drop(specs);
    drop(variants);
    let b = bench.borrow();
    let spinner = progress.spinner("resolve throughput");
    let resolve = cuda_bench::resolve(
        &b,
        // One kernel launch each: a million take a few seconds.
        args.resolve_samples,
        args.reps,
    )?;
    spinner.finish_and_clear();
    let spinner = progress.spinner("gated zero-intrusion");
    let zero_intrusion_gated = cuda_bench::gated_zero_intrusion(&b, args.reps)?;
    spinner.finish_and_clear();
    let spinner = progress.spinner("calibration");
    let (calibration, cuda_calibration) = cuda_bench::calibration(&b, args.drift_seconds)?;
    spinner.finish_and_clear();
    if !b.has_zero() {
        notes.push(
            "no zero-intrusion device: its rows and the zero-intrusion figure are missing".into(),
        );
    }
    let workload = if args.kernel_ns > 0 {
        format!(
            "{n} kernels of one thread spinning {} ns on %globaltimer, back to back on one stream",
            args.kernel_ns
        )
    } else {
        format!("{n} kernels of 64 threads x 16 integer steps, back to back on one stream (cuLaunchKernel)")
    };
    Ok(BenchReport {
        device: b.info(),
        samples: n,
        reps: args.reps,
        wgpu_reps: None,
        variants: variants_report,
        comparisons,
        samples_alone_reps: None,
        wgpu_samples_alone_reps: None,
        samples_alone: Vec::new(),
        resolve,
        calibration,
        zero_intrusion,
        zero_intrusion_gated,
        cuda_calibration: Some(cuda_calibration),
        workload,
        notes,
        validation_messages: Vec::new(),
        validation_enabled: false,
    })
}

#[cfg(test)]
mod tests;
