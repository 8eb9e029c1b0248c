//! The wgpu backend on lavapipe, through wgpu's Vulkan backend, with wgpu's
//! validation (and the Khronos validation layer where installed) on: any
//! validation error captured fails the test.
//!
//! Pipeline statistics: compute and render passes counted exactly, and
//! misuse and leaks of counted passes.

mod common;

use common::*;

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
