//! `gpu-counters run`: a built-in workload, every pass sampled, for some
//! frames, on a Vulkan device (`run_vulkan`), a wgpu adapter
//! (`run_wgpu`, `--backend wgpu`) or a CUDA device (`run_cuda`, `--backend
//! cuda`).
//!
//! The run goes through the profiler (`gpu-counters-profiler`), generic
//! over the backend, so that the command and the library resolve samples
//! to a timeline one way, whichever the backend. Per frame,
//! [`Profiler::begin_frame`] gives a frame, and the backend records every
//! pass inside its own profiler scope
//! ([`FrameSource::submit_frame`](crate::measure::FrameSource::submit_frame)) and
//! submits; the submission is waited for, the frame ended
//! ([`Profiler::end_frame`]) and collected ([`Profiler::collect`],
//! [`Profiler::wait_collect_all`]): a [`FrameResult`] with one scope per
//! pass, calibrated onto `CLOCK_MONOTONIC`. The report's tables, its JSON
//! and the statistics check read the [`FrameResult`]s; the exports read
//! [`Profiler::timeline`] of them. All of that is this module's, once for
//! every backend: the frames in [`measure`](crate::measure), the plan in
//! [`plan`](crate::plan), the devices asked for in [`choice`](crate::choice),
//! the reports in [`report`](crate::report) and [`multi`](crate::multi), and
//! the command itself here ([`run`]).

use crate::choice::{DeviceChoice, DeviceOrder};
use crate::cli::{Backend, RunArgs};
use crate::error::{CliError, CliResult};
use crate::measure::{Ran, RanMany, Validation};
use crate::multi;
use crate::output::PendingOutput;
use crate::plan::Plan;
use crate::progress::Bar;
use crate::report::{self, RunReport};
use crate::stdio::{errln, outln};
use crate::{run_cuda, run_vulkan, run_wgpu};
use gpu_counters_hal::timeline::{MultiTimeline, Timeline};
use gpu_counters_profiler::export;
use std::io::IsTerminal;

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
