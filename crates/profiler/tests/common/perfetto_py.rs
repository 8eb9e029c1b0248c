//! Decodes a Perfetto trace with Perfetto's own schema, through
//! `scripts/perfetto_dump.py` and the `perfetto` package from PyPI.
//!
//! The Python used is the first of `$GPU_COUNTERS_PYTHON`,
//! `.venv-perfetto/bin/python3` in the workspace (what `scripts/setup.sh`
//! makes) and `python3` that can import `perfetto_trace_pb2`. Without one,
//! a test fails, saying how to install it, unless `GPU_COUNTERS_SKIP_PYTHON`
//! is set: then it prints one line and passes without checking.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The environment variable that lets the tests skip when no Python with
/// the `perfetto` package is found.
pub const SKIP_VAR: &str = "GPU_COUNTERS_SKIP_PYTHON";

const IMPORT: &str = "import perfetto.protos.perfetto.trace.perfetto_trace_pb2";

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A Python that has Perfetto's schema, or `None` (after printing one line)
/// when there is none and skipping is allowed. Panics when there is none
/// and skipping is not allowed.
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
         `bash scripts/setup.sh` (it installs a pinned `perfetto` into .venv-perfetto/), \
         point GPU_COUNTERS_PYTHON at a Python that has it, or set {SKIP_VAR}=1 to skip"
    );
}

/// The trace at `path`, decoded by `scripts/perfetto_dump.py` with `python`.
pub fn dump(python: &Path, path: &Path) -> Value {
    let script = workspace().join("scripts/perfetto_dump.py");
    let out = Command::new(python)
        .arg(&script)
        .arg(path)
        .output()
        .expect("run perfetto_dump.py");
    assert!(
        out.status.success(),
        "perfetto_dump.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("perfetto_dump.py prints JSON");
    assert_eq!(
        v["errors"],
        serde_json::json!([]),
        "the trace breaks a rule"
    );
    v
}
