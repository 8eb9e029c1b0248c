//! CUPTI's PM sampling: a device's performance monitors sampled at a fixed
//! interval into a hardware buffer, decoded on the host into samples of
//! chosen metrics, each with its start and end time. Nothing is replayed
//! or serialized; the GPU's clocks are locked while it runs.
//!
//! - One session per device per process ([`HardwareError::SamplerBusy`]
//!   otherwise); CUPTI refuses a second one on a device
//!   (`CUPTI_ERROR_INVALID_OPERATION`) and counters a user may not read
//!   ([`HardwareError::NotPermitted`]).
//! - One pass only: a metric set that needs more is
//!   [`HardwareError::TooManyPasses`] naming the metric.
//! - The config image stays alive, at one address, until the session is
//!   disabled (CUPTI keeps the pointer); the profiler is never
//!   deinitialized (other users in the process may rely on it).
//! - Times are CUPTI's timestamps: `CLOCK_MONOTONIC` ns where this crate's
//!   timestamp callback is registered (activity tracing set up, as
//!   [`crate::trace::record_sink`] does), CUPTI's own clock otherwise.
//! - A hardware buffer that overflowed (decode returns
//!   `CUPTI_ERROR_OUT_OF_MEMORY`) is counted in [`PmDecoded::overflows`];
//!   sampling goes on.

use super::chip::profiler_api;
use super::host::{self, check, params, HostObject, Profiler};
use super::HardwareError;
use gpu_counters_cupti_sys as cs;
use std::collections::BTreeSet;
use std::ffi::{c_char, CString};
use std::sync::Mutex;
use std::time::Duration;

/// A quantity PM sampling shows by default, with the metrics that measure
/// it, best first (names differ between chips and CUPTI versions).
#[derive(Debug, Clone, Copy)]
pub struct PmDefault {
    /// What it measures, in words.
    pub what: &'static str,
    /// Metric names to try, in order.
    pub candidates: &'static [&'static str],
}

/// PM sampling's default quantities: SM throughput, DRAM read and write
/// bandwidth (byte counts first, so that the trace's bandwidth integrates
/// to the bytes moved), tensor-pipe activity.
pub const PM_DEFAULTS: [PmDefault; 4] = [
    PmDefault {
        what: "SM throughput",
        candidates: &[
            "sm__throughput.avg.pct_of_peak_sustained_elapsed",
            "sm__inst_executed_realtime.avg.pct_of_peak_sustained_elapsed",
            "sm__cycles_active.avg.pct_of_peak_sustained_elapsed",
        ],
    },
    PmDefault {
        what: "DRAM read bandwidth",
        candidates: &[
            "dram__bytes_read.sum",
            "dramc__read_throughput.avg.pct_of_peak_sustained_elapsed",
            "dram__read_throughput.avg.pct_of_peak_sustained_elapsed",
        ],
    },
    PmDefault {
        what: "DRAM write bandwidth",
        candidates: &[
            "dram__bytes_write.sum",
            "dramc__write_throughput.avg.pct_of_peak_sustained_elapsed",
            "dram__write_throughput.avg.pct_of_peak_sustained_elapsed",
        ],
    },
    PmDefault {
        what: "tensor-pipe activity",
        candidates: &[
            "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed",
            "sm__pipe_tensor_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed",
            "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed",
            "sm__inst_executed_pipe_tensor.avg.pct_of_peak_sustained_elapsed",
        ],
    },
];

/// Chooses PM sampling's defaults: for each of [`PM_DEFAULTS`], the first
/// candidate for which `fits` accepts the set chosen so far with it added
/// (the chip has it and the set stays one pass). Returns the metrics
/// chosen, in order, and a line for each quantity left without one.
pub fn choose_defaults(mut fits: impl FnMut(&[String]) -> bool) -> (Vec<String>, Vec<String>) {
    let mut chosen: Vec<String> = Vec::new();
    let mut missing = Vec::new();
    for d in PM_DEFAULTS {
        let found = d.candidates.iter().find(|c| {
            let mut trial = chosen.clone();
            trial.push(c.to_string());
            fits(&trial)
        });
        match found {
            Some(c) => chosen.push(c.to_string()),
            None => missing.push(format!("{} (tried {})", d.what, d.candidates.join(", "))),
        }
    }
    (chosen, missing)
}

/// How a [`PmSampler`] samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PmOptions {
    /// Ns between samples (GPU time-interval trigger).
    pub interval_ns: u64,
    /// The hardware buffer samples wait in until decoded, bytes.
    pub hardware_buffer_bytes: usize,
    /// Samples one decode holds at most (the counter data image's size);
    /// a decode that fills it is followed by another at once.
    pub max_samples: u32,
}

impl PmOptions {
    /// `hz` samples a second, decoded every `decode_period`: room for four
    /// periods' samples per decode, a 64 MiB hardware buffer.
    pub fn at_hz(hz: u32, decode_period: Duration) -> Self {
        let hz = hz.max(1);
        let per_period = (f64::from(hz) * decode_period.as_secs_f64()).ceil() as u64;
        PmOptions {
            interval_ns: (1_000_000_000 / u64::from(hz)).max(1),
            hardware_buffer_bytes: 64 << 20,
            max_samples: (per_period.saturating_mul(4)).clamp(64, 1 << 20) as u32,
        }
    }
}

/// One decoded sample: its time span and one value per metric.
#[derive(Debug, Clone, PartialEq)]
pub struct PmSample {
    /// Start, CUPTI's timestamp (ns).
    pub start_ns: u64,
    /// End, likewise.
    pub end_ns: u64,
    /// The metrics' values, in the sampler's order.
    pub values: Vec<f64>,
}

/// What one decode gave.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PmDecoded {
    /// Completed samples, oldest first.
    pub samples: Vec<PmSample>,
    /// Hardware-buffer overflows reported (samples were lost).
    pub overflows: u64,
}

/// Counts gaps between consecutive samples: a sample starting more than
/// half an interval after the previous one ended (samples were lost or
/// not taken). `last_end` carries the previous end across decodes.
pub fn count_gaps(last_end: &mut Option<u64>, samples: &[PmSample], interval_ns: u64) -> u64 {
    let mut gaps = 0;
    for s in samples {
        if let Some(prev) = *last_end {
            if s.start_ns > prev.saturating_add(interval_ns / 2) {
                gaps += 1;
            }
        }
        *last_end = Some(s.end_ns.max(last_end.unwrap_or(0)));
    }
    gaps
}

/// The devices (ordinals) with a sampler in this process.
static SAMPLING: Mutex<BTreeSet<usize>> = Mutex::new(BTreeSet::new());

/// A device's place in [`SAMPLING`], given back on drop.
struct Claim(usize);

impl Claim {
    fn take(ordinal: usize) -> Result<Self, HardwareError> {
        if !crate::lock(&SAMPLING).insert(ordinal) {
            return Err(HardwareError::SamplerBusy { ordinal });
        }
        Ok(Claim(ordinal))
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        crate::lock(&SAMPLING).remove(&self.0);
    }
}

/// A PM-sampling session on one device (see the module docs). Dropping it
/// stops and disables sampling; what was not decoded is lost.
pub struct PmSampler {
    api: &'static cs::Cupti,
    chip: String,
    names: Vec<String>,
    metrics: Vec<CString>,
    host: HostObject,
    object: *mut cs::CUpti_PmSampling_Object,
    /// CUPTI keeps this pointer until the session is disabled.
    config: Box<[u8]>,
    /// The counter data image decodes go into (its address given to CUPTI).
    counter_data: Box<[u8]>,
    options: PmOptions,
    started: bool,
    _claim: Claim,
}

// SAFETY: the sampler is used by one thread at a time (`&mut self`); the
// PM sampling object and host object are CUPTI's heap objects, not tied to
// a thread, and no call needs a current context.
unsafe impl Send for PmSampler {}

impl std::fmt::Debug for PmSampler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PmSampler")
            .field("chip", &self.chip)
            .field("metrics", &self.names)
            .field("options", &self.options)
            .finish()
    }
}

impl PmSampler {
    /// Starts sampling `metrics` on device ordinal `ordinal`: the chip's
    /// PM host object with the device's counter availability, the config
    /// image (one pass, else [`HardwareError::TooManyPasses`]), the session
    /// enabled and configured, its counter data image, started.
    pub fn start(
        ordinal: usize,
        metrics: &[&str],
        options: PmOptions,
    ) -> Result<Self, HardwareError> {
        let claim = Claim::take(ordinal)?;
        let api = profiler_api()?;
        let chip = host::chip_name(api, ordinal)?;
        let chip_c = CString::new(chip.clone()).map_err(|_| HardwareError::NotSupported {
            why: format!("chip name {chip:?} has a NUL byte"),
        })?;
        let availability = host::pm_counter_availability(api, ordinal)?;
        let unknown = |m: &str, why: String| HardwareError::UnknownMetric {
            metric: m.to_string(),
            chip: chip.clone(),
            why,
        };
        if metrics.is_empty() {
            return Err(unknown("", "no metric asked for".into()));
        }
        let mut names = Vec::with_capacity(metrics.len());
        for m in metrics {
            let c = CString::new(*m).map_err(|_| unknown(m, "a NUL byte".into()))?;
            // Each alone first, so that an unknown one is named.
            HostObject::of(api, Profiler::PmSampling, &chip_c, Some(&availability))?
                .add_metrics(std::slice::from_ref(&c))
                .map_err(|e| unknown(m, e.to_string()))?;
            names.push(c);
        }
        let mut host = HostObject::of(api, Profiler::PmSampling, &chip_c, Some(&availability))?;
        host.add_metrics(&names)?;
        let mut config = host.config_image()?.into_boxed_slice();
        let passes = host::passes(api, &mut config)?;
        if passes > 1 {
            let metric = metrics
                .iter()
                .zip(&names)
                .find_map(|(m, c)| {
                    let mut h =
                        HostObject::of(api, Profiler::PmSampling, &chip_c, Some(&availability))
                            .ok()?;
                    h.add_metrics(std::slice::from_ref(c)).ok()?;
                    let mut img = h.config_image().ok()?;
                    let p = host::passes(api, &mut img).ok()?;
                    (p > 1).then(|| m.to_string())
                })
                .unwrap_or_else(|| metrics.join(" + "));
            return Err(HardwareError::TooManyPasses { metric, passes });
        }
        let mut enable: cs::CUpti_PmSampling_Enable_Params = params();
        enable.deviceIndex = ordinal;
        // SAFETY: valid parameters.
        let r = unsafe { api.cuptiPmSamplingEnable(&mut enable) };
        check(api, "cuptiPmSamplingEnable", r)?;
        let mut sampler = PmSampler {
            api,
            chip,
            names: metrics.iter().map(|m| m.to_string()).collect(),
            metrics: names,
            host,
            object: enable.pPmSamplingObject,
            config,
            counter_data: Box::new([]),
            options,
            started: false,
            _claim: claim,
        };
        // From here on, the drop disables the session.
        sampler.configure()?;
        let mut start: cs::CUpti_PmSampling_Start_Params = params();
        start.pPmSamplingObject = sampler.object;
        // SAFETY: valid parameters; our enabled, configured object.
        let r = unsafe { api.cuptiPmSamplingStart(&mut start) };
        check(api, "cuptiPmSamplingStart", r)?;
        sampler.started = true;
        Ok(sampler)
    }

    fn configure(&mut self) -> Result<(), HardwareError> {
        let api = self.api;
        let mut set: cs::CUpti_PmSampling_SetConfig_Params = params();
        set.pPmSamplingObject = self.object;
        set.configSize = self.config.len();
        set.pConfig = self.config.as_ptr();
        set.hardwareBufferSize = self.options.hardware_buffer_bytes;
        set.samplingInterval = self.options.interval_ns;
        set.triggerMode =
            cs::CUpti_PmSampling_TriggerMode::CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_TIME_INTERVAL;
        set.hwBufferAppendMode = cs::CUpti_PmSampling_HardwareBuffer_AppendMode::CUPTI_PM_SAMPLING_HARDWARE_BUFFER_APPEND_MODE_KEEP_OLDEST;
        // SAFETY: valid parameters; the config image is the sampler's, at
        // one address until the session is disabled (dropped after it).
        let r = unsafe { api.cuptiPmSamplingSetConfig(&mut set) };
        check(api, "cuptiPmSamplingSetConfig", r)?;
        let mut names: Vec<*const c_char> = self.metrics.iter().map(|m| m.as_ptr()).collect();
        let mut size: cs::CUpti_PmSampling_GetCounterDataSize_Params = params();
        size.pPmSamplingObject = self.object;
        size.pMetricNames = names.as_mut_ptr();
        size.numMetrics = names.len();
        size.maxSamples = self.options.max_samples;
        // SAFETY: valid parameters; the names outlive the call.
        let r = unsafe { api.cuptiPmSamplingGetCounterDataSize(&mut size) };
        check(api, "cuptiPmSamplingGetCounterDataSize", r)?;
        self.counter_data = vec![0u8; size.counterDataSize].into_boxed_slice();
        self.initialize_counter_data()
    }

    fn initialize_counter_data(&mut self) -> Result<(), HardwareError> {
        let mut init: cs::CUpti_PmSampling_CounterDataImage_Initialize_Params = params();
        init.pPmSamplingObject = self.object;
        init.counterDataSize = self.counter_data.len();
        init.pCounterData = self.counter_data.as_mut_ptr();
        // SAFETY: the image holds the size CUPTI asked for, at one address
        // (a boxed slice, never reallocated).
        let r = unsafe {
            self.api
                .cuptiPmSamplingCounterDataImageInitialize(&mut init)
        };
        check(self.api, "cuptiPmSamplingCounterDataImageInitialize", r)
    }

    /// The chip (`GH100`, ...).
    pub fn chip(&self) -> &str {
        &self.chip
    }

    /// The metrics sampled, in the order of each sample's values.
    pub fn metrics(&self) -> &[String] {
        &self.names
    }

    /// The options it samples with.
    pub fn options(&self) -> PmOptions {
        self.options
    }

    /// Decodes what the hardware buffer holds: every completed sample,
    /// oldest first (decoding again at once while the counter data image
    /// fills), and the overflows reported.
    pub fn decode(&mut self) -> Result<PmDecoded, HardwareError> {
        use cs::CUpti_PmSampling_DecodeStopReason as Stop;
        let mut out = PmDecoded::default();
        // Each round empties a full image; a bound keeps a GPU that samples
        // faster than the host decodes from holding this call forever.
        for _ in 0..64 {
            let mut p: cs::CUpti_PmSampling_DecodeData_Params = params();
            p.pPmSamplingObject = self.object;
            p.pCounterDataImage = self.counter_data.as_mut_ptr();
            p.counterDataImageSize = self.counter_data.len();
            // SAFETY: valid parameters; CUPTI writes into the sampler's
            // counter data image, of the size it asked for.
            let r = unsafe { self.api.cuptiPmSamplingDecodeData(&mut p) };
            let overflowed = r == cs::CUptiResult::CUPTI_ERROR_OUT_OF_MEMORY;
            if overflowed || p.overflow != 0 {
                out.overflows += 1;
            }
            if !overflowed {
                check(self.api, "cuptiPmSamplingDecodeData", r)?;
            }
            self.collect(&mut out.samples)?;
            self.initialize_counter_data()?;
            if overflowed
                || p.decodeStopReason
                    != Stop::CUPTI_PM_SAMPLING_DECODE_STOP_REASON_COUNTER_DATA_FULL
            {
                break;
            }
        }
        Ok(out)
    }

    /// The completed samples of the counter data image, evaluated.
    fn collect(&self, out: &mut Vec<PmSample>) -> Result<(), HardwareError> {
        let api = self.api;
        let mut info: cs::CUpti_PmSampling_GetCounterDataInfo_Params = params();
        info.pCounterDataImage = self.counter_data.as_ptr();
        info.counterDataImageSize = self.counter_data.len();
        // SAFETY: valid parameters over the sampler's image.
        let r = unsafe { api.cuptiPmSamplingGetCounterDataInfo(&mut info) };
        check(api, "cuptiPmSamplingGetCounterDataInfo", r)?;
        for i in 0..info.numCompletedSamples {
            let mut s: cs::CUpti_PmSampling_CounterData_GetSampleInfo_Params = params();
            s.pPmSamplingObject = self.object;
            s.pCounterDataImage = self.counter_data.as_ptr();
            s.counterDataImageSize = self.counter_data.len();
            s.sampleIndex = i;
            // SAFETY: valid parameters over the image, `i` below its
            // completed samples.
            let r = unsafe { api.cuptiPmSamplingCounterDataGetSampleInfo(&mut s) };
            check(api, "cuptiPmSamplingCounterDataGetSampleInfo", r)?;
            let values = self.host.evaluate(&self.counter_data, i, &self.metrics)?;
            out.push(PmSample {
                start_ns: s.startTimestamp,
                end_ns: s.endTimestamp,
                values,
            });
        }
        Ok(())
    }

    /// Stops sampling and decodes what is left; the session is disabled
    /// when the sampler is dropped.
    pub fn stop(&mut self) -> Result<PmDecoded, HardwareError> {
        if self.started {
            self.started = false;
            let mut p: cs::CUpti_PmSampling_Stop_Params = params();
            p.pPmSamplingObject = self.object;
            // SAFETY: valid parameters; our started object.
            let r = unsafe { self.api.cuptiPmSamplingStop(&mut p) };
            check(self.api, "cuptiPmSamplingStop", r)?;
        }
        self.decode()
    }
}

impl Drop for PmSampler {
    fn drop(&mut self) {
        if self.started {
            let mut p: cs::CUpti_PmSampling_Stop_Params = params();
            p.pPmSamplingObject = self.object;
            // SAFETY: our started object, stopped once, here.
            let _ = unsafe { self.api.cuptiPmSamplingStop(&mut p) };
        }
        let mut p: cs::CUpti_PmSampling_Disable_Params = params();
        p.pPmSamplingObject = self.object;
        // SAFETY: our enabled object, disabled once, here; the config image
        // (a field) is freed only after this.
        let _ = unsafe { self.api.cuptiPmSamplingDisable(&mut p) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first candidate the chip accepts is taken per quantity, the set
    /// is grown in order, and a quantity with none is reported with what
    /// was tried.
    #[test]
    fn defaults_take_the_first_candidate_that_fits() {
        let offered = [
            "sm__cycles_active.avg.pct_of_peak_sustained_elapsed",
            "dram__bytes_read.sum",
            "dram__bytes_write.sum",
        ];
        let mut asked: Vec<Vec<String>> = Vec::new();
        let (chosen, missing) = choose_defaults(|set| {
            asked.push(set.to_vec());
            set.iter().all(|m| offered.contains(&m.as_str()))
        });
        assert_eq!(
            chosen,
            vec![
                "sm__cycles_active.avg.pct_of_peak_sustained_elapsed",
                "dram__bytes_read.sum",
                "dram__bytes_write.sum"
            ]
        );
        assert_eq!(missing.len(), 1);
        assert!(
            missing[0].starts_with("tensor-pipe activity (tried sm__pipe_tensor_cycles_active"),
            "{missing:?}"
        );
        // The third SM candidate was tried after the first two, alone.
        assert_eq!(asked[0], vec![PM_DEFAULTS[0].candidates[0].to_string()]);
        assert_eq!(asked[2].len(), 1);
        // The DRAM read candidate was tried with the SM metric chosen.
        assert_eq!(asked[3].len(), 2);
    }

    /// A set that stops fitting (two passes) skips to the next candidate.
    #[test]
    fn defaults_keep_the_set_to_one_pass() {
        let (chosen, missing) = choose_defaults(|set| set.len() <= 2);
        assert_eq!(chosen.len(), 2);
        assert_eq!(missing.len(), 2);
    }

    #[test]
    fn rates_set_the_interval_and_room() {
        let o = PmOptions::at_hz(10_000, Duration::from_millis(20));
        assert_eq!(o.interval_ns, 100_000);
        assert_eq!(o.max_samples, 800);
        assert_eq!(o.hardware_buffer_bytes, 64 << 20);
        let slow = PmOptions::at_hz(1, Duration::from_millis(20));
        assert_eq!(slow.interval_ns, 1_000_000_000);
        assert_eq!(slow.max_samples, 64);
    }

    fn sample(start: u64, end: u64) -> PmSample {
        PmSample {
            start_ns: start,
            end_ns: end,
            values: vec![],
        }
    }

    /// Back-to-back samples (across decodes) are no gap; a missing
    /// interval is one.
    #[test]
    fn gaps_are_missing_intervals() {
        let mut last = None;
        let a = [sample(0, 100), sample(100, 200), sample(201, 300)];
        assert_eq!(count_gaps(&mut last, &a, 100), 0);
        assert_eq!(last, Some(300));
        let b = [sample(300, 400), sample(500, 600), sample(600, 700)];
        assert_eq!(count_gaps(&mut last, &b, 100), 1);
        let c = [sample(900, 1000)];
        assert_eq!(count_gaps(&mut last, &c, 100), 1);
        assert_eq!(count_gaps(&mut None, &[], 100), 0);
    }
}
