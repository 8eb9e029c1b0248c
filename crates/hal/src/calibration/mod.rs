mod convert;
#[cfg(test)]
mod tests;

use crate::error::{Error, InvalidInput, Result};
use crate::results::{CounterResultTimestamp, ResolvedCounters, SampleValue, COUNTER_ERROR_VALUE};
pub use convert::Converter;
use convert::{HotSegment, MAX_FAST_SPAN};
#[cfg(feature = "serde")]
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// How a device's GPU timestamps are tied to the CPU clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum CalibrationMethod {
    /// The driver reads the GPU and the CPU clock together
    /// ([`DeviceInfo::calibration_source`] says through what); the pair's
    /// bound is the deviation the driver states (Vulkan), or half the
    /// CPU window around the call where it states none (D3D12's
    /// `GetClockCalibration`, Metal's `sampleTimestamps`).
    ///
    /// [`DeviceInfo::calibration_source`]: crate::DeviceInfo::calibration_source
    CalibratedPair,
    /// No calibrated reads: a timestamp-only piece of GPU work is bracketed
    /// between two CPU clock reads; the deviation is half the bracket.
    Bracketing,
}

impl CalibrationMethod {
    /// The method's name as printed in reports.
    pub fn name(self) -> &'static str {
        match self {
            CalibrationMethod::CalibratedPair => "calibrated_pair",
            CalibrationMethod::Bracketing => "bracketing",
        }
    }
}

/// A CPU time and a GPU timestamp taken at (nearly) the same moment: Metal's
/// `sampleTimestamps()`, plus how far apart the two reads may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
pub struct TimestampPair {
    /// Nanoseconds on the CPU clock ([`cpu_monotonic_ns`](crate::cpu_monotonic_ns)).
    pub cpu_ns: u64,
    /// GPU ticks, masked to the valid bits.
    pub gpu_ticks: u64,
    /// Largest possible distance in nanoseconds between the moments the two
    /// values were read.
    pub max_deviation_ns: u64,
}

/// A GPU timestamp mapped onto the CPU clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
pub struct CalibratedTime {
    /// Nanoseconds on the CPU clock ([`cpu_monotonic_ns`](crate::cpu_monotonic_ns));
    /// never [`COUNTER_ERROR_VALUE`].
    pub ns: u64,
    /// The true time lies within `ns ± error_bound_ns` (saturated at
    /// `u64::MAX`, never wrapped).
    pub error_bound_ns: u64,
}

/// The time between two timestamp samples on the CPU clock, with its bound
/// ([`Calibration::duration`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
pub struct CalibratedDuration {
    /// The start sample's time on the CPU clock.
    pub start: CalibratedTime,
    /// The end sample's time on the CPU clock.
    pub end: CalibratedTime,
    /// `end.ns - start.ns`: nanoseconds from the start sample to the end
    /// sample.
    pub ns: u64,
    /// The true duration lies within `ns ± error_bound_ns`: the sum of the
    /// two times' bounds (saturated at `u64::MAX`, never wrapped).
    pub error_bound_ns: u64,
}

/// Why [`Calibration::to_cpu_ns`] could not map a timestamp onto the CPU
/// clock. Converts into [`Error::Invalid`] with `?`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum ConversionError {
    /// The timestamp is [`COUNTER_ERROR_VALUE`]: the sample has no value.
    #[error("timestamp is the counter error value (u64::MAX): the sample has no value")]
    ErrorValue,
    /// The timestamp maps to a CPU time before 0 ns.
    #[error("timestamp {ticks} maps to a CPU time before 0 ns")]
    BeforeZero {
        /// The raw timestamp.
        ticks: u64,
    },
    /// The timestamp maps to a CPU time that does not fit below `u64::MAX` ns.
    #[error("timestamp {ticks} maps to a CPU time past u64::MAX - 1 ns")]
    TooLate {
        /// The raw timestamp.
        ticks: u64,
    },
}

impl From<ConversionError> for Error {
    fn from(e: ConversionError) -> Self {
        Error::Invalid(InvalidInput::TimestampConversion(e))
    }
}

/// How often, in CPU nanoseconds, a calibration should be refitted so that
/// drift and wrap-around stay well inside the bound.
pub const REFIT_INTERVAL_NS: u64 = 250_000_000;

/// Largest rate error assumed between two clocks before two anchors have been
/// seen to measure it: 200 parts per million, above the tolerance of common
/// crystal oscillators.
const UNMEASURED_DRIFT: f64 = 200e-6;

/// Largest relative distance assumed between the true tick rate and the
/// nominal period: a measured rate further off is not trusted, and it is the
/// margin used to count wraps between anchors.
const RATE_TOLERANCE: f64 = 0.01;

/// Relative change of the tick rate allowed between and after anchors (the
/// clocks are not exactly affine): one part per million.
const RATE_CHANGE: f64 = 1e-6;

/// Allowance for the rounding of `f64` arithmetic, relative to the offset
/// computed from an anchor (a few ulps, generously).
const F64_ERROR: f64 = 16.0 * f64::EPSILON;

/// Most wraps counted between two consecutive anchors.
const MAX_WRAPS: f64 = 1_048_576.0;

/// Largest magnitude of an extended tick: far from `i128`'s limits.
const MAX_EXTENDED: i128 = 1 << 120;

/// Anchors kept for fitting the rate.
const MAX_ANCHORS: usize = 16;

/// An anchor with its ticks on the unwrapped (extended) tick line.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Anchor {
    /// The pair, ticks masked to the valid bits.
    pair: TimestampPair,
    /// `pair.gpu_ticks` plus the wraps counted since the first anchor.
    ext: i128,
}

/// Maps GPU timestamps onto the CPU clock with an error bound.
///
/// A calibration holds up to 16 recent [`TimestampPair`]s (anchors) on an
/// unwrapped tick line: each new anchor's ticks are unwrapped against the
/// previous anchor's, the number of wraps chosen from the CPU time elapsed
/// between them, so CPU time and extended ticks both strictly increase along
/// the anchors.
///
/// **Window.** [`Calibration::to_cpu_ns`] unwraps a timestamp to within half
/// a wrap (2^(valid_bits-1) ticks) of the newest anchor: before or after it.
/// A timestamp further away converts one or more wraps off; refit at least
/// every [`REFIT_INTERVAL_NS`] ([`Calibration::needs_refit`]) and convert
/// timestamps soon after they are taken, or use
/// [`Calibration::to_cpu_ns_near`] with a CPU time near the timestamp's.
///
/// **Conversion.** Between two anchors a timestamp is interpolated linearly
/// (continuous, and monotonic since every segment rises); before the oldest
/// and after the newest anchor it is extrapolated with the rate fitted across
/// the anchors (the nominal period until the anchors are far enough apart to
/// measure it). Conversion is monotonic in the unwrapped tick.
///
/// **Bound.** Between two anchors: the larger of their max deviations (an
/// affine clock error is linear between two points) plus one part per million
/// of a period per tick to the nearer anchor for rate changes; outside them:
/// the end anchor's max deviation plus the rate's uncertainty times the
/// distance. Always plus one tick (a tick stands for an interval of one
/// period) and rounding. The bound assumes the true tick rate is within 200
/// ppm of the nominal period until it has been measured, and within 1% once
/// measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Calibration {
    method: CalibrationMethod,
    period_ns: f64,
    valid_bits: u32,
    /// Never empty; oldest first.
    anchors: VecDeque<Anchor>,
    rate_ns_per_tick: f64,
    rate_uncertainty: f64,
    /// The anchors as the hot path converts with them (see [`Points`]);
    /// rebuilt whenever the anchors or the rate change.
    points: Points,
}

/// One anchor as [`Calibration::to_cpu_ns`]'s hot path reads it: ticks
/// relative to the newest anchor in `i64`, and the segment that ends at it
/// (from the anchor before) with its values already converted to `f64`.
/// Every value is the one the exact conversion computes from the anchors,
/// so both give the same result bit for bit.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
struct Point {
    /// `ext - newest.ext` (0 for the newest, negative before it).
    rel: i64,
    cpu_ns: u64,
    /// `max_deviation_ns as f64`.
    dev_f: f64,
    /// The segment from the anchor before (unused for the oldest): its
    /// length in ticks, its CPU span, and the larger of its ends' max
    /// deviations, as `f64` where the exact path converts them.
    len: i64,
    len_f: f64,
    span: u64,
    span_f: f64,
    seg_dev_f: f64,
}

/// The anchors, oldest first, as [`Point`]s, with the constants the hot path
/// needs; `n == 0` where the anchors span too many ticks for `i64` (then
/// every conversion takes the exact `i128` path).
#[derive(Debug, Clone, PartialEq)]
struct Points {
    n: usize,
    at: [Point; MAX_ANCHORS],
    /// The newest anchor's ticks, masked.
    newest_ticks: u64,
    /// [`Calibration::quantization_ns`].
    quantization_ns: f64,
    /// The converter's hot paths ([`HotSegment::of`]), built with the
    /// points rather than per converter: `Calibration::to_cpu_ns` makes a
    /// converter per call.
    hot: Option<HotSegment>,
}

impl Points {
    const EMPTY: Points = Points {
        n: 0,
        at: [Point {
            rel: 0,
            cpu_ns: 0,
            dev_f: 0.0,
            len: 0,
            len_f: 0.0,
            span: 0,
            span_f: 0.0,
            seg_dev_f: 0.0,
        }; MAX_ANCHORS],
        newest_ticks: 0,
        quantization_ns: 0.0,
        hot: None,
    };
}

/// An [`InvalidInput::Calibration`] error.
fn invalid(field: &'static str, value: impl std::fmt::Display, reason: &'static str) -> Error {
    Error::Invalid(InvalidInput::Calibration {
        field,
        value: value.to_string(),
        reason,
    })
}

/// `x as f64`, without the software conversion of a full `i128` where `x`
/// fits in an `i64` (the same value: both round to nearest).
#[inline]
fn i128_f64(x: i128) -> f64 {
    match i64::try_from(x) {
        Ok(v) => v as f64,
        Err(_) => i128_f64_wide(x),
    }
}

/// `x as f64` through the software conversion; kept out of line so that
/// the compiler does not call it speculatively where `x` fits an `i64`.
#[cold]
#[inline(never)]
fn i128_f64_wide(x: i128) -> f64 {
    x as f64
}

/// `x as i128` for a finite `x`, without the software conversion where it
/// fits in an `i64` (the same value).
#[inline]
fn f64_i128(x: f64) -> i128 {
    if x.abs() < 9.0e18 {
        i128::from(x as i64)
    } else {
        f64_i128_wide(x)
    }
}

/// `x as i128` through the software conversion, out of line (see
/// [`i128_f64_wide`]).
#[cold]
#[inline(never)]
fn f64_i128_wide(x: f64) -> i128 {
    x as i128
}

/// `x as i64` for `|x| < 9e18` (and not NaN), which the callers checked:
/// one instruction, without the saturating cast's range checks.
#[inline(always)]
#[allow(unsafe_code)]
fn trunc_i64(x: f64) -> i64 {
    debug_assert!(x.abs() < 9.0e18);
    // SAFETY: every caller checked `|x| < 9e18` (which excludes NaN and
    // the infinities) just before, so `x` truncated fits in an `i64`.
    unsafe { x.to_int_unchecked::<i64>() }
}

/// `x` rounded up to an integer, saturated into `u64` (NaN gives `u64::MAX`).
/// The same value as `x.ceil().max(0.0) as u64`, without a call to the
/// software `ceil`: for `0 < x < 2^64`, `x as u64` truncates exactly, and
/// `t as f64` is exact (below 2^53 every integer is representable, above
/// it `x` is an integer).
#[inline]
fn ceil_saturating(x: f64) -> u64 {
    if x > 0.0 && x < 9.0e18 {
        // Error bounds: through `i64`, whose conversions are one
        // instruction each on x86-64 (`u64`'s are a dozen), and without
        // the saturating cast's checks.
        // Without a branch: whether `x` had a fraction is as likely as
        // not, and a mispredicted branch costs more than the whole rest.
        let t = trunc_i64(x);
        return t as u64 + u64::from((t as f64) < x);
    }
    if x.is_nan() || x >= u64::MAX as f64 {
        u64::MAX
    } else if x <= 0.0 {
        0
    } else {
        let t = x as u64;
        if (t as f64) < x {
            t + 1
        } else {
            t
        }
    }
}

/// `x.round() as i64` (to nearest, halves away from zero) for `|x| < 9e18`,
/// without a call to the software `round`: `x as i64` truncates exactly,
/// `t as f64` is exactly `trunc(x)` (see [`ceil_saturating`]) and `x - t`
/// is exactly the fraction.
#[inline]
fn round_i64(x: f64) -> i64 {
    if x.is_nan() || x.abs() >= 9.0e18 {
        // Outside the documented range (callers check it first).
        return x as i64;
    }
    let t = trunc_i64(x);
    let frac = x - t as f64;
    // Without a branch: a fraction at or above a half is as likely as not
    // (see `ceil_saturating`).
    t + i64::from(frac >= 0.5) - i64::from(frac <= -0.5)
}

/// What a new anchor's ticks make of the extended tick line.
enum Unwrapped {
    /// The new anchor's extended ticks.
    At(i128),
    /// The wraps between the anchors cannot be counted for sure (too long a
    /// gap, deviations too large, or a clock inconsistent with the anchors).
    Ambiguous,
}

impl Calibration {
    /// A calibration for a device with the given timestamp period and valid
    /// bits, starting from one anchor.
    ///
    /// Errors ([`InvalidInput::Calibration`]): `period_ns` is NaN, infinite,
    /// zero or negative; `valid_bits` is outside `1..=64`; the anchor's
    /// `gpu_ticks` is [`COUNTER_ERROR_VALUE`].
    pub fn new(
        method: CalibrationMethod,
        period_ns: f64,
        valid_bits: u32,
        first: TimestampPair,
    ) -> Result<Self> {
        if !(period_ns.is_finite() && period_ns > 0.0) {
            return Err(invalid(
                "period_ns",
                period_ns,
                "is not finite and positive",
            ));
        }
        if !(1..=64).contains(&valid_bits) {
            return Err(invalid("valid_bits", valid_bits, "is outside 1..=64"));
        }
        Self::check_ticks(&first)?;
        let mut c = Self {
            method,
            period_ns,
            valid_bits,
            anchors: VecDeque::with_capacity(MAX_ANCHORS + 1),
            rate_ns_per_tick: period_ns,
            rate_uncertainty: period_ns * UNMEASURED_DRIFT,
            points: Points::EMPTY,
        };
        c.restart(first);
        Ok(c)
    }

    fn check_ticks(pair: &TimestampPair) -> Result<()> {
        if pair.gpu_ticks == COUNTER_ERROR_VALUE {
            return Err(invalid(
                "gpu_ticks",
                pair.gpu_ticks,
                "is the counter error value",
            ));
        }
        Ok(())
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
    /// `d` ticks before the oldest or after the newest anchor adds `|d|` times
    /// this to the bound.
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

    /// Ticks in one wrap: 2^valid_bits.
    fn wrap(&self) -> i128 {
        1i128 << self.valid_bits
    }

    /// The anchors currently held, oldest first.
    pub fn anchors(&self) -> impl Iterator<Item = &TimestampPair> {
        self.anchors.iter().map(|a| &a.pair)
    }

    fn newest(&self) -> Anchor {
        // Invariant: `new` and `restart` leave one anchor, nothing removes
        // the last one.
        *self
            .anchors
            .back()
            .expect("a calibration always holds an anchor")
    }

    /// The newest anchor.
    pub fn latest(&self) -> TimestampPair {
        self.newest().pair
    }

    /// Smallest max deviation among the anchors held.
    pub fn max_deviation_ns(&self) -> u64 {
        self.anchors
            .iter()
            .map(|a| a.pair.max_deviation_ns)
            .min()
            .unwrap_or(0)
    }

    /// The time from timestamp sample `start` to sample `end` of `resolved`
    /// (indices 0-based within the resolve, as [`ResolvedCounters::sample`]
    /// takes them) on the CPU clock, with its bound: both samples
    /// converted with [`Calibration::to_cpu_ns`], their difference, and the
    /// sum of their bounds.
    ///
    /// A sample without a value gives no number: the view of the first of
    /// the two that lacks one ([`SampleValue::NotWritten`], `NotReady`,
    /// `Error` or `Invalidated`).
    ///
    /// # Errors
    /// `resolved` holds another counter set than timestamps
    /// ([`InvalidInput::Argument`]); an index past the resolve
    /// ([`InvalidInput::IndexOutOfRange`]); a timestamp that does not map
    /// onto the CPU clock ([`InvalidInput::TimestampConversion`]); an end
    /// sample taken before the start sample
    /// ([`InvalidInput::EndBeforeStart`]).
    pub fn duration(
        &self,
        resolved: &ResolvedCounters,
        start: usize,
        end: usize,
    ) -> Result<SampleValue<CalibratedDuration>> {
        let a = resolved.sample::<CounterResultTimestamp>(start)?;
        let b = resolved.sample::<CounterResultTimestamp>(end)?;
        let (a, b) = match (a, b) {
            (SampleValue::Value(a), SampleValue::Value(b)) => (a, b),
            (SampleValue::Value(_), lacking) | (lacking, _) => return Ok(lacking.without_value()),
        };
        let (s, e) = (self.to_cpu_ns(a.timestamp)?, self.to_cpu_ns(b.timestamp)?);
        let ns = e.ns.checked_sub(s.ns).ok_or(InvalidInput::EndBeforeStart {
            start: start as u64,
            end: end as u64,
            start_ns: s.ns,
            end_ns: e.ns,
        })?;
        Ok(SampleValue::Value(CalibratedDuration {
            start: s,
            end: e,
            ns,
            error_bound_ns: s.error_bound_ns.saturating_add(e.error_bound_ns),
        }))
    }

    /// The bound for a timestamp taken right at the newest anchor.
    pub fn error_bound_ns(&self) -> u64 {
        ceil_saturating(self.latest().max_deviation_ns as f64 + self.quantization_ns() + 1.0)
    }

    /// What a tick's granularity adds to every bound: one tick at the slowest
    /// rate assumed (the nominal period plus 1%). A timestamp stands for the
    /// interval of one tick, and so does an anchor's.
    pub fn quantization_ns(&self) -> f64 {
        self.period_ns * (1.0 + RATE_TOLERANCE)
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
        // Sign-extend the valid bits (no overflow at 63 bits, unlike
        // subtracting 2^bits).
        let unused = 64 - self.valid_bits;
        ((d << unused) as i64) >> unused
    }

    /// Nanoseconds between two timestamps of one interval, wrap-around handled.
    /// Returns `None` when `end` precedes `start`.
    pub fn interval_ns(&self, start_ticks: u64, end_ticks: u64) -> Option<f64> {
        let d = self.tick_delta(start_ticks, end_ticks);
        (d >= 0).then_some(d as f64 * self.rate_ns_per_tick)
    }

    /// Adds an anchor and refits the rate.
    ///
    /// The anchor's ticks are unwrapped against the newest anchor's using the
    /// CPU time between them. Where the number of wraps cannot be told for
    /// sure (a gap of many wraps, deviations near half a wrap, or ticks that
    /// disagree with the clock by more than the rate tolerance, as after a
    /// counter reset), the older anchors are dropped and the calibration
    /// restarts from this one, with the nominal period.
    ///
    /// Errors ([`InvalidInput::Calibration`]): `cpu_ns` is not after the
    /// newest anchor's; `gpu_ticks` is [`COUNTER_ERROR_VALUE`] or, unwrapped,
    /// not after the newest anchor's. The calibration is unchanged then.
    pub fn add_anchor(&mut self, pair: TimestampPair) -> Result<()> {
        Self::check_ticks(&pair)?;
        let pair = TimestampPair {
            gpu_ticks: pair.gpu_ticks & self.mask(),
            ..pair
        };
        let last = self.newest();
        if pair.cpu_ns <= last.pair.cpu_ns {
            return Err(invalid(
                "cpu_ns",
                pair.cpu_ns,
                "is not after the newest anchor's",
            ));
        }
        match self.unwrap_anchor(&last, &pair) {
            Unwrapped::At(ext) if ext > last.ext => {
                self.anchors.push_back(Anchor { pair, ext });
                while self.anchors.len() > MAX_ANCHORS {
                    self.anchors.pop_front();
                }
                self.refit();
                self.rebuild_points();
            }
            Unwrapped::At(_) => {
                return Err(invalid(
                    "gpu_ticks",
                    pair.gpu_ticks,
                    "does not advance past the newest anchor's",
                ))
            }
            Unwrapped::Ambiguous => self.restart(pair),
        }
        Ok(())
    }

    /// Forgets every anchor and starts over from `pair` (ticks masked).
    fn restart(&mut self, pair: TimestampPair) {
        let pair = TimestampPair {
            gpu_ticks: pair.gpu_ticks & self.mask(),
            ..pair
        };
        self.anchors.clear();
        self.anchors.push_back(Anchor {
            pair,
            ext: i128::from(pair.gpu_ticks),
        });
        self.rate_ns_per_tick = self.period_ns;
        self.rate_uncertainty = self.period_ns * UNMEASURED_DRIFT;
        self.rebuild_points();
    }

    /// Rebuilds [`Calibration::points`] from the anchors (at most
    /// [`MAX_ANCHORS`], as `add_anchor` and `restart` leave them).
    fn rebuild_points(&mut self) {
        let newest = self.newest();
        let n = self.anchors.len();
        let mut points = Points {
            n: 0,
            quantization_ns: self.quantization_ns(),
            newest_ticks: newest.pair.gpu_ticks,
            ..Points::EMPTY
        };
        let span = self.anchors.front().map_or(0, |a| newest.ext - a.ext);
        if n > MAX_ANCHORS || !(0..=MAX_FAST_SPAN).contains(&span) {
            self.points = points;
            return;
        }
        let mut prev: Option<&Anchor> = None;
        for (p, a) in points.at.iter_mut().zip(&self.anchors) {
            // Fits: |a.ext - newest.ext| <= span <= 2^62.
            p.rel = (a.ext - newest.ext) as i64;
            p.cpu_ns = a.pair.cpu_ns;
            p.dev_f = a.pair.max_deviation_ns as f64;
            if let Some(b) = prev {
                // The values the exact path computes for this segment.
                let len = a.ext - b.ext;
                p.len = len as i64;
                p.len_f = i128_f64(len);
                p.span = a.pair.cpu_ns - b.pair.cpu_ns;
                p.span_f = p.span as f64;
                p.seg_dev_f = b.pair.max_deviation_ns.max(a.pair.max_deviation_ns) as f64;
            }
            prev = Some(a);
        }
        points.n = n;
        self.points = points;
        // After the points and the rate it reads (set before every rebuild).
        self.points.hot = HotSegment::of(self);
    }

    /// The extended ticks of `pair`, a newer anchor than `last`.
    fn unwrap_anchor(&self, last: &Anchor, pair: &TimestampPair) -> Unwrapped {
        let wrap = self.wrap();
        let wrap_f = wrap as f64;
        let rate = self.rate_ns_per_tick;
        let dcpu = pair.cpu_ns.saturating_sub(last.pair.cpu_ns) as f64;
        let expected = dcpu / rate;
        let raw = pair.gpu_ticks.wrapping_sub(last.pair.gpu_ticks) & self.mask();
        let k = ((expected - raw as f64) / wrap_f).round();
        if !k.is_finite() || k.abs() > MAX_WRAPS {
            return Unwrapped::Ambiguous;
        }
        let delta = i128::from(raw) + k as i128 * wrap;
        // How far the true tick count may be from `expected`: both anchors'
        // deviations and a tick each, and the rate tolerance over the gap.
        let deviations = last.pair.max_deviation_ns as f64 + pair.max_deviation_ns as f64;
        let tolerance =
            (deviations + dcpu * RATE_TOLERANCE) / (rate * (1.0 - RATE_TOLERANCE)) + 2.0;
        let miss = (delta as f64 - expected).abs();
        if !(tolerance.is_finite() && 2.0 * tolerance < wrap_f && miss <= tolerance) {
            return Unwrapped::Ambiguous;
        }
        match last.ext.checked_add(delta) {
            Some(ext) if ext.abs() <= MAX_EXTENDED => Unwrapped::At(ext),
            _ => Unwrapped::Ambiguous,
        }
    }

    fn refit(&mut self) {
        let (Some(first), Some(last)) = (self.anchors.front(), self.anchors.back()) else {
            return;
        };
        let span_cpu = last.pair.cpu_ns.saturating_sub(first.pair.cpu_ns) as f64;
        let span_ticks = (last.ext - first.ext) as f64;
        let deviations = first.pair.max_deviation_ns as f64 + last.pair.max_deviation_ns as f64;
        // Only trust a measured rate once the anchors' own errors are small
        // against the span: otherwise the nominal period is the better guess.
        if span_ticks > 0.0 && span_cpu > 100.0 * deviations.max(1.0) {
            let measured = span_cpu / span_ticks;
            let nominal_error = (measured - self.period_ns).abs();
            if nominal_error <= self.period_ns * RATE_TOLERANCE {
                // Each anchor is off by its deviation plus up to a tick.
                let uncertainty = (deviations + 2.0 * self.quantization_ns()) / span_ticks;
                self.rate_ns_per_tick = measured;
                self.rate_uncertainty = uncertainty + self.period_ns * RATE_CHANGE;
                return;
            }
        }
        self.rate_ns_per_tick = self.period_ns;
        self.rate_uncertainty = self.period_ns * UNMEASURED_DRIFT;
    }
}
