//! Converting a frame's timestamps onto the CPU clock in bulk.
//!
//! [`Calibration::to_cpu_ns`] looks for the anchor nearest each timestamp
//! among up to 16, which costs more than the rest of a scope's result. A
//! frame's timestamps lie close together, so they share their nearest anchor,
//! or a few anchors over consecutive tick ranges: [`Converter`] finds those
//! ranges once per frame, then applies the arithmetic of `to_cpu_ns` from the
//! range's anchor to each timestamp, giving identical results. Where it
//! cannot be sure of that (the frame spans a quarter of the tick wrap, or a
//! check against `to_cpu_ns` disagrees) it calls `to_cpu_ns` for each.

use gpu_counters_core::{
    CalibratedTime, Calibration, CounterResultTimestamp, SampleStatus, TimestampPair,
};

/// Most anchors a calibration holds: the most ranges a frame can have.
const MAX_RANGES: usize = 16;

/// Converts a frame's GPU timestamps with one calibration.
pub(crate) struct Converter<'c> {
    calibration: &'c Calibration,
    /// The frame's earliest timestamp: ranges are measured from it.
    origin: u64,
    valid_bits: u32,
    mask: u64,
    /// Consecutive tick ranges, each ending (inclusive, in ticks after
    /// `origin`) where its anchor stops being the nearest; empty when every
    /// timestamp goes through `to_cpu_ns`.
    ranges: Vec<(i64, Linear)>,
}

impl<'c> Converter<'c> {
    /// A converter for a frame's resolved timestamps, in pages (only the
    /// written ones are converted).
    pub(crate) fn new(
        calibration: &'c Calibration,
        pages: &[(&[CounterResultTimestamp], &[SampleStatus])],
    ) -> Self {
        let mut this = Self {
            calibration,
            origin: 0,
            valid_bits: calibration.valid_bits(),
            mask: calibration.mask(),
            ranges: Vec::new(),
        };
        if this.plan(pages).is_none() {
            this.ranges.clear();
        }
        this
    }

    /// [`Calibration::to_cpu_ns`] of `ticks`.
    #[inline]
    pub(crate) fn to_cpu_ns(&self, ticks: u64) -> CalibratedTime {
        match self.ranges.as_slice() {
            [(_, only)] => only.convert(ticks),
            [] => self.calibration.to_cpu_ns(ticks),
            ranges => {
                let at = tick_delta(self.valid_bits, self.mask, self.origin, ticks & self.mask);
                match ranges.iter().find(|(end, _)| (0..=*end).contains(&at)) {
                    Some((_, l)) => l.convert(ticks),
                    None => self.calibration.to_cpu_ns(ticks),
                }
            }
        }
    }

    /// Splits the frame's span into ranges of one nearest anchor each.
    /// `None` where the timestamps must be converted one by one.
    fn plan(&mut self, pages: &[(&[CounterResultTimestamp], &[SampleStatus])]) -> Option<()> {
        let c = self.calibration;
        let (bits, mask) = (self.valid_bits, self.mask);
        if bits < 3 {
            return None;
        }
        // The frame's extremes, as distances from its first timestamp.
        let mut first = None;
        let (mut lo, mut hi) = (0i64, 0i64);
        for (t, st) in pages {
            for (t, st) in t.iter().zip(st.iter()) {
                if *st != SampleStatus::Written {
                    continue;
                }
                let t = t.timestamp & mask;
                let d = tick_delta(bits, mask, *first.get_or_insert(t), t);
                lo = lo.min(d);
                hi = hi.max(d);
            }
        }
        let first = first?;
        let lo = (lo, first.wrapping_add(lo as u64) & mask);
        let span = hi as i128 - lo.0 as i128;
        if span >= 1i128 << (bits - 2) {
            return None;
        }
        let span = span as i64;
        self.origin = lo.1;
        let at = |x: i64| lo.1.wrapping_add(x as u64) & mask;
        let nearest = |x: i64| nearest(c, bits, mask, at(x));
        let base = Linear {
            anchor: c.latest(),
            rate_ns_per_tick: c.rate_ns_per_tick(),
            rate_uncertainty: c.rate_uncertainty(),
            quantization_ns: c.quantization_ns(),
            valid_bits: bits,
            mask,
        };
        // Each anchor is the nearest over an arc of ticks (up to half the
        // wrap), and the frame spans less than a quarter: the anchor nearest
        // a range's start is the nearest up to one point, then never again.
        let mut start = 0i64;
        while self.ranges.len() < MAX_RANGES {
            let anchor = nearest(start)?;
            let end = if nearest(span)? == anchor {
                span
            } else {
                let (mut near, mut far) = (start, span);
                while far - near > 1 {
                    let mid = near + (far - near) / 2;
                    if nearest(mid)? == anchor {
                        near = mid;
                    } else {
                        far = mid;
                    }
                }
                near
            };
            let l = Linear { anchor, ..base };
            // The ends of a range are where its bound is largest: the
            // arithmetic must agree with the calibration's own there.
            for x in [start, end] {
                if l.convert(at(x)) != c.to_cpu_ns(at(x)) {
                    return None;
                }
            }
            self.ranges.push((end, l));
            if end == span {
                return Some(());
            }
            start = end + 1;
        }
        None
    }
}

/// `to_cpu_ns` from one anchor.
#[derive(Clone, Copy)]
struct Linear {
    anchor: TimestampPair,
    rate_ns_per_tick: f64,
    rate_uncertainty: f64,
    quantization_ns: f64,
    valid_bits: u32,
    mask: u64,
}

impl Linear {
    /// As [`Calibration::to_cpu_ns`] does it from `self.anchor`.
    #[inline]
    fn convert(&self, ticks: u64) -> CalibratedTime {
        let a = &self.anchor;
        let d = tick_delta(self.valid_bits, self.mask, a.gpu_ticks, ticks & self.mask) as f64;
        let ns = a.cpu_ns as f64 + d * self.rate_ns_per_tick;
        let bound = a.max_deviation_ns as f64
            + d.abs() * self.rate_uncertainty
            + self.quantization_ns
            + 0.5;
        CalibratedTime {
            ns: round_to_u64(ns),
            error_bound_ns: ceil_to_u64(bound),
        }
    }
}

/// `x.round().max(0.0) as u64` without a call to `round` (which the baseline
/// x86-64 target makes a library call): the fraction above the truncation
/// is exact, so comparing it with one half rounds halves away from zero.
#[inline]
fn round_to_u64(x: f64) -> u64 {
    let t = x as u64; // Saturating: 0 for negatives and NaN.
    if x - t as f64 >= 0.5 {
        t.saturating_add(1)
    } else {
        t
    }
}

/// `x.ceil() as u64` without a call to `ceil`.
#[inline]
fn ceil_to_u64(x: f64) -> u64 {
    let t = x as u64;
    if (t as f64) < x {
        t.saturating_add(1)
    } else {
        t
    }
}

/// [`Calibration::tick_delta`], inlined.
#[inline]
fn tick_delta(bits: u32, mask: u64, from: u64, to: u64) -> i64 {
    let d = to.wrapping_sub(from) & mask;
    if bits >= 64 {
        d as i64
    } else if d >= 1u64 << (bits - 1) {
        d as i64 - (1i64 << bits)
    } else {
        d as i64
    }
}

/// The anchor `to_cpu_ns` converts `ticks` from: the first of the nearest.
fn nearest(c: &Calibration, bits: u32, mask: u64, ticks: u64) -> Option<TimestampPair> {
    c.anchors()
        .min_by_key(|a| tick_delta(bits, mask, a.gpu_ticks, ticks).unsigned_abs())
        .copied()
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpu_counters_core::CalibrationMethod;

    fn pair(cpu_ns: u64, gpu_ticks: u64, max_deviation_ns: u64) -> TimestampPair {
        TimestampPair {
            cpu_ns,
            gpu_ticks,
            max_deviation_ns,
        }
    }

    /// A small deterministic generator (xorshift).
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
    }

    /// Checks every conversion; returns how many ranges the frame had.
    fn check(c: &Calibration, ticks: &[u64]) -> usize {
        let stamps: Vec<CounterResultTimestamp> = ticks
            .iter()
            .map(|&timestamp| CounterResultTimestamp { timestamp })
            .collect();
        // Two pages, and a sample not written (whose value is ignored).
        let mut statuses = vec![SampleStatus::Written; ticks.len()];
        statuses.push(SampleStatus::NotWritten);
        let (a, b) = stamps.split_at(ticks.len() / 2);
        let mut b = b.to_vec();
        b.push(CounterResultTimestamp { timestamp: 12345 });
        let (sa, sb) = statuses.split_at(ticks.len() / 2);
        let conv = Converter::new(c, &[(a, sa), (&b, sb)]);
        for &t in ticks {
            assert_eq!(conv.to_cpu_ns(t), c.to_cpu_ns(t), "ticks {t} of {c:#?}");
        }
        conv.ranges.len()
    }

    #[test]
    fn matches_to_cpu_ns() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let (mut frames, mut fast, mut split) = (0, 0, 0);
        for method in [
            CalibrationMethod::CalibratedTimestampsKhr,
            CalibrationMethod::Bracketing,
        ] {
            for bits in [64u32, 48, 36, 32, 16] {
                for period in [1.0, 0.5, 52.08333, 83.333] {
                    for anchors in [1u64, 2, 5, 20] {
                        for (drift, scale) in [
                            (0.0, 300_000_000),
                            (3e-5, 300_000_000),
                            (0.5, 300_000_000),
                            (3e-5, 300_000),
                        ] {
                            let start = rng.next()
                                & if bits >= 64 {
                                    u64::MAX
                                } else {
                                    (1 << bits) - 1
                                };
                            let dev = rng.next() % 50;
                            let step_cpu = 1 + rng.next() % scale;
                            let step_ticks = (step_cpu as f64 / period * (1.0 + drift)) as u64;
                            let mut c =
                                Calibration::new(method, period, bits, pair(1_000, start, dev));
                            for k in 1..anchors {
                                c.add_anchor(pair(
                                    1_000 + k * step_cpu,
                                    start.wrapping_add(k * step_ticks),
                                    rng.next() % 50,
                                ));
                            }
                            // A frame near an anchor, between anchors, and
                            // past the newest, some of it wrapping.
                            let newest = c.latest().gpu_ticks;
                            for base in [
                                newest.wrapping_sub(step_ticks / 2),
                                newest.wrapping_add(rng.next() % 1_000_000),
                                start.wrapping_add(step_ticks / 3),
                                newest.wrapping_sub(step_ticks * anchors / 2),
                            ] {
                                let mut t = base;
                                let ticks: Vec<u64> = (0..200)
                                    .map(|_| {
                                        t = t.wrapping_add(rng.next() % 20_000);
                                        t
                                    })
                                    .collect();
                                let ranges = check(&c, &ticks);
                                frames += 1;
                                fast += (ranges > 0) as usize;
                                split += (ranges > 1) as usize;
                            }
                        }
                    }
                }
            }
        }
        // Most frames take the fast path, some over several anchors.
        assert!(fast > frames / 2, "{fast} of {frames} frames");
        assert!(split > frames / 20, "{split} of {frames} frames");
    }

    #[test]
    fn rounding_matches_std() {
        let mut rng = Rng(12345);
        let mut values = vec![
            0.0,
            -0.0,
            0.5,
            -0.5,
            0.49999999999999994,
            1.5,
            2.5,
            -1.5,
            4503599627370495.5,
            4503599627370496.0,
            9007199254740993.0,
            1.8446744073709552e19,
            3e19,
            f64::MAX,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            f64::MIN_POSITIVE,
            1e-300,
        ];
        for _ in 0..100_000 {
            let bits = rng.next();
            values.push(f64::from_bits(bits));
            values.push((bits >> 11) as f64 / 4.0);
            values.push((bits % 1_000_000_000_000) as f64 * 0.001);
            values.push((bits >> 40) as f64 + 0.5);
        }
        for x in values {
            assert_eq!(round_to_u64(x), x.round().max(0.0) as u64, "round {x:e}");
            assert_eq!(ceil_to_u64(x), x.ceil() as u64, "ceil {x:e}");
        }
    }

    #[test]
    fn empty_frame_and_wide_frame() {
        let c = Calibration::new(CalibrationMethod::Bracketing, 1.0, 32, pair(10, 5, 2));
        assert_eq!(check(&c, &[]), 0);
        // Spanning half the wrap: converted one by one.
        assert_eq!(check(&c, &[0, 1 << 31, 3]), 0);
        assert_eq!(check(&c, &[7, 9, 1 << 20]), 1);
    }
}
