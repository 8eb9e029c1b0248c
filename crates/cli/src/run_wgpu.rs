//! `gpu-counters run --backend wgpu`: the compute and render workloads of
//! `gpu-counters-workloads` (feature `wgpu`: the same shaders, sizes and
//! counts as the Vulkan ones) on a wgpu adapter, as `devices --backend
//! wgpu` lists them, through `gpu_counters::wgpu::Profiler` (the drop-in
//! for wgpu-profiler) over the gpu-counters-wgpu device.
//!
//! Each frame is one command encoder, submitted with `queue.submit`, ended
//! ([`Profiler::end_frame`]) and waited for; each pass is a scoped pass
//! ([`Profiler::scoped_compute_pass`], `scoped_render_pass`): the pass's
//! scope is timed by the pass's own timestamp writes and, where the adapter
//! has `PIPELINE_STATISTICS_QUERY`, counted by the pass's own statistics
//! query. The mixed workload is refused before anything runs
//! ([`crate::plan::Plan::check_backend`]): its copy pass cannot be measured
//! on wgpu. Every frame has one pass per workload, so no barrier between
//! passes is needed (wgpu has no explicit one).

use crate::choice::pick_device;
use crate::cli::Backend;
use crate::devices;
use crate::error::{CliError, CliResult};
use crate::measure::{self, Measured, Ran, Validation};
use crate::plan::{workload_error, Pass, Plan, QUEUE};
use crate::progress::Bar;
use gpu_counters::wgpu::{ProfiledFrame, Profiler, ProfilerSettings};
use gpu_counters_hal::CommonCounterSet;
use gpu_counters_wgpu as gcw;
use gpu_counters_workloads::{WgpuComputeWorkload, WgpuRenderWorkload};

/// One pass's work.
enum Work {
    Compute(WgpuComputeWorkload, u32),
    Render(WgpuRenderWorkload),
}

/// Builds the plan's workloads on `device`.
fn build_passes(device: &gcw::Device, plan: &Plan) -> CliResult<Vec<Pass<Work>>> {
    let info = device.info();
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

/// Records one frame's passes on a new encoder of `device`, each a scoped
/// pass of `profiler`, submits it and ends the frame.
fn submit_frame(device: &gcw::Device, profiler: &Profiler, passes: &[Pass<Work>]) -> CliResult<()> {
    let mut encoder = device
        .device()
        .create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some("gpu-counters run"),
        });
    for pass in passes {
        match &pass.work {
            Work::Compute(work, dispatches) => {
                let mut p = profiler.scoped_compute_pass(pass.label, &mut encoder);
                work.record_dispatches(&mut p, *dispatches);
            }
            Work::Render(work) => {
                let mut p = profiler.scoped_render_pass(
                    pass.label,
                    &mut encoder,
                    wgpu::RenderPassDescriptor {
                        label: Some(pass.label),
                        color_attachments: &[Some(work.color_attachment())],
                        ..Default::default()
                    },
                );
                work.record_draw(&mut p);
            }
        }
    }
    device.queue().submit([encoder.finish()]);
    profiler.end_frame()?;
    Ok(())
}

/// Runs the plan's frames of `passes` on `device` through the drop-in
/// profiler, one scoped pass per scope: each frame is recorded, submitted,
/// ended, waited for (its read-back included) and collected; every frame's
/// scopes are checked against the passes' expectations.
fn profile(
    device: &gcw::Device,
    passes: &[Pass<Work>],
    plan: &Plan,
    bar: &Bar,
) -> CliResult<Measured> {
    let has_stats = device
        .info()
        .counter_set(CommonCounterSet::Statistic)
        .is_some();
    let expected: Vec<_> = passes.iter().map(Pass::expectation).collect();
    let profiler = Profiler::with_device(
        device,
        ProfilerSettings {
            enable_timer_queries: true,
            // Each pass carries its scope's label; no debug groups beside.
            enable_debug_groups: false,
            pipeline_statistics: has_stats,
            max_scopes_per_frame: (expected.len() as u32).max(1),
            queue_name: QUEUE.to_string(),
        },
    )?;
    // A build with the feature `tracy` streams every frame into Tracy.
    #[cfg(feature = "tracy")]
    let mut tracy = gpu_counters_profiler::export::tracy_client::TracySink::new();
    let mut frames: Vec<ProfiledFrame> = Vec::with_capacity(plan.frames as usize);
    let mut checks = Vec::with_capacity(plan.frames as usize);
    for _ in 0..plan.frames {
        submit_frame(device, &profiler, passes)?;
        device
            .device()
            .poll(wgpu::PollType::Wait {
                submission_index: None,
                timeout: Some(measure::FRAME_TIMEOUT),
            })
            .map_err(|e| CliError::Failure(format!("waiting for the frame: {e}")))?;
        for frame in profiler.collect()? {
            checks.push(measure::check_frame(&expected, &frame.result, has_stats)?);
            #[cfg(feature = "tracy")]
            gpu_counters_profiler::FrameSink::frame(
                &mut tracy,
                device.info(),
                &profiler.calibration(),
                &frame.result,
            );
            frames.push(frame);
            bar.frame_done();
        }
    }
    if frames.len() != plan.frames as usize {
        return Err(CliError::Failure(format!(
            "the profiler returned {} of {} frames",
            frames.len(),
            plan.frames
        )));
    }
    let timeline = profiler.timeline(&frames);
    Ok(Measured {
        frames: frames.into_iter().map(|f| f.result).collect(),
        timeline,
        checks,
        calibration: profiler.calibration(),
    })
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
/// the workloads and runs the frames through the drop-in profiler, one
/// scoped pass per scope.
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
        profile(&device, &passes, plan, bar)
    })();
    Ok(Ran {
        is_default: Some(index) == default,
        info,
        measured,
        validation: Box::new(WgpuValidation),
        statistics_unavailable: None,
    })
}
