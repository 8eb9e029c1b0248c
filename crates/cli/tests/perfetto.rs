//! `gpu-counters run --perfetto`: the trace decoded with Perfetto's own
//! schema (`perfetto_trace_pb2`, PyPI `perfetto`) matches the Chrome trace of
//! the same run; bad paths exit 2 with one line, before any GPU work.

#[path = "../../profiler/tests/common/perfetto_py.rs"]
mod perfetto_py;

use serde_json::Value;
use std::collections::BTreeSet;
use std::process::Command;

fn gpu_counters() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gpu-counters"));
    cmd.env("GPU_COUNTERS_VALIDATION", "1");
    cmd
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a u64: {v}"))
}

#[test]
fn run_mixed_perfetto_matches_the_chrome_trace() {
    let Some(python) = perfetto_py::python("run_mixed_perfetto_matches_the_chrome_trace") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (pf, js) = (dir.path().join("t.pftrace"), dir.path().join("t.json"));
    let out = gpu_counters()
        .args(["run", "mixed", "--frames", "2", "--copy-bytes", "1M"])
        .arg("--perfetto")
        .arg(&pf)
        .arg("--trace")
        .arg(&js)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("validation"), "{stderr}");

    let dump = perfetto_py::dump(&python, &pf);
    let chrome: Value = serde_json::from_slice(&std::fs::read(&js).unwrap()).unwrap();
    let events = chrome["traceEvents"].as_array().unwrap();
    let complete: Vec<&Value> = events.iter().filter(|e| e["ph"] == "X").collect();

    // Tracks: the device, the CPU track, the one queue, and counter tracks.
    let tracks = dump["tracks"].as_array().unwrap();
    let slice_tracks: Vec<&str> = tracks
        .iter()
        .filter(|t| t["counter"] == false)
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(slice_tracks.len(), 3, "{slice_tracks:?}");
    assert!(slice_tracks[0].starts_with("GPU "));
    assert_eq!(slice_tracks[1], "CPU submit→complete");
    assert!(
        tracks.iter().any(|t| t["counter"] == true),
        "counter tracks present"
    );
    assert!(
        !dump["counters"].as_array().unwrap().is_empty(),
        "counters present"
    );

    // Slices: the same names and times as the Chrome trace's complete events.
    let slices = dump["slices"].as_array().unwrap();
    assert_eq!(slices.len(), complete.len());
    let from_chrome: BTreeSet<(String, u64, u64)> = complete
        .iter()
        .map(|e| {
            let ts = (e["ts"].as_f64().unwrap() * 1000.0).round() as u64;
            let dur = (e["dur"].as_f64().unwrap() * 1000.0).round() as u64;
            (e["name"].as_str().unwrap().to_string(), ts, dur)
        })
        .collect();
    let from_perfetto: BTreeSet<(String, u64, u64)> = slices
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap().to_string(),
                u(&s["ts"]),
                u(&s["dur"]),
            )
        })
        .collect();
    assert_eq!(from_perfetto, from_chrome);
    // Raw ticks and the error bound, as in the Chrome trace's args.
    for e in complete.iter().filter(|e| e["cat"] != "cpu") {
        let s = slices
            .iter()
            .find(|s| s["name"] == e["name"] && s["args"]["start_ns"] == e["args"]["start_ns"])
            .unwrap();
        for key in [
            "start_ticks",
            "end_ticks",
            "error_bound_ns",
            "frame",
            "thread",
        ] {
            assert_eq!(s["args"][key], e["args"][key], "{key}");
        }
    }
}

#[test]
fn perfetto_bad_paths_exit_2_with_one_line_and_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.out");
    let a = a.to_str().unwrap();
    let slash = format!("{}/", dir.path().join("x").display());
    let missing = dir.path().join("no/such/dir/t.pftrace");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["--perfetto", a, "--trace", a], "is the same file as"),
        (vec!["--perfetto", &slash], "names a directory"),
        (
            vec!["--perfetto", missing.to_str().unwrap()],
            "does not exist",
        ),
        (
            vec!["--perfetto", dir.path().to_str().unwrap()],
            "is a directory",
        ),
    ];
    for (args, needle) in cases {
        let out = gpu_counters()
            .args(["run", "compute", "--dispatches", "1", "--iterations", "1"])
            .args(&args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        let lines: Vec<&str> = stderr.lines().collect();
        assert_eq!(lines.len(), 1, "{args:?}: {stderr}");
        assert!(lines[0].starts_with("error: --perfetto"), "{stderr}");
        assert!(lines[0].contains(needle), "{args:?}: {stderr}");
    }
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert!(left.is_empty(), "files left behind: {left:?}");
}
