//! Measuring a plan's frames through the profiler: a backend's side of the
//! run ([`FrameSource`]), the frames run and checked ([`profile`],
//! [`profile_many`]), and what a backend's run gives back ([`Ran`],
//! [`RanMany`]).

use crate::choice::DeviceOrder;
use crate::cli::Backend;
use crate::error::{CliError, CliResult};
use crate::plan::{PassExpectation, Plan, QUEUE};
use crate::progress::Bar;
use gpu_counters_hal::backend::{BackendDevice, BackendSubmission};
use gpu_counters_hal::timeline::Timeline;
use gpu_counters_hal::{
    Calibration, CommonCounter, CommonCounterSet, CounterResultStatistic, DeviceInfo,
};
use gpu_counters_profiler::{Frame, FrameResult, Profiler, ProfilerOptions, Submission, WhenFull};
use std::time::Duration;

/// One pass's statistics in one frame, and what they should have been.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PassCheck {
    /// The counts known in advance, for the counters the device offers.
    pub expected: Vec<(CommonCounter, u64)>,
    /// What the GPU counted (end minus start), where both samples have values.
    pub statistics: Option<CounterResultStatistic>,
    /// Why there are no statistics although the device offers them.
    pub problem: Option<String>,
}

/// The value of statistic `counter` in `s`.
pub fn stat(s: &CounterResultStatistic, counter: CommonCounter) -> Option<u64> {
    s.named()
        .iter()
        .find(|(name, _)| *name == counter.name())
        .map(|(_, v)| *v)
}

impl PassCheck {
    /// Every way the pass differs from what was expected, as messages.
    pub fn mismatches(&self) -> Vec<String> {
        if let Some(p) = &self.problem {
            return vec![p.clone()];
        }
        let Some(s) = &self.statistics else {
            return Vec::new();
        };
        self.expected
            .iter()
            .filter_map(|&(c, want)| {
                let got = stat(s, c)?;
                (got != want).then(|| format!("{} = {got}, expected {want}", c.name()))
            })
            .collect()
    }

    /// Whether the statistics match (`None` when there is nothing to check).
    pub fn matches(&self) -> Option<bool> {
        if self.problem.is_some() {
            return Some(false);
        }
        self.statistics.as_ref()?;
        Some(self.mismatches().is_empty())
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
pub(crate) const FRAME_TIMEOUT: Duration = Duration::from_secs(60);

/// The statistics check of each pass of `frame`; fails unless the frame has
/// exactly one scope per pass, in order (the profiler drops, and counts, a
/// scope whose samples failed).
pub(crate) fn check_frame(
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

#[cfg(test)]
mod tests {
    use super::*;
    use gpu_counters_hal::timeline::PassKind;
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
}
