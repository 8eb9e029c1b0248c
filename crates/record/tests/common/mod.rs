//! Helpers of the collector's tests: a Python with Perfetto's schema to
//! decode traces (`scripts/gpu_trace_dump.py`), skipped cleanly when absent
//! only if `GPU_COUNTERS_SKIP_PYTHON` is set. Also used by the CLI's tests.

#![allow(dead_code)]

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Lets the tests skip when no Python with the `perfetto` package is found.
pub const SKIP_VAR: &str = "GPU_COUNTERS_SKIP_PYTHON";

const IMPORT: &str = "import perfetto.protos.perfetto.trace.perfetto_trace_pb2";

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A Python that has Perfetto's schema: `$GPU_COUNTERS_PYTHON`,
/// `.venv-perfetto/bin/python3` in the workspace, or `python3`. `None`
/// (after one line) when there is none and skipping is allowed; panics when
/// it is not.
pub fn python(test: &str) -> Option<PathBuf> {
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(p) = std::env::var_os("GPU_COUNTERS_PYTHON") {
        candidates.push(p.into());
    }
    candidates.push(workspace().join(".venv-perfetto/bin/python3"));
    candidates.push("python3".into());
    for c in &candidates {
        let ok = Command::new(c)
            .args(["-c", IMPORT])
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false);
        if ok {
            return Some(c.clone());
        }
    }
    if std::env::var_os(SKIP_VAR).is_some() {
        eprintln!("{test}: SKIPPED: no Python with the `perfetto` package ({SKIP_VAR} is set)");
        return None;
    }
    panic!(
        "{test}: no Python with the `perfetto` package (tried {candidates:?}); run \
         `bash scripts/setup.sh`, point GPU_COUNTERS_PYTHON at a Python that has it, or set \
         {SKIP_VAR}=1 to skip"
    );
}

/// The trace at `path` decoded by `scripts/gpu_trace_dump.py` (with
/// `flags`, e.g. `--prefixes`), asserting that it breaks no rule.
pub fn dump(python: &Path, path: &Path, flags: &[&str]) -> Value {
    let out = Command::new(python)
        .arg(workspace().join("scripts/gpu_trace_dump.py"))
        .arg(path)
        .args(flags)
        .output()
        .expect("run gpu_trace_dump.py");
    assert!(
        out.status.success(),
        "gpu_trace_dump.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("gpu_trace_dump.py prints JSON");
    assert_eq!(
        v["errors"],
        serde_json::json!([]),
        "the trace breaks a rule"
    );
    v
}
