//! `gpu-counters run --backend cuda`: the compute workload of
//! `gpu-counters-workloads` (feature `cuda`: the same arithmetic, sizes and
//! count as the Vulkan and wgpu ones, a PTX kernel) on a CUDA device, as
//! `devices --backend cuda` lists them, through gpu-counters-cuda.
//!
//! Each frame is one [`gcu::Recorder`] (a range of the
//! device stream's work), submitted with [`gcu::Device::submit`] and waited
//! for; the compute pass is a profiler scope ([`Frame::scope`]) around its
//! D kernel launches on the device's stream: timed by gpu-counters-cuda's
//! `%globaltimer` kernels either side and, where the device offers the
//! statistic set (CUPTI's launch callbacks), counted by the launches in
//! between (grid × block threads each). Where it does not, the report says
//! so and why ([`gcu::Device::statistics_unavailable`]). The render and
//! mixed workloads are refused before anything runs
//! ([`crate::plan::Plan::check_backend`]): CUDA has no render pipeline.

use crate::choice::{pick_device, DeviceChoice, DeviceOrder};
use crate::cli::Backend;
use crate::devices;
use crate::error::{CliError, CliResult};
use crate::measure::{self, FrameSource, Ran, RanDevice, RanMany, Validation};
use crate::plan::{workload_error, Pass, PassExpectation, Plan};
use crate::progress::Bar;
use gpu_counters_cuda as gcu;
use gpu_counters_profiler::Frame;
use gpu_counters_workloads::CudaComputeWorkload;
use std::cell::RefCell;

/// One pass's work: the compute workload (its launches write its buffer,
/// so they need it mutably) and its dispatches per frame.
struct Work {
    workload: RefCell<CudaComputeWorkload>,
    dispatches: u32,
}

/// The CUDA device and the frame's passes, as [`measure::profile`] runs them.
struct CudaFrames {
    device: gcu::Device,
    passes: Vec<Pass<Work>>,
}

/// Builds the plan's workloads on `device`'s stream (the plan has only a
/// compute pass: [`Plan::check_backend`] refused the others).
fn build_passes(device: &gcu::Device, plan: &Plan) -> CliResult<Vec<Pass<Work>>> {
    let mut passes = Vec::new();
    if let Some(c) = plan.compute {
        let workload = CudaComputeWorkload::new(
            device.stream(),
            c.workgroup_size,
            c.workgroups,
            c.iterations,
        )
        .map_err(|e| workload_error("compute", e, &c.fields()))?;
        c.check_invocations()?;
        passes.push(Pass::compute(
            device.info(),
            workload.expected_invocations(c.dispatches),
            Work {
                workload: RefCell::new(workload),
                dispatches: c.dispatches,
            },
        ));
    }
    Ok(passes)
}

impl FrameSource for CudaFrames {
    type Device = gcu::Device;

    fn device(&self) -> &gcu::Device {
        &self.device
    }

    fn expectations(&self) -> Vec<PassExpectation<'_>> {
        self.passes.iter().map(Pass::expectation).collect()
    }

    fn submit_frame(
        &self,
        frame: &Frame<'_, gcu::Device>,
        _index: u32,
    ) -> CliResult<gcu::Submission> {
        let mut rec = self.device.recorder();
        for pass in &self.passes {
            let scope = frame.scope(&mut rec, pass.label, pass.kind)?;
            pass.work
                .workload
                .borrow_mut()
                .launch_dispatches(rec.stream(), pass.work.dispatches)
                .map_err(|e| {
                    CliError::Failure(format!("launching the {} pass: {e}", pass.label))
                })?;
            scope.end(&mut rec)?;
        }
        Ok(self.device.submit(rec)?)
    }

    fn queue_label(&self) -> &'static str {
        "stream"
    }
}

/// CUDA has no validation layer of gpu-counters' to collect messages from
/// (`GPU_COUNTERS_VALIDATION=1` is about Vulkan's): nothing to print.
struct NoValidation;

impl Validation for NoValidation {
    fn print(&self) -> usize {
        0
    }

    fn check(&self) -> CliResult<()> {
        Ok(())
    }
}

/// How `run` opens a CUDA device: with statistics (each pass's kernel
/// count), asked for.
fn with_statistics() -> gcu::DeviceOptions {
    gcu::DeviceOptions {
        statistics: true,
        ..gcu::DeviceOptions::default()
    }
}

/// Picks the CUDA device (`--device`, else device 0), opens it (without a
/// driver: `no CUDA driver: ...`, exit 1), builds the workload and runs the
/// frames through a profiler, one scope per pass.
pub fn execute(device: Option<usize>, plan: &Plan, bar: &Bar) -> CliResult<Ran> {
    let count = gpu_counters_cuda::device_count().map_err(devices::cuda_error)?;
    let default = (count > 0).then_some(devices::DEFAULT_CUDA_DEVICE);
    let index = pick_device(Backend::Cuda, device, count, default)?;
    let device = gcu::Device::open_with(index, &with_statistics()).map_err(devices::cuda_error)?;
    let info = device.info().clone();
    let statistics_unavailable = device.statistics_unavailable().map(str::to_string);
    let measured = (|| {
        measure::check_timestamps(&info, Backend::Cuda, index)?;
        let passes = build_passes(&device, plan)?;
        let frames = CudaFrames { device, passes };
        measure::profile(&frames, plan, bar)
    })();
    Ok(Ran {
        is_default: Some(index) == default,
        info,
        measured,
        validation: Box::new(NoValidation),
        statistics_unavailable,
    })
}

/// Opens every CUDA device `choice` names (`all` or a list; without a
/// driver: `no CUDA driver: ...`, exit 1), builds the workload on each
/// device's stream and runs the frames on all of them at once, one
/// profiler per device ([`measure::profile_many`]).
pub fn execute_many(
    choice: &DeviceChoice,
    plan: &Plan,
    bar: &Bar,
    order: DeviceOrder,
) -> CliResult<RanMany> {
    let count = gpu_counters_cuda::device_count().map_err(devices::cuda_error)?;
    let indices = choice.indices(Backend::Cuda, count)?;
    let mut opened = Vec::with_capacity(indices.len());
    for &i in &indices {
        opened.push((
            i,
            gcu::Device::open_with(i, &with_statistics()).map_err(devices::cuda_error)?,
        ));
    }
    let ran = opened
        .iter()
        .map(|(i, d)| RanDevice {
            info: d.info().clone(),
            is_default: *i == devices::DEFAULT_CUDA_DEVICE,
            statistics_unavailable: d.statistics_unavailable().map(str::to_string),
        })
        .collect();
    let measured = (|| {
        let mut frames = Vec::with_capacity(opened.len());
        for (i, device) in opened {
            measure::check_timestamps(device.info(), Backend::Cuda, i)?;
            let passes = build_passes(&device, plan)?;
            frames.push(CudaFrames { device, passes });
        }
        measure::profile_many(&frames, plan, bar, order)
    })();
    Ok(RanMany {
        devices: ran,
        measured,
        validation: Box::new(NoValidation),
    })
}
