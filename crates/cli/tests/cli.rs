//! The `gpu-counters` command end to end, on the default Vulkan device
//! (lavapipe in CI) under the Khronos validation layer: any validation
//! message fails the command, and so the test.

use assert_cmd::Command;
use predicates::prelude::*;
use serde_json::Value;
use std::path::Path;

/// The command with validation on.
fn gpu_counters() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gpu-counters"));
    cmd.env("GPU_COUNTERS_VALIDATION", "1");
    cmd
}

/// Runs the command, expects success and no validation message, and returns
/// its stdout.
fn ok(args: &[&str]) -> String {
    let out = gpu_counters()
        .args(args)
        .output()
        .expect("run gpu-counters");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "gpu-counters {args:?} failed with {:?}:\n{stderr}",
        out.status.code()
    );
    assert!(
        !stderr.contains("validation"),
        "validation messages:\n{stderr}"
    );
    String::from_utf8(out.stdout).expect("UTF-8 stdout")
}

/// Runs the command with `--json` added and parses stdout as one JSON value.
fn json(args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.push("--json");
    let text = ok(&all);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("stdout is not JSON ({e}):\n{text}"))
}

/// Runs the command expecting exit code 2 with exactly one stderr line that
/// starts with `error:` and contains `needle`; returns that line
/// ([`one_error_line`] with code 2).
fn bad_input(args: &[&str], needle: &str) -> String {
    one_error_line(args, 2, needle)
}

/// Runs the command expecting exit code `code`, nothing on stdout and
/// exactly one stderr line that starts with `error:` and contains
/// `needle`; returns that line.
///
/// Without `XDG_RUNTIME_DIR` in the environment (a headless CI machine), it
/// is set to an empty private directory for the command: wgpu enables
/// `VK_KHR_wayland_surface` on its instance, and Mesa's device-select
/// implicit layer then tries a Wayland connection, whose library prints
/// `error: XDG_RUNTIME_DIR is invalid or not set` to stderr. That line is
/// neither the command's nor a validation message.
fn one_error_line(args: &[&str], code: i32, needle: &str) -> String {
    let runtime_dir = tempfile::tempdir().expect("temp dir");
    let mut cmd = gpu_counters();
    if std::env::var_os("XDG_RUNTIME_DIR").is_none() {
        cmd.env("XDG_RUNTIME_DIR", runtime_dir.path());
    }
    let out = cmd.args(args).output().expect("run gpu-counters");
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(
        out.status.code(),
        Some(code),
        "gpu-counters {args:?}: stderr:\n{stderr}"
    );
    assert!(
        out.stdout.is_empty(),
        "stdout on exit {code}: {:?}",
        out.stdout
    );
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one stderr line expected:\n{stderr}");
    assert!(lines[0].starts_with("error: "), "{stderr}");
    assert!(
        lines[0].contains(needle),
        "`{needle}` not in the error:\n{stderr}"
    );
    lines[0].to_string()
}

fn u(v: &Value) -> u64 {
    v.as_u64()
        .unwrap_or_else(|| panic!("{v} is not an unsigned integer"))
}

fn files_in(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .expect("read dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect()
}

/// Pixels covered by `t` triangles in a `w` x `h` target, computed here
/// independently of the workload: the largest square cell of at least 4
/// pixels such that `t` cells fit, one right triangle with legs `2L` and
/// `L` (`L` = cell / 2) per cell; such a triangle covers exactly `L * L`
/// pixel centers.
fn covered_pixels(t: u64, w: u64, h: u64) -> u64 {
    let cell = (4..=w.min(h))
        .rev()
        .find(|c| (w / c) * (h / c) >= t)
        .expect("the triangles fit");
    let leg = cell / 2;
    t * leg * leg
}

/// Checks the frames of a `run --json` report: times ordered and inside
/// the frame's CPU window widened by each pass's error bound, every check
/// matching; returns the passes of every frame.
fn check_frames(report: &Value, frames: usize) -> Vec<Vec<Value>> {
    check_frames_with(report, frames, true)
}

/// [`check_frames`], where `statistics` says whether the device offers
/// statistics: without them, every pass has none, expects none and has
/// nothing to match.
fn check_frames_with(report: &Value, frames: usize, statistics: bool) -> Vec<Vec<Value>> {
    let list = report["frames"].as_array().expect("frames");
    assert_eq!(list.len(), frames);
    let mut out = Vec::new();
    for frame in list {
        let submit = u(&frame["cpu_submit_ns"]);
        let complete = u(&frame["cpu_complete_ns"]);
        assert!(submit <= complete);
        let passes = frame["passes"].as_array().expect("passes").clone();
        // Each pass's gap is from the previous pass's end (none for the
        // first), and the report says what lies there.
        assert!(report["between_passes"]
            .as_str()
            .is_some_and(|s| !s.is_empty()));
        for (k, p) in passes.iter().enumerate() {
            match k.checked_sub(1) {
                None => assert_eq!(p["gap_before_ns"], Value::Null, "{p}"),
                Some(prev) => assert_eq!(
                    p["gap_before_ns"].as_i64().expect("gap_before_ns"),
                    u(&p["start_ns"]) as i64 - u(&passes[prev]["end_ns"]) as i64,
                    "{p}"
                ),
            }
        }
        for p in &passes {
            let (start, end) = (u(&p["start_ns"]), u(&p["end_ns"]));
            let bound = u(&p["error_bound_ns"]);
            assert!(start <= end, "{p}");
            assert_eq!(u(&p["duration_ns"]), end - start);
            assert!(start + bound >= submit, "start before submit: {p}");
            assert!(end <= complete + bound, "end after complete: {p}");
            assert!(p["label"].is_string() && p["kind"].is_string());
            if !statistics {
                assert_eq!(p["matches"], Value::Null, "{p}");
                assert_eq!(p["statistics"], Value::Null, "{p}");
                assert_eq!(p["expected"], serde_json::json!({}), "{p}");
                continue;
            }
            assert_eq!(p["matches"], Value::Bool(true), "{p}");
            // Never the error sentinel as a number.
            for v in p["statistics"].as_object().expect("statistics").values() {
                assert!(v.as_u64() != Some(u64::MAX), "{p}");
            }
        }
        out.push(passes);
    }
    assert_eq!(report["mismatches"], Value::Array(vec![]));
    out
}

/// Checks a Chrome trace written by `run`: one complete event per pass of
/// each of `frames`, at its start and with its duration, in microseconds.
fn check_trace(trace: &Path, frames: &[Vec<Value>]) {
    let t: Value =
        serde_json::from_str(&std::fs::read_to_string(trace).expect("trace")).expect("JSON");
    let events = t["traceEvents"].as_array().expect("traceEvents");
    for (f, passes) in frames.iter().enumerate() {
        for p in passes {
            let label = p["label"].as_str().unwrap();
            let matching: Vec<&Value> = events
                .iter()
                .filter(|e| e["ph"] == "X" && e["name"] == label && e["args"]["frame"] == f)
                .collect();
            assert_eq!(matching.len(), 1, "frame {f} pass {label}");
            let e = matching[0];
            let ts = e["ts"].as_f64().expect("ts");
            let dur = e["dur"].as_f64().expect("dur");
            assert!((ts - u(&p["start_ns"]) as f64 / 1000.0).abs() < 0.01, "{e}");
            assert!(
                (dur - u(&p["duration_ns"]) as f64 / 1000.0).abs() < 0.01,
                "{e}"
            );
        }
    }
}

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

/// The compute sizes whose count the compute tests of every backend check:
/// D = 3 dispatches of W = 7 workgroups of S = 13 invocations, 5 steps each.
const COUNTED_COMPUTE: [&str; 8] = [
    "--dispatches",
    "3",
    "--workgroups",
    "7",
    "--workgroup-size",
    "13",
    "--iterations",
    "5",
];

/// D, W and S of [`COUNTED_COMPUTE`].
const COUNTED_DWS: (u64, u64, u64) = (3, 7, 13);

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
fn unwritable_outputs_exit_2_and_leave_no_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let missing = dir.path().join("no-such-dir").join("t.json");
    bad_input(
        &["run", "compute", "--trace", missing.to_str().unwrap()],
        "does not exist",
    );
    bad_input(
        &["run", "compute", "--csv", dir.path().to_str().unwrap()],
        "--csv",
    );
    // A size error found before the device is opened, and one found by the
    // workload after the output's temporary file exists: neither leaves a
    // file.
    let svg = dir.path().join("out.svg");
    bad_input(
        &[
            "run",
            "render",
            "--triangles",
            "0",
            "--svg",
            svg.to_str().unwrap(),
        ],
        "--triangles 0",
    );
    bad_input(
        &[
            "run",
            "mixed",
            "--workgroup-size",
            "4294967295",
            "--svg",
            svg.to_str().unwrap(),
            "--trace",
            dir.path().join("t.json").to_str().unwrap(),
        ],
        "--workgroup-size 4294967295",
    );
    assert!(
        files_in(dir.path()).is_empty(),
        "{:?}",
        files_in(dir.path())
    );
}

/// The smallest compute run, for tests about everything but the workload.
const TINY: [&str; 10] = [
    "run",
    "compute",
    "--frames",
    "1",
    "--dispatches",
    "1",
    "--workgroups",
    "1",
    "--iterations",
    "1",
];

/// `TINY` followed by `more`.
fn tiny(more: &[&str]) -> Vec<String> {
    TINY.iter().chain(more).map(|s| s.to_string()).collect()
}

fn as_strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

#[test]
fn one_file_given_to_two_outputs_exits_2() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    let a = d.join("a.json");
    let a = a.to_str().unwrap();
    // The same spelling, under every pair of options.
    for (f1, f2) in [
        ("--trace", "--csv"),
        ("--trace", "--svg"),
        ("--csv", "--svg"),
    ] {
        bad_input(
            &as_strs(&tiny(&[f1, a, f2, a])),
            &format!("{f2} {a}: is the same file as {f1} {a}"),
        );
    }
    // Two spellings of one new file.
    let other_spelling = format!("{}/./a.json", d.display());
    bad_input(
        &as_strs(&tiny(&["--trace", a, "--svg", &other_spelling])),
        "is the same file as --trace",
    );
    let sub = d.join("sub");
    std::fs::create_dir(&sub).unwrap();
    let dotdot = format!("{}/../a.json", sub.display());
    bad_input(
        &as_strs(&tiny(&["--csv", a, "--svg", &dotdot])),
        "is the same file as --csv",
    );
    // A symlink and its target.
    let target = d.join("t.json");
    std::fs::write(&target, "old").unwrap();
    let link = d.join("l.json");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    bad_input(
        &as_strs(&tiny(&[
            "--trace",
            link.to_str().unwrap(),
            "--csv",
            target.to_str().unwrap(),
        ])),
        "is the same file as --trace",
    );
    // Nothing was written or left behind.
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "old");
    let mut names = files_in(d);
    names.sort();
    assert_eq!(names, ["l.json", "sub", "t.json"]);
}

#[test]
fn same_file_name_in_two_directories_is_fine() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (x, y) = (dir.path().join("x"), dir.path().join("y"));
    std::fs::create_dir(&x).unwrap();
    std::fs::create_dir(&y).unwrap();
    let (a, b) = (x.join("out"), y.join("out"));
    ok(&as_strs(&tiny(&[
        "--trace",
        a.to_str().unwrap(),
        "--csv",
        b.to_str().unwrap(),
    ])));
    assert!(std::fs::read_to_string(&a).unwrap().contains("traceEvents"));
    assert!(std::fs::read_to_string(&b).unwrap().starts_with("frame,"));
}

#[test]
fn output_symlink_is_followed_and_kept() {
    let dir = tempfile::tempdir().expect("temp dir");
    let target = dir.path().join("target.json");
    std::fs::write(&target, "old").unwrap();
    let link = dir.path().join("link.json");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    ok(&as_strs(&tiny(&["--trace", link.to_str().unwrap()])));
    let meta = std::fs::symlink_metadata(&link).unwrap();
    assert!(meta.file_type().is_symlink(), "the link was replaced");
    assert_eq!(std::fs::read_link(&link).unwrap(), target);
    let text = std::fs::read_to_string(&target).unwrap();
    assert!(text.contains("traceEvents"), "{text}");
    let mut names = files_in(dir.path());
    names.sort();
    assert_eq!(names, ["link.json", "target.json"]);

    // A dangling link is refused, and stays as it was.
    let dangling = dir.path().join("dangling.json");
    std::os::unix::fs::symlink(dir.path().join("missing.json"), &dangling).unwrap();
    bad_input(
        &as_strs(&tiny(&["--svg", dangling.to_str().unwrap()])),
        "--svg",
    );
    assert!(std::fs::symlink_metadata(&dangling)
        .unwrap()
        .file_type()
        .is_symlink());
    assert!(!dir.path().join("missing.json").exists());
}

#[test]
fn output_to_dev_null_writes_through_and_keeps_the_device() {
    use std::os::unix::fs::FileTypeExt;
    let is_char_device = |p: &Path| {
        std::fs::symlink_metadata(p)
            .map(|m| m.file_type().is_char_device())
            .unwrap_or(false)
    };
    assert!(is_char_device(Path::new("/dev/null")));
    // First through a link to /dev/null in a temporary directory: code that
    // replaces outputs would replace the link here, and fail the test,
    // without touching the real /dev/null (run as root, it would replace
    // /dev/null itself with a regular file).
    let dir = tempfile::tempdir().expect("temp dir");
    let link = dir.path().join("null");
    std::os::unix::fs::symlink("/dev/null", &link).unwrap();
    ok(&as_strs(&tiny(&["--trace", link.to_str().unwrap()])));
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink(),
        "the link to /dev/null was replaced"
    );
    assert_eq!(files_in(dir.path()), ["null"]);
    // Then /dev/null itself.
    ok(&as_strs(&tiny(&["--trace", "/dev/null"])));
    assert!(
        is_char_device(Path::new("/dev/null")),
        "/dev/null is no longer a character device"
    );
}

#[test]
fn output_to_a_fifo_writes_through_and_keeps_the_fifo() {
    use std::os::unix::fs::FileTypeExt;
    let dir = tempfile::tempdir().expect("temp dir");
    let fifo = dir.path().join("trace.fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("run mkfifo");
    assert!(made.success());
    // The reader: opening a FIFO for reading waits for a writer.
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read(&fifo))
    };
    let out = gpu_counters()
        .args(tiny(&["--trace", fifo.to_str().unwrap()]))
        .timeout(std::time::Duration::from_secs(120))
        .output()
        .expect("run gpu-counters");
    // Whatever the command did, release the reader: opening a FIFO for
    // reading and writing never blocks, and closing it ends the reader's
    // read if the command never opened the FIFO.
    drop(
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&fifo),
    );
    let read = reader
        .join()
        .expect("reader thread")
        .expect("read the FIFO");
    assert!(
        out.status.success(),
        "{:?}: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    let trace: Value = serde_json::from_slice(&read).expect("the trace read from the FIFO");
    assert!(trace["traceEvents"].is_array());
    let meta = std::fs::symlink_metadata(&fifo).unwrap();
    assert!(
        meta.file_type().is_fifo(),
        "the FIFO was replaced: {meta:?}"
    );
    assert_eq!(files_in(dir.path()), ["trace.fifo"]);
}

#[test]
fn output_path_ending_in_a_slash_or_in_a_missing_directory_exits_2_before_running() {
    let dir = tempfile::tempdir().expect("temp dir");
    let slash = format!("{}/out.json/", dir.path().display());
    let missing = dir.path().join("missing").join("out.json");
    for (flag, path, needle) in [
        ("--trace", slash.as_str(), "names a directory"),
        ("--csv", "out.csv/", "names a directory"),
        ("--svg", missing.to_str().unwrap(), "does not exist"),
    ] {
        // bad_input also checks that nothing was printed on stdout: no
        // workload ran (a run prints its tables there).
        let start = std::time::Instant::now();
        let line = bad_input(&as_strs(&tiny(&[flag, path])), needle);
        assert!(line.contains(&format!("{flag} {path}")), "{line}");
        assert!(start.elapsed() < std::time::Duration::from_secs(30));
    }
    assert!(
        files_in(dir.path()).is_empty(),
        "{:?}",
        files_in(dir.path())
    );
    assert!(!Path::new("out.csv").exists());
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

#[test]
fn devices_backend_wgpu_lists_wgpu_adapters() {
    let v = json(&["devices", "--backend", "wgpu"]);
    let devices = v["devices"].as_array().expect("devices array");
    assert!(!devices.is_empty(), "no wgpu adapter: {v}");
    for (i, d) in devices.iter().enumerate() {
        assert_eq!(u(&d["index"]), i as u64);
        assert_eq!(d["backend"], "wgpu", "{d}");
        assert!(
            d["wgpu_backend"].as_str().is_some_and(|s| !s.is_empty()),
            "{d}"
        );
        assert!(d["name"].as_str().is_some_and(|s| !s.is_empty()));
        assert!(d["calibration"].is_string());
        assert!(d["default"].is_boolean(), "{d}");
        let sets = d["counter_sets"].as_array().expect("counter_sets");
        let timestamp = sets
            .iter()
            .find(|s| s["name"] == "timestamp")
            .expect("timestamp set");
        assert_eq!(timestamp["counters"], serde_json::json!(["timestamp"]));
    }
    // lavapipe through wgpu's Vulkan backend.
    assert!(devices.iter().any(|d| d["wgpu_backend"] == "vulkan"), "{v}");
    // Exactly one is the adapter `run --backend wgpu` picks by default.
    let defaults = devices
        .iter()
        .filter(|d| d["default"] == Value::Bool(true))
        .count();
    assert_eq!(defaults, 1, "{v}");
}

#[test]
fn devices_backend_all_lists_vulkan_then_wgpu() {
    let v = json(&["devices", "--backend", "all"]);
    let devices = v["devices"].as_array().expect("devices array");
    let backends: Vec<&str> = devices
        .iter()
        .map(|d| d["backend"].as_str().expect("backend"))
        .collect();
    assert!(
        backends.contains(&"vulkan") && backends.contains(&"wgpu"),
        "{v}"
    );
    let first_wgpu = backends.iter().position(|b| *b == "wgpu").expect("wgpu");
    assert!(backends[first_wgpu..].iter().all(|b| *b == "wgpu"), "{v}");
    let text = ok(&["devices", "--backend", "all"]);
    assert!(text.contains("Vulkan device"), "{text}");
    assert!(text.contains("wgpu adapter"), "{text}");
    assert!(text.contains("wgpu backend"), "{text}");
}

#[test]
fn devices_bad_backend_exits_2() {
    bad_input(&["devices", "--backend", "metal"], "--backend metal");
    bad_input(
        &["devices", "--backend", "metal", "--json"],
        "--backend metal",
    );
}

/// `run --backend wgpu --json` with `args` after the workload: checks the
/// frames as [`check_frames`] does (times inside each frame's CPU window,
/// every check matching), that the device is a wgpu adapter, and returns
/// the report.
fn wgpu_run(workload: &str, frames: usize, args: &[&str]) -> (Value, Vec<Vec<Value>>) {
    let frames_arg = frames.to_string();
    let mut all = vec![
        "run",
        workload,
        "--backend",
        "wgpu",
        "--frames",
        &frames_arg,
    ];
    all.extend_from_slice(args);
    let v = json(&all);
    assert_eq!(v["device"]["backend"], "wgpu", "{v}");
    assert_eq!(v["workload"]["name"], workload);
    let passes = check_frames(&v, frames);
    (v, passes)
}

#[test]
fn run_backend_wgpu_compute_counts_exact_invocations() {
    let (d, w, s) = COUNTED_DWS;
    let (v, frames) = wgpu_run("compute", 2, &COUNTED_COMPUTE);
    assert_eq!(u(&v["workload"]["dispatches"]), d);
    assert!(v["calibration"]["method"].is_string());
    for passes in frames {
        assert_eq!(passes.len(), 1);
        let p = &passes[0];
        assert_eq!(p["label"], "compute");
        assert_eq!(p["kind"], "compute");
        assert_eq!(u(&p["statistics"]["compute_kernel_invocations"]), d * w * s);
        assert_eq!(u(&p["expected"]["compute_kernel_invocations"]), d * w * s);
    }
}

#[test]
fn run_backend_wgpu_render_counts_vertices_and_primitives() {
    for (t, w, h) in [(37u64, 256u64, 128u64), (5, 17, 9)] {
        let (_, frames) = wgpu_run(
            "render",
            1,
            &[
                "--triangles",
                &t.to_string(),
                "--width",
                &w.to_string(),
                "--height",
                &h.to_string(),
            ],
        );
        for passes in frames {
            assert_eq!(passes.len(), 1);
            let p = &passes[0];
            assert_eq!(p["label"], "render");
            assert_eq!(p["kind"], "render");
            let st = &p["statistics"];
            assert_eq!(u(&st["vertex_invocations"]), 3 * t, "T={t} {w}x{h}");
            assert_eq!(u(&st["clipper_invocations"]), t, "T={t} {w}x{h}");
            let expected = p["expected"].as_object().expect("expected");
            assert_eq!(u(&expected["vertex_invocations"]), 3 * t);
            assert_eq!(u(&expected["clipper_invocations"]), t);
            // wgpu counts no occlusion: neither measured nor expected.
            assert!(!expected.contains_key("fragments_passed"), "{p}");
            assert!(st.get("fragments_passed").is_none(), "{p}");
        }
    }
}

#[test]
fn run_backend_wgpu_device_is_the_adapter_devices_lists() {
    let listed = json(&["devices", "--backend", "wgpu"]);
    let adapters = listed["devices"].as_array().expect("devices");
    let last = adapters.len() - 1;
    let (v, _) = wgpu_run(
        "compute",
        1,
        &[
            "--device",
            &last.to_string(),
            "--dispatches",
            "1",
            "--workgroups",
            "2",
            "--iterations",
            "1",
        ],
    );
    assert_eq!(u(&v["device"]["index"]), last as u64);
    assert_eq!(v["device"]["name"], adapters[last]["name"]);
    assert_eq!(v["device"]["default"], adapters[last]["default"]);
}

#[test]
fn run_backend_wgpu_writes_outputs_and_tables() {
    let dir = tempfile::tempdir().expect("temp dir");
    let trace = dir.path().join("wgpu.trace.json");
    let csv = dir.path().join("wgpu.csv");
    let sizes = [
        "--triangles",
        "3",
        "--width",
        "32",
        "--height",
        "16",
        "--trace",
        trace.to_str().expect("path"),
        "--csv",
        csv.to_str().expect("path"),
    ];
    let (_, frames) = wgpu_run("render", 2, &sizes);
    let mut names = files_in(dir.path());
    names.sort();
    assert_eq!(names, ["wgpu.csv", "wgpu.trace.json"]);
    check_trace(&trace, &frames);
    let text = std::fs::read_to_string(&csv).expect("csv");
    assert_eq!(text.lines().count(), 3, "{text}");
    let text = ok(&[
        "run",
        "compute",
        "--backend",
        "wgpu",
        "--frames",
        "2",
        "--dispatches",
        "2",
        "--workgroups",
        "3",
        "--workgroup-size",
        "1",
        "--iterations",
        "1",
    ]);
    for needle in [
        "on wgpu adapter [",
        "frame 1",
        "compute_kernel_invocations=6 ✓",
        "duration over 2 frames",
        "expected counts match",
    ] {
        assert!(text.contains(needle), "`{needle}` missing:\n{text}");
    }
}

#[test]
fn run_backend_wgpu_missing_device_exits_2() {
    bad_input(
        &["run", "compute", "--backend", "wgpu", "--device", "4096"],
        "--device 4096: no such wgpu adapter",
    );
}

#[test]
fn run_backend_wgpu_refuses_what_it_cannot_measure() {
    let dir = tempfile::tempdir().expect("temp dir");
    let trace = dir.path().join("mixed.json");
    let line = bad_input(
        &[
            "run",
            "mixed",
            "--backend",
            "wgpu",
            "--trace",
            trace.to_str().expect("path"),
        ],
        "run mixed --backend wgpu: the copy pass cannot be measured on wgpu",
    );
    assert!(line.contains("compute or render"), "{line}");
    assert!(files_in(dir.path()).is_empty(), "an output was written");
    bad_input(
        &["run", "compute", "--backend", "metal"],
        "--backend metal: must be one of vulkan, wgpu",
    );
    bad_input(
        &["run", "compute", "--backend", "all"],
        "--backend all: `run` measures on one backend",
    );
    // Past the adapter's wgpu limits: the workload names the limit.
    bad_input(
        &[
            "run",
            "compute",
            "--backend",
            "wgpu",
            "--workgroup-size",
            "4294967295",
        ],
        "--workgroup-size 4294967295: workgroup_size 4294967295 is over the device limit \
         max_compute_workgroup_size_x",
    );
    bad_input(
        &[
            "run",
            "render",
            "--backend",
            "wgpu",
            "--width",
            "4294967295",
        ],
        "--width 4294967295: width 4294967295 is over the device limit max_texture_dimension_2d",
    );
}

/// The one line `--backend cuda` fails with where no CUDA driver can be
/// loaded (exit 1).
const NO_CUDA_DRIVER: &str = "error: no CUDA driver: none of libcuda.so, libcuda.so.1";

/// Whether this machine has a CUDA driver: without one (CI) the CUDA tests
/// check the no-driver errors, with one (a GPU machine) real runs.
fn cuda_driver() -> bool {
    gpu_counters_cuda::driver_present()
}

#[test]
fn devices_backend_cuda_lists_cuda_devices_or_names_the_missing_driver() {
    if !cuda_driver() {
        for args in [
            &["devices", "--backend", "cuda"][..],
            &["devices", "--backend", "cuda", "--json"],
        ] {
            one_error_line(args, 1, NO_CUDA_DRIVER);
        }
        return;
    }
    let v = json(&["devices", "--backend", "cuda"]);
    let devices = v["devices"].as_array().expect("devices array");
    for (i, d) in devices.iter().enumerate() {
        assert_eq!(u(&d["index"]), i as u64);
        assert_eq!(d["backend"], "cuda", "{d}");
        assert_eq!(d["default"], Value::Bool(i == 0), "{d}");
        assert!(d["name"].as_str().is_some_and(|s| !s.is_empty()));
        let sets = d["counter_sets"].as_array().expect("counter_sets");
        let set = |name: &str| sets.iter().find(|s| s["name"] == name);
        assert_eq!(
            set("timestamp").expect("timestamp set")["counters"],
            serde_json::json!(["timestamp"])
        );
        match set("statistic") {
            Some(s) => {
                assert_eq!(
                    s["counters"],
                    serde_json::json!(["compute_kernel_invocations"])
                );
                assert!(d.get("statistics_unavailable").is_none(), "{d}");
            }
            None => assert!(
                d["statistics_unavailable"]
                    .as_str()
                    .is_some_and(|s| !s.is_empty()),
                "no statistic set and no reason: {d}"
            ),
        }
    }
    let text = ok(&["devices", "--backend", "cuda"]);
    if devices.is_empty() {
        assert!(text.contains("No CUDA device found."), "{text}");
    } else {
        assert!(text.contains("CUDA device"), "{text}");
        assert!(text.contains("* [0]"), "{text}");
    }
}

#[test]
fn devices_backend_all_lists_cuda_last_or_notes_the_missing_driver() {
    let out = gpu_counters()
        .args(["devices", "--backend", "all", "--json"])
        .output()
        .expect("run gpu-counters");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON stdout");
    let backends: Vec<&str> = v["devices"]
        .as_array()
        .expect("devices")
        .iter()
        .map(|d| d["backend"].as_str().expect("backend"))
        .collect();
    let order = |b: &str| ["vulkan", "wgpu", "cuda"].iter().position(|x| *x == b);
    let ranks: Vec<Option<usize>> = backends.iter().map(|b| order(b)).collect();
    assert!(ranks.iter().all(Option::is_some), "{v}");
    assert!(
        ranks.windows(2).all(|w| w[0] <= w[1]),
        "not vulkan, wgpu, cuda: {v}"
    );
    let notes: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("note: CUDA devices not listed: no CUDA driver: "))
        .collect();
    if cuda_driver() {
        assert!(notes.is_empty(), "{stderr}");
    } else {
        assert_eq!(notes.len(), 1, "one note line expected:\n{stderr}");
        assert!(!backends.contains(&"cuda"), "{v}");
        assert!(backends.contains(&"vulkan"), "{v}");
    }
}

#[test]
fn run_backend_cuda_compute_counts_exact_invocations_or_names_the_missing_driver() {
    let dir = tempfile::tempdir().expect("temp dir");
    let trace = dir.path().join("cuda.trace.json");
    let (d, w, s) = COUNTED_DWS;
    let mut args = vec!["run", "compute", "--backend", "cuda", "--frames", "2"];
    args.extend(COUNTED_COMPUTE);
    args.extend(["--trace", trace.to_str().expect("path")]);
    if !cuda_driver() {
        one_error_line(&args, 1, NO_CUDA_DRIVER);
        let mut with_json = args.to_vec();
        with_json.push("--json");
        one_error_line(&with_json, 1, NO_CUDA_DRIVER);
        assert!(files_in(dir.path()).is_empty(), "an output was written");
        return;
    }
    let v = json(&args);
    assert_eq!(v["device"]["backend"], "cuda", "{v}");
    assert_eq!(v["workload"]["name"], "compute");
    assert_eq!(u(&v["workload"]["dispatches"]), d);
    let offered = v["device"]["counter_sets"]
        .as_array()
        .expect("counter_sets")
        .iter()
        .any(|s| s["name"] == "statistic");
    if !offered {
        assert!(
            v["device"]["statistics_unavailable"].is_string(),
            "no statistics and no reason: {v}"
        );
    }
    let frames = check_frames_with(&v, 2, offered);
    for passes in &frames {
        assert_eq!(passes.len(), 1);
        let p = &passes[0];
        assert_eq!(p["label"], "compute");
        assert_eq!(p["kind"], "compute");
        if offered {
            assert_eq!(u(&p["statistics"]["compute_kernel_invocations"]), d * w * s);
            assert_eq!(u(&p["expected"]["compute_kernel_invocations"]), d * w * s);
        }
    }
    check_trace(&trace, &frames);
    let text = ok(&args[..args.len() - 2]);
    assert!(text.contains("on CUDA device ["), "{text}");
    let summary = if offered {
        "statistics: all 2 expected counts match"
    } else {
        "statistics: not available on this device ("
    };
    assert!(text.contains(summary), "`{summary}` missing:\n{text}");
    bad_input(
        &["run", "compute", "--backend", "cuda", "--device", "4096"],
        "--device 4096: no such CUDA device",
    );
    bad_input(
        &[
            "run",
            "compute",
            "--backend",
            "cuda",
            "--workgroup-size",
            "4294967295",
        ],
        "--workgroup-size 4294967295: workgroup_size 4294967295 is over the device limit \
         CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X",
    );
}

#[test]
fn run_backend_cuda_refuses_render_and_mixed_before_anything_runs() {
    let dir = tempfile::tempdir().expect("temp dir");
    let trace = dir.path().join("render.json");
    let path = trace.to_str().expect("path");
    bad_input(
        &["run", "render", "--backend", "cuda", "--trace", path],
        "run render --backend cuda: the render pass cannot run on CUDA, which has no render \
         pipeline; run compute with --backend cuda",
    );
    bad_input(
        &["run", "mixed", "--backend", "cuda", "--trace", path],
        "run mixed --backend cuda: the render and copy passes cannot run on CUDA",
    );
    assert!(files_in(dir.path()).is_empty(), "an output was written");
    bad_input(
        &["run", "compute", "--backend", "all"],
        "--backend all: `run` measures on one backend, vulkan, wgpu or cuda",
    );
}

/// Where a spawned command's stdout or stderr goes.
#[derive(Clone, Copy, Debug)]
enum Stream {
    /// A pipe read to its end (the test reads it).
    Piped,
    /// `/dev/full`: every write fails with ENOSPC ("No space left on device").
    Full,
    /// A pipe whose read end is closed before the command starts: every
    /// write fails with EPIPE, as in `gpu-counters ... | true`.
    ClosedPipe,
}

impl Stream {
    fn stdio(self) -> std::process::Stdio {
        match self {
            Stream::Piped => std::process::Stdio::piped(),
            Stream::Full => std::fs::OpenOptions::new()
                .write(true)
                .open("/dev/full")
                .expect("open /dev/full")
                .into(),
            Stream::ClosedPipe => {
                let (reader, writer) = std::io::pipe().expect("pipe");
                drop(reader);
                writer.into()
            }
        }
    }
}

/// Runs the command (validation on) with its stdout and stderr as given;
/// returns its exit code (`None`: killed by a signal), stdout and stderr
/// (empty where not piped).
fn spawn(args: &[&str], stdout: Stream, stderr: Stream) -> (Option<i32>, String, String) {
    let runtime_dir = tempfile::tempdir().expect("temp dir");
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_gpu-counters"));
    cmd.env("GPU_COUNTERS_VALIDATION", "1");
    if std::env::var_os("XDG_RUNTIME_DIR").is_none() {
        cmd.env("XDG_RUNTIME_DIR", runtime_dir.path());
    }
    let out = cmd
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(stdout.stdio())
        .stderr(stderr.stdio())
        .output()
        .expect("run gpu-counters");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Commands that write to stdout, each with an output file given where it
/// takes one (`{out}` is replaced by the path).
fn stdout_writers() -> Vec<Vec<String>> {
    let tiny_bench = [
        "bench",
        "--samples",
        "1",
        "--reps",
        "1",
        "--wgpu-reps",
        "1",
        "--host-reps",
        "1",
        "--drift-seconds",
        "0",
        "--resolve-samples",
        "1",
    ];
    let mut all: Vec<Vec<String>> = vec![
        vec!["devices".into()],
        vec!["devices".into(), "--json".into()],
        tiny(&["--trace", "{out}"]),
        tiny(&["--json", "--trace", "{out}"]),
        tiny(&["--device", "all", "--svg", "{out}"]),
        tiny(&["--device", "all", "--json", "--csv", "{out}"]),
        vec!["--help".into()],
        vec!["--version".into()],
        vec!["run".into(), "--help".into()],
    ];
    all.push(tiny_bench.iter().map(|s| s.to_string()).collect());
    let mut json_bench: Vec<String> = tiny_bench.iter().map(|s| s.to_string()).collect();
    json_bench.push("--json".into());
    all.push(json_bench);
    all
}

/// A file the command did not create, which must survive whatever happens.
const KEEP: &str = "not gpu-counters' file\n";

/// Runs each stdout writer with stdout as `stdout`; its output file (if
/// any) is an existing file of someone else's, which must survive whole,
/// and no other file may appear beside it. Returns the (code, stderr) of
/// each.
fn with_failing_stdout(stdout: Stream, stderr: Stream) -> Vec<(Vec<String>, Option<i32>, String)> {
    let mut results = Vec::new();
    for args in stdout_writers() {
        let dir = tempfile::tempdir().expect("temp dir");
        let out = dir.path().join("out.file");
        std::fs::write(&out, KEEP).unwrap();
        let args: Vec<String> = args
            .iter()
            .map(|a| a.replace("{out}", out.to_str().unwrap()))
            .collect();
        let (code, _, err) = spawn(&as_strs(&args), stdout, stderr);
        assert_eq!(
            std::fs::read_to_string(&out).unwrap(),
            KEEP,
            "{args:?} changed a file it did not create"
        );
        assert_eq!(files_in(dir.path()), ["out.file"], "{args:?}");
        results.push((args, code, err));
    }
    results
}

/// `devices >/dev/full`, `run --json >/dev/full` and every other command
/// whose stdout is full exit 1 with one `error:` line naming stdout and
/// the OS's reason, instead of panicking (exit 101 and a backtrace); a run
/// stops before writing its output files, and removes their temporary
/// files.
#[test]
fn a_full_stdout_is_exit_1_with_one_error_line() {
    for (args, code, err) in with_failing_stdout(Stream::Full, Stream::Piped) {
        assert_eq!(code, Some(1), "{args:?}: {err}");
        let lines: Vec<&str> = err.lines().collect();
        assert_eq!(lines.len(), 1, "{args:?}: {err}");
        assert!(
            lines[0].starts_with("error: writing to stdout: ")
                && lines[0].contains("No space left on device"),
            "{args:?}: {err}"
        );
    }
}

/// `run ... | true`: a closed pipe on stdout ends the command quietly, as
/// Unix tools end on SIGPIPE: nothing on stderr and exit status 141 (128 +
/// SIGPIPE, the status a shell reports for `cat` or `grep` killed by
/// SIGPIPE), after removing the temporary files of outputs not yet
/// written.
#[test]
fn a_closed_stdout_pipe_ends_quietly_with_status_141() {
    for (args, code, err) in with_failing_stdout(Stream::ClosedPipe, Stream::Piped) {
        assert_eq!(code, Some(141), "{args:?}: {err}");
        assert_eq!(err, "", "{args:?}");
    }
}

/// When stderr cannot be written either, the command still ends without a
/// panic: exit 1 for a failed stdout, with nothing written anywhere.
#[test]
fn a_failed_stdout_with_an_unwritable_stderr_is_exit_1_silently() {
    for stderr in [Stream::Full, Stream::ClosedPipe] {
        for (args, code, _) in with_failing_stdout(Stream::Full, stderr) {
            assert_eq!(code, Some(1), "{args:?} with stderr {stderr:?}");
        }
    }
}

/// `run --frames 0 2>/dev/full`: an error that cannot be printed keeps its
/// exit code (2 for bad input, from the command's checks and from the
/// argument parser alike) and never panics; so do the diagnostics a
/// failing run prints on stderr.
#[test]
fn an_unwritable_stderr_keeps_the_exit_code_without_a_panic() {
    for stderr in [Stream::Full, Stream::ClosedPipe] {
        for (args, code) in [
            (&["run", "compute", "--frames", "0"][..], 2),
            (&["run", "bogus"], 2),
            (&["run", "compute", "--no-such-option"], 2),
            (&["devices", "--backend", "metal"], 2),
        ] {
            let (got, out, _) = spawn(args, Stream::Piped, stderr);
            assert_eq!(got, Some(code), "{args:?} with stderr {stderr:?}");
            assert_eq!(out, "", "{args:?}");
        }
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

/// An output that cannot be written (a full device, a file over the size
/// limit) fails the run with exit 1 and one `error:` line naming the
/// option; the files the command did not create are left as they were,
/// and no temporary file is left behind.
#[test]
fn an_output_that_fails_halfway_is_exit_1_and_destroys_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let csv = dir.path().join("a.csv");
    std::fs::write(&csv, KEEP).unwrap();
    one_error_line_with_stdout(
        &tiny(&["--trace", "/dev/full", "--csv", csv.to_str().unwrap()]),
        "--trace /dev/full: cannot write: No space left on device",
    );
    assert_eq!(std::fs::read_to_string(&csv).unwrap(), KEEP);
    assert_eq!(files_in(dir.path()), ["a.csv"]);

    // A regular file written through its temporary file: the write fails
    // halfway (a 2 KiB file size limit; SIGXFSZ ignored, so the write
    // fails with EFBIG), the existing file stays whole. The path has a line
    // break: the error stays on one line.
    for flag in ["--trace", "--perfetto", "--csv", "--svg"] {
        let dir = tempfile::tempdir().expect("temp dir");
        let out = dir.path().join("out\nfile");
        std::fs::write(&out, KEEP).unwrap();
        let mut args: Vec<String> = vec![
            "-c".into(),
            r#"trap "" XFSZ; ulimit -f 2; exec "$0" "$@""#.into(),
            env!("CARGO_BIN_EXE_gpu-counters").into(),
        ];
        // Enough frames that every output is over 2 KiB.
        args.extend(
            as_strs(&tiny(&[flag, out.to_str().unwrap()]))
                .iter()
                .map(|s| s.to_string()),
        );
        let frames = args.iter().position(|a| a == "--frames").unwrap() + 1;
        args[frames] = "40".into();
        let o = std::process::Command::new("bash")
            .args(&args)
            .env("GPU_COUNTERS_VALIDATION", "1")
            .env("MESA_SHADER_CACHE_DISABLE", "true")
            .output()
            .expect("run bash");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{flag}: {err}");
        let lines: Vec<&str> = err.lines().collect();
        assert_eq!(lines.len(), 1, "{flag}: {err}");
        assert!(
            lines[0].starts_with(&format!(
                "error: {flag} {:?}: cannot write: ",
                out.to_str().unwrap()
            )) && lines[0].contains("File too large"),
            "{flag}: {err}"
        );
        assert_eq!(std::fs::read_to_string(&out).unwrap(), KEEP, "{flag}");
        assert_eq!(files_in(dir.path()), ["out\nfile"], "{flag}");
    }
}

/// Runs the command expecting exit 1 and one `error:` line containing
/// `needle` on stderr (stdout is the run's report).
fn one_error_line_with_stdout(args: &[String], needle: &str) {
    let (code, _, err) = spawn(&as_strs(args), Stream::Piped, Stream::Piped);
    assert_eq!(code, Some(1), "{args:?}: {err}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "{args:?}: {err}");
    assert!(
        lines[0].starts_with("error: ") && lines[0].contains(needle),
        "{args:?}: {err}"
    );
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
