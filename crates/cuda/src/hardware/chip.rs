//! A chip's metric catalog without a context: which names CUPTI's range
//! profiler (per-kernel counters) or PM sampling knows on a chip, and how
//! many passes a set needs. What a recorder checks before the program it
//! records starts.

use super::host::{self, HostObject, Profiler};
use super::{BaseMetric, HardwareError};
use gpu_counters_cupti_sys as cs;
use std::ffi::CString;

/// Which profiler's metrics a [`ChipMetrics`] describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MetricsOf {
    /// The range profiler: per-kernel or per-range counters.
    RangeProfiler,
    /// PM sampling: metrics sampled over time, one pass only.
    PmSampling,
}

impl MetricsOf {
    fn profiler(self) -> Profiler {
        match self {
            MetricsOf::RangeProfiler => Profiler::Range,
            MetricsOf::PmSampling => Profiler::PmSampling,
        }
    }
}

/// The metrics one of CUPTI's profilers offers on a chip, checked through
/// CUPTI's host API (no context is made; a device's PM-sampling counter
/// availability is used where [`ChipMetrics::for_device`] could read it).
pub struct ChipMetrics {
    api: &'static cs::Cupti,
    of: MetricsOf,
    chip: String,
    chip_c: CString,
    availability: Option<Vec<u8>>,
}

impl std::fmt::Debug for ChipMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChipMetrics")
            .field("of", &self.of)
            .field("chip", &self.chip)
            .field("availability", &self.availability.is_some())
            .finish()
    }
}

/// CUPTI, loaded, with its profiler initialized (once per process, never
/// deinitialized).
pub(super) fn profiler_api() -> Result<&'static cs::Cupti, HardwareError> {
    let api = cs::cupti().map_err(|tried| HardwareError::NoCupti {
        tried: tried.to_string(),
    })?;
    host::initialize(api)?;
    Ok(api)
}

/// The chip (`GH100`, ...) of every CUDA device, by ordinal. Initializes the
/// driver (`cuInit`) and CUPTI's profiler in this process; makes no context.
pub fn device_chips() -> Result<Vec<String>, HardwareError> {
    let n = crate::device_count().map_err(|e| HardwareError::Driver {
        call: "cuInit",
        error: e.to_string(),
    })?;
    let api = profiler_api()?;
    (0..n).map(|i| host::chip_name(api, i)).collect()
}

impl ChipMetrics {
    /// The catalog of `of` for chip `chip`, with no device (every metric
    /// the chip has, whether or not a given device makes it available).
    pub fn for_chip(chip: &str, of: MetricsOf) -> Result<Self, HardwareError> {
        let api = profiler_api()?;
        Self::new(api, chip.to_string(), of, None)
    }

    /// The catalog of `of` for device ordinal `ordinal`'s chip; for PM
    /// sampling with the device's counter availability, where it can be
    /// read (it cannot while another session samples the device).
    pub fn for_device(ordinal: usize, of: MetricsOf) -> Result<Self, HardwareError> {
        crate::device_count().map_err(|e| HardwareError::Driver {
            call: "cuInit",
            error: e.to_string(),
        })?;
        let api = profiler_api()?;
        let chip = host::chip_name(api, ordinal)?;
        let availability = match of {
            MetricsOf::PmSampling => host::pm_counter_availability(api, ordinal).ok(),
            MetricsOf::RangeProfiler => None,
        };
        Self::new(api, chip, of, availability)
    }

    fn new(
        api: &'static cs::Cupti,
        chip: String,
        of: MetricsOf,
        availability: Option<Vec<u8>>,
    ) -> Result<Self, HardwareError> {
        let chip_c = CString::new(chip.clone()).map_err(|_| HardwareError::NotSupported {
            why: format!("chip name {chip:?} has a NUL byte"),
        })?;
        let c = Self {
            api,
            of,
            chip,
            chip_c,
            availability,
        };
        // A chip CUPTI does not know fails here, once.
        c.host()?;
        Ok(c)
    }

    fn host(&self) -> Result<HostObject, HardwareError> {
        HostObject::of(
            self.api,
            self.of.profiler(),
            &self.chip_c,
            self.availability.as_deref(),
        )
    }

    /// The chip's name, as CUPTI calls it.
    pub fn chip(&self) -> &str {
        &self.chip
    }

    /// Which profiler's metrics these are.
    pub fn of(&self) -> MetricsOf {
        self.of
    }

    /// Whether the device's counter availability was applied.
    pub fn has_availability(&self) -> bool {
        self.availability.is_some()
    }

    fn unknown(&self, metric: &str, why: impl Into<String>) -> HardwareError {
        HardwareError::UnknownMetric {
            metric: metric.to_string(),
            chip: self.chip.clone(),
            why: why.into(),
        }
    }

    /// Checks that `metric` is a metric of this profiler on the chip: an
    /// unknown one is [`HardwareError::UnknownMetric`] naming it and the
    /// chip.
    pub fn check(&self, metric: &str) -> Result<(), HardwareError> {
        if metric.is_empty() || !metric.contains("__") {
            return Err(self.unknown(metric, "not a metric name (unit__counter.rollup)"));
        }
        let name = CString::new(metric).map_err(|_| self.unknown(metric, "a NUL byte"))?;
        let mut host = self.host()?;
        host.add_metrics(std::slice::from_ref(&name))
            .map_err(|e| self.unknown(metric, e.to_string()))
    }

    /// The passes measuring `metrics` together needs; each is checked
    /// first, so an unknown one is named.
    pub fn passes(&self, metrics: &[&str]) -> Result<usize, HardwareError> {
        if metrics.is_empty() {
            return Err(self.unknown("", "no metric asked for"));
        }
        for m in metrics {
            self.check(m)?;
        }
        self.passes_unchecked(metrics)
    }

    fn passes_unchecked(&self, metrics: &[&str]) -> Result<usize, HardwareError> {
        let names = metrics
            .iter()
            .map(|m| CString::new(*m).map_err(|_| self.unknown(m, "a NUL byte")))
            .collect::<Result<Vec<_>, _>>()?;
        let mut host = self.host()?;
        host.add_metrics(&names)?;
        let mut image = host.config_image()?;
        host::passes(self.api, &mut image)
    }

    /// The error for a set of `metrics` that needs `passes` > 1: naming the
    /// first metric that needs more than one alone, or the set where only
    /// it does.
    pub fn too_many_passes(&self, metrics: &[&str], passes: usize) -> HardwareError {
        for m in metrics {
            if let Ok(p) = self.passes_unchecked(&[m]) {
                if p > 1 {
                    return HardwareError::TooManyPasses {
                        metric: m.to_string(),
                        passes: p,
                    };
                }
            }
        }
        HardwareError::TooManyPasses {
            metric: metrics.join(" + "),
            passes,
        }
    }

    /// Every base metric of each kind (names without a rollup).
    pub fn base_metrics(&self) -> Result<Vec<BaseMetric>, HardwareError> {
        let host = self.host()?;
        let mut out = Vec::new();
        for (_, kind) in host::KINDS {
            for name in host.base_metrics(kind)? {
                out.push(BaseMetric { name, kind });
            }
        }
        Ok(out)
    }

    /// PM sampling's default metrics on this chip (see
    /// [`super::pm::PM_DEFAULTS`]): for each quantity, the first candidate
    /// the chip offers that keeps the set to one pass. Returns the metrics
    /// chosen and, for each quantity with none, what was tried.
    pub fn default_pm_metrics(&self) -> (Vec<String>, Vec<String>) {
        super::pm::choose_defaults(|set| {
            let set: Vec<&str> = set.iter().map(String::as_str).collect();
            set.iter().all(|m| self.check(m).is_ok()) && self.passes_unchecked(&set) == Ok(1)
        })
    }
}
