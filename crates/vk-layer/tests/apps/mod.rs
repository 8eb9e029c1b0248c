//! Ordinary Vulkan programs (plain ash, no gpu-counters), run under the
//! layer by the tests: they know nothing of it. Each prints `APP` lines
//! with what a test checks against (CPU windows on `CLOCK_MONOTONIC`,
//! expected counts).

#![allow(dead_code)]

use ash::vk;
use gpu_counters_workloads::{ComputeWorkload, CopyWorkload, GpuContext, RenderWorkload};
use std::ffi::CString;

/// `CLOCK_MONOTONIC` ns.
pub fn now() -> u64 {
    gpu_counters_hal::cpu_monotonic_ns()
}

/// An instance, a device on the first physical device's graphics queue.
pub struct Vk {
    pub entry: ash::Entry,
    pub instance: ash::Instance,
    pub pd: vk::PhysicalDevice,
    pub device: ash::Device,
    pub family: u32,
    pub queue: vk::Queue,
    pub labels: ash::ext::debug_utils::Device,
}

impl Vk {
    /// Vulkan 1.3 with synchronization2, dynamic rendering and timeline
    /// semaphores, and debug utils.
    pub fn new() -> Vk {
        // SAFETY: loading the system's Vulkan loader.
        let entry = unsafe { ash::Entry::load() }.expect("the Vulkan loader");
        let app = vk::ApplicationInfo::default().api_version(vk::API_VERSION_1_3);
        let exts = [ash::ext::debug_utils::NAME.as_ptr()];
        let info = vk::InstanceCreateInfo::default()
            .application_info(&app)
            .enabled_extension_names(&exts);
        // SAFETY: a valid create info.
        let instance = unsafe { entry.create_instance(&info, None) }.expect("instance");
        // SAFETY: a valid instance.
        let pds = unsafe { instance.enumerate_physical_devices() }.expect("devices");
        let pd = *pds
            .iter()
            .find(|&&p| {
                // SAFETY: a physical device of the instance.
                let props = unsafe { instance.get_physical_device_properties(p) };
                props.api_version >= vk::API_VERSION_1_3
            })
            .expect("a Vulkan 1.3 device (lavapipe)");
        Self::with_device(entry, instance, pd)
    }

    fn with_device(entry: ash::Entry, instance: ash::Instance, pd: vk::PhysicalDevice) -> Vk {
        // SAFETY: a physical device of the instance.
        let families = unsafe { instance.get_physical_device_queue_family_properties(pd) };
        let family = families
            .iter()
            .position(|f| {
                f.queue_flags
                    .contains(vk::QueueFlags::GRAPHICS | vk::QueueFlags::COMPUTE)
            })
            .expect("a graphics family") as u32;
        let prio = [1.0];
        let queues = [vk::DeviceQueueCreateInfo::default()
            .queue_family_index(family)
            .queue_priorities(&prio)];
        let mut f12 = vk::PhysicalDeviceVulkan12Features::default().timeline_semaphore(true);
        let mut f13 = vk::PhysicalDeviceVulkan13Features::default()
            .synchronization2(true)
            .dynamic_rendering(true);
        let info = vk::DeviceCreateInfo::default()
            .queue_create_infos(&queues)
            .push_next(&mut f12)
            .push_next(&mut f13);
        // SAFETY: a valid create info of a supported family and features.
        let device = unsafe { instance.create_device(pd, &info, None) }.expect("device");
        // SAFETY: the queue was requested.
        let queue = unsafe { device.get_device_queue(family, 0) };
        let labels = ash::ext::debug_utils::Device::new(&instance, &device);
        Vk {
            entry,
            instance,
            pd,
            device,
            family,
            queue,
            labels,
        }
    }

    /// A second device on the same physical device (its own queue).
    pub fn another(&self) -> Vk {
        Self::with_device(self.entry.clone(), self.instance.clone(), self.pd)
    }

    /// The workloads' view of the device.
    pub fn ctx(&self) -> GpuContext<'_> {
        // SAFETY: the device was made from `pd` of `instance` with Vulkan
        // 1.3, synchronization2 and dynamic rendering, on a graphics and
        // compute family; all outlive the context.
        unsafe { GpuContext::from_raw(&self.instance, self.pd, &self.device, self.family, true) }
    }

    /// A command pool of the family.
    pub fn pool(&self, flags: vk::CommandPoolCreateFlags) -> vk::CommandPool {
        let info = vk::CommandPoolCreateInfo::default()
            .flags(flags)
            .queue_family_index(self.family);
        // SAFETY: a valid create info.
        unsafe { self.device.create_command_pool(&info, None) }.expect("pool")
    }

    /// `n` command buffers of `pool`.
    pub fn cbs(
        &self,
        pool: vk::CommandPool,
        level: vk::CommandBufferLevel,
        n: u32,
    ) -> Vec<vk::CommandBuffer> {
        let info = vk::CommandBufferAllocateInfo::default()
            .command_pool(pool)
            .level(level)
            .command_buffer_count(n);
        // SAFETY: a valid allocate info.
        unsafe { self.device.allocate_command_buffers(&info) }.expect("command buffers")
    }

    /// Begins `cb` as a primary with `flags`.
    pub fn begin(&self, cb: vk::CommandBuffer, flags: vk::CommandBufferUsageFlags) {
        let info = vk::CommandBufferBeginInfo::default().flags(flags);
        // SAFETY: a command buffer of this device, not pending.
        unsafe { self.device.begin_command_buffer(cb, &info) }.expect("begin");
    }

    /// Ends `cb`.
    pub fn end(&self, cb: vk::CommandBuffer) {
        // SAFETY: a recording command buffer.
        unsafe { self.device.end_command_buffer(cb) }.expect("end");
    }

    /// Begins debug label `name` in `cb`.
    pub fn label(&self, cb: vk::CommandBuffer, name: &str) {
        let c = CString::new(name).unwrap();
        let l = vk::DebugUtilsLabelEXT::default().label_name(&c);
        // SAFETY: a recording command buffer; debug utils is enabled.
        unsafe { self.labels.cmd_begin_debug_utils_label(cb, &l) };
    }

    /// Ends the innermost label of `cb`.
    pub fn end_label(&self, cb: vk::CommandBuffer) {
        // SAFETY: a recording command buffer with a label open.
        unsafe { self.labels.cmd_end_debug_utils_label(cb) };
    }

    /// A fence.
    pub fn fence(&self) -> vk::Fence {
        // SAFETY: a valid create info.
        unsafe {
            self.device
                .create_fence(&vk::FenceCreateInfo::default(), None)
        }
        .expect("fence")
    }

    /// Submits `cbs` in one batch with `vkQueueSubmit` and waits.
    pub fn submit_wait(&self, cbs: &[vk::CommandBuffer]) {
        let f = self.fence();
        let batch = [vk::SubmitInfo::default().command_buffers(cbs)];
        // SAFETY: executable command buffers of this device; the queue is
        // used by this thread only.
        unsafe {
            self.device
                .queue_submit(self.queue, &batch, f)
                .expect("submit");
            self.device
                .wait_for_fences(&[f], true, u64::MAX)
                .expect("wait");
            self.device.destroy_fence(f, None);
        }
    }

    /// Waits for the device and destroys it (and the instance, with
    /// `instance`).
    pub fn finish(self, instance: bool) {
        // SAFETY: nothing else uses the device; every object of the apps'
        // was destroyed before.
        unsafe {
            self.device.device_wait_idle().expect("idle");
            self.device.destroy_device(None);
            if instance {
                self.instance.destroy_instance(None);
            }
        }
    }
}

/// Records `n` dispatches of `w` into `cb`, serialized.
fn dispatches(vk: &Vk, w: &ComputeWorkload, cb: vk::CommandBuffer, n: u32) {
    for _ in 0..n {
        // SAFETY: a recording command buffer of the workload's device,
        // outside a render pass; the workload outlives the GPU's use.
        unsafe {
            w.record_dispatch(&vk.device, cb);
            w.record_barrier(&vk.device, cb);
        }
    }
}

/// Records the render workload's pass (dynamic rendering) into `cb`.
fn render(vk: &Vk, r: &RenderWorkload, cb: vk::CommandBuffer) {
    let attachments = [r.color_attachment()];
    let info = vk::RenderingInfo::default()
        .render_area(r.render_area())
        .layer_count(1)
        .color_attachments(&attachments);
    // SAFETY: a recording command buffer outside a render pass; the
    // workload's image is prepared for rendering first.
    unsafe {
        r.record_prepare(&vk.device, cb);
        vk.device.cmd_begin_rendering(cb, &info);
        r.record_draw(&vk.device, cb);
        vk.device.cmd_end_rendering(cb);
    }
}

/// The workloads with known counts, labelled, submitted with
/// `vkQueueSubmit2` and a timeline semaphore, then again with
/// `vkQueueSubmit` and a fence.
pub fn workloads() {
    const D: u32 = 5;
    let vk = Vk::new();
    let ctx = vk.ctx();
    let mut compute = ComputeWorkload::new(&ctx, 64, 16, 8).expect("compute workload");
    let mut renderw = RenderWorkload::new(&ctx, 50, 128, 128).expect("render workload");
    let mut copy = CopyWorkload::new(&ctx, 1 << 16).expect("copy workload");
    let pool = vk.pool(vk::CommandPoolCreateFlags::empty());
    let cbs = vk.cbs(pool, vk::CommandBufferLevel::PRIMARY, 2);
    let cb = cbs[0];
    vk.begin(cb, vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT);
    vk.label(cb, "frame");
    vk.label(cb, "compute-workload");
    dispatches(&vk, &compute, cb, D);
    vk.end_label(cb);
    vk.label(cb, "render-workload");
    render(&vk, &renderw, cb);
    vk.end_label(cb);
    vk.label(cb, "copy-workload");
    // SAFETY: a recording command buffer outside a render pass.
    unsafe { copy.record_copy(&vk.device, cb) };
    vk.end_label(cb);
    vk.end_label(cb);
    vk.end(cb);

    let mut timeline = vk::SemaphoreTypeCreateInfo::default()
        .semaphore_type(vk::SemaphoreType::TIMELINE)
        .initial_value(0);
    let info = vk::SemaphoreCreateInfo::default().push_next(&mut timeline);
    // SAFETY: a valid create info (timeline semaphores are enabled).
    let sem = unsafe { vk.device.create_semaphore(&info, None) }.expect("semaphore");
    let t0 = now();
    let cb_infos = [vk::CommandBufferSubmitInfo::default().command_buffer(cb)];
    let signals = [vk::SemaphoreSubmitInfo::default()
        .semaphore(sem)
        .value(1)
        .stage_mask(vk::PipelineStageFlags2::ALL_COMMANDS)];
    let submit = [vk::SubmitInfo2::default()
        .command_buffer_infos(&cb_infos)
        .signal_semaphore_infos(&signals)];
    let sems = [sem];
    let values = [1u64];
    let wait = vk::SemaphoreWaitInfo::default()
        .semaphores(&sems)
        .values(&values);
    // SAFETY: an executable command buffer; the semaphore is a timeline
    // semaphore of this device.
    unsafe {
        vk.device
            .queue_submit2(vk.queue, &submit, vk::Fence::null())
            .expect("submit2");
        vk.device.wait_semaphores(&wait, u64::MAX).expect("wait");
    }
    let t1 = now();

    let cb2 = cbs[1];
    vk.begin(cb2, vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT);
    vk.label(cb2, "second");
    dispatches(&vk, &compute, cb2, D);
    vk.end_label(cb2);
    vk.end(cb2);
    let t2 = now();
    vk.submit_wait(&[cb2]);
    let t3 = now();
    println!("APP window1 {t0} {t1}");
    println!("APP window2 {t2} {t3}");
    println!(
        "APP expect {} {} {}",
        compute.expected_invocations(D),
        renderw.expected_vertex_invocations(),
        renderw.expected_clipper_invocations()
    );
    // SAFETY: the GPU is done with everything (waited above).
    unsafe {
        vk.device.device_wait_idle().expect("idle");
        vk.device.destroy_semaphore(sem, None);
        vk.device.destroy_command_pool(pool, None);
        compute.destroy(&vk.device);
        renderw.destroy(&vk.device);
        copy.destroy(&vk.device);
    }
    vk.finish(true);
}

/// Programs that stress the layer's bookkeeping; `args` names which.
pub fn hostile(args: &[String]) {
    let vk = Vk::new();
    let ctx = vk.ctx();
    let mut compute = ComputeWorkload::new(&ctx, 32, 4, 1).expect("compute workload");
    let mut renderw = RenderWorkload::new(&ctx, 8, 64, 64).expect("render workload");
    let reset = vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER;
    for a in args {
        match a.as_str() {
            // Secondaries: one executed inside a render pass whose contents
            // they are (a label and a draw in it), one outside (a label and
            // a dispatch).
            "secondary" => {
                let pool = vk.pool(reset);
                let prim = vk.cbs(pool, vk::CommandBufferLevel::PRIMARY, 1)[0];
                let secs = vk.cbs(pool, vk::CommandBufferLevel::SECONDARY, 2);
                let formats = [renderw.color_format()];
                let mut rendering = vk::CommandBufferInheritanceRenderingInfo::default()
                    .color_attachment_formats(&formats)
                    .rasterization_samples(vk::SampleCountFlags::TYPE_1);
                let inherit = vk::CommandBufferInheritanceInfo::default().push_next(&mut rendering);
                let begin = vk::CommandBufferBeginInfo::default()
                    .flags(vk::CommandBufferUsageFlags::RENDER_PASS_CONTINUE)
                    .inheritance_info(&inherit);
                let plain = vk::CommandBufferInheritanceInfo::default();
                let begin2 = vk::CommandBufferBeginInfo::default().inheritance_info(&plain);
                // SAFETY: valid secondaries of this device; the workloads
                // outlive the GPU's use.
                unsafe {
                    vk.device
                        .begin_command_buffer(secs[0], &begin)
                        .expect("begin");
                    vk.label(secs[0], "in-secondary");
                    renderw.record_draw(&vk.device, secs[0]);
                    vk.end_label(secs[0]);
                    vk.end(secs[0]);
                    vk.device
                        .begin_command_buffer(secs[1], &begin2)
                        .expect("begin");
                    vk.label(secs[1], "compute-secondary");
                    compute.record_dispatch(&vk.device, secs[1]);
                    vk.end_label(secs[1]);
                    vk.end(secs[1]);
                    vk.begin(prim, vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT);
                    renderw.record_prepare(&vk.device, prim);
                    let attachments = [renderw.color_attachment()];
                    let info = vk::RenderingInfo::default()
                        .flags(vk::RenderingFlags::CONTENTS_SECONDARY_COMMAND_BUFFERS)
                        .render_area(renderw.render_area())
                        .layer_count(1)
                        .color_attachments(&attachments);
                    vk.device.cmd_begin_rendering(prim, &info);
                    vk.device.cmd_execute_commands(prim, &secs[..1]);
                    vk.device.cmd_end_rendering(prim);
                    vk.device.cmd_execute_commands(prim, &secs[1..]);
                    vk.end(prim);
                }
                vk.submit_wait(&[prim]);
                // SAFETY: done with the GPU (waited).
                unsafe { vk.device.destroy_command_pool(pool, None) };
            }
            // One command buffer re-recorded every frame.
            "rerecord" => {
                let pool = vk.pool(reset);
                let cb = vk.cbs(pool, vk::CommandBufferLevel::PRIMARY, 1)[0];
                for i in 0..10 {
                    vk.begin(cb, vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT);
                    vk.label(cb, &format!("rerecorded-{i}"));
                    dispatches(&vk, &compute, cb, 1);
                    vk.end_label(cb);
                    vk.end(cb);
                    vk.submit_wait(&[cb]);
                }
                // SAFETY: done with the GPU (waited).
                unsafe { vk.device.destroy_command_pool(pool, None) };
            }
            // One command buffer (simultaneous use) submitted four times
            // before any completes: twice in two calls, twice in one batch,
            // held back by an event the host sets after.
            "twice" => {
                let pool = vk.pool(reset);
                let cb = vk.cbs(pool, vk::CommandBufferLevel::PRIMARY, 1)[0];
                // SAFETY: a valid create info.
                let event = unsafe {
                    vk.device
                        .create_event(&vk::EventCreateInfo::default(), None)
                }
                .expect("event");
                vk.begin(cb, vk::CommandBufferUsageFlags::SIMULTANEOUS_USE);
                let barrier = [vk::MemoryBarrier::default()
                    .src_access_mask(vk::AccessFlags::HOST_WRITE)
                    .dst_access_mask(vk::AccessFlags::SHADER_READ)];
                // SAFETY: a recording command buffer; the event lives until
                // the queue is idle.
                unsafe {
                    vk.device.cmd_wait_events(
                        cb,
                        &[event],
                        vk::PipelineStageFlags::HOST,
                        vk::PipelineStageFlags::COMPUTE_SHADER,
                        &barrier,
                        &[],
                        &[],
                    )
                };
                vk.label(cb, "twice");
                dispatches(&vk, &compute, cb, 1);
                vk.end_label(cb);
                vk.end(cb);
                let one = [cb];
                let two = [cb, cb];
                // SAFETY: a simultaneous-use command buffer may be pending
                // several times; the event is set from the host after.
                unsafe {
                    for list in [&one[..], &one[..], &two[..]] {
                        let batch = [vk::SubmitInfo::default().command_buffers(list)];
                        vk.device
                            .queue_submit(vk.queue, &batch, vk::Fence::null())
                            .expect("submit");
                    }
                    vk.device.set_event(event).expect("set event");
                    vk.device.queue_wait_idle(vk.queue).expect("idle");
                    vk.device.destroy_event(event, None);
                    vk.device.destroy_command_pool(pool, None);
                }
            }
            // A pool destroyed as soon as the program's own fence says its
            // command buffer is done (the layer's copies may still run).
            "pool" => {
                let pool = vk.pool(vk::CommandPoolCreateFlags::empty());
                let cb = vk.cbs(pool, vk::CommandBufferLevel::PRIMARY, 1)[0];
                vk.begin(cb, vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT);
                vk.label(cb, "orphan");
                dispatches(&vk, &compute, cb, 1);
                vk.end_label(cb);
                vk.end(cb);
                vk.submit_wait(&[cb]);
                // SAFETY: the command buffer is done (its fence waited).
                unsafe { vk.device.destroy_command_pool(pool, None) };
            }
            // A label begun in one command buffer and ended in the next.
            "across" => {
                let pool = vk.pool(vk::CommandPoolCreateFlags::empty());
                let cbs = vk.cbs(pool, vk::CommandBufferLevel::PRIMARY, 2);
                vk.begin(cbs[0], vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT);
                vk.label(cbs[0], "across");
                dispatches(&vk, &compute, cbs[0], 1);
                vk.end(cbs[0]);
                vk.begin(cbs[1], vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT);
                dispatches(&vk, &compute, cbs[1], 1);
                vk.end_label(cbs[1]);
                vk.end(cbs[1]);
                vk.submit_wait(&cbs);
                // SAFETY: done with the GPU (waited).
                unsafe { vk.device.destroy_command_pool(pool, None) };
            }
            // Two devices, each with its queue, submitting from two
            // threads at once.
            "devices" => {
                let other = vk.another();
                std::thread::scope(|s| {
                    for (i, dev) in [&vk, &other].into_iter().enumerate() {
                        s.spawn(move || {
                            let ctx = dev.ctx();
                            let mut w = ComputeWorkload::new(&ctx, 32, 4, 1).expect("workload");
                            let pool = dev.pool(reset);
                            let cb = dev.cbs(pool, vk::CommandBufferLevel::PRIMARY, 1)[0];
                            for _ in 0..20 {
                                dev.begin(cb, vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT);
                                dev.label(cb, &format!("device-{i}"));
                                dispatches(dev, &w, cb, 1);
                                dev.end_label(cb);
                                dev.end(cb);
                                dev.submit_wait(&[cb]);
                            }
                            // SAFETY: done with the GPU (waited).
                            unsafe {
                                dev.device.destroy_command_pool(pool, None);
                                w.destroy(&dev.device);
                            }
                        });
                    }
                });
                other.finish(false);
            }
            other => panic!("unknown hostile program {other}"),
        }
    }
    // SAFETY: the GPU is done with the workloads.
    unsafe {
        vk.device.device_wait_idle().expect("idle");
        compute.destroy(&vk.device);
        renderw.destroy(&vk.device);
    }
    vk.finish(true);
}

/// `n` command buffers, each recorded with one fill, submitted a thousand
/// at a time and freed; prints the process's peak resident set (VmHWM).
pub fn many(n: u64) {
    let vk = Vk::new();
    let ctx = vk.ctx();
    let mut copy = CopyWorkload::new(&ctx, 4096).expect("copy workload");
    let pool = vk.pool(vk::CommandPoolCreateFlags::TRANSIENT);
    let batch = 1000u64;
    let mut done = 0u64;
    while done < n {
        let k = batch.min(n - done) as u32;
        let cbs = vk.cbs(pool, vk::CommandBufferLevel::PRIMARY, k);
        for &cb in &cbs {
            vk.begin(cb, vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT);
            // SAFETY: a recording command buffer outside a render pass.
            unsafe { copy.record_fill(&vk.device, cb, 7) };
            vk.end(cb);
        }
        vk.submit_wait(&cbs);
        // SAFETY: the command buffers are done (waited).
        unsafe { vk.device.free_command_buffers(pool, &cbs) };
        done += u64::from(k);
    }
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let hwm = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .expect("VmHWM");
    println!("APP many {done} {hwm}");
    // SAFETY: the GPU is done with everything.
    unsafe {
        vk.device.destroy_command_pool(pool, None);
        copy.destroy(&vk.device);
    }
    vk.finish(true);
}

/// Submits a labelled dispatch, waits for its fence, and exits without
/// destroying anything (as many programs do).
pub fn exit_early() {
    let vk = Vk::new();
    let ctx = vk.ctx();
    let compute = ComputeWorkload::new(&ctx, 32, 4, 1).expect("compute workload");
    let pool = vk.pool(vk::CommandPoolCreateFlags::empty());
    let cb = vk.cbs(pool, vk::CommandBufferLevel::PRIMARY, 1)[0];
    vk.begin(cb, vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT);
    vk.label(cb, "last");
    dispatches(&vk, &compute, cb, 1);
    vk.end_label(cb);
    vk.end(cb);
    vk.submit_wait(&[cb]);
    println!("APP exiting");
    std::process::exit(0);
}

/// Runs app `name`.
pub fn run(name: &str, args: &[String]) {
    match name {
        "workloads" => workloads(),
        "hostile" => hostile(args),
        "many" => many(args[0].parse().expect("a count")),
        "exit-early" => exit_early(),
        other => panic!("unknown app {other}"),
    }
}
