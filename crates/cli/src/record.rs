//! `gpu-counters record [-o FILE.pftrace] [options] -- CMD ARGS...`: runs a
//! program with the CUDA and NVTX injection library and the Vulkan layer
//! (`VK_LAYER_GPU_COUNTERS_timing`, where its library is found: enabled
//! through the loader's `VK_ADD_LAYER_PATH` and `VK_INSTANCE_LAYERS`, with
//! a manifest written into the private directory), streams what every
//! process of it sends into one Perfetto trace, and prints a summary.
//!
//! Before the program starts, bad input exits 2 with one `error:` line and
//! nothing written: no command; `CUDA_INJECTION64_PATH` or
//! `NVTX_INJECTION64_PATH` already set (another tool injects); a metric
//! name that is not one; `--gpu-metrics` with `--counters`; `--summary-only`
//! with `-o`; the injection library not found; `--level` other than pass,
//! draw or dispatch; `--no-vulkan` with `--level` or `--statistics`;
//! `GPU_COUNTERS_VK_LAYER_LIB` not a file, or the layer not found where
//! `--level` or `--statistics` asks for it; an output path `run` would
//! refuse, or the default `gpu-counters.pftrace` when it exists.
//!
//! Metrics are checked against each device's chip with CUPTI's host API
//! (no context is made): an unknown metric exits 2 naming it and the chip;
//! `--counters` that need several passes exit 2 naming the metric unless
//! `--replay kernel`; `--gpu-metric`s must be measured in one pass; with no
//! `--gpu-metric`, PM sampling's defaults are chosen here. Where no driver
//! or CUPTI can be used in the recorder's own process, one note line says
//! the names were checked for syntax only, and the program runs.
//!
//! The program runs with the signal mask the recorder had, in its process
//! group. SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 sent to the
//! recorder are passed on to it (a terminal's Ctrl-C reaches it directly).
//! A command that is not found exits 127, one that cannot be executed 126,
//! as a shell does. After the program ends, the recorder waits at most
//! `--drain-timeout` seconds for its processes' connections to end, writes
//! the trace and the summary (text on stderr, or JSON on stdout with
//! `--json`), and exits with the program's status; a program killed by
//! signal S is reported in one line and gives 128 + S (SIGINT is raised
//! again on the recorder, so that a calling shell stops too). A trace that
//! could not be written is one `error:` line and exit 1 when the program
//! succeeded.

mod check;
#[cfg(test)]
mod tests;

use crate::error::CliError;
use crate::output::PendingOutput;
use clap::Args;
use gpu_counters_record::collector::{self, Options, Outcome};
use gpu_counters_record::process::{self, Exit, Forwarder, SignalMask};
use gpu_counters_record::summary::ExitSummary;
use std::ffi::OsString;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The injection library's file name.
pub const INJECT_LIB: &str = "libgpu_counters_inject.so";
/// Overrides where the Vulkan layer's library is found.
pub const VK_LAYER_LIB_VAR: &str = "GPU_COUNTERS_VK_LAYER_LIB";
/// Overrides where the injection library is found.
pub const INJECT_LIB_VAR: &str = "GPU_COUNTERS_INJECT_LIB";
/// The trace written when `-o` is not given (never over an existing file).
pub const DEFAULT_OUTPUT: &str = "gpu-counters.pftrace";
/// The rate of `--gpu-metrics` without a value, Hz.
pub const DEFAULT_PM_HZ: u32 = 10_000;

/// Options of `record`.
#[derive(Debug, Args)]
pub struct RecordArgs {
    /// Where to write the Perfetto trace [default: gpu-counters.pftrace in
    /// the current directory, which must not exist yet]. Paths follow
    /// `run`'s rules: written to a temporary file renamed into place, FIFOs
    /// and character devices written through
    #[arg(short = 'o', long = "output", value_name = "FILE.pftrace")]
    pub output: Option<PathBuf>,

    /// Write no trace; print the summary only.
    #[arg(long)]
    pub summary_only: bool,

    /// Print the summary as one JSON object on stdout (instead of text on
    /// stderr).
    #[arg(long)]
    pub json: bool,

    /// Sample GPU metrics (SM throughput, DRAM bandwidth, tensor pipes) at
    /// HZ samples a second with CUPTI's PM sampling [default HZ: 10000]
    #[arg(long, value_name = "HZ", num_args = 0..=1, default_missing_value = "10000")]
    pub gpu_metrics: Option<u32>,

    /// The metrics `--gpu-metrics` samples, instead of its defaults
    /// (implies `--gpu-metrics`)
    #[arg(long = "gpu-metric", value_name = "M,...", value_delimiter = ',')]
    pub gpu_metric: Vec<String>,

    /// Measure these metrics for every kernel with the range profiler
    /// (serializes kernels)
    #[arg(long, value_name = "M,...", value_delimiter = ',')]
    pub counters: Vec<String>,

    /// Allow metric sets that need several passes by replaying each kernel:
    /// kernel
    #[arg(long, value_name = "MODE")]
    pub replay: Option<String>,

    /// Which CUDA API calls become slices on their thread: launches (kernel
    /// launches, copies, memsets, synchronizations) or none [default:
    /// launches]
    #[arg(
        long,
        value_name = "MODE",
        default_value = "launches",
        hide_default_value = true
    )]
    pub api: String,

    /// Do not record NVTX ranges.
    #[arg(long)]
    pub no_nvtx: bool,

    /// Do not enable the Vulkan layer (VK_LAYER_GPU_COUNTERS_timing).
    #[arg(long)]
    pub no_vulkan: bool,

    /// How finely the Vulkan layer times command buffers: pass (render
    /// passes, runs of dispatches and of copies, debug labels), draw (also
    /// each draw) or dispatch (also each dispatch) [default: pass]
    #[arg(long, value_name = "LEVEL")]
    pub level: Option<String>,

    /// Take Vulkan pipeline statistics per render pass and compute run
    #[arg(long)]
    pub statistics: bool,

    /// List, for each CUDA device, the metrics PM sampling offers and the
    /// defaults `--gpu-metrics` samples there, then exit (no command)
    #[arg(long)]
    pub list_gpu_metrics: bool,

    /// The CUPTI library the program should use (a path), when it does not
    /// load one itself
    #[arg(long, value_name = "PATH")]
    pub cupti: Option<PathBuf>,

    /// Seconds to wait after the program ends for its processes to finish
    /// sending [default: 5]
    #[arg(
        long,
        value_name = "SECONDS",
        default_value = "5",
        hide_default_value = true
    )]
    pub drain_timeout: f64,

    /// The program and its arguments, after `--`.
    #[arg(
        value_name = "CMD",
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    pub command: Vec<OsString>,
}

/// What was checked before the program starts.
struct Plan {
    output: Option<(PathBuf, PendingOutput)>,
    env: Vec<(OsString, OsString)>,
    config: serde_json::Value,
    drain: Duration,
    /// The Vulkan layer's library, when the layer is enabled.
    vk_layer: Option<PathBuf>,
    /// PM sampling was asked for.
    pm: bool,
    /// The CUPTI library found for programs that load none.
    cupti: Option<PathBuf>,
}

fn usage(m: impl Into<String>) -> CliError {
    CliError::Usage(m.into())
}

/// A metric name as the profiler spells them: `unit__counter[.rollup...]`.
fn check_metric(flag: &str, m: &str) -> Result<(), CliError> {
    let ok = m.contains("__")
        && m.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
        && !m.starts_with("__");
    if ok {
        Ok(())
    } else {
        Err(usage(format!(
            "{flag} {m:?}: not a metric name (they look like dram__bytes_read.sum)"
        )))
    }
}

/// Finds the injection library: `$GPU_COUNTERS_INJECT_LIB`, else beside the
/// executable, else `../lib/gpu-counters/` from it. The path is absolute.
fn find_injection() -> Result<PathBuf, CliError> {
    if let Some(p) = std::env::var_os(INJECT_LIB_VAR) {
        let p = PathBuf::from(p);
        if p.is_file() {
            return std::fs::canonicalize(&p)
                .map_err(|e| usage(format!("{INJECT_LIB_VAR}={}: {e}", p.display())));
        }
        return Err(usage(format!(
            "{INJECT_LIB_VAR}={}: not a file",
            p.display()
        )));
    }
    let mut looked = Vec::new();
    if let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(Path::to_path_buf))
    {
        for c in [
            dir.join(INJECT_LIB),
            dir.join("../lib/gpu-counters").join(INJECT_LIB),
        ] {
            if c.is_file() {
                if let Ok(abs) = std::fs::canonicalize(&c) {
                    return Ok(abs);
                }
            }
            looked.push(c.display().to_string());
        }
    }
    Err(usage(format!(
        "the injection library {INJECT_LIB} was not found (looked for {}); install it beside \
         gpu-counters or set {INJECT_LIB_VAR} to its path",
        looked.join(" and ")
    )))
}

/// Finds the Vulkan layer's library: `$GPU_COUNTERS_VK_LAYER_LIB` (which
/// must name a file), else beside the executable, else
/// `../lib/gpu-counters/` from it. `Ok(None)` where it is not installed.
fn find_vk_layer() -> Result<Option<PathBuf>, CliError> {
    use gpu_counters_record::vk_layer::LIBRARY;
    if let Some(p) = std::env::var_os(VK_LAYER_LIB_VAR) {
        let p = PathBuf::from(p);
        if p.is_file() {
            return std::fs::canonicalize(&p)
                .map(Some)
                .map_err(|e| usage(format!("{VK_LAYER_LIB_VAR}={}: {e}", p.display())));
        }
        return Err(usage(format!(
            "{VK_LAYER_LIB_VAR}={}: not a file",
            p.display()
        )));
    }
    let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(Path::to_path_buf))
    else {
        return Ok(None);
    };
    for c in [
        dir.join(LIBRARY),
        dir.join("../lib/gpu-counters").join(LIBRARY),
    ] {
        if c.is_file() {
            if let Ok(abs) = std::fs::canonicalize(&c) {
                return Ok(Some(abs));
            }
        }
    }
    Ok(None)
}

/// The loader environment that enables the Vulkan layer whose manifest is
/// in `dir`: `VK_ADD_LAYER_PATH` first names `dir`, `VK_INSTANCE_LAYERS`
/// first names the layer (closest to the application, above any layer the
/// user enables, such as the validation layer, which then checks the
/// layer's own commands too).
fn vk_layer_env(dir: &Path) -> Vec<(OsString, OsString)> {
    let join = |first: OsString, var: &str| -> OsString {
        match std::env::var_os(var).filter(|v| !v.is_empty()) {
            Some(v) => {
                let mut s = first;
                s.push(":");
                s.push(v);
                s
            }
            None => first,
        }
    };
    vec![
        (
            "VK_ADD_LAYER_PATH".into(),
            join(dir.as_os_str().to_owned(), "VK_ADD_LAYER_PATH"),
        ),
        (
            "VK_INSTANCE_LAYERS".into(),
            join(
                gpu_counters_record::vk_layer::LAYER_NAME.into(),
                "VK_INSTANCE_LAYERS",
            ),
        ),
    ]
}

/// A CUPTI library for programs that load none themselves:
/// `$GPU_COUNTERS_CUPTI` when set, else the first `libcupti.so*` under
/// `$CUDA_HOME` or `/usr/local/cuda*` (`extras/CUPTI/lib64`,
/// `targets/x86_64-linux/lib`, `lib64`).
fn find_cupti() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("GPU_COUNTERS_CUPTI") {
        return Some(PathBuf::from(p));
    }
    let mut roots: Vec<PathBuf> = std::env::var_os("CUDA_HOME")
        .map(PathBuf::from)
        .into_iter()
        .collect();
    roots.push(PathBuf::from("/usr/local/cuda"));
    if let Ok(rd) = std::fs::read_dir("/usr/local") {
        let mut more: Vec<PathBuf> = rd
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("cuda-"))
            })
            .collect();
        more.sort();
        more.reverse();
        roots.extend(more);
    }
    for root in roots {
        for sub in ["extras/CUPTI/lib64", "targets/x86_64-linux/lib", "lib64"] {
            let dir = root.join(sub);
            let Ok(rd) = std::fs::read_dir(&dir) else {
                continue;
            };
            let mut libs: Vec<PathBuf> = rd
                .flatten()
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n == "libcupti.so" || n.starts_with("libcupti.so."))
                })
                .collect();
            libs.sort();
            if let Some(l) = libs.into_iter().next() {
                return std::fs::canonicalize(&l).ok();
            }
        }
    }
    None
}

fn plan(a: &RecordArgs) -> Result<Plan, CliError> {
    if a.command.is_empty() {
        return Err(usage(
            "record: no command given; put it after `--`: gpu-counters record [OPTIONS] -- CMD [ARGS...]",
        ));
    }
    for var in ["CUDA_INJECTION64_PATH", "NVTX_INJECTION64_PATH"] {
        if let Some(v) = std::env::var_os(var) {
            return Err(usage(format!(
                "{var} is already set (to {}): another tool injects into the program; unset it to record",
                Path::new(&v).display()
            )));
        }
    }
    let api = match a.api.as_str() {
        "launches" | "none" => a.api.clone(),
        other => return Err(usage(format!("--api {other}: must be launches or none"))),
    };
    let replay = match a.replay.as_deref() {
        None => "none",
        Some("kernel") => "kernel",
        Some(other) => return Err(usage(format!("--replay {other}: must be kernel"))),
    };
    if a.replay.is_some() && a.counters.is_empty() {
        return Err(usage(
            "--replay kernel: applies to --counters, which is not given",
        ));
    }
    for m in &a.gpu_metric {
        check_metric("--gpu-metric", m)?;
    }
    for m in &a.counters {
        check_metric("--counters", m)?;
    }
    let pm_hz = match (a.gpu_metrics, a.gpu_metric.is_empty()) {
        (Some(hz), _) => Some(hz),
        (None, false) => Some(DEFAULT_PM_HZ),
        (None, true) => None,
    };
    if let Some(hz) = pm_hz {
        if !(1..=100_000).contains(&hz) {
            return Err(usage(format!(
                "--gpu-metrics {hz}: the rate must be 1 to 100000 samples a second"
            )));
        }
    }
    if pm_hz.is_some() && !a.counters.is_empty() {
        return Err(usage(
            "--gpu-metrics with --counters: both need the GPU's performance monitors; give one",
        ));
    }
    if !(a.drain_timeout.is_finite() && (0.0..=3600.0).contains(&a.drain_timeout)) {
        return Err(usage(format!(
            "--drain-timeout {}: must be 0 to 3600 seconds",
            a.drain_timeout
        )));
    }
    if a.summary_only && a.output.is_some() {
        return Err(usage(
            "--summary-only with -o: --summary-only writes no trace",
        ));
    }
    let cupti = match &a.cupti {
        Some(p) if p.is_file() => Some(
            std::fs::canonicalize(p).map_err(|e| usage(format!("--cupti {}: {e}", p.display())))?,
        ),
        Some(p) => return Err(usage(format!("--cupti {}: not a file", p.display()))),
        None => None,
    };
    let level = match a.level.as_deref() {
        None => "pass",
        Some(l @ ("pass" | "draw" | "dispatch")) => l,
        Some(other) => {
            return Err(usage(format!(
                "--level {other}: must be pass, draw or dispatch"
            )))
        }
    };
    if a.no_vulkan && (a.level.is_some() || a.statistics) {
        return Err(usage(
            "--no-vulkan with --level or --statistics: those apply to the Vulkan layer",
        ));
    }
    // The program's own libcupti, where it maps one, wins in the library
    // (one CUPTI per process); this is for programs that map none, and for
    // the check below.
    let cupti = cupti.or_else(find_cupti);
    let lib = find_injection()?;
    let vk_layer = if a.no_vulkan {
        None
    } else {
        let found = find_vk_layer()?;
        if found.is_none() && (a.level.is_some() || a.statistics) {
            return Err(usage(format!(
                "--level and --statistics need the Vulkan layer {}, which was not found beside \
                 gpu-counters; install it there or set {VK_LAYER_LIB_VAR} to its path",
                gpu_counters_record::vk_layer::LIBRARY
            )));
        }
        found
    };
    let output = if a.summary_only {
        None
    } else {
        let path = match &a.output {
            Some(p) => p.clone(),
            None => {
                let p = PathBuf::from(DEFAULT_OUTPUT);
                if std::fs::symlink_metadata(&p).is_ok() {
                    return Err(usage(format!(
                        "{DEFAULT_OUTPUT} exists; give -o FILE to write the trace (to replace it, name it with -o)"
                    )));
                }
                p
            }
        };
        let pending = PendingOutput::prepare("--output", &path)?;
        Some((path, pending))
    };
    let mut env: Vec<(OsString, OsString)> =
        vec![("CUDA_INJECTION64_PATH".into(), lib.clone().into())];
    if !a.no_nvtx {
        env.push(("NVTX_INJECTION64_PATH".into(), lib.clone().into()));
    }
    if let Some(c) = &cupti {
        env.push(("GPU_COUNTERS_CUPTI".into(), c.clone().into()));
    }
    let mut config = config_json(
        &api,
        !a.no_nvtx,
        pm_hz,
        a.gpu_metric.clone(),
        &a.counters,
        replay,
    );
    config["vulkan"] = serde_json::json!({"level": level, "statistics": a.statistics});
    Ok(Plan {
        output,
        env,
        config,
        drain: Duration::from_secs_f64(a.drain_timeout),
        vk_layer,
        pm: pm_hz.is_some(),
        cupti,
    })
}

/// The injection's `config.json` (read by gpu-counters-record-inject's
/// `Config`): `gpu_metrics` empty means the defaults, chosen on each device.
fn config_json(
    api: &str,
    nvtx: bool,
    pm_hz: Option<u32>,
    gpu_metrics: Vec<String>,
    counters: &[String],
    replay: &str,
) -> serde_json::Value {
    serde_json::json!({
        "version": 1,
        "api": api,
        "nvtx": nvtx,
        "gpu_metrics_hz": pm_hz,
        "gpu_metrics": gpu_metrics,
        "counters": counters,
        "replay": replay,
    })
}

/// The metric checks against the devices' chips, before the program
/// starts (see [`check`]): `Some(metrics)` where PM sampling's defaults
/// were chosen here (one chip), `None` where the injection uses the
/// metrics given or chooses the defaults on each device. Where no driver or
/// CUPTI can be used here, one note line says the names were checked for
/// syntax only.
fn check_on_devices(
    a: &RecordArgs,
    pm: bool,
    cupti: Option<&Path>,
) -> Result<Option<Vec<String>>, CliError> {
    if !pm && a.counters.is_empty() {
        return Ok(None);
    }
    if let Some(c) = cupti {
        gpu_counters_cupti_sys::prefer_path(c.to_path_buf());
    }
    let replay = a.replay.is_some();
    let outcome = check::on_devices(check::Devices::open, pm, &a.gpu_metric, &a.counters, replay);
    match outcome {
        Ok(check::Checked { resolved, notes }) => {
            for n in notes {
                crate::stdio::errln!("gpu-counters: note: {n}");
            }
            Ok(resolved)
        }
        Err(check::Stop::Usage(m)) => Err(usage(m)),
        Err(check::Stop::Cannot(why)) => {
            crate::stdio::errln!("gpu-counters: note: metric names checked for syntax only: {why}");
            Ok(None)
        }
    }
}

/// `record --list-gpu-metrics`: each device's PM-sampling metrics and
/// defaults.
fn list_gpu_metrics() -> Result<(), CliError> {
    use gpu_counters_cuda::hardware::{ChipMetrics, MetricsOf};
    if !gpu_counters_cuda::driver_present() {
        return Err(CliError::Failure(
            "--list-gpu-metrics: no CUDA driver could be loaded".into(),
        ));
    }
    if let Some(c) = find_cupti() {
        gpu_counters_cupti_sys::prefer_path(c);
    }
    let chips = gpu_counters_cuda::hardware::device_chips()
        .map_err(|e| CliError::Failure(format!("--list-gpu-metrics: {e}")))?;
    for (gpu, chip) in chips.iter().enumerate() {
        let m = ChipMetrics::for_device(gpu, MetricsOf::PmSampling)
            .map_err(|e| CliError::Failure(format!("--list-gpu-metrics: GPU{gpu}: {e}")))?;
        let (chosen, missing) = m.default_pm_metrics();
        let bases = m
            .base_metrics()
            .map_err(|e| CliError::Failure(format!("--list-gpu-metrics: GPU{gpu}: {e}")))?;
        crate::stdio::outln!(
            "GPU{gpu}: {chip}: PM sampling, {} base metrics ({})",
            bases.len(),
            if m.has_availability() {
                "the device's counter availability applied"
            } else {
                "the chip's, the device's availability could not be read"
            }
        )?;
        crate::stdio::outln!("  defaults: {}", chosen.join(", "))?;
        for x in missing {
            crate::stdio::outln!("  no default for {x}")?;
        }
        for b in bases {
            crate::stdio::outln!(
                "  {}{} [{}]",
                b.name,
                b.kind.default_rollup(),
                b.kind.name()
            )?;
        }
    }
    Ok(())
}

/// Where the trace went, and whether committing it succeeded.
type Written = (PathBuf, Result<(), CliError>);

/// The command as text, for messages.
fn shown(cmd: &[OsString]) -> Vec<String> {
    cmd.iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect()
}

/// `gpu-counters record`; returns the exit code (or ends the process with
/// the program's signal).
pub fn run(a: &RecordArgs) -> ExitCode {
    if a.list_gpu_metrics {
        return match list_gpu_metrics() {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) if e.is_closed_pipe() => ExitCode::from(e.exit_code()),
            Err(e) => {
                crate::stdio::errln!("error: {e}");
                ExitCode::from(e.exit_code())
            }
        };
    }
    match record(a) {
        Ok(code) => code,
        Err(e) => {
            crate::stdio::errln!("error: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

fn record(a: &RecordArgs) -> Result<ExitCode, CliError> {
    let mut plan = plan(a)?;
    // Before any thread starts, so that every thread inherits the mask and
    // the forwarded signals wait for the forwarder.
    let mask = SignalMask::block()
        .map_err(|e| CliError::Failure(format!("record: blocking signals: {e}")))?;
    // After the mask: the driver's threads that the checks start inherit
    // it, so that forwarded signals never reach them.
    if let Some(resolved) = check_on_devices(a, plan.pm, plan.cupti.as_deref())? {
        plan.config["gpu_metrics"] = serde_json::json!(resolved);
    }
    let (collector, writer) = collector::start(Options::default())
        .map_err(|e| CliError::Failure(format!("record: starting the collector: {e}")))?;
    collector::write_config(collector.dir(), &plan.config).map_err(|e| {
        CliError::Failure(format!(
            "record: writing {}: {e}",
            collector.dir().join("config.json").display()
        ))
    })?;
    plan.env.push((
        gpu_counters_record::client::RECORD_DIR_VAR.into(),
        collector.dir().as_os_str().to_owned(),
    ));
    if let Some(layer) = &plan.vk_layer {
        // The manifest goes in the private directory, naming the library
        // found: nothing needs installing beside the loader's own paths.
        use gpu_counters_record::vk_layer::{manifest_json, MANIFEST};
        let dir = collector.dir().join("vulkan");
        std::fs::create_dir(&dir)
            .and_then(|()| std::fs::write(dir.join(MANIFEST), manifest_json(layer)))
            .map_err(|e| {
                CliError::Failure(format!(
                    "record: writing the Vulkan layer's manifest in {}: {e}",
                    dir.display()
                ))
            })?;
        plan.env.extend(vk_layer_env(&dir));
    }

    // The writer thread: streams the trace into the pending output.
    let abort = Arc::new(AtomicBool::new(false));
    let output = plan.output.take();
    let abort2 = abort.clone();
    let writer_thread = std::thread::Builder::new()
        .name("gpu-counters-write".into())
        .spawn(move || -> (Outcome, Option<Written>) {
            match output {
                None => (writer.run(None::<io::Sink>), None),
                Some((path, pending)) => {
                    let mut outcome = None;
                    let committed = pending.commit(|w| {
                        let mut o = writer.run(Some(w));
                        let err = o.write_error.take();
                        outcome = Some(o);
                        match err {
                            Some(e) => Err(e),
                            None if abort2.load(Ordering::Acquire) => {
                                Err(io::Error::other("the program did not start"))
                            }
                            None => Ok(()),
                        }
                    });
                    let outcome = outcome.expect("commit runs the writer");
                    (outcome, Some((path, committed)))
                }
            }
        })
        .map_err(|e| CliError::Failure(format!("record: starting the writer: {e}")))?;

    let program = &a.command[0];
    let started = Instant::now();
    let mut child = match process::spawn(program, &a.command[1..], &plan.env, &mask) {
        Ok(c) => c,
        Err(e) => {
            abort.store(true, Ordering::Release);
            collector.finish(Duration::ZERO);
            let _ = writer_thread.join();
            crate::stdio::errln!(
                "gpu-counters: {}: {}",
                crate::stdio::one_line(&program.to_string_lossy()),
                e.reason()
            );
            return Ok(ExitCode::from(e.exit_code()));
        }
    };
    let forwarder = Forwarder::start(child.id());
    let exit = process::wait(&mut child);
    let wall = started.elapsed();
    if let Ok(f) = forwarder {
        f.stop();
    }
    let exit =
        exit.map_err(|e| CliError::Failure(format!("record: waiting for the program: {e}")))?;
    // Connections closed at the deadline are counted in the summary.
    collector.finish(plan.drain);
    let (outcome, written) = writer_thread
        .join()
        .map_err(|_| CliError::Failure("record: the writer thread panicked".into()))?;

    let mut summary = outcome.summary;
    summary.command = shown(&a.command);
    summary.wall_ns = wall.as_nanos() as u64;
    summary.exit = Some(match exit {
        Exit::Code(c) => ExitSummary {
            code: Some(c),
            signal: None,
            signal_name: None,
        },
        Exit::Signal(s) => ExitSummary {
            code: None,
            signal: Some(s),
            signal_name: Some(process::signal_name(s)),
        },
    });
    let mut write_failed = None;
    match written {
        Some((path, Ok(()))) => summary.trace.path = Some(path.display().to_string()),
        Some((_, Err(e))) => write_failed = Some(e),
        None => {}
    }
    if a.json {
        // A summary that cannot be written fails like the trace (a closed
        // pipe quietly).
        let shown = crate::stdio::out_with(|w| {
            serde_json::to_writer_pretty(&mut *w, &summary).map_err(io::Error::from)?;
            writeln!(w)
        })
        .and_then(|()| crate::stdio::flush());
        if let Err(e) = shown {
            if write_failed.is_none() && !e.is_closed_pipe() {
                write_failed = Some(e);
            }
        }
    } else {
        let _ = io::stderr()
            .lock()
            .write_all(summary.render_text().as_bytes());
    }
    if let Some(e) = &write_failed {
        crate::stdio::errln!("error: {e}");
    }
    match exit {
        Exit::Signal(s) => {
            crate::stdio::errln!(
                "gpu-counters: {} was killed by signal {s} ({})",
                crate::stdio::one_line(&program.to_string_lossy()),
                process::signal_name(s)
            );
            if s == process::SIGINT {
                let _ = io::stderr().flush();
                process::reraise(s);
            }
            Ok(ExitCode::from((128 + s).min(255) as u8))
        }
        Exit::Code(0) if write_failed.is_some() => Ok(ExitCode::from(1)),
        Exit::Code(c) => Ok(ExitCode::from(c.clamp(0, 255) as u8)),
    }
}
