//! What `gpu-counters bench` reports: the rows, comparisons and ratios
//! of each backend, the resolve and calibration measurements, and the
//! report they make up.

use crate::*;

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
    pub(crate) fn verdict(&self) -> &'static str {
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
