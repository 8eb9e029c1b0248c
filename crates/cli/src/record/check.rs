//! The checks of `--counters` and `--gpu-metric(s)` against the chips'
//! metric catalogs (CUPTI's host API, no context), behind a trait so that
//! their messages are tested without a GPU.

use gpu_counters_cuda::hardware::{ChipMetrics, HardwareError, MetricsOf};
use std::collections::BTreeMap;

/// Why a check could not be made, or that a metric is unknown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The chip has no such metric (CUPTI's reason).
    Unknown(String),
    /// The check itself failed (why).
    Cannot(String),
}

/// A chip's metrics for one profiler.
pub trait Catalog {
    /// The chip's name.
    fn chip(&self) -> &str;
    /// Whether `metric` is one of the chip's.
    fn check(&self, metric: &str) -> Result<(), Verdict>;
    /// The passes `metrics` need together.
    fn passes(&self, metrics: &[&str]) -> Result<usize, Verdict>;
    /// The metric to name for a set that needs `passes` > 1 (one that
    /// needs several alone, or the set), and its passes.
    fn multi_pass(&self, metrics: &[&str], passes: usize) -> (String, usize);
    /// PM sampling's defaults on the chip: chosen, and quantities
    /// without one.
    fn defaults(&self) -> (Vec<String>, Vec<String>);
}

fn verdict(e: HardwareError) -> Verdict {
    match e {
        HardwareError::UnknownMetric { why, .. } => Verdict::Unknown(why),
        other => Verdict::Cannot(other.to_string()),
    }
}

impl Catalog for ChipMetrics {
    fn chip(&self) -> &str {
        ChipMetrics::chip(self)
    }
    fn check(&self, metric: &str) -> Result<(), Verdict> {
        ChipMetrics::check(self, metric).map_err(verdict)
    }
    fn passes(&self, metrics: &[&str]) -> Result<usize, Verdict> {
        ChipMetrics::passes(self, metrics).map_err(verdict)
    }
    fn multi_pass(&self, metrics: &[&str], passes: usize) -> (String, usize) {
        match self.too_many_passes(metrics, passes) {
            HardwareError::TooManyPasses { metric, passes } => (metric, passes),
            _ => (metrics.join(" + "), passes),
        }
    }
    fn defaults(&self) -> (Vec<String>, Vec<String>) {
        self.default_pm_metrics()
    }
}

/// The devices' chips, and their catalogs.
pub trait Chips {
    /// Each device's chip, by ordinal.
    fn chips(&self) -> Result<Vec<String>, String>;
    /// The range profiler's catalog of `chip`.
    fn range(&self, chip: &str) -> Result<Box<dyn Catalog>, String>;
    /// PM sampling's catalog of device `ordinal` (of chip `chip`).
    fn pm(&self, ordinal: usize, chip: &str) -> Result<Box<dyn Catalog>, String>;
}

/// The real devices of this process (CUDA's driver and CUPTI).
pub struct Devices;

impl Devices {
    /// The devices, or why they cannot be asked here.
    pub fn open() -> Result<Devices, String> {
        if !gpu_counters_cuda::driver_present() {
            return Err("no CUDA driver here".into());
        }
        Ok(Devices)
    }
}

impl Chips for Devices {
    fn chips(&self) -> Result<Vec<String>, String> {
        gpu_counters_cuda::hardware::device_chips().map_err(|e| e.to_string())
    }
    fn range(&self, chip: &str) -> Result<Box<dyn Catalog>, String> {
        ChipMetrics::for_chip(chip, MetricsOf::RangeProfiler)
            .map(|c| Box::new(c) as Box<dyn Catalog>)
            .map_err(|e| e.to_string())
    }
    fn pm(&self, ordinal: usize, _chip: &str) -> Result<Box<dyn Catalog>, String> {
        ChipMetrics::for_device(ordinal, MetricsOf::PmSampling)
            .map(|c| Box::new(c) as Box<dyn Catalog>)
            .map_err(|e| e.to_string())
    }
}

/// What the checks found.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Checked {
    /// PM sampling's defaults chosen here (every device of one chip).
    pub resolved: Option<Vec<String>>,
    /// Lines to show (quantities without a default metric).
    pub notes: Vec<String>,
}

/// Why the program must not start, or why nothing could be checked.
#[derive(Debug, PartialEq, Eq)]
pub enum Stop {
    /// Bad input: exit 2 with this line.
    Usage(String),
    /// Nothing could be checked here (no driver, no CUPTI, ...).
    Cannot(String),
}

fn cannot(v: Verdict) -> Stop {
    match v {
        Verdict::Unknown(why) | Verdict::Cannot(why) => Stop::Cannot(why),
    }
}

/// Checks `--counters` (`counters`, several passes allowed with
/// `replay`) and PM sampling (`pm`, of `gpu_metrics` or the defaults)
/// on every distinct chip of the devices `open` gives.
pub fn on_devices<C: Chips>(
    open: impl FnOnce() -> Result<C, String>,
    pm: bool,
    gpu_metrics: &[String],
    counters: &[String],
    replay: bool,
) -> Result<Checked, Stop> {
    let devices = open().map_err(Stop::Cannot)?;
    let chips = devices.chips().map_err(Stop::Cannot)?;
    if chips.is_empty() {
        return Err(Stop::Cannot("no CUDA device here".into()));
    }
    let mut by_chip: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, c) in chips.iter().enumerate() {
        by_chip.entry(c.as_str()).or_default().push(i);
    }
    let gpus = |o: &[usize]| {
        o.iter()
            .map(|i| format!("GPU{i}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut out = Checked::default();
    let mut defaults: Vec<Vec<String>> = Vec::new();
    for (chip, ordinals) in &by_chip {
        if !counters.is_empty() {
            let cat = devices.range(chip).map_err(Stop::Cannot)?;
            check_counters(&*cat, &gpus(ordinals), counters, replay)?;
        }
        if pm {
            let cat = devices.pm(ordinals[0], chip).map_err(Stop::Cannot)?;
            if let (Some(chosen), notes) = check_pm(&*cat, &gpus(ordinals), gpu_metrics)? {
                out.notes.extend(notes);
                defaults.push(chosen);
            }
        }
    }
    if defaults.len() == 1 {
        out.resolved = defaults.pop();
    }
    Ok(out)
}

/// `--counters`: each metric known, the set one pass unless `replay`.
pub fn check_counters(
    cat: &dyn Catalog,
    gpus: &str,
    metrics: &[String],
    replay: bool,
) -> Result<(), Stop> {
    let chip = cat.chip();
    for m in metrics {
        match cat.check(m) {
            Ok(()) => {}
            Err(Verdict::Unknown(why)) => {
                return Err(Stop::Usage(format!(
                    "--counters: unknown metric `{m}` on {chip} ({gpus}): {why}"
                )))
            }
            Err(v) => return Err(cannot(v)),
        }
    }
    let names: Vec<&str> = metrics.iter().map(String::as_str).collect();
    let passes = cat.passes(&names).map_err(cannot)?;
    if passes > 1 && !replay {
        let (m, p) = cat.multi_pass(&names, passes);
        return Err(Stop::Usage(format!(
            "--counters: `{m}` needs {p} passes on {chip}, and per-kernel counters measure one pass unless --replay kernel replays each kernel"
        )));
    }
    Ok(())
}

/// PM sampling: the metrics given each known and together one pass;
/// with none given, the chip's defaults (`Some`) and a note for each
/// quantity without one.
pub fn check_pm(
    cat: &dyn Catalog,
    gpus: &str,
    metrics: &[String],
) -> Result<(Option<Vec<String>>, Vec<String>), Stop> {
    let chip = cat.chip();
    if metrics.is_empty() {
        let (chosen, missing) = cat.defaults();
        if chosen.is_empty() {
            return Err(Stop::Usage(format!(
                "--gpu-metrics: PM sampling on {chip} ({gpus}) offers none of the default metrics; name some with --gpu-metric (--list-gpu-metrics lists them)"
            )));
        }
        let notes = missing
            .into_iter()
            .map(|m| format!("{gpus} ({chip}): no PM-sampling metric for {m}"))
            .collect();
        return Ok((Some(chosen), notes));
    }
    for m in metrics {
        match cat.check(m) {
            Ok(()) => {}
            Err(Verdict::Unknown(why)) => {
                return Err(Stop::Usage(format!(
                    "--gpu-metric: unknown metric `{m}` for PM sampling on {chip} ({gpus}): {why}"
                )))
            }
            Err(v) => return Err(cannot(v)),
        }
    }
    let names: Vec<&str> = metrics.iter().map(String::as_str).collect();
    let passes = cat.passes(&names).map_err(cannot)?;
    if passes > 1 {
        let (m, p) = cat.multi_pass(&names, passes);
        return Err(Stop::Usage(format!(
            "--gpu-metric: `{m}` needs {p} passes on {chip}, and PM sampling measures one pass"
        )));
    }
    Ok((None, Vec::new()))
}
