//! The scheduling, summaries and text report, on fake variants with
//! exact costs.

use super::*;
use std::cell::RefCell;
use std::rc::Rc;

/// A variant that logs its runs and measures exactly `base` plus
/// `per_sample` per sample, whatever else ran.
struct Fake {
    spec: VariantSpec,
    log: Rc<RefCell<Vec<String>>>,
    base: f64,
    per_sample: f64,
}

impl Variant for Fake {
    fn spec(&self) -> &VariantSpec {
        &self.spec
    }

    fn run(&mut self) -> Result<Measurement, BenchError> {
        self.log.borrow_mut().push(self.spec.name.clone());
        let ns = self.base + self.per_sample * self.spec.samples as f64;
        Ok(Measurement {
            gpu_ns: ns,
            record_ns: ns / 2.0,
            resolve_ns: self.spec.samples as f64 * 3.0,
        })
    }
}

fn fake(
    log: &Rc<RefCell<Vec<String>>>,
    name: &str,
    placement: Placement,
    samples: u64,
    baseline: Option<&str>,
) -> Box<dyn Variant> {
    Box::new(Fake {
        spec: VariantSpec {
            name: name.into(),
            tool: Tool::GpuCounters,
            placement,
            samples,
            timestamps_written: samples,
            baseline: baseline.map(Into::into),
        },
        log: log.clone(),
        base: 1000.0,
        per_sample: 10.0,
    })
}

#[test]
fn schedule_runs_each_variant_right_after_its_baseline_and_discards_the_warm_up() {
    let log = Rc::new(RefCell::new(Vec::new()));
    let mut variants = vec![
        fake(&log, "base", Placement::None, 0, None),
        fake(&log, "a", Placement::Precise, 8, Some("base")),
        fake(&log, "b", Placement::Pass, 16, Some("base")),
        fake(&log, "other base", Placement::None, 0, None),
        fake(&log, "c", Placement::Relaxed, 8, Some("other base")),
    ];
    let reps = 4;
    let bar = indicatif::ProgressBar::hidden();
    let measured = schedule(&mut variants, reps, &bar).expect("schedule");

    // Warm-up: one run each of a baseline and its variant; measured
    // rounds: TRIALS of each.
    let log = log.borrow();
    let sampling = 3;
    assert_eq!(
        log.len(),
        2 * sampling + reps as usize * 2 * TRIALS * sampling
    );
    let mut at = 0;
    for round in 0..=reps {
        let trials = if round == 0 { 1 } else { TRIALS };
        let mut order = Vec::new();
        for _ in 0..sampling {
            let variant = &log[at + trials];
            let baseline = match variant.as_str() {
                "a" | "b" => "base",
                "c" => "other base",
                v => panic!("`{v}` is not a sampling variant"),
            };
            assert!(
                log[at..at + trials].iter().all(|n| n == baseline),
                "{log:?}"
            );
            assert!(log[at + trials..at + 2 * trials]
                .iter()
                .all(|n| n == variant));
            order.push(variant.clone());
            at += 2 * trials;
        }
        order.sort();
        assert_eq!(order, ["a", "b", "c"], "every variant once per round");
    }
    assert_eq!(at, log.len());

    // Measured pairs: one per round for a sampling variant, one per
    // round and variant for a baseline.
    let counts: Vec<usize> = measured.iter().map(Vec::len).collect();
    assert_eq!(counts, [2 * 4, 4, 4, 4, 4]);

    let specs: Vec<&VariantSpec> = variants.iter().map(|v| v.spec()).collect();
    let report = summarize(&specs, &measured);
    let a = &report[1];
    assert_eq!(a.gpu_ns_per_sample, 10.0);
    assert_eq!(a.host_record_ns_per_sample, 5.0);
    assert_eq!(a.host_resolve_ns_per_sample, 3.0);
    assert_eq!(a.gpu_total_ns, 1080.0);
    assert_eq!(a.baseline.as_deref(), Some("base"));
    assert_eq!(report[0].gpu_ns_per_sample, 0.0);
    assert_eq!(report[0].gpu_total_ns, 1000.0);
    assert_eq!(report[4].gpu_ns_per_sample, 10.0);
}

#[test]
fn comparisons_are_ratios_per_round_with_their_spread() {
    let pair = |gpu: f64, record: f64, resolve: f64| Paired {
        variant: Measurement {
            gpu_ns: 100.0 + gpu,
            record_ns: 50.0 + record,
            resolve_ns: resolve,
        },
        base: Measurement {
            gpu_ns: 100.0,
            record_ns: 50.0,
            resolve_ns: 0.0,
        },
    };
    let spec = |name: &str, baseline: Option<&str>| VariantSpec {
        name: name.into(),
        tool: Tool::GpuCountersWgpu,
        placement: Placement::Pass,
        samples: 8,
        timestamps_written: 8,
        baseline: baseline.map(Into::into),
    };
    let specs = [
        spec("base", None),
        spec("a", Some("base")),
        spec("b", Some("base")),
    ];
    let specs: Vec<&VariantSpec> = specs.iter().collect();
    // 4 dispatches; per round, a's overheads are 1, 2, 3 times b's on
    // the GPU, and its host cost (record + resolve) half of b's.
    let measured = vec![
        vec![],
        vec![
            pair(40.0, 4.0, 4.0),
            pair(80.0, 4.0, 4.0),
            pair(120.0, 4.0, 4.0),
        ],
        vec![
            pair(40.0, 8.0, 8.0),
            pair(40.0, 8.0, 8.0),
            pair(40.0, 8.0, 8.0),
        ],
    ];
    let wanted = [
        ComparisonSpec {
            variant: "a",
            against: "b",
            target: 1.1,
        },
        ComparisonSpec {
            variant: "a",
            against: "not run",
            target: 1.0,
        },
    ];
    let c = compare(&specs, &measured, &wanted, 4);
    assert_eq!(
        c.len(),
        1,
        "a comparison with a variant not run is left out"
    );
    let c = &c[0];
    let gpu = c.gpu_ratio.expect("a GPU ratio");
    assert_eq!(
        (gpu.min, gpu.median, gpu.max, gpu.rounds),
        (1.0, 2.0, 3.0, 3)
    );
    assert!(!gpu.within_target);
    assert!(!gpu.settled, "three rounds settle nothing");
    assert_eq!(gpu.verdict(), "over, unsettled");
    assert_eq!((gpu.median_low, gpu.median_high), (None, None));
    let host = c.host_ratio.expect("a host ratio");
    assert_eq!((host.min, host.median, host.max), (0.5, 0.5, 0.5));
    assert!(host.within_target);
    assert_eq!(host.verdict(), "within, unsettled");
    assert_eq!(c.variant_gpu_ns_per_scope, 20.0);
    assert_eq!(c.against_gpu_ns_per_scope, 10.0);
    assert_eq!(c.variant_host_ns_per_scope, 2.0);
    assert_eq!(c.against_host_ns_per_scope, 4.0);
    assert_eq!(c.gpu_ratio_of_medians, Some(2.0));
    assert_eq!(c.host_ratio_of_medians, Some(0.5));

    // Rounds whose denominator is below the noise give no ratio.
    let flat = vec![vec![], measured[1].clone(), vec![pair(0.0, 8.0, 8.0); 3]];
    let c = compare(&specs, &flat, &wanted[..1], 4);
    assert_eq!(c[0].gpu_ratio, None);
    assert_eq!(c[0].gpu_ratio_of_medians, None);
    assert!(c[0].host_ratio.is_some());
}

#[test]
fn a_missing_baseline_is_an_error() {
    let log = Rc::new(RefCell::new(Vec::new()));
    let mut variants = vec![fake(&log, "a", Placement::Precise, 8, Some("nowhere"))];
    let bar = indicatif::ProgressBar::hidden();
    let e = schedule(&mut variants, 1, &bar).expect_err("no baseline named `nowhere`");
    assert!(matches!(e, BenchError::Measurement(_)), "{e}");
    assert!(log.borrow().is_empty(), "nothing ran");
}

/// A verdict is settled only when the median's 95% interval lies on
/// one side of the target: rounds straddling it (the wgpu rows on the
/// H200, a ratio of two differences of a few hundred ns each moving by
/// as much) say so instead of a bare "within" or "over", and more
/// rounds narrow the interval where the quartiles would stay as wide.
#[test]
fn a_spread_straddling_the_target_is_unsettled() {
    // Six rounds: the interval is the smallest and largest.
    let r = RatioSpread::of(&[0.9, 1.0, 1.05, 1.08, 1.09, 1.2], 1.1).unwrap();
    assert_eq!((r.median_low, r.median_high), (Some(0.9), Some(1.2)));
    assert_eq!((r.within_target, r.settled), (true, false));
    assert_eq!(r.verdict(), "within, unsettled");
    let r = RatioSpread::of(&[1.15, 1.2, 1.3, 1.4, 1.12, 1.11], 1.1).unwrap();
    assert_eq!(r.verdict(), "over");
    let r = RatioSpread::of(&[0.95, 1.0, 1.05, 1.02, 0.98, 1.03, 0.97], 1.1).unwrap();
    assert_eq!(r.verdict(), "within");
    // Five rounds are too few, however tight.
    let r = RatioSpread::of(&[1.0; 5], 1.1).unwrap();
    assert_eq!(r.verdict(), "within, unsettled");
    // Rounds spread from 0.7 to 1.8 whose median sits at 1.0: their
    // quartiles straddle 1.1, but 100 of them place the median
    // (ranks 40 to 61) under it.
    let spread: Vec<f64> = (0..100)
        .map(|k| match k {
            0..30 => 0.7 + k as f64 * 0.005,
            30..70 => 1.0 + (k - 50) as f64 * 0.003,
            _ => 1.2 + (k - 70) as f64 * 0.02,
        })
        .collect();
    let (q1, q3) = (spread[25], spread[75]);
    assert!(q1 < 1.1 && q3 > 1.1, "the quartiles straddle the target");
    let r = RatioSpread::of(&spread, 1.1).unwrap();
    assert!(r.min < 0.75 && r.max > 1.7, "{r:?}");
    assert!(r.median_high.is_some_and(|h| h <= 1.1), "{r:?}");
    assert_eq!(r.verdict(), "within");
    assert!(RatioSpread::of(&[], 1.1).is_none());
}
