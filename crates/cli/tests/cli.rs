//! The `gpu-counters` command end to end, on the default Vulkan device
//! (lavapipe in CI) under the Khronos validation layer: any validation
//! message fails the command, and so the test. Devices, the workloads'
//! exact counts, and bad input; the outputs are in `outputs.rs`, the wgpu
//! and CUDA backends in `backends.rs`.

mod common;

use common::*;
use predicates::prelude::*;
use serde_json::Value;

#[test]
fn devices_lists_every_device_and_marks_the_default() {
    let text = ok(&["devices"]);
    assert!(text.contains("* [0]") || text.contains("* ["), "{text}");
    assert!(text.contains("counter sets"), "{text}");
    assert!(text.contains("sampling points"), "{text}");
}

#[test]
fn devices_json_structure() {
    let v = json(&["devices"]);
    let devices = v["devices"].as_array().expect("devices array");
    assert!(!devices.is_empty());
    let mut defaults = 0;
    for (i, d) in devices.iter().enumerate() {
        assert_eq!(u(&d["index"]), i as u64);
        assert!(d["name"].as_str().is_some_and(|s| !s.is_empty()));
        assert_eq!(d["backend"], "vulkan");
        assert!(d["device_type"].is_string());
        assert!(d["timestamp_period_ns"].as_f64().is_some_and(|p| p > 0.0));
        assert!(d["timestamp_valid_bits"].is_u64());
        assert!(d["calibration"].is_string());
        if d["default"] == Value::Bool(true) {
            defaults += 1;
        }
        let sets = d["counter_sets"].as_array().expect("counter_sets");
        for s in sets {
            let name = s["name"].as_str().expect("set name");
            assert!(
                ["timestamp", "statistic", "stage_utilization"].contains(&name),
                "{name}"
            );
            for c in s["counters"].as_array().expect("counters") {
                let c = c.as_str().expect("counter name");
                assert!(
                    c.chars().all(|ch| ch.is_ascii_lowercase() || ch == '_'),
                    "{c}"
                );
            }
        }
        let timestamp = sets
            .iter()
            .find(|s| s["name"] == "timestamp")
            .expect("timestamp set");
        assert_eq!(timestamp["counters"], serde_json::json!(["timestamp"]));
        for p in d["sampling_points"].as_array().expect("sampling_points") {
            assert!(
                ["stage", "draw", "dispatch", "blit"].contains(&p.as_str().expect("point")),
                "{p}"
            );
        }
    }
    assert_eq!(defaults, 1);
}

#[test]
fn run_compute_counts_exact_invocations() {
    let (d, w, s) = COUNTED_DWS;
    let mut args = vec!["run", "compute", "--frames", "2"];
    args.extend(COUNTED_COMPUTE);
    let v = json(&args);
    assert_eq!(v["workload"]["name"], "compute");
    assert_eq!(u(&v["workload"]["dispatches"]), d);
    assert_eq!(u(&v["workload"]["workgroups"]), w);
    assert_eq!(u(&v["workload"]["workgroup_size"]), s);
    assert_eq!(u(&v["workload"]["iterations"]), 5);
    assert!(v["device"]["name"].is_string());
    assert!(v["device"]["counter_sets"].is_array());
    assert!(v["calibration"]["method"].is_string());
    assert!(v["calibration"]["max_deviation_ns"].is_u64());
    assert!(v["calibration"]["error_bound_ns"].is_u64());
    for passes in check_frames(&v, 2) {
        assert_eq!(passes.len(), 1);
        let p = &passes[0];
        assert_eq!(p["label"], "compute");
        assert_eq!(p["kind"], "compute");
        assert_eq!(u(&p["statistics"]["compute_kernel_invocations"]), d * w * s);
        assert_eq!(u(&p["expected"]["compute_kernel_invocations"]), d * w * s);
    }
}

fn check_render(t: u64, w: u64, h: u64) {
    let v = json(&[
        "run",
        "render",
        "--frames",
        "1",
        "--triangles",
        &t.to_string(),
        "--width",
        &w.to_string(),
        "--height",
        &h.to_string(),
    ]);
    let covered = covered_pixels(t, w, h);
    for passes in check_frames(&v, 1) {
        assert_eq!(passes.len(), 1);
        let p = &passes[0];
        assert_eq!(p["kind"], "render");
        let st = &p["statistics"];
        assert_eq!(u(&st["vertex_invocations"]), 3 * t);
        assert_eq!(u(&st["clipper_invocations"]), t);
        assert_eq!(u(&st["fragments_passed"]), covered, "T={t} {w}x{h}");
        assert_eq!(u(&p["expected"]["fragments_passed"]), covered);
        assert_eq!(u(&p["expected"]["vertex_invocations"]), 3 * t);
    }
}

#[test]
fn run_render_counts_vertices_primitives_and_covered_pixels() {
    // By hand: 37 cells of 25 pixels fit in 256x128 (10x5), legs 12 and 24,
    // 12 * 12 = 144 pixels per triangle.
    assert_eq!(covered_pixels(37, 256, 128), 37 * 144);
    check_render(37, 256, 128);
    check_render(5, 17, 9);
}

#[test]
fn run_mixed_exports_trace_csv_and_svg() {
    let dir = tempfile::tempdir().expect("temp dir");
    let trace = dir.path().join("run.trace.json");
    let csv = dir.path().join("run.csv");
    let svg = dir.path().join("run.svg");
    let v = json(&[
        "run",
        "mixed",
        "--frames",
        "2",
        "--dispatches",
        "2",
        "--workgroups",
        "5",
        "--workgroup-size",
        "3",
        "--iterations",
        "4",
        "--triangles",
        "3",
        "--width",
        "32",
        "--height",
        "16",
        "--copy-bytes",
        "4K",
        "--trace",
        trace.to_str().expect("path"),
        "--csv",
        csv.to_str().expect("path"),
        "--svg",
        svg.to_str().expect("path"),
    ]);
    assert_eq!(u(&v["workload"]["copy_bytes"]), 4096);
    let frames = check_frames(&v, 2);
    for passes in &frames {
        let kinds: Vec<&str> = passes.iter().map(|p| p["kind"].as_str().unwrap()).collect();
        assert_eq!(kinds, ["compute", "render", "blit"]);
        let labels: Vec<&str> = passes
            .iter()
            .map(|p| p["label"].as_str().unwrap())
            .collect();
        assert_eq!(labels, ["compute", "render", "copy"]);
        assert_eq!(
            u(&passes[0]["statistics"]["compute_kernel_invocations"]),
            30
        );
        assert_eq!(u(&passes[1]["statistics"]["vertex_invocations"]), 9);
        // Passes are serialized by barriers.
        for pair in passes.windows(2) {
            assert!(u(&pair[0]["start_ns"]) <= u(&pair[1]["start_ns"]));
        }
    }
    // No temporary file is left beside the outputs.
    let mut names = files_in(dir.path());
    names.sort();
    assert_eq!(names, ["run.csv", "run.svg", "run.trace.json"]);

    check_trace(&trace, &frames);

    // CSV: the header and one row per pass and frame.
    let text = std::fs::read_to_string(&csv).expect("csv");
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().expect("header").split(',').collect();
    assert_eq!(header[..3], ["frame", "label", "kind"]);
    for col in [
        "start_ns",
        "end_ns",
        "duration_ns",
        "compute_kernel_invocations",
    ] {
        assert!(header.contains(&col), "{col}");
    }
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), 6);
    for row in &rows {
        assert_eq!(row.len(), header.len());
    }
    let start = header.iter().position(|c| *c == "start_ns").unwrap();
    assert_eq!(rows[0][1], "compute");
    assert_eq!(rows[0][start], frames[0][0]["start_ns"].to_string());
    assert_eq!(rows[5][2], "blit");

    // SVG: well-formed, one bar per pass.
    let text = std::fs::read_to_string(&svg).expect("svg");
    let doc = roxmltree::Document::parse(&text).expect("the SVG parses");
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    let bars = doc
        .descendants()
        .filter(|n| n.attribute("class") == Some("bar"))
        .count();
    assert_eq!(bars, 6);
}

#[test]
fn run_prints_tables_and_a_summary() {
    let text = ok(&[
        "run",
        "mixed",
        "--frames",
        "3",
        "--dispatches",
        "1",
        "--workgroups",
        "2",
        "--workgroup-size",
        "3",
        "--iterations",
        "1",
        "--triangles",
        "2",
        "--width",
        "16",
        "--height",
        "16",
        "--copy-bytes",
        "256",
    ]);
    for needle in [
        "frame 0",
        "frame 2",
        "compute_kernel_invocations=6 ✓",
        "vertex_invocations=6 ✓",
        "duration over 3 frames",
        "median",
        "expected counts match",
    ] {
        assert!(text.contains(needle), "`{needle}` missing:\n{text}");
    }
}

#[test]
fn bad_workload_option_and_sizes_exit_2() {
    // clap's own usage errors: first line names the problem, exit 2.
    gpu_counters()
        .args(["run", "bogus"])
        .assert()
        .code(2)
        .stderr(predicate::str::starts_with("error: invalid value 'bogus'"));
    gpu_counters()
        .args(["run", "compute", "--no-such-option"])
        .assert()
        .code(2)
        .stderr(predicate::str::starts_with(
            "error: unexpected argument '--no-such-option'",
        ));
    gpu_counters()
        .args(["run", "compute", "--workgroups", "-3"])
        .assert()
        .code(2)
        .stderr(predicate::str::starts_with("error:"));
    bad_input(
        &["run", "compute", "--workgroups", "0"],
        "--workgroups 0: must be at least 1",
    );
    bad_input(
        &["run", "compute", "--frames", "0"],
        "--frames 0: must be at least 1",
    );
    bad_input(
        &["run", "render", "--triangles", "0"],
        "--triangles 0: must be at least 1",
    );
    bad_input(
        &["run", "mixed", "--copy-bytes", "0"],
        "--copy-bytes 0: must be at least 1",
    );
    bad_input(
        &["run", "compute", "--triangles", "3"],
        "--triangles: does not apply to the compute workload",
    );
    // Past the device's limits: the workload names the limit.
    bad_input(
        &["run", "compute", "--workgroup-size", "4294967295"],
        "--workgroup-size 4294967295: workgroup_size 4294967295 is over the device limit",
    );
    bad_input(
        &[
            "run",
            "render",
            "--triangles",
            "5",
            "--width",
            "8",
            "--height",
            "8",
        ],
        "--triangles 5: triangles 5 do not fit",
    );
}

/// With no Vulkan driver, every form of `--device` fails in one line that
/// says so and how to get one: exit 1 (the machine, not the input), and no
/// output file.
#[test]
fn no_vulkan_driver_is_one_clear_line_for_every_device_form() {
    let dir = tempfile::tempdir().expect("temp dir");
    let trace = dir.path().join("t.json");
    let trace = trace.to_str().unwrap();
    for device in [None, Some("0"), Some("all"), Some("0,1")] {
        let mut args = vec!["run", "compute", "--frames", "1", "--trace", trace];
        if let Some(d) = device {
            args.extend(["--device", d]);
        }
        let mut cmd = gpu_counters();
        cmd.env("VK_DRIVER_FILES", dir.path().join("no-such-icd.json"))
            .env_remove("VK_ICD_FILENAMES")
            .env_remove("GPU_COUNTERS_VALIDATION");
        let out = cmd.args(&args).output().expect("run gpu-counters");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        let lines: Vec<&str> = stderr.lines().collect();
        assert_eq!(lines.len(), 1, "{args:?}: {stderr}");
        assert!(
            lines[0].starts_with("error: ") && lines[0].contains("found no driver"),
            "{args:?}: {stderr}"
        );
        assert!(files_in(dir.path()).is_empty(), "{args:?}");
    }
}

#[test]
fn missing_device_exits_2() {
    bad_input(
        &["run", "compute", "--device", "4096"],
        "--device 4096: no such device",
    );
}

#[test]
fn run_sizes_over_their_limits_exit_2_at_once() {
    for (args, needle) in [
        (
            &["compute", "--dispatches", "4000000000"][..],
            "--dispatches 4000000000: must be at most 65536",
        ),
        (
            &["compute", "--iterations", "4000000000"],
            "--iterations 4000000000: must be at most 1000000",
        ),
        (
            &["compute", "--frames", "4000000000"],
            "--frames 4000000000: must be at most 100000",
        ),
        (
            &["render", "--triangles", "4000000000"],
            "--triangles 4000000000: must be at most 1431655765",
        ),
        (
            &["mixed", "--triangles", "4000000000"],
            "--triangles 4000000000: must be at most 1431655765",
        ),
        (
            &[
                "compute",
                "--dispatches",
                "65536",
                "--workgroups",
                "65535",
                "--workgroup-size",
                "2",
            ],
            "--dispatches 65536 * --workgroups 65535 * --workgroup-size 2 = 8589803520 kernel invocations per pass: must be at most 4294967295",
        ),
        (
            &["mixed", "--workgroups", "4000000000"],
            "--workgroups 4000000000",
        ),
        // Device limits, checked before any work is recorded.
        (
            &["render", "--width", "4000000000"],
            "--width 4000000000: width 4000000000 is over the device limit",
        ),
        (
            &["mixed", "--height", "4000000000"],
            "--height 4000000000: height 4000000000 is over the device limit",
        ),
        (
            &["mixed", "--copy-bytes", "1000000G"],
            "--copy-bytes 1073741824000000: bytes 1073741824000000 is over the largest device-local memory heap",
        ),
    ] {
        let mut all = vec!["run"];
        all.extend_from_slice(args);
        let start = std::time::Instant::now();
        bad_input(&all, needle);
        assert!(
            start.elapsed() < std::time::Duration::from_secs(30),
            "{all:?} took {:?}",
            start.elapsed()
        );
    }
}

#[test]
fn bench_sizes_over_their_limits_exit_2_at_once() {
    for (args, needle) in [
        (
            &["--drift-seconds", "1e300"][..],
            "--drift-seconds 1e300: must be",
        ),
        (&["--drift-seconds", "NaN"], "--drift-seconds NaN: must be"),
        (&["--drift-seconds", "inf"], "--drift-seconds inf: must be"),
        (&["--drift-seconds=-1"], "--drift-seconds -1: must be"),
        (&["--drift-seconds", "86401"], "from 0 to 86400"),
        (
            &["--samples", "4000000000"],
            "--samples 4000000000: must be at most 524288",
        ),
        (
            &["--reps", "4000000000"],
            "--reps 4000000000: must be at most 1000",
        ),
        (
            &["--resolve-samples", "4000000000"],
            "--resolve-samples 4000000000: must be at most 1048576",
        ),
        (&["--samples", "0"], "--samples must be at least 1"),
    ] {
        let mut all = vec!["bench"];
        all.extend_from_slice(args);
        let start = std::time::Instant::now();
        bad_input(&all, needle);
        assert!(
            start.elapsed() < std::time::Duration::from_secs(30),
            "{all:?} took {:?}",
            start.elapsed()
        );
    }
}

#[test]
fn vk_instance_layers_in_the_environment_does_not_fail_validation() {
    // The loader then reports "env var 'VK_INSTANCE_LAYERS' defined" notices
    // through the debug messenger; they are not validation messages.
    for args in [&["devices"][..], &TINY[..]] {
        let out = gpu_counters()
            .env("VK_INSTANCE_LAYERS", "VK_LAYER_KHRONOS_validation")
            .args(args)
            .output()
            .expect("run gpu-counters");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "gpu-counters {args:?} failed with {:?}:\n{stderr}",
            out.status.code()
        );
        assert!(!stderr.contains("validation:"), "{stderr}");
    }
}

/// An output path with a line break in it, and every other piece of user
/// text an error quotes (a workload, a backend, a device list, a byte
/// count, an unknown option), gives an error of exactly one line: the text
/// is shown escaped (`\n`), the path quoted.
#[test]
fn errors_quoting_user_text_with_line_breaks_stay_on_one_line() {
    let dir = tempfile::tempdir().expect("temp dir");
    let nl = dir.path().join("no\nsuch").join("t.json");
    let nl = nl.to_str().unwrap();
    let shown = format!("{nl:?}");
    let line = bad_input(&as_strs(&tiny(&["--trace", nl])), "does not exist");
    assert!(line.contains(&format!("--trace {shown}")), "{line}");
    // A path whose directory is a file: the directory is quoted too.
    std::fs::write(dir.path().join("f\ril\te"), "").unwrap();
    let under = dir.path().join("f\ril\te").join("x.svg");
    let line = bad_input(
        &as_strs(&tiny(&["--svg", under.to_str().unwrap()])),
        "--svg",
    );
    assert!(line.contains(r"f\ril\te"), "{line}");
    for (args, needle) in [
        (
            &["run", "com\npute"][..],
            r"error: invalid value 'com\npute'",
        ),
        (
            &["run", "compute", "--backend", "vul\nkan"],
            r#"--backend "vul\nkan""#,
        ),
        (&["devices", "--backend", "a\r\nb"], r#"--backend "a\r\nb""#),
        (
            &["run", "compute", "--device", "0\n1"],
            r#"--device "0\n1""#,
        ),
        (&["run", "mixed", "--copy-bytes", "1\nX"], r"1\nX"),
        (&["run", "compute", "--no\nsuch"], r"--no\nsuch"),
        (&["run", "compute", "--frames", "1\n"], r"1\n"),
        (&["run"], "error: "),
        (&["no-such-command\u{1b}[2J"], r"\u{1b}[2J"),
    ] {
        bad_input(args, needle);
    }
}

/// A `--device` list has at most 256 indices: a longer one is bad input
/// naming the limit, before any device is opened.
#[test]
fn a_device_list_over_its_limit_exits_2() {
    let list = |n: usize| (0..n).map(|i| i.to_string()).collect::<Vec<_>>().join(",");
    let long = list(257);
    bad_input(
        &["run", "compute", "--device", &long],
        "257 indices: at most 256 may be listed",
    );
    let longest = list(20_000);
    bad_input(
        &["run", "compute", "--device", &longest],
        "20000 indices: at most 256 may be listed",
    );
}
