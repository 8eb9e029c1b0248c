//! `gpu-counters run --backend wgpu`: the compute and render workloads of
//! `gpu-counters-workloads` (feature `wgpu`: the same shaders, sizes and
//! counts as the Vulkan ones) on a wgpu adapter, as `devices --backend
//! wgpu` lists them, through gpu-counters-wgpu.
//!
//! Each frame is one [`gcw::Recorder`] (one command
//! encoder), submitted with [`gcw::Device::submit`] and waited for; each
//! pass is a profiled pass
//! ([`gcw::Recorder::begin_profiled_compute_pass`],
//! `begin_profiled_render_pass`): the pass's scope is timed by the pass's
//! own timestamp writes and, where the adapter has
//! `PIPELINE_STATISTICS_QUERY`, counted by the pass's own statistics query.
//! The mixed workload is refused before anything runs
//! ([`crate::plan::Plan::check_backend`]): its copy pass cannot be measured
//! on wgpu. Every frame has one pass, so no barrier between passes is
//! needed (wgpu has no explicit one).

use crate::choice::pick_device;
use crate::cli::Backend;
use crate::devices;
use crate::error::CliResult;
use crate::measure::{self, FrameSource, Ran, Validation};
use crate::plan::{workload_error, Pass, PassExpectation, Plan};
use crate::progress::Bar;
use gpu_counters_profiler::Frame;
use gpu_counters_wgpu as gcw;
use gpu_counters_workloads::{WgpuComputeWorkload, WgpuRenderWorkload};

/// One pass's work.
enum Work {
    Compute(WgpuComputeWorkload, u32),
    Render(WgpuRenderWorkload),
}

/// The wgpu device and the frame's passes, as [`measure::profile`] runs them.
struct WgpuFrames {
    device: gcw::Device,
    passes: Vec<Pass<Work>>,
}

/// Builds the plan's workloads on `device`.
fn build_passes(device: &gcw::Device, plan: &Plan) -> CliResult<Vec<Pass<Work>>> {
    let info = gpu_counters_hal::backend::BackendDevice::info(device);
    let mut passes = Vec::new();
    if let Some(c) = plan.compute {
        let work = WgpuComputeWorkload::new(
            device.device(),
            c.workgroup_size,
            c.workgroups,
            c.iterations,
        )
        .map_err(|e| workload_error("compute", e, &c.fields()))?;
        c.check_invocations()?;
        passes.push(Pass::compute(
            info,
            work.expected_invocations(c.dispatches),
            Work::Compute(work, c.dispatches),
        ));
    }
    if let Some(r) = plan.render {
        let work = WgpuRenderWorkload::new(device.device(), r.triangles, r.width, r.height)
            .map_err(|e| workload_error("render", e, &r.fields()))?;
        passes.push(Pass::render(
            info,
            [
                work.expected_vertex_invocations(),
                work.expected_clipper_invocations(),
                work.covered_pixels(),
            ],
            Work::Render(work),
        ));
    }
    Ok(passes)
}

impl FrameSource for WgpuFrames {
    type Device = gcw::Device;

    fn device(&self) -> &gcw::Device {
        &self.device
    }

    fn expectations(&self) -> Vec<PassExpectation<'_>> {
        self.passes.iter().map(Pass::expectation).collect()
    }

    fn submit_frame(
        &self,
        frame: &Frame<'_, gcw::Device>,
        _index: u32,
    ) -> CliResult<gcw::Submission> {
        let mut rec = self.device.recorder(Some("gpu-counters run"));
        for pass in &self.passes {
            match &pass.work {
                Work::Compute(work, dispatches) => {
                    let mut p = rec.begin_profiled_compute_pass(frame, pass.label)?;
                    work.record_dispatches(&mut p, *dispatches);
                }
                Work::Render(work) => {
                    let mut p = rec.begin_profiled_render_pass(
                        frame,
                        &wgpu::RenderPassDescriptor {
                            label: Some(pass.label),
                            color_attachments: &[Some(work.color_attachment())],
                            ..Default::default()
                        },
                    )?;
                    work.record_draw(&mut p);
                }
            }
        }
        Ok(self.device.submit(rec)?)
    }
}

/// wgpu's logged and uncaptured errors.
struct WgpuValidation;

impl Validation for WgpuValidation {
    fn print(&self) -> usize {
        devices::print_wgpu_validation()
    }

    fn check(&self) -> CliResult<()> {
        devices::check_wgpu_validation()
    }
}

/// Picks the wgpu adapter (`--device`, else the default one), opens it
/// (with the adapter's own limits, so that sizes go up to them), builds
/// the workloads and runs the frames through a profiler, one profiled pass
/// per scope.
pub fn execute(device: Option<usize>, plan: &Plan, bar: &Bar) -> CliResult<Ran> {
    let instance = devices::wgpu_instance();
    let adapters = devices::wgpu_adapters(&instance);
    let default = devices::default_wgpu_adapter(&adapters);
    let index = pick_device(Backend::Wgpu, device, adapters.len(), default)?;
    let adapter = &adapters[index];
    let (device, info) = devices::open_wgpu(adapter, index, adapter.limits())?;
    let measured = (|| {
        measure::check_timestamps(&info, Backend::Wgpu, index)?;
        let passes = build_passes(&device, plan)?;
        let frames = WgpuFrames { device, passes };
        measure::profile(&frames, plan, bar)
    })();
    Ok(Ran {
        is_default: Some(index) == default,
        info,
        measured,
        validation: Box::new(WgpuValidation),
        statistics_unavailable: None,
    })
}
