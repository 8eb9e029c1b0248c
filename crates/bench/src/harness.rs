//! The measuring written once over every backend's rows: the `Variant`
//! and `Harness` traits, the shuffled paired schedule of rounds and trials,
//! and the medians and ratios it summarizes them into.

use crate::*;

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
pub(crate) const TRIALS: usize = 3;

/// One submission's measurement, in nanoseconds.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Measurement {
    pub gpu_ns: f64,
    pub record_ns: f64,
    pub resolve_ns: f64,
}

impl Measurement {
    /// The smaller of each number.
    pub(crate) fn min(self, other: Self) -> Self {
        Self {
            gpu_ns: self.gpu_ns.min(other.gpu_ns),
            record_ns: self.record_ns.min(other.record_ns),
            resolve_ns: self.resolve_ns.min(other.resolve_ns),
        }
    }
}

/// A variant's measurement and that of its baseline, taken right before it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Paired {
    pub(crate) variant: Measurement,
    pub(crate) base: Measurement,
}

/// Runs a warm-up round (thrown away) and `reps` measured rounds over
/// `variants`. A round runs every sampling variant (one with a baseline)
/// once, in an order shuffled anew per round, each right after its own
/// baseline; in a measured round each of the two runs [`TRIALS`] times and
/// keeps the smallest of every number. Returns, per variant, the measured
/// pairs: a sampling variant's with the baseline run just before it, a
/// baseline's own runs paired with themselves (one per variant that uses
/// it, per round).
pub(crate) fn schedule(
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
pub(crate) fn shuffled(items: &[usize], round: u64) -> Vec<usize> {
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
pub(crate) fn overhead(p: &Paired, f: fn(&Measurement) -> f64, per: f64) -> f64 {
    (f(&p.variant) - f(&p.base)) / per
}

/// A pair's added host cost (record overhead plus the resolve, as
/// `host_ratio_to_raw` counts it), divided by `per`; at least 0.
pub(crate) fn host_overhead(p: &Paired, per: f64) -> f64 {
    (overhead(p, |m| m.record_ns, per) + p.variant.resolve_ns / per).max(0.0)
}

pub(crate) fn summarize(specs: &[&VariantSpec], measured: &[Vec<Paired>]) -> Vec<VariantReport> {
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
pub(crate) fn compare(
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
    pub(crate) enabled: bool,
}

impl Progress {
    pub(crate) fn new(enabled: bool) -> Self {
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
