//! A wgpu program, run unchanged under the layer: its labelled compute and
//! render passes and its debug group (wgpu emits them as debug-utils
//! labels when its instance has `InstanceFlags::DEBUG`) appear as scopes
//! named by their labels, nested as recorded, with the passes inside them;
//! wgpu's timeline-semaphore submissions are timed.

mod common;

use common::{record, scopes, Setup};

const SHADER: &str = "
@group(0) @binding(0) var<storage, read_write> data: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    data[id.x] = data[id.x] * 3u + id.x;
}

@vertex
fn vs(@builtin(vertex_index) i: u32) -> @builtin(position) vec4<f32> {
    let x = f32(i32(i) - 1);
    let y = f32(i32(i & 1u) * 2 - 1);
    return vec4<f32>(x, y, 0.0, 1.0);
}

@fragment
fn fs() -> @location(0) vec4<f32> {
    return vec4<f32>(1.0, 0.5, 0.25, 1.0);
}
";

/// The wgpu program: a debug group around a labelled compute pass and a
/// labelled render pass, submitted and waited for, three times.
fn wgpu_app() {
    let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
    desc.backends = wgpu::Backends::VULKAN;
    desc.flags = wgpu::InstanceFlags::DEBUG;
    let instance = wgpu::Instance::new(desc);
    let adapters = pollster::block_on(instance.enumerate_adapters(wgpu::Backends::VULKAN));
    let adapter = adapters
        .iter()
        .find(|a| a.get_info().device_type == wgpu::DeviceType::Cpu)
        .or(adapters.first())
        .expect("a Vulkan adapter (lavapipe)");
    let (device, queue) =
        pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor::default()))
            .expect("request_device");
    let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some("shader"),
        source: wgpu::ShaderSource::Wgsl(SHADER.into()),
    });
    let buffer = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("data"),
        size: 4 * 256,
        usage: wgpu::BufferUsages::STORAGE,
        mapped_at_creation: false,
    });
    let compute = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some("compute"),
        layout: None,
        module: &module,
        entry_point: Some("main"),
        compilation_options: Default::default(),
        cache: None,
    });
    let bind = device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: None,
        layout: &compute.get_bind_group_layout(0),
        entries: &[wgpu::BindGroupEntry {
            binding: 0,
            resource: buffer.as_entire_binding(),
        }],
    });
    let format = wgpu::TextureFormat::Rgba8Unorm;
    let target = device.create_texture(&wgpu::TextureDescriptor {
        label: Some("target"),
        size: wgpu::Extent3d {
            width: 64,
            height: 64,
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
    let render = device.create_render_pipeline(&wgpu::RenderPipelineDescriptor {
        label: Some("render"),
        layout: None,
        vertex: wgpu::VertexState {
            module: &module,
            entry_point: Some("vs"),
            compilation_options: Default::default(),
            buffers: &[],
        },
        fragment: Some(wgpu::FragmentState {
            module: &module,
            entry_point: Some("fs"),
            compilation_options: Default::default(),
            targets: &[Some(format.into())],
        }),
        primitive: Default::default(),
        depth_stencil: None,
        multisample: Default::default(),
        multiview_mask: None,
        cache: None,
    });
    for _ in 0..3 {
        let mut encoder = device.create_command_encoder(&Default::default());
        encoder.push_debug_group("wgpu-group");
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("wgpu-compute"),
                timestamp_writes: None,
            });
            pass.set_pipeline(&compute);
            pass.set_bind_group(0, &bind, &[]);
            pass.dispatch_workgroups(4, 1, 1);
        }
        {
            let mut pass = encoder.begin_render_pass(&wgpu::RenderPassDescriptor {
                label: Some("wgpu-render"),
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
            });
            pass.set_pipeline(&render);
            pass.draw(0..3, 0..1);
        }
        encoder.pop_debug_group();
        queue.submit([encoder.finish()]);
        device
            .poll(wgpu::PollType::wait_indefinitely())
            .expect("poll");
    }
    println!("APP done");
}

#[test]
fn app_entry() {
    if std::env::var(common::APP_VAR).as_deref() == Ok("wgpu") {
        wgpu_app();
    }
}

#[test]
fn a_wgpu_programs_labelled_passes_are_scopes_named_by_their_labels() {
    // Validation off for this program: with InstanceFlags::DEBUG (which
    // turns wgpu's labels on) naga writes an OpSource of WGSL, which the
    // installed validation layer's SPIR-V validator does not know (its
    // only messages here are UNASSIGNED-CoreValidation-Shader-
    // InconsistentSpirv, one per shader stage). The layer under validation
    // is checked on the other programs.
    let setup = Setup {
        validation: false,
        ..Setup::default()
    };
    let run = record(common::app("wgpu", &[]), &setup);
    run.assert_clean();
    assert_eq!(run.app("done").len(), 1);
    let losses: Vec<_> = run.summary.drops.injected_losses().collect();
    assert!(losses.is_empty(), "{losses:?}");
    let labels: Vec<(&str, u64)> = run
        .summary
        .vulkan
        .labels
        .iter()
        .map(|l| (l.name.as_str(), l.count))
        .collect();
    for name in ["wgpu-group", "wgpu-compute", "wgpu-render"] {
        assert!(labels.contains(&(name, 3)), "{name} in {labels:?}");
    }
    let Some(d) = run.dump("a_wgpu_programs_labelled_passes_are_scopes_named_by_their_labels")
    else {
        return;
    };
    let all = scopes(&d);
    let of = |kind: &str, name: &str| -> Vec<&common::Scope> {
        all.iter()
            .filter(|s| s.kind == kind && s.name == name)
            .collect()
    };
    let groups = of("label", "wgpu-group");
    assert_eq!(groups.len(), 3);
    for g in &groups {
        assert_eq!(g.depth, 1);
        for (label, pass) in [("wgpu-compute", "compute"), ("wgpu-render", "render pass")] {
            let l = of("label", label)
                .into_iter()
                .find(|l| l.start >= g.start && l.end <= g.end)
                .unwrap_or_else(|| panic!("{label} inside {g:?}"));
            assert_eq!(l.depth, 2);
            assert!(
                all.iter()
                    .any(|p| p.kind == pass && p.start >= l.start && p.end <= l.end),
                "a {pass} inside {l:?}"
            );
        }
    }
}
