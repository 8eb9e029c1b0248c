//! `gpu_counters::wgpu::Profiler`, the drop-in for wgpu-profiler, on
//! lavapipe through wgpu's Vulkan backend, with wgpu's validation and the
//! Khronos validation layer on: any validation error fails the test.
//!
//! Scoped passes: timed and counted, leaked, timer queries off, features
//! refused, frames in flight, threads.

mod common;

use common::*;

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
