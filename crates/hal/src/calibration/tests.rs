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
    let mut c = Calibration::new(CalibrationMethod::Bracketing, 1.0, 64, pair(100, 5, 1)).unwrap();
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
        let e =
            Calibration::new(CalibrationMethod::Bracketing, period, 64, pair(1, 0, 0)).unwrap_err();
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
        let e =
            Calibration::new(CalibrationMethod::Bracketing, 1.0, bits, pair(1, 0, 0)).unwrap_err();
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
