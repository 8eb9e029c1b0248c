//! Shared set-up and helpers of the wgpu backend's lavapipe tests: a device
//! on lavapipe with wgpu's validation (and the Khronos validation layer
//! where installed) on, and the buffers, kernels and passes the tests share.
//! Each test binary uses some of them.
#![allow(dead_code, unused_imports)]

pub use gpu_counters_hal::{
    cpu_monotonic_ns, BackendDevice, BackendRecorder, CalibrationMethod, CommonCounterSet,
    CounterSampleBufferDescriptor, Error, InvalidInput, SampleStatus, SampleValue,
    TimestampGranularity, COUNTER_ERROR_VALUE,
};
pub use gpu_counters_wgpu::{CounterSampleBuffer, Device};
pub use std::sync::{Arc, Mutex, Once, OnceLock};

/// Validation messages logged at error level by wgpu (the Vulkan debug
/// messenger's errors come through `log`).
pub static LOGGED: Mutex<Vec<String>> = Mutex::new(Vec::new());

pub struct Collect;

impl log::Log for Collect {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        m.level() <= log::Level::Error
    }
    fn log(&self, r: &log::Record<'_>) {
        if self.enabled(r.metadata()) {
            LOGGED
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(format!("{}: {}", r.target(), r.args()));
        }
    }
    fn flush(&self) {}
}

/// A device and its captured errors.
pub struct Gpu {
    pub device: Device,
    pub errors: Arc<Mutex<Vec<String>>>,
}

impl Gpu {
    /// Fails on any uncaptured wgpu error or logged validation error.
    pub fn check(&self) {
        let errors = self.errors.lock().unwrap().clone();
        let logged = LOGGED.lock().unwrap_or_else(|p| p.into_inner()).clone();
        assert!(
            errors.is_empty() && logged.is_empty(),
            "validation errors: {errors:?} {logged:?}"
        );
    }
}

/// The features the tests use.
pub fn wanted() -> wgpu::Features {
    wgpu::Features::TIMESTAMP_QUERY
        | wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS
        | wgpu::Features::TIMESTAMP_QUERY_INSIDE_PASSES
        | wgpu::Features::PIPELINE_STATISTICS_QUERY
}

/// A device on the first Vulkan adapter (lavapipe on CI) with `features`
/// (restricted to what the adapter has).
pub fn gpu_with(features: impl FnOnce(wgpu::Features) -> wgpu::Features) -> Gpu {
    gpu_opened(features, false)
}

/// As [`gpu_with`]; `calibrated`: through [`Device::request`] (which
/// enables the calibrated-timestamps extension), else wgpu's plain
/// `request_device`.
pub fn gpu_opened(
    features: impl FnOnce(wgpu::Features) -> wgpu::Features,
    calibrated: bool,
) -> Gpu {
    static LOGGER: Once = Once::new();
    LOGGER.call_once(|| {
        if log::set_logger(&Collect).is_ok() {
            log::set_max_level(log::LevelFilter::Error);
        }
    });
    let adapter = shared_adapter();
    let have = adapter.features();
    let features = features(have) & have;
    let desc = wgpu::DeviceDescriptor {
        label: Some("gpu-counters-wgpu test"),
        required_features: features,
        required_limits: wgpu::Limits::default(),
        ..Default::default()
    };
    let device = if calibrated {
        pollster::block_on(Device::request(adapter, &desc)).expect("Device::request")
    } else {
        let (device, queue) =
            pollster::block_on(adapter.request_device(&desc)).expect("request_device");
        Device::new(device, queue, adapter.get_info())
    };
    let errors = Arc::new(Mutex::new(Vec::new()));
    let sink = errors.clone();
    device
        .device()
        .on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
            sink.lock().unwrap().push(e.to_string());
        }));
    Gpu { device, errors }
}

/// One wgpu instance and adapter for the whole test binary, created once.
/// With one instance per test, 14 threads creating instances and enumerating
/// adapters at once died with SIGSEGV at start-up on CI (once; not reproduced
/// in 200 local runs), inside the loader's implicit layers (Mesa's
/// device-select layer connects to the display server during enumeration).
/// Devices, which the tests are about, are still one per test, in parallel.
pub fn shared_adapter() -> &'static wgpu::Adapter {
    static ADAPTER: OnceLock<wgpu::Adapter> = OnceLock::new();
    ADAPTER.get_or_init(|| {
        let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
        desc.backends = wgpu::Backends::VULKAN;
        // Not DEBUG: naga then writes OpSource with WGSL (10), which the
        // installed validation layer's SPIR-V validator does not know.
        desc.flags = wgpu::InstanceFlags::VALIDATION;
        let instance = wgpu::Instance::new(desc);
        let adapters = pollster::block_on(instance.enumerate_adapters(wgpu::Backends::VULKAN));
        adapters
            .iter()
            .find(|a| a.get_info().device_type == wgpu::DeviceType::Cpu)
            .or(adapters.first())
            .expect("no Vulkan adapter (is lavapipe installed?)")
            .clone()
    })
}

pub fn gpu() -> Gpu {
    gpu_with(|have| have & wanted())
}

/// [`gpu`], where it has timestamps (pass timestamp writes); else `None`,
/// and the test says it skipped.
pub fn timestamp_gpu() -> Option<Gpu> {
    let gpu = gpu();
    if gpu
        .device
        .features()
        .contains(wgpu::Features::TIMESTAMP_QUERY)
    {
        return Some(gpu);
    }
    eprintln!("skipped: the adapter lacks wgpu::Features::TIMESTAMP_QUERY");
    None
}

pub fn timestamps(d: &Device, n: u32) -> CounterSampleBuffer {
    d.make_counter_sample_buffer(&CounterSampleBufferDescriptor::new(
        CommonCounterSet::Timestamp,
        "timestamps",
        n,
    ))
    .unwrap()
}

pub const SHADER: &str = "
@group(0) @binding(0) var<storage, read_write> data: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    data[id.x] = data[id.x] * 3u + id.x;
}
";

/// A kernel of `@workgroup_size(S)` (S up to 64) writing nothing out of
/// range: its invocations are what the statistics count.
pub fn kernel(size: u32) -> String {
    format!(
        "
@group(0) @binding(0) var<storage, read_write> data: array<atomic<u32>>;
@compute @workgroup_size({size})
fn main() {{
    atomicAdd(&data[0], 1u);
}}
"
    )
}

pub fn statistics(d: &Device, n: u32) -> CounterSampleBuffer {
    d.make_counter_sample_buffer(&CounterSampleBufferDescriptor::new(
        CommonCounterSet::Statistic,
        "pass statistics",
        n,
    ))
    .unwrap()
}

/// Asserts that profiler scope `s` lies inside the CPU window
/// `before..after` that brackets its submission, give or take its bound.
pub fn assert_inside_window(s: &gpu_counters_profiler::ScopeResult, before: u64, after: u64) {
    assert!(
        s.start_ns + s.error_bound_ns >= before && s.end_ns <= after + s.error_bound_ns,
        "{s:?} outside {before}..{after}"
    );
}

/// Records an empty compute pass on `rec` whose timestamp writes are
/// `buffer[start]` and `buffer[start + 1]`.
pub fn timed_pass(
    rec: &mut gpu_counters_wgpu::Recorder,
    buffer: &CounterSampleBuffer,
    start: u32,
) -> gpu_counters_hal::Result<()> {
    let w = rec.compute_pass_timestamp_writes(buffer, Some(start), Some(start + 1))?;
    drop(
        rec.encoder()
            .begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: None,
                timestamp_writes: Some(w),
            }),
    );
    Ok(())
}
