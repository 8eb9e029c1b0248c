//! Converting GPU ticks to CPU nanoseconds with a bound: the calibration's
//! general path (wide integers, every anchor segment) and the [`Converter`],
//! which keeps the newest segment ready for the fast path.

use super::*;

/// Largest tick distance between the oldest and the newest anchor for the
/// hot path: every relative tick, segment length and distance it computes
/// then fits in an `i64` (timestamps are within 2^63 ticks of the newest
/// anchor).
pub(super) const MAX_FAST_SPAN: i128 = 1 << 62;

/// Converts many timestamps with one [`Calibration`]
/// ([`Calibration::converter`]): [`Converter::to_cpu_ns`] is
/// [`Calibration::to_cpu_ns`], inlined into the caller.
#[derive(Debug, Clone, Copy)]
pub struct Converter<'a> {
    pub(super) calibration: &'a Calibration,
    pub(super) mask: u64,
    pub(super) unused: u32,
    pub(super) newest_ticks: u64,
    /// The segment between the two newest anchors and the time after the
    /// newest, where a frame's timestamps usually lie.
    pub(super) segment: Option<HotSegment>,
}

/// The segment between the two newest anchors, with what
/// [`Calibration::convert_fast`] would compute for it checked once: every
/// interpolation in it is finite, fits `i64`, and adds to the older
/// anchor's CPU time without overflow. The same operations on the same
/// values as `convert_fast`, so the same result bit for bit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct HotSegment {
    /// The older anchor's ticks relative to the newest (negative).
    pub(super) rel: i64,
    pub(super) cpu_ns: u64,
    pub(super) len: i64,
    pub(super) len_f: f64,
    /// The CPU span, at most `i64::MAX` and below 9e18.
    pub(super) span: i64,
    pub(super) span_f: f64,
    pub(super) seg_dev_f: f64,
    pub(super) period_ns: f64,
    pub(super) quantization_ns: f64,
    /// The newest anchor, for times after it: its CPU time and deviation,
    /// and the calibration's rate and its uncertainty.
    pub(super) newest_cpu_ns: u64,
    pub(super) newest_dev_f: f64,
    pub(super) rate_ns_per_tick: f64,
    pub(super) rate_uncertainty: f64,
}

impl HotSegment {
    /// The hot paths of `c`: `None` where its anchors take the exact path
    /// (`points.n == 0`). With one anchor, or a segment whose
    /// interpolations might not fit, the segment is empty (`len == 0`).
    pub(super) fn of(c: &Calibration) -> Option<Self> {
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
    pub(super) fn convert_after(&self, d: i64) -> Option<CalibratedTime> {
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
    pub(super) fn convert_after_span(&self, d0: i64, d1: i64) -> Option<(u64, u64, u64)> {
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
    pub(super) fn time_after(&self, offset: f64) -> Option<u64> {
        let t = trunc_i64(offset);
        let offset_ns = (t + i64::from(offset - t as f64 >= 0.5)) as u64;
        self.newest_cpu_ns
            .checked_add(offset_ns)
            .filter(|&ns| ns != u64::MAX)
    }

    /// The bound of the tick `dd` past the newest anchor, `offset` ns after it.
    #[inline(always)]
    pub(super) fn bound_after(&self, dd: f64, offset: f64) -> u64 {
        let bound = self.newest_dev_f + dd.abs() * self.rate_uncertainty;
        ceil_saturating(bound + self.quantization_ns + 1.0 + offset.abs() * F64_ERROR)
    }

    /// `convert_fast`'s interpolation of the tick `d` (relative to the
    /// newest anchor), if it lies in this segment.
    #[inline(always)]
    pub(super) fn convert(&self, d: i64) -> Option<CalibratedTime> {
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
    pub(super) fn interpolate(&self, d: i64) -> Option<(u64, f64)> {
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
    pub(super) fn delta(&self, ticks: u64) -> i64 {
        let delta = (ticks & self.mask).wrapping_sub(self.newest_ticks) & self.mask;
        ((delta << self.unused) as i64) >> self.unused
    }
}

impl Calibration {
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
    pub(super) fn convert_fast(
        &self,
        ticks: u64,
        d: i64,
    ) -> Option<Result<CalibratedTime, ConversionError>> {
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
    pub(super) fn convert(&self, ticks: u64, x: i128) -> Result<CalibratedTime, ConversionError> {
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
