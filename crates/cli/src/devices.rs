//! `gpu-counters devices`: every Vulkan device (and, with `--backend wgpu`,
//! `cuda` or `all`, every wgpu adapter or CUDA device) and what it can
//! sample.

use crate::cli::{DevicesArgs, DevicesBackend};
use crate::error::{CliError, CliResult};
use crate::stdio::{errln, outln};
use gpu_counters_cuda::hardware::REQUIRED_METRICS;
use gpu_counters_cuda::{self as gcu, MetricInfo, OpenError};
use gpu_counters_hal::{CommonCounterSet, DeviceInfo};
use gpu_counters_vulkan::{Instance, InstanceOptions};
use gpu_counters_wgpu as gcw;
use serde_json::{json, Value};

/// A device's JSON form: [`DeviceInfo`]'s serde form with a `name` on each
/// counter set (`timestamp`, `statistic`, ...) and `default` marking the
/// device `run` picks without `--device` (on the device's backend: `run
/// --backend wgpu` for a wgpu adapter).
pub fn device_json(info: &DeviceInfo, is_default: bool) -> Value {
    let mut v = serde_json::to_value(info).unwrap_or_else(|_| json!({}));
    if let Some(obj) = v.as_object_mut() {
        obj.insert(
            "counter_sets".into(),
            Value::Array(
                info.counter_sets
                    .iter()
                    .map(|s| {
                        json!({
                            "name": s.name(),
                            "counters": s.counters.iter().map(|c| c.name()).collect::<Vec<_>>(),
                        })
                    })
                    .collect(),
            ),
        );
        obj.insert(
            "sampling_points".into(),
            Value::Array(
                info.sampling_points
                    .iter()
                    .map(|p| Value::from(p.name()))
                    .collect(),
            ),
        );
        obj.insert("default".into(), Value::Bool(is_default));
    }
    v
}

/// The instance's devices and the index of the default one (`None` when there
/// are no devices).
pub fn list(instance: &Instance) -> CliResult<(Vec<DeviceInfo>, Option<usize>)> {
    let devices = instance.devices()?;
    let default = if devices.is_empty() {
        None
    } else {
        Some(instance.default_device_index()?)
    };
    Ok((devices, default))
}

/// Fails with every validation message the instance captured, if any.
pub fn check_validation(instance: &Instance) -> CliResult<()> {
    match print_validation(instance) {
        0 => Ok(()),
        n => Err(CliError::Failure(format!(
            "the Vulkan validation layer reported {n} message{} (printed above)",
            if n == 1 { "" } else { "s" }
        ))),
    }
}

/// Prints every validation message the instance captured to stderr and
/// returns how many there were (a message that cannot be written is
/// dropped; it still counts).
pub fn print_validation(instance: &Instance) -> usize {
    let messages = instance.validation_messages();
    for m in &messages {
        errln!("validation: {m}");
    }
    messages.len()
}

/// A wgpu adapter opened as a gpu-counters device.
pub struct WgpuAdapter {
    /// The device's [`DeviceInfo`] (`backend` is `wgpu`), `index` its
    /// position among the adapters.
    pub info: DeviceInfo,
    /// The adapter's wgpu backend (`vulkan`, `metal`, ...).
    pub wgpu_backend: &'static str,
    /// Whether `run --backend wgpu` picks it without `--device`.
    pub is_default: bool,
}

/// The features gpu-counters-wgpu uses, requested where the adapter has them.
pub fn wgpu_features() -> wgpu::Features {
    wgpu::Features::TIMESTAMP_QUERY
        | wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS
        | wgpu::Features::PIPELINE_STATISTICS_QUERY
}

/// wgpu's logged errors (its validation-layer messages among them, while
/// validation is on) and the errors of its devices that no error scope
/// caught.
static WGPU_LOGGED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// Keeps `message` in [`WGPU_LOGGED`].
fn wgpu_logged(message: String) {
    WGPU_LOGGED
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(message);
}

/// Keeps wgpu's error-level log records in [`WGPU_LOGGED`].
struct WgpuLog;

impl log::Log for WgpuLog {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        m.level() <= log::Level::Error
    }
    fn log(&self, r: &log::Record<'_>) {
        if self.enabled(r.metadata()) {
            wgpu_logged(format!("{}: {}", r.target(), r.args()));
        }
    }
    fn flush(&self) {}
}

/// A wgpu instance of the backends compiled in (Vulkan). Under
/// `GPU_COUNTERS_VALIDATION=1` it runs with wgpu's validation (the Khronos
/// layer where installed), and wgpu's logged errors are kept for
/// [`check_wgpu_validation`].
pub fn wgpu_instance() -> wgpu::Instance {
    let validation = std::env::var(gpu_counters_vulkan::VALIDATION_ENV).is_ok_and(|v| v == "1");
    let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
    desc.backends = wgpu::Backends::all();
    desc.flags = if validation {
        if log::set_logger(&WgpuLog).is_ok() {
            log::set_max_level(log::LevelFilter::Error);
        }
        wgpu::InstanceFlags::VALIDATION
    } else {
        wgpu::InstanceFlags::empty()
    };
    wgpu::Instance::new(desc)
}

/// The instance's adapters, in the order `devices --backend wgpu` lists
/// them and `run --backend wgpu --device N` counts them.
pub fn wgpu_adapters(instance: &wgpu::Instance) -> Vec<wgpu::Adapter> {
    pollster::block_on(instance.enumerate_adapters(wgpu::Backends::all()))
}

/// The adapter `run --backend wgpu` picks without `--device`, as for Vulkan
/// devices: the first hardware GPU, else the first adapter.
pub fn default_wgpu_adapter(adapters: &[wgpu::Adapter]) -> Option<usize> {
    if adapters.is_empty() {
        return None;
    }
    Some(
        adapters
            .iter()
            .position(|a| {
                matches!(
                    a.get_info().device_type,
                    wgpu::DeviceType::DiscreteGpu
                        | wgpu::DeviceType::IntegratedGpu
                        | wgpu::DeviceType::VirtualGpu
                )
            })
            .unwrap_or(0),
    )
}

/// Opens adapter `index` with the features of [`wgpu_features`] it offers
/// and `limits`, wrapped by [`gcw::Device::request`]
/// (`info.index` is set to `index`). wgpu errors no error scope catches are
/// kept for [`check_wgpu_validation`] rather than panicking.
pub fn open_wgpu(
    adapter: &wgpu::Adapter,
    index: usize,
    limits: wgpu::Limits,
) -> CliResult<(gcw::Device, DeviceInfo)> {
    let desc = wgpu::DeviceDescriptor {
        label: Some("gpu-counters"),
        required_features: adapter.features() & wgpu_features(),
        required_limits: limits,
        ..Default::default()
    };
    let device = pollster::block_on(gcw::Device::request(adapter, &desc)).map_err(|e| {
        CliError::Failure(format!(
            "wgpu adapter [{index}] `{}`: request_device: {e}",
            adapter.get_info().name
        ))
    })?;
    device
        .device()
        .on_uncaptured_error(std::sync::Arc::new(|e: wgpu::Error| {
            wgpu_logged(format!("wgpu error: {e}"))
        }));
    let mut info = device.info().clone();
    info.index = index;
    Ok((device, info))
}

/// Prints (and forgets) every wgpu error kept so far to stderr and returns
/// how many there were (a message that cannot be written is dropped; it
/// still counts).
pub fn print_wgpu_validation() -> usize {
    let logged = std::mem::take(&mut *WGPU_LOGGED.lock().unwrap_or_else(|p| p.into_inner()));
    for m in &logged {
        errln!("validation: {m}");
    }
    logged.len()
}

/// Fails with every wgpu error kept so far, if any.
pub fn check_wgpu_validation() -> CliResult<()> {
    match print_wgpu_validation() {
        0 => Ok(()),
        n => Err(CliError::Failure(format!(
            "wgpu's validation reported {n} error{} (printed above)",
            if n == 1 { "" } else { "s" }
        ))),
    }
}

/// Every wgpu adapter of the backends compiled in (Vulkan), each opened as
/// [`open_wgpu`] opens it (with wgpu's default limits). Under
/// `GPU_COUNTERS_VALIDATION=1` any error wgpu logs fails the command.
pub fn list_wgpu() -> CliResult<Vec<WgpuAdapter>> {
    let instance = wgpu_instance();
    let adapters = wgpu_adapters(&instance);
    let default = default_wgpu_adapter(&adapters);
    let mut out = Vec::with_capacity(adapters.len());
    for (index, adapter) in adapters.iter().enumerate() {
        let (_device, info) = open_wgpu(adapter, index, wgpu::Limits::default())?;
        out.push(WgpuAdapter {
            info,
            wgpu_backend: adapter.get_info().backend.to_str(),
            is_default: Some(index) == default,
        });
    }
    drop(adapters);
    drop(instance);
    check_wgpu_validation()?;
    Ok(out)
}

/// A wgpu adapter's JSON form: [`device_json`] (`default`: the adapter
/// `run --backend wgpu` picks without `--device`) with `wgpu_backend` added.
pub fn wgpu_json(a: &WgpuAdapter) -> Value {
    let mut v = device_json(&a.info, a.is_default);
    if let Some(obj) = v.as_object_mut() {
        obj.insert("wgpu_backend".into(), Value::from(a.wgpu_backend));
    }
    v
}

/// A device's JSON form `v` with `statistics_unavailable` added where its
/// backend says why it offers no statistic set (`why`).
pub fn with_statistics_unavailable(mut v: Value, why: Option<&str>) -> Value {
    if let (Some(obj), Some(why)) = (v.as_object_mut(), why) {
        obj.insert("statistics_unavailable".into(), Value::from(why));
    }
    v
}

/// A CUDA device opened as a gpu-counters device.
pub struct CudaListed {
    /// The device's [`DeviceInfo`] (`backend` is `cuda`, `index` its
    /// ordinal).
    pub info: DeviceInfo,
    /// Why it offers no statistic set (no CUPTI, ...), where it does not.
    pub statistics_unavailable: Option<String>,
    /// Its hardware counter set, where offered: the chip, how many base
    /// metrics it has, and the required metrics described.
    pub hardware: Result<CudaHardware, String>,
}

/// What `devices` shows of a CUDA device's hardware counter set.
pub struct CudaHardware {
    /// CUPTI's chip name (`GH100`, ...).
    pub chip: String,
    /// How many base metrics the chip offers.
    pub base_metrics: usize,
    /// [`REQUIRED_METRICS`], each as the device describes it (or why not).
    pub metrics: Vec<Result<MetricInfo, String>>,
}

/// A device's hardware counter set as `devices` shows it, or why it has
/// none.
fn cuda_hardware(device: &gcu::Device) -> Result<CudaHardware, String> {
    let hw = device.hardware_counters().map_err(|e| {
        device
            .hardware_counters_unavailable()
            .map_or_else(|| e.to_string(), str::to_string)
    })?;
    Ok(CudaHardware {
        chip: hw.chip().to_string(),
        base_metrics: hw.base_metrics().map_err(|e| e.to_string())?.len(),
        metrics: REQUIRED_METRICS
            .iter()
            .map(|m| hw.metric(m).map_err(|e| e.to_string()))
            .collect(),
    })
}

/// The CUDA device `run --backend cuda` picks without `--device`.
pub const DEFAULT_CUDA_DEVICE: usize = 0;

/// Why a CUDA device could not be listed or opened, as the command's error
/// (exit 1): the [`OpenError`]'s message, e.g. `no CUDA driver: ...`.
pub fn cuda_error(e: OpenError) -> CliError {
    CliError::Failure(e.to_string())
}

/// Every CUDA device, each opened with statistics and hardware counters
/// asked for, so that the list says what each offers (statistics from CUPTI
/// where it can be loaded).
pub fn list_cuda() -> Result<Vec<CudaListed>, OpenError> {
    let options = gcu::DeviceOptions {
        statistics: true,
        hardware_counters: true,
        ..gcu::DeviceOptions::default()
    };
    (0..gpu_counters_cuda::device_count()?)
        .map(|ordinal| {
            let device = gcu::Device::open_with(ordinal, &options)?;
            Ok(CudaListed {
                info: device.info().clone(),
                statistics_unavailable: device.statistics_unavailable().map(str::to_string),
                hardware: cuda_hardware(&device),
            })
        })
        .collect()
}

/// A CUDA device's JSON form: [`device_json`] (`default`: the device `run
/// --backend cuda` picks without `--device`) with `statistics_unavailable`
/// where the statistic set is absent.
pub fn cuda_json(d: &CudaListed) -> Value {
    let mut v = with_statistics_unavailable(
        device_json(&d.info, d.info.index == DEFAULT_CUDA_DEVICE),
        d.statistics_unavailable.as_deref(),
    );
    if let Some(obj) = v.as_object_mut() {
        match &d.hardware {
            Ok(h) => {
                obj.insert(
                    "hardware_counters".into(),
                    json!({
                        "chip": h.chip,
                        "base_metrics": h.base_metrics,
                        "metrics": h.metrics.iter().zip(REQUIRED_METRICS).map(|(m, name)| match m {
                            Ok(i) => json!({
                                "name": i.name,
                                "kind": i.kind.name(),
                                "unit": i.unit,
                                "passes": i.passes,
                                "description": i.description,
                            }),
                            Err(why) => json!({ "name": name, "error": why }),
                        }).collect::<Vec<_>>(),
                    }),
                );
            }
            Err(why) => {
                obj.insert(
                    "hardware_counters_unavailable".into(),
                    Value::from(why.as_str()),
                );
            }
        }
    }
    v
}

/// The CUDA devices `backend` lists: `None` where it lists none, or where
/// it lists all backends and there is no CUDA driver (a note on stderr
/// says so); any other error fails the command.
fn cuda_for(backend: DevicesBackend) -> CliResult<Option<Vec<CudaListed>>> {
    if !backend.cuda() {
        return Ok(None);
    }
    match list_cuda() {
        Ok(listed) => Ok(Some(listed)),
        Err(e @ OpenError::NoDriver { .. }) if backend == DevicesBackend::All => {
            errln!("note: CUDA devices not listed: {e}");
            Ok(None)
        }
        Err(e) => Err(cuda_error(e)),
    }
}

/// Runs `gpu-counters devices`.
pub fn run(args: &DevicesArgs) -> CliResult<()> {
    let backend = DevicesBackend::parse(&args.backend).map_err(CliError::Usage)?;
    let vulkan = if backend.vulkan() {
        let instance = Instance::new(&InstanceOptions::default())?;
        let listed = list(&instance)?;
        check_validation(&instance)?;
        Some(listed)
    } else {
        None
    };
    let wgpu = if backend.wgpu() {
        Some(list_wgpu()?)
    } else {
        None
    };
    let cuda = cuda_for(backend)?;
    if args.json {
        let mut list: Vec<Value> = Vec::new();
        if let Some((devices, default)) = &vulkan {
            list.extend(
                devices
                    .iter()
                    .map(|d| device_json(d, Some(d.index) == *default)),
            );
        }
        if let Some(adapters) = &wgpu {
            list.extend(adapters.iter().map(wgpu_json));
        }
        if let Some(devices) = &cuda {
            list.extend(devices.iter().map(cuda_json));
        }
        let out = json!({ "devices": list });
        outln!(
            "{}",
            serde_json::to_string_pretty(&out).map_err(|e| CliError::Failure(e.to_string()))?
        )?;
        return Ok(());
    }
    if let Some((devices, default)) = &vulkan {
        print_vulkan(devices, *default)?;
    }
    if let Some(adapters) = &wgpu {
        if vulkan.is_some() {
            outln!()?;
        }
        print_wgpu(adapters)?;
    }
    if let Some(devices) = &cuda {
        if vulkan.is_some() || wgpu.is_some() {
            outln!()?;
        }
        print_cuda(devices)?;
    }
    Ok(())
}

/// Prints one backend's devices: `none` where there are none, else a
/// header counting them (`noun`, with an `s` for several; `how` in
/// parentheses) and each device as `print` prints it, after a blank line.
fn print_listing<T>(
    items: &[T],
    none: &str,
    noun: &str,
    how: &str,
    print: impl Fn(&T) -> CliResult<()>,
) -> CliResult<()> {
    if items.is_empty() {
        return outln!("{none}");
    }
    outln!(
        "{} {noun}{} ({how}):",
        items.len(),
        if items.len() == 1 { "" } else { "s" }
    )?;
    for item in items {
        outln!()?;
        print(item)?;
    }
    Ok(())
}

/// Prints the CUDA devices, each with why it offers no statistics where
/// it does not.
fn print_cuda(devices: &[CudaListed]) -> CliResult<()> {
    print_listing(
        devices,
        "No CUDA device found.",
        "CUDA device",
        "through gpu-counters-cuda; * = default, used by `run --backend cuda` without --device",
        |d| {
            print_device(&d.info, d.info.index == DEFAULT_CUDA_DEVICE)?;
            if let Some(why) = &d.statistics_unavailable {
                outln!("    {:<16}not available: {why}", "statistics")?;
            }
            match &d.hardware {
                Ok(h) => {
                    outln!(
                        "    {:<16}{}: {} base metrics (CUPTI range profiler), e.g.",
                        "hardware",
                        h.chip,
                        h.base_metrics
                    )?;
                    for (m, name) in h.metrics.iter().zip(REQUIRED_METRICS) {
                        match m {
                            Ok(i) => outln!(
                                "    {:<16}{name}: {}, {} pass{}",
                                "",
                                i.unit,
                                i.passes,
                                if i.passes == 1 { "" } else { "es" }
                            )?,
                            Err(why) => outln!("    {:<16}{name}: {why}", "")?,
                        }
                    }
                }
                Err(why) => outln!("    {:<16}not available: {why}", "hardware")?,
            }
            Ok(())
        },
    )
}

/// Prints the Vulkan devices.
fn print_vulkan(devices: &[DeviceInfo], default: Option<usize>) -> CliResult<()> {
    print_listing(
        devices,
        "No Vulkan 1.3 device found.",
        "Vulkan device",
        "* = default, used by `run` without --device",
        |d| print_device(d, Some(d.index) == default),
    )
}

/// Prints the wgpu adapters.
fn print_wgpu(adapters: &[WgpuAdapter]) -> CliResult<()> {
    print_listing(
        adapters,
        "No wgpu adapter found.",
        "wgpu adapter",
        "through gpu-counters-wgpu; * = default, used by `run --backend wgpu` without --device",
        |a| {
            print_device(&a.info, a.is_default)?;
            outln!("    {:<16}{}", "wgpu backend", a.wgpu_backend)
        },
    )
}

/// Prints one device as an indented listing.
pub fn print_device(d: &DeviceInfo, is_default: bool) -> CliResult<()> {
    let mark = if is_default { "*" } else { " " };
    outln!("{mark} [{}] {}", d.index, d.name)?;
    let rows: Vec<(&str, String)> = vec![
        ("type", serde_plain(&d.device_type)),
        (
            "api",
            format!("{} {}", serde_plain(&d.backend), d.api_version),
        ),
        ("driver", d.driver.clone()),
        (
            "timestamps",
            if d.counter_set(CommonCounterSet::Timestamp).is_some() {
                format!(
                    "{} ns per tick, {} valid bits",
                    trim_float(d.timestamp_period_ns),
                    d.timestamp_valid_bits
                )
            } else {
                "none".into()
            },
        ),
        ("calibration", d.calibration.name().to_string()),
        (
            "counter sets",
            if d.counter_sets.is_empty() {
                "none".into()
            } else {
                d.counter_sets
                    .iter()
                    .map(|s| s.name())
                    .collect::<Vec<_>>()
                    .join(", ")
            },
        ),
    ];
    for (k, v) in rows {
        outln!("    {k:<16}{v}")?;
    }
    for s in &d.counter_sets {
        let names: Vec<&str> = s.counters.iter().map(|c| c.name()).collect();
        // `stage_utilization` is longer than the column: a space after it.
        outln!("    {:<16}{}", format!("  {} ", s.name()), names.join(", "))?;
    }
    let points: Vec<&str> = d.sampling_points.iter().map(|p| p.name()).collect();
    outln!(
        "    {:<16}{}",
        "sampling points",
        if points.is_empty() {
            "none".into()
        } else {
            points.join(", ")
        }
    )?;
    outln!(
        "    {:<16}{} per counter sample buffer",
        "max samples",
        d.max_sample_count
    )
}

/// A unit enum's serde name (`discrete_gpu`, `vulkan`), for printing.
fn serde_plain<T: serde::Serialize>(v: &T) -> String {
    match serde_json::to_value(v) {
        Ok(Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => String::from("?"),
    }
}

/// A float without a trailing `.0` where it is whole.
fn trim_float(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}
