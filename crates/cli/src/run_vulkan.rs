//! `gpu-counters run` on a Vulkan device (the default `--backend`): the
//! workloads of `gpu-counters-workloads` recorded with the Vulkan crate's
//! encoders into one command buffer per frame, each pass inside its own
//! profiler scope ([`Frame::scope`] / `Scope::end`: a timestamp after all
//! prior work at either end and, where the device offers statistics, the
//! pipeline statistics counted in between), a full barrier between passes.

use crate::choice::{pick_device, DeviceChoice, DeviceOrder};
use crate::cli::Backend;
use crate::devices;
use crate::error::CliResult;
use crate::measure::{self, FrameSource, Ran, RanDevice, RanMany, Validation};
use crate::plan::{workload_error, Pass, PassExpectation, Plan};
use crate::progress::Bar;
use gpu_counters_hal::timeline::PassKind;
use gpu_counters_profiler::Frame;
use gpu_counters_vulkan::ash::vk;
use gpu_counters_vulkan::{
    BlitPassDescriptor, CommandBuffer, ComputePassDescriptor, Device, Instance, InstanceOptions,
    RenderPassDescriptor, RenderTarget, Submission,
};
use gpu_counters_workloads::{ComputeWorkload, CopyWorkload, GpuContext, RenderWorkload};

/// One pass's work.
enum Work {
    Compute(ComputeWorkload, u32),
    Render(RenderWorkload),
    Copy(CopyWorkload),
}

/// The passes of a frame; destroys their Vulkan objects when dropped, after
/// the device is idle.
struct Passes {
    device: Device,
    list: Vec<Pass<Work>>,
}

impl Drop for Passes {
    fn drop(&mut self) {
        let _ = self.device.wait_idle();
        let d = self.device.raw();
        for pass in &mut self.list {
            // SAFETY: the workloads were created on this device, and it is idle
            // (waited above), so no pending command buffer uses them.
            unsafe {
                match &mut pass.work {
                    Work::Compute(w, _) => w.destroy(d),
                    Work::Render(w) => w.destroy(d),
                    Work::Copy(w) => w.destroy(d),
                }
            }
        }
    }
}

/// Builds the plan's workloads on `device`.
fn build_passes(device: &Device, plan: &Plan) -> CliResult<Passes> {
    let ctx = GpuContext::from_device(device);
    let info = device.info();
    let mut passes = Passes {
        device: device.clone(),
        list: Vec::new(),
    };
    if let Some(c) = plan.compute {
        let work = ComputeWorkload::new(&ctx, c.workgroup_size, c.workgroups, c.iterations)
            .map_err(|e| workload_error("compute", e, &c.fields()))?;
        passes.list.push(Pass::compute(
            info,
            work.expected_invocations(c.dispatches),
            Work::Compute(work, c.dispatches),
        ));
        // After the push, so that dropping `passes` destroys the workload.
        c.check_invocations()?;
    }
    if let Some(r) = plan.render {
        let work = RenderWorkload::new(&ctx, r.triangles, r.width, r.height)
            .map_err(|e| workload_error("render", e, &r.fields()))?;
        passes.list.push(Pass::render(
            info,
            [
                work.expected_vertex_invocations(),
                work.expected_clipper_invocations(),
                work.covered_pixels(),
            ],
            Work::Render(work),
        ));
    }
    if let Some(bytes) = plan.copy_bytes {
        let work = CopyWorkload::new(&ctx, bytes).map_err(|e| {
            workload_error("copy", e, &[("bytes", "--copy-bytes", bytes.to_string())])
        })?;
        passes.list.push(Pass {
            label: "copy",
            kind: PassKind::Blit,
            work: Work::Copy(work),
            expected: Vec::new(),
        });
    }
    Ok(passes)
}

/// A full execution barrier between passes, so that each pass's interval
/// covers its own work only.
fn record_pass_barrier(device: &Device, cmd: vk::CommandBuffer) {
    let barriers = [vk::MemoryBarrier2::default()
        .src_stage_mask(vk::PipelineStageFlags2::ALL_COMMANDS)
        .src_access_mask(vk::AccessFlags2::MEMORY_WRITE)
        .dst_stage_mask(vk::PipelineStageFlags2::ALL_COMMANDS)
        .dst_access_mask(vk::AccessFlags2::MEMORY_READ | vk::AccessFlags2::MEMORY_WRITE)];
    let dependency = vk::DependencyInfo::default().memory_barriers(&barriers);
    // SAFETY: `cmd` is a recording command buffer of `device`, outside any
    // render pass (encoders have ended); synchronization2 is enabled on
    // every device gpu-counters opens.
    unsafe { device.raw().cmd_pipeline_barrier2(cmd, &dependency) };
}

/// Records one pass's work into `cmd` with the Vulkan crate's encoders.
/// The encoders carry no sample buffer attachments: the pass's profiler
/// scope samples around them.
fn record_work(device: &Device, cmd: &mut CommandBuffer, work: &Work, frame: u32) -> CliResult<()> {
    let d = device.raw();
    match work {
        Work::Compute(work, dispatches) => {
            let enc = cmd.compute_encoder(&ComputePassDescriptor::default())?;
            // A barrier before every dispatch, the first included: it
            // orders the dispatch after the previous frame's writes of the
            // buffer, and on lavapipe it also makes the start timestamp be
            // written before the dispatch runs rather than at the next
            // flush.
            for _ in 0..*dispatches {
                // SAFETY: `enc.raw()` is recording (gpu-counters' command
                // buffers begin recording when made) outside any render
                // pass, on `device`'s graphics and compute queue family,
                // with synchronization2 enabled (every device gpu-counters
                // opens has it); the workload was built on `device`; it
                // lives in `Passes`, which waits for the device to be idle
                // before destroying it, so it outlives the GPU's use.
                unsafe {
                    work.record_barrier(d, enc.raw());
                    work.record_dispatch(d, enc.raw());
                }
            }
            enc.end_encoding()?;
        }
        Work::Render(work) => {
            // SAFETY: as for the compute work: `cmd` is a recording command
            // buffer of `device`, outside any render pass (no encoder is
            // open), and the workload, built on `device`, outlives the GPU's
            // use in `Passes`.
            unsafe { work.record_prepare(d, cmd.raw()) };
            let colors = [work.color_attachment()];
            let info = vk::RenderingInfo::default()
                .render_area(work.render_area())
                .layer_count(1)
                .color_attachments(&colors);
            // SAFETY: the rendering info names the workload's own color view
            // (an object of `device`, live until `Passes` is dropped after
            // the device is idle), in COLOR_ATTACHMENT_OPTIMAL as the barrier
            // just recorded leaves it, over its whole extent in one layer;
            // `colors` and `info` outlive the call; dynamic rendering is
            // enabled on every device gpu-counters opens.
            let enc = unsafe {
                cmd.render_encoder(&RenderPassDescriptor {
                    target: RenderTarget::Dynamic(&info),
                    sample_buffer_attachments: &[],
                })
            }?;
            // SAFETY: `enc.raw()` is recording inside the rendering instance
            // just begun with the workload's color attachment and no depth
            // or stencil; the workload outlives the GPU's use (as above).
            unsafe { work.record_draw(d, enc.raw()) };
            enc.end_encoding()?;
        }
        Work::Copy(work) => {
            let enc = cmd.blit_encoder(&BlitPassDescriptor::default())?;
            // SAFETY: `enc.raw()` is a recording command buffer of `device`
            // outside any render pass, on a graphics and compute queue
            // family, with synchronization2 enabled; the workload was built
            // on `device` and outlives the GPU's use (as above).
            unsafe {
                work.record_fill(d, enc.raw(), frame);
                work.record_copy(d, enc.raw());
            }
            enc.end_encoding()?;
        }
    }
    Ok(())
}

/// Records the frame's passes into `cmd`, each in a profiler scope of
/// `frame` (a timestamp after all prior work at either end, and the
/// statistics counted in between where the profiler samples them), with a
/// full barrier between passes.
fn record_frame(
    device: &Device,
    cmd: &mut CommandBuffer,
    frame: &Frame<'_, Device>,
    passes: &Passes,
    index: u32,
) -> CliResult<()> {
    for (p, pass) in passes.list.iter().enumerate() {
        if p > 0 {
            record_pass_barrier(device, cmd.raw());
        }
        let scope = frame.scope(cmd, pass.label, pass.kind)?;
        record_work(device, cmd, &pass.work, index)?;
        scope.end(cmd)?;
    }
    Ok(())
}

/// The Vulkan device and its passes, as [`measure::profile`] runs them.
struct VulkanFrames {
    device: Device,
    passes: Passes,
}

impl FrameSource for VulkanFrames {
    type Device = Device;

    fn device(&self) -> &Device {
        &self.device
    }

    fn expectations(&self) -> Vec<PassExpectation<'_>> {
        self.passes.list.iter().map(Pass::expectation).collect()
    }

    fn submit_frame(&self, frame: &Frame<'_, Device>, index: u32) -> CliResult<Submission> {
        let mut cmd = CommandBuffer::new(&self.device)?;
        record_frame(&self.device, &mut cmd, frame, &self.passes, index)?;
        Ok(cmd.commit()?)
    }
}

/// The Vulkan instance's validation messages.
struct VulkanValidation(Instance);

impl Validation for VulkanValidation {
    fn print(&self) -> usize {
        devices::print_validation(&self.0)
    }

    fn check(&self) -> CliResult<()> {
        devices::check_validation(&self.0)
    }
}

/// Picks the Vulkan device (`--device`, else the default one), opens it,
/// builds the workloads and runs the frames through a profiler, one scope
/// per pass.
pub fn execute(device: Option<usize>, plan: &Plan, bar: &Bar) -> CliResult<Ran> {
    let instance = Instance::new(&InstanceOptions::default())?;
    let (devices, default) = devices::list(&instance)?;
    let index = pick_device(Backend::Vulkan, device, devices.len(), default)?;
    let info = devices[index].clone();
    let measured =
        open_frames(&instance, index, plan).and_then(|f| measure::profile(&f, plan, bar));
    Ok(Ran {
        is_default: Some(index) == default,
        info,
        measured,
        validation: Box::new(VulkanValidation(instance)),
        statistics_unavailable: None,
    })
}

/// Opens the Vulkan device `index` of `instance` and builds the plan's
/// workloads on it.
fn open_frames(instance: &Instance, index: usize, plan: &Plan) -> CliResult<VulkanFrames> {
    let device = Device::open(instance, index)?;
    measure::check_timestamps(device.info(), Backend::Vulkan, index)?;
    let passes = build_passes(&device, plan)?;
    Ok(VulkanFrames { device, passes })
}

/// Opens every Vulkan device `choice` names (`all` or a list), builds the
/// workloads on each and runs the frames on all of them at once, one
/// profiler per device ([`measure::profile_many`]).
pub fn execute_many(
    choice: &DeviceChoice,
    plan: &Plan,
    bar: &Bar,
    order: DeviceOrder,
) -> CliResult<RanMany> {
    let instance = Instance::new(&InstanceOptions::default())?;
    let (devices, default) = devices::list(&instance)?;
    let indices = choice.indices(Backend::Vulkan, devices.len())?;
    let ran = indices
        .iter()
        .map(|&i| RanDevice {
            info: devices[i].clone(),
            is_default: Some(i) == default,
            statistics_unavailable: None,
        })
        .collect();
    let measured = (|| {
        let frames = indices
            .iter()
            .map(|&i| open_frames(&instance, i, plan))
            .collect::<CliResult<Vec<_>>>()?;
        measure::profile_many(&frames, plan, bar, order)
    })();
    Ok(RanMany {
        devices: ran,
        measured,
        validation: Box::new(VulkanValidation(instance)),
    })
}
