//! The wgpu backend on lavapipe, through wgpu's Vulkan backend, with wgpu's
//! validation (and the Khronos validation layer where installed) on: any
//! validation error captured fails the test.

use gpu_counters_hal::{
    cpu_monotonic_ns, BackendDevice, BackendRecorder, CalibrationMethod, CommonCounterSet,
    CounterSampleBufferDescriptor, Error, InvalidInput, SampleStatus, SampleValue,
    TimestampGranularity, COUNTER_ERROR_VALUE,
};
use gpu_counters_wgpu::{CounterSampleBuffer, Device};
use std::sync::{Arc, Mutex, Once, OnceLock};

/// Validation messages logged at error level by wgpu (the Vulkan debug
/// messenger's errors come through `log`).
static LOGGED: Mutex<Vec<String>> = Mutex::new(Vec::new());

struct Collect;

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
struct Gpu {
    device: Device,
    errors: Arc<Mutex<Vec<String>>>,
}

impl Gpu {
    /// Fails on any uncaptured wgpu error or logged validation error.
    fn check(&self) {
        let errors = self.errors.lock().unwrap().clone();
        let logged = LOGGED.lock().unwrap_or_else(|p| p.into_inner()).clone();
        assert!(
            errors.is_empty() && logged.is_empty(),
            "validation errors: {errors:?} {logged:?}"
        );
    }
}

/// The features the tests use.
fn wanted() -> wgpu::Features {
    wgpu::Features::TIMESTAMP_QUERY
        | wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS
        | wgpu::Features::TIMESTAMP_QUERY_INSIDE_PASSES
        | wgpu::Features::PIPELINE_STATISTICS_QUERY
}

/// A device on the first Vulkan adapter (lavapipe on CI) with `features`
/// (restricted to what the adapter has).
fn gpu_with(features: impl FnOnce(wgpu::Features) -> wgpu::Features) -> Gpu {
    gpu_opened(features, false)
}

/// As [`gpu_with`]; `calibrated`: through [`Device::request`] (which
/// enables the calibrated-timestamps extension), else wgpu's plain
/// `request_device`.
fn gpu_opened(features: impl FnOnce(wgpu::Features) -> wgpu::Features, calibrated: bool) -> Gpu {
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
fn shared_adapter() -> &'static wgpu::Adapter {
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

fn gpu() -> Gpu {
    gpu_with(|have| have & wanted())
}

/// [`gpu`], where it has timestamps (pass timestamp writes); else `None`,
/// and the test says it skipped.
fn timestamp_gpu() -> Option<Gpu> {
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

fn timestamps(d: &Device, n: u32) -> CounterSampleBuffer {
    d.make_counter_sample_buffer(&CounterSampleBufferDescriptor::new(
        CommonCounterSet::Timestamp,
        "timestamps",
        n,
    ))
    .unwrap()
}

const SHADER: &str = "
@group(0) @binding(0) var<storage, read_write> data: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    data[id.x] = data[id.x] * 3u + id.x;
}
";

/// A compute pass of a small dispatch with timestamps at `buffer[0]` (start)
/// and `buffer[1]` (end): Written, end >= start, and calibrated inside the
/// CPU window around the submission; index 2, never written, resolves to the
/// error value with NotWritten (not wgpu's 0).
#[test]
fn pass_timestamps_are_written_ordered_and_inside_the_cpu_window() {
    pass_timestamps_inside_the_cpu_window(gpu());
}

/// wgpu's plain `request_device` does not enable
/// `VK_EXT_calibrated_timestamps` (lavapipe has it): calibration falls back
/// to a bracketed submission, and says so.
#[test]
fn without_the_extension_calibration_brackets_a_submission() {
    let gpu = gpu();
    let d = &gpu.device;
    let info = d.info();
    assert_eq!(info.calibration, CalibrationMethod::Bracketing);
    assert_eq!(info.calibration_source, "bracketed submission");
    assert_eq!(d.calibrated_timestamps_extension(), None);
    if d.features().contains(wgpu::Features::TIMESTAMP_QUERY) {
        let pair = d.sample_timestamps().unwrap();
        eprintln!("bracketed pair: {pair:?}");
        let c = d.calibration().unwrap();
        assert_eq!(c.method(), CalibrationMethod::Bracketing);
    }
    gpu.check();
}

/// Through [`Device::request`] on lavapipe (which has
/// `VK_EXT_calibrated_timestamps`): a calibrated pair naming the extension,
/// CPU times inside the CPU window of the read, and pass timestamps
/// calibrated inside the window around their submission.
#[test]
fn with_the_extension_calibration_is_a_calibrated_pair() {
    let gpu = gpu_opened(|have| have & wanted(), true);
    let d = &gpu.device;
    let info = d.info().clone();
    let Some(ext) = d.calibrated_timestamps_extension() else {
        // The portable build (no `vulkan` feature) never reaches wgpu-hal;
        // with it, lavapipe has the extension, so it must be found.
        assert!(
            !cfg!(feature = "vulkan") || !info.name.contains("llvmpipe"),
            "Device::request did not enable lavapipe's VK_EXT_calibrated_timestamps"
        );
        eprintln!("no calibrated-timestamps extension: calibration brackets a submission");
        assert_eq!(info.calibration, CalibrationMethod::Bracketing);
        assert_eq!(info.calibration_source, "bracketed submission");
        return;
    };
    eprintln!(
        "calibration: {:?} via {}",
        info.calibration, info.calibration_source
    );
    assert_eq!(info.calibration, CalibrationMethod::CalibratedPair);
    assert_eq!(info.calibration_source, ext);
    assert!(ext.ends_with("_calibrated_timestamps"), "{ext}");
    // Lavapipe has the EXT; it is preferred over the KHR.
    if info.name.contains("llvmpipe") {
        assert_eq!(ext, "VK_EXT_calibrated_timestamps");
    }
    if !d.features().contains(wgpu::Features::TIMESTAMP_QUERY) {
        eprintln!("skipped the rest: the adapter lacks wgpu::Features::TIMESTAMP_QUERY");
        return;
    }
    let mut deviations = Vec::new();
    for _ in 0..8 {
        let before = cpu_monotonic_ns();
        let pair = d.sample_timestamps().unwrap();
        let after = cpu_monotonic_ns();
        assert!(
            pair.cpu_ns >= before && pair.cpu_ns <= after,
            "calibrated CPU time {} outside {before}..{after}",
            pair.cpu_ns
        );
        deviations.push(pair.max_deviation_ns);
    }
    eprintln!("calibrated max deviations (ns): {deviations:?}");
    let c = d.calibration().unwrap();
    assert_eq!(c.method(), CalibrationMethod::CalibratedPair);
    pass_timestamps_inside_the_cpu_window(gpu);
}

/// A compute pass's timestamps, calibrated, inside the CPU window around its
/// submission (see the test above for the rest of what is checked).
fn pass_timestamps_inside_the_cpu_window(gpu: Gpu) {
    let d = &gpu.device;
    if !d.features().contains(wgpu::Features::TIMESTAMP_QUERY) {
        eprintln!("skipped: the adapter lacks wgpu::Features::TIMESTAMP_QUERY");
        return;
    }
    let raw = d.device();
    let module = raw.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some("test shader"),
        source: wgpu::ShaderSource::Wgsl(SHADER.into()),
    });
    let pipeline = raw.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some("test pipeline"),
        layout: None,
        module: &module,
        entry_point: Some("main"),
        compilation_options: Default::default(),
        cache: None,
    });
    let data = raw.create_buffer(&wgpu::BufferDescriptor {
        label: Some("test data"),
        size: 4 * 64 * 64,
        usage: wgpu::BufferUsages::STORAGE,
        mapped_at_creation: false,
    });
    let bind = raw.create_bind_group(&wgpu::BindGroupDescriptor {
        label: Some("test bind group"),
        layout: &pipeline.get_bind_group_layout(0),
        entries: &[wgpu::BindGroupEntry {
            binding: 0,
            resource: data.as_entire_binding(),
        }],
    });
    let calibration = d.calibration().unwrap();
    let buffer = timestamps(d, 4);
    let mut rec = d.recorder(Some("test"));
    let writes = rec
        .compute_pass_timestamp_writes(&buffer, Some(0), Some(1))
        .unwrap();
    {
        let mut pass = rec
            .encoder()
            .begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("timed pass"),
                timestamp_writes: Some(writes),
            });
        pass.set_pipeline(&pipeline);
        pass.set_bind_group(0, &bind, &[]);
        pass.dispatch_workgroups(64, 1, 1);
    }
    // Written by the recording, not yet submitted: never a value.
    let before_submit = buffer.resolve_counter_range(0..4).unwrap();
    assert_eq!(before_submit.statuses()[0], SampleStatus::NotReady);
    assert_eq!(
        before_submit.timestamps().unwrap()[0].timestamp,
        COUNTER_ERROR_VALUE
    );
    let before = cpu_monotonic_ns();
    let submission = d.submit(rec).unwrap();
    let after = submission.wait().unwrap();
    let r = buffer.resolve_counter_range(0..4).unwrap();
    let st = r.statuses();
    let ts = r.timestamps().unwrap();
    assert_eq!(&st[..2], &[SampleStatus::Written, SampleStatus::Written]);
    let (start, end) = (ts[0].timestamp, ts[1].timestamp);
    assert!(end >= start, "end {end} before start {start}");
    for t in [start, end] {
        let c = calibration.to_cpu_ns(t).unwrap();
        eprintln!(
            "{:?}: timestamp at cpu {} ± {} ns, window {before}..{after} ({} ns)",
            calibration.method(),
            c.ns,
            c.error_bound_ns,
            after - before
        );
        assert!(
            c.ns + c.error_bound_ns >= before && c.ns <= after + c.error_bound_ns,
            "timestamp {t} calibrated to {} ± {} outside {before}..{after}",
            c.ns,
            c.error_bound_ns
        );
    }
    // Never written: the error value and NotWritten, not wgpu's 0.
    for i in 2..4 {
        assert_eq!(st[i], SampleStatus::NotWritten);
        assert_eq!(ts[i].timestamp, COUNTER_ERROR_VALUE);
    }
    // A host reset of finished samples is allowed, and forgets them.
    buffer.reset().unwrap();
    let r = buffer.resolve_counter_range(0..2).unwrap();
    assert_eq!(r.statuses(), &[SampleStatus::NotWritten; 2]);
    gpu.check();
}

/// An encoder timestamp between passes with TIMESTAMP_QUERY_INSIDE_ENCODERS.
#[test]
fn encoder_timestamps_between_passes() {
    let gpu = gpu();
    let d = &gpu.device;
    if !d
        .features()
        .contains(wgpu::Features::TIMESTAMP_QUERY | wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS)
    {
        eprintln!("skipped: the adapter lacks TIMESTAMP_QUERY_INSIDE_ENCODERS");
        return;
    }
    let buffer = timestamps(d, 3);
    let mut rec = d.recorder(None);
    rec.sample_counters(&buffer, 0, TimestampGranularity::Precise)
        .unwrap();
    rec.sample_counters(&buffer, 2, TimestampGranularity::Relaxed)
        .unwrap();
    let s = d.submit(rec).unwrap();
    s.wait().unwrap();
    let r = buffer.resolve_counter_range(0..3).unwrap();
    assert_eq!(
        r.statuses(),
        &[
            SampleStatus::Written,
            SampleStatus::NotWritten,
            SampleStatus::Written
        ]
    );
    let ts = r.timestamps().unwrap();
    assert!(ts[2].timestamp >= ts[0].timestamp);
    assert_eq!(ts[1].timestamp, COUNTER_ERROR_VALUE);
    // A result resolved into again keeps its memory (steady-state resolves
    // allocate nothing), and holds the same.
    let mut into = gpu_counters_hal::ResolvedCounters::default();
    buffer.resolve_counter_range_into(0..3, &mut into).unwrap();
    let at = into.as_bytes().as_ptr();
    buffer.resolve_counter_range_into(0..3, &mut into).unwrap();
    assert_eq!(into.as_bytes().as_ptr(), at, "the result was reallocated");
    assert_eq!(
        (into.as_bytes(), into.statuses()),
        (r.as_bytes(), r.statuses())
    );
    gpu.check();
}

fn unsupported(e: Error) -> String {
    match e {
        Error::Invalid(InvalidInput::Unsupported(m)) => m,
        other => panic!("not a typed Unsupported error: {other:?}"),
    }
}

/// Without the features, typed errors that name them.
#[test]
fn missing_features_are_typed_errors_naming_them() {
    let gpu = gpu_with(|_| wgpu::Features::empty());
    let d = &gpu.device;
    assert!(d.info().counter_sets.is_empty());
    let e = d
        .make_counter_sample_buffer(&CounterSampleBufferDescriptor::new(
            CommonCounterSet::Timestamp,
            "t",
            2,
        ))
        .expect_err("a timestamp buffer without TIMESTAMP_QUERY");
    assert!(unsupported(e).contains("TIMESTAMP_QUERY"));
    let e = d
        .make_counter_sample_buffer(&CounterSampleBufferDescriptor::new(
            CommonCounterSet::Statistic,
            "s",
            2,
        ))
        .expect_err("a statistic buffer without PIPELINE_STATISTICS_QUERY");
    assert!(unsupported(e).contains("PIPELINE_STATISTICS_QUERY"));
    assert!(unsupported(d.calibration().unwrap_err()).contains("TIMESTAMP_QUERY"));
    gpu.check();

    // Pass timestamps only: encoder timestamps name the missing feature and
    // say pass timestamp writes still work.
    let gpu = gpu_with(|_| wgpu::Features::TIMESTAMP_QUERY);
    let d = &gpu.device;
    if !d.features().contains(wgpu::Features::TIMESTAMP_QUERY) {
        eprintln!("skipped the encoder part: the adapter lacks TIMESTAMP_QUERY");
        return;
    }
    let buffer = timestamps(d, 2);
    let mut rec = d.recorder(None);
    let m = unsupported(
        rec.sample_counters(&buffer, 0, TimestampGranularity::Precise)
            .unwrap_err(),
    );
    assert!(m.contains("TIMESTAMP_QUERY_INSIDE_ENCODERS") && m.contains("pass timestamp writes"));
    drop(rec);
    let r = buffer.resolve_counter_range(0..2).unwrap();
    assert_eq!(r.statuses(), &[SampleStatus::NotWritten; 2]);
    gpu.check();
}

/// Statistics between passes: a typed error saying why.
#[test]
fn statistics_between_passes_are_a_typed_error() {
    let gpu = gpu();
    let d = &gpu.device;
    if !d
        .features()
        .contains(wgpu::Features::PIPELINE_STATISTICS_QUERY)
    {
        eprintln!("skipped: the adapter lacks PIPELINE_STATISTICS_QUERY");
        return;
    }
    let stats = d
        .make_counter_sample_buffer(&CounterSampleBufferDescriptor::new(
            CommonCounterSet::Statistic,
            "s",
            2,
        ))
        .unwrap();
    let mut rec = d.recorder(None);
    let m = unsupported(
        rec.sample_counters(&stats, 0, TimestampGranularity::Precise)
            .unwrap_err(),
    );
    assert!(m.contains("inside a pass"), "{m}");
    gpu.check();
}

/// The profiler over encoders, where encoder timestamps are available.
#[test]
fn profiler_over_an_encoder() {
    use gpu_counters_hal::timeline::PassKind;
    use gpu_counters_profiler::{Profiler, ProfilerOptions};
    let gpu = gpu();
    let d = &gpu.device;
    if !d
        .features()
        .contains(wgpu::Features::TIMESTAMP_QUERY | wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS)
    {
        eprintln!("skipped: the adapter lacks TIMESTAMP_QUERY_INSIDE_ENCODERS");
        return;
    }
    let profiler = Profiler::new(d, ProfilerOptions::default()).unwrap();
    let frame = profiler.begin_frame().unwrap();
    let mut rec = d.recorder(Some("profiled"));
    let outer = frame.scope(&mut rec, "outer", PassKind::Scope).unwrap();
    let inner = frame.scope(&mut rec, "inner", PassKind::Compute).unwrap();
    drop(
        rec.encoder()
            .begin_compute_pass(&wgpu::ComputePassDescriptor::default()),
    );
    inner.end(&mut rec).unwrap();
    outer.end(&mut rec).unwrap();
    let before = cpu_monotonic_ns();
    let submission = d.submit(rec).unwrap();
    profiler.end_frame(frame, [&submission]).unwrap();
    let after = submission.wait().unwrap();
    let frames = profiler
        .wait_collect_all(std::time::Duration::from_secs(10))
        .unwrap();
    assert_eq!(frames.len(), 1);
    let scopes = &frames[0].scopes;
    assert_eq!(scopes.len(), 2);
    for s in scopes {
        assert!(s.start_ns <= s.end_ns, "{s:?}");
        assert_inside_window(s, before, after);
    }
    gpu.check();
}

/// A sample recorded again in a submission not yet seen done is NotReady,
/// never the older value; heap entries invalidate to 0; markers signal once
/// the work before them is done.
#[test]
fn rerecorded_samples_heaps_and_markers() {
    use gpu_counters_hal::CounterHeapDescriptor;
    let Some(gpu) = timestamp_gpu() else {
        return;
    };
    let d = &gpu.device;
    let buffer = timestamps(d, 2);
    let record = |d: &Device| {
        let mut rec = d.recorder(None);
        let w = rec
            .compute_pass_timestamp_writes(&buffer, Some(0), None)
            .unwrap();
        drop(
            rec.encoder()
                .begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: None,
                    timestamp_writes: Some(w),
                }),
        );
        rec
    };
    d.submit(record(d)).unwrap().wait().unwrap();
    let first = buffer.resolve_counter_range(0..1).unwrap();
    assert_eq!(first.statuses(), &[SampleStatus::Written]);
    // Recorded again: until its submission is seen done, not the old value.
    let rec = record(d);
    let pending = buffer.resolve_counter_range(0..1).unwrap();
    assert_eq!(pending.statuses(), &[SampleStatus::NotReady]);
    assert_eq!(
        pending.timestamps().unwrap()[0].timestamp,
        COUNTER_ERROR_VALUE
    );
    let marker = d.make_marker().unwrap();
    let s = d.submit(rec).unwrap();
    d.submit_marker(&marker).unwrap();
    s.wait().unwrap();
    d.wait_idle().unwrap();
    assert!(marker.is_signaled().unwrap());
    marker.reset().unwrap();
    let second = buffer.resolve_counter_range(0..1).unwrap();
    assert_eq!(second.statuses(), &[SampleStatus::Written]);
    assert!(second.timestamps().unwrap()[0].timestamp >= first.timestamps().unwrap()[0].timestamp);

    if d.features()
        .contains(wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS)
    {
        let heap = d
            .make_counter_heap(&CounterHeapDescriptor::timestamp(3).with_label("frame times"))
            .unwrap();
        assert_eq!(heap.label(), "frame times");
        assert!(format!("{heap:?}").contains("frame times"));
        let mut rec = d.recorder(None);
        let e = rec
            .write_timestamp(TimestampGranularity::Precise, &heap, 3)
            .unwrap_err();
        assert!(e.to_string().contains("`frame times`"), "{e}");
        rec.write_timestamp(TimestampGranularity::Precise, &heap, 1)
            .unwrap();
        d.submit(rec).unwrap().wait().unwrap();
        let r = heap.resolve_counter_range(0..3).unwrap();
        assert_eq!(
            r.statuses(),
            &[
                SampleStatus::NotWritten,
                SampleStatus::Written,
                SampleStatus::NotWritten
            ]
        );
        heap.invalidate_counter_range(1..2).unwrap();
        let r = heap.resolve_counter_range(1..2).unwrap();
        assert_eq!(r.statuses(), &[SampleStatus::Invalidated]);
        assert_eq!(r.timestamps().unwrap()[0].timestamp, 0);
    }
    gpu.check();
}

/// Pass timestamp writes handed out and never put in a pass: wgpu reads
/// those queries as 0, which resolve to the error value, never to a
/// plausible 0 marked written.
#[test]
fn unused_pass_timestamp_writes_are_never_a_zero() {
    let Some(gpu) = timestamp_gpu() else {
        return;
    };
    let d = &gpu.device;
    let buffer = timestamps(d, 2);
    let mut rec = d.recorder(Some("unused writes"));
    let _unused = rec
        .compute_pass_timestamp_writes(&buffer, Some(0), Some(1))
        .unwrap();
    d.submit(rec).unwrap().wait().unwrap();
    let r = buffer.resolve_counter_range(0..2).unwrap();
    for (st, t) in r.statuses().iter().zip(r.timestamps().unwrap()) {
        assert_ne!(*st, SampleStatus::Written);
        assert_eq!(t.timestamp, COUNTER_ERROR_VALUE);
    }
    // The profiler's resolve says the same.
    let mut once = gpu_counters_hal::ResolvedTimestamps::default();
    buffer.resolve_timestamps_into(0..2, &mut once).unwrap();
    assert!(!once.all_written());
    for (i, st) in r.statuses().iter().enumerate() {
        assert_eq!(once.get(i), Some((COUNTER_ERROR_VALUE, *st)));
    }
    gpu.check();
}

/// A kernel of `@workgroup_size(S)` (S up to 64) writing nothing out of
/// range: its invocations are what the statistics count.
fn kernel(size: u32) -> String {
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

fn statistics(d: &Device, n: u32) -> CounterSampleBuffer {
    d.make_counter_sample_buffer(&CounterSampleBufferDescriptor::new(
        CommonCounterSet::Statistic,
        "pass statistics",
        n,
    ))
    .unwrap()
}

/// A compute pass of `dispatches` dispatches of `groups` workgroups of
/// `size` invocations, counted into `buffer[start..=end]`; returns the
/// statistics between them once the submission is done.
fn count_pass(
    d: &Device,
    buffer: &CounterSampleBuffer,
    (dispatches, groups, size): (u32, u32, u32),
    (start, end): (u32, u32),
) -> gpu_counters_hal::ResolvedCounters {
    let raw = d.device();
    let module = raw.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some("counted kernel"),
        source: wgpu::ShaderSource::Wgsl(kernel(size).into()),
    });
    let pipeline = raw.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some("counted pipeline"),
        layout: None,
        module: &module,
        entry_point: Some("main"),
        compilation_options: Default::default(),
        cache: None,
    });
    let data = raw.create_buffer(&wgpu::BufferDescriptor {
        label: Some("counted data"),
        size: 4,
        usage: wgpu::BufferUsages::STORAGE,
        mapped_at_creation: false,
    });
    let bind = raw.create_bind_group(&wgpu::BindGroupDescriptor {
        label: Some("counted bind group"),
        layout: &pipeline.get_bind_group_layout(0),
        entries: &[wgpu::BindGroupEntry {
            binding: 0,
            resource: data.as_entire_binding(),
        }],
    });
    let mut rec = d.recorder(Some("counted"));
    {
        let mut pass = rec
            .begin_compute_pass_with_statistics(
                &wgpu::ComputePassDescriptor {
                    label: Some("counted pass"),
                    timestamp_writes: None,
                },
                buffer,
                start,
                end,
            )
            .unwrap();
        pass.set_pipeline(&pipeline);
        pass.set_bind_group(0, &bind, &[]);
        for _ in 0..dispatches {
            pass.dispatch_workgroups(groups, 1, 1);
        }
        // While the pass counts, its samples resolve as not ready.
        let open = buffer
            .resolve_counter_range(start.into()..u64::from(end) + 1)
            .unwrap();
        assert_eq!(open.statuses()[0], SampleStatus::NotReady);
        assert_eq!(
            open.statistics().unwrap()[1].compute_kernel_invocations,
            COUNTER_ERROR_VALUE
        );
    }
    // Recorded, not submitted: never a value.
    let r = buffer
        .resolve_counter_range(start.into()..u64::from(end) + 1)
        .unwrap();
    assert_eq!(r.statuses()[0], SampleStatus::NotReady);
    d.submit(rec).unwrap().wait().unwrap();
    buffer
        .resolve_counter_range(0..buffer.sample_count().into())
        .unwrap()
}

/// A compute pass counts exactly its invocations: D dispatches of W
/// workgroups of S invocations are D·W·S compute invocations between the
/// pass's start and end samples; the start sample reads 0, fields wgpu does
/// not count are the error value, an unwritten sample is the error value
/// with NotWritten, and two passes' samples are not comparable.
#[test]
fn pass_statistics_count_compute_invocations_exactly() {
    let gpu = gpu();
    let d = &gpu.device;
    if !d
        .features()
        .contains(wgpu::Features::PIPELINE_STATISTICS_QUERY)
    {
        eprintln!("skipped: the adapter lacks PIPELINE_STATISTICS_QUERY");
        return;
    }
    let buffer = statistics(d, 6);
    for ((dispatches, groups, size), (start, end)) in [((1, 1, 1), (0, 1)), ((3, 7, 13), (2, 4))] {
        let r = count_pass(d, &buffer, (dispatches, groups, size), (start, end));
        let (s, e) = (start as usize, end as usize);
        assert_eq!(r.statuses()[s], SampleStatus::Written);
        assert_eq!(r.statuses()[e], SampleStatus::Written);
        let SampleValue::Value(between) = r.statistics_between(s, e).unwrap() else {
            panic!("not a value: {:?}", r.statistics_between(s, e));
        };
        assert_eq!(
            between.compute_kernel_invocations,
            u64::from(dispatches * groups * size),
            "{between:?}"
        );
        assert_eq!(between.vertex_invocations, 0);
        assert_eq!(between.fragment_invocations, 0);
        assert_eq!(between.fragments_passed, COUNTER_ERROR_VALUE);
        assert_eq!(between.tessellation_input_patches, COUNTER_ERROR_VALUE);
        let stats = r.statistics().unwrap();
        assert_eq!(stats[s].compute_kernel_invocations, 0);
        assert_eq!(stats[s].fragments_passed, COUNTER_ERROR_VALUE);
        gpu.check();
    }
    let r = buffer.resolve_counter_range(0..6).unwrap();
    // Index 3 and 5: never written.
    for i in [3, 5] {
        assert_eq!(r.statuses()[i], SampleStatus::NotWritten);
        let s = r.statistics().unwrap()[i];
        assert_eq!(s.compute_kernel_invocations, COUNTER_ERROR_VALUE);
        assert_eq!(s.vertex_invocations, COUNTER_ERROR_VALUE);
    }
    // The first pass's (1,1,1) still reads 1; across passes: not comparable.
    assert_eq!(r.statistics().unwrap()[1].compute_kernel_invocations, 1);
    assert_eq!(
        r.statistics_between(0, 4).unwrap(),
        SampleValue::NotComparable
    );
    gpu.check();
}

/// Misuse of pass statistics is refused before anything is recorded: a
/// timestamp buffer, start == end, an index out of range, an index still
/// counted by an open pass.
#[test]
fn pass_statistics_misuse_is_refused() {
    let gpu = gpu();
    let d = &gpu.device;
    if !d
        .features()
        .contains(wgpu::Features::PIPELINE_STATISTICS_QUERY)
    {
        eprintln!("skipped: the adapter lacks PIPELINE_STATISTICS_QUERY");
        return;
    }
    let desc = wgpu::ComputePassDescriptor::default();
    let stats = statistics(d, 4);
    let mut rec = d.recorder(None);
    if d.features().contains(wgpu::Features::TIMESTAMP_QUERY) {
        let ts = timestamps(d, 2);
        assert!(rec
            .begin_compute_pass_with_statistics(&desc, &ts, 0, 1)
            .is_err());
    }
    assert!(rec
        .begin_compute_pass_with_statistics(&desc, &stats, 1, 1)
        .is_err());
    assert!(rec
        .begin_compute_pass_with_statistics(&desc, &stats, 0, 4)
        .is_err());
    {
        let _pass = rec
            .begin_compute_pass_with_statistics(&desc, &stats, 0, 1)
            .unwrap();
        // A second recorder cannot write the open samples.
        let mut other = d.recorder(None);
        let e = other
            .begin_compute_pass_with_statistics(&desc, &stats, 1, 2)
            .err()
            .expect("an open sample written again");
        assert!(
            matches!(e.invalid(), Some(InvalidInput::SampleIndexReuse { .. })),
            "{e}"
        );
    }
    d.submit(rec).unwrap().wait().unwrap();
    let r = stats.resolve_counter_range(0..4).unwrap();
    assert_eq!(r.statuses()[0], SampleStatus::Written);
    assert_eq!(r.statuses()[1], SampleStatus::Written);
    assert_eq!(r.statuses()[2], SampleStatus::NotWritten);
    gpu.check();
}

/// A counted pass leaked with `mem::forget`: its samples stay open, so a
/// later recording cannot write them (a typed error), and the rest of the
/// buffer still works.
#[test]
fn a_leaked_counted_pass_keeps_its_samples_refused() {
    let gpu = gpu();
    let d = &gpu.device;
    if !d
        .features()
        .contains(wgpu::Features::PIPELINE_STATISTICS_QUERY)
    {
        eprintln!("skipped: the adapter lacks PIPELINE_STATISTICS_QUERY");
        return;
    }
    let desc = wgpu::ComputePassDescriptor::default();
    let stats = statistics(d, 4);
    let mut leaked = d.recorder(None);
    std::mem::forget(
        leaked
            .begin_compute_pass_with_statistics(&desc, &stats, 0, 1)
            .unwrap(),
    );
    let mut rec = d.recorder(None);
    let e = rec
        .begin_compute_pass_with_statistics(&desc, &stats, 0, 1)
        .err()
        .expect("a leaked pass's samples written again");
    assert!(
        matches!(e.invalid(), Some(InvalidInput::SampleIndexReuse { .. })),
        "{e}"
    );
    drop(
        rec.begin_compute_pass_with_statistics(&desc, &stats, 2, 3)
            .unwrap(),
    );
    d.submit(rec).unwrap().wait().unwrap();
    let r = stats.resolve_counter_range(2..4).unwrap();
    assert_eq!(
        r.statuses(),
        &[SampleStatus::Written, SampleStatus::Written]
    );
    gpu.check();
}

/// A render pass counts its draw: one triangle of 3 vertices is 3 vertex
/// invocations and some fragment invocations between the pass's samples;
/// compute invocations 0.
#[test]
fn pass_statistics_count_a_render_pass() {
    let gpu = gpu();
    let d = &gpu.device;
    if !d
        .features()
        .contains(wgpu::Features::PIPELINE_STATISTICS_QUERY)
    {
        eprintln!("skipped: the adapter lacks PIPELINE_STATISTICS_QUERY");
        return;
    }
    let raw = d.device();
    let module = raw.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some("triangle"),
        source: wgpu::ShaderSource::Wgsl(
            "
@vertex
fn vs(@builtin(vertex_index) i: u32) -> @builtin(position) vec4<f32> {
    let x = f32(i32(i) - 1);
    let y = f32(i32(i & 1u) * 2 - 1);
    return vec4<f32>(x, y, 0.0, 1.0);
}
@fragment
fn fs() -> @location(0) vec4<f32> {
    return vec4<f32>(1.0, 0.0, 0.0, 1.0);
}
"
            .into(),
        ),
    });
    let format = wgpu::TextureFormat::Rgba8Unorm;
    let pipeline = raw.create_render_pipeline(&wgpu::RenderPipelineDescriptor {
        label: Some("triangle"),
        layout: None,
        vertex: wgpu::VertexState {
            module: &module,
            entry_point: Some("vs"),
            compilation_options: Default::default(),
            buffers: &[],
        },
        primitive: wgpu::PrimitiveState::default(),
        depth_stencil: None,
        multisample: wgpu::MultisampleState::default(),
        fragment: Some(wgpu::FragmentState {
            module: &module,
            entry_point: Some("fs"),
            compilation_options: Default::default(),
            targets: &[Some(format.into())],
        }),
        multiview_mask: None,
        cache: None,
    });
    let target = raw.create_texture(&wgpu::TextureDescriptor {
        label: Some("target"),
        size: wgpu::Extent3d {
            width: 16,
            height: 16,
            depth_or_array_layers: 1,
        },
        mip_level_count: 1,
        sample_count: 1,
        dimension: wgpu::TextureDimension::D2,
        format,
        usage: wgpu::TextureUsages::RENDER_ATTACHMENT,
        view_formats: &[],
    });
    let view = target.create_view(&Default::default());
    let buffer = statistics(d, 2);
    let mut rec = d.recorder(Some("render"));
    {
        let mut pass = rec
            .begin_render_pass_with_statistics(
                &wgpu::RenderPassDescriptor {
                    label: Some("counted render pass"),
                    color_attachments: &[Some(wgpu::RenderPassColorAttachment {
                        view: &view,
                        depth_slice: None,
                        resolve_target: None,
                        ops: wgpu::Operations {
                            load: wgpu::LoadOp::Clear(wgpu::Color::BLACK),
                            store: wgpu::StoreOp::Store,
                        },
                    })],
                    ..Default::default()
                },
                &buffer,
                0,
                1,
            )
            .unwrap();
        pass.set_pipeline(&pipeline);
        pass.draw(0..3, 0..1);
    }
    d.submit(rec).unwrap().wait().unwrap();
    let r = buffer.resolve_counter_range(0..2).unwrap();
    assert_eq!(r.statuses(), &[SampleStatus::Written; 2]);
    let SampleValue::Value(between) = r.statistics_between(0, 1).unwrap() else {
        panic!("not a value: {:?}", r.statistics_between(0, 1));
    };
    assert_eq!(between.vertex_invocations, 3, "{between:?}");
    assert!(between.clipper_invocations >= 1, "{between:?}");
    assert!(between.fragment_invocations > 0, "{between:?}");
    assert_eq!(between.compute_kernel_invocations, 0);
    gpu.check();
}

/// Asserts that profiler scope `s` lies inside the CPU window
/// `before..after` that brackets its submission, give or take its bound.
fn assert_inside_window(s: &gpu_counters_profiler::ScopeResult, before: u64, after: u64) {
    assert!(
        s.start_ns + s.error_bound_ns >= before && s.end_ns <= after + s.error_bound_ns,
        "{s:?} outside {before}..{after}"
    );
}

/// Records an empty compute pass on `rec` whose timestamp writes are
/// `buffer[start]` and `buffer[start + 1]`.
fn timed_pass(
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

fn reuse_reason(e: Error) -> &'static str {
    match e.invalid().cloned() {
        Some(InvalidInput::SampleIndexReuse { reason, .. }) => reason,
        other => panic!("expected SampleIndexReuse, got {other:?} ({e})"),
    }
}

/// Pass timestamp writes over several blocks of claimed indices (most
/// noted without the bookkeeping lock), the last block partial: not ready
/// and not resettable until submitted, then every one written, each pass's
/// end at or after its start, in recording order.
#[test]
fn claimed_pass_writes_are_pending_until_submitted() {
    let Some(gpu) = timestamp_gpu() else {
        return;
    };
    let d = &gpu.device;
    let n = 4 * 64 + 18;
    let buffer = timestamps(d, n);
    let mut rec = d.recorder(Some("claimed writes"));
    for start in (0..n).step_by(2) {
        timed_pass(&mut rec, &buffer, start).unwrap();
    }
    let before = buffer.resolve_counter_range(0..u64::from(n)).unwrap();
    assert_eq!(before.count(SampleStatus::NotReady), n as usize);
    assert!(buffer.reset().is_err(), "recorded, not submitted");
    d.submit(rec).unwrap().wait().unwrap();
    let after = buffer.resolve_counter_range(0..u64::from(n)).unwrap();
    assert!(after.all_written(), "{:?}", after.statuses());
    let t = after.timestamps().unwrap();
    assert!(t.windows(2).all(|w| w[0].timestamp <= w[1].timestamp));
    // Reset and written again, by a new recording, through new claims.
    buffer.reset().unwrap();
    let mut rec = d.recorder(None);
    for start in (0..n).step_by(2) {
        timed_pass(&mut rec, &buffer, start).unwrap();
    }
    d.submit(rec).unwrap().wait().unwrap();
    let again = buffer.resolve_counter_range(0..u64::from(n)).unwrap();
    assert!(again.all_written(), "{:?}", again.statuses());
    assert!(again.timestamps().unwrap()[0].timestamp >= t[n as usize - 1].timestamp);
    gpu.check();
}

/// A host reset of part of a sample buffer (`reset_range`, what the
/// profiler resets of a page after a frame) resets exactly that range, is
/// refused while an index of it is pending, and leaves the rest as it was.
#[test]
fn range_reset_resets_only_its_range() {
    let Some(gpu) = timestamp_gpu() else {
        return;
    };
    let d = &gpu.device;
    let buffer = timestamps(d, 6);
    let mut rec = d.recorder(Some("range reset"));
    timed_pass(&mut rec, &buffer, 0).unwrap();
    timed_pass(&mut rec, &buffer, 2).unwrap();
    match buffer.reset_range(2..4).unwrap_err() {
        Error::Invalid(InvalidInput::SampleIndexReuse { index: 2, .. }) => {}
        e => panic!("expected SampleIndexReuse of index 2, got {e:?}"),
    }
    d.submit(rec).unwrap().wait().unwrap();
    // Ranges past the end and empty ones are refused, as by resolves.
    for (range, start, end) in [(4..7, 4, 7), (3..3, 3, 3)] {
        match buffer.reset_range(range).unwrap_err() {
            Error::Invalid(InvalidInput::RangeOutOfBounds {
                start: s,
                end: e,
                count: 6,
                ..
            }) => assert_eq!((s, e), (start, end)),
            e => panic!("expected RangeOutOfBounds, got {e:?}"),
        }
    }
    buffer.reset_range(0..2).unwrap();
    let resolved = buffer.resolve_counter_range(0..6).unwrap();
    assert_eq!(
        resolved.statuses(),
        &[
            SampleStatus::NotWritten,
            SampleStatus::NotWritten,
            SampleStatus::Written,
            SampleStatus::Written,
            SampleStatus::NotWritten,
            SampleStatus::NotWritten,
        ]
    );
    gpu.check();
}

/// An index one recorder noted without the lock is refused to another
/// while the first is open; the other's write of a clean index of the same
/// claimed block is then refused to the first. Both submit; exactly the
/// indices written read as written.
#[test]
fn claimed_pass_writes_are_refused_to_other_recorders() {
    let Some(gpu) = timestamp_gpu() else {
        return;
    };
    let d = &gpu.device;
    let buffer = timestamps(d, 64);
    let mut first = d.recorder(Some("first"));
    timed_pass(&mut first, &buffer, 0).unwrap(); // locked: claims the block
    timed_pass(&mut first, &buffer, 2).unwrap(); // claimed
    let mut second = d.recorder(Some("second"));
    let e = timed_pass(&mut second, &buffer, 2).unwrap_err();
    assert_eq!(
        reuse_reason(e),
        gpu_counters_hal::bookkeeping::RECORDED_ELSEWHERE
    );
    // Clean in the first's claim: the second may write it, and the first
    // may not any more.
    timed_pass(&mut second, &buffer, 10).unwrap();
    let e = timed_pass(&mut first, &buffer, 10).unwrap_err();
    assert_eq!(
        reuse_reason(e),
        gpu_counters_hal::bookkeeping::RECORDED_ELSEWHERE
    );
    timed_pass(&mut first, &buffer, 12).unwrap();
    d.submit(first).unwrap().wait().unwrap();
    d.submit(second).unwrap().wait().unwrap();
    let r = buffer.resolve_counter_range(0..64).unwrap();
    for (i, st) in r.statuses().iter().enumerate() {
        let written = matches!(i, 0..=3 | 10..=13);
        assert_eq!(*st == SampleStatus::Written, written, "index {i}: {st:?}");
    }
    gpu.check();
}

/// A recorder dropped after claimed writes: they never ran, so they read
/// as never written, and another recorder may write them.
#[test]
fn abandoned_claimed_pass_writes_are_forgotten() {
    let Some(gpu) = timestamp_gpu() else {
        return;
    };
    let d = &gpu.device;
    let n = 2 * 64;
    let buffer = timestamps(d, n);
    let mut dropped = d.recorder(Some("dropped"));
    for start in (0..n).step_by(2) {
        timed_pass(&mut dropped, &buffer, start).unwrap();
    }
    drop(dropped);
    let r = buffer.resolve_counter_range(0..u64::from(n)).unwrap();
    assert_eq!(r.count(SampleStatus::NotWritten), n as usize);
    let mut rec = d.recorder(None);
    for start in (0..n).step_by(2) {
        timed_pass(&mut rec, &buffer, start).unwrap();
    }
    d.submit(rec).unwrap().wait().unwrap();
    let r = buffer.resolve_counter_range(0..u64::from(n)).unwrap();
    assert!(r.all_written(), "{:?}", r.statuses());
    gpu.check();
}

/// Recorders on two threads: writing disjoint halves of one block, both
/// submit and every index is written; racing for the same indices while
/// both are open, never do both record every pass and submit (the loser is
/// refused at a write, or at submission after a true race).
#[test]
fn threads_writing_claimed_indices() {
    let Some(gpu) = timestamp_gpu() else {
        return;
    };
    let d = &gpu.device;
    let buffer = timestamps(d, 64);
    let barrier = std::sync::Barrier::new(2);
    std::thread::scope(|s| {
        for half in [0u32, 32] {
            let (buffer, barrier) = (&buffer, &barrier);
            s.spawn(move || {
                let mut rec = d.recorder(None);
                barrier.wait();
                for start in (half..half + 32).step_by(2) {
                    timed_pass(&mut rec, buffer, start).unwrap();
                }
                d.submit(rec).unwrap().wait().unwrap();
            });
        }
    });
    let r = buffer.resolve_counter_range(0..64).unwrap();
    assert!(r.all_written(), "{:?}", r.statuses());

    for round in 0..20 {
        buffer.reset().unwrap();
        let outcomes: Vec<bool> = std::thread::scope(|s| {
            let racers: Vec<_> = (0..2)
                .map(|_| {
                    let (buffer, barrier) = (&buffer, &barrier);
                    s.spawn(move || {
                        let mut rec = d.recorder(None);
                        barrier.wait();
                        let all = (0..64)
                            .step_by(2)
                            .all(|start| timed_pass(&mut rec, buffer, start).is_ok());
                        // Both still open here: each index was written by
                        // both while both were open, or refused to one.
                        barrier.wait();
                        let submitted = d.submit(rec).map(|s| s.wait().unwrap());
                        all && submitted.is_ok()
                    })
                })
                .collect();
            racers.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(
            !(outcomes[0] && outcomes[1]),
            "round {round}: both recorders wrote every index and submitted"
        );
        d.wait_idle().unwrap();
    }
    gpu.check();
}

/// Two recorders with claims on different blocks of one buffer, submitted
/// in the reverse of their recording order: both submit, every index is
/// written, and the one submitted first ran first on the GPU.
#[test]
fn claimed_pass_writes_submitted_in_reverse_order() {
    let Some(gpu) = timestamp_gpu() else {
        return;
    };
    let d = &gpu.device;
    let buffer = timestamps(d, 4 * 64);
    let mut first = d.recorder(Some("recorded first"));
    let mut second = d.recorder(Some("recorded second"));
    for start in (0..2 * 64).step_by(2) {
        timed_pass(&mut first, &buffer, start).unwrap();
        timed_pass(&mut second, &buffer, 2 * 64 + start).unwrap();
    }
    let s2 = d.submit(second).unwrap();
    let s1 = d.submit(first).unwrap();
    s2.wait().unwrap();
    s1.wait().unwrap();
    let r = buffer.resolve_counter_range(0..4 * 64).unwrap();
    assert!(r.all_written(), "{:?}", r.statuses());
    let t = r.timestamps().unwrap();
    // Submitted first, so run first: the second recorder's samples come
    // before the first's on the GPU.
    assert!(t[2 * 64 - 1].timestamp >= t[2 * 64].timestamp);
    gpu.check();
}

// Hostile use: leaked guards, other devices' objects, and what a caller
// hands out and never uses.

/// The label an [`InvalidInput::EncoderState`] error names between
/// backquotes, for the errors of a leaked pass.
fn leaked_pass_label(e: &Error) -> String {
    match e.invalid() {
        Some(InvalidInput::EncoderState(m)) => m
            .split('`')
            .nth(1)
            .unwrap_or_else(|| panic!("no label in {m}"))
            .to_string(),
        other => panic!("expected EncoderState naming a leaked pass, got {other:?} ({e})"),
    }
}

/// What an [`InvalidInput::ForeignObject`] error names.
fn foreign(e: &Error) -> &'static str {
    match e.invalid() {
        Some(InvalidInput::ForeignObject { what }) => what,
        other => panic!("expected ForeignObject, got {other:?} ({e})"),
    }
}

/// The hal error inside a profiler error.
fn counters(e: gpu_counters_profiler::ProfilerError) -> Error {
    match e {
        gpu_counters_profiler::ProfilerError::Counters(e) => e,
        other => panic!("expected a counters error, got {other:?}"),
    }
}

/// An 8×8 render target of `d`.
fn target(d: &Device) -> wgpu::TextureView {
    d.device()
        .create_texture(&wgpu::TextureDescriptor {
            label: Some("target"),
            size: wgpu::Extent3d {
                width: 8,
                height: 8,
                depth_or_array_layers: 1,
            },
            mip_level_count: 1,
            sample_count: 1,
            dimension: wgpu::TextureDimension::D2,
            format: wgpu::TextureFormat::Rgba8Unorm,
            usage: wgpu::TextureUsages::RENDER_ATTACHMENT,
            view_formats: &[],
        })
        .create_view(&Default::default())
}

/// A render pass descriptor labelled `label` clearing `view`.
fn render_desc<'a>(
    label: &'a str,
    attachments: &'a [Option<wgpu::RenderPassColorAttachment<'a>>],
) -> wgpu::RenderPassDescriptor<'a> {
    wgpu::RenderPassDescriptor {
        label: Some(label),
        color_attachments: attachments,
        ..Default::default()
    }
}

fn clear(view: &wgpu::TextureView) -> [Option<wgpu::RenderPassColorAttachment<'_>>; 1] {
    [Some(wgpu::RenderPassColorAttachment {
        view,
        depth_slice: None,
        resolve_target: None,
        ops: wgpu::Operations {
            load: wgpu::LoadOp::Clear(wgpu::Color::BLACK),
            store: wgpu::StoreOp::Store,
        },
    })]
}

/// The guards a wgpu recorder hands out, for the leak tests.
#[derive(Debug, Clone, Copy)]
enum Guard {
    ComputeStatistics,
    RenderStatistics,
}

/// Every guard kind leaked (`mem::forget`), with the profiler's statistics
/// off and on (scopes timed by a pass's own writes are
/// `gpu_counters::wgpu::Profiler`'s, tested in the facade crate): the recorder refuses every later pass and sample with a
/// typed error naming the leaked pass (nothing reaches wgpu's locked
/// encoder), `encoder()` still works without a wgpu error, submit refuses
/// the recording naming the pass, its samples resolve NotWritten (never
/// wgpu's 0), a statistics pass's samples can be written again at once, and
/// the frame is collected with the leaked pass's scope counted as
/// failed for the scope refused after the leak.
#[test]
fn every_leaked_guard_is_refused_at_submit_and_never_reads_zero() {
    use gpu_counters_hal::timeline::PassKind;
    use gpu_counters_profiler::{Profiler, ProfilerOptions};
    let Some(gpu) = timestamp_gpu() else {
        return;
    };
    let d = &gpu.device;
    let counts = d
        .features()
        .contains(wgpu::Features::PIPELINE_STATISTICS_QUERY);
    let view = target(d);
    let attachments = clear(&view);
    let ts = timestamps(d, 4);
    for guard in [Guard::ComputeStatistics, Guard::RenderStatistics] {
        for statistics in [false, true] {
            if !counts {
                eprintln!("{guard:?} skipped: the adapter lacks PIPELINE_STATISTICS_QUERY");
                continue;
            }
            let stats = Some(statistics_buffer(d, 4));
            let profiler = Profiler::new(
                d,
                ProfilerOptions {
                    statistics,
                    ..Default::default()
                },
            )
            .unwrap();
            let frame = profiler.begin_frame().unwrap();
            let mut rec = d.recorder(Some("leaks a guard"));
            let label = format!("leaked {guard:?}");
            let desc = wgpu::ComputePassDescriptor {
                label: Some(&label),
                timestamp_writes: None,
            };
            match guard {
                Guard::ComputeStatistics => std::mem::forget(
                    rec.begin_compute_pass_with_statistics(&desc, stats.as_ref().unwrap(), 0, 1)
                        .unwrap(),
                ),
                Guard::RenderStatistics => std::mem::forget(
                    rec.begin_render_pass_with_statistics(
                        &render_desc(&label, &attachments),
                        stats.as_ref().unwrap(),
                        0,
                        1,
                    )
                    .unwrap(),
                ),
            }
            let case = format!("{guard:?}, statistics {statistics}");
            // Every later pass or sample on the recorder: refused, naming it.
            let refused = [
                rec.compute_pass_timestamp_writes(&ts, Some(2), Some(3))
                    .err(),
                rec.render_pass_timestamp_writes(&ts, Some(2), Some(3))
                    .err(),
                rec.sample_counters(&ts, 2, TimestampGranularity::Precise)
                    .err(),
                frame
                    .scope(&mut rec, "scope after", PassKind::Scope)
                    .err()
                    .map(counters),
            ];
            for (k, e) in refused.into_iter().enumerate() {
                let e = e.unwrap_or_else(|| panic!("{case}: call {k} after the leak accepted"));
                assert_eq!(leaked_pass_label(&e), label, "{case}: call {k}: {e}");
            }
            if let Some(stats) = &stats {
                let e = rec
                    .begin_compute_pass_with_statistics(&desc, stats, 2, 3)
                    .err()
                    .expect("a counted pass after the leak");
                assert_eq!(leaked_pass_label(&e), label, "{case}: {e}");
            }
            // The caller's own commands: no wgpu error, no panic.
            drop(
                rec.encoder()
                    .begin_compute_pass(&wgpu::ComputePassDescriptor::default()),
            );
            let e = d
                .submit(rec)
                .err()
                .unwrap_or_else(|| panic!("{case}: submitted with a leaked pass"));
            assert_eq!(leaked_pass_label(&e), label, "{case}: {e}");
            if let Some(stats) = &stats {
                {
                    let r = stats.resolve_counter_range(0..2).unwrap();
                    assert_eq!(r.statuses(), &[SampleStatus::NotWritten; 2], "{case}");
                    for s in r.statistics().unwrap() {
                        assert_eq!(s.compute_kernel_invocations, COUNTER_ERROR_VALUE);
                        assert_eq!(s.vertex_invocations, COUNTER_ERROR_VALUE);
                    }
                    // No longer open: written again at once.
                    let mut again = d.recorder(None);
                    drop(
                        again
                            .begin_compute_pass_with_statistics(&desc, stats, 0, 1)
                            .unwrap(),
                    );
                    d.submit(again).unwrap().wait().unwrap();
                    let r = stats.resolve_counter_range(0..2).unwrap();
                    assert_eq!(r.statuses(), &[SampleStatus::Written; 2], "{case}");
                }
            }
            profiler.end_frame(frame, []).unwrap();
            let frames = profiler
                .wait_collect_all(std::time::Duration::from_secs(10))
                .unwrap();
            let f = &frames[0];
            assert!(f.scopes.is_empty(), "{case}: {:?}", f.scopes);
            // The scope refused after the leak: failed.
            assert_eq!(f.drops.abandoned, 0, "{case}: {:?}", f.drops);
            assert_eq!(f.drops.failed, 1, "{case}: {:?}", f.drops);
            assert_eq!(f.dropped_scopes, 1, "{case}");
            gpu.check();
        }
    }
    let r = ts.resolve_counter_range(0..4).unwrap();
    assert_eq!(r.statuses(), &[SampleStatus::NotWritten; 4]);
    gpu.check();
}

fn statistics_buffer(d: &Device, n: u32) -> CounterSampleBuffer {
    statistics(d, n)
}

/// A counted pass leaked with `mem::forget` (issue 40, 2): its two samples
/// resolve NotWritten with the error value, never Written with 0
/// invocations; submit refuses the recording naming the pass; the samples
/// are no longer open, so a new recording writes them.
#[test]
fn a_leaked_statistics_pass_never_reads_written_zero() {
    let gpu = gpu();
    let d = &gpu.device;
    if !d
        .features()
        .contains(wgpu::Features::PIPELINE_STATISTICS_QUERY)
    {
        eprintln!("skipped: the adapter lacks PIPELINE_STATISTICS_QUERY");
        return;
    }
    let stats = statistics(d, 2);
    let desc = wgpu::ComputePassDescriptor {
        label: Some("leaked counted pass"),
        timestamp_writes: None,
    };
    let mut rec = d.recorder(None);
    std::mem::forget(
        rec.begin_compute_pass_with_statistics(&desc, &stats, 0, 1)
            .unwrap(),
    );
    let submitted = d.submit(rec);
    if let Ok(s) = &submitted {
        let _ = s.wait();
    }
    let r = stats.resolve_counter_range(0..2).unwrap();
    assert_eq!(r.statuses(), &[SampleStatus::NotWritten; 2]);
    for s in r.statistics().unwrap() {
        assert_eq!(s.compute_kernel_invocations, COUNTER_ERROR_VALUE);
    }
    let e = submitted.expect_err("submitted with a leaked pass");
    assert_eq!(leaked_pass_label(&e), "leaked counted pass", "{e}");
    let mut again = d.recorder(None);
    drop(
        again
            .begin_compute_pass_with_statistics(&desc, &stats, 0, 1)
            .unwrap(),
    );
    d.submit(again).unwrap().wait().unwrap();
    let r = stats.resolve_counter_range(0..2).unwrap();
    assert_eq!(r.statuses(), &[SampleStatus::Written; 2]);
    assert_eq!(r.statistics().unwrap()[0].compute_kernel_invocations, 0);
    gpu.check();
}

/// A caller's own wgpu pass, begun on the recorder's encoder and leaked:
/// wgpu refuses to finish the encoder, and submit turns that into a typed
/// error (caught in an error scope, not handed to the device's error
/// handler); the recording's samples resolve NotWritten.
#[test]
fn a_callers_leaked_wgpu_pass_is_a_typed_error_at_submit() {
    let Some(gpu) = timestamp_gpu() else {
        return;
    };
    let d = &gpu.device;
    let buffer = timestamps(d, 2);
    let mut rec = d.recorder(None);
    timed_pass(&mut rec, &buffer, 0).unwrap();
    std::mem::forget(
        rec.encoder()
            .begin_compute_pass(&wgpu::ComputePassDescriptor::default()),
    );
    let e = d
        .submit(rec)
        .expect_err("submitted with a leaked wgpu pass");
    assert!(
        matches!(e.invalid(), Some(InvalidInput::EncoderState(_))),
        "{e}"
    );
    let r = buffer.resolve_counter_range(0..2).unwrap();
    assert_eq!(r.statuses(), &[SampleStatus::NotWritten; 2]);
    gpu.check();
}

/// A device with wgpu's default error handler (a wgpu error panics).
fn gpu_default_handler() -> Device {
    let adapter = shared_adapter();
    let features = adapter.features() & wanted();
    let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
        label: Some("default handler"),
        required_features: features,
        ..Default::default()
    }))
    .expect("request_device");
    Device::new(device, queue, adapter.get_info())
}

/// Under wgpu's default error handler, which panics on any wgpu error: a
/// leaked counted pass and a caller's leaked wgpu pass are each a typed
/// error from submit, never a panic.
#[test]
fn leaked_passes_under_the_default_handler_are_errors_not_panics() {
    let d = gpu_default_handler();
    if !d.features().contains(wgpu::Features::TIMESTAMP_QUERY) {
        eprintln!("skipped: the adapter lacks TIMESTAMP_QUERY");
        return;
    }
    if d.features()
        .contains(wgpu::Features::PIPELINE_STATISTICS_QUERY)
    {
        let stats = statistics(&d, 2);
        let mut rec = d.recorder(None);
        std::mem::forget(
            rec.begin_compute_pass_with_statistics(
                &wgpu::ComputePassDescriptor::default(),
                &stats,
                0,
                1,
            )
            .unwrap(),
        );
        let e = d.submit(rec).expect_err("submitted with a leaked pass");
        assert_eq!(leaked_pass_label(&e), "compute pass", "{e}");
    }
    let mut rec = d.recorder(None);
    std::mem::forget(
        rec.encoder()
            .begin_compute_pass(&wgpu::ComputePassDescriptor::default()),
    );
    assert!(d.submit(rec).is_err());
}

/// Two devices on the one adapter: every call that takes two objects
/// refuses the other device's with `ForeignObject` naming it, before
/// anything reaches wgpu (issue 40, 3): B's sample buffer, heap and
/// statistics buffer on A's recorder (between passes, as pass timestamp
/// writes, counted passes, beside blocks A's recorder claimed), B's
/// recorder submitted through A, and B's profiler frame with A's recorder.
/// B's samples never read Written (B's statistics never Written 0), and A's
/// recording still submits and writes exactly its own samples.
#[test]
fn objects_of_another_device_are_refused() {
    use gpu_counters_hal::timeline::PassKind;
    use gpu_counters_hal::CounterHeapDescriptor;
    use gpu_counters_profiler::{Profiler, ProfilerOptions};
    let (Some(a), Some(b)) = (timestamp_gpu(), timestamp_gpu()) else {
        return;
    };
    let (da, db) = (&a.device, &b.device);
    let encoder_timestamps = da
        .features()
        .contains(wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS);
    let counts = da
        .features()
        .contains(wgpu::Features::PIPELINE_STATISTICS_QUERY);
    let (ts_a, ts_b) = (timestamps(da, 8), timestamps(db, 8));
    let heap_b = db
        .make_counter_heap(&CounterHeapDescriptor::timestamp(8))
        .unwrap();
    let view = target(da);
    let attachments = clear(&view);
    let mut rec = da.recorder(Some("A"));
    // A's own writes first: the recorder holds claims on A's buffer.
    timed_pass(&mut rec, &ts_a, 0).unwrap();
    timed_pass(&mut rec, &ts_a, 2).unwrap();
    let sample_buffer = "counter sample buffer";
    assert_eq!(
        foreign(
            &rec.compute_pass_timestamp_writes(&ts_b, Some(4), Some(5))
                .unwrap_err()
        ),
        sample_buffer
    );
    assert_eq!(
        foreign(
            &rec.render_pass_timestamp_writes(&ts_b, Some(4), None)
                .unwrap_err()
        ),
        sample_buffer
    );
    assert_eq!(
        foreign(
            &rec.sample_counters(&ts_b, 4, TimestampGranularity::Precise)
                .unwrap_err()
        ),
        sample_buffer
    );
    assert_eq!(
        foreign(
            &rec.write_timestamp(TimestampGranularity::Precise, &heap_b, 4)
                .unwrap_err()
        ),
        "counter heap"
    );
    if counts {
        let stats_b = statistics(db, 4);
        let desc = wgpu::ComputePassDescriptor::default();
        assert_eq!(
            foreign(
                &rec.begin_compute_pass_with_statistics(&desc, &stats_b, 0, 1)
                    .err()
                    .unwrap()
            ),
            sample_buffer
        );
        assert_eq!(
            foreign(
                &rec.begin_render_pass_with_statistics(
                    &render_desc("foreign statistics", &attachments),
                    &stats_b,
                    2,
                    3
                )
                .err()
                .unwrap()
            ),
            sample_buffer
        );
        let r = stats_b.resolve_counter_range(0..4).unwrap();
        assert_eq!(r.statuses(), &[SampleStatus::NotWritten; 4]);
    }
    // B's profiler frames on A's recorder, statistics off and on.
    for statistics in [false, true] {
        if statistics && !counts {
            continue;
        }
        let profiler_b = Profiler::new(
            db,
            ProfilerOptions {
                statistics,
                ..Default::default()
            },
        )
        .unwrap();
        let frame_b = profiler_b.begin_frame().unwrap();
        if encoder_timestamps {
            assert_eq!(
                foreign(&counters(
                    frame_b
                        .scope(&mut rec, "foreign frame", PassKind::Scope)
                        .unwrap_err()
                )),
                "recorder"
            );
        }
        profiler_b.end_frame(frame_b, []).unwrap();
        let frames = profiler_b
            .wait_collect_all(std::time::Duration::from_secs(10))
            .unwrap();
        assert!(frames[0].scopes.is_empty());
        assert_eq!(frames[0].dropped_scopes, 0, "{:?}", frames[0].drops);
    }
    // B's recorder through A.
    let mut rec_b = db.recorder(Some("B"));
    timed_pass(&mut rec_b, &ts_b, 6).unwrap();
    assert_eq!(foreign(&da.submit(rec_b).unwrap_err()), "recorder");
    // A's recording is untouched by all of it.
    da.submit(rec).unwrap().wait().unwrap();
    let r = ts_a.resolve_counter_range(0..8).unwrap();
    let mut expected = [SampleStatus::NotWritten; 8];
    expected[..4].fill(SampleStatus::Written);
    assert_eq!(r.statuses(), &expected);
    let r = ts_b.resolve_counter_range(0..8).unwrap();
    assert_eq!(r.statuses(), &[SampleStatus::NotWritten; 8]);
    let r = heap_b.resolve_counter_range(0..8).unwrap();
    assert_eq!(r.statuses(), &[SampleStatus::NotWritten; 8]);
    a.check();
    b.check();
}

/// A's recorder over B's encoder (`Device::wrap`): wgpu 30 cannot tell
/// an encoder's device, so `wrap` cannot check it; submit does. Without A's
/// samples in it, nothing reaches either device as an error; with one, the
/// sample resolves NotWritten, and B's device reports A's query set in its
/// encoder when the encoder is finished (wgpu's own validation, on B).
#[test]
fn another_devices_encoder_is_refused_at_submit() {
    let (Some(a), Some(b)) = (timestamp_gpu(), timestamp_gpu()) else {
        return;
    };
    let (da, db) = (&a.device, &b.device);
    let rec = da.wrap(
        db.device()
            .create_command_encoder(&wgpu::CommandEncoderDescriptor::default()),
    );
    assert_eq!(foreign(&da.submit(rec).unwrap_err()), "command encoder");
    a.check();
    b.check();
    let ts_a = timestamps(da, 2);
    let mut rec = da.wrap(
        db.device()
            .create_command_encoder(&wgpu::CommandEncoderDescriptor::default()),
    );
    timed_pass(&mut rec, &ts_a, 0).unwrap();
    let submitted = da.submit(rec);
    if let Ok(s) = &submitted {
        let _ = s.wait();
    }
    let r = ts_a.resolve_counter_range(0..2).unwrap();
    assert_eq!(r.statuses(), &[SampleStatus::NotWritten; 2]);
    assert_eq!(foreign(&submitted.unwrap_err()), "command encoder");
    a.check();
    let errors = std::mem::take(&mut *b.errors.lock().unwrap());
    assert_eq!(errors.len(), 1, "{errors:?}");
    b.check();
    // A still records and submits.
    let mut rec = da.recorder(None);
    timed_pass(&mut rec, &ts_a, 0).unwrap();
    da.submit(rec).unwrap().wait().unwrap();
    assert!(ts_a.resolve_counter_range(0..2).unwrap().all_written());
    a.check();
}

/// Pass timestamp writes handed out and never used by a pass (issue 40,
/// docs): once their submission completed they resolve NotWritten with
/// the error value (not NotReady forever, never wgpu's 0), beside writes
/// that were used, and the indices can be written again.
#[test]
fn unused_pass_timestamp_writes_resolve_not_written_once_complete() {
    let Some(gpu) = timestamp_gpu() else {
        return;
    };
    let d = &gpu.device;
    let buffer = timestamps(d, 4);
    let mut rec = d.recorder(Some("unused writes"));
    timed_pass(&mut rec, &buffer, 0).unwrap();
    let _unused = rec
        .compute_pass_timestamp_writes(&buffer, Some(2), Some(3))
        .unwrap();
    d.submit(rec).unwrap().wait().unwrap();
    let expected = [
        SampleStatus::Written,
        SampleStatus::Written,
        SampleStatus::NotWritten,
        SampleStatus::NotWritten,
    ];
    let r = buffer.resolve_counter_range(0..4).unwrap();
    assert_eq!(r.statuses(), &expected);
    let t = r.timestamps().unwrap();
    assert_eq!(
        (t[2].timestamp, t[3].timestamp),
        (COUNTER_ERROR_VALUE, COUNTER_ERROR_VALUE)
    );
    let mut once = gpu_counters_hal::ResolvedTimestamps::default();
    buffer.resolve_timestamps_into(0..4, &mut once).unwrap();
    assert_eq!(
        once.get(2),
        Some((COUNTER_ERROR_VALUE, SampleStatus::NotWritten))
    );
    assert_eq!(
        once.get(3),
        Some((COUNTER_ERROR_VALUE, SampleStatus::NotWritten))
    );
    // Written again by a later recording.
    let mut rec = d.recorder(None);
    timed_pass(&mut rec, &buffer, 2).unwrap();
    d.submit(rec).unwrap().wait().unwrap();
    assert!(buffer.resolve_counter_range(0..4).unwrap().all_written());
    gpu.check();
}

/// An encoder-level profiler scope with the profiler's statistics on
/// (issue 40, docs): timed, with `statistics: None` (the recorder says it
/// cannot count there), never a made-up 0 and never dropped; the profiled
/// pass inside it counts its invocations exactly.
#[test]
fn an_encoder_scope_with_statistics_is_timed_without_them() {
    use gpu_counters_hal::timeline::PassKind;
    use gpu_counters_profiler::{Profiler, ProfilerOptions};
    let gpu = gpu();
    let d = &gpu.device;
    let needed = wgpu::Features::TIMESTAMP_QUERY
        | wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS
        | wgpu::Features::PIPELINE_STATISTICS_QUERY;
    if !d.features().contains(needed) {
        eprintln!("skipped: the adapter lacks {needed:?}");
        return;
    }
    let profiler = Profiler::new(
        d,
        ProfilerOptions {
            statistics: true,
            ..Default::default()
        },
    )
    .unwrap();
    let raw = d.device();
    let module = raw.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some("counted kernel"),
        source: wgpu::ShaderSource::Wgsl(kernel(4).into()),
    });
    let pipeline = raw.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some("counted pipeline"),
        layout: None,
        module: &module,
        entry_point: Some("main"),
        compilation_options: Default::default(),
        cache: None,
    });
    let data = raw.create_buffer(&wgpu::BufferDescriptor {
        label: Some("counted data"),
        size: 4,
        usage: wgpu::BufferUsages::STORAGE,
        mapped_at_creation: false,
    });
    let bind = raw.create_bind_group(&wgpu::BindGroupDescriptor {
        label: None,
        layout: &pipeline.get_bind_group_layout(0),
        entries: &[wgpu::BindGroupEntry {
            binding: 0,
            resource: data.as_entire_binding(),
        }],
    });
    let frame = profiler.begin_frame().unwrap();
    let mut rec = d.recorder(None);
    assert!(!rec.samples_statistics(), "wgpu counts only inside passes");
    let outer = frame.scope(&mut rec, "encoder", PassKind::Scope).unwrap();
    {
        let mut pass = rec
            .encoder()
            .begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("pass"),
                timestamp_writes: None,
            });
        pass.set_pipeline(&pipeline);
        pass.set_bind_group(0, &bind, &[]);
        pass.dispatch_workgroups(5, 1, 1);
    }
    outer.end(&mut rec).unwrap();
    let s = d.submit(rec).unwrap();
    profiler.end_frame(frame, [&s]).unwrap();
    s.wait().unwrap();
    let frames = profiler
        .wait_collect_all(std::time::Duration::from_secs(10))
        .unwrap();
    let f = &frames[0];
    assert_eq!(f.dropped_scopes, 0, "{:?}", f.drops);
    assert_eq!(f.scopes.len(), 1);
    assert_eq!(f.scopes[0].label, "encoder");
    assert_eq!(f.scopes[0].statistics, None);
    gpu.check();
}
