//! The metric checks of `record --counters`, on a scripted chip.

use super::check::*;

/// A chip whose metrics need the passes listed; a set needs the sum of
/// its members' passes (what matters here: one, or more).
struct Fake {
    chip: &'static str,
    known: Vec<(&'static str, usize)>,
    defaults: (Vec<String>, Vec<String>),
    broken: bool,
}

impl Catalog for Fake {
    fn chip(&self) -> &str {
        self.chip
    }
    fn check(&self, metric: &str) -> Result<(), Verdict> {
        if self.broken {
            return Err(Verdict::Cannot("CUPTI_ERROR_UNKNOWN".into()));
        }
        if self.known.iter().any(|(m, _)| *m == metric) {
            Ok(())
        } else {
            Err(Verdict::Unknown("CUPTI_ERROR_INVALID_METRIC_NAME".into()))
        }
    }
    fn passes(&self, metrics: &[&str]) -> Result<usize, Verdict> {
        Ok(metrics
            .iter()
            .map(|m| self.known.iter().find(|(k, _)| k == m).map_or(1, |k| k.1))
            .sum::<usize>()
            .max(1)
            - (metrics.len() - 1))
    }
    fn multi_pass(&self, metrics: &[&str], passes: usize) -> (String, usize) {
        for m in metrics {
            if let Some((_, p)) = self.known.iter().find(|(k, p)| k == m && *p > 1) {
                return (m.to_string(), *p);
            }
        }
        (metrics.join(" + "), passes)
    }
    fn defaults(&self) -> (Vec<String>, Vec<String>) {
        self.defaults.clone()
    }
}

fn gh100() -> Fake {
    Fake {
        chip: "GH100",
        known: vec![
            ("smsp__inst_executed.sum", 1),
            ("dram__bytes_read.sum", 1),
            ("sm__throughput.avg.pct_of_peak_sustained_elapsed", 8),
        ],
        defaults: (
            vec!["dram__bytes_read.sum".into()],
            vec!["tensor-pipe activity (tried a, b)".into()],
        ),
        broken: false,
    }
}

fn names(m: &[&str]) -> Vec<String> {
    m.iter().map(|s| s.to_string()).collect()
}

/// An unknown metric is named with the chip and GPUs; a set of several
/// passes names the metric that needs them, unless kernels are
/// replayed.
#[test]
fn counters_errors_name_the_metric_and_the_chip() {
    let c = gh100();
    assert_eq!(
        check_counters(
            &c,
            "GPU0",
            &names(&["smsp__inst_executed.sum", "dram__bytes_read.sum"]),
            false
        ),
        Ok(())
    );
    assert_eq!(
        check_counters(&c, "GPU0, GPU1", &names(&["sm__no_such.sum"]), false),
        Err(Stop::Usage(
            "--counters: unknown metric `sm__no_such.sum` on GH100 (GPU0, GPU1): CUPTI_ERROR_INVALID_METRIC_NAME".into()
        ))
    );
    let multi = names(&[
        "smsp__inst_executed.sum",
        "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    ]);
    assert_eq!(
        check_counters(&c, "GPU0", &multi, false),
        Err(Stop::Usage(
            "--counters: `sm__throughput.avg.pct_of_peak_sustained_elapsed` needs 8 passes on GH100, and per-kernel counters measure one pass unless --replay kernel replays each kernel".into()
        ))
    );
    assert_eq!(check_counters(&c, "GPU0", &multi, true), Ok(()));
    let broken = Fake {
        broken: true,
        ..gh100()
    };
    assert_eq!(
        check_counters(&broken, "GPU0", &names(&["dram__bytes_read.sum"]), false),
        Err(Stop::Cannot("CUPTI_ERROR_UNKNOWN".into()))
    );
}

/// PM sampling: metrics given are checked (known, one pass); none given
/// takes the chip's defaults, with a note per quantity left without
/// one, and none at all is an error.
#[test]
fn pm_checks_and_defaults() {
    let c = gh100();
    assert_eq!(
        check_pm(&c, "GPU0", &names(&["dram__bytes_read.sum"])),
        Ok((None, vec![]))
    );
    assert_eq!(
        check_pm(&c, "GPU0", &names(&["dram__bytes_wrote.sum"])),
        Err(Stop::Usage(
            "--gpu-metric: unknown metric `dram__bytes_wrote.sum` for PM sampling on GH100 (GPU0): CUPTI_ERROR_INVALID_METRIC_NAME".into()
        ))
    );
    assert_eq!(
        check_pm(
            &c,
            "GPU0",
            &names(&["sm__throughput.avg.pct_of_peak_sustained_elapsed"])
        ),
        Err(Stop::Usage(
            "--gpu-metric: `sm__throughput.avg.pct_of_peak_sustained_elapsed` needs 8 passes on GH100, and PM sampling measures one pass".into()
        ))
    );
    assert_eq!(
        check_pm(&c, "GPU0", &[]),
        Ok((
            Some(names(&["dram__bytes_read.sum"])),
            vec![
                "GPU0 (GH100): no PM-sampling metric for tensor-pipe activity (tried a, b)".into()
            ]
        ))
    );
    let none = Fake {
        defaults: (vec![], vec![]),
        ..gh100()
    };
    match check_pm(&none, "GPU0", &[]) {
        Err(Stop::Usage(m)) => assert!(
            m.starts_with(
                "--gpu-metrics: PM sampling on GH100 (GPU0) offers none of the default metrics"
            ),
            "{m}"
        ),
        other => panic!("{other:?}"),
    }
}

struct Machine {
    chips: Result<Vec<String>, String>,
}

impl Chips for Machine {
    fn chips(&self) -> Result<Vec<String>, String> {
        self.chips.clone()
    }
    fn range(&self, chip: &str) -> Result<Box<dyn Catalog>, String> {
        let mut c = gh100();
        if chip == "GA100" {
            c.chip = "GA100";
        }
        Ok(Box::new(c))
    }
    fn pm(&self, _ordinal: usize, chip: &str) -> Result<Box<dyn Catalog>, String> {
        let mut c = gh100();
        if chip == "GA100" {
            c.chip = "GA100";
            c.defaults = (names(&["gr__cycles_active.avg"]), vec![]);
        }
        Ok(Box::new(c))
    }
}

/// Devices are checked once per chip; defaults are passed on only
/// where every device has one chip; a machine with no driver or no
/// device checks nothing.
#[test]
fn devices_are_checked_per_chip() {
    let one = || {
        Ok::<_, String>(Machine {
            chips: Ok(names(&["GH100", "GH100"])),
        })
    };
    let got = on_devices(one, true, &[], &[], false).unwrap();
    assert_eq!(got.resolved, Some(names(&["dram__bytes_read.sum"])));
    assert_eq!(
        got.notes,
        vec!["GPU0, GPU1 (GH100): no PM-sampling metric for tensor-pipe activity (tried a, b)"]
    );
    let two = || {
        Ok::<_, String>(Machine {
            chips: Ok(names(&["GH100", "GA100"])),
        })
    };
    assert_eq!(
        on_devices(two, true, &[], &[], false).unwrap().resolved,
        None
    );
    match on_devices(two, false, &[], &names(&["bogus__x.sum"]), false) {
        // Chips in name order: GA100 (GPU1) first.
        Err(Stop::Usage(m)) => assert!(m.contains("on GA100 (GPU1)"), "{m}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        on_devices(
            || Err::<Machine, _>("no CUDA driver here".to_string()),
            true,
            &[],
            &[],
            false
        ),
        Err(Stop::Cannot("no CUDA driver here".into()))
    );
    let empty = || Ok::<_, String>(Machine { chips: Ok(vec![]) });
    assert_eq!(
        on_devices(empty, true, &[], &[], false),
        Err(Stop::Cannot("no CUDA device here".into()))
    );
}
