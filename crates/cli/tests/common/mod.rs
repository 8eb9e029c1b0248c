//! What the `gpu-counters` end-to-end tests share: the command with
//! validation on, its runs checked for success or for one error line, and
//! the checks of its reports and traces.
#![allow(dead_code)] // each test binary uses some of these

use assert_cmd::Command;
use serde_json::Value;
use std::path::Path;

/// The command with validation on.
pub fn gpu_counters() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gpu-counters"));
    cmd.env("GPU_COUNTERS_VALIDATION", "1");
    cmd
}

/// Runs the command, expects success and no validation message, and returns
/// its stdout.
pub fn ok(args: &[&str]) -> String {
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
pub fn json(args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.push("--json");
    let text = ok(&all);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("stdout is not JSON ({e}):\n{text}"))
}

/// Runs the command expecting exit code 2 with exactly one stderr line that
/// starts with `error:` and contains `needle`; returns that line
/// ([`one_error_line`] with code 2).
pub fn bad_input(args: &[&str], needle: &str) -> String {
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
pub fn one_error_line(args: &[&str], code: i32, needle: &str) -> String {
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

pub fn u(v: &Value) -> u64 {
    v.as_u64()
        .unwrap_or_else(|| panic!("{v} is not an unsigned integer"))
}

pub fn files_in(dir: &Path) -> Vec<String> {
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
pub fn covered_pixels(t: u64, w: u64, h: u64) -> u64 {
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
pub fn check_frames(report: &Value, frames: usize) -> Vec<Vec<Value>> {
    check_frames_with(report, frames, true)
}

/// [`check_frames`], where `statistics` says whether the device offers
/// statistics: without them, every pass has none, expects none and has
/// nothing to match.
pub fn check_frames_with(report: &Value, frames: usize, statistics: bool) -> Vec<Vec<Value>> {
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
pub fn check_trace(trace: &Path, frames: &[Vec<Value>]) {
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

/// The smallest compute run, for tests about everything but the workload.
pub const TINY: [&str; 10] = [
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
pub fn tiny(more: &[&str]) -> Vec<String> {
    TINY.iter().chain(more).map(|s| s.to_string()).collect()
}

pub fn as_strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// The compute sizes whose count the compute tests of every backend check:
/// D = 3 dispatches of W = 7 workgroups of S = 13 invocations, 5 steps each.
pub const COUNTED_COMPUTE: [&str; 8] = [
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
pub const COUNTED_DWS: (u64, u64, u64) = (3, 7, 13);
