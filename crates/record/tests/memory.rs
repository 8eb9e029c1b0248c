//! The collector's memory does not grow with the trace: three million
//! kernels (300 names, as a training loop repeats them) through a real
//! connection peak (`VmHWM`) where one million do.

mod common;

/// The test client binary.
fn client() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_BIN_EXE_record-test-client"))
}

use gpu_counters_record::collector::{self, Options};
use std::io::BufWriter;
use std::process::Command;
use std::time::Duration;

fn vm_hwm_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc/self/status")
}

fn run(kernels: u64, trace: &std::path::Path) -> u64 {
    // Frames in flight are bounded by the channel (64 KiB each, 16 MiB at
    // the default 256); a short one keeps them out of the measurement, so
    // that what it sees is the tables and aggregates.
    let opts = Options {
        channel_frames: 8,
        ..Options::default()
    };
    let (collector, writer) = collector::start(opts).expect("collector");
    let file = std::fs::File::create(trace).expect("trace file");
    let w = std::thread::spawn(move || writer.run(Some(BufWriter::new(file))));
    let status = Command::new(client())
        .args([
            "--kernels",
            &kernels.to_string(),
            "--names",
            "300",
            "--no-api",
        ])
        // A queue that holds the whole stream: the client never drops, so
        // every kernel reaches the collector at the collector's pace.
        .args(["--queue-bytes", "268435456", "--deadline", "600"])
        .env("GPU_COUNTERS_RECORD_DIR", collector.dir())
        .status()
        .expect("test client");
    assert!(status.success());
    collector.finish(Duration::from_secs(10));
    let o = w.join().expect("writer");
    assert!(o.write_error.is_none());
    o.summary.kernels.count
}

/// The peak resident set of a fresh process (this test binary run again,
/// with `MEMORY_RUN` set) that collected `kernels` kernels. Each size runs
/// in its own process: a process that collected before keeps memory its
/// allocator gave earlier threads, which a long single run does not have.
fn peak_of_fresh_process(kernels: u64) -> u64 {
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "the_collector_memory_stays_flat_as_the_trace_grows",
            "--nocapture",
        ])
        .env("MEMORY_RUN", kernels.to_string())
        .output()
        .expect("run this test binary again");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    stderr
        .lines()
        .find_map(|l| l.strip_prefix("memory-run VmHWM "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no VmHWM line in {stderr}"))
}

#[test]
fn the_collector_memory_stays_flat_as_the_trace_grows() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.pftrace");
    if let Ok(n) = std::env::var("MEMORY_RUN") {
        let n: u64 = n.parse().unwrap();
        assert_eq!(run(n, &trace), n, "nothing dropped");
        eprintln!("memory-run VmHWM {}", vm_hwm_kib());
        return;
    }
    // Past 65 536 kernels every table is at its cap, and by a million the
    // allocator has settled; from there on the peak must not follow the
    // number of kernels.
    let small = peak_of_fresh_process(1_000_000);
    let large = peak_of_fresh_process(3_000_000);
    eprintln!("VmHWM {small} KiB after 1000000 kernels, {large} KiB after 3000000");
    assert!(
        large <= small + 2 * 1024,
        "VmHWM grew from {small} to {large} KiB"
    );
    assert!(large < 64 * 1024, "VmHWM {large} KiB");
}
