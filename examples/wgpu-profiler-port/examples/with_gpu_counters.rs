//! Collatz sequence lengths on the GPU, computed again each iteration for
//! new numbers: a compute program in the shape of wgpu's `hello_compute` and
//! `repeated_compute` examples. `unprofiled.rs` is the program;
//! `with_wgpu_profiler.rs` and `with_gpu_counters.rs` are it profiled, each
//! with an encoder scope per iteration and the compute pass nested in it.

const N: u32 = 4096;
const ITERATIONS: u32 = 10;

const SHADER: &str = "
@group(0) @binding(0) var<storage, read_write> v: array<u32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    var n = v[id.x];
    var steps = 0u;
    while (n > 1u) {
        if (n % 2u == 0u) { n = n / 2u; } else { n = 3u * n + 1u; }
        steps = steps + 1u;
    }
    v[id.x] = steps;
}
";

fn main() {
    let instance = wgpu::Instance::default();
    let adapter =
        pollster::block_on(instance.request_adapter(&Default::default())).expect("no adapter");
    let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
        label: None,
        required_features: adapter.features()
            & gpu_counters::wgpu::Profiler::ALL_WGPU_TIMER_FEATURES,
        ..Default::default()
    }))
    .expect("no device");
    let profiler =
        gpu_counters::wgpu::Profiler::new(&device, &queue, Default::default()).expect("profiler");
    let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some("collatz"),
        source: wgpu::ShaderSource::Wgsl(SHADER.into()),
    });
    let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some("collatz"),
        layout: None,
        module: &module,
        entry_point: Some("main"),
        compilation_options: Default::default(),
        cache: None,
    });
    let size = u64::from(N) * 4;
    let storage = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("numbers"),
        size,
        usage: wgpu::BufferUsages::STORAGE
            | wgpu::BufferUsages::COPY_SRC
            | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let staging = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("staging"),
        size,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let bind_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: Some("collatz"),
        layout: &pipeline.get_bind_group_layout(0),
        entries: &[wgpu::BindGroupEntry {
            binding: 0,
            resource: storage.as_entire_binding(),
        }],
    });
    for iteration in 0..ITERATIONS {
        let numbers: Vec<u8> = (0..N)
            .flat_map(|i| (1 + i + iteration * N).to_le_bytes())
            .collect();
        queue.write_buffer(&storage, 0, &numbers);
        let mut encoder = device.create_command_encoder(&Default::default());
        let mut scope = profiler.scope("iteration", &mut encoder);
        {
            let mut pass = scope.scoped_compute_pass("collatz");
            pass.set_pipeline(&pipeline);
            pass.set_bind_group(0, &bind_group, &[]);
            pass.dispatch_workgroups(N / 64, 1, 1);
        }
        scope.copy_buffer_to_buffer(&storage, 0, &staging, 0, size);
        drop(scope);
        queue.submit([encoder.finish()]);
        profiler.end_frame().expect("end_frame");
        staging
            .slice(..)
            .map_async(wgpu::MapMode::Read, |r| r.expect("map"));
        device
            .poll(wgpu::PollType::wait_indefinitely())
            .expect("poll");
        let longest = staging
            .slice(..)
            .get_mapped_range()
            .expect("mapped")
            .chunks_exact(4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .max();
        staging.unmap();
        println!("iteration {iteration}: longest sequence {longest:?} steps");
        for frame in profiler.collect().expect("collect") {
            for s in frame.scopes() {
                let indent = "  ".repeat(s.depth as usize + 1);
                println!(
                    "{indent}{}: {} ns ± {} ns",
                    s.label, s.duration_ns, s.error_bound_ns
                );
            }
        }
    }
}
