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
mod resolve;
mod stats;
mod vulkan;
mod wgpu_bench;

pub use cuda_bench::{CudaCalibrationReport, GatedZeroIntrusionReport, ZeroIntrusionReport};
use gpu_counters_hal::DeviceInfo;
use gpu_counters_vulkan::{Device, Instance, InstanceOptions};
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

/// The tool a variant samples with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum Tool {
    /// Plain ash calls.
    #[serde(rename = "raw-ash")]
    RawAsh,
    /// gpu-counters' Vulkan backend.
    #[serde(rename = "gpu-counters")]
    GpuCounters,
    /// wgpu 30.
    #[serde(rename = "wgpu")]
    Wgpu,
    /// wgpu-profiler 0.28 on wgpu 30.
    #[serde(rename = "wgpu-profiler")]
    WgpuProfiler,
    /// gpu-counters' wgpu backend (`gpu-counters-wgpu`) on wgpu 30.
    #[serde(rename = "gpu-counters-wgpu")]
    GpuCountersWgpu,
    /// Plain CUDA driver and CUPTI calls: `%globaltimer` kernels, CUPTI
    /// activity records.
    #[serde(rename = "raw-cuda")]
    RawCuda,
    /// Plain CUDA events (`cuEventRecord`, `cuEventElapsedTime`).
    #[serde(rename = "cuda-events")]
    CudaEvents,
    /// gpu-counters' CUDA backend (`gpu-counters-cuda`).
    #[serde(rename = "gpu-counters-cuda")]
    GpuCountersCuda,
}

impl Tool {
    /// The name used in the report.
    pub fn name(self) -> &'static str {
        match self {
            Tool::RawAsh => "raw-ash",
            Tool::GpuCounters => "gpu-counters",
            Tool::Wgpu => "wgpu",
            Tool::WgpuProfiler => "wgpu-profiler",
            Tool::GpuCountersWgpu => "gpu-counters-wgpu",
            Tool::RawCuda => "raw-cuda",
            Tool::CudaEvents => "cuda-events",
            Tool::GpuCountersCuda => "gpu-counters-cuda",
        }
    }
}

/// Where a variant's timestamps are taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Placement {
    /// No sampling: a baseline.
    None,
    /// After all prior work (`ALL_COMMANDS`, Metal's barrier / precise).
    Precise,
    /// When the GPU reaches the command (`TOP_OF_PIPE`), or coalesced (relaxed).
    Relaxed,
    /// Start and end of each dispatch's pass or scope: 2 samples per dispatch.
    Pass,
    /// Start and end of each dispatch's scope, both after all prior work
    /// (`ALL_COMMANDS`): the profiler's scopes, 2 samples per dispatch.
    #[serde(rename = "precise-pass")]
    PrecisePass,
    /// Start and end of each kernel from CUPTI activity records, nothing
    /// launched: 2 samples per kernel.
    Activity,
    /// Two zero-intrusion samples around the whole stream of kernels.
    Range,
}

impl Placement {
    /// The name used in the report.
    pub fn name(self) -> &'static str {
        match self {
            Placement::None => "none",
            Placement::Precise => "precise",
            Placement::Relaxed => "relaxed",
            Placement::Pass => "pass",
            Placement::PrecisePass => "precise-pass",
            Placement::Activity => "activity",
            Placement::Range => "range",
        }
    }
}

/// One variant's results. Per-sample numbers are overheads against the
/// variant's baseline; BENCHMARKS.md's "How we measure" says how each is
/// taken.
#[derive(Debug, Clone, Serialize)]
pub struct VariantReport {
    /// What the variant does.
    pub name: String,
    /// The tool it samples with.
    pub tool: Tool,
    /// Where it samples.
    pub placement: Placement,
    /// Added GPU nanoseconds per sample.
    pub gpu_ns_per_sample: f64,
    /// Added CPU nanoseconds per sample spent recording.
    pub host_record_ns_per_sample: f64,
    /// CPU nanoseconds per sample to read back and convert to nanoseconds.
    pub host_resolve_ns_per_sample: f64,
    /// gpu-counters only: host (record + resolve) ns per sample over raw ash's
    /// at the same placement.
    pub host_ratio_to_raw: Option<f64>,
    /// gpu-counters only: GPU ns per sample over raw ash's at the same
    /// placement.
    pub gpu_ratio_to_raw: Option<f64>,
    /// The measured rounds the medians are taken over (`--reps`, or
    /// `--wgpu-reps` for the wgpu rows).
    pub rounds: u32,
    /// Samples the variant takes (0 for a baseline).
    #[serde(skip)]
    pub samples: u64,
    /// Timestamps really written on the GPU (fewer than `samples` where
    /// relaxed writes are coalesced).
    #[serde(skip)]
    pub timestamps_written: u64,
    /// Median GPU nanoseconds of the whole submission.
    #[serde(skip)]
    pub gpu_total_ns: f64,
    /// Median CPU nanoseconds of the recording calls.
    #[serde(skip)]
    pub record_total_ns: f64,
    /// Median CPU nanoseconds of the resolve.
    #[serde(skip)]
    pub resolve_total_ns: f64,
    /// The baseline subtracted.
    #[serde(skip)]
    pub baseline: Option<String>,
}

/// A ratio taken in every measured round, and its spread over the rounds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RatioSpread {
    /// The median over the rounds.
    pub median: f64,
    /// The smallest round's.
    pub min: f64,
    /// The largest round's.
    pub max: f64,
    /// Rounds with a ratio (those where the denominator was above 0).
    pub rounds: u32,
    /// The lower end of a 95% confidence interval of the median
    /// (distribution-free: an order statistic of the rounds); `None` with
    /// fewer than 6 rounds.
    pub median_low: Option<f64>,
    /// Its upper end.
    pub median_high: Option<f64>,
    /// Whether the median is at most the comparison's target.
    pub within_target: bool,
    /// Whether the median's confidence interval lies on one side of the
    /// target: false when the rounds cannot tell where the median is
    /// against it (or are fewer than 6), so `within_target` is no verdict
    /// (more rounds, `--reps` or `--host-reps`, may settle it).
    pub settled: bool,
}

impl RatioSpread {
    /// The median, extremes and median interval of `values` (one per
    /// round), judged against `target`; `None` without values.
    pub(crate) fn of(values: &[f64], target: f64) -> Option<Self> {
        let min = values.iter().copied().reduce(f64::min)?;
        let max = values.iter().copied().reduce(f64::max)?;
        let median = stats::median(values.iter().copied());
        let interval = stats::median_interval(values);
        Some(Self {
            median,
            min,
            max,
            rounds: values.len() as u32,
            median_low: interval.map(|i| i.0),
            median_high: interval.map(|i| i.1),
            within_target: median <= target,
            settled: interval.is_some_and(|(low, high)| high <= target || low > target),
        })
    }

    /// The verdict in words: "within" or "over" the target, and whether
    /// the rounds settle it.
    fn verdict(&self) -> &'static str {
        match (self.within_target, self.settled) {
            (true, true) => "within",
            (false, true) => "over",
            (true, false) => "within, unsettled",
            (false, false) => "over, unsettled",
        }
    }
}

/// One tool's added cost per scope against another's, in the same run: per
/// measured round, each side's overhead over its own baseline (taken right
/// before it), then their ratio; the median and spread over the rounds.
/// Reported, never asserted: the targets are the issue's.
#[derive(Debug, Clone, Serialize)]
pub struct ComparisonReport {
    /// The variant measured (the numerator).
    pub variant: String,
    /// The variant it is compared with (the denominator).
    pub against: String,
    /// The most each ratio should be.
    pub target: f64,
    /// Added GPU ns per scope over `against`'s.
    pub gpu_ratio: Option<RatioSpread>,
    /// Added host ns per scope (record overhead plus resolve, as
    /// `host_ratio_to_raw`) over `against`'s.
    pub host_ratio: Option<RatioSpread>,
    /// Median added GPU ns per scope (per dispatch) of `variant`.
    pub variant_gpu_ns_per_scope: f64,
    /// Median added GPU ns per scope of `against`.
    pub against_gpu_ns_per_scope: f64,
    /// Median added host ns per scope of `variant`.
    pub variant_host_ns_per_scope: f64,
    /// Median added host ns per scope of `against`.
    pub against_host_ns_per_scope: f64,
    /// `variant_gpu_ns_per_scope / against_gpu_ns_per_scope`: the ratio
    /// of the medians, steadier than a round's ratio where each side's
    /// overhead is small beside its baseline's noise (the wgpu rows on the
    /// H200); `None` where the denominator is not above 0.
    pub gpu_ratio_of_medians: Option<f64>,
    /// `variant_host_ns_per_scope / against_host_ns_per_scope`, likewise.
    pub host_ratio_of_medians: Option<f64>,
}

/// The host side of a [`ComparisonReport`] from the samples-alone rows:
/// both rows recorded without the workload's dispatches and barriers, so
/// each side's host cost over its baseline is its samples' own, not a small
/// difference between two recordings many times its size.
#[derive(Debug, Clone, Serialize)]
pub struct HostComparisonReport {
    /// The variant measured (the numerator), as the Vulkan rows name it.
    pub variant: String,
    /// The raw ash row it is compared with (the denominator).
    pub against: String,
    /// The most the ratio should be.
    pub target: f64,
    /// Added host ns per scope (record over its baseline, plus resolve)
    /// over `against`'s, per round.
    pub host_ratio: Option<RatioSpread>,
    /// Median added host ns per scope of `variant`.
    pub variant_host_ns_per_scope: f64,
    /// Median added host ns per scope of `against`.
    pub against_host_ns_per_scope: f64,
    /// `variant_host_ns_per_scope / against_host_ns_per_scope`.
    pub host_ratio_of_medians: Option<f64>,
}

impl From<ComparisonReport> for HostComparisonReport {
    fn from(c: ComparisonReport) -> Self {
        Self {
            variant: c.variant,
            against: c.against,
            target: c.target,
            host_ratio: c.host_ratio,
            variant_host_ns_per_scope: c.variant_host_ns_per_scope,
            against_host_ns_per_scope: c.against_host_ns_per_scope,
            host_ratio_of_medians: c.host_ratio_of_medians,
        }
    }
}

/// CPU resolve throughput of a large counter sample buffer.
#[derive(Debug, Clone, Serialize)]
pub struct ResolveReport {
    /// Timestamps resolved.
    pub samples: u32,
    /// gpu-counters' `resolve_counter_range` throughput.
    pub samples_per_s: f64,
    /// That throughput over a plain memory copy's of the same bytes: the
    /// median over the repetitions of each one's ratio (the two timed side
    /// by side).
    pub ratio_to_copy: f64,
    /// Median nanoseconds of one full resolve.
    pub resolve_ns: f64,
    /// Median nanoseconds of the plain copy.
    pub copy_ns: f64,
    /// Median nanoseconds of `vkGetQueryPoolResults` (with availability) of
    /// the same number of timestamps from a raw query pool: the driver's share.
    #[serde(skip)]
    pub driver_read_ns: f64,
    /// Median nanoseconds of `resolve_counter_range`, a new result each
    /// time (its allocation and page faults included).
    pub fresh_result_ns: f64,
}

/// How well GPU timestamps map onto the CPU clock.
#[derive(Debug, Clone, Serialize)]
pub struct CalibrationReport {
    /// Smallest max deviation the driver reported over the burst.
    pub min_max_deviation_ns: u64,
    /// Median max deviation over the burst.
    pub median_max_deviation_ns: u64,
    /// `Calibration::error_bound_ns` of a fresh calibration.
    pub error_bound_ns: u64,
    /// Growth of the conversion error over the window without refitting.
    pub drift_ns: f64,
    /// Length of the drift run in seconds.
    pub drift_window_s: f64,
    /// Converted times outside their CPU bracket ± bound, with refitting.
    pub bracket_violations: u64,
    /// How the device calibrates.
    #[serde(skip)]
    pub method: String,
    /// Bracketed probes taken in the drift run.
    #[serde(skip)]
    pub probes: u64,
    /// Largest error bound the refitted calibration reported for a probe.
    #[serde(skip)]
    pub max_refit_bound_ns: u64,
}

/// Everything one benchmark run measured. Its JSON form is what
/// `gpu-counters bench --json` prints; the fields marked `serde(skip)` are
/// for [`print_human`] and tests only.
#[derive(Debug, Clone, Serialize)]
pub struct BenchReport {
    /// The device benchmarked.
    pub device: DeviceInfo,
    /// Dispatches per submission (N).
    pub samples: u32,
    /// Measured repetitions (R).
    pub reps: u32,
    /// Measured repetitions of the wgpu rows, where they ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wgpu_reps: Option<u32>,
    /// Every variant, baselines included.
    pub variants: Vec<VariantReport>,
    /// Derived comparisons between variants (gpu-counters against raw ash
    /// per round, gpu-counters-wgpu against wgpu-profiler and raw wgpu);
    /// those whose rows did not run are left out.
    pub comparisons: Vec<ComparisonReport>,
    /// The samples-alone rounds (`--host-reps`), where they ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub samples_alone_reps: Option<u32>,
    /// The wgpu samples-alone rounds (`--wgpu-host-reps`), where those rows
    /// ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wgpu_samples_alone_reps: Option<u32>,
    /// The host side of the Vulkan comparisons again, from the rows
    /// recorded without the workload's dispatches (`--host-reps` rounds):
    /// each gpu-counters row's samples against raw ash's, per round; then,
    /// where the wgpu rows ran, the wgpu comparisons from empty passes.
    /// Empty for CUDA.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub samples_alone: Vec<HostComparisonReport>,
    /// CPU resolve throughput.
    pub resolve: ResolveReport,
    /// Calibration quality.
    pub calibration: CalibrationReport,
    /// CUDA only: the zero-intrusion stream figures, one per tracing mode
    /// (every launch traced; only the launches after samples).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub zero_intrusion: Vec<ZeroIntrusionReport>,
    /// CUDA only: the same figure with the host's launches taken out
    /// (gated batches).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zero_intrusion_gated: Option<GatedZeroIntrusionReport>,
    /// CUDA only: handshake windows and the bound's check.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cuda_calibration: Option<CudaCalibrationReport>,
    /// The workload, in words.
    #[serde(skip)]
    pub workload: String,
    /// Remarks on how this run measured (fallbacks, skipped variants).
    #[serde(skip)]
    pub notes: Vec<String>,
    /// Validation-layer messages captured on gpu-counters' instance (empty
    /// unless validation was on).
    #[serde(skip)]
    pub validation_messages: Vec<String>,
    /// Whether gpu-counters' instance ran with the validation layer.
    #[serde(skip)]
    pub validation_enabled: bool,
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

/// One row of the benchmark: a way of recording the workload, sampling or
/// not (a baseline), on some backend.
///
/// A backend's harness (raw ash and gpu-counters on a gpu-counters
/// [`Device`], wgpu and wgpu-profiler on wgpu's instance; CUDA later) hands
/// out one implementor per row, sharing its objects between them. The
/// scheduling ([`schedule`]: a warm-up round thrown away, rounds shuffled,
/// each variant right after its own baseline, best of [`TRIALS`]) and the
/// medians ([`summarize`]) are written once, over `dyn Variant`.
pub(crate) trait Variant {
    /// What the report says of the variant: its name, tool, placement,
    /// sample counts and baseline.
    fn spec(&self) -> &VariantSpec;

    /// Records the workload with this variant's sampling, submits it, waits
    /// for it and resolves its samples: one measurement. Fails when a
    /// sample is missing, so that no number is made up.
    fn run(&mut self) -> Result<Measurement, BenchError>;

    /// The variant's name, unique in a run.
    fn name(&self) -> &str {
        &self.spec().name
    }

    /// The name of the baseline to subtract; `None` for a baseline.
    fn baseline(&self) -> Option<&str> {
        self.spec().baseline.as_deref()
    }
}

/// A backend's rows, in the report's order.
pub(crate) type Variants = Vec<Box<dyn Variant>>;

/// A backend's harness, shared by its rows: runs one kind of row at a time.
pub(crate) trait Harness {
    /// Which row to run.
    type Kind: Copy;

    /// One measurement of the row `kind`.
    fn run(&mut self, kind: Self::Kind) -> Result<Measurement, BenchError>;

    /// The error for a row started while another runs on the harness.
    fn busy() -> BenchError;
}

/// One row: a kind of row on the harness it shares with the backend's
/// other rows.
pub(crate) struct HarnessRow<H: Harness> {
    pub(crate) bench: Rc<RefCell<H>>,
    pub(crate) kind: H::Kind,
    pub(crate) spec: VariantSpec,
}

impl<H: Harness> Variant for HarnessRow<H> {
    fn spec(&self) -> &VariantSpec {
        &self.spec
    }

    fn run(&mut self) -> Result<Measurement, BenchError> {
        self.bench
            .try_borrow_mut()
            .map_err(|_| H::busy())?
            .run(self.kind)
    }
}

/// What a backend's harness hands out: its rows, notes on how they measure,
/// and the comparisons to derive between them.
pub(crate) struct Rows {
    pub variants: Variants,
    pub notes: Vec<String>,
    pub comparisons: Vec<ComparisonSpec>,
}

/// A comparison to derive ([`ComparisonReport`]): `variant`'s added cost
/// per scope over `against`'s, both sampling variants of the run.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ComparisonSpec {
    pub variant: &'static str,
    pub against: &'static str,
    pub target: f64,
}

/// A variant as the report describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct VariantSpec {
    /// Unique in a run; baselines are referred to by it.
    pub name: String,
    pub tool: Tool,
    pub placement: Placement,
    /// Samples taken per submission.
    pub samples: u64,
    /// Timestamps the GPU really writes per submission.
    pub timestamps_written: u64,
    /// Name of the baseline to subtract (`None` for a baseline).
    pub baseline: Option<String>,
}

/// Runs of a variant back to back in one repetition; each number keeps its
/// smallest value (the least disturbed run).
const TRIALS: usize = 3;

/// One submission's measurement, in nanoseconds.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Measurement {
    pub gpu_ns: f64,
    pub record_ns: f64,
    pub resolve_ns: f64,
}

impl Measurement {
    /// The smaller of each number.
    fn min(self, other: Self) -> Self {
        Self {
            gpu_ns: self.gpu_ns.min(other.gpu_ns),
            record_ns: self.record_ns.min(other.record_ns),
            resolve_ns: self.resolve_ns.min(other.resolve_ns),
        }
    }
}

/// A variant's measurement and that of its baseline, taken right before it.
#[derive(Debug, Clone, Copy)]
struct Paired {
    variant: Measurement,
    base: Measurement,
}

/// Runs a warm-up round (thrown away) and `reps` measured rounds over
/// `variants`. A round runs every sampling variant (one with a baseline)
/// once, in an order shuffled anew per round, each right after its own
/// baseline; in a measured round each of the two runs [`TRIALS`] times and
/// keeps the smallest of every number. Returns, per variant, the measured
/// pairs: a sampling variant's with the baseline run just before it, a
/// baseline's own runs paired with themselves (one per variant that uses
/// it, per round).
fn schedule(
    variants: &mut [Box<dyn Variant>],
    reps: u32,
    bar: &indicatif::ProgressBar,
) -> Result<Vec<Vec<Paired>>, BenchError> {
    let rounds = reps as usize + 1;
    let sampling: Vec<usize> = (0..variants.len())
        .filter(|&i| variants[i].baseline().is_some())
        .collect();
    let mut measured: Vec<Vec<Paired>> = vec![Vec::new(); variants.len()];
    for round in 0..rounds {
        for &i in &shuffled(&sampling, round as u64) {
            let baseline = variants[i].baseline().unwrap_or_default();
            let b = variants
                .iter()
                .position(|v| v.name() == baseline && v.baseline().is_none())
                .ok_or_else(|| {
                    BenchError::Measurement(format!("no baseline for `{}`", variants[i].name()))
                })?;
            bar.set_message(variants[i].name().to_string());
            let trials = if round == 0 { 1 } else { TRIALS };
            let run = |v: &mut dyn Variant| -> Result<Measurement, BenchError> {
                let mut best: Option<Measurement> = None;
                for _ in 0..trials {
                    let m = v.run()?;
                    best = Some(best.map_or(m, |x| x.min(m)));
                }
                best.ok_or_else(|| BenchError::Measurement("no trial ran".into()))
            };
            let base = run(variants[b].as_mut())?;
            let variant = run(variants[i].as_mut())?;
            if round > 0 {
                measured[i].push(Paired { variant, base });
                measured[b].push(Paired {
                    variant: base,
                    base,
                });
            }
            bar.inc(1);
        }
    }
    Ok(measured)
}

/// `items` in an order of its own for each round (a fixed pseudo-random
/// permutation), so that no variant always follows the same one.
fn shuffled(items: &[usize], round: u64) -> Vec<usize> {
    let mut v = items.to_vec();
    let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ round.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    for i in (1..v.len()).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.swap(i, (x % (i as u64 + 1)) as usize);
    }
    v
}

/// A pair's added cost of `f` over its baseline, divided by `per`.
fn overhead(p: &Paired, f: fn(&Measurement) -> f64, per: f64) -> f64 {
    (f(&p.variant) - f(&p.base)) / per
}

/// A pair's added host cost (record overhead plus the resolve, as
/// `host_ratio_to_raw` counts it), divided by `per`; at least 0.
fn host_overhead(p: &Paired, per: f64) -> f64 {
    (overhead(p, |m| m.record_ns, per) + p.variant.resolve_ns / per).max(0.0)
}

fn summarize(specs: &[&VariantSpec], measured: &[Vec<Paired>]) -> Vec<VariantReport> {
    let mut out: Vec<VariantReport> = specs
        .iter()
        .zip(measured)
        .map(|(spec, pairs)| {
            let samples = spec.samples.max(1) as f64;
            // Per-pair differences, then the median: a slow drift of the
            // machine moves a variant and its baseline together.
            let per = |f: fn(&Measurement) -> f64| {
                if spec.samples == 0 {
                    0.0
                } else {
                    stats::median(pairs.iter().map(|p| overhead(p, f, samples))).max(0.0)
                }
            };
            let total =
                |f: fn(&Measurement) -> f64| stats::median(pairs.iter().map(|p| f(&p.variant)));
            VariantReport {
                name: spec.name.clone(),
                tool: spec.tool,
                placement: spec.placement,
                gpu_ns_per_sample: per(|m| m.gpu_ns),
                host_record_ns_per_sample: per(|m| m.record_ns),
                host_resolve_ns_per_sample: if spec.samples == 0 {
                    0.0
                } else {
                    total(|m| m.resolve_ns) / samples
                },
                host_ratio_to_raw: None,
                gpu_ratio_to_raw: None,
                // A baseline has a pair per variant that uses it, per round.
                rounds: if spec.baseline.is_some() {
                    pairs.len() as u32
                } else {
                    let users = specs
                        .iter()
                        .filter(|s| s.baseline.as_deref() == Some(spec.name.as_str()))
                        .count()
                        .max(1);
                    (pairs.len() / users) as u32
                },
                samples: spec.samples,
                timestamps_written: spec.timestamps_written,
                gpu_total_ns: total(|m| m.gpu_ns),
                record_total_ns: total(|m| m.record_ns),
                resolve_total_ns: total(|m| m.resolve_ns),
                baseline: spec.baseline.clone(),
            }
        })
        .collect();
    // Each gpu-counters tool against its raw tool at the same placement.
    let raw_of = |t: Tool| match t {
        Tool::GpuCounters => Some(Tool::RawAsh),
        Tool::GpuCountersCuda => Some(Tool::RawCuda),
        _ => None,
    };
    let raw: Vec<VariantReport> = out
        .iter()
        .filter(|v| {
            matches!(v.tool, Tool::RawAsh | Tool::RawCuda) && v.placement != Placement::None
        })
        .cloned()
        .collect();
    for v in out
        .iter_mut()
        .filter(|v| raw_of(v.tool).is_some() && v.placement != Placement::None)
    {
        let want = raw_of(v.tool);
        if let Some(r) = raw
            .iter()
            .find(|r| Some(r.tool) == want && r.placement == v.placement)
        {
            let ratio = |a: f64, b: f64| (b > 0.0 && a.is_finite()).then(|| a / b);
            v.host_ratio_to_raw = ratio(
                v.host_record_ns_per_sample + v.host_resolve_ns_per_sample,
                r.host_record_ns_per_sample + r.host_resolve_ns_per_sample,
            );
            v.gpu_ratio_to_raw = ratio(v.gpu_ns_per_sample, r.gpu_ns_per_sample);
        }
    }
    out
}

/// The `wanted` comparisons between sampling variants of `specs` (of
/// `dispatches` scopes each), from their pairs in `measured`: a sampling
/// variant has one pair per measured round, in round order, so round `r`'s
/// ratio divides pair `r` of one by pair `r` of the other. A comparison
/// whose variants did not both run is left out.
fn compare(
    specs: &[&VariantSpec],
    measured: &[Vec<Paired>],
    wanted: &[ComparisonSpec],
    dispatches: u32,
) -> Vec<ComparisonReport> {
    let per = f64::from(dispatches.max(1));
    let find = |name: &str| {
        specs
            .iter()
            .position(|s| s.name == name && s.baseline.is_some())
            .map(|i| &measured[i])
    };
    let spread = |a: &[f64], b: &[f64], target: f64| {
        let ratios: Vec<f64> = a
            .iter()
            .zip(b)
            .filter(|&(x, y)| *y > 0.0 && x.is_finite())
            .map(|(x, y)| x.max(0.0) / y)
            .collect();
        RatioSpread::of(&ratios, target)
    };
    wanted
        .iter()
        .filter_map(|c| {
            let (a, b) = (find(c.variant)?, find(c.against)?);
            let gpu = |pairs: &[Paired]| -> Vec<f64> {
                pairs
                    .iter()
                    .map(|p| overhead(p, |m| m.gpu_ns, per))
                    .collect()
            };
            let host = |pairs: &[Paired]| -> Vec<f64> {
                pairs.iter().map(|p| host_overhead(p, per)).collect()
            };
            let (a_gpu, b_gpu, a_host, b_host) = (gpu(a), gpu(b), host(a), host(b));
            let median = |v: &[f64]| stats::median(v.iter().copied()).max(0.0);
            let of_medians = |a: &[f64], b: &[f64]| {
                let d = median(b);
                (d > 0.0).then(|| median(a) / d)
            };
            Some(ComparisonReport {
                variant: c.variant.into(),
                against: c.against.into(),
                target: c.target,
                gpu_ratio: spread(&a_gpu, &b_gpu, c.target),
                host_ratio: spread(&a_host, &b_host, c.target),
                variant_gpu_ns_per_scope: median(&a_gpu),
                against_gpu_ns_per_scope: median(&b_gpu),
                variant_host_ns_per_scope: median(&a_host),
                against_host_ns_per_scope: median(&b_host),
                gpu_ratio_of_medians: of_medians(&a_gpu, &b_gpu),
                host_ratio_of_medians: of_medians(&a_host, &b_host),
            })
        })
        .collect()
}

/// Progress bars on the terminal, or nothing (`--json`, or not a terminal).
pub(crate) struct Progress {
    enabled: bool,
}

impl Progress {
    fn new(enabled: bool) -> Self {
        Self { enabled }
    }

    pub(crate) fn bar(&self, len: u64, what: &str) -> indicatif::ProgressBar {
        if !self.enabled {
            return indicatif::ProgressBar::hidden();
        }
        let bar = indicatif::ProgressBar::new(len);
        if let Ok(style) = indicatif::ProgressStyle::with_template(
            "{prefix:>12} [{bar:30}] {pos}/{len} {wide_msg}",
        ) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_prefix(what.to_string());
        bar
    }

    pub(crate) fn spinner(&self, what: &str) -> indicatif::ProgressBar {
        if !self.enabled {
            return indicatif::ProgressBar::hidden();
        }
        let bar = indicatif::ProgressBar::new_spinner();
        bar.set_message(what.to_string());
        bar.enable_steady_tick(Duration::from_millis(120));
        bar
    }
}

fn fmt_opt(v: Option<f64>) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{v:.2}"))
}

/// A spread of fractions as percentages with `digits` decimals.
fn fmt_percent(r: Option<&RatioSpread>, digits: usize) -> String {
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

fn fmt_spread(r: Option<RatioSpread>) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::rc::Rc;

    /// A variant that logs its runs and measures exactly `base` plus
    /// `per_sample` per sample, whatever else ran.
    struct Fake {
        spec: VariantSpec,
        log: Rc<RefCell<Vec<String>>>,
        base: f64,
        per_sample: f64,
    }

    impl Variant for Fake {
        fn spec(&self) -> &VariantSpec {
            &self.spec
        }

        fn run(&mut self) -> Result<Measurement, BenchError> {
            self.log.borrow_mut().push(self.spec.name.clone());
            let ns = self.base + self.per_sample * self.spec.samples as f64;
            Ok(Measurement {
                gpu_ns: ns,
                record_ns: ns / 2.0,
                resolve_ns: self.spec.samples as f64 * 3.0,
            })
        }
    }

    fn fake(
        log: &Rc<RefCell<Vec<String>>>,
        name: &str,
        placement: Placement,
        samples: u64,
        baseline: Option<&str>,
    ) -> Box<dyn Variant> {
        Box::new(Fake {
            spec: VariantSpec {
                name: name.into(),
                tool: Tool::GpuCounters,
                placement,
                samples,
                timestamps_written: samples,
                baseline: baseline.map(Into::into),
            },
            log: log.clone(),
            base: 1000.0,
            per_sample: 10.0,
        })
    }

    #[test]
    fn schedule_runs_each_variant_right_after_its_baseline_and_discards_the_warm_up() {
        let log = Rc::new(RefCell::new(Vec::new()));
        let mut variants = vec![
            fake(&log, "base", Placement::None, 0, None),
            fake(&log, "a", Placement::Precise, 8, Some("base")),
            fake(&log, "b", Placement::Pass, 16, Some("base")),
            fake(&log, "other base", Placement::None, 0, None),
            fake(&log, "c", Placement::Relaxed, 8, Some("other base")),
        ];
        let reps = 4;
        let bar = indicatif::ProgressBar::hidden();
        let measured = schedule(&mut variants, reps, &bar).expect("schedule");

        // Warm-up: one run each of a baseline and its variant; measured
        // rounds: TRIALS of each.
        let log = log.borrow();
        let sampling = 3;
        assert_eq!(
            log.len(),
            2 * sampling + reps as usize * 2 * TRIALS * sampling
        );
        let mut at = 0;
        for round in 0..=reps {
            let trials = if round == 0 { 1 } else { TRIALS };
            let mut order = Vec::new();
            for _ in 0..sampling {
                let variant = &log[at + trials];
                let baseline = match variant.as_str() {
                    "a" | "b" => "base",
                    "c" => "other base",
                    v => panic!("`{v}` is not a sampling variant"),
                };
                assert!(
                    log[at..at + trials].iter().all(|n| n == baseline),
                    "{log:?}"
                );
                assert!(log[at + trials..at + 2 * trials]
                    .iter()
                    .all(|n| n == variant));
                order.push(variant.clone());
                at += 2 * trials;
            }
            order.sort();
            assert_eq!(order, ["a", "b", "c"], "every variant once per round");
        }
        assert_eq!(at, log.len());

        // Measured pairs: one per round for a sampling variant, one per
        // round and variant for a baseline.
        let counts: Vec<usize> = measured.iter().map(Vec::len).collect();
        assert_eq!(counts, [2 * 4, 4, 4, 4, 4]);

        let specs: Vec<&VariantSpec> = variants.iter().map(|v| v.spec()).collect();
        let report = summarize(&specs, &measured);
        let a = &report[1];
        assert_eq!(a.gpu_ns_per_sample, 10.0);
        assert_eq!(a.host_record_ns_per_sample, 5.0);
        assert_eq!(a.host_resolve_ns_per_sample, 3.0);
        assert_eq!(a.gpu_total_ns, 1080.0);
        assert_eq!(a.baseline.as_deref(), Some("base"));
        assert_eq!(report[0].gpu_ns_per_sample, 0.0);
        assert_eq!(report[0].gpu_total_ns, 1000.0);
        assert_eq!(report[4].gpu_ns_per_sample, 10.0);
    }

    #[test]
    fn comparisons_are_ratios_per_round_with_their_spread() {
        let pair = |gpu: f64, record: f64, resolve: f64| Paired {
            variant: Measurement {
                gpu_ns: 100.0 + gpu,
                record_ns: 50.0 + record,
                resolve_ns: resolve,
            },
            base: Measurement {
                gpu_ns: 100.0,
                record_ns: 50.0,
                resolve_ns: 0.0,
            },
        };
        let spec = |name: &str, baseline: Option<&str>| VariantSpec {
            name: name.into(),
            tool: Tool::GpuCountersWgpu,
            placement: Placement::Pass,
            samples: 8,
            timestamps_written: 8,
            baseline: baseline.map(Into::into),
        };
        let specs = [
            spec("base", None),
            spec("a", Some("base")),
            spec("b", Some("base")),
        ];
        let specs: Vec<&VariantSpec> = specs.iter().collect();
        // 4 dispatches; per round, a's overheads are 1, 2, 3 times b's on
        // the GPU, and its host cost (record + resolve) half of b's.
        let measured = vec![
            vec![],
            vec![
                pair(40.0, 4.0, 4.0),
                pair(80.0, 4.0, 4.0),
                pair(120.0, 4.0, 4.0),
            ],
            vec![
                pair(40.0, 8.0, 8.0),
                pair(40.0, 8.0, 8.0),
                pair(40.0, 8.0, 8.0),
            ],
        ];
        let wanted = [
            ComparisonSpec {
                variant: "a",
                against: "b",
                target: 1.1,
            },
            ComparisonSpec {
                variant: "a",
                against: "not run",
                target: 1.0,
            },
        ];
        let c = compare(&specs, &measured, &wanted, 4);
        assert_eq!(
            c.len(),
            1,
            "a comparison with a variant not run is left out"
        );
        let c = &c[0];
        let gpu = c.gpu_ratio.expect("a GPU ratio");
        assert_eq!(
            (gpu.min, gpu.median, gpu.max, gpu.rounds),
            (1.0, 2.0, 3.0, 3)
        );
        assert!(!gpu.within_target);
        assert!(!gpu.settled, "three rounds settle nothing");
        assert_eq!(gpu.verdict(), "over, unsettled");
        assert_eq!((gpu.median_low, gpu.median_high), (None, None));
        let host = c.host_ratio.expect("a host ratio");
        assert_eq!((host.min, host.median, host.max), (0.5, 0.5, 0.5));
        assert!(host.within_target);
        assert_eq!(host.verdict(), "within, unsettled");
        assert_eq!(c.variant_gpu_ns_per_scope, 20.0);
        assert_eq!(c.against_gpu_ns_per_scope, 10.0);
        assert_eq!(c.variant_host_ns_per_scope, 2.0);
        assert_eq!(c.against_host_ns_per_scope, 4.0);
        assert_eq!(c.gpu_ratio_of_medians, Some(2.0));
        assert_eq!(c.host_ratio_of_medians, Some(0.5));

        // Rounds whose denominator is below the noise give no ratio.
        let flat = vec![vec![], measured[1].clone(), vec![pair(0.0, 8.0, 8.0); 3]];
        let c = compare(&specs, &flat, &wanted[..1], 4);
        assert_eq!(c[0].gpu_ratio, None);
        assert_eq!(c[0].gpu_ratio_of_medians, None);
        assert!(c[0].host_ratio.is_some());
    }

    #[test]
    fn a_missing_baseline_is_an_error() {
        let log = Rc::new(RefCell::new(Vec::new()));
        let mut variants = vec![fake(&log, "a", Placement::Precise, 8, Some("nowhere"))];
        let bar = indicatif::ProgressBar::hidden();
        let e = schedule(&mut variants, 1, &bar).expect_err("no baseline named `nowhere`");
        assert!(matches!(e, BenchError::Measurement(_)), "{e}");
        assert!(log.borrow().is_empty(), "nothing ran");
    }

    /// A verdict is settled only when the median's 95% interval lies on
    /// one side of the target: rounds straddling it (the wgpu rows on the
    /// H200, a ratio of two differences of a few hundred ns each moving by
    /// as much) say so instead of a bare "within" or "over", and more
    /// rounds narrow the interval where the quartiles would stay as wide.
    #[test]
    fn a_spread_straddling_the_target_is_unsettled() {
        // Six rounds: the interval is the smallest and largest.
        let r = RatioSpread::of(&[0.9, 1.0, 1.05, 1.08, 1.09, 1.2], 1.1).unwrap();
        assert_eq!((r.median_low, r.median_high), (Some(0.9), Some(1.2)));
        assert_eq!((r.within_target, r.settled), (true, false));
        assert_eq!(r.verdict(), "within, unsettled");
        let r = RatioSpread::of(&[1.15, 1.2, 1.3, 1.4, 1.12, 1.11], 1.1).unwrap();
        assert_eq!(r.verdict(), "over");
        let r = RatioSpread::of(&[0.95, 1.0, 1.05, 1.02, 0.98, 1.03, 0.97], 1.1).unwrap();
        assert_eq!(r.verdict(), "within");
        // Five rounds are too few, however tight.
        let r = RatioSpread::of(&[1.0; 5], 1.1).unwrap();
        assert_eq!(r.verdict(), "within, unsettled");
        // Rounds spread from 0.7 to 1.8 whose median sits at 1.0: their
        // quartiles straddle 1.1, but 100 of them place the median
        // (ranks 40 to 61) under it.
        let spread: Vec<f64> = (0..100)
            .map(|k| match k {
                0..30 => 0.7 + k as f64 * 0.005,
                30..70 => 1.0 + (k - 50) as f64 * 0.003,
                _ => 1.2 + (k - 70) as f64 * 0.02,
            })
            .collect();
        let (q1, q3) = (spread[25], spread[75]);
        assert!(q1 < 1.1 && q3 > 1.1, "the quartiles straddle the target");
        let r = RatioSpread::of(&spread, 1.1).unwrap();
        assert!(r.min < 0.75 && r.max > 1.7, "{r:?}");
        assert!(r.median_high.is_some_and(|h| h <= 1.1), "{r:?}");
        assert_eq!(r.verdict(), "within");
        assert!(RatioSpread::of(&[], 1.1).is_none());
    }
}
