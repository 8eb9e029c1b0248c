//! `gpu-counters run --device all` or `--device N,M,...`: the run on
//! several devices of one backend at once (Vulkan and CUDA), one profiler
//! per device (its own ring, calibration and bound), one CPU timeline.
//!
//! Per frame, every device records and submits its passes, then the host
//! waits for every device (`--chain`: each device in turn, its submission
//! only once the host has seen the previous device's frame complete, a
//! dependent cross-device sequence). The report is each device's report,
//! then the checks of the shared timeline: every pass inside its frame's
//! CPU window ± its device's bound and, with `--chain`, every device's
//! frame after the one it waited for, within the two devices' bounds; a
//! failed check exits 1. `--trace` writes one Chrome trace with a process
//! per device and a track per queue; `--csv` and `--svg` the flattened
//! timeline, each queue named after its device.

use crate::cli::Backend;
use crate::error::{CliError, CliResult};
use crate::report;
use crate::run::{self, Measured};
use crate::stdio::{self, outln};
use gpu_counters_hal::timeline::{ClockSummary, MultiTimeline, TimelineFrame};
use serde_json::{json, Value};

/// Most indices a `--device` list may hold: each names a device, once.
pub const MAX_LISTED_DEVICES: usize = 256;

/// What `--device` names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceChoice {
    /// No `--device`: the backend's default device.
    Default,
    /// `--device N`.
    One(usize),
    /// `--device all`: every device of the backend.
    All,
    /// `--device N,M,...`: these devices, in this order, each once.
    List(Vec<usize>),
}

impl DeviceChoice {
    /// Parses `--device`'s value: an index, `all`, or at most
    /// [`MAX_LISTED_DEVICES`] indices separated by commas, each given once.
    pub fn parse(value: Option<&str>) -> CliResult<Self> {
        let Some(v) = value else {
            return Ok(Self::Default);
        };
        if v == "all" {
            return Ok(Self::All);
        }
        let shown = stdio::text(v);
        let bad = || {
            CliError::Usage(format!(
                "--device {shown}: expected a device index, indices separated by commas (0,1) or `all`"
            ))
        };
        let count = v.split(',').count();
        if count > MAX_LISTED_DEVICES {
            return Err(CliError::Usage(format!(
                "--device: {count} indices: at most {MAX_LISTED_DEVICES} may be listed \
                 (each device once)"
            )));
        }
        let mut list: Vec<usize> = Vec::new();
        for part in v.split(',') {
            let i: usize = part.trim().parse().map_err(|_| bad())?;
            if list.contains(&i) {
                return Err(CliError::Usage(format!(
                    "--device {shown}: device {i} is given twice"
                )));
            }
            list.push(i);
        }
        match list.as_slice() {
            [i] if !v.contains(',') => Ok(Self::One(*i)),
            _ => Ok(Self::List(list)),
        }
    }

    /// Whether it names several devices (`all` or a list), so that the run
    /// is a several-device run, whatever the count found.
    pub fn is_several(&self) -> bool {
        matches!(self, Self::All | Self::List(_))
    }

    /// The single device asked for (`None`: the default); `None` too for a
    /// several-device choice, which [`DeviceChoice::indices`] resolves.
    pub fn single(&self) -> Option<usize> {
        match self {
            Self::One(i) => Some(*i),
            _ => None,
        }
    }

    /// The device indices of a several-device choice among `count` devices
    /// of `backend`: a usage error for an index that does not exist, or for
    /// `all` when there are none.
    pub fn indices(&self, backend: Backend, count: usize) -> CliResult<Vec<usize>> {
        match self {
            Self::All if count == 0 => Err(CliError::Usage(format!(
                "--device all: there are no {}, see `{}`",
                backend.devices_found(),
                backend.devices_command()
            ))),
            Self::All => Ok((0..count).collect()),
            Self::List(list) => list
                .iter()
                .map(|&i| run::pick_device(backend, Some(i), count, None))
                .collect(),
            Self::Default | Self::One(_) => Err(CliError::Failure(
                "internal: a single device is not a list of devices".into(),
            )),
        }
    }
}

/// How a several-device run orders its devices within a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceOrder {
    /// Every device submits, then the host waits for each.
    Together,
    /// Each device in turn, submitted once the host has seen the previous
    /// device's frame complete (`--chain`).
    Chain,
}

impl DeviceOrder {
    /// Its name in the report.
    pub fn name(self) -> &'static str {
        match self {
            Self::Together => "together",
            Self::Chain => "chain",
        }
    }
}

/// The several devices' measurements on one CPU timeline.
pub fn timeline_of(measured: &[Measured]) -> MultiTimeline {
    let mut multi = MultiTimeline::new();
    for m in measured {
        multi.push(m.timeline.clone(), Some(ClockSummary::of(&m.calibration)));
    }
    multi
}

/// The checks of the shared timeline, as problem lines (none: all hold):
/// every pass inside its frame's CPU window ± its device's bound; with
/// [`DeviceOrder::Chain`], the frames in the order the host ran them
/// (frame 0 on every device in turn, then frame 1, ...), each one's passes
/// ending before the next one's start, within the two bounds.
pub fn timeline_problems(multi: &MultiTimeline, order: DeviceOrder) -> Vec<String> {
    let mut out: Vec<String> = multi
        .outside_cpu_windows()
        .into_iter()
        .map(|(d, v)| {
            format!(
                "device {d}, frame {}, pass {}: outside its frame's CPU window by {} ns \
                 before the submit and {} ns after the completion, beyond its error bound",
                v.frame, v.label, v.early_ns, v.late_ns
            )
        })
        .collect();
    if order == DeviceOrder::Chain {
        let frames = multi
            .devices
            .iter()
            .map(|d| d.timeline.frames.len())
            .max()
            .unwrap_or(0);
        let mut sequence: Vec<(usize, &TimelineFrame)> = Vec::new();
        for f in 0..frames {
            for (d, dev) in multi.devices.iter().enumerate() {
                if let Some(frame) = dev.timeline.frames.get(f) {
                    sequence.push((d, frame));
                }
            }
        }
        for pair in sequence.windows(2) {
            let ((da, fa), (db, fb)) = (pair[0], pair[1]);
            for a in &fa.intervals {
                for b in &fb.intervals {
                    if !a.ends_before(b) {
                        out.push(format!(
                            "device {da}, frame {}, pass {} ends at {} ns ± {} ns, after \
                             device {db}, frame {}, pass {}, which waited for it, starts at \
                             {} ns ± {} ns",
                            fa.index,
                            a.label,
                            a.end_ns,
                            a.error_bound_ns,
                            fb.index,
                            b.label,
                            b.start_ns,
                            b.error_bound_ns
                        ));
                    }
                }
            }
        }
    }
    out
}

/// Prints the shared timeline's summary: each device's calibration and
/// bound, the order, and the checks.
pub fn print_summary(
    multi: &MultiTimeline,
    order: DeviceOrder,
    problems: &[String],
) -> CliResult<()> {
    outln!(
        "one CPU timeline (CLOCK_MONOTONIC), {} devices, {}:",
        multi.devices.len(),
        match order {
            DeviceOrder::Together => "each frame submitted on every device, then waited for",
            DeviceOrder::Chain =>
                "each frame on the devices in turn, each submitted once the previous one completed",
        }
    )?;
    for (d, dev) in multi.devices.iter().enumerate() {
        let bound = dev
            .timeline
            .frames
            .iter()
            .flat_map(|f| f.intervals.iter().map(|i| i.error_bound_ns))
            .max()
            .unwrap_or(0);
        match dev.clock {
            Some(c) => outln!(
                "  device {d} {}: calibration {}, bound ± {} (passes up to ± {})",
                dev.timeline.device,
                c.method.name(),
                report::fmt_ns(c.error_bound_ns),
                report::fmt_ns(bound)
            )?,
            None => outln!("  device {d} {}", dev.timeline.device)?,
        }
    }
    let windows = problems.iter().filter(|p| p.contains("CPU window")).count();
    outln!(
        "  every pass inside its frame's CPU window ± its device's bound: {}",
        if windows == 0 {
            "yes".to_string()
        } else {
            format!("no, {windows} outside")
        }
    )?;
    if order == DeviceOrder::Chain {
        let out_of_order = problems.len() - windows;
        outln!(
            "  every frame after the frame it waited for, within the two bounds: {}",
            if out_of_order == 0 {
                "yes".to_string()
            } else {
                format!("no, {out_of_order} out of order")
            }
        )?;
    }
    Ok(())
}

/// The JSON of a several-device run: each device's report, then the
/// shared timeline's order and problems.
pub fn to_json(reports: Vec<Value>, order: DeviceOrder, problems: &[String]) -> Value {
    json!({
        "devices": reports,
        "timeline": {
            "clock": "CLOCK_MONOTONIC",
            "order": order.name(),
            "problems": problems,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_choices_parse() {
        assert_eq!(DeviceChoice::parse(None).ok(), Some(DeviceChoice::Default));
        assert_eq!(
            DeviceChoice::parse(Some("3")).ok(),
            Some(DeviceChoice::One(3))
        );
        assert_eq!(
            DeviceChoice::parse(Some("all")).ok(),
            Some(DeviceChoice::All)
        );
        assert_eq!(
            DeviceChoice::parse(Some("1,0")).ok(),
            Some(DeviceChoice::List(vec![1, 0]))
        );
        assert_eq!(
            DeviceChoice::parse(Some("1,")).map_err(|e| e.to_string()),
            Err(
                "--device 1,: expected a device index, indices separated by commas (0,1) or `all`"
                    .into()
            )
        );
        let e = DeviceChoice::parse(Some("0,0")).expect_err("twice");
        assert_eq!(e.exit_code(), 2);
        assert_eq!(e.to_string(), "--device 0,0: device 0 is given twice");
        assert!(DeviceChoice::parse(Some("x")).is_err());
        assert!(DeviceChoice::parse(Some("-1")).is_err());
    }

    #[test]
    fn device_lists_resolve_against_the_devices_there_are() {
        let all = DeviceChoice::All;
        assert_eq!(all.indices(Backend::Vulkan, 2).ok(), Some(vec![0, 1]));
        let e = all.indices(Backend::Vulkan, 0).expect_err("none");
        assert_eq!(e.exit_code(), 2);
        assert_eq!(
            e.to_string(),
            "--device all: there are no Vulkan 1.3 devices, see `gpu-counters devices`"
        );
        let list = DeviceChoice::List(vec![0, 7]);
        let e = list.indices(Backend::Cuda, 2).expect_err("out of range");
        assert_eq!(e.exit_code(), 2);
        assert_eq!(
            e.to_string(),
            "--device 7: no such CUDA device; there are 2 CUDA devices (indices 0 to 1), \
             see `gpu-counters devices --backend cuda`"
        );
        assert_eq!(
            DeviceChoice::List(vec![1, 0])
                .indices(Backend::Vulkan, 2)
                .ok(),
            Some(vec![1, 0])
        );
    }
}
