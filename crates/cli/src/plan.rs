//! What `run` does: the workload and its sizes ([`Plan`], every default
//! applied and every size checked), and each pass of a frame with the
//! statistics it must produce ([`Pass`]).

use crate::cli::{self, Backend, RunArgs, SizeArgs, WorkloadName};
use crate::error::{CliError, CliResult};
use gpu_counters_hal::timeline::PassKind;
use gpu_counters_hal::{CommonCounter, CommonCounterSet, DeviceInfo};
use gpu_counters_workloads::WorkloadError;

/// The queue every pass runs on, as named in timelines (Vulkan and wgpu: the
/// one graphics and compute queue; CUDA names its stream, see
/// [`FrameSource::queue_label`](crate::measure::FrameSource::queue_label)).
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

/// What one pass's scope must be: its label, its kind, and the statistics
/// the workload is known to produce.
pub(crate) type PassExpectation<'a> = (&'a str, PassKind, &'a [(CommonCounter, u64)]);

#[cfg(test)]
mod tests {
    use super::*;

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
}
