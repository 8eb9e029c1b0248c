//! Shared set-up of the `gpu_counters::wgpu::Profiler` tests: an application
//! on lavapipe with wgpu's validation and the Khronos validation layer on,
//! a profiler over it, and the assertions the tests share. Each test binary
//! uses some of them.
#![allow(dead_code, unused_imports)]

pub use gpu_counters::wgpu::{ProfiledFrame, Profiler, ProfilerSettings};
pub use gpu_counters::{cpu_monotonic_ns, Error, InvalidInput, ScopeResult};
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

/// The application's device and queue, a compute pipeline doubling a
/// buffer of `u32`s (64 invocations a workgroup), and captured errors.
pub struct App {
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    pub pipeline: wgpu::ComputePipeline,
    pub bind: wgpu::BindGroup,
    pub data: wgpu::Buffer,
    pub scratch: wgpu::Buffer,
    pub errors: Arc<Mutex<Vec<String>>>,
}

impl App {
    /// Fails on any uncaptured wgpu error or logged validation error.
    pub fn check(&self) {
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .expect("poll");
        let errors = self.errors.lock().unwrap().clone();
        let logged = LOGGED.lock().unwrap_or_else(|p| p.into_inner()).clone();
        assert!(
            errors.is_empty() && logged.is_empty(),
            "validation errors: {errors:?} {logged:?}"
        );
    }

    pub fn encoder(&self, label: &str) -> wgpu::CommandEncoder {
        self.device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some(label) })
    }

    /// `groups` workgroups of the doubling kernel into `pass`.
    pub fn dispatch(&self, pass: &mut wgpu::ComputePass<'_>, groups: u32) {
        pass.set_pipeline(&self.pipeline);
        pass.set_bind_group(0, &self.bind, &[]);
        pass.dispatch_workgroups(groups, 1, 1);
    }

    /// Waits for the GPU and collects every frame ended so far.
    pub fn collect(&self, profiler: &Profiler) -> Vec<ProfiledFrame> {
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .expect("poll");
        profiler.collect().expect("collect")
    }
}

/// One wgpu adapter for the whole test binary (lavapipe where present).
pub fn shared_adapter() -> &'static wgpu::Adapter {
    static ADAPTER: OnceLock<wgpu::Adapter> = OnceLock::new();
    ADAPTER.get_or_init(|| {
        let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
        desc.backends = wgpu::Backends::VULKAN;
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

/// An application device with `features` (those the adapter has).
pub fn app_with(features: wgpu::Features) -> App {
    static LOGGER: Once = Once::new();
    LOGGER.call_once(|| {
        if log::set_logger(&Collect).is_ok() {
            log::set_max_level(log::LevelFilter::Error);
        }
    });
    let adapter = shared_adapter();
    let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
        label: Some("drop-in test"),
        required_features: features & adapter.features(),
        ..Default::default()
    }))
    .expect("request_device");
    let errors = Arc::new(Mutex::new(Vec::new()));
    let sink = errors.clone();
    device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
        sink.lock().unwrap().push(e.to_string());
    }));
    let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some("double"),
        source: wgpu::ShaderSource::Wgsl(
            "@group(0) @binding(0) var<storage, read_write> data: array<u32>;
             @compute @workgroup_size(64)
             fn main(@builtin(global_invocation_id) id: vec3<u32>) {
                 if (id.x < arrayLength(&data)) { data[id.x] = data[id.x] * 2u; }
             }"
            .into(),
        ),
    });
    let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some("double"),
        layout: None,
        module: &module,
        entry_point: Some("main"),
        compilation_options: Default::default(),
        cache: None,
    });
    let data = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("data"),
        size: 4 * 1024,
        usage: wgpu::BufferUsages::STORAGE
            | wgpu::BufferUsages::COPY_SRC
            | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let scratch = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("scratch"),
        size: 4 * 1024,
        usage: wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let bind = device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: Some("double"),
        layout: &pipeline.get_bind_group_layout(0),
        entries: &[wgpu::BindGroupEntry {
            binding: 0,
            resource: data.as_entire_binding(),
        }],
    });
    App {
        device,
        queue,
        pipeline,
        bind,
        data,
        scratch,
        errors,
    }
}

/// The features a wgpu-profiler user turns on.
pub fn features() -> wgpu::Features {
    wgpu::Features::TIMESTAMP_QUERY
        | wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS
        | wgpu::Features::PIPELINE_STATISTICS_QUERY
}

/// An app with [`features`] and a profiler on it with default settings;
/// `None` (the test says it skipped) where the adapter lacks them.
pub fn setup() -> Option<(App, Profiler)> {
    let app = app_with(features());
    if !app.device.features().contains(features()) {
        eprintln!(
            "skipped: the adapter lacks {features:?}",
            features = features()
        );
        return None;
    }
    let profiler =
        Profiler::new(&app.device, &app.queue, ProfilerSettings::default()).expect("profiler");
    Some((app, profiler))
}

/// Asserts that every scope lies inside the CPU window `before..after`
/// (submission to completion) within its bound, and inside its parent.
pub fn assert_inside(scopes: &[ScopeResult], before: u64, after: u64) {
    for s in scopes {
        assert!(
            s.start_ns + s.error_bound_ns >= before && s.end_ns <= after + s.error_bound_ns,
            "`{}` {}..{} ± {} outside the CPU window {before}..{after}",
            s.label,
            s.start_ns,
            s.end_ns,
            s.error_bound_ns
        );
        assert!(s.start_ns <= s.end_ns && s.duration_ns == s.end_ns - s.start_ns);
        if let Some(p) = s.parent {
            let p = &scopes[p];
            let slack = s.error_bound_ns + p.error_bound_ns;
            assert!(
                s.start_ns + slack >= p.start_ns && s.end_ns <= p.end_ns + slack,
                "`{}` is not inside its parent `{}`",
                s.label,
                p.label
            );
            assert_eq!(s.depth, p.depth + 1);
        } else {
            assert_eq!(s.depth, 0);
        }
    }
}

pub fn labels(frame: &ProfiledFrame) -> Vec<&str> {
    frame.scopes().iter().map(|s| s.label.as_str()).collect()
}
