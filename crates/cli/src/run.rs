//! `gpu-counters run`: a built-in workload, every pass sampled, for some
//! frames.
//!
//! The run goes through the profiler (`gpu-counters-profiler`), so that the
//! command and the library resolve samples to a timeline one way. Per
//! frame, [`Profiler::begin_frame`] gives a frame, and every pass is
//! recorded into one command buffer inside its own profiler scope
//! ([`Frame::scope`] / `Scope::end`: a timestamp after all prior work at
//! either end and, where the device offers statistics, the pipeline
//! statistics counted in between), with the Vulkan crate's encoders inside
//! the scope. A full barrier separates the passes so each one's interval
//! covers its own work. The buffer is committed and waited for, the frame
//! ended ([`Profiler::end_frame`]) and collected ([`Profiler::collect`],
//! [`Profiler::wait_collect_all`]): a [`FrameResult`] with one scope per
//! pass, calibrated onto `CLOCK_MONOTONIC`. The report's tables, its JSON
//! and the statistics check read the [`FrameResult`]s; the exports read
//! [`Profiler::timeline`] of them.

use crate::cli::{self, RunArgs, SizeArgs, WorkloadName};
use crate::devices;
use crate::error::{CliError, CliResult};
use crate::output::PendingOutput;
use crate::report::{self, PassCheck, RunReport};
use gpu_counters_core::timeline::{PassKind, Timeline};
use gpu_counters_core::{Calibration, CommonCounter, CommonCounterSet};
use gpu_counters_profiler::{export, Frame, FrameResult, Profiler, ProfilerOptions, WhenFull};
use gpu_counters_vulkan::ash::vk;
use gpu_counters_vulkan::{
    BlitPassDescriptor, CommandBuffer, ComputePassDescriptor, Device, Instance, InstanceOptions,
    RenderPassDescriptor, RenderTarget,
};
use gpu_counters_workloads::{
    ComputeWorkload, CopyWorkload, GpuContext, RenderWorkload, WorkloadError,
};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::time::{Duration, Instant};

/// The queue every pass runs on, as named in timelines.
pub const QUEUE: &str = "graphics";

/// Sizes of the compute pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ComputeSizes {
    /// Dispatches per pass (D).
    pub dispatches: u32,
    /// Workgroups per dispatch (W).
    pub workgroups: u32,
    /// Invocations per workgroup (S).
    pub workgroup_size: u32,
    /// Arithmetic steps per invocation.
    pub iterations: u32,
}

/// Sizes of the render pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RenderSizes {
    /// Triangles (T).
    pub triangles: u32,
    /// Target width in pixels.
    pub width: u32,
    /// Target height in pixels.
    pub height: u32,
}

/// What `run` does, with every default applied and every size checked to be
/// at least 1 and at most its limit (the device's own limits are checked
/// once it is open, before any work is recorded).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The workload.
    pub workload: WorkloadName,
    /// Frames to run.
    pub frames: u32,
    /// The compute pass's sizes, if the workload has one.
    pub compute: Option<ComputeSizes>,
    /// The render pass's sizes, if the workload has one.
    pub render: Option<RenderSizes>,
    /// Bytes of the copy pass, if the workload has one.
    pub copy_bytes: Option<u64>,
}

/// Fails with `--flag 0: must be at least 1` for a zero size.
fn at_least_one<T: Into<u64> + Copy + std::fmt::Display>(flag: &str, v: T) -> CliResult<T> {
    if v.into() == 0 {
        return Err(CliError::Usage(format!("{flag} {v}: must be at least 1")));
    }
    Ok(v)
}

/// Fails with `--flag V: must be at most MAX (why)` for a size over its
/// limit.
fn at_most<T: Into<u64> + Copy + std::fmt::Display>(
    flag: &str,
    v: T,
    max: T,
    why: &str,
) -> CliResult<T> {
    if v.into() > max.into() {
        return Err(CliError::Usage(format!(
            "{flag} {v}: must be at most {max} ({why})"
        )));
    }
    Ok(v)
}

impl ComputeSizes {
    /// Fails unless the kernel invocations per pass, D*W*S, are at most
    /// [`cli::MAX_INVOCATIONS`]. Checked once the device has accepted W and
    /// S (so that a size over a device limit is reported as such), before
    /// any work is recorded.
    fn check_invocations(&self) -> CliResult<()> {
        let invocations = u64::from(self.dispatches)
            * u64::from(self.workgroups)
            * u64::from(self.workgroup_size);
        if invocations > cli::MAX_INVOCATIONS {
            return Err(CliError::Usage(format!(
                "--dispatches {} * --workgroups {} * --workgroup-size {} = {invocations} \
                 kernel invocations per pass: must be at most {} (a u32)",
                self.dispatches,
                self.workgroups,
                self.workgroup_size,
                cli::MAX_INVOCATIONS
            )));
        }
        Ok(())
    }
}

impl Plan {
    /// Applies the defaults of the workload's sizes; fails for a size of 0
    /// and for a size option the workload has no use for.
    pub fn from_args(args: &RunArgs) -> CliResult<Self> {
        let s: &SizeArgs = &args.sizes;
        let w = args.workload;
        let has_compute = matches!(w, WorkloadName::Compute | WorkloadName::Mixed);
        let has_render = matches!(w, WorkloadName::Render | WorkloadName::Mixed);
        let has_copy = w == WorkloadName::Mixed;
        let given = [
            ("--dispatches", s.dispatches.is_some(), has_compute),
            ("--workgroups", s.workgroups.is_some(), has_compute),
            ("--workgroup-size", s.workgroup_size.is_some(), has_compute),
            ("--iterations", s.iterations.is_some(), has_compute),
            ("--triangles", s.triangles.is_some(), has_render),
            ("--width", s.width.is_some(), has_render),
            ("--height", s.height.is_some(), has_render),
            ("--copy-bytes", s.copy_bytes.is_some(), has_copy),
        ];
        for (flag, is_given, applies) in given {
            if is_given && !applies {
                return Err(CliError::Usage(format!(
                    "{flag}: does not apply to the {} workload",
                    w.name()
                )));
            }
        }
        let frames = at_most(
            "--frames",
            at_least_one("--frames", args.frames)?,
            cli::MAX_FRAMES,
            "every frame's passes are kept for the report and the outputs",
        )?;
        let compute = if has_compute {
            let c = ComputeSizes {
                dispatches: at_most(
                    "--dispatches",
                    at_least_one(
                        "--dispatches",
                        s.dispatches.unwrap_or(cli::DEFAULT_DISPATCHES),
                    )?,
                    cli::MAX_DISPATCHES,
                    "every dispatch is recorded into the frame's command buffer",
                )?,
                workgroups: at_least_one(
                    "--workgroups",
                    s.workgroups.unwrap_or(cli::DEFAULT_WORKGROUPS),
                )?,
                workgroup_size: at_least_one(
                    "--workgroup-size",
                    s.workgroup_size.unwrap_or(cli::DEFAULT_WORKGROUP_SIZE),
                )?,
                iterations: at_most(
                    "--iterations",
                    s.iterations.unwrap_or(cli::DEFAULT_ITERATIONS),
                    cli::MAX_ITERATIONS,
                    "a longer shader risks the driver's GPU timeout",
                )?,
            };
            Some(c)
        } else {
            None
        };
        let render = if has_render {
            Some(RenderSizes {
                triangles: at_most(
                    "--triangles",
                    at_least_one("--triangles", s.triangles.unwrap_or(cli::DEFAULT_TRIANGLES))?,
                    cli::MAX_TRIANGLES,
                    "the draw's vertex count 3T is a u32",
                )?,
                width: at_least_one("--width", s.width.unwrap_or(cli::DEFAULT_WIDTH))?,
                height: at_least_one("--height", s.height.unwrap_or(cli::DEFAULT_HEIGHT))?,
            })
        } else {
            None
        };
        let copy_bytes = if has_copy {
            Some(at_least_one(
                "--copy-bytes",
                s.copy_bytes.unwrap_or(cli::DEFAULT_COPY_BYTES),
            )?)
        } else {
            None
        };
        Ok(Self {
            workload: w,
            frames,
            compute,
            render,
            copy_bytes,
        })
    }
}

/// Turns a workload's error into the command's: a size the device cannot
/// take is a usage error naming the options of the fields at fault (`fields`
/// maps the workload's field names to options and values), anything else a
/// failure.
fn workload_error(what: &str, e: WorkloadError, fields: &[(&str, &str, String)]) -> CliError {
    match e {
        WorkloadError::InvalidSize {
            fields: at_fault,
            message,
        } => {
            let named: Vec<String> = fields
                .iter()
                .filter(|(field, _, _)| at_fault.contains(field))
                .map(|(_, flag, value)| format!("{flag} {value}"))
                .collect();
            if named.is_empty() {
                CliError::Usage(format!("invalid {what} size: {message}"))
            } else {
                CliError::Usage(format!("{}: {message}", named.join(", ")))
            }
        }
        other => CliError::Failure(format!("building the {what} workload: {other}")),
    }
}

/// One pass's work.
enum Work {
    Compute(ComputeWorkload, u32),
    Render(RenderWorkload),
    Copy(CopyWorkload),
}

/// One pass of a frame: its work, label, kind and the statistics it must
/// produce.
struct Pass {
    label: &'static str,
    kind: PassKind,
    work: Work,
    expected: Vec<(CommonCounter, u64)>,
}

/// The passes of a frame; destroys their Vulkan objects when dropped, after
/// the device is idle.
struct Passes {
    device: Device,
    list: Vec<Pass>,
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
    let offered: Vec<CommonCounter> = device
        .info()
        .counter_set(CommonCounterSet::Statistic)
        .map(|s| s.counters.clone())
        .unwrap_or_default();
    let keep = |list: Vec<(CommonCounter, u64)>| -> Vec<(CommonCounter, u64)> {
        list.into_iter()
            .filter(|(c, _)| offered.contains(c))
            .collect()
    };
    let mut passes = Passes {
        device: device.clone(),
        list: Vec::new(),
    };
    if let Some(c) = plan.compute {
        let work = ComputeWorkload::new(&ctx, c.workgroup_size, c.workgroups, c.iterations)
            .map_err(|e| {
                workload_error(
                    "compute",
                    e,
                    &[
                        (
                            "workgroup_size",
                            "--workgroup-size",
                            c.workgroup_size.to_string(),
                        ),
                        ("workgroups", "--workgroups", c.workgroups.to_string()),
                    ],
                )
            })?;
        let expected = keep(vec![(
            CommonCounter::ComputeKernelInvocations,
            work.expected_invocations(c.dispatches),
        )]);
        passes.list.push(Pass {
            label: "compute",
            kind: PassKind::Compute,
            work: Work::Compute(work, c.dispatches),
            expected,
        });
        // After the push, so that dropping `passes` destroys the workload.
        c.check_invocations()?;
    }
    if let Some(r) = plan.render {
        let work = RenderWorkload::new(&ctx, r.triangles, r.width, r.height).map_err(|e| {
            workload_error(
                "render",
                e,
                &[
                    ("triangles", "--triangles", r.triangles.to_string()),
                    ("width", "--width", r.width.to_string()),
                    ("height", "--height", r.height.to_string()),
                ],
            )
        })?;
        let expected = keep(vec![
            (
                CommonCounter::VertexInvocations,
                work.expected_vertex_invocations(),
            ),
            (
                CommonCounter::ClipperInvocations,
                work.expected_clipper_invocations(),
            ),
            (CommonCounter::FragmentsPassed, work.covered_pixels()),
        ]);
        passes.list.push(Pass {
            label: "render",
            kind: PassKind::Render,
            work: Work::Render(work),
            expected,
        });
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
                    sample_buffer_attachments: Vec::new(),
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

/// Everything a run measured.
pub struct Measured {
    /// The frames as the profiler resolved them: one scope per pass, in the
    /// order of the passes.
    pub frames: Vec<FrameResult>,
    /// The same frames as the profiler's timeline, for the exports.
    pub timeline: Timeline,
    /// Per frame and pass, the statistics check.
    pub checks: Vec<Vec<PassCheck>>,
    /// The profiler's calibration after the last frame.
    pub calibration: Calibration,
}

/// How long the profiler waits for a ring slot, or for a frame's marker
/// once its submission has completed.
const FRAME_TIMEOUT: Duration = Duration::from_secs(60);

/// What one pass's scope must be: its label, its kind, and the statistics
/// the workload is known to produce.
type PassExpectation<'a> = (&'a str, PassKind, &'a [(CommonCounter, u64)]);

/// The statistics check of each pass of `frame`; fails unless the frame has
/// exactly one scope per pass, in order (the profiler drops, and counts, a
/// scope whose samples failed).
fn check_frame(
    passes: &[PassExpectation<'_>],
    frame: &FrameResult,
    has_stats: bool,
) -> CliResult<Vec<PassCheck>> {
    let d = &frame.drops;
    let one_per_pass = frame.scopes.len() == passes.len()
        && frame
            .scopes
            .iter()
            .zip(passes)
            .all(|(s, &(label, kind, _))| s.label == label && s.kind == kind);
    if frame.dropped_scopes > 0 || !one_per_pass {
        return Err(CliError::Failure(format!(
            "frame {}: {} of {} passes have results ({} scopes dropped: {} failed, \
             {} not ended, {} without a ring slot, {} over capacity, {} abandoned)",
            frame.index,
            frame.scopes.len(),
            passes.len(),
            frame.dropped_scopes,
            d.failed,
            d.not_ended,
            d.no_slot,
            d.over_capacity,
            d.abandoned
        )));
    }
    Ok(frame
        .scopes
        .iter()
        .zip(passes)
        .map(|(scope, &(_, _, expected))| PassCheck {
            expected: expected.to_vec(),
            statistics: scope.statistics,
            problem: (has_stats && scope.statistics.is_none())
                .then(|| "statistics missing from the pass's scope".to_string()),
        })
        .collect())
}

/// Opens the device, builds the workloads and runs the frames through a
/// profiler, one scope per pass.
fn execute(instance: &Instance, index: usize, plan: &Plan, bar: &Bar) -> CliResult<Measured> {
    let device = Device::open(instance, index)?;
    let info = device.info().clone();
    if info.counter_set(CommonCounterSet::Timestamp).is_none() {
        return Err(CliError::Failure(format!(
            "device [{index}] `{}` offers no timestamps, which `run` needs",
            info.name
        )));
    }
    let has_stats = info.counter_set(CommonCounterSet::Statistic).is_some();
    let passes = build_passes(&device, plan)?;
    let profiler = Profiler::new(
        &device,
        ProfilerOptions {
            // Frames run one after another (each is waited for, so that its
            // submit-to-complete time is its own); a second slot lets the
            // next frame begin whatever the state of the last one's.
            frames_in_flight: 2,
            max_scopes_per_frame: passes.list.len() as u32,
            statistics: has_stats,
            when_full: WhenFull::Wait {
                timeout: FRAME_TIMEOUT,
            },
            queue_name: Some(QUEUE.to_string()),
        },
    )?;
    // A build with the feature `tracy` streams every frame into Tracy.
    #[cfg(feature = "tracy")]
    profiler.stream_to_tracy();
    let mut frames: Vec<FrameResult> = Vec::with_capacity(plan.frames as usize);
    let mut checks = Vec::with_capacity(plan.frames as usize);
    let expected: Vec<PassExpectation<'_>> = passes
        .list
        .iter()
        .map(|p| (p.label, p.kind, p.expected.as_slice()))
        .collect();
    let mut take = |done: Vec<FrameResult>| -> CliResult<()> {
        for frame in done {
            checks.push(check_frame(&expected, &frame, has_stats)?);
            frames.push(frame);
            bar.frame_done();
        }
        Ok(())
    };
    for n in 0..plan.frames {
        let frame = profiler.begin_frame()?;
        let mut cmd = CommandBuffer::new(&device)?;
        record_frame(&device, &mut cmd, &frame, &passes, n)?;
        let submission = cmd.commit()?;
        profiler.end_frame(frame, Some(submission.cpu_submit_ns()))?;
        submission.wait()?;
        drop(submission);
        // The frame's marker signals a moment after its submission.
        let mut done = profiler.collect()?;
        if done.is_empty() {
            done = profiler.wait_collect_all(FRAME_TIMEOUT)?;
        }
        take(done)?;
    }
    take(profiler.wait_collect_all(FRAME_TIMEOUT)?)?;
    if frames.len() != plan.frames as usize {
        return Err(CliError::Failure(format!(
            "the profiler returned {} of {} frames",
            frames.len(),
            plan.frames
        )));
    }
    let timeline = profiler.timeline(&frames);
    let calibration = profiler.calibration();
    drop(expected);
    drop(profiler);
    drop(passes);
    drop(device);
    Ok(Measured {
        frames,
        timeline,
        checks,
        calibration,
    })
}

/// The progress bar: hidden for `--json`, for a single frame and when stderr
/// is not a terminal; otherwise shown once the run has taken a second.
struct Bar {
    bar: Option<ProgressBar>,
    started: Instant,
    shown: std::cell::Cell<bool>,
}

impl Bar {
    fn new(enabled: bool, frames: u32) -> Self {
        let bar = enabled.then(|| {
            let bar =
                ProgressBar::with_draw_target(Some(frames.into()), ProgressDrawTarget::hidden());
            if let Ok(style) = ProgressStyle::with_template(
                "{spinner} frame {pos}/{len} {wide_bar} {elapsed} (eta {eta})",
            ) {
                bar.set_style(style);
            }
            bar
        });
        Self {
            bar,
            started: Instant::now(),
            shown: std::cell::Cell::new(false),
        }
    }

    fn frame_done(&self) {
        let Some(bar) = &self.bar else { return };
        bar.inc(1);
        if !self.shown.get() && self.started.elapsed() >= Duration::from_secs(1) {
            self.shown.set(true);
            bar.set_draw_target(ProgressDrawTarget::stderr());
            bar.enable_steady_tick(Duration::from_millis(100));
        }
    }

    fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// The outputs asked for, prepared (and checked to be distinct files)
/// before any GPU work.
struct Outputs {
    trace: Option<PendingOutput>,
    perfetto: Option<PendingOutput>,
    csv: Option<PendingOutput>,
    svg: Option<PendingOutput>,
}

impl Outputs {
    fn prepare(args: &RunArgs) -> CliResult<Self> {
        let prep = |flag, p: &Option<std::path::PathBuf>| {
            p.as_deref()
                .map(|p| PendingOutput::prepare(flag, p))
                .transpose()
        };
        let outputs = Self {
            trace: prep("--trace", &args.trace)?,
            perfetto: prep("--perfetto", &args.perfetto)?,
            csv: prep("--csv", &args.csv)?,
            svg: prep("--svg", &args.svg)?,
        };
        // One file given to two options: only the last would survive.
        let all: Vec<&PendingOutput> = [
            &outputs.trace,
            &outputs.perfetto,
            &outputs.csv,
            &outputs.svg,
        ]
        .into_iter()
        .flatten()
        .collect();
        for (i, later) in all.iter().enumerate() {
            for earlier in &all[..i] {
                later.check_distinct(earlier)?;
            }
        }
        Ok(outputs)
    }

    fn write(self, timeline: &Timeline, title: String) -> CliResult<()> {
        if let Some(o) = self.trace {
            o.commit(|w| export::write_chrome_trace(timeline, w))?;
        }
        if let Some(o) = self.perfetto {
            o.commit(|w| export::write_perfetto(timeline, w))?;
        }
        if let Some(o) = self.csv {
            o.commit(|w| export::write_csv(timeline, w))?;
        }
        if let Some(o) = self.svg {
            let opts = export::SvgOptions {
                title: Some(title),
                ..Default::default()
            };
            o.commit(|w| export::write_svg(timeline, &opts, w))?;
        }
        Ok(())
    }
}

/// Runs `gpu-counters run`.
pub fn run(args: &RunArgs) -> CliResult<()> {
    let plan = Plan::from_args(args)?;
    let outputs = Outputs::prepare(args)?;
    let instance = Instance::new(&InstanceOptions::default())?;
    let (devices, default) = devices::list(&instance)?;
    let index = match args.device {
        Some(i) if i < devices.len() => i,
        Some(i) => {
            let there = match devices.len() {
                0 => "there are no Vulkan 1.3 devices".to_string(),
                1 => "there is 1 device (index 0)".to_string(),
                n => format!("there are {n} devices (indices 0 to {})", n - 1),
            };
            return Err(CliError::Usage(format!(
                "--device {i}: no such device; {there}, see `gpu-counters devices`"
            )));
        }
        None => default.ok_or_else(|| {
            CliError::Failure(
                "no Vulkan 1.3 device found; install a driver (apt-get install mesa-vulkan-drivers for lavapipe)"
                    .into(),
            )
        })?,
    };
    let info = devices[index].clone();
    let bar = Bar::new(
        !args.json && plan.frames > 1 && std::io::stderr().is_terminal(),
        plan.frames,
    );
    let measured = execute(&instance, index, &plan, &bar);
    bar.finish();
    let measured = match measured {
        Ok(m) => m,
        Err(e) => {
            devices::print_validation(&instance);
            return Err(e);
        }
    };
    let report = RunReport {
        device: &info,
        is_default: Some(index) == default,
        plan: &plan,
        measured: &measured,
    };
    let mismatches = report.mismatches();
    if args.json {
        println!("{}", report::to_json_string(&report)?);
    } else {
        report::print_human(&report);
    }
    let title = format!(
        "gpu-counters run {} on {} ({} frame{})",
        plan.workload.name(),
        info.name,
        plan.frames,
        if plan.frames == 1 { "" } else { "s" }
    );
    outputs.write(&measured.timeline, title)?;
    devices::check_validation(&instance)?;
    if !mismatches.is_empty() {
        for m in &mismatches {
            eprintln!("mismatch: {m}");
        }
        return Err(CliError::Failure(format!(
            "{} statistic{} differ from the expected counts (listed above)",
            mismatches.len(),
            if mismatches.len() == 1 { "" } else { "s" }
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpu_counters_core::CounterResultStatistic;
    use gpu_counters_profiler::{DropCounts, ScopeResult};

    fn scope(label: &str, kind: PassKind, invocations: Option<u64>) -> ScopeResult {
        ScopeResult {
            label: label.into(),
            kind,
            thread: "main".into(),
            depth: 0,
            parent: None,
            start_ns: 100,
            end_ns: 250,
            duration_ns: 150,
            start_ticks: 1000,
            end_ticks: 2500,
            error_bound_ns: 3,
            statistics: invocations.map(|n| CounterResultStatistic {
                compute_kernel_invocations: n,
                ..Default::default()
            }),
        }
    }

    fn frame(scopes: Vec<ScopeResult>, drops: DropCounts) -> FrameResult {
        FrameResult {
            index: 4,
            queue: QUEUE.into(),
            cpu_submit_ns: Some(50),
            cpu_complete_ns: 300,
            scopes,
            dropped_scopes: drops.total(),
            drops,
        }
    }

    const COMPUTE: &[(CommonCounter, u64)] = &[(CommonCounter::ComputeKernelInvocations, 21)];

    #[test]
    fn checks_come_from_the_scopes_statistics() {
        let passes = [
            ("compute", PassKind::Compute, COMPUTE),
            ("copy", PassKind::Blit, &[][..]),
        ];
        let f = frame(
            vec![
                scope("compute", PassKind::Compute, Some(21)),
                scope("copy", PassKind::Blit, Some(0)),
            ],
            DropCounts::default(),
        );
        let checks = check_frame(&passes, &f, true).expect("one scope per pass");
        assert_eq!(checks.len(), 2);
        assert_eq!(checks[0].matches(), Some(true));
        assert_eq!(checks[0].expected, COMPUTE);
        assert_eq!(
            checks[0].statistics.map(|s| s.compute_kernel_invocations),
            Some(21)
        );
        assert_eq!(checks[1].matches(), Some(true));

        let wrong = frame(
            vec![
                scope("compute", PassKind::Compute, Some(20)),
                scope("copy", PassKind::Blit, Some(0)),
            ],
            DropCounts::default(),
        );
        let checks = check_frame(&passes, &wrong, true).expect("one scope per pass");
        assert_eq!(
            checks[0].mismatches(),
            ["compute_kernel_invocations = 20, expected 21"]
        );
        // Without statistics on the device there is nothing to check.
        let none = frame(
            vec![scope("compute", PassKind::Compute, None)],
            DropCounts::default(),
        );
        let checks = check_frame(&passes[..1], &none, false).expect("one scope per pass");
        assert_eq!(checks[0].matches(), None);
        // With statistics on, a scope without them is a mismatch.
        let checks = check_frame(&passes[..1], &none, true).expect("one scope per pass");
        assert_eq!(checks[0].matches(), Some(false));
    }

    #[test]
    fn a_dropped_or_misplaced_scope_fails_the_run() {
        let passes = [
            ("compute", PassKind::Compute, COMPUTE),
            ("copy", PassKind::Blit, &[][..]),
        ];
        let dropped = frame(
            vec![scope("compute", PassKind::Compute, Some(21))],
            DropCounts {
                failed: 1,
                ..Default::default()
            },
        );
        let e = check_frame(&passes, &dropped, true).expect_err("a scope failed");
        assert_eq!(e.exit_code(), 1);
        assert_eq!(
            e.to_string(),
            "frame 4: 1 of 2 passes have results (1 scopes dropped: 1 failed, 0 not ended, \
             0 without a ring slot, 0 over capacity, 0 abandoned)"
        );
        let swapped = frame(
            vec![
                scope("copy", PassKind::Blit, Some(0)),
                scope("compute", PassKind::Compute, Some(21)),
            ],
            DropCounts::default(),
        );
        let e = check_frame(&passes, &swapped, true).expect_err("out of order");
        assert_eq!(e.exit_code(), 1);
    }
}
