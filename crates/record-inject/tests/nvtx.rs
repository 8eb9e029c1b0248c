//! The injection's NVTX side through a real `dlopen` and a real collector,
//! without a GPU: `nvtx-fake-app` loads the built library as NVTX's headers
//! do and calls the handlers it installed; the collector's summary and
//! trace must show each range once, nested as pushed, a forked child as its
//! own process, and the program ending normally.

use gpu_counters_record::collector::{self, Options};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

/// The cdylib this test's build made: cargo leaves it in `deps/` when the
/// library is built only as the test's dependency (`cargo test
/// --workspace`), and also beside the binaries when it is built itself.
fn library() -> PathBuf {
    let app = PathBuf::from(env!("CARGO_BIN_EXE_nvtx-fake-app"));
    let name = "libgpu_counters_inject.so";
    let beside = app.with_file_name(name);
    let deps = app.with_file_name("deps").join(name);
    let newest = [beside, deps]
        .into_iter()
        .filter(|p| p.is_file())
        .max_by_key(|p| p.metadata().and_then(|m| m.modified()).ok());
    newest.unwrap_or_else(|| panic!("{name} not built beside {}", app.display()))
}

fn record(args: &[&str]) -> (gpu_counters_record::summary::Summary, String) {
    let (collector, writer) = collector::start(Options::default()).expect("collector");
    let w = std::thread::spawn(move || writer.run(None::<std::io::Sink>));
    let out = Command::new(env!("CARGO_BIN_EXE_nvtx-fake-app"))
        .args(args)
        .env("GPU_COUNTERS_RECORD_DIR", collector.dir())
        .env("NVTX_INJECTION64_PATH", library())
        .env_remove("CUDA_INJECTION64_PATH")
        .output()
        .expect("run nvtx-fake-app");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    let finish = collector.finish(Duration::from_secs(10));
    assert_eq!(finish.forced, 0, "every connection ended by itself");
    let outcome = w.join().expect("writer");
    (outcome.summary, stderr)
}

#[test]
fn nvtx_ranges_of_every_kind_are_recorded_once() {
    let (s, err) = record(&[]);
    assert!(err.contains("tool returned 1"), "{err}");
    let v = serde_json::to_value(&s).unwrap();
    assert_eq!(v["cuda_initialized"], false, "{v:#}");
    let procs = v["processes"].as_array().unwrap();
    assert_eq!(procs.len(), 1, "{v:#}");
    assert_eq!(procs[0]["nvtx"], true);
    assert_eq!(procs[0]["goodbye"], true, "{v:#}");
    let ranges: Vec<(String, String, u64)> = v["nvtx"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["domain"].as_str().unwrap().to_string(),
                r["name"].as_str().unwrap().to_string(),
                r["count"].as_u64().unwrap(),
            )
        })
        .collect();
    for (domain, name) in [
        ("", "outer"),
        ("", "inner"),
        ("", "async"),
        ("dom", "in-dom"),
    ] {
        let hits: Vec<_> = ranges
            .iter()
            .filter(|(d, n, _)| n == name && (domain.is_empty() || d == domain))
            .collect();
        assert_eq!(hits.len(), 1, "{name}: {ranges:?}");
        assert_eq!(hits[0].2, 1, "{name}: {ranges:?}");
    }
    assert_eq!(
        v["drops"]["nvtx_pop_empty"], 0,
        "the collector saw no stray pop"
    );
    assert_eq!(
        v["drops"]["injected"]["nvtx_pop_empty"], 1,
        "{:#}",
        v["drops"]
    );
}

#[test]
fn a_forked_child_and_an_open_range_are_accounted() {
    let (s, err) = record(&["--fork", "--leave-open"]);
    assert!(err.contains("tool returned 1"), "{err}");
    let v = serde_json::to_value(&s).unwrap();
    let procs = v["processes"].as_array().unwrap();
    assert_eq!(procs.len(), 2, "parent and forked child: {v:#}");
    let pids: Vec<&serde_json::Value> = procs.iter().map(|p| &p["pid"]).collect();
    assert!(
        procs.iter().any(|p| pids.contains(&&p["ppid"])),
        "the child names its parent: {v:#}"
    );
    assert!(procs.iter().all(|p| p["goodbye"] == true), "{v:#}");
    let names: Vec<&str> = v["nvtx"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"child"), "{names:?}");
    assert_eq!(v["drops"]["nvtx_unterminated"], 1, "{:#}", v["drops"]);
}
