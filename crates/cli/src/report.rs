//! What `run` prints: the JSON object of `--json`, or tables for people.

use crate::devices::{device_json, with_statistics_unavailable};
use crate::error::{CliError, CliResult};
use crate::measure::{stat, Measured, PassCheck};
use crate::plan::Plan;
use crate::stdio::outln;
use gpu_counters_hal::{
    BackendKind, CommonCounter, CommonCounterSet, CounterResultStatistic, DeviceInfo,
    COUNTER_ERROR_VALUE,
};
use gpu_counters_profiler::FrameResult;
use serde_json::{json, Map, Value};

/// Everything `run` reports.
pub struct RunReport<'a> {
    /// The device it ran on.
    pub device: &'a DeviceInfo,
    /// Whether that is the default device.
    pub is_default: bool,
    /// The workload and its sizes.
    pub plan: &'a Plan,
    /// The frames measured.
    pub measured: &'a Measured,
    /// Why the device offers no statistic set, where its backend says.
    pub statistics_unavailable: Option<&'a str>,
}

impl RunReport<'_> {
    /// The statistic counters the device offers.
    fn offered(&self) -> Vec<CommonCounter> {
        self.device
            .counter_set(CommonCounterSet::Statistic)
            .map(|s| s.counters.clone())
            .unwrap_or_default()
    }

    /// Every mismatch of every pass, as `frame F, pass P: ...` lines.
    pub fn mismatches(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (frame, checks) in self.measured.frames.iter().zip(&self.measured.checks) {
            for (scope, check) in frame.scopes.iter().zip(checks) {
                for m in check.mismatches() {
                    out.push(format!("frame {}, pass {}: {m}", frame.index, scope.label));
                }
            }
        }
        out
    }

    /// Statistics as a JSON object of the offered counters.
    fn statistics_json(&self, s: &CounterResultStatistic) -> Value {
        let offered = self.offered();
        let mut map = Map::new();
        for (name, value) in s.named() {
            if offered.iter().any(|c| c.name() == name) {
                let v = if value == COUNTER_ERROR_VALUE {
                    Value::Null
                } else {
                    Value::from(value)
                };
                map.insert(name.to_string(), v);
            }
        }
        Value::Object(map)
    }

    /// The workload and its sizes as JSON.
    fn workload_json(&self) -> Value {
        let p = self.plan;
        let mut map = Map::new();
        map.insert("name".into(), json!(p.workload.name()));
        map.insert("frames".into(), json!(p.frames));
        if let Some(c) = p.compute {
            map.insert("dispatches".into(), json!(c.dispatches));
            map.insert("workgroups".into(), json!(c.workgroups));
            map.insert("workgroup_size".into(), json!(c.workgroup_size));
            map.insert("iterations".into(), json!(c.iterations));
        }
        if let Some(r) = p.render {
            map.insert("triangles".into(), json!(r.triangles));
            map.insert("width".into(), json!(r.width));
            map.insert("height".into(), json!(r.height));
        }
        if let Some(b) = p.copy_bytes {
            map.insert("copy_bytes".into(), json!(b));
        }
        Value::Object(map)
    }

    /// The whole report as the JSON object `run --json` prints.
    pub fn to_json(&self) -> Value {
        let cal = &self.measured.calibration;
        let frames: Vec<Value> = self
            .measured
            .frames
            .iter()
            .zip(&self.measured.checks)
            .map(|(frame, checks)| {
                let passes: Vec<Value> = frame
                    .scopes
                    .iter()
                    .zip(checks)
                    .enumerate()
                    .map(|(k, (i, check))| {
                        let expected: Map<String, Value> = check
                            .expected
                            .iter()
                            .map(|(c, v)| (c.name().to_string(), json!(v)))
                            .collect();
                        json!({
                            "label": i.label,
                            "kind": i.kind.name(),
                            "queue": frame.queue,
                            "start_ns": i.start_ns,
                            "end_ns": i.end_ns,
                            "duration_ns": i.duration_ns,
                            "start_ticks": i.start_ticks,
                            "end_ticks": i.end_ticks,
                            "error_bound_ns": i.error_bound_ns,
                            // Signed: within the bounds, a pass may seem to
                            // start before the previous one ended.
                            "gap_before_ns": k.checked_sub(1).map(|p| {
                                i.start_ns.wrapping_sub(frame.scopes[p].end_ns) as i64
                            }),
                            "statistics": i.statistics.as_ref().map(|s| self.statistics_json(s)),
                            "expected": expected,
                            "matches": check.matches(),
                        })
                    })
                    .collect();
                json!({
                    "index": frame.index,
                    "cpu_submit_ns": cpu_submit_ns(frame),
                    "cpu_complete_ns": frame.cpu_complete_ns,
                    "passes": passes,
                })
            })
            .collect();
        json!({
            "device": with_statistics_unavailable(
                device_json(self.device, self.is_default),
                self.statistics_unavailable,
            ),
            "workload": self.workload_json(),
            "calibration": {
                "method": cal.method().name(),
                "max_deviation_ns": cal.max_deviation_ns(),
                "error_bound_ns": cal.error_bound_ns(),
                "timestamp_period_ns": cal.period_ns(),
                "rate_ns_per_tick": cal.rate_ns_per_tick(),
            },
            "frames": frames,
            "between_passes": between_passes(self.device.backend),
            "mismatches": self.mismatches(),
        })
    }
}

/// The report as pretty JSON text.
pub fn to_json_string(report: &RunReport<'_>) -> CliResult<String> {
    serde_json::to_string_pretty(&report.to_json()).map_err(|e| CliError::Failure(e.to_string()))
}

/// A duration in the unit that suits it.
pub fn fmt_ns(ns: u64) -> String {
    let f = ns as f64;
    if ns >= 1_000_000_000 {
        format!("{:.3} s", f / 1e9)
    } else if ns >= 1_000_000 {
        format!("{:.3} ms", f / 1e6)
    } else if ns >= 1_000 {
        format!("{:.3} µs", f / 1e3)
    } else {
        format!("{ns} ns")
    }
}

/// A signed offset in the unit that suits it, with its sign.
pub fn fmt_offset(ns: i128) -> String {
    let sign = if ns < 0 { "-" } else { "+" };
    format!(
        "{sign}{}",
        fmt_ns(ns.unsigned_abs().min(u64::MAX as u128) as u64)
    )
}

/// A byte count in KiB, MiB or GiB where it is a whole number of them.
fn fmt_bytes(b: u64) -> String {
    for (shift, unit) in [(30, "GiB"), (20, "MiB"), (10, "KiB")] {
        if b >= 1 << shift && b.is_multiple_of(1 << shift) {
            return format!("{} {unit}", b >> shift);
        }
    }
    format!("{b} bytes")
}

/// Prints rows as left-aligned columns, indented by two spaces.
fn print_table(rows: &[Vec<String>]) -> CliResult<()> {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    for row in rows {
        let mut line = String::from(" ");
        for (c, cell) in row.iter().enumerate() {
            line.push(' ');
            if c + 1 == row.len() {
                line.push_str(cell);
            } else {
                let pad = widths[c] - cell.chars().count();
                line.push_str(cell);
                line.push_str(&" ".repeat(pad + 1));
            }
        }
        outln!("{}", line.trim_end())?;
    }
    Ok(())
}

/// The median of sorted values (mean of the two middle ones for an even count).
fn median(sorted: &[u64]) -> u64 {
    let n = sorted.len();
    if n == 0 {
        0
    } else if n % 2 == 1 {
        sorted[n / 2]
    } else {
        ((u128::from(sorted[n / 2 - 1]) + u128::from(sorted[n / 2])) / 2) as u64
    }
}

/// The statistics cell of a pass: nonzero and expected counters, with a
/// check mark on the expected ones.
fn statistics_cell(report: &RunReport<'_>, check: &PassCheck) -> String {
    if let Some(p) = &check.problem {
        return format!("✗ {p}");
    }
    let Some(s) = &check.statistics else {
        return "-".into();
    };
    let offered = report.offered();
    let mut parts = Vec::new();
    for c in CommonCounter::STATISTICS {
        if !offered.contains(&c) {
            continue;
        }
        let Some(v) = stat(s, c) else { continue };
        match check.expected.iter().find(|(e, _)| *e == c) {
            Some(&(_, want)) if want == v => parts.push(format!("{}={v} ✓", c.name())),
            Some(&(_, want)) => parts.push(format!("{}={v} ✗ expected {want}", c.name())),
            None if v != 0 => parts.push(format!("{}={v}", c.name())),
            None => {}
        }
    }
    if parts.is_empty() {
        "all zero".into()
    } else {
        parts.join(", ")
    }
}

/// The frame's CPU submit time: the one `run` passed to `end_frame`, or
/// where that is missing what the profiler's timeline puts in its place.
fn cpu_submit_ns(frame: &FrameResult) -> u64 {
    frame
        .cpu_submit_ns
        .unwrap_or_else(|| frame.to_timeline_frame().cpu_submit_ns)
}

/// Prints the table of one frame's passes.
fn frame_rows(report: &RunReport<'_>, frame: &FrameResult, checks: &[PassCheck]) -> CliResult<()> {
    let mut rows = vec![vec![
        "pass".to_string(),
        "kind".into(),
        "start".into(),
        "gap before".into(),
        "duration".into(),
        "statistics".into(),
    ]];
    let submit = cpu_submit_ns(frame);
    let mut previous_end = None;
    for (s, check) in frame.scopes.iter().zip(checks) {
        rows.push(vec![
            s.label.to_string(),
            s.kind.name().into(),
            fmt_offset(i128::from(s.start_ns) - i128::from(submit)),
            previous_end.map_or_else(
                || "–".into(),
                |end: u64| fmt_offset(i128::from(s.start_ns) - i128::from(end)),
            ),
            fmt_ns(s.duration_ns),
            statistics_cell(report, check),
        ]);
        previous_end = Some(s.end_ns);
    }
    print_table(&rows)
}

/// What lies between one pass's end sample and the next one's start sample
/// in what `run` records on `backend`: what a "gap before" is made of.
pub fn between_passes(backend: BackendKind) -> &'static str {
    match backend {
        BackendKind::Wgpu => {
            "wgpu's own barriers and pass set-up between two passes (each pass's timestamps are its own pass timestamp writes)"
        }
        BackendKind::Cuda => {
            "the launch of the next pass's first kernel (its start sample is a %globaltimer kernel launched after the last one of the previous pass)"
        }
        _ => {
            "the full pipeline barrier run records between passes (all prior writes drain before the next pass starts); layout transitions, clears and render-pass begin are inside their own pass's interval"
        }
    }
}

/// Prints the report as tables: the run, each frame's passes, and over
/// several frames the min, median and max duration of each pass.
pub fn print_human(report: &RunReport<'_>) -> CliResult<()> {
    let d = report.device;
    let p = report.plan;
    let frames = &report.measured.frames;
    outln!(
        "gpu-counters run {}: {} frame{} on {}[{}] {}{}",
        p.workload.name(),
        p.frames,
        if p.frames == 1 { "" } else { "s" },
        match d.backend {
            BackendKind::Wgpu => "wgpu adapter ",
            BackendKind::Cuda => "CUDA device ",
            _ => "",
        },
        d.index,
        d.name,
        if report.is_default { " (default)" } else { "" }
    )?;
    if let Some(c) = p.compute {
        outln!(
            "  compute: {} dispatch{} x {} workgroup{} x {} invocation{}, {} iteration{} each",
            c.dispatches,
            if c.dispatches == 1 { "" } else { "es" },
            c.workgroups,
            if c.workgroups == 1 { "" } else { "s" },
            c.workgroup_size,
            if c.workgroup_size == 1 { "" } else { "s" },
            c.iterations,
            if c.iterations == 1 { "" } else { "s" }
        )?;
    }
    if let Some(r) = p.render {
        outln!(
            "  render:  {} triangle{} in a {}x{} target",
            r.triangles,
            if r.triangles == 1 { "" } else { "s" },
            r.width,
            r.height
        )?;
    }
    if let Some(b) = p.copy_bytes {
        outln!("  copy:    {} filled and copied", fmt_bytes(b))?;
    }
    let cal = &report.measured.calibration;
    outln!(
        "  calibration: {}, max deviation {} (start: offset of the pass's start from the CPU submit)",
        cal.method().name(),
        fmt_ns(cal.max_deviation_ns())
    )?;
    outln!(
        "  gap before: from the previous pass's end to this pass's start: {}",
        between_passes(d.backend)
    )?;
    for (frame, checks) in frames.iter().zip(&report.measured.checks) {
        outln!()?;
        let bound = frame
            .scopes
            .iter()
            .map(|i| i.error_bound_ns)
            .max()
            .unwrap_or(0);
        outln!(
            "frame {}: submit to complete {}, times ± {}",
            frame.index,
            fmt_ns(frame.cpu_complete_ns.saturating_sub(cpu_submit_ns(frame))),
            fmt_ns(bound)
        )?;
        frame_rows(report, frame, checks)?;
    }
    if frames.len() > 1 {
        outln!()?;
        outln!("duration over {} frames:", frames.len())?;
        let mut rows = vec![vec![
            "pass".to_string(),
            "min".into(),
            "median".into(),
            "max".into(),
        ]];
        let labels: Vec<&str> = frames[0].scopes.iter().map(|i| i.label.as_str()).collect();
        let mut summary = |label: &str, mut v: Vec<u64>| {
            v.sort_unstable();
            rows.push(vec![
                label.to_string(),
                fmt_ns(v.first().copied().unwrap_or(0)),
                fmt_ns(median(&v)),
                fmt_ns(v.last().copied().unwrap_or(0)),
            ]);
        };
        for (k, label) in labels.iter().enumerate() {
            summary(
                label,
                frames
                    .iter()
                    .filter_map(|f| f.scopes.get(k).map(|s| s.duration_ns))
                    .collect(),
            );
        }
        summary(
            "(frame)",
            frames
                .iter()
                .map(|f| f.cpu_complete_ns.saturating_sub(cpu_submit_ns(f)))
                .collect(),
        );
        print_table(&rows)?;
    }
    outln!()?;
    let checked: usize = report
        .measured
        .checks
        .iter()
        .flatten()
        .filter(|c| c.statistics.is_some())
        .map(|c| c.expected.len())
        .sum();
    let mismatches = report.mismatches().len();
    outln!(
        "{}",
        statistics_line(
            !report.offered().is_empty(),
            report.statistics_unavailable,
            checked,
            mismatches
        )
    )
}

/// The report's last line: what the statistics check found (`offered`:
/// whether the device offers any statistic; `unavailable`: why not, where
/// its backend says).
fn statistics_line(
    offered: bool,
    unavailable: Option<&str>,
    checked: usize,
    mismatches: usize,
) -> String {
    match (offered, unavailable) {
        (false, Some(why)) => {
            format!("statistics: not available on this device ({why}); nothing checked")
        }
        (false, None) => "statistics: the device offers none; nothing checked".into(),
        (true, _) if mismatches == 0 => {
            format!("statistics: all {checked} expected counts match")
        }
        (true, _) => format!(
            "statistics: {mismatches} MISMATCH(ES) against the expected counts (listed on stderr)"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(fmt_ns(12), "12 ns");
        assert_eq!(fmt_ns(1_500), "1.500 µs");
        assert_eq!(fmt_ns(2_345_678), "2.346 ms");
        assert_eq!(fmt_ns(3_000_000_000), "3.000 s");
        assert_eq!(fmt_offset(-1_500), "-1.500 µs");
        assert_eq!(fmt_offset(20), "+20 ns");
        assert_eq!(fmt_bytes(64 << 20), "64 MiB");
        assert_eq!(fmt_bytes(1000), "1000 bytes");
    }

    #[test]
    fn statistics_lines() {
        assert_eq!(
            statistics_line(false, Some("CUPTI could not be loaded"), 0, 0),
            "statistics: not available on this device (CUPTI could not be loaded); nothing checked"
        );
        assert_eq!(
            statistics_line(false, None, 0, 0),
            "statistics: the device offers none; nothing checked"
        );
        assert_eq!(
            statistics_line(true, None, 3, 0),
            "statistics: all 3 expected counts match"
        );
        assert!(statistics_line(true, None, 3, 2).starts_with("statistics: 2 MISMATCH(ES)"));
    }

    #[test]
    fn medians() {
        assert_eq!(median(&[1, 2, 9]), 2);
        assert_eq!(median(&[1, 3]), 2);
        assert_eq!(median(&[]), 0);
    }

    #[test]
    fn checks() {
        let ok = PassCheck {
            expected: vec![(CommonCounter::ComputeKernelInvocations, 5)],
            statistics: Some(CounterResultStatistic {
                compute_kernel_invocations: 5,
                ..Default::default()
            }),
            problem: None,
        };
        assert_eq!(ok.matches(), Some(true));
        let bad = PassCheck {
            statistics: Some(CounterResultStatistic::default()),
            ..ok.clone()
        };
        assert_eq!(bad.matches(), Some(false));
        assert_eq!(
            bad.mismatches(),
            vec!["compute_kernel_invocations = 0, expected 5".to_string()]
        );
        let none = PassCheck {
            statistics: None,
            ..ok
        };
        assert_eq!(none.matches(), None);
    }
}
