//! The command line: subcommands, options and their defaults.

use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

/// GPU counter sampling (Metal's model) on every Vulkan device (and wgpu
/// adapter or CUDA device, with --backend wgpu or cuda): list devices and
/// their counters, run built-in workloads with exact expected counts, and
/// export calibrated timelines.
///
/// Exit codes: 0 success; 1 the run failed or a check failed (a statistic
/// that differs from the expected count, a validation-layer message, an
/// output or stdout that cannot be written); 2 bad input (nothing is run and
/// no output file is written); 141 stdout is a closed pipe (the command
/// stops quietly, as a Unix tool killed by SIGPIPE). Every error is one
/// line on stderr.
/// Set GPU_COUNTERS_VALIDATION=1 to run under VK_LAYER_KHRONOS_validation;
/// any message the layer itself reports then fails the command (the Vulkan
/// loader's notices, e.g. about VK_INSTANCE_LAYERS being set, do not count).
#[derive(Debug, Parser)]
#[command(name = "gpu-counters", version, max_term_width = 100)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// List every Vulkan device (with `--backend wgpu`, `cuda` or `all`,
    /// every wgpu adapter or CUDA device) with its counter sets, sampling
    /// points, timestamp period and calibration.
    Devices(DevicesArgs),
    /// Run a built-in workload for some frames, sampling every pass's
    /// timestamps and statistics, and check the statistics against the
    /// counts known in advance (on a Vulkan device, or with `--backend wgpu`
    /// on a wgpu adapter, or with `--backend cuda` on a CUDA device).
    Run(RunArgs),
    /// Measure what counter sampling costs against raw Vulkan (ash), wgpu
    /// and wgpu-profiler, side by side in one run; CPU resolve throughput;
    /// calibration quality and drift.
    Bench(gpu_counters_bench::BenchArgs),
    /// Run a program with every CUDA kernel, copy and NVTX range it (and
    /// its child processes) makes recorded into one Perfetto trace, and
    /// print a summary: `record [-o FILE.pftrace] [OPTIONS] -- CMD ARGS...`.
    Record(crate::record::RecordArgs),
}

/// Options of `devices`.
#[derive(Debug, Args)]
pub struct DevicesArgs {
    /// Print one JSON object `{"devices": [...]}` instead of a listing.
    #[arg(long)]
    pub json: bool,

    /// Which devices to list: Vulkan devices (as `run` and `bench` use
    /// them), wgpu adapters (as `run --backend wgpu` uses them) opened
    /// through gpu-counters-wgpu (with the wgpu backends compiled in:
    /// Vulkan), CUDA devices (as `run --backend cuda` uses them) opened
    /// through gpu-counters-cuda (the driver loaded at run time; without
    /// one, `cuda` fails and `all` notes it on stderr), or all three: vulkan,
    /// wgpu, cuda or all [default: vulkan]
    // Parsed by `DevicesBackend::parse` rather than clap, so a bad value is
    // one `error:` line (exit 2) like every other bad input.
    #[arg(
        long,
        value_name = "BACKEND",
        default_value = "vulkan",
        hide_default_value = true
    )]
    pub backend: String,
}

/// What `devices --backend` lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DevicesBackend {
    /// Vulkan devices through gpu-counters-vulkan.
    Vulkan,
    /// wgpu adapters through gpu-counters-wgpu.
    Wgpu,
    /// CUDA devices through gpu-counters-cuda.
    Cuda,
    /// Vulkan devices, then wgpu adapters, then CUDA devices.
    All,
}

impl DevicesBackend {
    /// Parses `--backend`'s value.
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "vulkan" => Ok(DevicesBackend::Vulkan),
            "wgpu" => Ok(DevicesBackend::Wgpu),
            "cuda" => Ok(DevicesBackend::Cuda),
            "all" => Ok(DevicesBackend::All),
            other => Err(format!(
                "--backend {}: must be one of vulkan, wgpu, cuda, all",
                crate::stdio::text(other)
            )),
        }
    }

    /// Whether Vulkan devices are listed.
    pub fn vulkan(self) -> bool {
        matches!(self, DevicesBackend::Vulkan | DevicesBackend::All)
    }

    /// Whether wgpu adapters are listed.
    pub fn wgpu(self) -> bool {
        matches!(self, DevicesBackend::Wgpu | DevicesBackend::All)
    }

    /// Whether CUDA devices are listed.
    pub fn cuda(self) -> bool {
        matches!(self, DevicesBackend::Cuda | DevicesBackend::All)
    }
}

/// Which backend `run` measures on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// A Vulkan device through gpu-counters-vulkan.
    Vulkan,
    /// A wgpu adapter through gpu-counters-wgpu.
    Wgpu,
    /// A CUDA device through gpu-counters-cuda.
    Cuda,
}

impl Backend {
    /// Parses `run --backend`'s value.
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "vulkan" => Ok(Backend::Vulkan),
            "wgpu" => Ok(Backend::Wgpu),
            "cuda" => Ok(Backend::Cuda),
            "all" => {
                Err("--backend all: `run` measures on one backend, vulkan, wgpu or cuda".into())
            }
            other => Err(format!(
                "--backend {}: must be one of vulkan, wgpu, cuda",
                crate::stdio::text(other)
            )),
        }
    }

    /// What one device of the backend is called in messages.
    pub fn device_noun(self) -> &'static str {
        match self {
            Backend::Vulkan => "device",
            Backend::Wgpu => "wgpu adapter",
            Backend::Cuda => "CUDA device",
        }
    }

    /// The devices the backend looks for, in "no ... found".
    pub fn devices_found(self) -> &'static str {
        match self {
            Backend::Vulkan => "Vulkan 1.3 devices",
            Backend::Wgpu => "wgpu adapters",
            Backend::Cuda => "CUDA devices",
        }
    }

    /// The command that lists the backend's devices with their indices.
    pub fn devices_command(self) -> &'static str {
        match self {
            Backend::Vulkan => "gpu-counters devices",
            Backend::Wgpu => "gpu-counters devices --backend wgpu",
            Backend::Cuda => "gpu-counters devices --backend cuda",
        }
    }

    /// What to install when the backend finds no device.
    pub fn install_hint(self) -> &'static str {
        match self {
            Backend::Vulkan | Backend::Wgpu => {
                "install a driver (apt-get install mesa-vulkan-drivers for lavapipe)"
            }
            Backend::Cuda => "the CUDA driver sees no GPU; check nvidia-smi",
        }
    }
}

/// The built-in workloads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum WorkloadName {
    /// One compute pass of D dispatches of W workgroups of S invocations.
    Compute,
    /// One render pass drawing T non-overlapping triangles.
    Render,
    /// A compute, a render and a copy (blit) pass per frame.
    Mixed,
}

impl WorkloadName {
    /// The name as typed on the command line and printed in reports.
    pub fn name(self) -> &'static str {
        match self {
            WorkloadName::Compute => "compute",
            WorkloadName::Render => "render",
            WorkloadName::Mixed => "mixed",
        }
    }
}

/// Default `--frames`.
pub const DEFAULT_FRAMES: u32 = 3;
/// Default `--dispatches`.
pub const DEFAULT_DISPATCHES: u32 = 4;
/// Default `--workgroups`.
pub const DEFAULT_WORKGROUPS: u32 = 512;
/// Default `--workgroup-size`.
pub const DEFAULT_WORKGROUP_SIZE: u32 = 64;
/// Default `--iterations`.
pub const DEFAULT_ITERATIONS: u32 = 3000;
/// Default `--triangles`.
pub const DEFAULT_TRIANGLES: u32 = 200_000;
/// Default `--width`.
pub const DEFAULT_WIDTH: u32 = 2048;
/// Default `--height`.
pub const DEFAULT_HEIGHT: u32 = 2048;
/// Default `--copy-bytes`: 128 MiB.
pub const DEFAULT_COPY_BYTES: u64 = 128 << 20;

/// Most `--frames`: every frame is a submission waited for, and its passes
/// are kept in memory for the report and the outputs (100000 frames of a
/// mixed run are 300000 intervals, some tens of MB of trace).
pub const MAX_FRAMES: u32 = 100_000;
/// Most `--dispatches`: each dispatch records a barrier and a dispatch into
/// the frame's one command buffer, whose memory grows with them (without a
/// limit `--dispatches 4000000000` grows it without end).
pub const MAX_DISPATCHES: u32 = 65_536;
/// Most kernel invocations per pass, D*W*S: they must fit in a `u32`, the
/// width of a 32-bit statistic counter.
pub const MAX_INVOCATIONS: u64 = u32::MAX as u64;
/// Most `--iterations`: every invocation runs them in a loop, and a longer
/// shader risks the driver's GPU timeout (device lost).
pub const MAX_ITERATIONS: u32 = 1_000_000;
/// Most `--triangles`: the draw's vertex count 3T is a `u32`.
pub const MAX_TRIANGLES: u32 = u32::MAX / 3;
/// Most indices a `--device` list may hold: each names a device, once.
pub const MAX_LISTED_DEVICES: usize = 256;

/// Options of `run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The workload.
    #[arg(value_enum)]
    pub workload: WorkloadName,

    /// Device index, as `gpu-counters devices` lists them (with `--backend
    /// wgpu`: the wgpu adapter's index, as `gpu-counters devices --backend
    /// wgpu` lists them; with `--backend cuda`: the CUDA device ordinal, as
    /// `gpu-counters devices --backend cuda` lists them) [default: the first
    /// hardware GPU, else the first device; on CUDA, device 0]. With vulkan
    /// or cuda, `all` or a list of at most 256 indices (0,1), each once, runs
    /// on several devices at once: one profiler per device (its own calibration and
    /// bound), one CPU timeline, one trace with a process per device
    /// (passes outside their CPU window ± their device's bound exit 1)
    // Parsed by `DeviceChoice::parse`, so a bad value is one `error:` line.
    #[arg(long, value_name = "N|N,M,...|all")]
    pub device: Option<String>,

    /// With several devices: each frame runs on the devices in turn, each
    /// device's submission once the host has seen the previous device's
    /// frame complete (a dependent cross-device sequence), and the run
    /// checks that each frame ends before the next one starts on the
    /// shared timeline, within the two devices' bounds (exit 1 if not)
    /// [default: each frame submitted on every device, then waited for]
    #[arg(long)]
    pub chain: bool,

    /// What to measure on: vulkan (gpu-counters-vulkan, the Vulkan
    /// encoders and command buffers), wgpu (gpu-counters-wgpu on a wgpu
    /// adapter, with the wgpu backends compiled in: Vulkan; each pass a
    /// profiled pass timed by its own timestamp writes and counted by its
    /// own statistics query; compute and render only, as wgpu cannot time
    /// or count a copy, and without fragments_passed, which wgpu does not
    /// count; device limits of the sizes are the adapter's wgpu limits of
    /// the same meaning) or cuda (gpu-counters-cuda on a CUDA device, the
    /// driver loaded at run time: compute only, as CUDA has no render
    /// pipeline and the copy pass is not measured on CUDA here; each
    /// dispatch a kernel launch on the device's stream, timed by
    /// %globaltimer kernels and counted, where CUPTI can be loaded, from
    /// CUPTI's launch callbacks; device limits are CUDA device attributes)
    /// [default: vulkan]
    // Parsed by `Backend::parse` rather than clap, so a bad value is one
    // `error:` line (exit 2) like every other bad input.
    #[arg(
        long,
        value_name = "BACKEND",
        default_value = "vulkan",
        hide_default_value = true
    )]
    pub backend: String,

    /// Frames to run; each is recorded into one command buffer (on wgpu:
    /// one command encoder; on CUDA: one recorder, a range of the stream's
    /// work), submitted and waited for. At most 100000.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_FRAMES)]
    pub frames: u32,

    /// Print one JSON object with the device, the workload, the calibration
    /// and every pass of every frame, instead of tables.
    #[arg(long)]
    pub json: bool,

    /// Write a Chrome trace (Perfetto UI, chrome://tracing) to FILE.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,

    /// Write a Perfetto protobuf trace (ui.perfetto.dev) to FILE.
    #[arg(long, value_name = "FILE")]
    pub perfetto: Option<PathBuf>,

    /// Write one CSV row per pass and frame to FILE.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,

    /// Write an SVG timeline picture to FILE.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,

    /// Workload sizes.
    #[command(flatten)]
    pub sizes: SizeArgs,
}

/// Workload sizes; each applies to the workloads named in its help.
#[derive(Debug, Args, Default)]
#[command(next_help_heading = "Workload sizes")]
pub struct SizeArgs {
    /// compute, mixed: dispatches per compute pass (D), at most 65536 (all
    /// are recorded into one command buffer) [default: 4]
    #[arg(long, value_name = "D")]
    pub dispatches: Option<u32>,

    /// compute, mixed: workgroups per dispatch (W), at most the device's
    /// maxComputeWorkGroupCount[0] (65535 or more; on CUDA,
    /// CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X) [default: 512]
    #[arg(long, value_name = "W")]
    pub workgroups: Option<u32>,

    /// compute, mixed: invocations per workgroup (S), at most the device's
    /// maxComputeWorkGroupSize[0] and maxComputeWorkGroupInvocations (128 or
    /// more; on CUDA, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X and
    /// MAX_THREADS_PER_BLOCK); kernel invocations per pass are D*W*S, at most
    /// 4294967295 (a u32), and the W*S*4-byte buffer must fit
    /// maxStorageBufferRange (on CUDA, the device's total memory)
    /// [default: 64]
    #[arg(long, value_name = "S")]
    pub workgroup_size: Option<u32>,

    /// compute, mixed: arithmetic steps per invocation, at most 1000000 (a
    /// longer shader risks the driver's GPU timeout) [default: 3000]
    #[arg(long, value_name = "N")]
    pub iterations: Option<u32>,

    /// render, mixed: triangles drawn (T); vertex invocations are 3T,
    /// clipper invocations T. At most 1431655765 (3T is a u32), and each
    /// needs a cell of 4x4 pixels of the target [default: 200000]
    #[arg(long, value_name = "T")]
    pub triangles: Option<u32>,

    /// render, mixed: color target width in pixels, at most the device's
    /// maxImageDimension2D, maxFramebufferWidth and maxViewportDimensions[0]
    /// (4096 or more) [default: 2048]
    #[arg(long, value_name = "PIXELS")]
    pub width: Option<u32>,

    /// render, mixed: color target height in pixels, at most the device's
    /// maxImageDimension2D, maxFramebufferHeight and maxViewportDimensions[1]
    /// (4096 or more) [default: 2048]
    #[arg(long, value_name = "PIXELS")]
    pub height: Option<u32>,

    /// mixed: bytes filled and copied by the copy (blit) pass, at most the
    /// device's largest device-local memory heap; K, M and G suffixes are
    /// powers of 1024 [default: 128M]
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes)]
    pub copy_bytes: Option<u64>,
}

/// Parses a byte count with an optional `K`, `M` or `G` suffix (powers of
/// 1024; `KiB`, `MiB`, `GiB` and `B` are accepted too).
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let upper = t.to_ascii_uppercase();
    let (digits, shift) = [
        ("GIB", 30),
        ("MIB", 20),
        ("KIB", 10),
        ("G", 30),
        ("M", 20),
        ("K", 10),
        ("B", 0),
    ]
    .iter()
    .find_map(|(suffix, shift)| upper.strip_suffix(suffix).map(|d| (d.trim(), *shift)))
    .unwrap_or((upper.as_str(), 0));
    let n: u64 = digits
        .parse()
        .map_err(|_| "not a byte count (e.g. 4096, 64K, 16M, 1G)".to_string())?;
    n.checked_mul(1u64 << shift)
        .ok_or_else(|| format!("over {} bytes", u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn help_states_the_defaults() {
        let cmd = Cli::command();
        let run = cmd.find_subcommand("run").expect("run");
        let help = |id: &str| {
            run.get_arguments()
                .find(|a| a.get_id() == id)
                .and_then(|a| a.get_help())
                .map(|h| h.to_string())
                .unwrap_or_default()
        };
        for (id, default) in [
            ("dispatches", DEFAULT_DISPATCHES.to_string()),
            ("workgroups", DEFAULT_WORKGROUPS.to_string()),
            ("workgroup_size", DEFAULT_WORKGROUP_SIZE.to_string()),
            ("iterations", DEFAULT_ITERATIONS.to_string()),
            ("triangles", DEFAULT_TRIANGLES.to_string()),
            ("width", DEFAULT_WIDTH.to_string()),
            ("height", DEFAULT_HEIGHT.to_string()),
            ("copy_bytes", format!("{}M", DEFAULT_COPY_BYTES >> 20)),
        ] {
            let h = help(id);
            assert!(h.contains(&format!("[default: {default}]")), "{id}: {h}");
        }
    }

    #[test]
    fn help_states_the_limits() {
        let cmd = Cli::command();
        let help = |sub: &str, id: &str| {
            cmd.find_subcommand(sub)
                .and_then(|c| c.get_arguments().find(|a| a.get_id() == id))
                .and_then(|a| a.get_help())
                .map(|h| h.to_string())
                .unwrap_or_default()
        };
        for (sub, id, limit) in [
            ("run", "frames", MAX_FRAMES.to_string()),
            ("run", "device", MAX_LISTED_DEVICES.to_string()),
            ("run", "dispatches", MAX_DISPATCHES.to_string()),
            ("run", "workgroup_size", MAX_INVOCATIONS.to_string()),
            ("run", "iterations", MAX_ITERATIONS.to_string()),
            ("run", "triangles", MAX_TRIANGLES.to_string()),
            ("run", "workgroups", "maxComputeWorkGroupCount[0]".into()),
            ("run", "width", "maxImageDimension2D".into()),
            ("run", "height", "maxImageDimension2D".into()),
            ("run", "copy_bytes", "device-local memory heap".into()),
            (
                "bench",
                "samples",
                gpu_counters_bench::MAX_SAMPLES.to_string(),
            ),
            ("bench", "reps", gpu_counters_bench::MAX_REPS.to_string()),
            (
                "bench",
                "wgpu_reps",
                gpu_counters_bench::MAX_REPS.to_string(),
            ),
            (
                "bench",
                "resolve_samples",
                gpu_counters_bench::MAX_RESOLVE_SAMPLES.to_string(),
            ),
            (
                "bench",
                "drift_seconds",
                gpu_counters_bench::MAX_DRIFT_SECONDS.to_string(),
            ),
            (
                "bench",
                "kernel_ns",
                gpu_counters_bench::MAX_KERNEL_NS.to_string(),
            ),
            (
                "bench",
                "backend",
                gpu_counters_bench::MAX_CUDA_SAMPLES.to_string(),
            ),
        ] {
            let h = help(sub, id);
            assert!(h.contains(&limit), "{sub} --{id}: `{limit}` not in {h}");
        }
    }

    /// The help of `sub --backend`.
    fn backend_help(sub: &str) -> String {
        Cli::command()
            .find_subcommand(sub)
            .and_then(|c| c.get_arguments().find(|a| a.get_id() == "backend"))
            .and_then(|a| a.get_help())
            .map(|h| h.to_string())
            .unwrap_or_default()
    }

    #[test]
    fn devices_backends() {
        assert_eq!(DevicesBackend::parse("vulkan"), Ok(DevicesBackend::Vulkan));
        assert_eq!(DevicesBackend::parse("wgpu"), Ok(DevicesBackend::Wgpu));
        assert_eq!(DevicesBackend::parse("cuda"), Ok(DevicesBackend::Cuda));
        assert_eq!(DevicesBackend::parse("all"), Ok(DevicesBackend::All));
        assert!(DevicesBackend::parse("metal")
            .is_err_and(|e| e == "--backend metal: must be one of vulkan, wgpu, cuda, all"));
        assert!(DevicesBackend::parse("CUDA").is_err());
        let listed = |b: DevicesBackend| (b.vulkan(), b.wgpu(), b.cuda());
        assert_eq!(listed(DevicesBackend::Vulkan), (true, false, false));
        assert_eq!(listed(DevicesBackend::Wgpu), (false, true, false));
        assert_eq!(listed(DevicesBackend::Cuda), (false, false, true));
        assert_eq!(listed(DevicesBackend::All), (true, true, true));
        let help = backend_help("devices");
        assert!(help.contains("[default: vulkan]"), "{help}");
        assert!(help.contains("vulkan, wgpu, cuda or all"), "{help}");
    }

    #[test]
    fn run_backends() {
        assert_eq!(Backend::parse("vulkan"), Ok(Backend::Vulkan));
        assert_eq!(Backend::parse("wgpu"), Ok(Backend::Wgpu));
        assert_eq!(Backend::parse("cuda"), Ok(Backend::Cuda));
        assert!(Backend::parse("all").is_err_and(|e| e.starts_with("--backend all:")));
        assert!(Backend::parse("metal")
            .is_err_and(|e| e == "--backend metal: must be one of vulkan, wgpu, cuda"));
        assert_eq!(Backend::Cuda.device_noun(), "CUDA device");
        assert_eq!(
            Backend::Cuda.devices_command(),
            "gpu-counters devices --backend cuda"
        );
        assert!(Backend::parse("metal").is_err_and(|e| e.starts_with("--backend metal:")));
        let help = backend_help("run");
        assert!(help.contains("[default: vulkan]"), "{help}");
        assert!(help.contains("cuda (gpu-counters-cuda"), "{help}");
        assert!(help.contains("compute only"), "{help}");
    }

    #[test]
    fn byte_counts() {
        assert_eq!(parse_bytes("4096"), Ok(4096));
        assert_eq!(parse_bytes("64K"), Ok(64 << 10));
        assert_eq!(parse_bytes("16MiB"), Ok(16 << 20));
        assert_eq!(parse_bytes("1g"), Ok(1 << 30));
        assert_eq!(parse_bytes("0"), Ok(0));
        assert!(parse_bytes("x").is_err());
        assert!(parse_bytes("99999999999999G").is_err());
    }
}
