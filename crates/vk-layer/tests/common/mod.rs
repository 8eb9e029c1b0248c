//! The layer's test harness: runs a program with the layer enabled through
//! the loader's environment, as `gpu-counters record` does, against a real
//! collector, with the Khronos validation layer below it logging to a file;
//! returns the summary, the trace (decoded with Perfetto's schema) and the
//! validation messages.
//!
//! Programs are this test binary run again as an "app" (`app_entry`, with
//! `GPU_COUNTERS_VK_LAYER_TEST_APP` naming which), or a program found on
//! the machine (vkcube).

#![allow(dead_code)]

#[path = "../../../record/tests/common/mod.rs"]
pub mod gpu_trace;

use gpu_counters_record::collector::{self, Options};
use gpu_counters_record::summary::Summary;
use gpu_counters_record::vk_layer::{manifest_json, LAYER_NAME, MANIFEST};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// Names the app the test binary runs as.
pub const APP_VAR: &str = "GPU_COUNTERS_VK_LAYER_TEST_APP";

/// The layer library this test's build made (cargo leaves it in `deps/`,
/// and beside it when built itself).
pub fn library() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary");
    let deps = exe.parent().expect("deps").to_path_buf();
    let name = gpu_counters_record::vk_layer::LIBRARY;
    [deps.join(name), deps.join("..").join(name)]
        .into_iter()
        .filter(|p| p.is_file())
        .max_by_key(|p| p.metadata().and_then(|m| m.modified()).ok())
        .unwrap_or_else(|| panic!("{name} not built beside {}", deps.display()))
}

/// How to run a program under the layer.
#[derive(Debug, Clone)]
pub struct Setup {
    /// `pass`, `draw` or `dispatch`.
    pub level: &'static str,
    /// Pipeline statistics.
    pub statistics: bool,
    /// The Khronos validation layer below the layer.
    pub validation: bool,
    /// More environment.
    pub env: Vec<(String, String)>,
    /// The most the program may run.
    pub timeout: Duration,
    /// The results ring of each queue, KiB (the layer's default otherwise).
    pub ring_kb: Option<u64>,
    /// Write the trace (otherwise the summary only).
    pub trace: bool,
}

impl Default for Setup {
    fn default() -> Self {
        Setup {
            level: "pass",
            statistics: false,
            validation: true,
            env: Vec::new(),
            timeout: Duration::from_secs(300),
            ring_kb: None,
            trace: true,
        }
    }
}

/// What a run gave.
pub struct Run {
    /// The collector's summary.
    pub summary: Summary,
    /// The summary as JSON.
    pub json: Value,
    /// The trace file.
    pub trace: PathBuf,
    /// The program's output.
    pub stdout: String,
    /// The program's errors.
    pub stderr: String,
    /// How it ended.
    pub status: ExitStatus,
    /// The validation layer's messages.
    pub validation: Vec<String>,
    _dir: tempfile::TempDir,
}

impl Run {
    /// The trace decoded (`None` where no Python with Perfetto's schema is
    /// found and skipping is allowed); asserts it breaks no rule.
    pub fn dump(&self, test: &str) -> Option<Value> {
        let py = gpu_trace::python(test)?;
        Some(gpu_trace::dump(&py, &self.trace, &[]))
    }

    /// Lines of the program's output that start with `APP `, split.
    pub fn app_lines(&self) -> Vec<Vec<String>> {
        self.stdout
            .lines()
            .filter_map(|l| l.find("APP ").map(|i| &l[i + 4..]))
            .map(|l| l.split_whitespace().map(str::to_string).collect())
            .collect()
    }

    /// The first app line whose first word is `key`.
    pub fn app(&self, key: &str) -> Vec<String> {
        self.app_lines()
            .into_iter()
            .find(|l| l.first().is_some_and(|k| k == key))
            .unwrap_or_else(|| panic!("no `APP {key}` line in:\n{}", self.stdout))
    }

    /// Asserts the program succeeded and the validation layer said nothing.
    pub fn assert_clean(&self) {
        assert!(
            self.status.success(),
            "the program failed ({:?}):\n{}\n{}",
            self.status,
            self.stdout,
            self.stderr
        );
        assert!(
            self.validation.is_empty(),
            "the validation layer reported {} message(s):\n{}",
            self.validation.len(),
            self.validation.join("\n")
        );
    }

    /// A loss the layer counted (0 where none).
    pub fn loss(&self, name: &str) -> u64 {
        self.summary.drops.injected.get(name).copied().unwrap_or(0)
    }
}

/// This test binary, run as app `app` with `args`.
pub fn app(app: &str, args: &[&str]) -> Command {
    let exe = std::env::current_exe().expect("the test binary");
    let mut c = Command::new(exe);
    c.args(["app_entry", "--exact", "--nocapture", "--test-threads=1"])
        .env(APP_VAR, app)
        .env("GPU_COUNTERS_VK_LAYER_TEST_ARGS", args.join(" "));
    c
}

/// The arguments an app was given.
pub fn app_args() -> Vec<String> {
    std::env::var("GPU_COUNTERS_VK_LAYER_TEST_ARGS")
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

/// Runs `cmd` under the layer with `setup` against a collector.
pub fn record(mut cmd: Command, setup: &Setup) -> Run {
    let dir = tempfile::tempdir().expect("temp dir");
    let layer_dir = dir.path().join("layer");
    std::fs::create_dir(&layer_dir).unwrap();
    std::fs::write(layer_dir.join(MANIFEST), manifest_json(&library())).unwrap();
    let settings = dir.path().join("settings");
    std::fs::create_dir(&settings).unwrap();
    let log = dir.path().join("validation.log");
    std::fs::write(
        settings.join("vk_layer_settings.txt"),
        format!(
            "khronos_validation.debug_action = VK_DBG_LAYER_ACTION_LOG_MSG\n\
             khronos_validation.log_filename = {}\n\
             khronos_validation.report_flags = error,warn,perf\n",
            log.display()
        ),
    )
    .unwrap();
    let (collector, writer) = collector::start(Options::default()).expect("collector");
    let mut vulkan = serde_json::json!({"level": setup.level, "statistics": setup.statistics});
    if let Some(kb) = setup.ring_kb {
        vulkan["ring_kb"] = kb.into();
    }
    collector::write_config(
        collector.dir(),
        &serde_json::json!({"version": 1, "vulkan": vulkan}),
    )
    .unwrap();
    let trace = dir.path().join("trace.pftrace");
    let file = std::fs::File::create(&trace).unwrap();
    let write = setup.trace;
    let w = std::thread::spawn(move || {
        if write {
            writer.run(Some(std::io::BufWriter::new(file)))
        } else {
            writer.run(None::<std::fs::File>)
        }
    });
    let layers = if setup.validation {
        format!("{LAYER_NAME}:VK_LAYER_KHRONOS_validation")
    } else {
        LAYER_NAME.to_string()
    };
    cmd.env(gpu_counters_record::client::RECORD_DIR_VAR, collector.dir())
        .env("VK_ADD_LAYER_PATH", &layer_dir)
        .env("VK_INSTANCE_LAYERS", layers)
        .env("VK_LAYER_SETTINGS_PATH", &settings)
        .env_remove("VK_LOADER_LAYERS_ENABLE")
        .env_remove("VK_LOADER_LAYERS_DISABLE")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in &setup.env {
        cmd.env(k, v);
    }
    let child = cmd.spawn().expect("run the program");
    let pid = child.id();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let out = match rx.recv_timeout(setup.timeout) {
        Ok(o) => o.expect("wait for the program"),
        Err(_) => {
            // SAFETY: kill(2) of our own child.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            panic!("the program ran past {:?} and was killed", setup.timeout);
        }
    };
    let finish = collector.finish(Duration::from_secs(10));
    assert_eq!(finish.forced, 0, "every connection ended by itself");
    let outcome = w.join().expect("writer");
    assert!(outcome.write_error.is_none(), "{:?}", outcome.write_error);
    let validation = std::fs::read_to_string(&log)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("Validation") || l.contains("VUID-") || l.contains("UNASSIGNED-"))
        .map(str::to_string)
        .collect();
    let json = serde_json::to_value(&outcome.summary).unwrap();
    Run {
        summary: outcome.summary,
        json,
        trace,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        status: out.status,
        validation,
        _dir: dir,
    }
}

/// A scope of the trace: a render stage on a Vulkan queue.
#[derive(Debug, Clone)]
pub struct Scope {
    pub queue: String,
    pub kind: String,
    pub name: String,
    pub start: u64,
    pub end: u64,
    pub bound: u64,
    pub depth: u64,
    pub frame: u64,
}

/// The scopes of a decoded trace (frames excluded), in file order.
pub fn scopes(d: &Value) -> Vec<Scope> {
    d["render_stages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["extra"]["kind"].is_string())
        .map(|r| {
            let num = |k: &str| r["extra"][k].as_str().unwrap().parse::<u64>().unwrap();
            let start = r["ts"].as_u64().unwrap();
            Scope {
                queue: r["queue"].as_str().unwrap().to_string(),
                kind: r["extra"]["kind"].as_str().unwrap().to_string(),
                name: r["name"].as_str().unwrap().to_string(),
                start,
                end: start + r["dur"].as_u64().unwrap(),
                bound: num("bound_ns"),
                depth: num("depth"),
                frame: num("frame"),
            }
        })
        .collect()
}

/// A GPU frame of a decoded trace: (frame, start, end, bound, presented).
pub fn gpu_frames(d: &Value) -> Vec<(u64, u64, u64, u64, bool)> {
    d["render_stages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["queue"].as_str().is_some_and(|q| q.ends_with(":frames")))
        .map(|r| {
            let num = |k: &str| r["extra"][k].as_str().unwrap().parse::<u64>().unwrap();
            let start = r["ts"].as_u64().unwrap();
            (
                num("frame"),
                start,
                start + r["dur"].as_u64().unwrap(),
                num("bound_ns"),
                r["extra"]["presented"] == "1",
            )
        })
        .collect()
}

/// The statistics (name → value) of the GPU counter event at `ts`.
pub fn stats_at(d: &Value, ts: u64) -> Option<std::collections::HashMap<String, f64>> {
    d["gpu_counters"]
        .as_array()?
        .iter()
        .find(|c| c["ts"] == ts)
        .map(|c| {
            c["values"]
                .as_object()
                .unwrap()
                .iter()
                .map(|(k, v)| {
                    (
                        k.trim_end_matches(" (per pass)").to_string(),
                        v.as_f64().unwrap(),
                    )
                })
                .collect()
        })
}

/// An X server on a display of its own, for programs that present;
/// stopped when dropped.
pub struct Xvfb {
    child: std::process::Child,
    /// The `DISPLAY` value.
    pub display: String,
}

impl Xvfb {
    /// Starts Xvfb and waits until it accepts connections.
    pub fn start() -> Xvfb {
        // `-displayfd 1`: Xvfb picks a free display itself and writes its
        // number to stdout once it accepts connections, so the read below
        // waits for exactly that (end of file: it failed to start).
        let mut child = Command::new("Xvfb")
            .args([
                "-displayfd",
                "1",
                "-screen",
                "0",
                "640x480x24",
                "-nolisten",
                "tcp",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("Xvfb (apt-get install xvfb; scripts/setup.sh installs it)");
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().expect("Xvfb's stdout")),
            &mut line,
        )
        .expect("Xvfb's display number");
        let n: u32 = line.trim().parse().unwrap_or_else(|_| {
            let _ = child.kill();
            let _ = child.wait();
            panic!("Xvfb did not start (it wrote {line:?})")
        });
        Xvfb {
            child,
            display: format!(":{n}"),
        }
    }
}

impl Drop for Xvfb {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether `path` is an executable on `PATH`.
pub fn on_path(name: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| Path::new(&d).join(name).is_file()))
}
