//! The collector end to end: a real process (the test client, speaking the
//! protocol through the injection's queue and sender) sends scripted
//! streams; the summary counts exactly what was sent, lost or refused, and
//! the trace decodes with Perfetto's own schema.

mod common;

/// The test client binary.
fn client() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_BIN_EXE_record-test-client"))
}

use gpu_counters_record::collector::{self, write_frames, Caps, Options, Outcome};
use gpu_counters_record::synthetic::{kernel_name_demangled, Script};
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::io::BufWriter;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// Runs the test client once per argument list (one after another) against
/// one collector, writing the trace to `trace`; returns the outcome.
fn record(runs: &[&[&str]], trace: &Path) -> Outcome {
    let (collector, writer) = collector::start(Options::default()).expect("collector");
    let file = std::fs::File::create(trace).expect("trace file");
    let w = std::thread::spawn(move || writer.run(Some(BufWriter::new(file))));
    for args in runs {
        let out = Command::new(client())
            .args(*args)
            .env("GPU_COUNTERS_RECORD_DIR", collector.dir())
            .output()
            .expect("run the test client");
        let stderr = String::from_utf8_lossy(&out.stderr);
        eprintln!("{stderr}");
        if !args.contains(&"--sigkill") {
            assert!(out.status.success(), "test client {args:?}: {stderr}");
        }
    }
    let dir = collector.dir().to_path_buf();
    let finish = collector.finish(Duration::from_secs(10));
    assert_eq!(finish.forced, 0, "every connection ended by itself");
    assert!(!dir.exists(), "the private directory is removed");
    let outcome = w.join().expect("writer");
    assert!(outcome.write_error.is_none(), "{:?}", outcome.write_error);
    outcome
}

fn by_name<'a>(v: &'a Value, key: &str) -> HashMap<String, Vec<&'a Value>> {
    let mut m: HashMap<String, Vec<&Value>> = HashMap::new();
    for x in v[key].as_array().unwrap() {
        m.entry(x["name"].as_str().unwrap_or("").to_string())
            .or_default()
            .push(x);
    }
    m
}

#[test]
fn children_and_forks_land_in_one_trace() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.pftrace");
    let args = [
        "--kernels",
        "200",
        "--names",
        "5",
        "--steps",
        "50",
        "--copy-every",
        "20",
        "--memset-every",
        "100",
        "--children",
        "2",
        "--fork",
        "1",
    ];
    let o = record(&[&args], &trace);
    let s = &o.summary;
    // The parent, two exec'd children and one forked child.
    assert_eq!(s.processes.len(), 4, "{:?}", s.processes);
    assert!(
        s.processes.iter().all(|p| p.goodbye && p.cuda),
        "{:?}",
        s.processes
    );
    let pids: HashSet<u32> = s.processes.iter().map(|p| p.pid).collect();
    assert_eq!(pids.len(), 4);
    assert!(s.cuda_initialized);
    assert_eq!(s.kernels.count, 800);
    assert_eq!(s.kernels.top.iter().map(|k| k.count).sum::<u64>(), 800);
    assert_eq!(s.copies.len(), 1);
    assert_eq!((s.copies[0].count, s.copies[0].bytes), (40, 40 << 20));
    assert_eq!((s.memsets.count, s.memsets.bytes), (8, 8 * 4096));
    assert!(!s.drops.any(), "{:?}", s.drops);
    assert_eq!(s.devices.len(), 1, "one GPU by UUID across processes");
    assert_eq!(s.gpu_busy.len(), 1);
    assert!(s.gpu_busy[0].busy_ns > 0);
    // Four steps per process, each with its GPU span.
    let steps: Vec<_> = s
        .nvtx
        .iter()
        .filter(|r| r.name.starts_with("step "))
        .collect();
    assert_eq!(steps.len(), 4);
    assert!(steps
        .iter()
        .all(|r| r.count == 4 && r.gpu_span_ns > 0 && r.gpu_kernel_ns > 0));

    let Some(py) = common::python("children_and_forks_land_in_one_trace") else {
        return;
    };
    let v = common::dump(&py, &trace, &[]);
    assert_eq!(v["clock"]["primary"], "BUILTIN_CLOCK_MONOTONIC");
    assert_eq!(v["clock"]["defaults_clock_id"], 3);
    let trace_pids: HashSet<String> = v["processes"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(trace_pids, pids.iter().map(|p| p.to_string()).collect());
    let stages = v["render_stages"].as_array().unwrap();
    assert_eq!(stages.len(), 800 + 40 + 8);
    let kernels: Vec<_> = stages
        .iter()
        .filter(|r| r["category"] == "COMPUTE")
        .collect();
    assert_eq!(kernels.len(), 800);
    for k in &kernels {
        let name = k["stage"].as_str().unwrap();
        assert!((0..5).any(|i| kernel_name_demangled(i) == name), "{name}");
        assert!(k["description"].as_str().unwrap().contains("block 256x1x1"));
        let pid = k["context_pid"].as_u64().unwrap();
        assert_eq!(k["queue"], format!("GPU0 {pid}:stream 7"));
        assert_eq!(k["event_id"].as_u64().unwrap() >> 32, pid);
    }
    // One hardware queue per process (one stream each).
    let queues: HashSet<&str> = stages
        .iter()
        .map(|r| r["queue"].as_str().unwrap())
        .collect();
    assert_eq!(queues.len(), 4);
    // Launch slices name their kernels' events.
    let slices = by_name(&v, "slices");
    let launches = &slices["cuLaunchKernel"];
    assert_eq!(launches.len(), 800);
    let kernel_ids: HashSet<u64> = kernels
        .iter()
        .map(|k| k["event_id"].as_u64().unwrap())
        .collect();
    let launched: HashSet<u64> = launches
        .iter()
        .map(|l| {
            let ids = l["launched"].as_array().unwrap();
            assert_eq!(ids.len(), 1);
            ids[0].as_u64().unwrap()
        })
        .collect();
    assert_eq!(launched, kernel_ids);
    assert_eq!(slices["cuMemcpyHtoDAsync_v2"].len(), 40);
    // Steps: 4 per process on the thread, and their GPU spans beside them.
    let steps: Vec<_> = v["slices"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|x| x["name"].as_str().unwrap().starts_with("step "))
        .collect();
    assert_eq!(
        steps.iter().filter(|x| x["track"] == "launcher").count(),
        16
    );
    assert_eq!(
        steps.iter().filter(|x| x["track"] == "GPU span").count(),
        16
    );
    for l in launches {
        assert_eq!(l["depth"], 1, "a launch nests inside its step");
        assert_eq!(l["category"], "cuda");
    }
}

#[test]
fn a_client_killed_with_sigkill_leaves_a_readable_trace_and_counted_loss() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.pftrace");
    let o = record(
        &[&[
            "--kernels",
            "120",
            "--steps",
            "1000",
            "--leave-open",
            "--sigkill",
        ]],
        &trace,
    );
    let s = &o.summary;
    assert_eq!(s.processes.len(), 1);
    assert!(!s.processes[0].goodbye);
    assert_eq!(s.processes[0].ended, "ended without goodbye");
    assert_eq!(s.drops.processes_without_goodbye, 1);
    assert_eq!(
        s.drops.nvtx_unterminated, 1,
        "the open step was closed and counted"
    );
    assert_eq!(
        s.kernels.count, 120,
        "everything sent before the kill arrived"
    );
    let Some(py) = common::python("a_client_killed_with_sigkill_leaves_a_readable_trace") else {
        return;
    };
    let v = common::dump(&py, &trace, &["--prefixes"]);
    assert_eq!(v["prefix_errors"], serde_json::json!([]));
    assert_eq!(v["render_stages"].as_array().unwrap().len(), 120);
}

#[test]
fn a_client_without_goodbye_and_a_malformed_one_are_counted() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.pftrace");
    let o = record(
        &[
            &[
                "--kernels",
                "30",
                "--no-goodbye",
                "--cupti-dropped",
                "5",
                "--notice",
                "counters are not permitted",
            ],
            &["--malformed"],
            &["--kernels", "10"],
        ],
        &trace,
    );
    let s = &o.summary;
    assert_eq!(s.processes.len(), 3);
    assert_eq!(s.kernels.count, 40);
    assert_eq!(
        s.drops.processes_without_goodbye, 2,
        "no goodbye, and the refused one"
    );
    assert_eq!(s.drops.connections_refused, 1);
    assert_eq!(s.drops.injected["cupti_dropped"], 5);
    assert_eq!(s.drops.unsent_at_exit, 0);
    let refused = s
        .processes
        .iter()
        .find(|p| p.ended.starts_with("connection refused"))
        .unwrap();
    assert!(
        refused.ended.contains("runs past the frame's end"),
        "{}",
        refused.ended
    );
    let texts: Vec<&str> = s.notices.iter().map(|n| n.text.as_str()).collect();
    assert!(
        texts
            .iter()
            .any(|t| t.ends_with(": counters are not permitted")),
        "{texts:?}"
    );
    assert!(
        texts.iter().any(|t| t.contains("connection refused")),
        "{texts:?}"
    );
    let text = s.render_text();
    assert!(text.contains("cupti dropped 5"), "{text}");
    assert!(text.contains("processes without goodbye 2"), "{text}");
    let Some(py) = common::python("a_client_without_goodbye_and_a_malformed_one_are_counted")
    else {
        return;
    };
    let v = common::dump(&py, &trace, &[]);
    let instants: Vec<&str> = v["instants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["name"].as_str().unwrap())
        .collect();
    assert!(
        instants.contains(&"gpu-counters: counters are not permitted"),
        "{instants:?}"
    );
    let drops: Vec<&Value> = v["counters"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["track"] == "dropped records")
        .collect();
    assert_eq!(drops.last().unwrap()["value"], 5);
}

#[test]
fn a_flooding_client_loses_only_what_it_counts() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.pftrace");
    let n = 200_000u64;
    let o = record(
        &[&[
            "--kernels",
            &n.to_string(),
            "--no-api",
            "--names",
            "10",
            "--queue-bytes",
            "65536",
        ]],
        &trace,
    );
    let s = &o.summary;
    let dropped = s.drops.injected["queue_dropped"];
    eprintln!(
        "flood: {} kernels drawn, {dropped} dropped in the client's queue",
        s.kernels.count
    );
    assert_eq!(
        s.kernels.count + dropped,
        n,
        "every kernel is drawn or counted"
    );
    assert_eq!(s.drops.frames_lost, 0);
    assert!(s.processes[0].goodbye, "Stats and Goodbye wait for room");
}

#[test]
fn bytes_per_kernel_are_a_small_fraction_of_a_scope_in_the_old_export() {
    for (api, limit) in [(false, 36.0), (true, 90.0)] {
        let script = Script {
            pid: 4242,
            kernels: 100_000,
            names: 300,
            api,
            ..Script::default()
        };
        let f = script.frames();
        let mut out = Vec::new();
        let o = write_frames(f.iter().map(Vec::as_slice), Some(&mut out), Caps::default());
        let per = o.summary.trace.bytes_per_kernel.unwrap();
        eprintln!("launch slices {api}: {per:.1} bytes per kernel");
        assert_eq!(o.summary.kernels.count, 100_000);
        assert_eq!(o.summary.trace.bytes, out.len() as u64);
        assert!(per <= limit, "{per} bytes per kernel (limit {limit})");
    }
}

#[test]
fn a_gap_in_frame_numbers_is_counted() {
    let script = Script {
        kernels: 5000,
        ..Script::default()
    };
    let mut f = script.frames();
    assert!(f.len() >= 3);
    f.remove(1);
    let o = write_frames(
        f.iter().map(Vec::as_slice),
        None::<Vec<u8>>,
        Caps::default(),
    );
    assert_eq!(o.summary.drops.frames_lost, 1);
    assert!(o.summary.kernels.count < 5000);
}
