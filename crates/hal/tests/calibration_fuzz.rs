//! Property tests of [`Calibration`] against an exact model of the clocks.
//!
//! The model: a true CPU time `t`; the GPU counter reads
//! `floor((t - t0) * (1 + drift) / period) + start`, masked to the valid
//! bits. Anchors are read every [`REFIT_INTERVAL_NS`] (plus a random delay),
//! their CPU time off from the truth by a random amount within their stated
//! max deviation. Probes are timestamps taken at random true times before
//! the oldest anchor, between anchors, after the newest and anywhere in the
//! documented window of half a wrap around the newest anchor.
//!
//! Properties: every conversion succeeds and lies within its stated bound of
//! the probe's true time; conversions are monotonic in the unwrapped tick;
//! every anchor is accepted without a restart.

use gpu_counters_hal::{
    CalibratedTime, Calibration, CalibrationMethod, TimestampPair, REFIT_INTERVAL_NS,
};
use proptest::prelude::*;

/// Cases run when `PROPTEST_CASES` is not set: a few seconds in debug.
const DEFAULT_CASES: u32 = 2_000;

fn config() -> ProptestConfig {
    // `ProptestConfig::default()` reads `PROPTEST_CASES`; only the default
    // count is lowered here.
    let mut config = ProptestConfig::default();
    if std::env::var_os("PROPTEST_CASES").is_none() {
        config.cases = DEFAULT_CASES;
    }
    config
}

#[derive(Debug, Clone, Copy)]
struct Clock {
    t0: u64,
    start: u64,
    drift: f64,
    period: f64,
    bits: u32,
}

impl Clock {
    fn mask(&self) -> i128 {
        (1i128 << self.bits) - 1
    }
    /// Unwrapped ticks at true CPU time `t`.
    fn ext(&self, t: u64) -> i128 {
        let elapsed = (t - self.t0) as f64;
        (elapsed * (1.0 + self.drift) / self.period).floor() as i128 + i128::from(self.start)
    }
    /// What the counter reads at `t`.
    fn ticks(&self, t: u64) -> u64 {
        (self.ext(t) & self.mask()) as u64
    }
    /// CPU nanoseconds per wrap of the counter.
    fn wrap_ns(&self) -> f64 {
        (1u128 << self.bits) as f64 * self.period
    }
}

/// One anchor: delay after the refit interval, max deviation, and where in
/// `-dev..=dev` the CPU read falls.
type AnchorSpec = (u64, u64, f64);
/// One probe: region (0 before the oldest anchor, 1 between anchors, 2 after
/// the newest, 3 anywhere in the window), position in it, and where the CPU
/// hint for `to_cpu_ns_near` falls.
type ProbeSpec = (u8, f64, f64);

fn anchor_spec() -> impl Strategy<Value = AnchorSpec> {
    (
        prop_oneof![3 => Just(0u64), 1 => 0u64..50_000_000],
        prop_oneof![1 => Just(0u64), 3 => 0u64..=5_000],
        -1.0f64..=1.0,
    )
}

fn probe_spec() -> impl Strategy<Value = ProbeSpec> {
    (0u8..4, 0.0f64..=1.0, -1.0f64..=1.0)
}

#[derive(Debug, Clone)]
struct Scenario {
    method: CalibrationMethod,
    bits: u32,
    period: f64,
    drift: f64,
    start_raw: u64,
    near_wrap: Option<u64>,
    t_first: u64,
    anchors: Vec<AnchorSpec>,
    probes: Vec<ProbeSpec>,
}

fn scenario() -> impl Strategy<Value = Scenario> {
    (
        prop_oneof![
            Just(CalibrationMethod::CalibratedPair),
            Just(CalibrationMethod::CalibratedPair),
            Just(CalibrationMethod::Bracketing),
        ],
        prop_oneof![2 => Just(32u32), 1 => Just(64u32), 3 => 32u32..=64],
        prop_oneof![1 => Just(0.5f64), 1 => Just(1.0f64), 4 => 0.5f64..=100.0],
        -100e-6f64..=100e-6,
        any::<u64>(),
        prop_oneof![1 => Just(None), 1 => (0u64..2_000_000_000).prop_map(Some)],
        100_000_000_000u64..1_000_000_000_000_000,
        prop::collection::vec(anchor_spec(), 1..=24),
        prop::collection::vec(probe_spec(), 32),
    )
        .prop_map(
            |(method, bits, period, drift, start_raw, near_wrap, t_first, anchors, probes)| {
                Scenario {
                    method,
                    bits,
                    period,
                    drift,
                    start_raw,
                    near_wrap,
                    t_first,
                    anchors,
                    probes,
                }
            },
        )
}

/// Checks one scenario; `Err` describes the first property broken.
fn check(s: &Scenario) -> Result<(), String> {
    let mask = if s.bits >= 64 {
        u64::MAX
    } else {
        (1u64 << s.bits) - 1
    };
    // The counter at the first anchor reads `start` plus 20 s of ticks, so
    // with `near_wrap` it wraps up to 2e9 ticks after the first anchor.
    let t0 = s.t_first - 20_000_000_000;
    let mut clock = Clock {
        t0,
        start: 0,
        drift: s.drift,
        period: s.period,
        bits: s.bits,
    };
    let at_first = clock.ext(s.t_first) as u64;
    clock.start = match s.near_wrap {
        Some(back) => mask.wrapping_sub(back).wrapping_sub(at_first) & mask,
        None => s.start_raw & mask,
    };
    let read = |t: u64, (_, dev, frac): AnchorSpec| TimestampPair {
        cpu_ns: t.saturating_add_signed((frac * dev as f64).round() as i64),
        gpu_ticks: clock.ticks(t),
        max_deviation_ns: dev,
    };
    let mut c = Calibration::new(s.method, s.period, s.bits, read(s.t_first, s.anchors[0]))
        .map_err(|e| format!("new: {e}"))?;
    let mut t = s.t_first;
    let mut times = vec![t];
    for (k, a) in s.anchors.iter().enumerate().skip(1) {
        t += REFIT_INTERVAL_NS + a.0;
        times.push(t);
        c.add_anchor(read(t, *a))
            .map_err(|e| format!("anchor {k}: {e}"))?;
        if c.anchors().count() != (k + 1).min(16) {
            return Err(format!("anchor {k} restarted the calibration"));
        }
    }
    let t_last = t;
    // True time of the oldest anchor held.
    let t_oldest = times[times.len().saturating_sub(16)];
    // The window around the newest anchor, in CPU time, with a margin for
    // the rate and deviations; capped at 20 s for wide counters.
    let half_wrap_ns = (clock.wrap_ns() / 2.0 * 0.99 - 1e6).min(20e9);
    let newest_ext = clock.ext(t_last);
    let half_wrap_ticks = 1i128 << (s.bits - 1);
    let mut converted: Vec<(i128, CalibratedTime)> = Vec::with_capacity(2 * s.probes.len());
    let mut near: Vec<(i128, CalibratedTime)> = Vec::with_capacity(s.probes.len());
    for &(region, pos, hint) in &s.probes {
        let probe = match region {
            0 => t_oldest as f64 - pos * 1e9,
            1 => t_oldest as f64 + pos * (t_last - t_oldest) as f64,
            2 => t_last as f64 + pos * 2.0 * REFIT_INTERVAL_NS as f64,
            _ => t_last as f64 + (2.0 * pos - 1.0) * half_wrap_ns,
        };
        let probe = probe.max(t0 as f64 + 1.0) as u64;
        let ext = clock.ext(probe);
        let ticks = clock.ticks(probe);
        let check_one = |what: &str, r: Result<CalibratedTime, _>| {
            let r = r.map_err(|e| format!("{what} of probe at {probe} ({ticks} ticks): {e}"))?;
            let err = (i128::from(r.ns) - i128::from(probe)).unsigned_abs();
            if err > u128::from(r.error_bound_ns) {
                return Err(format!(
                    "{what} of probe at {probe} ({ticks} ticks): {} ns, error {err} over bound {}",
                    r.ns, r.error_bound_ns
                ));
            }
            Ok(r)
        };
        // Inside the documented window (half a wrap around the newest
        // anchor, with a tick to spare) `to_cpu_ns` must be right.
        if (ext - newest_ext).abs() < half_wrap_ticks - 1 {
            let r = check_one("to_cpu_ns", c.to_cpu_ns(ticks))?;
            converted.push((ext, r));
        }
        // With a hint within a quarter wrap (at most 1 s) anywhere.
        let hint_ns = probe as f64 + hint * (clock.wrap_ns() / 4.0).min(1e9);
        let r = check_one("to_cpu_ns_near", c.to_cpu_ns_near(ticks, hint_ns as u64))?;
        near.push((ext, r));
    }
    for (what, mut list) in [("to_cpu_ns", converted), ("to_cpu_ns_near", near)] {
        list.sort_by_key(|&(ext, r)| (ext, r.ns));
        for w in list.windows(2) {
            if w[1].1.ns < w[0].1.ns {
                return Err(format!(
                    "{what} not monotonic: tick {} at {} ns, tick {} at {} ns",
                    w[0].0, w[0].1.ns, w[1].0, w[1].1.ns
                ));
            }
        }
    }
    Ok(())
}

/// Conversions stay inside their bound and are monotonic, over valid bits
/// 32..=64, periods 0.5..=100 ns, drift within ±100 ppm, 1 to 24 anchors at
/// the refit interval disagreeing with the truth within their deviation (0
/// to 5 µs), and counters starting anywhere (half of the cases just before a
/// wrap). Prints the number of cases run and failed.
///
/// Reproduce a million cases (about 30 s):
/// `PROPTEST_CASES=1000000 cargo test --release -p gpu-counters-hal --test calibration_fuzz -- --nocapture`
#[test]
fn conversions_inside_bound_and_monotonic() {
    use proptest::test_runner::{TestCaseError, TestRunner};
    use std::sync::atomic::{AtomicU64, Ordering};
    let (cases, failures) = (AtomicU64::new(0), AtomicU64::new(0));
    let mut runner = TestRunner::new(config());
    let result = runner.run(&scenario(), |s| {
        cases.fetch_add(1, Ordering::Relaxed);
        check(&s).map_err(|e| {
            failures.fetch_add(1, Ordering::Relaxed);
            TestCaseError::fail(e)
        })
    });
    eprintln!(
        "calibration fuzz: {} cases run (config {}), {} failed (shrinking included)",
        cases.load(Ordering::Relaxed),
        runner.config().cases,
        failures.load(Ordering::Relaxed)
    );
    if let Err(e) = result {
        panic!("{e}");
    }
}
