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

use crate::choice::DeviceOrder;
use crate::error::CliResult;
use crate::measure::Measured;
use crate::report;
use crate::stdio::outln;
use gpu_counters_hal::timeline::{ClockSummary, MultiTimeline, TimelineFrame};
use serde_json::{json, Value};

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
