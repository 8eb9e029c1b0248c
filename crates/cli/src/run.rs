//! `gpu-counters run`: a built-in workload, every pass sampled, for some
//! frames, on a Vulkan device (`run_vulkan`), a wgpu adapter
//! (`run_wgpu`, `--backend wgpu`) or a CUDA device (`run_cuda`, `--backend
//! cuda`).
//!
//! The run goes through the profiler (`gpu-counters-profiler`), generic
//! over the backend, so that the command and the library resolve samples
//! to a timeline one way, whichever the backend. Per frame,
//! [`Profiler::begin_frame`] gives a frame, and the backend records every
//! pass inside its own profiler scope ([`FrameSource::submit_frame`]) and
//! submits; the submission is waited for, the frame ended
//! ([`Profiler::end_frame`]) and collected ([`Profiler::collect`],
//! [`Profiler::wait_collect_all`]): a [`FrameResult`] with one scope per
//! pass, calibrated onto `CLOCK_MONOTONIC`. The report's tables, its JSON
//! and the statistics check read the [`FrameResult`]s; the exports read
//! [`Profiler::timeline`] of them. All of that is this module's, once for
//! every backend ([`profile`], [`run`]).

pub(crate) use crate::cli::Backend;
use crate::cli::{self, RunArgs, SizeArgs, WorkloadName};
use crate::error::{CliError, CliResult};
pub(crate) use crate::multi::DeviceOrder;
use crate::multi::{self, DeviceChoice};
use crate::output::PendingOutput;
use crate::report::{self, PassCheck, RunReport};
use crate::stdio::{errln, outln};
use crate::{run_cuda, run_vulkan, run_wgpu};
use gpu_counters_hal::backend::{BackendDevice, BackendSubmission};
use gpu_counters_hal::timeline::{MultiTimeline, PassKind, Timeline};
use gpu_counters_hal::{Calibration, CommonCounter, CommonCounterSet, DeviceInfo};
use gpu_counters_profiler::{
    export, Frame, FrameResult, Profiler, ProfilerOptions, Submission, WhenFull,
};
use gpu_counters_workloads::WorkloadError;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::time::{Duration, Instant};

/// The queue every pass runs on, as named in timelines (Vulkan and wgpu: the
/// one graphics and compute queue; CUDA names its stream, see
/// [`FrameSource::queue_label`]).
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
    pub(crate) fn check_invocations(&self) -> CliResult<()> {
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

impl ComputeSizes {
    /// The workload's size fields, with their options and values, for
    /// [`workload_error`].
    pub(crate) fn fields(&self) -> Vec<(&'static str, &'static str, String)> {
        vec![
            (
                "workgroup_size",
                "--workgroup-size",
                self.workgroup_size.to_string(),
            ),
            ("workgroups", "--workgroups", self.workgroups.to_string()),
        ]
    }
}

impl RenderSizes {
    /// The workload's size fields, with their options and values, for
    /// [`workload_error`].
    pub(crate) fn fields(&self) -> Vec<(&'static str, &'static str, String)> {
        vec![
            ("triangles", "--triangles", self.triangles.to_string()),
            ("width", "--width", self.width.to_string()),
            ("height", "--height", self.height.to_string()),
        ]
    }
}

impl Plan {
    /// Fails for a workload `backend` cannot measure as the Vulkan backend
    /// does: on wgpu, the mixed workload's copy pass; on CUDA, the render
    /// pass (and the copy pass).
    pub fn check_backend(&self, backend: Backend) -> CliResult<()> {
        if backend == Backend::Cuda && self.render.is_some() {
            let what = if self.copy_bytes.is_some() {
                "the render and copy passes cannot run on CUDA, which has no render pipeline \
                 and no copy pass here"
            } else {
                "the render pass cannot run on CUDA, which has no render pipeline"
            };
            return Err(CliError::Usage(format!(
                "run {} --backend cuda: {what}; run compute with --backend cuda",
                self.workload.name()
            )));
        }
        if backend == Backend::Wgpu && self.copy_bytes.is_some() {
            return Err(CliError::Usage(format!(
                "run {} --backend wgpu: the copy pass cannot be measured on wgpu, which records \
                 a copy on the command encoder, outside any pass, where it can be neither timed \
                 by pass timestamp writes nor counted by a statistics query; run compute or \
                 render with --backend wgpu",
                self.workload.name()
            )));
        }
        Ok(())
    }

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
pub(crate) fn workload_error(
    what: &str,
    e: WorkloadError,
    fields: &[(&str, &str, String)],
) -> CliError {
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

/// One pass of a frame: its backend's work, label, kind and the statistics
/// it must produce.
pub(crate) struct Pass<W> {
    pub label: &'static str,
    pub kind: PassKind,
    pub work: W,
    pub expected: Vec<(CommonCounter, u64)>,
}

/// The statistic counters `info` offers.
fn offered(info: &DeviceInfo) -> Vec<CommonCounter> {
    info.counter_set(CommonCounterSet::Statistic)
        .map(|s| s.counters.clone())
        .unwrap_or_default()
}

/// `list` less the counters `info` does not offer.
fn keep_offered(info: &DeviceInfo, list: Vec<(CommonCounter, u64)>) -> Vec<(CommonCounter, u64)> {
    let offered = offered(info);
    list.into_iter()
        .filter(|(c, _)| offered.contains(c))
        .collect()
}

impl<W> Pass<W> {
    /// The compute pass: `invocations` kernel invocations, where `info`
    /// offers that counter.
    pub fn compute(info: &DeviceInfo, invocations: u64, work: W) -> Self {
        Self {
            label: "compute",
            kind: PassKind::Compute,
            work,
            expected: keep_offered(
                info,
                vec![(CommonCounter::ComputeKernelInvocations, invocations)],
            ),
        }
    }

    /// The render pass: vertex and clipper invocations and covered pixels
    /// (fragments passed), those `info` offers.
    pub fn render(info: &DeviceInfo, [vertices, primitives, pixels]: [u64; 3], work: W) -> Self {
        Self {
            label: "render",
            kind: PassKind::Render,
            work,
            expected: keep_offered(
                info,
                vec![
                    (CommonCounter::VertexInvocations, vertices),
                    (CommonCounter::ClipperInvocations, primitives),
                    (CommonCounter::FragmentsPassed, pixels),
                ],
            ),
        }
    }

    /// What the pass's scope must be.
    pub fn expectation(&self) -> PassExpectation<'_> {
        (self.label, self.kind, self.expected.as_slice())
    }
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
pub(crate) type PassExpectation<'a> = (&'a str, PassKind, &'a [(CommonCounter, u64)]);

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
             {} not ended, {} without a ring slot, {} over capacity, {} abandoned, \
             {} in an abandoned frame)",
            frame.index,
            frame.scopes.len(),
            passes.len(),
            frame.dropped_scopes,
            d.failed,
            d.not_ended,
            d.no_slot,
            d.over_capacity,
            d.abandoned,
            d.frame_abandoned
        )));
    }
    Ok(frame
        .scopes
        .iter()
        .zip(passes)
        .map(|(scope, &(_, _, expected))| PassCheck {
            expected: expected.to_vec(),
            statistics: scope.statistics.as_deref().copied(),
            problem: (has_stats && scope.statistics.is_none())
                .then(|| "statistics missing from the pass's scope".to_string()),
        })
        .collect())
}

/// One backend's side of `run`: its device (for the profiler), its passes'
/// expectations, and the recording and submission of one frame.
pub(crate) trait FrameSource {
    /// The backend's device.
    type Device: BackendDevice;
    /// The device the profiler samples on.
    fn device(&self) -> &Self::Device;
    /// What each pass's scope must be, in the order of the passes.
    fn expectations(&self) -> Vec<PassExpectation<'_>>;
    /// Records frame `index`'s passes, each in a profiler scope of `frame`,
    /// and submits them: the backend's submission.
    fn submit_frame(
        &self,
        frame: &Frame<'_, Self::Device>,
        index: u32,
    ) -> CliResult<Submission<Self::Device>>;
    /// What timelines call the queue the passes run on.
    fn queue_label(&self) -> &'static str {
        QUEUE
    }
}

/// Fails unless the device (`backend`'s `index`) offers timestamps.
pub(crate) fn check_timestamps(info: &DeviceInfo, backend: Backend, index: usize) -> CliResult<()> {
    if info.counter_set(CommonCounterSet::Timestamp).is_none() {
        return Err(CliError::Failure(format!(
            "{} [{index}] `{}` offers no timestamps, which `run` needs",
            backend.device_noun(),
            info.name
        )));
    }
    Ok(())
}

/// Runs the plan's frames of `source` through a profiler, one scope per
/// pass: each frame is recorded, submitted and waited for, ended and
/// collected; every frame's scopes are checked against the passes'
/// expectations.
pub(crate) fn profile<S: FrameSource>(source: &S, plan: &Plan, bar: &Bar) -> CliResult<Measured> {
    let mut all = profile_many(std::slice::from_ref(source), plan, bar, DeviceOrder::Chain)?;
    all.pop()
        .ok_or_else(|| CliError::Failure("internal: no device was profiled".into()))
}

/// One device's profiler and what it has measured so far.
struct Profiled<'s, S: FrameSource> {
    source: &'s S,
    profiler: Profiler<S::Device>,
    expected: Vec<PassExpectation<'s>>,
    has_stats: bool,
    frames: Vec<FrameResult>,
    checks: Vec<Vec<PassCheck>>,
}

impl<S: FrameSource> Profiled<'_, S> {
    /// Checks and keeps the frames the profiler gave back; the first
    /// device's move the progress bar.
    fn take(&mut self, done: Vec<FrameResult>, bar: Option<&Bar>) -> CliResult<()> {
        for frame in done {
            self.checks
                .push(check_frame(&self.expected, &frame, self.has_stats)?);
            self.frames.push(frame);
            if let Some(bar) = bar {
                bar.frame_done();
            }
        }
        Ok(())
    }

    /// Collects the frames done (waiting for the marker of a frame whose
    /// submission has completed).
    fn collect(&mut self, bar: Option<&Bar>) -> CliResult<()> {
        // The frame's marker signals a moment after its submission.
        let mut done = self.profiler.collect()?;
        if done.is_empty() {
            done = self.profiler.wait_collect_all(FRAME_TIMEOUT)?;
        }
        self.take(done, bar)
    }
}

/// Runs the plan's frames on every source at once, one profiler per source
/// (its own ring, calibration and bound): per frame, each source records
/// and submits its passes in a frame of its profiler; with
/// [`DeviceOrder::Together`] the host then waits for every source's
/// submission, with [`DeviceOrder::Chain`] it waits for each before the
/// next source submits. Every frame's scopes are checked against the
/// passes' expectations; one [`Measured`] per source, in order.
pub(crate) fn profile_many<S: FrameSource>(
    sources: &[S],
    plan: &Plan,
    bar: &Bar,
    order: DeviceOrder,
) -> CliResult<Vec<Measured>> {
    let mut profiled: Vec<Profiled<'_, S>> = Vec::with_capacity(sources.len());
    for source in sources {
        let has_stats = source
            .device()
            .info()
            .counter_set(CommonCounterSet::Statistic)
            .is_some();
        let expected = source.expectations();
        let profiler = Profiler::new(
            source.device(),
            ProfilerOptions {
                // Frames run one after another (each is waited for, so that
                // its submit-to-complete time is its own); a second slot lets
                // the next frame begin whatever the state of the last one's.
                frames_in_flight: 2,
                max_scopes_per_frame: expected.len() as u32,
                statistics: has_stats,
                when_full: WhenFull::Wait {
                    timeout: FRAME_TIMEOUT,
                },
                queue_name: Some(source.queue_label().to_string()),
            },
        )?;
        // A build with the feature `tracy` streams every frame into Tracy.
        #[cfg(feature = "tracy")]
        profiler.stream_to_tracy();
        profiled.push(Profiled {
            source,
            profiler,
            expected,
            has_stats,
            frames: Vec::with_capacity(plan.frames as usize),
            checks: Vec::with_capacity(plan.frames as usize),
        });
    }
    for n in 0..plan.frames {
        let mut submitted = Vec::with_capacity(profiled.len());
        for p in &profiled {
            let frame = p.profiler.begin_frame()?;
            let submission = p.source.submit_frame(&frame, n)?;
            p.profiler.end_frame(frame, [&submission])?;
            match order {
                DeviceOrder::Chain => {
                    submission.wait()?;
                }
                DeviceOrder::Together => submitted.push(submission),
            }
        }
        for submission in submitted {
            submission.wait()?;
        }
        for (k, p) in profiled.iter_mut().enumerate() {
            p.collect((k == 0).then_some(bar))?;
        }
    }
    let mut out = Vec::with_capacity(profiled.len());
    for (k, mut p) in profiled.into_iter().enumerate() {
        let rest = p.profiler.wait_collect_all(FRAME_TIMEOUT)?;
        p.take(rest, (k == 0).then_some(bar))?;
        if p.frames.len() != plan.frames as usize {
            return Err(CliError::Failure(format!(
                "the profiler returned {} of {} frames",
                p.frames.len(),
                plan.frames
            )));
        }
        let timeline = p.profiler.timeline(&p.frames);
        let calibration = p.profiler.calibration();
        out.push(Measured {
            frames: p.frames,
            timeline,
            checks: p.checks,
            calibration,
        });
    }
    Ok(out)
}

/// The progress bar: hidden for `--json`, for a single frame and when stderr
/// is not a terminal; otherwise shown on stderr once the run has taken a
/// second. indicatif discards the errors of its draws, so a stderr that
/// fails (a closed terminal) never stops or panics the run.
pub(crate) struct Bar {
    bar: Option<ProgressBar>,
    started: Instant,
    shown: std::cell::Cell<bool>,
    /// Where the bar draws once shown.
    target: fn() -> ProgressDrawTarget,
    /// How long the run goes before the bar is shown.
    show_after: Duration,
}

impl Bar {
    fn new(enabled: bool, frames: u32) -> Self {
        Self::drawing_on(
            enabled,
            frames,
            ProgressDrawTarget::stderr,
            Duration::from_secs(1),
        )
    }

    /// A bar that draws on `target` once the run has taken `show_after`.
    fn drawing_on(
        enabled: bool,
        frames: u32,
        target: fn() -> ProgressDrawTarget,
        show_after: Duration,
    ) -> Self {
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
            target,
            show_after,
        }
    }

    fn frame_done(&self) {
        let Some(bar) = &self.bar else { return };
        bar.inc(1);
        if !self.shown.get() && self.started.elapsed() >= self.show_after {
            self.shown.set(true);
            bar.set_draw_target((self.target)());
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
        Self::write_drawings(self.csv, self.svg, timeline, title)
    }

    /// The outputs of a several-device run: one Chrome trace with a process
    /// per device and a track per queue; CSV and SVG of the flattened
    /// timeline (each queue named after its device). A Perfetto output
    /// writes each device's frames under `timeline.device_label(id)`.
    fn write_multi(self, timeline: &MultiTimeline, title: String) -> CliResult<()> {
        if let Some(o) = self.trace {
            o.commit(|w| export::write_chrome_trace_multi(timeline, w))?;
        }
        let flat = timeline.flattened();
        if let Some(o) = self.perfetto {
            // The flattened timeline: each queue's track is named after its
            // device, so every device's queues are tracks of their own.
            o.commit(|w| export::write_perfetto(&flat, w))?;
        }
        Self::write_drawings(self.csv, self.svg, &flat, title)
    }

    /// Writes the CSV and SVG outputs of `timeline`.
    fn write_drawings(
        csv: Option<PendingOutput>,
        svg: Option<PendingOutput>,
        timeline: &Timeline,
        title: String,
    ) -> CliResult<()> {
        if let Some(o) = csv {
            o.commit(|w| export::write_csv(timeline, w))?;
        }
        if let Some(o) = svg {
            let opts = export::SvgOptions {
                title: Some(cut_to(title, export::svg::MAX_TITLE_BYTES)),
                ..Default::default()
            };
            o.commit(|w| Ok(export::write_svg(timeline, &opts, w)?))?;
        }
        Ok(())
    }
}

/// `text`, cut to at most `max` bytes at a character boundary (the SVG
/// title, which names every device of a run, has a limit).
fn cut_to(mut text: String, max: usize) -> String {
    if text.len() > max {
        let mut end = max;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text
}

/// The device `--device` names among `count` devices of `backend` (or,
/// without it, the `default` one): a usage error naming the indices there
/// are for one that does not exist.
pub(crate) fn pick_device(
    backend: Backend,
    device: Option<usize>,
    count: usize,
    default: Option<usize>,
) -> CliResult<usize> {
    let noun = backend.device_noun();
    match device {
        Some(i) if i < count => Ok(i),
        Some(i) => {
            let there = match count {
                0 => format!("there are no {}", backend.devices_found()),
                1 => format!("there is 1 {noun} (index 0)"),
                n => format!("there are {n} {noun}s (indices 0 to {})", n - 1),
            };
            Err(CliError::Usage(format!(
                "--device {i}: no such {noun}; {there}, see `{}`",
                backend.devices_command()
            )))
        }
        None => default.ok_or_else(|| {
            CliError::Failure(format!(
                "no {} found; {}",
                backend.devices_found(),
                backend.install_hint()
            ))
        }),
    }
}

/// The validation messages of a run's backend.
pub(crate) trait Validation {
    /// Prints every message captured so far to stderr; returns how many.
    fn print(&self) -> usize;
    /// Prints them and fails if there were any.
    fn check(&self) -> CliResult<()>;
}

/// What a backend's run gives back: the device it ran on, what it measured
/// (or why it failed), and its validation messages, checked once the
/// report and the outputs are written.
pub(crate) struct Ran {
    /// The device, as `gpu-counters devices` lists it.
    pub info: DeviceInfo,
    /// Whether it is the default device of its backend.
    pub is_default: bool,
    /// The frames measured.
    pub measured: CliResult<Measured>,
    /// The backend's validation messages.
    pub validation: Box<dyn Validation>,
    /// Why the device offers no statistic set, where its backend says
    /// (CUDA: no CUPTI); the report says so.
    pub statistics_unavailable: Option<String>,
}

/// One device of a several-device run, as [`RanMany`] lists it.
pub(crate) struct RanDevice {
    /// The device, as `gpu-counters devices` lists it.
    pub info: DeviceInfo,
    /// Whether it is the default device of its backend.
    pub is_default: bool,
    /// Why the device offers no statistic set, where its backend says.
    pub statistics_unavailable: Option<String>,
}

/// What a backend's several-device run gives back: the devices, what each
/// measured (in the same order), and the backend's validation messages.
pub(crate) struct RanMany {
    /// The devices, in the order `--device` gave them.
    pub devices: Vec<RanDevice>,
    /// Per device, the frames measured.
    pub measured: CliResult<Vec<Measured>>,
    /// The backend's validation messages.
    pub validation: Box<dyn Validation>,
}

/// `measured`, or its error after the backend's validation messages are
/// printed (they may say why it failed).
fn printing_validation_on_error<T>(
    measured: CliResult<T>,
    validation: &dyn Validation,
) -> CliResult<T> {
    if measured.is_err() {
        validation.print();
    }
    measured
}

/// Fails, after listing them on stderr, for statistics that differ from
/// their expected counts.
fn fail_on_mismatches(mismatches: &[String]) -> CliResult<()> {
    if mismatches.is_empty() {
        return Ok(());
    }
    for m in mismatches {
        errln!("mismatch: {m}");
    }
    Err(CliError::Failure(format!(
        "{} statistic{} differ from the expected counts (listed above)",
        mismatches.len(),
        if mismatches.len() == 1 { "" } else { "s" }
    )))
}

/// `s` for a count other than 1.
fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// Runs `gpu-counters run` on several devices (`--device all` or a list).
fn run_several(
    args: &RunArgs,
    backend: Backend,
    choice: &DeviceChoice,
    order: DeviceOrder,
) -> CliResult<()> {
    let plan = Plan::from_args(args)?;
    plan.check_backend(backend)?;
    if backend == Backend::Wgpu {
        return Err(CliError::Usage(format!(
            "--device {}: several devices at once run with --backend vulkan or cuda; \
             give --backend wgpu one adapter",
            crate::stdio::text(args.device.as_deref().unwrap_or_default())
        )));
    }
    let outputs = Outputs::prepare(args)?;
    let bar = Bar::new(
        !args.json && plan.frames > 1 && std::io::stderr().is_terminal(),
        plan.frames,
    );
    let ran = match backend {
        Backend::Vulkan => run_vulkan::execute_many(choice, &plan, &bar, order),
        Backend::Cuda => run_cuda::execute_many(choice, &plan, &bar, order),
        Backend::Wgpu => Err(CliError::Failure("internal: wgpu runs one adapter".into())),
    };
    bar.finish();
    let RanMany {
        devices,
        measured,
        validation,
    } = ran?;
    let measured = printing_validation_on_error(measured, validation.as_ref())?;
    let reports: Vec<RunReport<'_>> = devices
        .iter()
        .zip(&measured)
        .map(|(d, m)| RunReport {
            device: &d.info,
            is_default: d.is_default,
            plan: &plan,
            measured: m,
            statistics_unavailable: d.statistics_unavailable.as_deref(),
        })
        .collect();
    let timeline = multi::timeline_of(&measured);
    let problems = multi::timeline_problems(&timeline, order);
    let mismatches: Vec<String> = reports
        .iter()
        .enumerate()
        .flat_map(|(d, r)| {
            r.mismatches()
                .into_iter()
                .map(move |m| format!("device {d}, {m}"))
        })
        .collect();
    if args.json {
        let json = multi::to_json(
            reports.iter().map(RunReport::to_json).collect(),
            order,
            &problems,
        );
        outln!(
            "{}",
            serde_json::to_string_pretty(&json).map_err(|e| CliError::Failure(e.to_string()))?
        )?;
    } else {
        for (d, report) in reports.iter().enumerate() {
            outln!("device {d}:")?;
            report::print_human(report)?;
            outln!()?;
        }
        multi::print_summary(&timeline, order, &problems)?;
    }
    let names: Vec<String> = devices.iter().map(|d| d.info.name.clone()).collect();
    let title = format!(
        "gpu-counters run {} on {} device{}: {} ({} frame{})",
        plan.workload.name(),
        devices.len(),
        plural(devices.len()),
        names.join(", "),
        plan.frames,
        plural(plan.frames as usize)
    );
    outputs.write_multi(&timeline, title)?;
    validation.check()?;
    for p in &problems {
        errln!("timeline: {p}");
    }
    fail_on_mismatches(&mismatches)?;
    if !problems.is_empty() {
        return Err(CliError::Failure(format!(
            "{} timeline check{} failed (listed above)",
            problems.len(),
            plural(problems.len())
        )));
    }
    Ok(())
}

/// Runs `gpu-counters run`.
pub fn run(args: &RunArgs) -> CliResult<()> {
    let backend = Backend::parse(&args.backend).map_err(CliError::Usage)?;
    let choice = DeviceChoice::parse(args.device.as_deref())?;
    if choice.is_several() {
        let order = if args.chain {
            DeviceOrder::Chain
        } else {
            DeviceOrder::Together
        };
        return run_several(args, backend, &choice, order);
    }
    if args.chain {
        return Err(CliError::Usage(
            "--chain: orders several devices; give --device all or a list (0,1)".into(),
        ));
    }
    let device = choice.single();
    let plan = Plan::from_args(args)?;
    plan.check_backend(backend)?;
    let outputs = Outputs::prepare(args)?;
    let bar = Bar::new(
        !args.json && plan.frames > 1 && std::io::stderr().is_terminal(),
        plan.frames,
    );
    let ran = match backend {
        Backend::Vulkan => run_vulkan::execute(device, &plan, &bar),
        Backend::Wgpu => run_wgpu::execute(device, &plan, &bar),
        Backend::Cuda => run_cuda::execute(device, &plan, &bar),
    };
    bar.finish();
    let Ran {
        info,
        is_default,
        measured,
        validation,
        statistics_unavailable,
    } = ran?;
    let measured = printing_validation_on_error(measured, validation.as_ref())?;
    let report = RunReport {
        device: &info,
        is_default,
        plan: &plan,
        measured: &measured,
        statistics_unavailable: statistics_unavailable.as_deref(),
    };
    let mismatches = report.mismatches();
    if args.json {
        outln!("{}", report::to_json_string(&report)?)?;
    } else {
        report::print_human(&report)?;
    }
    let title = format!(
        "gpu-counters run {} on {}{} ({} frame{})",
        plan.workload.name(),
        info.name,
        match backend {
            Backend::Vulkan => "",
            Backend::Wgpu => " through wgpu",
            Backend::Cuda => " through CUDA",
        },
        plan.frames,
        plural(plan.frames as usize)
    );
    outputs.write(&measured.timeline, title)?;
    validation.check()?;
    fail_on_mismatches(&mismatches)
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpu_counters_hal::CounterResultStatistic;
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
            statistics: invocations.map(|n| {
                Box::new(CounterResultStatistic {
                    compute_kernel_invocations: n,
                    ..Default::default()
                })
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
             0 without a ring slot, 0 over capacity, 0 abandoned, 0 in an abandoned frame)"
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

    #[test]
    fn device_indices_name_their_backend() {
        assert_eq!(
            pick_device(Backend::Wgpu, Some(1), 2, Some(0)).ok(),
            Some(1)
        );
        assert_eq!(pick_device(Backend::Wgpu, None, 2, Some(1)).ok(), Some(1));
        let e = pick_device(Backend::Wgpu, Some(2), 2, Some(0)).expect_err("no such adapter");
        assert_eq!(e.exit_code(), 2);
        assert_eq!(
            e.to_string(),
            "--device 2: no such wgpu adapter; there are 2 wgpu adapters (indices 0 to 1), \
             see `gpu-counters devices --backend wgpu`"
        );
        let e = pick_device(Backend::Vulkan, Some(0), 0, None).expect_err("no device");
        assert_eq!(
            e.to_string(),
            "--device 0: no such device; there are no Vulkan 1.3 devices, see `gpu-counters devices`"
        );
        let e = pick_device(Backend::Wgpu, None, 0, None).expect_err("no adapter");
        assert_eq!(e.exit_code(), 1);
    }

    #[test]
    fn mixed_is_refused_on_wgpu_only() {
        let plan = Plan {
            workload: WorkloadName::Mixed,
            frames: 1,
            compute: None,
            render: None,
            copy_bytes: Some(4096),
        };
        assert!(plan.check_backend(Backend::Vulkan).is_ok());
        let e = plan.check_backend(Backend::Wgpu).expect_err("copy on wgpu");
        assert_eq!(e.exit_code(), 2);
        assert!(e
            .to_string()
            .starts_with("run mixed --backend wgpu: the copy pass"));
    }

    #[test]
    fn only_compute_runs_on_cuda() {
        let plan = |workload, render, copy_bytes| Plan {
            workload,
            frames: 1,
            compute: None,
            render,
            copy_bytes,
        };
        let sizes = Some(RenderSizes {
            triangles: 1,
            width: 4,
            height: 4,
        });
        assert!(plan(WorkloadName::Compute, None, None)
            .check_backend(Backend::Cuda)
            .is_ok());
        let e = plan(WorkloadName::Render, sizes, None)
            .check_backend(Backend::Cuda)
            .expect_err("render on CUDA");
        assert_eq!(e.exit_code(), 2);
        assert_eq!(
            e.to_string(),
            "run render --backend cuda: the render pass cannot run on CUDA, which has no \
             render pipeline; run compute with --backend cuda"
        );
        let e = plan(WorkloadName::Mixed, sizes, Some(4096))
            .check_backend(Backend::Cuda)
            .expect_err("mixed on CUDA");
        assert_eq!(e.exit_code(), 2);
        assert!(
            e.to_string()
                .starts_with("run mixed --backend cuda: the render and copy passes"),
            "{e}"
        );
        // Render is the wgpu backend's; mixed is not.
        assert!(plan(WorkloadName::Render, sizes, None)
            .check_backend(Backend::Wgpu)
            .is_ok());
    }

    /// A terminal on which every write fails, counting the attempts.
    #[derive(Debug)]
    struct FailingTerm;

    static TERM_WRITES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

    impl FailingTerm {
        fn fail() -> std::io::Result<()> {
            TERM_WRITES.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Err(std::io::Error::from(std::io::ErrorKind::BrokenPipe))
        }
    }

    impl indicatif::TermLike for FailingTerm {
        fn width(&self) -> u16 {
            80
        }
        fn move_cursor_up(&self, _: usize) -> std::io::Result<()> {
            Self::fail()
        }
        fn move_cursor_down(&self, _: usize) -> std::io::Result<()> {
            Self::fail()
        }
        fn move_cursor_right(&self, _: usize) -> std::io::Result<()> {
            Self::fail()
        }
        fn move_cursor_left(&self, _: usize) -> std::io::Result<()> {
            Self::fail()
        }
        fn write_line(&self, _: &str) -> std::io::Result<()> {
            Self::fail()
        }
        fn write_str(&self, _: &str) -> std::io::Result<()> {
            Self::fail()
        }
        fn clear_line(&self) -> std::io::Result<()> {
            Self::fail()
        }
        fn flush(&self) -> std::io::Result<()> {
            Self::fail()
        }
    }

    /// The progress bar drawn on a terminal that fails every write (a
    /// stderr whose terminal went away): the run goes on, nothing panics,
    /// and the bar did try to draw.
    #[test]
    fn a_progress_bar_on_a_failing_terminal_never_panics() {
        let bar = Bar::drawing_on(
            true,
            3,
            || ProgressDrawTarget::term_like(Box::new(FailingTerm)),
            Duration::ZERO,
        );
        for _ in 0..3 {
            bar.frame_done();
        }
        bar.finish();
        assert!(bar.shown.get());
        assert!(TERM_WRITES.load(std::sync::atomic::Ordering::SeqCst) > 0);
    }

    #[test]
    fn cuda_device_indices_are_ordinals() {
        let e = pick_device(Backend::Cuda, Some(3), 1, Some(0)).expect_err("no such device");
        assert_eq!(e.exit_code(), 2);
        assert_eq!(
            e.to_string(),
            "--device 3: no such CUDA device; there is 1 CUDA device (index 0), \
             see `gpu-counters devices --backend cuda`"
        );
        let e = pick_device(Backend::Cuda, None, 0, None).expect_err("no device");
        assert_eq!(e.exit_code(), 1);
        assert!(e.to_string().starts_with("no CUDA devices found; "), "{e}");
        assert!(!e.to_string().contains("lavapipe"), "{e}");
    }
}
