//! `gpu_counters::wgpu::Profiler`, the drop-in for wgpu-profiler, on
//! lavapipe through wgpu's Vulkan backend, with wgpu's validation and the
//! Khronos validation layer on: any validation error fails the test.

use gpu_counters::wgpu::{ProfiledFrame, Profiler, ProfilerSettings};
use gpu_counters::{cpu_monotonic_ns, Error, InvalidInput, ScopeResult};
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

/// The application's device and queue, a compute pipeline doubling a
/// buffer of `u32`s (64 invocations a workgroup), and captured errors.
struct App {
    device: wgpu::Device,
    queue: wgpu::Queue,
    pipeline: wgpu::ComputePipeline,
    bind: wgpu::BindGroup,
    data: wgpu::Buffer,
    scratch: wgpu::Buffer,
    errors: Arc<Mutex<Vec<String>>>,
}

impl App {
    /// Fails on any uncaptured wgpu error or logged validation error.
    fn check(&self) {
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

    fn encoder(&self, label: &str) -> wgpu::CommandEncoder {
        self.device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some(label) })
    }

    /// `groups` workgroups of the doubling kernel into `pass`.
    fn dispatch(&self, pass: &mut wgpu::ComputePass<'_>, groups: u32) {
        pass.set_pipeline(&self.pipeline);
        pass.set_bind_group(0, &self.bind, &[]);
        pass.dispatch_workgroups(groups, 1, 1);
    }

    /// Waits for the GPU and collects every frame ended so far.
    fn collect(&self, profiler: &Profiler) -> Vec<ProfiledFrame> {
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .expect("poll");
        profiler.collect().expect("collect")
    }
}

/// One wgpu adapter for the whole test binary (lavapipe where present).
fn shared_adapter() -> &'static wgpu::Adapter {
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
fn app_with(features: wgpu::Features) -> App {
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
fn features() -> wgpu::Features {
    wgpu::Features::TIMESTAMP_QUERY
        | wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS
        | wgpu::Features::PIPELINE_STATISTICS_QUERY
}

/// An app with [`features`] and a profiler on it with default settings;
/// `None` (the test says it skipped) where the adapter lacks them.
fn setup() -> Option<(App, Profiler)> {
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
fn assert_inside(scopes: &[ScopeResult], before: u64, after: u64) {
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

fn labels(frame: &ProfiledFrame) -> Vec<&str> {
    frame.scopes().iter().map(|s| s.label.as_str()).collect()
}

/// The sketch's user code: an encoder scope with a pass-through copy, a
/// nested scoped pass and a nested scope with a pass, submitted by the
/// application; every scope inside the submission's CPU window and its
/// parent, with the tree in wgpu-profiler's shape.
#[test]
fn nested_scopes_inside_their_cpu_window() {
    let Some((app, profiler)) = setup() else {
        return;
    };
    let mut encoder = app.encoder("frame");
    {
        let mut scope = profiler.scope("frame", &mut encoder);
        scope.copy_buffer_to_buffer(&app.data, 0, &app.scratch, 0, 1024);
        {
            let mut pass = scope.scoped_compute_pass("fill");
            app.dispatch(&mut pass, 16);
        }
        let mut inner = scope.scope("inner");
        let mut pass = inner.scoped_compute_pass("again");
        app.dispatch(&mut pass, 4);
    }
    let before = cpu_monotonic_ns();
    app.queue.submit([encoder.finish()]);
    profiler.end_frame().unwrap();
    let frames = app.collect(&profiler);
    let after = cpu_monotonic_ns();
    assert_eq!(frames.len(), 1);
    let f = &frames[0];
    assert_eq!(labels(f), ["frame", "fill", "inner", "again"]);
    let parents: Vec<_> = f.scopes().iter().map(|s| s.parent).collect();
    assert_eq!(parents, [None, Some(0), Some(0), Some(2)]);
    assert_eq!(f.result.drops.total(), 0);
    assert_eq!((f.root_scopes, f.root_scopes_not_run), (1, 0));
    assert!(f.ended_by_panic.is_empty());
    assert_inside(f.scopes(), before, after);
    let tree = f.to_timer_queries();
    assert_eq!(tree.len(), 1);
    assert_eq!(tree[0].label, "frame");
    let nested: Vec<_> = tree[0].nested_queries.iter().map(|q| &q.label).collect();
    assert_eq!(nested, ["fill", "inner"]);
    assert_eq!(tree[0].nested_queries[1].nested_queries[0].label, "again");
    assert!(tree[0].time.start <= tree[0].time.end);
    app.check();
}

/// A scope dropped without `end` ends (its result is there); `end` ends
/// one too, with no error.
#[test]
fn a_dropped_scope_ends() {
    let Some((app, profiler)) = setup() else {
        return;
    };
    let mut encoder = app.encoder("drops");
    let scope = profiler.scope("dropped", &mut encoder);
    drop(scope);
    let scope = profiler.scope("ended", &mut encoder);
    scope.end().expect("end");
    let pass = profiler.scoped_compute_pass("pass dropped", &mut encoder);
    drop(pass);
    let before = cpu_monotonic_ns();
    app.queue.submit([encoder.finish()]);
    profiler.end_frame().unwrap();
    let frames = app.collect(&profiler);
    let after = cpu_monotonic_ns();
    assert_eq!(labels(&frames[0]), ["dropped", "ended", "pass dropped"]);
    assert_eq!(frames[0].result.drops.total(), 0);
    assert_inside(frames[0].scopes(), before, after);
    app.check();
}

/// A scope dropped while its thread panics is ended and marked; its
/// parent, dropped in the same unwinding, too.
#[test]
fn a_scope_dropped_during_a_panic_is_marked() {
    let Some((app, profiler)) = setup() else {
        return;
    };
    let mut encoder = app.encoder("panics");
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut outer = profiler.scope("outer", &mut encoder);
        let _inner = outer.scope("inner");
        panic!("the application panics while recording");
    }));
    assert!(caught.is_err());
    let calm = profiler.scope("after", &mut encoder);
    drop(calm);
    app.queue.submit([encoder.finish()]);
    profiler.end_frame().unwrap();
    let frames = app.collect(&profiler);
    let f = &frames[0];
    assert_eq!(labels(f), ["outer", "inner", "after"]);
    assert_eq!(f.ended_by_panic, [0, 1]);
    assert_eq!(f.result.drops.total(), 0);
    app.check();
}

/// Two encoders, each with a root scope, submitted in one `queue.submit`
/// in the reverse of their recording order, then in two submits reversed:
/// every scope reported, inside the CPU window.
#[test]
fn two_encoders_in_one_submit_and_reversed() {
    let Some((app, profiler)) = setup() else {
        return;
    };
    for split in [false, true] {
        let mut a = app.encoder("a");
        let mut b = app.encoder("b");
        {
            let mut s = profiler.scope("a", &mut a);
            let mut p = s.scoped_compute_pass("a pass");
            app.dispatch(&mut p, 2);
        }
        {
            let mut s = profiler.scope("b", &mut b);
            let mut p = s.scoped_compute_pass("b pass");
            app.dispatch(&mut p, 2);
        }
        let before = cpu_monotonic_ns();
        if split {
            app.queue.submit([b.finish()]);
            app.queue.submit([a.finish()]);
        } else {
            app.queue.submit([b.finish(), a.finish()]);
        }
        profiler.end_frame().unwrap();
        let frames = app.collect(&profiler);
        let after = cpu_monotonic_ns();
        assert_eq!(frames.len(), 1);
        let f = &frames[0];
        assert_eq!(labels(f), ["a", "a pass", "b", "b pass"]);
        assert_eq!((f.root_scopes, f.root_scopes_not_run), (2, 0));
        assert_eq!(f.result.drops.total(), 0);
        assert_inside(f.scopes(), before, after);
        // Submitted first, b ran first.
        assert!(f.scopes()[2].end_ns <= f.scopes()[0].start_ns + 2 * f.scopes()[0].error_bound_ns);
    }
    app.check();
}

/// A frame with no scope, and a frame whose encoders were never
/// submitted, are reported as such: nothing ran, every scope counted.
#[test]
fn a_frame_with_no_submission_is_reported() {
    let Some((app, profiler)) = setup() else {
        return;
    };
    profiler.end_frame().unwrap();
    let mut encoder = app.encoder("never submitted");
    {
        let mut s = profiler.scope("unsubmitted", &mut encoder);
        let mut p = s.scoped_compute_pass("unsubmitted pass");
        app.dispatch(&mut p, 1);
    }
    drop(encoder);
    profiler.end_frame().unwrap();
    let frames = app.collect(&profiler);
    assert_eq!(frames.len(), 2);
    assert_eq!(frames[0].index() + 1, frames[1].index());
    assert!(frames[0].nothing_ran());
    assert_eq!(frames[0].root_scopes, 0);
    assert!(frames[1].nothing_ran());
    assert_eq!(
        (frames[1].root_scopes, frames[1].root_scopes_not_run),
        (1, 1)
    );
    assert_eq!(frames[1].result.drops.abandoned, 2);
    assert_eq!(frames[1].result.dropped_scopes, 2);
    app.check();
}

/// An encoder never submitted, beside one that was, in a frame whose query
/// sets an earlier frame wrote: its scopes are counted as abandoned, never
/// reported with a zero or the earlier frame's values.
#[test]
fn an_encoder_never_submitted_gives_no_zero_or_stale_value() {
    let Some((app, profiler)) = setup() else {
        return;
    };
    // Frame 0 writes the query slots the next frames reuse.
    for label in ["ran", "ran again"] {
        let mut e = app.encoder(label);
        drop(profiler.scope(label, &mut e));
        app.queue.submit([e.finish()]);
    }
    profiler.end_frame().unwrap();
    let first = app.collect(&profiler);
    assert_eq!(labels(&first[0]), ["ran", "ran again"]);
    // Frame 1 (empty) was begun with objects of its own; frame 2 takes
    // frame 0's back: its first scope's slots are those `ran` wrote.
    profiler.end_frame().unwrap();
    let mut never = app.encoder("never");
    drop(profiler.scope("never", &mut never));
    let mut ran = app.encoder("ran");
    drop(profiler.scope("submitted", &mut ran));
    app.queue.submit([ran.finish()]);
    drop(never);
    profiler.end_frame().unwrap();
    let frames = app.collect(&profiler);
    assert_eq!(frames.len(), 2);
    assert!(frames[0].nothing_ran());
    let f = &frames[1];
    assert_eq!(f.index(), 2);
    assert_eq!(labels(f), ["submitted"]);
    assert_eq!((f.root_scopes, f.root_scopes_not_run), (2, 1));
    assert_eq!(f.result.drops.abandoned, 1);
    assert_eq!(f.result.drops.total(), 1);
    app.check();
}

/// An encoder submitted after its frame ended: counted as not run (its
/// queries were read before it ran), no wgpu validation error, and the
/// frames after it are right (its frame's objects are not reused).
#[test]
fn a_late_submission_is_counted_and_harmless() {
    let Some((app, profiler)) = setup() else {
        return;
    };
    let mut late = app.encoder("late");
    {
        let mut s = profiler.scope("late", &mut late);
        let mut p = s.scoped_compute_pass("late pass");
        app.dispatch(&mut p, 1);
    }
    profiler.end_frame().unwrap();
    app.queue.submit([late.finish()]);
    let frames = app.collect(&profiler);
    assert_eq!(frames.len(), 1);
    assert!(frames[0].scopes().is_empty());
    assert_eq!(frames[0].root_scopes_not_run, 1);
    assert_eq!(frames[0].result.drops.abandoned, 2);
    for k in 0..3 {
        let mut e = app.encoder("next");
        {
            let mut s = profiler.scope(format!("next {k}"), &mut e);
            let mut p = s.scoped_compute_pass("next pass");
            app.dispatch(&mut p, 1);
        }
        let before = cpu_monotonic_ns();
        app.queue.submit([e.finish()]);
        profiler.end_frame().unwrap();
        let frames = app.collect(&profiler);
        let after = cpu_monotonic_ns();
        assert_eq!(
            labels(&frames[0]),
            [format!("next {k}").as_str(), "next pass"]
        );
        assert_eq!(frames[0].result.drops.total(), 0);
        assert_inside(frames[0].scopes(), before, after);
    }
    app.check();
}

/// A scope still open when its frame ends is counted as not ended, and
/// its `end` says so.
#[test]
fn a_scope_open_at_end_frame_is_counted() {
    let Some((app, profiler)) = setup() else {
        return;
    };
    let mut encoder = app.encoder("open");
    let scope = profiler.scope("open", &mut encoder);
    profiler.end_frame().unwrap();
    let err = scope.end().expect_err("ended after its frame");
    assert!(
        matches!(&err, Error::Invalid(InvalidInput::EncoderState(m)) if m.contains("`open`")),
        "{err}"
    );
    app.queue.submit([encoder.finish()]);
    let frames = app.collect(&profiler);
    assert!(frames[0].scopes().is_empty());
    assert_eq!(frames[0].result.drops.not_ended, 1);
    assert_eq!(frames[0].result.drops.total(), 1);
    app.check();
}

/// Past `max_scopes_per_frame`, scopes are counted as over capacity, the
/// others reported; exact counts over several frames.
#[test]
fn exact_scope_counts_with_a_full_frame() {
    let app = app_with(features());
    if !app.device.features().contains(features()) {
        eprintln!("skipped: the adapter lacks {:?}", features());
        return;
    }
    let settings = ProfilerSettings {
        max_scopes_per_frame: 3,
        ..Default::default()
    };
    let profiler = Profiler::new(&app.device, &app.queue, settings).unwrap();
    for frame in 0..3 {
        let mut e = app.encoder("full");
        {
            let mut outer = profiler.scope("outer", &mut e);
            for k in 0..4 {
                let mut p = outer.scoped_compute_pass(format!("pass {k}"));
                app.dispatch(&mut p, 1);
            }
        }
        app.queue.submit([e.finish()]);
        profiler.end_frame().unwrap();
        let frames = app.collect(&profiler);
        assert_eq!(frames.len(), 1);
        assert_eq!(frames[0].index(), frame);
        assert_eq!(labels(&frames[0]), ["outer", "pass 0", "pass 1"]);
        assert_eq!(frames[0].result.drops.over_capacity, 2);
        assert_eq!(frames[0].result.dropped_scopes, 2);
    }
    app.check();
}

/// With statistics on, a scoped pass counts its invocations exactly: 5
/// workgroups of 64.
#[test]
fn pass_statistics_count_exactly() {
    let Some((app, _)) = setup() else {
        return;
    };
    let settings = ProfilerSettings {
        pipeline_statistics: true,
        ..Default::default()
    };
    let profiler = Profiler::new(&app.device, &app.queue, settings).unwrap();
    let mut e = app.encoder("stats");
    {
        let mut s = profiler.scope("frame", &mut e);
        let mut p = s.scoped_compute_pass("five groups");
        app.dispatch(&mut p, 5);
    }
    app.queue.submit([e.finish()]);
    profiler.end_frame().unwrap();
    let frames = app.collect(&profiler);
    let scopes = frames[0].scopes();
    assert!(
        scopes[0].statistics.is_none(),
        "an encoder scope is timed only"
    );
    let stats = scopes[1]
        .statistics
        .as_deref()
        .expect("the pass's statistics");
    assert_eq!(stats.compute_kernel_invocations, 5 * 64);
    assert_eq!(
        stats.tessellation_input_patches,
        gpu_counters::COUNTER_ERROR_VALUE
    );
    app.check();
}

/// An owning scope gives its encoder back; scopes in it nest.
#[test]
fn an_owning_scope_gives_its_encoder_back() {
    let Some((app, profiler)) = setup() else {
        return;
    };
    let mut scope = profiler.owning_scope("owned", app.encoder("owned"));
    {
        let mut p = scope.scoped_compute_pass("owned pass");
        app.dispatch(&mut p, 1);
    }
    let encoder = scope.into_inner();
    app.queue.submit([encoder.finish()]);
    profiler.end_frame().unwrap();
    let frames = app.collect(&profiler);
    assert_eq!(labels(&frames[0]), ["owned", "owned pass"]);
    assert_eq!(frames[0].scopes()[1].parent, Some(0));
    app.check();
}

/// A device without timestamps: the profiler is refused, naming the
/// feature.
#[test]
fn a_device_without_timestamps_is_refused_by_name() {
    let app = app_with(wgpu::Features::empty());
    let err = Profiler::new(&app.device, &app.queue, ProfilerSettings::default())
        .expect_err("no TIMESTAMP_QUERY");
    assert!(
        matches!(&err, Error::Invalid(InvalidInput::Unsupported(m)) if m.contains("TIMESTAMP_QUERY")),
        "{err}"
    );
    let err = Profiler::new(
        &app.device,
        &app.queue,
        ProfilerSettings {
            max_scopes_per_frame: 0,
            ..Default::default()
        },
    )
    .expect_err("no scope per frame");
    assert!(
        matches!(&err, Error::Invalid(InvalidInput::Argument(m)) if m.contains("max_scopes_per_frame")),
        "{err}"
    );
    app.check();
}

/// Scopes begun on four threads' encoders in one frame, submitted together
/// by the application: all reported, each with its thread's name, nested
/// on its own encoder.
#[test]
fn scopes_from_threads_into_one_frame() {
    let Some((app, profiler)) = setup() else {
        return;
    };
    let buffers: Vec<wgpu::CommandBuffer> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|t| {
                let (app, profiler) = (&app, &profiler);
                std::thread::Builder::new()
                    .name(format!("recorder {t}"))
                    .spawn_scoped(s, move || {
                        let mut e = app.encoder("thread");
                        {
                            let mut scope = profiler.scope(format!("t{t}"), &mut e);
                            let mut p = scope.scoped_compute_pass(format!("t{t} pass"));
                            app.dispatch(&mut p, 1);
                        }
                        e.finish()
                    })
                    .unwrap()
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let before = cpu_monotonic_ns();
    app.queue.submit(buffers);
    profiler.end_frame().unwrap();
    let frames = app.collect(&profiler);
    let after = cpu_monotonic_ns();
    let f = &frames[0];
    assert_eq!(f.scopes().len(), 8);
    assert_eq!((f.root_scopes, f.root_scopes_not_run), (4, 0));
    assert_eq!(f.result.drops.total(), 0);
    assert_inside(f.scopes(), before, after);
    for (i, s) in f.scopes().iter().enumerate() {
        let t = s
            .thread
            .strip_prefix("recorder ")
            .expect("the thread's name");
        match s.parent {
            None => assert_eq!(s.label, format!("t{t}")),
            Some(p) => {
                assert_eq!(s.label, format!("t{t} pass"));
                assert_eq!(f.scopes()[p].thread, s.thread, "scope {i}");
            }
        }
    }
    app.check();
}

/// Scopes inside a scoped pass, nested, timed by timestamps written in the
/// pass: each inside its parent and the CPU window.
#[test]
fn scopes_inside_a_pass_nest() {
    let wanted = features() | wgpu::Features::TIMESTAMP_QUERY_INSIDE_PASSES;
    let app = app_with(wanted);
    if !app.device.features().contains(wanted) {
        eprintln!("skipped: the adapter lacks {wanted:?}");
        return;
    }
    let profiler = Profiler::new(&app.device, &app.queue, Default::default()).unwrap();
    let mut e = app.encoder("in pass");
    {
        let mut pass = profiler.scoped_compute_pass("pass", &mut e);
        {
            let mut first = pass.scope("first");
            app.dispatch(&mut first, 2);
            let mut inner = first.scope("inner");
            app.dispatch(&mut inner, 1);
        }
        let mut second = pass.scope("second");
        app.dispatch(&mut second, 1);
    }
    let before = cpu_monotonic_ns();
    app.queue.submit([e.finish()]);
    profiler.end_frame().unwrap();
    let frames = app.collect(&profiler);
    let after = cpu_monotonic_ns();
    let f = &frames[0];
    assert_eq!(labels(f), ["pass", "first", "inner", "second"]);
    let parents: Vec<_> = f.scopes().iter().map(|s| s.parent).collect();
    assert_eq!(parents, [None, Some(0), Some(1), Some(0)]);
    assert_eq!(f.result.drops.total(), 0);
    assert_inside(f.scopes(), before, after);
    app.check();
}

/// A scoped render pass inside an encoder scope: timed, its statistics
/// counting one triangle's three vertex invocations, the descriptor's
/// attachments kept.
#[test]
fn a_scoped_render_pass_is_timed_and_counted() {
    let Some((app, _)) = setup() else {
        return;
    };
    let settings = ProfilerSettings {
        pipeline_statistics: true,
        ..Default::default()
    };
    let profiler = Profiler::new(&app.device, &app.queue, settings).unwrap();
    let format = wgpu::TextureFormat::Rgba8Unorm;
    let module = app
        .device
        .create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("triangle"),
            source: wgpu::ShaderSource::Wgsl(
                "@vertex fn vs(@builtin(vertex_index) i: u32) -> @builtin(position) vec4<f32> {
                     let x = f32(i32(i) - 1);
                     let y = f32(i32(i & 1u) * 2 - 1);
                     return vec4<f32>(x, y, 0.0, 1.0);
                 }
                 @fragment fn fs() -> @location(0) vec4<f32> { return vec4<f32>(1.0); }"
                    .into(),
            ),
        });
    let pipeline = app
        .device
        .create_render_pipeline(&wgpu::RenderPipelineDescriptor {
            label: Some("triangle"),
            layout: None,
            vertex: wgpu::VertexState {
                module: &module,
                entry_point: Some("vs"),
                compilation_options: Default::default(),
                buffers: &[],
            },
            primitive: Default::default(),
            depth_stencil: None,
            multisample: Default::default(),
            fragment: Some(wgpu::FragmentState {
                module: &module,
                entry_point: Some("fs"),
                compilation_options: Default::default(),
                targets: &[Some(format.into())],
            }),
            multiview_mask: None,
            cache: None,
        });
    let target = app.device.create_texture(&wgpu::TextureDescriptor {
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
    let mut e = app.encoder("render");
    {
        let mut scope = profiler.scope("frame", &mut e);
        let attachments = [Some(wgpu::RenderPassColorAttachment {
            view: &view,
            depth_slice: None,
            resolve_target: None,
            ops: wgpu::Operations {
                load: wgpu::LoadOp::Clear(wgpu::Color::BLACK),
                store: wgpu::StoreOp::Store,
            },
        })];
        let mut pass = scope.scoped_render_pass(
            "triangle",
            wgpu::RenderPassDescriptor {
                color_attachments: &attachments,
                ..Default::default()
            },
        );
        pass.set_pipeline(&pipeline);
        pass.draw(0..3, 0..1);
    }
    let before = cpu_monotonic_ns();
    app.queue.submit([e.finish()]);
    profiler.end_frame().unwrap();
    let frames = app.collect(&profiler);
    let after = cpu_monotonic_ns();
    let f = &frames[0];
    assert_eq!(labels(f), ["frame", "triangle"]);
    assert_eq!(f.result.drops.total(), 0);
    assert_inside(f.scopes(), before, after);
    let stats = f.scopes()[1].statistics.as_deref().expect("statistics");
    assert_eq!(stats.vertex_invocations, 3);
    assert_eq!(stats.compute_kernel_invocations, 0);
    app.check();
}

/// A scope guard leaked with `mem::forget` (debug groups off: its pushed
/// group would stay open in the encoder, which wgpu refuses to finish): it
/// never ends, so it is counted as not ended, and the frames after it are
/// right (its frame's objects are not reused).
#[test]
fn a_leaked_scope_is_counted_as_not_ended() {
    let Some((app, _)) = setup() else {
        return;
    };
    let settings = ProfilerSettings {
        enable_debug_groups: false,
        ..Default::default()
    };
    let profiler = Profiler::new(&app.device, &app.queue, settings).unwrap();
    let mut e = app.encoder("leaks");
    drop(profiler.scope("kept", &mut e));
    std::mem::forget(profiler.scope("leaked", &mut e));
    app.queue.submit([e.finish()]);
    profiler.end_frame().unwrap();
    let frames = app.collect(&profiler);
    assert_eq!(labels(&frames[0]), ["kept"]);
    assert_eq!(frames[0].result.drops.not_ended, 1);
    assert_eq!(frames[0].result.drops.total(), 1);
    for _ in 0..2 {
        let mut e = app.encoder("after");
        drop(profiler.scope("after", &mut e));
        app.queue.submit([e.finish()]);
        profiler.end_frame().unwrap();
        let frames = app.collect(&profiler);
        assert_eq!(labels(&frames[0]), ["after"]);
        assert_eq!(frames[0].result.drops.total(), 0);
    }
    app.check();
}

/// Timer queries off, on a device without timestamps: the profiler works
/// (debug groups only), and every scope is counted as failed, none
/// reported with a time.
#[test]
fn timer_queries_off_count_every_scope() {
    let app = app_with(wgpu::Features::empty());
    let settings = ProfilerSettings {
        enable_timer_queries: false,
        ..Default::default()
    };
    let profiler = Profiler::new(&app.device, &app.queue, settings).unwrap();
    let mut e = app.encoder("untimed");
    {
        let mut scope = profiler.scope("frame", &mut e);
        let mut p = scope.scoped_compute_pass("pass");
        app.dispatch(&mut p, 1);
    }
    app.queue.submit([e.finish()]);
    profiler.end_frame().unwrap();
    let frames = app.collect(&profiler);
    assert!(frames[0].scopes().is_empty());
    assert_eq!(
        (frames[0].root_scopes, frames[0].root_scopes_not_run),
        (1, 0)
    );
    assert_eq!(frames[0].result.drops.failed, 2);
    assert_eq!(frames[0].result.drops.total(), 2);
    app.check();
}

/// Statistics asked for on a device without them: refused, naming the
/// feature.
#[test]
fn statistics_without_the_feature_are_refused_by_name() {
    let app = app_with(wgpu::Features::TIMESTAMP_QUERY);
    if !app
        .device
        .features()
        .contains(wgpu::Features::TIMESTAMP_QUERY)
    {
        eprintln!("skipped: the adapter lacks TIMESTAMP_QUERY");
        return;
    }
    let settings = ProfilerSettings {
        pipeline_statistics: true,
        ..Default::default()
    };
    let err = Profiler::new(&app.device, &app.queue, settings).expect_err("no statistics");
    assert!(
        matches!(&err, Error::Invalid(InvalidInput::Unsupported(m)) if m.contains("PIPELINE_STATISTICS_QUERY")),
        "{err}"
    );
    app.check();
}

/// With `TIMESTAMP_QUERY` alone (no timestamps between passes), scoped
/// passes are timed by their own timestamp writes, and a scope over the
/// encoder is counted as failed, its pass reported at the top.
#[test]
fn passes_need_only_pass_timestamps() {
    let app = app_with(wgpu::Features::TIMESTAMP_QUERY);
    if !app
        .device
        .features()
        .contains(wgpu::Features::TIMESTAMP_QUERY)
    {
        eprintln!("skipped: the adapter lacks TIMESTAMP_QUERY");
        return;
    }
    let profiler = Profiler::new(&app.device, &app.queue, Default::default()).unwrap();
    let mut e = app.encoder("passes only");
    {
        let mut scope = profiler.scope("frame", &mut e);
        let mut p = scope.scoped_compute_pass("fill");
        app.dispatch(&mut p, 2);
    }
    let before = cpu_monotonic_ns();
    app.queue.submit([e.finish()]);
    profiler.end_frame().unwrap();
    let frames = app.collect(&profiler);
    let after = cpu_monotonic_ns();
    let f = &frames[0];
    assert_eq!(labels(f), ["fill"]);
    assert_eq!(f.scopes()[0].parent, None);
    assert_eq!(f.result.drops.failed, 1);
    assert_eq!(f.result.drops.total(), 1);
    assert_inside(f.scopes(), before, after);
    app.check();
}

/// Three frames ended before any is collected, then three more reusing
/// their objects: each collected once, in order, with its own scopes
/// inside its own CPU window.
#[test]
fn frames_in_flight_are_collected_in_order() {
    let Some((app, profiler)) = setup() else {
        return;
    };
    for round in 0..2u64 {
        let mut windows = Vec::new();
        for k in 0..3 {
            let mut e = app.encoder("in flight");
            {
                let mut s = profiler.scope(format!("frame {round} {k}"), &mut e);
                let mut p = s.scoped_compute_pass("pass");
                app.dispatch(&mut p, 1 + k);
            }
            let before = cpu_monotonic_ns();
            app.queue.submit([e.finish()]);
            profiler.end_frame().unwrap();
            app.device
                .poll(wgpu::PollType::wait_indefinitely())
                .unwrap();
            windows.push((before, cpu_monotonic_ns()));
        }
        let frames = profiler.collect().unwrap();
        assert_eq!(frames.len(), 3);
        for (k, (f, (before, after))) in frames.iter().zip(windows).enumerate() {
            assert_eq!(f.index(), round * 3 + k as u64);
            assert_eq!(labels(f), [format!("frame {round} {k}").as_str(), "pass"]);
            assert_eq!(f.result.drops.total(), 0);
            assert_inside(f.scopes(), before, after);
        }
    }
    assert!(profiler.collect().unwrap().is_empty());
    app.check();
}

/// A scoped pass leaked with `mem::forget`, alone on its encoder and beside
/// a kept pass in a second frame: wgpu keeps a leaked pass's encoder locked,
/// so the application drops it unsubmitted. Each frame is still collected,
/// the leaked pass's scope counted (open at `end_frame`: not ended), never
/// reported with a time, never a zero; the kept pass on its own encoder is
/// timed inside its CPU window; later frames over the pooled objects are
/// clean, with no validation error.
#[test]
fn a_leaked_scoped_pass_is_counted_and_later_frames_are_clean() {
    let Some((app, profiler)) = setup() else {
        return;
    };
    let mut leaking = app.encoder("leaks");
    std::mem::forget(profiler.scoped_compute_pass("leaked", &mut leaking));
    drop(leaking);
    profiler.end_frame().unwrap();
    let frames = app.collect(&profiler);
    assert_eq!(frames.len(), 1);
    assert!(labels(&frames[0]).is_empty(), "{:?}", labels(&frames[0]));
    assert_eq!(
        frames[0].result.drops.total(),
        1,
        "{:?}",
        frames[0].result.drops
    );
    assert_eq!(
        frames[0].result.drops.not_ended, 1,
        "{:?}",
        frames[0].result.drops
    );

    let mut kept = app.encoder("kept");
    {
        let mut pass = profiler.scoped_compute_pass("kept", &mut kept);
        app.dispatch(&mut pass, 1);
    }
    let mut leaking = app.encoder("leaks again");
    std::mem::forget(profiler.scoped_compute_pass("leaked", &mut leaking));
    drop(leaking);
    let before = gpu_counters::cpu_monotonic_ns();
    app.queue.submit([kept.finish()]);
    profiler.end_frame().unwrap();
    let frames = app.collect(&profiler);
    let after = gpu_counters::cpu_monotonic_ns();
    assert_eq!(labels(&frames[0]), ["kept"]);
    assert_inside(frames[0].scopes(), before, after);
    assert_eq!(
        frames[0].result.drops.total(),
        1,
        "{:?}",
        frames[0].result.drops
    );
    for _ in 0..2 {
        let mut e = app.encoder("after");
        drop(profiler.scoped_compute_pass("after", &mut e));
        app.queue.submit([e.finish()]);
        profiler.end_frame().unwrap();
        let frames = app.collect(&profiler);
        assert_eq!(labels(&frames[0]), ["after"]);
        assert_eq!(frames[0].result.drops.total(), 0);
    }
    app.check();
}

/// Scoped passes from four threads into one frame, each thread on an
/// encoder of its own with several root passes: every pass is one scope
/// with its own label, inside the one submission's CPU window, in its
/// thread's recording order, none dropped; a frame too small for them
/// drops the rest, each counted in `over_capacity`, and reports no pass
/// twice.
#[test]
fn scoped_passes_from_threads_in_recording_order() {
    let Some((app, _)) = setup() else {
        return;
    };
    const THREADS: usize = 4;
    const PASSES: usize = 3;
    for capacity in [(THREADS * PASSES) as u32, 5] {
        let settings = ProfilerSettings {
            max_scopes_per_frame: capacity,
            ..Default::default()
        };
        let profiler = Profiler::new(&app.device, &app.queue, settings).unwrap();
        let buffers: Vec<wgpu::CommandBuffer> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..THREADS)
                .map(|t| {
                    let (app, profiler) = (&app, &profiler);
                    std::thread::Builder::new()
                        .name(format!("recorder {t}"))
                        .spawn_scoped(s, move || {
                            let mut e = app.encoder("thread");
                            for k in 0..PASSES {
                                let mut p =
                                    profiler.scoped_compute_pass(format!("t{t} p{k}"), &mut e);
                                app.dispatch(&mut p, 1);
                            }
                            e.finish()
                        })
                        .unwrap()
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let before = cpu_monotonic_ns();
        app.queue.submit(buffers);
        profiler.end_frame().unwrap();
        let frames = app.collect(&profiler);
        let after = cpu_monotonic_ns();
        assert_eq!(frames.len(), 1);
        let f = &frames[0];
        let kept = (capacity as usize).min(THREADS * PASSES);
        assert_eq!(f.scopes().len(), kept, "capacity {capacity}");
        assert_eq!(
            f.result.drops.over_capacity as usize,
            THREADS * PASSES - kept,
            "{:?}",
            f.result.drops
        );
        assert_eq!(f.result.drops.total() as usize, THREADS * PASSES - kept);
        assert_inside(f.scopes(), before, after);
        let mut seen = std::collections::HashSet::new();
        for t in 0..THREADS {
            let thread = format!("recorder {t}");
            let mine: Vec<_> = f
                .scopes()
                .iter()
                .filter(|s| s.thread.as_str() == thread)
                .collect();
            for s in &mine {
                assert!(s.label.starts_with(&format!("t{t} p")), "{}", s.label);
                assert!(seen.insert(s.label.to_string()), "{} twice", s.label);
            }
            // In the thread's recording order: pass k before pass k + 1,
            // on the GPU too (one encoder runs in order).
            for w in mine.windows(2) {
                assert!(
                    w[0].label.as_str() < w[1].label.as_str(),
                    "{} {}",
                    w[0].label,
                    w[1].label
                );
                assert!(w[0].end_ns <= w[1].start_ns + w[0].error_bound_ns + w[1].error_bound_ns);
            }
            if capacity as usize >= THREADS * PASSES {
                assert_eq!(mine.len(), PASSES, "{thread}");
            }
        }
    }
    app.check();
}
