use crate::error::{Error, InvalidInput, Result};
use crate::results::{CounterResultTimestamp, ResolvedCounters, SampleValue, COUNTER_ERROR_VALUE};
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

/// Largest tick distance between the oldest and the newest anchor for the
/// hot path: every relative tick, segment length and distance it computes
/// then fits in an `i64` (timestamps are within 2^63 ticks of the newest
/// anchor).
const MAX_FAST_SPAN: i128 = 1 << 62;

/// Converts many timestamps with one [`Calibration`]
/// ([`Calibration::converter`]): [`Converter::to_cpu_ns`] is
/// [`Calibration::to_cpu_ns`], inlined into the caller.
#[derive(Debug, Clone, Copy)]
pub struct Converter<'a> {
    calibration: &'a Calibration,
    mask: u64,
    unused: u32,
    newest_ticks: u64,
    /// The segment between the two newest anchors and the time after the
    /// newest, where a frame's timestamps usually lie.
    segment: Option<HotSegment>,
}

/// The segment between the two newest anchors, with what
/// [`Calibration::convert_fast`] would compute for it checked once: every
/// interpolation in it is finite, fits `i64`, and adds to the older
/// anchor's CPU time without overflow. The same operations on the same
/// values as `convert_fast`, so the same result bit for bit.
#[derive(Debug, Clone, Copy, PartialEq)]
struct HotSegment {
    /// The older anchor's ticks relative to the newest (negative).
    rel: i64,
    cpu_ns: u64,
    len: i64,
    len_f: f64,
    /// The CPU span, at most `i64::MAX` and below 9e18.
    span: i64,
    span_f: f64,
    seg_dev_f: f64,
    period_ns: f64,
    quantization_ns: f64,
    /// The newest anchor, for times after it: its CPU time and deviation,
    /// and the calibration's rate and its uncertainty.
    newest_cpu_ns: u64,
    newest_dev_f: f64,
    rate_ns_per_tick: f64,
    rate_uncertainty: f64,
}

impl HotSegment {
    /// The hot paths of `c`: `None` where its anchors take the exact path
    /// (`points.n == 0`). With one anchor, or a segment whose
    /// interpolations might not fit, the segment is empty (`len == 0`).
    fn of(c: &Calibration) -> Option<Self> {
        let pts = &c.points;
        let n = pts.n;
        let b = pts.at.get(..n)?.last()?;
        // No interpolation in the segment can leave `i64`, be NaN, or
        // overflow `a.cpu_ns + offset` (the clamp keeps offsets within the
        // span).
        let a = n.checked_sub(2).map(|k| &pts.at[k]).filter(|a| {
            b.len > 0
                && b.span_f < 9.0e18
                && i64::try_from(b.span).is_ok()
                && a.cpu_ns.checked_add(b.span).is_some_and(|e| e != u64::MAX)
        });
        Some(Self {
            rel: a.map_or(0, |a| a.rel),
            cpu_ns: a.map_or(0, |a| a.cpu_ns),
            len: if a.is_some() { b.len } else { 0 },
            len_f: b.len_f,
            span: b.span as i64,
            span_f: b.span_f,
            seg_dev_f: b.seg_dev_f,
            period_ns: c.period_ns,
            quantization_ns: pts.quantization_ns,
            newest_cpu_ns: b.cpu_ns,
            newest_dev_f: b.dev_f,
            rate_ns_per_tick: c.rate_ns_per_tick,
            rate_uncertainty: c.rate_uncertainty,
        })
    }

    /// `convert_fast`'s extrapolation of the tick `d >= 0` past the newest
    /// anchor, where it is finite and fits (otherwise `convert_fast`
    /// decides, errors included).
    #[inline(always)]
    fn convert_after(&self, d: i64) -> Option<CalibratedTime> {
        let dd = d as f64;
        let offset = dd * self.rate_ns_per_tick;
        // `offset` is finite and `>= 0`: `dd` is a finite non-negative
        // value and the rate finite and positive.
        if offset >= 9.0e18 {
            return None;
        }
        Some(CalibratedTime {
            ns: self.time_after(offset)?,
            error_bound_ns: self.bound_after(dd, offset),
        })
    }

    /// [`HotSegment::convert_after`] of `d0` and `d1` (`0 <= d0 <= d1`):
    /// both times, and the bound of `d1`, which is the larger. The bound
    /// grows with `d`: each of its operations is monotone in `d` (IEEE
    /// rounding is), and so is the ceiling. The same operations as
    /// `convert_after` on each, so the same results bit for bit.
    #[inline(always)]
    fn convert_after_span(&self, d0: i64, d1: i64) -> Option<(u64, u64, u64)> {
        let (x0, x1) = (d0 as f64, d1 as f64);
        let (o0, o1) = (x0 * self.rate_ns_per_tick, x1 * self.rate_ns_per_tick);
        // `0 <= o0 <= o1`, both finite: one range check covers both.
        if o1 >= 9.0e18 {
            return None;
        }
        let (ns0, ns1) = (self.time_after(o0)?, self.time_after(o1)?);
        Some((ns0, ns1, self.bound_after(x1, o1)))
    }

    /// The CPU time `offset` (in `0..9e18`) ns after the newest anchor:
    /// `round_i64(offset)` without its range check, where the sum fits
    /// below `u64::MAX`.
    #[inline(always)]
    fn time_after(&self, offset: f64) -> Option<u64> {
        let t = trunc_i64(offset);
        let offset_ns = (t + i64::from(offset - t as f64 >= 0.5)) as u64;
        self.newest_cpu_ns
            .checked_add(offset_ns)
            .filter(|&ns| ns != u64::MAX)
    }

    /// The bound of the tick `dd` past the newest anchor, `offset` ns after it.
    #[inline(always)]
    fn bound_after(&self, dd: f64, offset: f64) -> u64 {
        let bound = self.newest_dev_f + dd.abs() * self.rate_uncertainty;
        ceil_saturating(bound + self.quantization_ns + 1.0 + offset.abs() * F64_ERROR)
    }

    /// `convert_fast`'s interpolation of the tick `d` (relative to the
    /// newest anchor), if it lies in this segment.
    #[inline(always)]
    fn convert(&self, d: i64) -> Option<CalibratedTime> {
        self.interpolate(d).map(|(ns, bound)| CalibratedTime {
            ns,
            error_bound_ns: ceil_saturating(bound),
        })
    }

    /// [`HotSegment::convert`] with its bound before the ceiling: the
    /// time, and the bound as a finite `f64` (every term is finite), so
    /// that a span takes one ceiling of its larger bound (the ceiling is
    /// monotone: the larger ceiling is the ceiling of the larger).
    #[inline(always)]
    fn interpolate(&self, d: i64) -> Option<(u64, f64)> {
        let along = d.wrapping_sub(self.rel);
        // One comparison for `0 <= along < len`: where `d < rel`, `along`
        // is negative (`rel <= 0`, so `d - rel` cannot pass `i64::MIN`),
        // and where `d - rel` overflows it wraps negative too.
        if along as u64 >= self.len as u64 {
            return None;
        }
        let offset = along as f64 / self.len_f * self.span_f;
        let nearer = along.min(self.len - along) as f64;
        let bound = self.seg_dev_f + nearer * self.period_ns * RATE_CHANGE;
        // `offset` is in `0..=span_f` (checked finite and below 9e18): this
        // is `round_i64(offset).clamp(0, span)` without the range check.
        let t = trunc_i64(offset);
        let offset_ns = (t + i64::from(offset - t as f64 >= 0.5)).min(self.span);
        let bound = bound + self.quantization_ns + 1.0 + offset.abs() * F64_ERROR;
        // No overflow, and not `u64::MAX`: checked for the whole span.
        Some((self.cpu_ns + offset_ns as u64, bound))
    }
}

impl Converter<'_> {
    /// [`Calibration::to_cpu_ns`] of `ticks`: the same result.
    #[inline(always)]
    pub fn to_cpu_ns(&self, ticks: u64) -> Result<CalibratedTime, ConversionError> {
        if ticks == COUNTER_ERROR_VALUE {
            return Err(ConversionError::ErrorValue);
        }
        let d = self.delta(ticks);
        if let Some(hot) = &self.segment {
            let t = if d >= 0 {
                hot.convert_after(d)
            } else {
                hot.convert(d)
            };
            if let Some(t) = t {
                return Ok(t);
            }
        }
        let c = self.calibration;
        match c.convert_fast(ticks, d) {
            Some(r) => r,
            None => c.convert(ticks, c.newest().ext + i128::from(d)),
        }
    }

    /// The times of a span's `start` and `end` ticks and the larger of
    /// their two bounds: what [`Converter::to_cpu_ns`] gives for each, bit
    /// for bit, the first error if either fails. A span after the newest
    /// anchor (a frame between refits), start first, computes its bound
    /// once; a span in the hot segment takes its interpolation at once.
    #[inline(always)]
    pub fn span_to_cpu_ns(&self, start: u64, end: u64) -> Result<(u64, u64, u64), ConversionError> {
        if let Some(hot) = &self.segment {
            if start != COUNTER_ERROR_VALUE && end != COUNTER_ERROR_VALUE {
                let (d0, d1) = (self.delta(start), self.delta(end));
                if 0 <= d0 && d0 <= d1 {
                    if let Some(r) = hot.convert_after_span(d0, d1) {
                        return Ok(r);
                    }
                } else if d0 < 0 && d1 < 0 {
                    // Both before the newest anchor (a frame's times once
                    // the calibration was refitted after it): what
                    // `to_cpu_ns` does for each, without its checks and
                    // delta again.
                    if let (Some((ns0, b0)), Some((ns1, b1))) =
                        (hot.interpolate(d0), hot.interpolate(d1))
                    {
                        return Ok((ns0, ns1, ceil_saturating(b0.max(b1))));
                    }
                }
            }
        }
        let (a, b) = (self.to_cpu_ns(start)?, self.to_cpu_ns(end)?);
        Ok((a.ns, b.ns, a.error_bound_ns.max(b.error_bound_ns)))
    }

    /// `Calibration::tick_delta` of `ticks` from the newest anchor.
    #[inline(always)]
    fn delta(&self, ticks: u64) -> i64 {
        let delta = (ticks & self.mask).wrapping_sub(self.newest_ticks) & self.mask;
        ((delta << self.unused) as i64) >> self.unused
    }
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

    /// Maps a GPU timestamp (raw ticks; bits above the valid ones are
    /// ignored) onto `CLOCK_MONOTONIC` nanoseconds. The timestamp is
    /// unwrapped to within half a wrap of the newest anchor.
    ///
    /// Errors: [`ConversionError::ErrorValue`] for [`COUNTER_ERROR_VALUE`];
    /// [`ConversionError::BeforeZero`] and [`ConversionError::TooLate`] where
    /// the time does not fit in `0..u64::MAX`.
    pub fn to_cpu_ns(&self, ticks: u64) -> Result<CalibratedTime, ConversionError> {
        self.converter().to_cpu_ns(ticks)
    }

    /// A converter of many timestamps with this calibration: the same
    /// results as [`Calibration::to_cpu_ns`], compiled into the caller's
    /// loop (for a frame's timestamps).
    pub fn converter(&self) -> Converter<'_> {
        Converter {
            calibration: self,
            mask: self.mask(),
            unused: 64 - self.valid_bits,
            newest_ticks: self.points.newest_ticks,
            segment: self.points.hot,
        }
    }

    /// As [`Calibration::to_cpu_ns`], but unwraps the timestamp to within
    /// half a wrap of the tick the calibration expects at CPU time
    /// `cpu_hint_ns` (for example, when the work was submitted), rather than
    /// of the newest anchor. The hint must be within half a wrap period of
    /// the timestamp's true time, less the rate's error over the distance.
    pub fn to_cpu_ns_near(
        &self,
        ticks: u64,
        cpu_hint_ns: u64,
    ) -> Result<CalibratedTime, ConversionError> {
        if ticks == COUNTER_ERROR_VALUE {
            return Err(ConversionError::ErrorValue);
        }
        let newest = self.newest();
        let guess = (i128::from(cpu_hint_ns) - i128::from(newest.pair.cpu_ns)) as f64
            / self.rate_ns_per_tick;
        if !guess.is_finite() || guess.abs() > MAX_EXTENDED as f64 {
            return Err(if guess < 0.0 {
                ConversionError::BeforeZero { ticks }
            } else {
                ConversionError::TooLate { ticks }
            });
        }
        let center = newest.ext + guess as i128;
        // Two's complement: the low bits of `center`, modulo 2^valid_bits.
        let center_ticks = (center & i128::from(self.mask())) as u64;
        let d = self.tick_delta(center_ticks, ticks & self.mask());
        self.convert(ticks, center + i128::from(d))
    }

    /// [`Calibration::convert`] of the extended tick `newest.ext + d`, in
    /// `i64` and with the segment's values precomputed: the same operations
    /// on the same values, so the same result bit for bit. `None` where it
    /// cannot tell (anchors too far apart, or an offset near `u64::MAX` ns):
    /// the exact path decides then.
    #[inline(always)]
    fn convert_fast(&self, ticks: u64, d: i64) -> Option<Result<CalibratedTime, ConversionError>> {
        let pts = &self.points;
        let n = pts.n;
        let at = pts.at.get(..n)?;
        let (newest, oldest) = (at.last()?, at.first()?);
        // As in `convert`: the number of anchors at or before the tick.
        let i = if newest.rel <= d {
            n
        } else if n >= 2 && at[n - 2].rel <= d {
            n - 1
        } else {
            at.partition_point(|p| p.rel <= d)
        };
        let (base, offset, most, bound) = if i == 0 || i >= n {
            let a = if i == 0 { oldest } else { newest };
            // No overflow: d >= -2^63, and a.rel <= 0.
            let dd = d.checked_sub(a.rel)? as f64;
            let bound = a.dev_f + dd.abs() * self.rate_uncertainty;
            (a.cpu_ns, dd * self.rate_ns_per_tick, None, bound)
        } else {
            let (a, b) = (&at[i - 1], &at[i]);
            // 0 <= along < b.len.
            let along = d.checked_sub(a.rel)?;
            let offset = along as f64 / b.len_f * b.span_f;
            let nearer = along.min(b.len - along) as f64;
            let bound = b.seg_dev_f + nearer * self.period_ns * RATE_CHANGE;
            (a.cpu_ns, offset, Some(b.span), bound)
        };
        if offset.is_nan() || offset.abs() >= 9.0e18 {
            // Not finite, or out of `i64`: the exact path's checks.
            return None;
        }
        let mut offset_ns = round_i64(offset);
        if let Some(span) = most {
            // Interpolation never passes the segment's end.
            offset_ns = offset_ns.clamp(0, i64::try_from(span).ok()?);
        }
        let ns = match base.checked_add_signed(offset_ns) {
            Some(ns) if ns != u64::MAX => ns,
            _ => {
                return Some(Err(if offset < 0.0 {
                    ConversionError::BeforeZero { ticks }
                } else {
                    ConversionError::TooLate { ticks }
                }))
            }
        };
        let bound = bound + pts.quantization_ns + 1.0 + offset.abs() * F64_ERROR;
        Some(Ok(CalibratedTime {
            ns,
            error_bound_ns: ceil_saturating(bound),
        }))
    }

    /// Converts the extended tick `x` (of the raw timestamp `ticks`): the
    /// exact path, in `i128`, for any anchors (out of line: the hot path
    /// is inlined without it).
    #[inline(never)]
    fn convert(&self, ticks: u64, x: i128) -> Result<CalibratedTime, ConversionError> {
        let n = self.anchors.len();
        // Most times lie after the newest anchor or between the two newest:
        // those need no search.
        let i = match (
            self.anchors.back(),
            n.checked_sub(2).map(|k| &self.anchors[k]),
        ) {
            (Some(b), _) if b.ext <= x => n,
            (Some(_), Some(a)) if a.ext <= x => n - 1,
            _ => self.anchors.partition_point(|a| a.ext <= x),
        };
        // The anchor converted from, the offset from it in nanoseconds, the
        // most the offset may be, and the bound before quantization.
        let (base, offset, most, bound) = if i == 0 || i >= n {
            let a = if i == 0 {
                self.anchors[0]
            } else {
                self.newest()
            };
            let d = i128_f64(x - a.ext);
            let bound = a.pair.max_deviation_ns as f64 + d.abs() * self.rate_uncertainty;
            (a.pair.cpu_ns, d * self.rate_ns_per_tick, None, bound)
        } else {
            let (a, b) = (self.anchors[i - 1], self.anchors[i]);
            let len = b.ext - a.ext;
            let along = x - a.ext;
            let span = b.pair.cpu_ns - a.pair.cpu_ns;
            let offset = i128_f64(along) / i128_f64(len) * span as f64;
            let nearer = i128_f64(along.min(len - along));
            let bound = a.pair.max_deviation_ns.max(b.pair.max_deviation_ns) as f64
                + nearer * self.period_ns * RATE_CHANGE;
            (a.pair.cpu_ns, offset, Some(span), bound)
        };
        let out_of_range = || {
            if offset < 0.0 {
                ConversionError::BeforeZero { ticks }
            } else {
                ConversionError::TooLate { ticks }
            }
        };
        if !offset.is_finite() || offset.abs() >= u64::MAX as f64 {
            return Err(out_of_range());
        }
        let mut offset_ns = f64_i128(offset.round());
        if let Some(span) = most {
            // Interpolation never passes the segment's end.
            offset_ns = offset_ns.clamp(0, i128::from(span));
        }
        let ns = i128::from(base) + offset_ns;
        if ns < 0 || ns >= i128::from(u64::MAX) {
            return Err(out_of_range());
        }
        // One tick, rounding to an integer, and the f64 arithmetic's error.
        let bound = bound + self.quantization_ns() + 1.0 + offset.abs() * F64_ERROR;
        Ok(CalibratedTime {
            ns: ns as u64,
            error_bound_ns: ceil_saturating(bound),
        })
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

    fn cal(period: f64, bits: u32, first: TimestampPair) -> Calibration {
        Calibration::new(CalibrationMethod::CalibratedPair, period, bits, first)
            .expect("valid calibration")
    }

    /// An exact GPU clock: at CPU time `t` it reads
    /// `floor((t - t0) * (1 + drift) / period) + start`, masked to `bits`.
    #[derive(Debug, Clone, Copy)]
    struct Clock {
        t0: u64,
        start: u64,
        drift: f64,
        period: f64,
        bits: u32,
    }

    impl Clock {
        /// Unwrapped ticks at `t`.
        fn ext(&self, t: u64) -> i128 {
            let elapsed = t as f64 - self.t0 as f64;
            (elapsed * (1.0 + self.drift) / self.period).floor() as i128 + i128::from(self.start)
        }
        /// Masked ticks at `t`.
        fn ticks(&self, t: u64) -> u64 {
            (self.ext(t) & ((1i128 << self.bits) - 1)) as u64
        }
        /// An anchor read at `t`, its CPU time off by `offset`.
        fn anchor(&self, t: u64, offset: i64, dev: u64) -> TimestampPair {
            pair(t.saturating_add_signed(offset), self.ticks(t), dev)
        }
    }

    /// Asserts that `t` (a conversion of a timestamp taken at `truth`) holds
    /// the truth inside its bound.
    fn assert_within(t: CalibratedTime, truth: u64, what: &str) {
        let err = (i128::from(t.ns) - i128::from(truth)).unsigned_abs();
        assert!(
            err <= u128::from(t.error_bound_ns),
            "{what}: error {err} ns over bound {} ns",
            t.error_bound_ns
        );
    }

    #[test]
    fn converts_with_period() {
        let c = Calibration::new(
            CalibrationMethod::Bracketing,
            2.0,
            64,
            pair(1_000_000, 500, 10),
        )
        .unwrap();
        let t = c.to_cpu_ns(1500).unwrap();
        assert_eq!(t.ns, 1_002_000);
        // 10 ns deviation + 1000 ticks * 2 ns * 200 ppm + one tick + rounding.
        assert!(t.error_bound_ns >= 12 && t.error_bound_ns <= 16, "{t:?}");
    }

    #[test]
    fn handles_wraparound_on_32_bits() {
        let c = cal(1.0, 32, pair(10_000_000_000, u32::MAX as u64 - 99, 5));
        // 200 ticks later the counter has wrapped to 100.
        assert_eq!(c.to_cpu_ns(100).unwrap().ns, 10_000_000_200);
        assert_eq!(c.interval_ns(u32::MAX as u64 - 10, 20), Some(31.0));
        assert_eq!(c.interval_ns(20, 10), None);
        // Bits above the valid ones are ignored.
        assert_eq!(c.to_cpu_ns((1u64 << 40) | 100).unwrap().ns, 10_000_000_200);
    }

    #[test]
    fn refit_tracks_drift_inside_bound() {
        // The GPU clock runs 50 ppm fast against the nominal 1 ns period.
        let clock = Clock {
            t0: 1_000_000_000,
            start: 7_000,
            drift: 50e-6,
            period: 1.0,
            bits: 64,
        };
        let mut c = cal(1.0, 64, clock.anchor(1_000_000_000, 0, 20));
        let mut cpu = 1_000_000_000u64;
        for _ in 0..40 {
            cpu += REFIT_INTERVAL_NS;
            assert!(c.needs_refit(cpu));
            c.add_anchor(clock.anchor(cpu, 0, 20)).unwrap();
            // A timestamp halfway to the next refit must convert inside its bound.
            let probe = cpu + REFIT_INTERVAL_NS / 2;
            assert_within(c.to_cpu_ns(clock.ticks(probe)).unwrap(), probe, "probe");
        }
        let true_rate = 1.0 / (1.0 + 50e-6);
        assert!((c.rate_ns_per_tick() - true_rate).abs() < 1e-6);
    }

    /// Regression: `tick_delta` overflowed (a panic in debug) at 63 bits.
    #[test]
    fn tick_delta_at_63_bits() {
        let c = cal(1.0, 63, pair(1_000, 0, 0));
        assert_eq!(c.tick_delta(0, (1 << 63) - 1), -1);
        assert_eq!(c.tick_delta(0, 1 << 62), -(1 << 62));
        assert_eq!(c.tick_delta(5, 3), -2);
        assert_eq!(cal(1.0, 1, pair(1, 0, 0)).tick_delta(0, 1), -1);
        assert_eq!(cal(1.0, 64, pair(1, 0, 0)).tick_delta(0, u64::MAX), -1);
        let far = c.to_cpu_ns((1 << 62) - 1).unwrap();
        assert!(far.ns.abs_diff(1_000 + (1 << 62) - 1) <= far.error_bound_ns);
    }

    /// Regression (item 10): stale anchors were silently ignored.
    #[test]
    fn stale_anchor_is_refused() {
        let mut c =
            Calibration::new(CalibrationMethod::Bracketing, 1.0, 64, pair(100, 5, 1)).unwrap();
        for stale in [pair(50, 1, 1), pair(100, 6, 1)] {
            let e = c.add_anchor(stale).unwrap_err();
            assert!(
                matches!(
                    e,
                    Error::Invalid(InvalidInput::Calibration {
                        field: "cpu_ns",
                        ..
                    })
                ),
                "{e}"
            );
        }
        assert_eq!(c.anchors().count(), 1);
    }

    /// Regression (item 10): ticks that, unwrapped, do not advance are refused.
    #[test]
    fn non_advancing_ticks_are_refused() {
        let mut c = cal(1.0, 64, pair(1_000, 500, 50));
        let e = c.add_anchor(pair(1_010, 500, 50)).unwrap_err();
        assert!(
            matches!(
                e,
                Error::Invalid(InvalidInput::Calibration {
                    field: "gpu_ticks",
                    ..
                })
            ),
            "{e}"
        );
        let e = c
            .add_anchor(pair(1_010, COUNTER_ERROR_VALUE, 50))
            .unwrap_err();
        assert!(matches!(
            e,
            Error::Invalid(InvalidInput::Calibration {
                field: "gpu_ticks",
                ..
            })
        ));
        assert_eq!(c.anchors().count(), 1);
    }

    /// Regression (item 10): `to_cpu_ns(COUNTER_ERROR_VALUE)` was 0 ns.
    #[test]
    fn error_value_is_a_typed_error() {
        for bits in [32, 48, 64] {
            let c = cal(1.0, bits, pair(1_000_000_000, 100, 5));
            assert_eq!(
                c.to_cpu_ns(COUNTER_ERROR_VALUE),
                Err(ConversionError::ErrorValue)
            );
            assert_eq!(
                c.to_cpu_ns_near(COUNTER_ERROR_VALUE, 1_000_000_000),
                Err(ConversionError::ErrorValue)
            );
        }
        // A first anchor holding the error value is refused too.
        let e = Calibration::new(
            CalibrationMethod::Bracketing,
            1.0,
            64,
            pair(1, COUNTER_ERROR_VALUE, 0),
        )
        .unwrap_err();
        assert!(matches!(
            e,
            Error::Invalid(InvalidInput::Calibration {
                field: "gpu_ticks",
                ..
            })
        ));
    }

    /// The conversion error converts into hal's error with `?`.
    #[test]
    fn conversion_error_converts_with_question_mark() {
        fn start_ns(c: &Calibration, ticks: u64) -> Result<u64> {
            Ok(c.to_cpu_ns(ticks)?.ns)
        }
        let c = cal(1.0, 64, pair(1_000_000_000, 100, 5));
        assert_eq!(start_ns(&c, 200), Ok(1_000_000_100));
        let e = start_ns(&c, COUNTER_ERROR_VALUE).unwrap_err();
        assert_eq!(e.kind(), crate::CounterErrorKind::Invalid);
        assert_eq!(
            e.invalid(),
            Some(&InvalidInput::TimestampConversion(
                ConversionError::ErrorValue
            ))
        );
    }

    /// Regression (item 10): NaN, infinite, zero and negative periods were
    /// accepted (and valid bits were clamped silently).
    #[test]
    fn bad_period_and_valid_bits_are_refused() {
        for period in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 0.0, -0.0, -1.0] {
            let e = Calibration::new(CalibrationMethod::Bracketing, period, 64, pair(1, 0, 0))
                .unwrap_err();
            assert!(
                matches!(
                    &e,
                    Error::Invalid(InvalidInput::Calibration {
                        field: "period_ns",
                        ..
                    })
                ),
                "{period}: {e}"
            );
        }
        for bits in [0, 65, u32::MAX] {
            let e = Calibration::new(CalibrationMethod::Bracketing, 1.0, bits, pair(1, 0, 0))
                .unwrap_err();
            assert!(
                matches!(
                    &e,
                    Error::Invalid(InvalidInput::Calibration {
                        field: "valid_bits",
                        ..
                    })
                ),
                "{bits}: {e}"
            );
        }
    }

    /// Regression (item 10): a max deviation of `u64::MAX` overflowed (a panic
    /// in debug, a bound of 0 in release). Bounds saturate instead.
    #[test]
    fn max_deviation_of_u64_max_saturates() {
        let mut c = cal(1.0, 64, pair(1_000_000_000, 0, u64::MAX));
        assert_eq!(c.error_bound_ns(), u64::MAX);
        assert_eq!(c.to_cpu_ns(10).unwrap().error_bound_ns, u64::MAX);
        c.add_anchor(pair(1_250_000_000, 250_000_000, u64::MAX))
            .unwrap();
        assert_eq!(c.error_bound_ns(), u64::MAX);
        assert_eq!(c.to_cpu_ns(300_000_000).unwrap().error_bound_ns, u64::MAX);
        // A good calibration given such an anchor.
        let mut c = cal(1.0, 64, pair(1_000_000_000, 0, 10));
        c.add_anchor(pair(1_250_000_000, 250_000_000, 10)).unwrap();
        c.add_anchor(pair(1_500_000_000, 500_000_000, u64::MAX))
            .unwrap();
        assert_eq!(c.error_bound_ns(), u64::MAX);
        assert_eq!(c.to_cpu_ns(600_000_000).unwrap().error_bound_ns, u64::MAX);
    }

    /// Regression (item 10): far-future ticks saturated into `u64::MAX` (the
    /// error value) and times before 0 into 0.
    #[test]
    fn out_of_range_conversions_are_typed_errors() {
        let c = cal(100.0, 64, pair(1_000_000_000, 0, 5));
        assert_eq!(
            c.to_cpu_ns(1 << 62),
            Err(ConversionError::TooLate { ticks: 1 << 62 })
        );
        let t = (u64::MAX - 1_000_000_000) / 100 + 1;
        assert_eq!(c.to_cpu_ns(t), Err(ConversionError::TooLate { ticks: t }));
        assert!(c.to_cpu_ns(t - 1_000).unwrap().ns > u64::MAX - 200_000);
        let c = cal(1.0, 64, pair(1_000, 1_000_000, 5));
        assert_eq!(
            c.to_cpu_ns(0),
            Err(ConversionError::BeforeZero { ticks: 0 })
        );
        assert_eq!(c.to_cpu_ns(999_000).unwrap().ns, 0);
        assert_eq!(
            c.to_cpu_ns_near(1 << 40, u64::MAX),
            Err(ConversionError::TooLate { ticks: 1 << 40 })
        );
    }

    /// Regression (item 10): with anchors 50 ns apart the nearest-anchor
    /// choice made a later tick convert to an earlier time, and a 20-tick
    /// interval across the switch to a negative duration.
    #[test]
    fn close_anchors_convert_monotonically() {
        let mut c = cal(1.0, 64, pair(1_000, 0, 30));
        c.add_anchor(pair(1_050, 80, 30)).unwrap();
        c.add_anchor(pair(1_100, 130, 30)).unwrap();
        assert_eq!(c.anchors().count(), 3);
        let mut last = 0;
        for ticks in 0..400 {
            let t = c.to_cpu_ns(ticks).unwrap();
            assert!(t.ns >= last, "tick {ticks} at {} before {last}", t.ns);
            last = t.ns;
        }
        let (start, end) = (c.to_cpu_ns(30).unwrap(), c.to_cpu_ns(50).unwrap());
        assert!(end.ns > start.ns, "{start:?} {end:?}");
        // Interpolated: the anchors' own times at their ticks.
        assert_eq!(c.to_cpu_ns(80).unwrap().ns, 1_050);
        assert_eq!(c.to_cpu_ns(40).unwrap().ns, 1_025);
    }

    /// Regression (item 11): with 32 valid bits, 1 ns ticks and anchors every
    /// 260 ms, a timestamp 197.6 ms after the newest anchor converted one full
    /// wrap off (the oldest anchor was "nearest" modulo the wrap).
    #[test]
    fn narrow_timestamp_after_newest_anchor_is_not_a_wrap_off() {
        let clock = Clock {
            t0: 5_000_000_000,
            start: 0,
            drift: 0.0,
            period: 1.0,
            bits: 32,
        };
        let t_first = 10_000_000_000u64;
        let mut c = cal(1.0, 32, clock.anchor(t_first, 0, 20));
        for k in 1..16 {
            c.add_anchor(clock.anchor(t_first + k * 260_000_000, 0, 20))
                .unwrap();
        }
        assert_eq!(c.anchors().count(), 16);
        let probe = c.latest().cpu_ns + 197_600_000;
        let t = c.to_cpu_ns(clock.ticks(probe)).unwrap();
        assert_within(t, probe, "197.6 ms after the newest anchor");
        assert!(t.error_bound_ns < 10_000, "{t:?}");
    }

    /// Regression (item 11): with 0.5 ns ticks, 32 bits and anchors every
    /// `REFIT_INTERVAL_NS`, about 1.5% of conversions were a wrap off.
    #[test]
    fn half_ns_ticks_at_refit_interval_stay_inside_bound() {
        let clock = Clock {
            t0: 1_000_000_000,
            start: 123_456_789,
            drift: 30e-6,
            period: 0.5,
            bits: 32,
        };
        let t_first = 3_000_000_000u64;
        let mut c = cal(0.5, 32, clock.anchor(t_first, 3, 10));
        let mut probes = 0;
        for k in 1..40u64 {
            let t = t_first + k * REFIT_INTERVAL_NS;
            c.add_anchor(clock.anchor(t, -4, 10)).unwrap();
            // From 1 s before the anchor to the next refit.
            for p in (t - 1_000_000_000..t + REFIT_INTERVAL_NS).step_by(997_001) {
                if p < t_first {
                    continue;
                }
                let conv = c.to_cpu_ns(clock.ticks(p)).unwrap();
                assert_within(conv, p, "probe");
                probes += 1;
            }
        }
        assert!(probes > 40_000);
    }

    /// A gap too long to count the wraps in (a 16-bit counter wraps every
    /// 65 µs at 1 ns) or a counter reset restarts from the new anchor.
    #[test]
    fn ambiguous_unwrap_restarts_from_the_new_anchor() {
        let clock = Clock {
            t0: 0,
            start: 0,
            drift: 10e-6,
            period: 1.0,
            bits: 16,
        };
        let mut c = cal(1.0, 16, clock.anchor(1_000_000_000, 0, 5));
        c.add_anchor(clock.anchor(1_250_000_000, 0, 5)).unwrap();
        assert_eq!(c.anchors().count(), 1);
        let probe = 1_250_010_000;
        assert_within(c.to_cpu_ns(clock.ticks(probe)).unwrap(), probe, "16 bits");
        // A counter reset on a 64-bit counter.
        let mut c = cal(1.0, 64, pair(1_000_000_000, 900_000_000, 5));
        c.add_anchor(pair(1_250_000_000, 5, 5)).unwrap();
        assert_eq!(c.anchors().count(), 1);
        assert_eq!(c.to_cpu_ns(105).unwrap().ns, 1_250_000_100);
    }

    /// Outside the window around the newest anchor, a CPU-time hint picks
    /// the wrap.
    #[test]
    fn to_cpu_ns_near_unwraps_around_the_hint() {
        let clock = Clock {
            t0: 0,
            start: 77,
            drift: -20e-6,
            period: 1.0,
            bits: 32,
        };
        let t_first = 10_000_000_000u64;
        let mut c = cal(1.0, 32, clock.anchor(t_first, 0, 10));
        for k in 1..16 {
            c.add_anchor(clock.anchor(t_first + k * REFIT_INTERVAL_NS, 0, 10))
                .unwrap();
        }
        // 3 s before the newest anchor: more than half the 4.29 s wrap.
        let probe = c.latest().cpu_ns - 3_000_000_000;
        let far = c.to_cpu_ns(clock.ticks(probe)).unwrap();
        assert!(far.ns > probe + 4_000_000_000, "{far:?}");
        let near = c
            .to_cpu_ns_near(clock.ticks(probe), probe + 50_000_000)
            .unwrap();
        assert_within(near, probe, "near the hint");
    }

    /// The exact (`i128`) conversion the hot path must match.
    fn exact(c: &Calibration, ticks: u64) -> Result<CalibratedTime, ConversionError> {
        if ticks == COUNTER_ERROR_VALUE {
            return Err(ConversionError::ErrorValue);
        }
        let newest = c.newest();
        let d = c.tick_delta(newest.pair.gpu_ticks, ticks & c.mask());
        c.convert(ticks, newest.ext + i128::from(d))
    }

    /// A small deterministic generator (xorshift64*).
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
    }

    /// Ticks worth probing for `c`: every anchor's ticks and their
    /// neighbours, the middle of every segment, the half-wrap edges around
    /// the newest anchor, far before and after, and random ticks.
    fn probes(c: &Calibration, rng: &mut Rng) -> Vec<u64> {
        let mask = c.mask();
        let newest = c.latest().gpu_ticks;
        let mut out = vec![0, 1, mask, mask - 1, COUNTER_ERROR_VALUE, u64::MAX - 1];
        let anchors: Vec<u64> = c.anchors().map(|a| a.gpu_ticks).collect();
        for w in anchors.windows(2) {
            let mid = w[0].wrapping_add(w[1].wrapping_sub(w[0]) & mask) / 2;
            out.push(mid & mask);
        }
        for &a in &anchors {
            for off in [0u64, 1, 2, 3, 7, 1000, 1 << 20, 1 << 31, 1 << 40] {
                out.push(a.wrapping_add(off) & mask);
                out.push(a.wrapping_sub(off) & mask);
            }
        }
        let half = if c.valid_bits() >= 64 {
            1u64 << 63
        } else {
            1u64 << (c.valid_bits() - 1)
        };
        for off in [0u64, 1, 2] {
            out.push(newest.wrapping_add(half).wrapping_add(off) & mask);
            out.push(newest.wrapping_add(half).wrapping_sub(off) & mask);
        }
        for _ in 0..2000 {
            let r = rng.next();
            out.push(r & mask);
            // Near the newest anchor, within a few scales.
            let near = r % (1 << (rng.next() % 40));
            out.push(newest.wrapping_add(near) & mask);
            out.push(newest.wrapping_sub(near) & mask);
            // With bits above the valid ones set.
            out.push(r | !mask);
        }
        out
    }

    /// Calibrations over a range of periods, valid bits, drifts, deviations
    /// and anchor counts, built the way a device refits them.
    fn calibrations() -> Vec<Calibration> {
        let mut out = Vec::new();
        for &bits in &[1u32, 8, 16, 32, 36, 48, 56, 63, 64] {
            for &period in &[1.0, 0.5, 83.333_333, 41.666_666, 10.0, 1e-3] {
                for &(drift, dev) in &[(0.0, 0u64), (50e-6, 20), (-150e-6, 3_000)] {
                    for &anchors in &[1usize, 2, 3, 16, 24] {
                        let clock = Clock {
                            t0: 1_000_000_000,
                            start: 123_456_789,
                            drift,
                            period,
                            bits,
                        };
                        let t = 2_000_000_000u64;
                        let mut c = cal(period, bits, clock.anchor(t, 0, dev));
                        for k in 1..anchors as u64 {
                            // Ambiguous unwraps restart: fine, still a calibration.
                            let _ = c.add_anchor(clock.anchor(
                                t + k * REFIT_INTERVAL_NS,
                                (k % 3) as i64 - 1,
                                dev,
                            ));
                        }
                        out.push(c);
                    }
                }
            }
        }
        out
    }

    /// The hot path (`to_cpu_ns`) gives the exact path's result bit for bit,
    /// errors included, over wide tick ranges, wraps and narrow valid bits.
    #[test]
    fn fast_conversion_matches_exact() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let (mut compared, mut fast) = (0u64, 0u64);
        let (mut hot_after, mut hot_between) = (0u64, 0u64);
        for c in calibrations() {
            for ticks in probes(&c, &mut rng) {
                let want = exact(&c, ticks);
                assert_eq!(c.to_cpu_ns(ticks), want, "ticks {ticks} of {c:?}");
                compared += 1;
                let d = c.tick_delta(c.points.newest_ticks, ticks & c.mask());
                if ticks != COUNTER_ERROR_VALUE && c.convert_fast(ticks, d).is_some() {
                    fast += 1;
                }
                if let Some(hot) = c
                    .converter()
                    .segment
                    .filter(|_| ticks != COUNTER_ERROR_VALUE)
                {
                    let t = if d >= 0 {
                        hot.convert_after(d)
                    } else {
                        hot.convert(d)
                    };
                    if let Some(t) = t {
                        // Taken before `convert_fast`: it must agree with it.
                        assert_eq!(Ok(t), want, "hot path, ticks {ticks} of {c:?}");
                        if d >= 0 {
                            hot_after += 1;
                        } else {
                            hot_between += 1;
                        }
                    }
                }
            }
        }
        assert!(compared > 5_000_000, "{compared}");
        // Nearly every conversion takes the hot path (the others are mostly
        // random ticks whose times fall out of `u64` ns, an error either way).
        assert!(fast * 100 > compared * 90, "{fast} of {compared}");
        // Both of the converter's own paths are taken, often.
        assert!(
            hot_after * 100 > compared * 20 && hot_between * 100 > compared * 5,
            "{hot_after} after, {hot_between} between, of {compared}"
        );
    }

    /// A span's conversion (`span_to_cpu_ns`) is its two ends' conversions
    /// bit for bit, with the larger bound, errors included: spans after the
    /// newest anchor (its own path, taken often), reversed, between anchors,
    /// across wraps and with the error value at either end.
    #[test]
    fn span_conversion_matches_its_ends() {
        let mut rng = Rng(0x2545_f491_4f6c_dd1d);
        let (mut compared, mut own_path, mut in_segment) = (0u64, 0u64, 0u64);
        for c in calibrations() {
            let conv = c.converter();
            let ticks = probes(&c, &mut rng);
            for (k, &a) in ticks.iter().enumerate() {
                // The next probe, a nearby tick and the error value.
                let near = a.wrapping_add(rng.next() % 4096) & c.mask();
                let next = ticks[(k + 1) % ticks.len()];
                for (s, e) in [
                    (a, next),
                    (a, near),
                    (near, a),
                    (a, a),
                    (a, COUNTER_ERROR_VALUE),
                    (COUNTER_ERROR_VALUE, a),
                ] {
                    let want = match (c.to_cpu_ns(s), c.to_cpu_ns(e)) {
                        (Ok(x), Ok(y)) => Ok((x.ns, y.ns, x.error_bound_ns.max(y.error_bound_ns))),
                        (Err(x), _) | (_, Err(x)) => Err(x),
                    };
                    assert_eq!(conv.span_to_cpu_ns(s, e), want, "span {s}..{e} of {c:?}");
                    compared += 1;
                    let (d0, d1) = (conv.delta(s), conv.delta(e));
                    if s != COUNTER_ERROR_VALUE
                        && e != COUNTER_ERROR_VALUE
                        && 0 <= d0
                        && d0 <= d1
                        && conv
                            .segment
                            .is_some_and(|h| h.convert_after_span(d0, d1).is_some())
                    {
                        own_path += 1;
                    }
                    if s != COUNTER_ERROR_VALUE
                        && e != COUNTER_ERROR_VALUE
                        && d0 < 0
                        && d1 < 0
                        && conv
                            .segment
                            .is_some_and(|h| h.convert(d0).is_some() && h.convert(d1).is_some())
                    {
                        in_segment += 1;
                    }
                }
            }
        }
        assert!(compared > 5_000_000, "{compared}");
        assert!(own_path * 100 > compared * 5, "{own_path} of {compared}");
        // Spans inside the hot segment, their own path too, are compared
        // often.
        assert!(
            in_segment * 100 > compared * 2,
            "{in_segment} in the segment, of {compared}"
        );
    }

    /// The hot path agrees with the exact one between close anchors and
    /// across a refit of the rate, and keeps the bound's guarantee.
    #[test]
    fn fast_conversion_matches_exact_between_close_anchors() {
        let mut c = cal(1.0, 64, pair(1_000, 0, 30));
        c.add_anchor(pair(1_050, 80, 30)).unwrap();
        c.add_anchor(pair(1_100, 130, 30)).unwrap();
        for ticks in 0..2_000 {
            assert_eq!(c.to_cpu_ns(ticks), exact(&c, ticks), "{ticks}");
        }
    }

    /// Anchors more than 2^62 ticks apart take the exact path, with the same
    /// results.
    #[test]
    fn far_apart_anchors_use_the_exact_path() {
        let mut c = cal(1e-9, 64, pair(1_000_000_000, 0, 5));
        c.add_anchor(pair(6_000_000_000, 5_000_000_000_000_000_000, 5))
            .unwrap();
        assert_eq!(c.anchors().count(), 2);
        assert_eq!(c.points.n, 0);
        let mut rng = Rng(7);
        for ticks in probes(&c, &mut rng) {
            assert_eq!(c.to_cpu_ns(ticks), exact(&c, ticks), "{ticks}");
        }
        let mid = c.to_cpu_ns(2_500_000_000_000_000_000).unwrap();
        assert_eq!(mid.ns, 3_500_000_000);
    }

    /// `round_i64` and `ceil_saturating` are `round` and `ceil` exactly.
    #[test]
    fn integer_rounding_matches_std() {
        let mut values = vec![
            0.0,
            -0.0,
            0.5,
            -0.5,
            1.5,
            -1.5,
            2.5,
            -2.5,
            0.499_999_999_999_999_94,
            -0.499_999_999_999_999_94,
            4_503_599_627_370_495.5,
            -4_503_599_627_370_495.5,
            4_503_599_627_370_497.0,
            9_007_199_254_740_993.0,
            8.999e18,
            -8.999e18,
            f64::MIN_POSITIVE,
            -f64::MIN_POSITIVE,
            1e-300,
            0.999_999_999_999_999_9,
            1.000_000_000_000_000_2,
        ];
        let mut rng = Rng(42);
        for _ in 0..200_000 {
            let r = rng.next();
            // Random magnitudes from 2^-20 to 2^62, both signs, and halves.
            let e = (rng.next() % 83) as i32 - 20;
            let m = (r >> 11) as f64 / (1u64 << 53) as f64;
            let x = m * 2f64.powi(e) * if r & 1 == 0 { 1.0 } else { -1.0 };
            values.push(x);
            values.push(x.trunc() + 0.5);
        }
        // `round`'s definition (half away from zero) on the exact fraction,
        // not `f64::round`: on windows-gnu that calls the C library's
        // `round`, and Wine 8's rounds 0.49999999999999994 to 1.
        let round = |x: f64| {
            let t = x.trunc();
            if (x - t).abs() >= 0.5 {
                t + x.signum()
            } else {
                t
            }
        };
        for x in values {
            if x.abs() < 9.0e18 {
                assert_eq!(round_i64(x), round(x) as i64, "round {x:e}");
            }
            let want = if x.is_nan() || x >= u64::MAX as f64 {
                u64::MAX
            } else {
                x.ceil().max(0.0) as u64
            };
            assert_eq!(ceil_saturating(x), want, "ceil {x:e}");
        }
        for x in [
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            1.9e19,
            -1.0,
            -1e300,
        ] {
            let want = if x.is_nan() || x >= u64::MAX as f64 {
                u64::MAX
            } else {
                x.ceil().max(0.0) as u64
            };
            assert_eq!(ceil_saturating(x), want, "ceil {x:e}");
        }
    }
}
