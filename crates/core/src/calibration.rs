use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// How a device's GPU timestamps are tied to the CPU clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CalibrationMethod {
    /// `VK_KHR_calibrated_timestamps`: the driver reads both clocks together
    /// and reports its max deviation.
    CalibratedTimestampsKhr,
    /// `VK_EXT_calibrated_timestamps`, the same through the older extension.
    CalibratedTimestampsExt,
    /// No calibrated timestamps: a timestamp-only submission is bracketed
    /// between two CPU clock reads; the deviation is half the bracket.
    Bracketing,
}

impl CalibrationMethod {
    /// The method's name as printed in reports.
    pub fn name(self) -> &'static str {
        match self {
            CalibrationMethod::CalibratedTimestampsKhr => "calibrated_timestamps_khr",
            CalibrationMethod::CalibratedTimestampsExt => "calibrated_timestamps_ext",
            CalibrationMethod::Bracketing => "bracketing",
        }
    }
}

/// A CPU time and a GPU timestamp taken at (nearly) the same moment: Metal's
/// `sampleTimestamps()`, plus how far apart the two reads may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TimestampPair {
    /// `CLOCK_MONOTONIC` nanoseconds.
    pub cpu_ns: u64,
    /// GPU ticks, masked to the valid bits.
    pub gpu_ticks: u64,
    /// Largest possible distance in nanoseconds between the moments the two
    /// values were read.
    pub max_deviation_ns: u64,
}

/// A GPU timestamp mapped onto the CPU clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CalibratedTime {
    /// `CLOCK_MONOTONIC` nanoseconds.
    pub ns: u64,
    /// The true time lies within `ns ± error_bound_ns`.
    pub error_bound_ns: u64,
}

/// How often, in CPU nanoseconds, a calibration should be refitted so that
/// drift and 32-bit wrap-around stay well inside the bound.
pub const REFIT_INTERVAL_NS: u64 = 250_000_000;

/// Largest rate error assumed between two clocks before two anchors have been
/// seen to measure it: 200 parts per million, above the tolerance of common
/// crystal oscillators.
const UNMEASURED_DRIFT: f64 = 200e-6;

/// Anchors kept for fitting the rate.
const MAX_ANCHORS: usize = 16;

/// Maps GPU timestamps onto the CPU clock with an error bound.
///
/// A calibration holds recent [`TimestampPair`]s (anchors). A timestamp is
/// converted from the nearest anchor using the tick rate fitted across the
/// anchors (the nominal timestamp period until two anchors are far enough
/// apart), so the bound is the anchor's max deviation, plus the rate's
/// uncertainty times the distance from the anchor, plus one tick. Ticks are
/// masked to the valid bits and differences are taken modulo 2^bits, so
/// wrap-around is handled as long as anchors are refreshed more often than
/// half a wrap period ([`Calibration::needs_refit`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Calibration {
    method: CalibrationMethod,
    period_ns: f64,
    valid_bits: u32,
    anchors: VecDeque<TimestampPair>,
    rate_ns_per_tick: f64,
    rate_uncertainty: f64,
}

impl Calibration {
    /// A calibration for a device with the given timestamp period and valid
    /// bits, starting from one anchor.
    pub fn new(
        method: CalibrationMethod,
        period_ns: f64,
        valid_bits: u32,
        first: TimestampPair,
    ) -> Self {
        let valid_bits = valid_bits.clamp(1, 64);
        let mut c = Self {
            method,
            period_ns,
            valid_bits,
            anchors: VecDeque::new(),
            rate_ns_per_tick: period_ns,
            rate_uncertainty: period_ns * UNMEASURED_DRIFT,
        };
        c.add_anchor(first);
        c
    }

    /// The method anchors come from.
    pub fn method(&self) -> CalibrationMethod {
        self.method
    }

    /// The device's nominal nanoseconds per tick.
    pub fn period_ns(&self) -> f64 {
        self.period_ns
    }

    /// The fitted nanoseconds per tick.
    pub fn rate_ns_per_tick(&self) -> f64 {
        self.rate_ns_per_tick
    }

    /// Uncertainty of the fitted rate, in nanoseconds per tick: a conversion
    /// `d` ticks from its anchor adds `|d|` times this to the bound.
    pub fn rate_uncertainty(&self) -> f64 {
        self.rate_uncertainty
    }

    /// The valid bits of a timestamp.
    pub fn valid_bits(&self) -> u32 {
        self.valid_bits
    }

    /// Mask of the valid bits.
    pub fn mask(&self) -> u64 {
        if self.valid_bits >= 64 {
            u64::MAX
        } else {
            (1u64 << self.valid_bits) - 1
        }
    }

    /// The anchors currently held, oldest first.
    pub fn anchors(&self) -> impl Iterator<Item = &TimestampPair> {
        self.anchors.iter()
    }

    /// The newest anchor.
    pub fn latest(&self) -> TimestampPair {
        *self
            .anchors
            .back()
            .expect("a calibration always holds an anchor")
    }

    /// Smallest max deviation among the anchors held.
    pub fn max_deviation_ns(&self) -> u64 {
        self.anchors
            .iter()
            .map(|a| a.max_deviation_ns)
            .min()
            .unwrap_or(0)
    }

    /// The bound for a timestamp taken right at the newest anchor.
    pub fn error_bound_ns(&self) -> u64 {
        self.latest().max_deviation_ns + self.quantization_ns().ceil() as u64
    }

    /// What a tick's granularity adds to an anchor's deviation. The max
    /// deviation of calibrated timestamps already includes the clocks'
    /// periods (the Vulkan specification defines it so); a bracketed read
    /// does not.
    pub fn quantization_ns(&self) -> f64 {
        match self.method {
            CalibrationMethod::Bracketing => self.period_ns.max(1.0),
            _ => 0.0,
        }
    }

    /// Whether the newest anchor is older than [`REFIT_INTERVAL_NS`] at CPU
    /// time `now_ns`.
    pub fn needs_refit(&self, now_ns: u64) -> bool {
        now_ns.saturating_sub(self.latest().cpu_ns) >= REFIT_INTERVAL_NS
    }

    /// Signed tick distance `to - from`, modulo 2^valid_bits.
    pub fn tick_delta(&self, from: u64, to: u64) -> i64 {
        let mask = self.mask();
        let d = to.wrapping_sub(from) & mask;
        if self.valid_bits >= 64 {
            d as i64
        } else if d >= 1u64 << (self.valid_bits - 1) {
            d as i64 - (1i64 << self.valid_bits)
        } else {
            d as i64
        }
    }

    /// Nanoseconds between two timestamps of one interval, wrap-around handled.
    /// Returns `None` when `end` precedes `start`.
    pub fn interval_ns(&self, start_ticks: u64, end_ticks: u64) -> Option<f64> {
        let d = self.tick_delta(start_ticks, end_ticks);
        (d >= 0).then_some(d as f64 * self.rate_ns_per_tick)
    }

    /// Adds an anchor and refits the rate. Anchors whose CPU time is not newer
    /// than the newest are ignored.
    pub fn add_anchor(&mut self, mut pair: TimestampPair) {
        pair.gpu_ticks &= self.mask();
        if let Some(last) = self.anchors.back() {
            if pair.cpu_ns <= last.cpu_ns {
                return;
            }
        }
        self.anchors.push_back(pair);
        while self.anchors.len() > MAX_ANCHORS {
            self.anchors.pop_front();
        }
        self.refit();
    }

    fn refit(&mut self) {
        let (Some(first), Some(last)) = (self.anchors.front(), self.anchors.back()) else {
            return;
        };
        let span_cpu = last.cpu_ns.saturating_sub(first.cpu_ns) as f64;
        let span_ticks = self.tick_delta(first.gpu_ticks, last.gpu_ticks) as f64;
        let deviations = (first.max_deviation_ns + last.max_deviation_ns) as f64;
        // Only trust a measured rate once the anchors' own errors are small
        // against the span: otherwise the nominal period is the better guess.
        if span_ticks > 0.0 && span_cpu > 100.0 * deviations.max(1.0) {
            let measured = span_cpu / span_ticks;
            let uncertainty = deviations / span_ticks;
            let nominal_error = (measured - self.period_ns).abs();
            if nominal_error <= self.period_ns * 0.01 {
                self.rate_ns_per_tick = measured;
                self.rate_uncertainty = uncertainty + self.period_ns * 1e-6;
                return;
            }
        }
        self.rate_ns_per_tick = self.period_ns;
        self.rate_uncertainty = self.period_ns * UNMEASURED_DRIFT;
    }

    /// Maps a GPU timestamp (raw ticks) onto `CLOCK_MONOTONIC` nanoseconds.
    pub fn to_cpu_ns(&self, ticks: u64) -> CalibratedTime {
        let ticks = ticks & self.mask();
        // Convert from the anchor nearest in ticks to keep extrapolation short.
        let anchor = self
            .anchors
            .iter()
            .min_by_key(|a| self.tick_delta(a.gpu_ticks, ticks).unsigned_abs())
            .copied()
            .unwrap_or_else(|| self.latest());
        let d = self.tick_delta(anchor.gpu_ticks, ticks) as f64;
        let ns = anchor.cpu_ns as f64 + d * self.rate_ns_per_tick;
        // Half a nanosecond for rounding `ns` to an integer.
        let bound = anchor.max_deviation_ns as f64
            + d.abs() * self.rate_uncertainty
            + self.quantization_ns()
            + 0.5;
        CalibratedTime {
            ns: ns.round().max(0.0) as u64,
            error_bound_ns: bound.ceil() as u64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(cpu: u64, gpu: u64, dev: u64) -> TimestampPair {
        TimestampPair {
            cpu_ns: cpu,
            gpu_ticks: gpu,
            max_deviation_ns: dev,
        }
    }

    #[test]
    fn converts_with_period() {
        let c = Calibration::new(
            CalibrationMethod::Bracketing,
            2.0,
            64,
            pair(1_000_000, 500, 10),
        );
        let t = c.to_cpu_ns(1500);
        assert_eq!(t.ns, 1_002_000);
        // 10 ns deviation + 1000 ticks * 2 ns * 200 ppm + one tick.
        assert!(t.error_bound_ns >= 12 && t.error_bound_ns <= 13, "{t:?}");
    }

    #[test]
    fn handles_wraparound_on_32_bits() {
        let c = Calibration::new(
            CalibrationMethod::CalibratedTimestampsKhr,
            1.0,
            32,
            pair(10_000_000_000, u32::MAX as u64 - 99, 5),
        );
        // 200 ticks later the counter has wrapped to 100.
        assert_eq!(c.to_cpu_ns(100).ns, 10_000_000_200);
        assert_eq!(c.interval_ns(u32::MAX as u64 - 10, 20), Some(31.0));
        assert_eq!(c.interval_ns(20, 10), None);
        // Bits above the valid ones are ignored.
        assert_eq!(c.to_cpu_ns((1u64 << 40) | 100).ns, 10_000_000_200);
    }

    #[test]
    fn refit_tracks_drift_inside_bound() {
        // The GPU clock runs 50 ppm fast against the nominal 1 ns period.
        let true_rate = 1.0 / (1.0 + 50e-6);
        let gpu_at = |cpu: u64| ((cpu - 1_000_000_000) as f64 / true_rate) as u64 + 7_000;
        let mut c = Calibration::new(
            CalibrationMethod::CalibratedTimestampsKhr,
            1.0,
            64,
            pair(1_000_000_000, gpu_at(1_000_000_000), 20),
        );
        let mut cpu = 1_000_000_000u64;
        for _ in 0..40 {
            cpu += REFIT_INTERVAL_NS;
            assert!(c.needs_refit(cpu));
            c.add_anchor(pair(cpu, gpu_at(cpu), 20));
            // A timestamp halfway to the next refit must convert inside its bound.
            let probe = cpu + REFIT_INTERVAL_NS / 2;
            let t = c.to_cpu_ns(gpu_at(probe));
            let err = (t.ns as i64 - probe as i64).unsigned_abs();
            assert!(
                err <= t.error_bound_ns,
                "err {err} > bound {}",
                t.error_bound_ns
            );
        }
        assert!((c.rate_ns_per_tick() - true_rate).abs() < 1e-6);
    }

    #[test]
    fn ignores_stale_anchor() {
        let mut c = Calibration::new(CalibrationMethod::Bracketing, 1.0, 64, pair(100, 5, 1));
        c.add_anchor(pair(50, 1, 1));
        assert_eq!(c.anchors().count(), 1);
    }
}
