//! `gpu-counters devices` and `run` with `--backend wgpu` (lavapipe through
//! wgpu in CI, under the validation layer) and `--backend cuda` (where no
//! CUDA driver is present, the one line that says so).

mod common;

use common::*;
use serde_json::Value;

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
