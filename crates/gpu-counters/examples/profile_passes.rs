//! A wgpu program profiled per pass with `gpu_counters::wgpu::Profiler`,
//! the drop-in for wgpu-profiler: each frame runs a compute pass (a WGSL
//! kernel writing a storage buffer) and a render pass (triangles into an
//! offscreen texture) on the application's own encoder, each a scoped pass
//! (`scoped_compute_pass` / `scoped_render_pass`), which needs only
//! `wgpu::Features::TIMESTAMP_QUERY` (and counts exact pipeline statistics
//! where the device has `PIPELINE_STATISTICS_QUERY`). The application
//! submits with its own `queue.submit`; `end_frame` follows it. Prints each
//! pass's calibrated duration and error bound, and writes a Chrome trace
//! (chrome://tracing, Perfetto) to the first argument (default
//! `wgpu-trace.json`).
//!
//! ```sh
//! cargo run -p gpu-counters --features wgpu --example profile_passes [trace.json]
//! ```

use gpu_counters::export;
use gpu_counters::wgpu::{Device, ProfiledFrame, Profiler, ProfilerSettings};
use std::collections::VecDeque;
use std::error::Error;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

const FRAMES: usize = 8;
const FRAMES_IN_FLIGHT: usize = 3;
/// Storage buffer elements the kernel writes (one invocation each).
const ELEMENTS: u32 = 64 * 256;
const SIZE: u32 = 256;

const KERNEL: &str = "
@group(0) @binding(0) var<storage, read_write> data: array<u32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    var x = id.x;
    for (var i = 0u; i < 64u; i++) {
        x = x * 1664525u + 1013904223u;
    }
    data[id.x] = x;
}
";

const TRIANGLES: &str = "
@vertex
fn vs(@builtin(vertex_index) v: u32, @builtin(instance_index) t: u32) -> @builtin(position) vec4<f32> {
    let corner = array(vec2(-0.8, -0.8), vec2(0.8, -0.8), vec2(0.0, 0.8));
    let shrink = 1.0 - f32(t) * 0.2;
    return vec4<f32>(corner[v] * shrink, 0.0, 1.0);
}

@fragment
fn fs(@builtin(position) p: vec4<f32>) -> @location(0) vec4<f32> {
    return vec4<f32>(p.x / 256.0, p.y / 256.0, 0.5, 1.0);
}
";

type Res<T> = Result<T, Box<dyn Error + Send + Sync>>;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// A device with timestamps (and statistics where the adapter counts them),
/// opened through `Device::request` so that on Vulkan calibration is a
/// calibrated pair where the driver has the extension.
fn open() -> Res<Device> {
    let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
    desc.backends = wgpu::Backends::VULKAN;
    desc.flags = wgpu::InstanceFlags::empty().with_env();
    let instance = wgpu::Instance::new(desc);
    let adapter = pollster::block_on(instance.request_adapter(&wgpu::RequestAdapterOptions {
        power_preference: wgpu::PowerPreference::HighPerformance,
        ..Default::default()
    }))
    .map_err(|e| format!("no Vulkan adapter ({e}); on a machine without a GPU install lavapipe (mesa-vulkan-drivers)"))?;
    let info = adapter.get_info();
    let have = adapter.features();
    if !have.contains(wgpu::Features::TIMESTAMP_QUERY) {
        return Err(format!(
            "adapter `{}` lacks wgpu::Features::TIMESTAMP_QUERY, which profiled passes need",
            info.name
        )
        .into());
    }
    let features =
        wgpu::Features::TIMESTAMP_QUERY | (have & wgpu::Features::PIPELINE_STATISTICS_QUERY);
    let device = pollster::block_on(Device::request(
        &adapter,
        &wgpu::DeviceDescriptor {
            label: Some("profile_passes"),
            required_features: features,
            ..Default::default()
        },
    ))
    .map_err(|e| format!("request_device on `{}`: {e}", info.name))?;
    Ok(device)
}

fn run() -> Res<()> {
    let out = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "wgpu-trace.json".into());
    let d = open()?;
    let statistics = d
        .features()
        .contains(wgpu::Features::PIPELINE_STATISTICS_QUERY);
    println!(
        "{} ({:?}); calibration: {}; statistics: {}",
        d.adapter_info().name,
        d.adapter_info().backend,
        d.calibrated_timestamps_extension()
            .unwrap_or("bracketed submission"),
        if statistics { "on" } else { "off" }
    );
    // wgpu validation errors would otherwise panic: keep them, report once.
    let errors = Arc::new(Mutex::new(Vec::<String>::new()));
    let sink = errors.clone();
    d.device()
        .on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
            if let Ok(mut v) = sink.lock() {
                v.push(e.to_string());
            }
        }));

    let raw = d.device();
    // The compute pass's kernel and storage buffer.
    let kernel = raw.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some("kernel"),
        source: wgpu::ShaderSource::Wgsl(KERNEL.into()),
    });
    let compute = raw.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some("kernel"),
        layout: None,
        module: &kernel,
        entry_point: Some("main"),
        compilation_options: Default::default(),
        cache: None,
    });
    let data = raw.create_buffer(&wgpu::BufferDescriptor {
        label: Some("kernel output"),
        size: u64::from(ELEMENTS) * 4,
        usage: wgpu::BufferUsages::STORAGE,
        mapped_at_creation: false,
    });
    let bind = raw.create_bind_group(&wgpu::BindGroupDescriptor {
        label: Some("kernel output"),
        layout: &compute.get_bind_group_layout(0),
        entries: &[wgpu::BindGroupEntry {
            binding: 0,
            resource: data.as_entire_binding(),
        }],
    });
    // The render pass's pipeline and offscreen target.
    let format = wgpu::TextureFormat::Rgba8Unorm;
    let shaders = raw.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some("triangles"),
        source: wgpu::ShaderSource::Wgsl(TRIANGLES.into()),
    });
    let render = raw.create_render_pipeline(&wgpu::RenderPipelineDescriptor {
        label: Some("triangles"),
        layout: None,
        vertex: wgpu::VertexState {
            module: &shaders,
            entry_point: Some("vs"),
            compilation_options: Default::default(),
            buffers: &[],
        },
        primitive: wgpu::PrimitiveState::default(),
        depth_stencil: None,
        multisample: wgpu::MultisampleState::default(),
        fragment: Some(wgpu::FragmentState {
            module: &shaders,
            entry_point: Some("fs"),
            compilation_options: Default::default(),
            targets: &[Some(format.into())],
        }),
        multiview_mask: None,
        cache: None,
    });
    let target = raw.create_texture(&wgpu::TextureDescriptor {
        label: Some("offscreen target"),
        size: wgpu::Extent3d {
            width: SIZE,
            height: SIZE,
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

    let profiler = Profiler::with_device(
        &d,
        ProfilerSettings {
            max_scopes_per_frame: 8,
            pipeline_statistics: statistics,
            ..Default::default()
        },
    )?;
    let queue = d.queue();

    let mut in_flight = VecDeque::new();
    let mut results: Vec<ProfiledFrame> = Vec::new();
    for f in 0..FRAMES {
        // Keep at most FRAMES_IN_FLIGHT frames on the GPU.
        if in_flight.len() == FRAMES_IN_FLIGHT {
            if let Some(oldest) = in_flight.pop_front() {
                raw.poll(wgpu::PollType::Wait {
                    submission_index: Some(oldest),
                    timeout: None,
                })?;
            }
        }
        let mut encoder = raw.create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some("frame"),
        });
        {
            let mut pass = profiler.scoped_compute_pass("compute: fill buffer", &mut encoder);
            pass.set_pipeline(&compute);
            pass.set_bind_group(0, &bind, &[]);
            pass.dispatch_workgroups(ELEMENTS / 64, 1, 1);
        }
        {
            let mut pass = profiler.scoped_render_pass(
                "render: triangles",
                &mut encoder,
                wgpu::RenderPassDescriptor {
                    label: Some("render: triangles"),
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
            );
            pass.set_pipeline(&render);
            // More triangles every frame: 1 to 4 nested ones.
            pass.draw(0..3, 0..(f % 4 + 1) as u32);
        }
        profiler.resolve_queries(&mut encoder);
        in_flight.push_back(queue.submit([encoder.finish()]));
        profiler.end_frame()?;
        // Finished frames come back in order, a few frames later.
        results.extend(profiler.collect()?);
    }
    raw.poll(wgpu::PollType::wait_indefinitely())?;
    results.extend(profiler.collect()?);
    if let Some(e) = errors.lock().ok().and_then(|v| v.first().cloned()) {
        return Err(format!("wgpu validation: {e}").into());
    }
    if results.len() != FRAMES {
        return Err(format!("{} of {FRAMES} frames collected", results.len()).into());
    }

    let mut dropped = 0;
    for f in &results {
        let r = &f.result;
        dropped += r.dropped_scopes;
        println!(
            "frame {}: {} scopes, {} dropped",
            r.index,
            r.scopes.len(),
            r.dropped_scopes
        );
        for s in &r.scopes {
            let mut line = format!(
                "  {:<22} {:>9.3} us  (start and end each ± {:.3} us)",
                s.label,
                s.duration_ns as f64 / 1e3,
                s.error_bound_ns as f64 / 1e3
            );
            if let Some(st) = &s.statistics {
                if s.kind == gpu_counters::timeline::PassKind::Compute {
                    line += &format!("  compute invocations {}", st.compute_kernel_invocations);
                } else {
                    line += &format!(
                        "  vertex invocations {}, fragment invocations {}",
                        st.vertex_invocations, st.fragment_invocations
                    );
                }
            }
            println!("{line}");
        }
    }
    let timeline = profiler.timeline(&results);
    let file = std::fs::File::create(&out).map_err(|e| format!("creating {out}: {e}"))?;
    let mut file = std::io::BufWriter::new(file);
    export::write_chrome_trace(&timeline, &mut file)
        .and_then(|()| std::io::Write::flush(&mut file))
        .map_err(|e| format!("writing {out}: {e}"))?;
    println!(
        "wrote {out}: {} frames, {dropped} scopes dropped",
        results.len()
    );
    Ok(())
}
