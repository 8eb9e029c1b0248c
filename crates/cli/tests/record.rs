//! `gpu-counters record` end to end, without a GPU: exit statuses as a
//! shell gives them, signals forwarded, a program that never touches CUDA,
//! bad input, output paths, and the trace decoded with Perfetto's schema.
//! The injection library is a stand-in file: these programs load no CUDA.

#[path = "../../record/tests/common/mod.rs"]
mod gpu_trace;

use std::fs;
use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

struct Env {
    dir: tempfile::TempDir,
    lib: PathBuf,
    layer: PathBuf,
    tmp: PathBuf,
}

impl Env {
    fn new() -> Env {
        let dir = tempfile::tempdir().unwrap();
        let lib = dir.path().join("libgpu_counters_inject.so");
        fs::write(&lib, b"").unwrap();
        let layer = dir.path().join("libgpu_counters_vk_layer.so");
        fs::write(&layer, b"").unwrap();
        let tmp = dir.path().join("tmp");
        fs::create_dir(&tmp).unwrap();
        Env {
            dir,
            lib,
            layer,
            tmp,
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_gpu-counters"));
        c.arg("record")
            .args(args)
            .current_dir(self.dir.path())
            .env("GPU_COUNTERS_INJECT_LIB", &self.lib)
            .env("GPU_COUNTERS_VK_LAYER_LIB", &self.layer)
            .env_remove("VK_ADD_LAYER_PATH")
            .env_remove("VK_INSTANCE_LAYERS")
            .env("TMPDIR", &self.tmp)
            .env_remove("CUDA_INJECTION64_PATH")
            .env_remove("NVTX_INJECTION64_PATH")
            .stdin(Stdio::null());
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().expect("run gpu-counters record")
    }

    /// No private directory is left behind.
    fn assert_clean(&self) {
        let left: Vec<_> = fs::read_dir(&self.tmp).unwrap().collect();
        assert!(left.is_empty(), "left in TMPDIR: {left:?}");
    }
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn a_program_without_cuda_runs_and_the_summary_says_so() {
    let e = Env::new();
    let o = e.run(&["-o", "t.pftrace", "--", "true"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("no process initialized CUDA: nothing GPU-side was recorded"),
        "{err}"
    );
    assert!(err.contains("exit: code 0"), "{err}");
    e.assert_clean();
    let trace = e.path("t.pftrace");
    assert!(trace.is_file());
    let Some(py) = gpu_trace::python("a_program_without_cuda_runs_and_the_summary_says_so") else {
        return;
    };
    let v = gpu_trace::dump(&py, &trace, &["--prefixes"]);
    assert_eq!(v["clock"]["primary"], "BUILTIN_CLOCK_MONOTONIC");
    assert_eq!(v["clock"]["defaults_clock_id"], 3);
    assert_eq!(v["render_stages"], serde_json::json!([]));
}

#[test]
fn json_summary_only_writes_no_file() {
    let e = Env::new();
    let o = e.run(&["--summary-only", "--json", "--", "true"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("one JSON object");
    assert_eq!(v["cuda_initialized"], false);
    assert_eq!(v["exit"]["code"], 0);
    assert_eq!(v["command"], serde_json::json!(["true"]));
    assert_eq!(v["trace"]["path"], serde_json::Value::Null);
    assert!(!e.path("gpu-counters.pftrace").exists());
}

#[test]
fn exit_codes_are_the_programs() {
    let e = Env::new();
    for (cmd, code) in [(&["false"][..], 1), (&["sh", "-c", "exit 3"][..], 3)] {
        let mut args = vec!["--summary-only", "--"];
        args.extend_from_slice(cmd);
        let o = e.run(&args);
        assert_eq!(o.status.code(), Some(code), "{cmd:?}: {}", stderr(&o));
    }
    e.assert_clean();
}

#[test]
fn the_environment_reaches_the_program() {
    let e = Env::new();
    let script = r#"echo "$CUDA_INJECTION64_PATH|$NVTX_INJECTION64_PATH|$GPU_COUNTERS_RECORD_DIR"
test -S "$GPU_COUNTERS_RECORD_DIR/sock" && test -f "$GPU_COUNTERS_RECORD_DIR/config.json""#;
    let o = e.run(&["--summary-only", "--", "sh", "-c", script]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = String::from_utf8(o.stdout).unwrap();
    let parts: Vec<&str> = out.trim().split('|').collect();
    let lib = fs::canonicalize(&e.lib).unwrap();
    assert_eq!(parts[0], lib.to_str().unwrap());
    assert_eq!(parts[1], lib.to_str().unwrap());
    assert!(
        parts[2].starts_with(fs::canonicalize(&e.tmp).unwrap().to_str().unwrap())
            || parts[2].starts_with(e.tmp.to_str().unwrap())
    );
    assert!(
        !Path::new(parts[2]).exists(),
        "the private directory is removed"
    );
    let o = e.run(&[
        "--summary-only",
        "--no-nvtx",
        "--",
        "sh",
        "-c",
        "echo \"[$NVTX_INJECTION64_PATH]\"",
    ]);
    assert_eq!(String::from_utf8(o.stdout).unwrap().trim(), "[]");
}

/// The Vulkan layer is enabled through the loader's environment: its
/// manifest (naming the library found) in the private directory, first on
/// `VK_ADD_LAYER_PATH` and the layer first on `VK_INSTANCE_LAYERS` (before
/// the user's own), and the level and statistics in `config.json`;
/// `--no-vulkan` leaves the loader's environment alone.
#[test]
fn the_vulkan_layer_environment_reaches_the_program() {
    let e = Env::new();
    let script = r#"echo "$VK_ADD_LAYER_PATH|$VK_INSTANCE_LAYERS"
dir=${VK_ADD_LAYER_PATH%%:*}
grep library_path "$dir/VkLayer_gpu_counters_timing.json"
grep '"name": "VK_LAYER_GPU_COUNTERS_timing"' "$dir/VkLayer_gpu_counters_timing.json"
cat "$GPU_COUNTERS_RECORD_DIR/config.json""#;
    let o = e
        .cmd(&[
            "--summary-only",
            "--level",
            "draw",
            "--statistics",
            "--",
            "sh",
            "-c",
            script,
        ])
        .env("VK_ADD_LAYER_PATH", "/opt/more-layers")
        .env("VK_INSTANCE_LAYERS", "VK_LAYER_KHRONOS_validation")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = String::from_utf8(o.stdout).unwrap();
    let lines: Vec<&str> = out.lines().collect();
    let (paths, layers) = lines[0].split_once('|').unwrap();
    assert!(paths.ends_with("/vulkan:/opt/more-layers"), "{paths}");
    assert_eq!(
        layers,
        "VK_LAYER_GPU_COUNTERS_timing:VK_LAYER_KHRONOS_validation"
    );
    let layer = fs::canonicalize(&e.layer).unwrap();
    assert_eq!(
        lines[1].trim(),
        format!("\"library_path\": \"{}\",", layer.display())
    );
    let config: serde_json::Value = serde_json::from_str(lines[3]).unwrap();
    assert_eq!(
        config["vulkan"],
        serde_json::json!({"level": "draw", "statistics": true})
    );
    let o = e.run(&[
        "--summary-only",
        "--no-vulkan",
        "--",
        "sh",
        "-c",
        "echo \"[$VK_ADD_LAYER_PATH][$VK_INSTANCE_LAYERS]\"",
    ]);
    assert_eq!(String::from_utf8(o.stdout).unwrap().trim(), "[][]");
    e.assert_clean();
}

/// An X server on a display of its own for vkcube; stopped when dropped.
struct Xvfb(std::process::Child, String);

impl Xvfb {
    fn start() -> Xvfb {
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
            .expect("Xvfb (scripts/setup.sh installs it)");
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
        Xvfb(child, format!(":{n}"))
    }
}

impl Drop for Xvfb {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The layer library this test's build made (a dev-dependency): cargo
/// leaves it in `deps/`, and beside the command when it is built itself.
fn built_layer() -> PathBuf {
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_gpu-counters"));
    let name = "libgpu_counters_vk_layer.so";
    [
        exe.with_file_name(name),
        exe.with_file_name("deps").join(name),
    ]
    .into_iter()
    .filter(|p| p.is_file())
    .max_by_key(|p| p.metadata().and_then(|m| m.modified()).ok())
    .unwrap_or_else(|| panic!("{name} not built beside {}", exe.display()))
}

/// `gpu-counters record -- vkcube` with the real layer: vkcube is timed,
/// frame by frame, in the trace and the JSON summary.
#[test]
fn vkcube_under_record_is_timed_through_the_layer() {
    let layer = built_layer();
    let x = Xvfb::start();
    let e = Env::new();
    let o = e
        .cmd(&["-o", "t.pftrace", "--json", "--", "vkcube", "--c", "30"])
        .env("GPU_COUNTERS_VK_LAYER_LIB", &layer)
        .env("DISPLAY", &x.1)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let s: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(s["vulkan_initialized"], true, "{s:#}");
    assert_eq!(s["processes"][0]["vulkan"], true);
    assert!(s["vulkan"]["frames"].as_u64().unwrap() >= 30, "{s:#}");
    assert!(s["vulkan"]["executions"].as_u64().unwrap() >= 30, "{s:#}");
    assert_eq!(s["vulkan"]["untimed_scopes"], 0);
    assert!(e.path("t.pftrace").is_file());
    e.assert_clean();
}

#[test]
fn a_program_killed_by_sigterm_is_reported_with_143() {
    let e = Env::new();
    let o = e.run(&["-o", "t.pftrace", "--", "sh", "-c", "kill -TERM $$"]);
    assert_eq!(o.status.code(), Some(143), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("gpu-counters: sh was killed by signal 15 (SIGTERM)"),
        "{err}"
    );
    assert!(e.path("t.pftrace").is_file(), "the trace is still written");
    e.assert_clean();
}

#[test]
fn a_program_killed_by_sigint_ends_the_recorder_by_sigint() {
    let e = Env::new();
    let o = e.run(&["--summary-only", "--", "sh", "-c", "kill -INT $$"]);
    assert_eq!(o.status.signal(), Some(2), "{:?}: {}", o.status, stderr(&o));
    assert!(stderr(&o).contains("was killed by signal 2 (SIGINT)"));
}

#[test]
fn sigint_to_the_recorder_reaches_the_program_once() {
    let e = Env::new();
    let fifo = e.path("ready");
    let log = e.path("log");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    // The program traps SIGINT, says it is ready through the FIFO, and
    // waits; the trap logs one line and exits 5.
    let script = r#"trap 'echo INT >> "$1"; kill $p; exit 5' INT
sleep 30 & p=$!
echo ready > "$2"
wait"#;
    let child = e
        .cmd(&["--summary-only", "--", "sh", "-c", script, "sh"])
        .arg(&log)
        .arg(&fifo)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut ready = String::new();
    fs::File::open(&fifo)
        .unwrap()
        .read_to_string(&mut ready)
        .unwrap();
    assert_eq!(ready.trim(), "ready");
    let kill = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(5), "{}", stderr(&o));
    assert_eq!(
        fs::read_to_string(&log).unwrap(),
        "INT\n",
        "forwarded exactly once"
    );
}

#[test]
fn commands_not_found_or_not_executable_exit_as_a_shell() {
    let e = Env::new();
    let plain = e.path("plain.txt");
    fs::write(&plain, "not a program").unwrap();
    let plain = plain.to_str().unwrap().to_string();
    let dir = e.dir.path().to_str().unwrap().to_string();
    for (cmd, code, why) in [
        ("/nonexistent/program", 127, "No such file or directory"),
        (
            "no-such-command-gpu-counters",
            127,
            "No such file or directory",
        ),
        (plain.as_str(), 126, "Permission denied"),
        (dir.as_str(), 126, "Permission denied"),
    ] {
        let o = e.run(&["-o", "t.pftrace", "--", cmd]);
        assert_eq!(o.status.code(), Some(code), "{cmd}: {}", stderr(&o));
        assert_eq!(stderr(&o).trim(), format!("gpu-counters: {cmd}: {why}"));
        assert!(
            !e.path("t.pftrace").exists(),
            "{cmd}: no trace for a program that never ran"
        );
        e.assert_clean();
    }
}

/// Arguments, environment variables, and what the error line says.
type Case<'a> = (Vec<&'a str>, Vec<(&'a str, &'a str)>, &'a str);

#[test]
fn bad_input_exits_2_with_one_line_and_destroys_nothing() {
    let e = Env::new();
    let keep = e.path("gpu-counters.pftrace");
    fs::write(&keep, "not ours").unwrap();
    fs::create_dir(e.path("adir")).unwrap();
    let cases: Vec<Case> = vec![
        (vec![], vec![], "no command given"),
        (vec!["--"], vec![], "no command given"),
        (vec!["--", "true"], vec![], "gpu-counters.pftrace exists"),
        (
            vec!["-o", "adir", "--", "true"],
            vec![],
            "--output adir: is a directory",
        ),
        (
            vec!["-o", "missing/t.pftrace", "--", "true"],
            vec![],
            "does not exist",
        ),
        (
            vec!["--summary-only", "-o", "x", "--", "true"],
            vec![],
            "--summary-only with -o",
        ),
        (
            vec!["--summary-only", "--gpu-metric", "dram_bytes", "--", "true"],
            vec![],
            "\"dram_bytes\": not a metric name",
        ),
        (
            vec![
                "--summary-only",
                "--counters",
                "a__b",
                "--gpu-metrics",
                "--",
                "true",
            ],
            vec![],
            "--gpu-metrics with --counters",
        ),
        (
            vec!["--summary-only", "--replay", "kernel", "--", "true"],
            vec![],
            "--replay kernel",
        ),
        (
            vec![
                "--summary-only",
                "--replay",
                "pass",
                "--counters",
                "a__b",
                "--",
                "true",
            ],
            vec![],
            "--replay pass",
        ),
        (
            vec!["--summary-only", "--api", "all", "--", "true"],
            vec![],
            "--api all",
        ),
        (
            vec!["--summary-only", "--gpu-metrics=0", "--", "true"],
            vec![],
            "--gpu-metrics 0",
        ),
        (
            vec!["--summary-only", "--", "true"],
            vec![("CUDA_INJECTION64_PATH", "/x.so")],
            "CUDA_INJECTION64_PATH is already set",
        ),
        (
            vec!["--summary-only", "--", "true"],
            vec![("NVTX_INJECTION64_PATH", "/x.so")],
            "NVTX_INJECTION64_PATH is already set",
        ),
        (
            vec!["--summary-only", "--", "true"],
            vec![("GPU_COUNTERS_INJECT_LIB", "/nonexistent.so")],
            "GPU_COUNTERS_INJECT_LIB=/nonexistent.so: not a file",
        ),
        (
            vec!["--summary-only", "--", "true"],
            vec![("GPU_COUNTERS_VK_LAYER_LIB", "/nonexistent.so")],
            "GPU_COUNTERS_VK_LAYER_LIB=/nonexistent.so: not a file",
        ),
        (
            vec!["--summary-only", "--level", "frame", "--", "true"],
            vec![],
            "--level frame: must be pass, draw or dispatch",
        ),
        (
            vec![
                "--summary-only",
                "--no-vulkan",
                "--statistics",
                "--",
                "true",
            ],
            vec![],
            "--no-vulkan with --level or --statistics",
        ),
    ];
    for (args, env, says) in cases {
        let mut c = e.cmd(&args);
        for (k, v) in &env {
            c.env(k, v);
        }
        let o = c.output().unwrap();
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?} {env:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: one line: {err}");
        assert!(
            err.starts_with("error: ") && err.contains(says),
            "{args:?}: {err}"
        );
        assert_eq!(fs::read_to_string(&keep).unwrap(), "not ours");
        e.assert_clean();
    }
    // Named with -o, an existing file is replaced.
    let o = e.run(&["-o", "gpu-counters.pftrace", "--", "true"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_ne!(fs::read(&keep).unwrap(), b"not ours");
}

#[test]
fn a_trace_that_cannot_be_written_is_one_line_and_exit_1() {
    let e = Env::new();
    if !Path::new("/dev/full").exists() {
        eprintln!("a_trace_that_cannot_be_written_is_one_line_and_exit_1: SKIPPED: no /dev/full");
        return;
    }
    let o = e.run(&["-o", "/dev/full", "--", "true"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let errors: Vec<&str> = stderr(&o)
        .lines()
        .filter(|l| l.starts_with("error:"))
        .map(|_| "")
        .collect();
    assert_eq!(errors.len(), 1, "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("error: --output /dev/full: cannot write: No space left on device"),
        "{err}"
    );
    assert!(err.contains("trace: not written"), "{err}");
    // A failing program keeps its own status.
    let o = e.run(&["-o", "/dev/full", "--", "sh", "-c", "exit 3"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    e.assert_clean();
}

/// What the program sees in `$GPU_COUNTERS_RECORD_DIR/config.json` for
/// `args`, read with the injection's own parser, and record's stderr.
fn config_for(e: &Env, args: &[&str]) -> (gpu_counters_inject::config::Config, String) {
    let mut all = vec!["--summary-only"];
    all.extend_from_slice(args);
    all.extend_from_slice(&[
        "--",
        "sh",
        "-c",
        "cat \"$GPU_COUNTERS_RECORD_DIR/config.json\"",
    ]);
    let o = e.run(&all);
    assert_eq!(o.status.code(), Some(0), "{args:?}: {}", stderr(&o));
    let err = stderr(&o);
    let text = String::from_utf8(o.stdout).unwrap();
    let c = gpu_counters_inject::config::Config::parse(&text)
        .unwrap_or_else(|e| panic!("{args:?}: {e}: {text}"));
    (c, err)
}

/// The line saying metrics were checked for syntax only (no driver here).
const SYNTAX_ONLY: &str = "gpu-counters: note: metric names checked for syntax only: ";

/// `--gpu-metrics`, `--gpu-metric`, `--counters`, `--replay`, `--api` and
/// `--no-nvtx` reach the injection's config as it reads them. Without a
/// CUDA driver here, the metric names are checked for syntax only, said
/// in one note line; with one, PM sampling's defaults are chosen here.
#[test]
fn metric_options_reach_the_injections_config() {
    let e = Env::new();
    let driver = gpu_counters_cuda::driver_present();
    let (c, err) = config_for(
        &e,
        &[
            "--gpu-metrics=500",
            "--gpu-metric",
            "dram__bytes_read.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed",
            "--api",
            "none",
            "--no-nvtx",
        ],
    );
    assert_eq!(c.gpu_metrics_hz, Some(500));
    assert_eq!(
        c.gpu_metrics,
        vec![
            "dram__bytes_read.sum".to_string(),
            "sm__throughput.avg.pct_of_peak_sustained_elapsed".to_string()
        ]
    );
    assert!(c.counters.is_empty());
    assert!(!c.api_slices());
    assert!(!c.nvtx);
    if !driver {
        assert_eq!(
            err.lines().filter(|l| l.starts_with(SYNTAX_ONLY)).count(),
            1,
            "{err}"
        );
    }

    // A metric list alone implies the default rate.
    let (c, _) = config_for(&e, &["--gpu-metric", "dram__bytes_write.sum"]);
    assert_eq!(c.gpu_metrics_hz, Some(10_000));

    // --gpu-metrics alone: the defaults (chosen on the device where there
    // is one here, else by the injection: an empty list).
    let (c, err) = config_for(&e, &["--gpu-metrics"]);
    assert_eq!(c.gpu_metrics_hz, Some(10_000));
    if driver {
        assert!(
            !c.gpu_metrics.is_empty() || err.contains(SYNTAX_ONLY),
            "{err}"
        );
    } else {
        assert!(c.gpu_metrics.is_empty());
        assert!(err.contains("syntax only: no CUDA driver here"), "{err}");
    }

    let (c, _) = config_for(
        &e,
        &[
            "--counters",
            "smsp__inst_executed.sum,dram__bytes_read.sum",
            "--replay",
            "kernel",
        ],
    );
    assert_eq!(
        c.counters,
        vec![
            "smsp__inst_executed.sum".to_string(),
            "dram__bytes_read.sum".to_string()
        ]
    );
    assert!(c.replay_kernels());
    assert_eq!(c.gpu_metrics_hz, None);
    assert!(c.api_slices() && c.nvtx);

    // No metric option: nothing is checked, no note.
    let (c, err) = config_for(&e, &[]);
    assert_eq!((c.gpu_metrics_hz, c.counters.len()), (None, 0));
    assert!(!c.replay_kernels());
    assert!(!err.contains("note:"), "{err}");
    e.assert_clean();
}

/// `--list-gpu-metrics` needs no command; without a CUDA driver it fails
/// in one line.
#[test]
fn listing_gpu_metrics_without_a_driver_is_one_line() {
    if gpu_counters_cuda::driver_present() {
        eprintln!(
            "listing_gpu_metrics_without_a_driver_is_one_line: SKIPPED: a CUDA driver is present"
        );
        return;
    }
    let e = Env::new();
    let o = e.run(&["--list-gpu-metrics"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_eq!(
        stderr(&o),
        "error: --list-gpu-metrics: no CUDA driver could be loaded\n"
    );
    assert!(o.stdout.is_empty());
}
