//! `gpu-counters run --device all` / `--device N,M`: several Vulkan devices
//! in one run, one trace, under the validation layer. Two lavapipe devices
//! come from two copies of lavapipe's driver manifest given to the Vulkan
//! loader (`VK_DRIVER_FILES`), so the loader enumerates two physical
//! devices of the one driver.

use assert_cmd::Command;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// Lavapipe's driver manifest, where the system has one.
fn lavapipe_manifest() -> Option<PathBuf> {
    let dir = std::fs::read_dir("/usr/share/vulkan/icd.d").ok()?;
    dir.filter_map(Result::ok).map(|e| e.path()).find(|p| {
        p.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("lvp_icd"))
    })
}

/// The command with validation on and the loader given two copies of
/// lavapipe's manifest (two devices), written into `dir`; `None` where
/// lavapipe is not installed.
fn two_lavapipes(dir: &Path) -> Option<Command> {
    let manifest = std::fs::read(lavapipe_manifest()?).ok()?;
    let (a, b) = (dir.join("lvp-a.json"), dir.join("lvp-b.json"));
    std::fs::write(&a, &manifest).ok()?;
    std::fs::write(&b, &manifest).ok()?;
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gpu-counters"));
    cmd.env("GPU_COUNTERS_VALIDATION", "1")
        .env(
            "VK_DRIVER_FILES",
            format!("{}:{}", a.display(), b.display()),
        )
        .env_remove("VK_ICD_FILENAMES");
    Some(cmd)
}

/// The command with validation on, on the system's own drivers.
fn gpu_counters() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gpu-counters"));
    cmd.env("GPU_COUNTERS_VALIDATION", "1");
    cmd
}

const SIZES: &[&str] = &[
    "--frames",
    "2",
    "--dispatches",
    "2",
    "--workgroups",
    "4",
    "--workgroup-size",
    "16",
    "--iterations",
    "10",
    "--triangles",
    "16",
    "--width",
    "32",
    "--height",
    "32",
    "--copy-bytes",
    "64K",
];

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a u64: {v}"))
}

/// `run mixed --device all --chain` on two lavapipe devices: each device's
/// report with its own calibration, every statistic as expected, the
/// shared timeline's checks passed, and one Chrome trace with a process per
/// device, a track per queue, every pass inside its CPU window ± its
/// device's bound and each device's frame after the one it waited for.
#[test]
fn run_on_two_devices_writes_one_trace_with_a_process_per_device() {
    let dir = tempfile::tempdir().unwrap();
    let Some(mut cmd) = two_lavapipes(dir.path()) else {
        eprintln!("lavapipe's manifest not found: skipped");
        return;
    };
    let trace = dir.path().join("t.json");
    let csv = dir.path().join("t.csv");
    let out = cmd
        .args(["run", "mixed", "--device", "all", "--chain", "--json"])
        .args(SIZES)
        .arg("--trace")
        .arg(&trace)
        .arg("--csv")
        .arg(&csv)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?}: {stderr}", out.status.code());
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let devices = report["devices"].as_array().unwrap();
    assert_eq!(devices.len(), 2, "{report}");
    for (k, d) in devices.iter().enumerate() {
        assert_eq!(u(&d["device"]["index"]), k as u64);
        assert_eq!(d["mismatches"].as_array().unwrap().len(), 0, "{d}");
        assert!(d["calibration"]["error_bound_ns"].is_u64());
        let frames = d["frames"].as_array().unwrap();
        assert_eq!(frames.len(), 2);
        for f in frames {
            let labels: Vec<&str> = f["passes"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p["label"].as_str().unwrap())
                .collect();
            assert_eq!(labels, ["compute", "render", "copy"]);
            assert_eq!(
                u(&f["passes"][0]["statistics"]["compute_kernel_invocations"]),
                2 * 4 * 16
            );
        }
    }
    assert_eq!(report["timeline"]["order"], "chain");
    assert_eq!(report["timeline"]["problems"], serde_json::json!([]));

    let t: Value = serde_json::from_slice(&std::fs::read(&trace).unwrap()).unwrap();
    let events = t["traceEvents"].as_array().unwrap();
    let named = |what: &str, pid: u64| -> Vec<String> {
        events
            .iter()
            .filter(|e| e["ph"] == "M" && e["name"] == what && e["pid"] == pid)
            .map(|e| e["args"]["name"].as_str().unwrap().to_string())
            .collect()
    };
    for pid in [1, 2] {
        let process = named("process_name", pid);
        assert_eq!(process.len(), 1);
        assert!(
            process[0].starts_with(&format!("GPU {}: llvmpipe", pid - 1)),
            "{process:?}"
        );
        assert_eq!(
            named("thread_name", pid),
            ["CPU submit→complete", "graphics"]
        );
    }
    // Per device and frame: the CPU window, and the passes in it.
    let windows = |pid: u64| -> Vec<(u64, u64)> {
        events
            .iter()
            .filter(|e| e["ph"] == "X" && e["cat"] == "cpu" && e["pid"] == pid)
            .map(|e| {
                (
                    u(&e["args"]["cpu_submit_ns"]),
                    u(&e["args"]["cpu_complete_ns"]),
                )
            })
            .collect()
    };
    let passes = |pid: u64, frame: u64| -> Vec<(u64, u64, u64)> {
        events
            .iter()
            .filter(|e| {
                e["ph"] == "X"
                    && e["cat"] != "cpu"
                    && e["pid"] == pid
                    && e["args"]["frame"] == frame
            })
            .map(|e| {
                let a = &e["args"];
                (u(&a["start_ns"]), u(&a["end_ns"]), u(&a["error_bound_ns"]))
            })
            .collect()
    };
    let mut chain: Vec<Vec<(u64, u64, u64)>> = Vec::new();
    for frame in 0..2u64 {
        for pid in [1, 2] {
            let (submit, complete) = windows(pid)[frame as usize];
            let ps = passes(pid, frame);
            assert_eq!(ps.len(), 3);
            for &(start, end, bound) in &ps {
                assert!(start + bound >= submit && end <= complete + bound);
            }
            chain.push(ps);
        }
    }
    // Device 0's frame, then device 1's (which waited for it), then device
    // 0's next frame: each ends before the next starts, within the bounds.
    for pair in chain.windows(2) {
        for &(_, end, eb) in &pair[0] {
            for &(start, _, sb) in &pair[1] {
                assert!(end.saturating_sub(eb) <= start + sb);
            }
        }
    }
    let meta = t["metadata"]["devices"].as_array().unwrap();
    assert_eq!(meta.len(), 2);
    assert!(meta[1]["clock"]["error_bound_ns"].is_u64());

    // The CSV names each pass's device in its queue.
    let text = std::fs::read_to_string(&csv).unwrap();
    assert_eq!(text.lines().count(), 1 + 2 * 2 * 3);
    assert_eq!(text.matches(",\"0: llvmpipe").count(), 6, "{text}");
    assert_eq!(text.matches(",\"1: llvmpipe").count(), 6, "{text}");
}

/// A list runs the devices in its order; without `--chain`, frames are
/// submitted on every device, then waited for, and still every pass lies in
/// its CPU window.
#[test]
fn a_device_list_runs_in_its_order() {
    let dir = tempfile::tempdir().unwrap();
    let Some(mut cmd) = two_lavapipes(dir.path()) else {
        eprintln!("lavapipe's manifest not found: skipped");
        return;
    };
    let out = cmd
        .args(["run", "compute", "--device", "1,0", "--json"])
        .args(&SIZES[..10])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let indices: Vec<u64> = report["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| u(&d["device"]["index"]))
        .collect();
    assert_eq!(indices, [1, 0]);
    assert_eq!(report["timeline"]["order"], "together");
    assert_eq!(report["timeline"]["problems"], serde_json::json!([]));
}

/// Exits `code` with one `error:` line containing `needle` and leaves no
/// file in `dir`.
fn fails(mut cmd: Command, args: &[&str], code: i32, needle: &str, dir: &Path) {
    let trace = dir.join("never.json");
    let out = cmd.args(args).arg("--trace").arg(&trace).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{args:?}: {stderr}");
    assert!(out.stdout.is_empty());
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(
        lines[0].starts_with("error: ") && lines[0].contains(needle),
        "{stderr}"
    );
    assert!(!trace.exists());
}

#[test]
fn bad_device_lists_exit_2_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    fails(
        gpu_counters(),
        &["run", "compute", "--device", "0,0"],
        2,
        "--device 0,0: device 0 is given twice",
        d,
    );
    fails(
        gpu_counters(),
        &["run", "compute", "--device", "0,4096"],
        2,
        "--device 4096: no such device",
        d,
    );
    fails(
        gpu_counters(),
        &["run", "compute", "--device", "one"],
        2,
        "--device one: expected a device index",
        d,
    );
    fails(
        gpu_counters(),
        &["run", "compute", "--chain"],
        2,
        "--chain: orders several devices",
        d,
    );
    fails(
        gpu_counters(),
        &["run", "compute", "--device", "all", "--backend", "wgpu"],
        2,
        "several devices at once run with --backend vulkan or cuda",
        d,
    );
    fails(
        gpu_counters(),
        &["run", "render", "--device", "all", "--backend", "cuda"],
        2,
        "run render --backend cuda",
        d,
    );
    if let Some(cmd) = two_lavapipes(d) {
        fails(
            cmd,
            &["run", "compute", "--device", "0,1,2"],
            2,
            "--device 2: no such device; there are 2 devices (indices 0 to 1)",
            d,
        );
    }
}

/// CUDA takes the same lists; without a driver, one line and exit 1.
#[test]
fn cuda_device_lists_without_a_driver_exit_1() {
    if gpu_counters_cuda::driver_present() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for list in ["all", "0,1"] {
        fails(
            gpu_counters(),
            &["run", "compute", "--backend", "cuda", "--device", list],
            1,
            "no CUDA driver: ",
            dir.path(),
        );
    }
}
