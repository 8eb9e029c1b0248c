//! Runs the whole benchmark with tiny sizes on the default device (lavapipe
//! where there is no GPU) with the validation layer on, and checks the JSON
//! shape, the numbers and that the validation layer stayed silent. wgpu makes
//! its own instance; its validation is not captured here.

use gpu_counters_bench::{run_with_options, BenchArgs};
use gpu_counters_vulkan::InstanceOptions;
use serde_json::Value;

fn keys(v: &Value) -> Vec<&str> {
    let mut k: Vec<&str> = v
        .as_object()
        .expect("an object")
        .keys()
        .map(String::as_str)
        .collect();
    k.sort_unstable();
    k
}

fn finite_non_negative(v: &Value, what: &str) -> f64 {
    let x = v
        .as_f64()
        .unwrap_or_else(|| panic!("{what} is not a number: {v}"));
    assert!(x.is_finite() && x >= 0.0, "{what} = {x}");
    x
}

#[test]
fn tiny_run_has_the_report_shape_and_no_validation_messages() {
    let args = BenchArgs {
        json: true,
        samples: 16,
        reps: 1,
        // The wgpu rows' rounds of their own.
        wgpu_reps: Some(3),
        // The samples-alone rows' rounds of their own, and the wgpu
        // samples-alone rows' fewer.
        host_reps: 2,
        wgpu_host_reps: Some(1),
        device: None,
        drift_seconds: 1.0,
        resolve_samples: 4096,
        ..BenchArgs::default()
    };
    let report =
        run_with_options(&args, &InstanceOptions { validation: true }).expect("the benchmark runs");
    assert!(report.validation_enabled);
    assert!(
        report.validation_messages.is_empty(),
        "validation messages: {:#?}",
        report.validation_messages
    );

    let json = serde_json::to_value(&report).expect("the report serializes");
    let wgpu_ran = report.wgpu_reps.is_some();
    let mut expected = vec![
        "calibration",
        "comparisons",
        "device",
        "reps",
        "resolve",
        "samples",
        "samples_alone",
        "samples_alone_reps",
        "variants",
    ];
    if wgpu_ran {
        expected.push("wgpu_reps");
        expected.push("wgpu_samples_alone_reps");
        expected.sort_unstable();
    }
    assert_eq!(keys(&json), expected);
    assert_eq!(json["samples"], 16);
    assert_eq!(json["reps"], 1);
    assert_eq!(
        json["device"],
        serde_json::to_value(&report.device).expect("device info serializes")
    );
    assert!(json["device"]["name"].is_string());

    let variants = json["variants"].as_array().expect("variants is an array");
    let mut tools = std::collections::BTreeSet::new();
    for v in variants {
        assert_eq!(
            keys(v),
            [
                "gpu_ns_per_sample",
                "gpu_ratio_to_raw",
                "host_ratio_to_raw",
                "host_record_ns_per_sample",
                "host_resolve_ns_per_sample",
                "name",
                "placement",
                "rounds",
                "tool"
            ]
        );
        let name = v["name"].as_str().expect("name is a string");
        let tool = v["tool"].as_str().expect("tool is a string");
        let placement = v["placement"].as_str().expect("placement is a string");
        assert!(
            [
                "raw-ash",
                "gpu-counters",
                "wgpu",
                "wgpu-profiler",
                "gpu-counters-wgpu"
            ]
            .contains(&tool),
            "{tool}"
        );
        assert!(
            ["none", "precise", "relaxed", "pass", "precise-pass"].contains(&placement),
            "{placement}"
        );
        tools.insert(tool.to_string());
        for field in [
            "gpu_ns_per_sample",
            "host_record_ns_per_sample",
            "host_resolve_ns_per_sample",
        ] {
            finite_non_negative(&v[field], &format!("{name}: {field}"));
        }
        for field in ["host_ratio_to_raw", "gpu_ratio_to_raw"] {
            if tool == "gpu-counters" && placement != "none" {
                if !v[field].is_null() {
                    finite_non_negative(&v[field], &format!("{name}: {field}"));
                }
            } else {
                assert!(v[field].is_null(), "{name}: {field} must be null");
            }
        }
    }
    for tool in ["raw-ash", "gpu-counters"] {
        assert!(tools.contains(tool), "no {tool} variant");
        for placement in ["none", "precise", "relaxed", "pass", "precise-pass"] {
            assert!(
                variants
                    .iter()
                    .any(|v| v["tool"] == tool && v["placement"] == placement),
                "no {tool} variant at {placement}"
            );
        }
    }
    // Both ends of a profiler scope follow all prior work, so it is compared
    // with raw ash doing the same.
    let profiler = variants
        .iter()
        .find(|v| v["name"] == "gpu-counters profiler Frame::scope per dispatch")
        .expect("the profiler row");
    assert_eq!(profiler["placement"], "precise-pass");
    // Every raw placement that gpu-counters is compared with was measured, so
    // the ratios exist unless the raw number was below the noise.
    let gc_ratios = variants
        .iter()
        .filter(|v| v["tool"] == "gpu-counters" && v["placement"] != "none")
        .filter(|v| !v["host_ratio_to_raw"].is_null())
        .count();
    assert!(gc_ratios > 0, "no gpu-counters host ratio at all");

    // Where the wgpu harness ran, the gpu-counters-wgpu rows ran with it,
    // and so did their comparisons: the fields exist and the ratios are
    // finite (never compared with a target: performance is not tested).
    let comparisons = json["comparisons"]
        .as_array()
        .expect("comparisons is an array");
    if tools.contains("wgpu") {
        for name in [
            "gpu-counters-wgpu pass timestamp writes per dispatch",
            "gpu-counters-wgpu profiled pass per dispatch",
        ] {
            assert!(
                variants
                    .iter()
                    .any(|v| v["name"] == name && v["tool"] == "gpu-counters-wgpu"),
                "no `{name}` row"
            );
        }
    }
    // Every gpu-counters Vulkan row that samples is compared with the raw
    // row of its placement, per round (8 rows), the profiler's scopes also
    // with the hand-rolled raw profiler, then the wgpu ones (5).
    let vulkan: Vec<&Value> = comparisons
        .iter()
        .filter(|c| {
            c["variant"]
                .as_str()
                .is_some_and(|n| n.starts_with("gpu-counters "))
        })
        .collect();
    assert_eq!(vulkan.len(), 9, "{comparisons:#?}");
    let hand_rolled = vulkan.last().expect("nine comparisons");
    assert_eq!(
        hand_rolled["variant"],
        "gpu-counters profiler Frame::scope per dispatch"
    );
    assert_eq!(
        hand_rolled["against"],
        "raw-ash hand-rolled profiler scopes (ALL_COMMANDS pairs, labelled)"
    );
    for c in &vulkan {
        let v = variants
            .iter()
            .find(|v| v["name"] == c["variant"])
            .expect("the compared row is in the report");
        let r = variants
            .iter()
            .find(|v| v["name"] == c["against"])
            .expect("the raw row is in the report");
        assert_eq!(r["tool"], "raw-ash");
        assert_eq!(v["placement"], r["placement"], "{c:#?}");
        let target = if v["placement"] == "precise-pass" {
            1.5
        } else {
            1.2
        };
        assert_eq!(c["target"], target);
    }
    let wgpu = comparisons.len() - vulkan.len();
    assert_eq!(wgpu, if tools.contains("wgpu") { 5 } else { 0 });
    if tools.contains("wgpu") {
        // Profiled passes also against raw writes into passes labelled as
        // theirs are.
        let labelled = comparisons.last().expect("five wgpu comparisons");
        assert_eq!(
            labelled["variant"],
            "gpu-counters-wgpu profiled pass per dispatch"
        );
        assert_eq!(
            labelled["against"],
            "wgpu pass timestamp_writes, labelled passes"
        );
        assert_eq!(labelled["target"], 1.1);
        assert!(variants
            .iter()
            .any(|v| v["name"] == labelled["against"] && v["tool"] == "wgpu"));
    }
    assert_eq!(wgpu_ran, tools.contains("wgpu"));
    if wgpu_ran {
        assert_eq!(json["wgpu_reps"], 3);
    }
    // Each group's ratios are taken over its own rounds: at most 1 for the
    // Vulkan rows, 3 for the wgpu rows (fewer only where a denominator was
    // below the noise).
    for c in comparisons {
        let wgpu_row = c["variant"]
            .as_str()
            .is_some_and(|n| n.starts_with("gpu-counters-wgpu "));
        let most = if wgpu_row { 3 } else { 1 };
        for field in ["gpu_ratio", "host_ratio"] {
            if let Some(rounds) = c[field]["rounds"].as_u64() {
                assert!((1..=most).contains(&rounds), "{field}: {c:#?}");
            }
        }
    }
    // Every row says over how many rounds it was measured: its group's.
    // (A comparison's own count may be lower: it leaves out rounds whose
    // denominator was below the noise, which on lavapipe is timing.)
    for v in variants {
        let wgpu_row = ["wgpu", "wgpu-profiler", "gpu-counters-wgpu"]
            .contains(&v["tool"].as_str().unwrap_or(""));
        let name = &v["name"];
        assert_eq!(v["rounds"], if wgpu_row { 3 } else { 1 }, "{name}");
    }
    for c in comparisons {
        assert_eq!(
            keys(c),
            [
                "against",
                "against_gpu_ns_per_scope",
                "against_host_ns_per_scope",
                "gpu_ratio",
                "gpu_ratio_of_medians",
                "host_ratio",
                "host_ratio_of_medians",
                "target",
                "variant",
                "variant_gpu_ns_per_scope",
                "variant_host_ns_per_scope"
            ]
        );
        // Each side's median over the other's: null where the denominator
        // is not above 0, else exactly that quotient.
        for (field, num, den) in [
            (
                "gpu_ratio_of_medians",
                "variant_gpu_ns_per_scope",
                "against_gpu_ns_per_scope",
            ),
            (
                "host_ratio_of_medians",
                "variant_host_ns_per_scope",
                "against_host_ns_per_scope",
            ),
        ] {
            let (n, d) = (c[num].as_f64().unwrap(), c[den].as_f64().unwrap());
            match c[field].as_f64() {
                Some(r) => assert!(d > 0.0 && (r - n / d).abs() <= 1e-9 * r.abs().max(1.0)),
                None => assert!(c[field].is_null() && d <= 0.0, "{field}: {}", c[field]),
            }
        }
        let what = format!("{} / {}", c["variant"], c["against"]);
        for field in [
            "target",
            "variant_gpu_ns_per_scope",
            "against_gpu_ns_per_scope",
            "variant_host_ns_per_scope",
            "against_host_ns_per_scope",
        ] {
            finite_non_negative(&c[field], &format!("{what}: {field}"));
        }
        // A ratio is null where the denominator's added cost was below the
        // noise in every round (on lavapipe, on two busy cores, it can be
        // for host time too): present, but not a number then.
        for field in ["gpu_ratio", "host_ratio"] {
            assert!(c.get(field).is_some(), "{what}: no {field} field");
            let r = &c[field];
            if r.is_null() {
                continue;
            }
            assert_eq!(
                keys(r),
                [
                    "max",
                    "median",
                    "median_high",
                    "median_low",
                    "min",
                    "rounds",
                    "settled",
                    "within_target"
                ],
                "{what}: {field}"
            );
            let min = finite_non_negative(&r["min"], &format!("{what}: {field}.min"));
            let median = finite_non_negative(&r["median"], &format!("{what}: {field}.median"));
            let max = finite_non_negative(&r["max"], &format!("{what}: {field}.max"));
            assert!(min <= median && median <= max, "{what}: {field} {r}");
            assert!(r["rounds"].as_u64() >= Some(1), "{what}: {field} {r}");
            assert!(r["within_target"].is_boolean(), "{what}: {field} {r}");
            assert!(r["settled"].is_boolean(), "{what}: {field} {r}");
            // Fewer than 6 rounds give no interval of the median, and
            // settle nothing.
            if r["rounds"].as_u64() < Some(6) {
                assert!(
                    r["median_low"].is_null() && r["median_high"].is_null(),
                    "{r}"
                );
                assert_eq!(r["settled"], false, "{what}: {field} {r}");
            }
        }
    }

    // The samples-alone rows: the same nine Vulkan comparisons and, where
    // wgpu ran, the same five wgpu ones, host side only, over their own 2
    // rounds (1 for the wgpu ones).
    assert_eq!(json["samples_alone_reps"], 2);
    if wgpu_ran {
        assert_eq!(json["wgpu_samples_alone_reps"], 1);
    }
    let alone = json["samples_alone"]
        .as_array()
        .expect("samples_alone is an array");
    let pairs = |list: &[&Value]| -> Vec<(String, String, f64)> {
        list.iter()
            .map(|c| {
                (
                    c["variant"].as_str().unwrap_or_default().to_string(),
                    c["against"].as_str().unwrap_or_default().to_string(),
                    c["target"].as_f64().unwrap_or(f64::NAN),
                )
            })
            .collect()
    };
    assert_eq!(
        pairs(&alone.iter().collect::<Vec<_>>()),
        pairs(&comparisons.iter().collect::<Vec<_>>()),
        "samples_alone compares what the comparisons do"
    );
    for c in alone {
        let what = format!("samples alone: {} / {}", c["variant"], c["against"]);
        assert_eq!(
            keys(c),
            [
                "against",
                "against_host_ns_per_scope",
                "host_ratio",
                "host_ratio_of_medians",
                "target",
                "variant",
                "variant_host_ns_per_scope"
            ],
            "{what}"
        );
        let v = finite_non_negative(&c["variant_host_ns_per_scope"], &what);
        let a = finite_non_negative(&c["against_host_ns_per_scope"], &what);
        let wgpu_row = c["variant"]
            .as_str()
            .is_some_and(|n| n.starts_with("gpu-counters-wgpu "));
        if wgpu_row {
            // An empty wgpu pass is microseconds of wgpu's own work, many
            // times its two writes: over 16 passes a side's difference may
            // be noise at or below 0, read as 0 and left out of the ratio.
            // What holds whatever the timing: the fields, and a ratio only
            // of rounds that had a denominator, at most its group's 1.
            let r = &c["host_ratio"];
            assert!(r.is_null() || r["rounds"] == 1, "{what}: {r}");
            assert_eq!(c["host_ratio_of_medians"].is_null(), a == 0.0, "{what}");
            continue;
        }
        // Each side's samples cost something on the host: without the
        // dispatches the Vulkan baselines are tiny, so both are above 0.
        assert!(v > 0.0 && a > 0.0, "{what}: {c:#?}");
        let r = &c["host_ratio"];
        assert!(
            r["rounds"].as_u64().is_some_and(|n| (1..=2).contains(&n)),
            "{what}: {r}"
        );
        let median = finite_non_negative(&r["median"], &what);
        assert!(r["min"].as_f64() <= Some(median) && Some(median) <= r["max"].as_f64());
        let of_medians = finite_non_negative(&c["host_ratio_of_medians"], &what);
        assert!(
            (of_medians - v / a).abs() <= 1e-9 * of_medians.max(1.0),
            "{what}"
        );
    }

    let resolve = &json["resolve"];
    assert_eq!(
        keys(resolve),
        [
            "copy_ns",
            "fresh_result_ns",
            "ratio_to_copy",
            "resolve_ns",
            "samples",
            "samples_per_s"
        ]
    );
    assert_eq!(resolve["samples"], 4096);
    assert!(finite_non_negative(&resolve["samples_per_s"], "samples_per_s") > 0.0);
    assert!(finite_non_negative(&resolve["ratio_to_copy"], "ratio_to_copy") > 0.0);
    assert!(finite_non_negative(&resolve["fresh_result_ns"], "fresh_result_ns") > 0.0);
    assert!(finite_non_negative(&resolve["resolve_ns"], "resolve_ns") > 0.0);
    assert!(finite_non_negative(&resolve["copy_ns"], "copy_ns") > 0.0);

    let cal = &json["calibration"];
    assert_eq!(
        keys(cal),
        [
            "bracket_violations",
            "drift_ns",
            "drift_window_s",
            "error_bound_ns",
            "median_max_deviation_ns",
            "min_max_deviation_ns"
        ]
    );
    for field in [
        "min_max_deviation_ns",
        "median_max_deviation_ns",
        "error_bound_ns",
        "drift_ns",
        "drift_window_s",
    ] {
        finite_non_negative(&cal[field], field);
    }
    assert!(cal["min_max_deviation_ns"].as_u64() <= cal["median_max_deviation_ns"].as_u64());
    assert!(cal["drift_window_s"].as_f64().expect("a number") >= 1.0);
    assert_eq!(
        cal["bracket_violations"], 0,
        "refitted times left their bracket"
    );
}

#[test]
fn bad_arguments_are_errors() {
    for args in [
        BenchArgs {
            samples: 0,
            ..BenchArgs::default()
        },
        BenchArgs {
            reps: 0,
            ..BenchArgs::default()
        },
        BenchArgs {
            wgpu_reps: Some(0),
            ..BenchArgs::default()
        },
        BenchArgs {
            wgpu_reps: Some(gpu_counters_bench::MAX_REPS + 1),
            ..BenchArgs::default()
        },
        BenchArgs {
            host_reps: 0,
            ..BenchArgs::default()
        },
        BenchArgs {
            host_reps: gpu_counters_bench::MAX_REPS + 1,
            ..BenchArgs::default()
        },
        BenchArgs {
            resolve_samples: 0,
            ..BenchArgs::default()
        },
        BenchArgs {
            drift_seconds: f64::NAN,
            ..BenchArgs::default()
        },
        BenchArgs {
            samples: 1 << 30,
            ..BenchArgs::default()
        },
        BenchArgs {
            samples: gpu_counters_bench::MAX_CUDA_SAMPLES + 1,
            backend: gpu_counters_bench::BenchBackend::Cuda,
            ..BenchArgs::default()
        },
        BenchArgs {
            kernel_ns: gpu_counters_bench::MAX_KERNEL_NS + 1,
            backend: gpu_counters_bench::BenchBackend::Cuda,
            ..BenchArgs::default()
        },
    ] {
        let e = gpu_counters_bench::run(&args).expect_err("rejected");
        assert!(e.to_string().contains("invalid argument"), "{e}");
    }
}

/// `--backend cuda` without a CUDA driver is a typed error naming it, not
/// a panic (on a machine with one, the tiny run's report has every row).
#[test]
fn cuda_backend_runs_or_names_the_missing_driver() {
    let args = BenchArgs {
        backend: gpu_counters_bench::BenchBackend::Cuda,
        samples: 8,
        reps: 1,
        resolve_samples: 16,
        drift_seconds: 0.0,
        json: true,
        ..BenchArgs::default()
    };
    match gpu_counters_bench::run(&args) {
        Err(e) => {
            assert!(matches!(e, gpu_counters_bench::BenchError::Cuda(_)), "{e}");
            assert!(e.to_string().contains("libcuda"), "{e}");
        }
        Ok(report) => {
            let json = serde_json::to_value(&report).unwrap();
            let names: Vec<&str> = json["variants"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v["name"].as_str().unwrap())
                .collect();
            assert!(names.len() >= 8, "{names:?}");
            assert_eq!(report.cuda_calibration.as_ref().unwrap().reads_outside, 0);
            assert_eq!(report.calibration.bracket_violations, 0);
        }
    }
}

/// A bad `--wgpu-reps` or `--wgpu-host-reps` is refused naming it, before
/// any device is opened.
#[test]
fn bad_wgpu_reps_are_named() {
    let max = gpu_counters_bench::MAX_REPS;
    let reps = |r| BenchArgs {
        wgpu_reps: Some(r),
        ..BenchArgs::default()
    };
    let host_reps = |r| BenchArgs {
        wgpu_host_reps: Some(r),
        ..BenchArgs::default()
    };
    for (args, says) in [
        (reps(0), "--wgpu-reps must be at least 1"),
        (reps(max + 1), "--wgpu-reps 1001: must be at most 1000"),
        (host_reps(0), "--wgpu-host-reps must be at least 1"),
        (
            host_reps(max + 1),
            "--wgpu-host-reps 1001: must be at most 1000",
        ),
    ] {
        let e = args.validate().expect_err("rejected");
        assert!(e.to_string().contains(says), "{e}");
    }
}
