//! An ordinary Vulkan program (plain ash; nothing of gpu-counters but the
//! built-in workloads for its GPU work) that renders frames and times them
//! itself, for measuring what the layer costs: run it with and without
//! the layer and compare.
//!
//! Each frame is one command buffer: a run of compute dispatches and a
//! render pass, between two timestamps of the program's own; `--in-flight`
//! frames are in flight (fences), so the GPU is kept busy. It prints one
//! JSON object:
//!
//! - `gpu_ns_per_frame`: the GPU's span from the first frame's start to the
//!   last frame's end (the program's timestamps), over the frames: GPU time
//!   per frame, including whatever runs between frames;
//! - `gpu_frame_median_ns`: the median of each frame's own end minus start;
//! - `cpu_ns_per_frame`: wall time over the frames.
//!
//! ```text
//! cargo run --release -p gpu-counters-vk-layer --example frame_loop -- --frames 2000
//! ```

use ash::vk;
use gpu_counters_workloads::{ComputeWorkload, GpuContext, RenderWorkload};
use std::time::Instant;

struct Args {
    frames: u32,
    in_flight: usize,
    dispatches: u32,
    workgroups: u32,
    triangles: u32,
    size: u32,
}

fn args() -> Result<Args, String> {
    let mut a = Args {
        frames: 1000,
        in_flight: 2,
        dispatches: 8,
        workgroups: 4096,
        triangles: 2000,
        size: 1024,
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let mut v = || -> Result<u32, String> {
            it.next()
                .ok_or(format!("{k} needs a value"))?
                .parse()
                .map_err(|e| format!("{k}: {e}"))
        };
        match k.as_str() {
            "--frames" => a.frames = v()?,
            "--in-flight" => a.in_flight = v()? as usize,
            "--dispatches" => a.dispatches = v()?,
            "--workgroups" => a.workgroups = v()?,
            "--triangles" => a.triangles = v()?,
            "--size" => a.size = v()?,
            other => return Err(format!("unknown option {other}")),
        }
    }
    if a.frames == 0 || a.in_flight == 0 {
        return Err("--frames and --in-flight must be at least 1".into());
    }
    Ok(a)
}

fn main() {
    let a = match args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    };
    // SAFETY: loading the system's Vulkan loader.
    let entry = unsafe { ash::Entry::load() }.expect("the Vulkan loader");
    let app = vk::ApplicationInfo::default().api_version(vk::API_VERSION_1_3);
    let info = vk::InstanceCreateInfo::default().application_info(&app);
    // SAFETY: every call below is on objects this program made, in order;
    // each is destroyed after the GPU finished with it.
    unsafe {
        let instance = entry.create_instance(&info, None).expect("instance");
        let pds = instance.enumerate_physical_devices().expect("devices");
        let pd = *pds
            .iter()
            .max_by_key(|&&p| {
                let t = instance.get_physical_device_properties(p).device_type;
                (t == vk::PhysicalDeviceType::DISCRETE_GPU) as u8 * 2
                    + (t == vk::PhysicalDeviceType::INTEGRATED_GPU) as u8
            })
            .expect("a Vulkan device");
        let props = instance.get_physical_device_properties(pd);
        let family = instance
            .get_physical_device_queue_family_properties(pd)
            .iter()
            .position(|f| {
                f.queue_flags
                    .contains(vk::QueueFlags::GRAPHICS | vk::QueueFlags::COMPUTE)
                    && f.timestamp_valid_bits > 0
            })
            .expect("a graphics family with timestamps") as u32;
        let bits = instance.get_physical_device_queue_family_properties(pd)[family as usize]
            .timestamp_valid_bits;
        let prio = [1.0];
        let queues = [vk::DeviceQueueCreateInfo::default()
            .queue_family_index(family)
            .queue_priorities(&prio)];
        let mut f12 = vk::PhysicalDeviceVulkan12Features::default().host_query_reset(true);
        let mut f13 = vk::PhysicalDeviceVulkan13Features::default()
            .synchronization2(true)
            .dynamic_rendering(true);
        let dinfo = vk::DeviceCreateInfo::default()
            .queue_create_infos(&queues)
            .push_next(&mut f12)
            .push_next(&mut f13);
        let device = instance.create_device(pd, &dinfo, None).expect("device");
        let queue = device.get_device_queue(family, 0);
        let ctx = GpuContext::from_raw(&instance, pd, &device, family, true);
        let mut compute = ComputeWorkload::new(&ctx, 64, a.workgroups, 64).expect("compute");
        let mut render = RenderWorkload::new(&ctx, a.triangles, a.size, a.size).expect("render");
        let pool = device
            .create_command_pool(
                &vk::CommandPoolCreateInfo::default()
                    .flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER)
                    .queue_family_index(family),
                None,
            )
            .expect("pool");
        let n = a.in_flight;
        let cbs = device
            .allocate_command_buffers(
                &vk::CommandBufferAllocateInfo::default()
                    .command_pool(pool)
                    .level(vk::CommandBufferLevel::PRIMARY)
                    .command_buffer_count(n as u32),
            )
            .expect("command buffers");
        let fences: Vec<vk::Fence> = (0..n)
            .map(|_| {
                device
                    .create_fence(
                        &vk::FenceCreateInfo::default().flags(vk::FenceCreateFlags::SIGNALED),
                        None,
                    )
                    .expect("fence")
            })
            .collect();
        let queries = device
            .create_query_pool(
                &vk::QueryPoolCreateInfo::default()
                    .query_type(vk::QueryType::TIMESTAMP)
                    .query_count(2 * a.frames),
                None,
            )
            .expect("query pool");
        device.reset_query_pool(queries, 0, 2 * a.frames);
        let started = Instant::now();
        for f in 0..a.frames {
            let k = f as usize % n;
            device
                .wait_for_fences(&[fences[k]], true, u64::MAX)
                .expect("wait");
            device.reset_fences(&[fences[k]]).expect("reset fence");
            let cb = cbs[k];
            device
                .begin_command_buffer(cb, &vk::CommandBufferBeginInfo::default())
                .expect("begin");
            device.cmd_write_timestamp(cb, vk::PipelineStageFlags::TOP_OF_PIPE, queries, 2 * f);
            for _ in 0..a.dispatches {
                compute.record_dispatch(&device, cb);
                compute.record_barrier(&device, cb);
            }
            render.record_prepare(&device, cb);
            let attachments = [render.color_attachment()];
            let rinfo = vk::RenderingInfo::default()
                .render_area(render.render_area())
                .layer_count(1)
                .color_attachments(&attachments);
            device.cmd_begin_rendering(cb, &rinfo);
            render.record_draw(&device, cb);
            device.cmd_end_rendering(cb);
            device.cmd_write_timestamp(
                cb,
                vk::PipelineStageFlags::BOTTOM_OF_PIPE,
                queries,
                2 * f + 1,
            );
            device.end_command_buffer(cb).expect("end");
            let list = [cb];
            let submit = [vk::SubmitInfo::default().command_buffers(&list)];
            device
                .queue_submit(queue, &submit, fences[k])
                .expect("submit");
        }
        device
            .wait_for_fences(&fences, true, u64::MAX)
            .expect("wait");
        let wall = started.elapsed();
        let mut data = vec![0u64; 2 * a.frames as usize];
        device
            .get_query_pool_results(
                queries,
                0,
                &mut data,
                vk::QueryResultFlags::TYPE_64 | vk::QueryResultFlags::WAIT,
            )
            .expect("results");
        let mask = if bits >= 64 {
            u64::MAX
        } else {
            (1u64 << bits) - 1
        };
        let period = f64::from(props.limits.timestamp_period);
        let ns = |d: u64| d as f64 * period;
        let span = ns(data[data.len() - 1].wrapping_sub(data[0]) & mask);
        let mut each: Vec<f64> = data
            .chunks_exact(2)
            .map(|p| ns(p[1].wrapping_sub(p[0]) & mask))
            .collect();
        each.sort_by(f64::total_cmp);
        println!(
            "{{\"frames\": {}, \"gpu_ns_per_frame\": {:.1}, \"gpu_frame_median_ns\": {:.1}, \"cpu_ns_per_frame\": {:.1}}}",
            a.frames,
            span / f64::from(a.frames),
            each[each.len() / 2],
            wall.as_nanos() as f64 / f64::from(a.frames)
        );
        device.device_wait_idle().expect("idle");
        device.destroy_query_pool(queries, None);
        for f in fences {
            device.destroy_fence(f, None);
        }
        device.destroy_command_pool(pool, None);
        compute.destroy(&device);
        render.destroy(&device);
        device.destroy_device(None);
        instance.destroy_instance(None);
    }
}
