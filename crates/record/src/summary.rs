//! The summary `gpu-counters record` prints at the end: aggregates kept in
//! bounded memory while the trace streams, then a [`Summary`] printed as
//! text ([`Summary::render_text`]) or JSON (serde).

use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::rc::Rc;

#[path = "summary_vk.rs"]
mod vk;
pub(crate) use vk::VkAggregates;
pub use vk::{ScopeRow, VkQueueRow, VulkanSummary, TOP_SCOPES};

/// Kernels in the summary's top list.
pub const TOP_KERNELS: usize = 20;
/// Busy intervals older than this behind the newest end are folded into a
/// total (later arrivals before that are counted `late`).
const BUSY_WINDOW_NS: u64 = 10_000_000_000;
/// Busy intervals kept unfolded per GPU at most.
const BUSY_INTERVALS: usize = 65_536;
/// Clock bounds kept for the median.
const CLOCK_BOUNDS: usize = 4096;
/// The line printed when no process initialized CUDA.
pub const NO_CUDA: &str = "no process initialized CUDA: nothing GPU-side was recorded";

/// How the command ended.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct ExitSummary {
    /// Its exit code, when it exited.
    pub code: Option<i32>,
    /// The signal that killed it, when one did.
    pub signal: Option<i32>,
    /// That signal's name (`SIGTERM`).
    pub signal_name: Option<String>,
}

/// One process that connected.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct ProcessSummary {
    /// Its pid.
    pub pid: u32,
    /// Its parent's pid.
    pub ppid: u32,
    /// Its command line.
    pub cmdline: Vec<String>,
    /// Whether CUDA called the injection in it.
    pub cuda: bool,
    /// Whether NVTX called the injection in it.
    pub nvtx: bool,
    /// Whether the Vulkan layer ran in it.
    pub vulkan: bool,
    /// How its connection ended: `goodbye (atexit)`, `ended without goodbye`, ...
    pub ended: String,
    /// Whether it said goodbye.
    pub goodbye: bool,
    /// Frames its connection lost (numbering gaps).
    pub frames_lost: u64,
}

/// One GPU.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct DeviceSummary {
    /// Its index in the trace (`GPU{index}`).
    pub index: usize,
    /// Its name.
    pub name: String,
    /// Its UUID, hex, when known.
    pub uuid: Option<String>,
}

/// One kernel name's totals.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct KernelRow {
    /// The demangled name (`(other)` past the cap).
    pub name: String,
    /// Launches.
    pub count: u64,
    /// Total GPU time, ns.
    pub total_ns: u64,
    /// Mean, ns.
    pub mean_ns: f64,
    /// Shortest, ns.
    pub min_ns: u64,
    /// Longest, ns.
    pub max_ns: u64,
}

/// Kernels overall and the top ones by total time.
#[derive(Debug, Clone, Serialize, PartialEq, Default)]
pub struct KernelTable {
    /// Kernels drawn.
    pub count: u64,
    /// Their total GPU time, ns.
    pub total_ns: u64,
    /// Distinct names.
    pub distinct: usize,
    /// The top [`TOP_KERNELS`] by total time.
    pub top: Vec<KernelRow>,
}

/// Copies of one direction and memory kinds.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct CopyRow {
    /// `HtoD`, `DtoH`, ...
    pub direction: String,
    /// Source memory kind.
    pub src: String,
    /// Destination memory kind.
    pub dst: String,
    /// Copies.
    pub count: u64,
    /// Bytes.
    pub bytes: u64,
    /// Total time, ns.
    pub total_ns: u64,
    /// bytes / time, GB/s (10^9 bytes per second).
    pub gb_per_s: f64,
}

/// Memsets overall.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, Default)]
pub struct MemsetRow {
    /// Memsets.
    pub count: u64,
    /// Bytes.
    pub bytes: u64,
    /// Total time, ns.
    pub total_ns: u64,
}

/// A GPU's busy time.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct BusyRow {
    /// The GPU's index.
    pub gpu: usize,
    /// First GPU activity, ns.
    pub first_ns: u64,
    /// Last GPU activity, ns.
    pub last_ns: u64,
    /// Time with any work running (union of intervals), ns.
    pub busy_ns: u64,
    /// `busy_ns` over `last_ns - first_ns`, percent.
    pub busy_percent: f64,
    /// Intervals that arrived after their time was folded (added without
    /// an overlap check).
    pub late: u64,
}

/// An NVTX (domain, name)'s totals.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct RangeRow {
    /// The domain (`default` for NVTX's default domain).
    pub domain: String,
    /// The range's name (`(other)` past the cap).
    pub name: String,
    /// Ranges closed.
    pub count: u64,
    /// Their total CPU time, ns.
    pub cpu_ns: u64,
    /// Their total GPU span (first start to last end of the GPU work
    /// launched from the range's thread while it was open), ns.
    pub gpu_span_ns: u64,
    /// The GPU time of that work, ns.
    pub gpu_kernel_ns: u64,
}

/// Calibrations of the GPU clocks.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, Default)]
pub struct ClockSummary {
    /// Calibrations received.
    pub calibrations: u64,
    /// The largest bound, ns.
    pub max_bound_ns: Option<u64>,
    /// The median bound, ns.
    pub median_bound_ns: Option<u64>,
}

/// Everything that was lost or not drawn, counted.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, Default)]
pub struct Drops {
    /// The processes' own counts (the last `Stats` of each, summed; the
    /// losses among them are [`LOSSES`]).
    pub injected: BTreeMap<String, u64>,
    /// Frames lost between a process and the collector (numbering gaps).
    pub frames_lost: u64,
    /// Processes whose connection ended without a goodbye.
    pub processes_without_goodbye: u64,
    /// Connections refused or cut for a malformed frame.
    pub connections_refused: u64,
    /// Connections closed at the drain deadline.
    pub connections_forced: u64,
    /// Records of a tag this version does not know.
    pub unknown_records: u64,
    /// Records naming a string, thread or device never sent (drawn as
    /// `(unknown)`).
    pub unknown_references: u64,
    /// Strings, threads or ranges not kept past a table's cap.
    pub over_cap: u64,
    /// Kernel, copy and memset records with a start or end of 0.
    pub incomplete: u64,
    /// NVTX pops with nothing open, seen by the collector.
    pub nvtx_pop_empty: u64,
    /// NVTX ranges still open when their connection ended.
    pub nvtx_unterminated: u64,
    /// GPU work that arrived after its NVTX range's GPU span was written.
    pub spans_late: u64,
    /// Records the processes still held, unsent, when they said goodbye.
    pub unsent_at_exit: u64,
}

/// The fields of the processes' `Stats` that count losses (the others,
/// `records` and `own_kernels`, are totals).
pub const LOSSES: [&str; 9] = [
    "cupti_dropped",
    "buffers_refused",
    "incomplete",
    "queue_dropped",
    "unmatched_launches",
    "nvtx_unterminated",
    "nvtx_pop_empty",
    "pm_overflows",
    "pm_gaps",
];

impl Drops {
    /// The processes' losses that are not 0.
    pub fn injected_losses(&self) -> impl Iterator<Item = (&str, u64)> {
        self.injected
            .iter()
            .filter(|(k, &v)| {
                v > 0
                    && (LOSSES.contains(&k.as_str())
                        || crate::protocol::VK_STAT_LOSSES.contains(&k.as_str()))
            })
            .map(|(k, &v)| (k.as_str(), v))
    }

    /// Whether anything at all was lost or not drawn.
    pub fn any(&self) -> bool {
        self.injected_losses().next().is_some()
            || self.frames_lost
                + self.processes_without_goodbye
                + self.connections_refused
                + self.connections_forced
                + self.unknown_records
                + self.unknown_references
                + self.over_cap
                + self.incomplete
                + self.nvtx_pop_empty
                + self.nvtx_unterminated
                + self.spans_late
                + self.unsent_at_exit
                > 0
    }
}

/// One distinct notice.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct NoticeRow {
    /// `info`, `warning` or `error`.
    pub severity: String,
    /// The text.
    pub text: String,
    /// How many times it came.
    pub count: u64,
}

/// The trace file.
#[derive(Debug, Clone, Serialize, PartialEq, Default)]
pub struct TraceSummary {
    /// Where it was written, `None` for `--summary-only` or a failed write.
    pub path: Option<String>,
    /// Bytes written.
    pub bytes: u64,
    /// Packets written.
    pub packets: u64,
    /// GPU work items drawn (kernels, copies, memsets).
    pub gpu_events: u64,
    /// `bytes / kernels`, when any kernel was drawn.
    pub bytes_per_kernel: Option<f64>,
}

/// GPU metrics sampled on one GPU (PM sampling, `--gpu-metrics`).
#[derive(Debug, Clone, Serialize, PartialEq, Eq, Default)]
pub struct PmRow {
    /// The GPU's index.
    pub gpu: usize,
    /// The metrics sampled.
    pub metrics: Vec<String>,
    /// Samples drawn.
    pub samples: u64,
    /// Time the samples covered, ns.
    pub covered_ns: u64,
}

/// Per-kernel counters on one GPU (`--counters`).
#[derive(Debug, Clone, Serialize, PartialEq, Eq, Default)]
pub struct CounterRow {
    /// The GPU's index.
    pub gpu: usize,
    /// The metrics measured.
    pub metrics: Vec<String>,
    /// Kernels whose counters were drawn.
    pub kernels_measured: u64,
    /// Kernels of the GPU, recorded while counters were on, without them
    /// (launched before the session started, in a CUDA graph, during a
    /// stream capture, or whose values CUPTI did not give).
    pub kernels_unmeasured: u64,
}

/// The summary; see the module documentation.
#[derive(Debug, Clone, Serialize, PartialEq, Default)]
pub struct Summary {
    /// The command recorded.
    pub command: Vec<String>,
    /// How it ended.
    pub exit: Option<ExitSummary>,
    /// Wall time from its start to its end, ns.
    pub wall_ns: u64,
    /// Whether any process initialized CUDA.
    pub cuda_initialized: bool,
    /// Whether the Vulkan layer ran in any process.
    pub vulkan_initialized: bool,
    /// Every process that connected.
    pub processes: Vec<ProcessSummary>,
    /// Every GPU seen.
    pub devices: Vec<DeviceSummary>,
    /// Kernels.
    pub kernels: KernelTable,
    /// Copies by direction and memory kinds.
    pub copies: Vec<CopyRow>,
    /// Memsets.
    pub memsets: MemsetRow,
    /// Busy time per GPU.
    pub gpu_busy: Vec<BusyRow>,
    /// NVTX ranges by (domain, name), by total CPU time.
    pub nvtx: Vec<RangeRow>,
    /// What the Vulkan layer timed.
    pub vulkan: VulkanSummary,
    /// Clock calibrations.
    pub clock: ClockSummary,
    /// What was lost.
    pub drops: Drops,
    /// Notices, deduplicated.
    pub notices: Vec<NoticeRow>,
    /// The trace written.
    pub trace: TraceSummary,
    /// Per-kernel counters serialized kernels.
    pub serialized: bool,
    /// PM sampling ran (it locks the GPU clocks).
    pub pm_clocks_locked: bool,
    /// GPU metrics sampled, per GPU.
    pub gpu_metrics: Vec<PmRow>,
    /// Per-kernel counters, per GPU.
    pub counters: Vec<CounterRow>,
}

fn ms(ns: u64) -> String {
    format!("{:.3} ms", ns as f64 / 1e6)
}

fn us(ns: f64) -> String {
    format!("{:.1} µs", ns / 1e3)
}

impl Summary {
    /// The summary as text, one line per fact, for a terminal.
    pub fn render_text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "gpu-counters record: summary");
        if !self.command.is_empty() {
            let _ = writeln!(s, "  command: {}", self.command.join(" "));
        }
        if let Some(e) = &self.exit {
            match (e.code, e.signal) {
                (_, Some(sig)) => {
                    let _ = writeln!(
                        s,
                        "  exit: killed by signal {sig} ({})",
                        e.signal_name.as_deref().unwrap_or("?")
                    );
                }
                (Some(c), None) => {
                    let _ = writeln!(s, "  exit: code {c}");
                }
                _ => {}
            }
        }
        let _ = writeln!(s, "  wall time: {}", ms(self.wall_ns));
        let _ = writeln!(s, "  processes: {}", self.processes.len());
        for p in &self.processes {
            let _ = writeln!(
                s,
                "    pid {} (parent {}): {}{}{}{}; {}",
                p.pid,
                p.ppid,
                p.cmdline.join(" "),
                if p.cuda { " [cuda]" } else { "" },
                if p.nvtx { " [nvtx]" } else { "" },
                if p.vulkan { " [vulkan]" } else { "" },
                p.ended
            );
        }
        if !self.cuda_initialized && !self.vulkan_initialized {
            let _ = writeln!(s, "  {NO_CUDA}");
        }
        for d in &self.devices {
            let _ = writeln!(
                s,
                "  GPU{}: {}{}",
                d.index,
                d.name,
                d.uuid
                    .as_deref()
                    .map(|u| format!(" ({u})"))
                    .unwrap_or_default()
            );
        }
        if self.kernels.count > 0 {
            let _ = writeln!(
                s,
                "  kernels: {} ({} distinct), {} of GPU time; top by total time:",
                self.kernels.count,
                self.kernels.distinct,
                ms(self.kernels.total_ns)
            );
            let _ = writeln!(
                s,
                "    {:>8} {:>12} {:>10} {:>10} {:>10}  name",
                "count", "total", "mean", "min", "max"
            );
            for k in &self.kernels.top {
                let _ = writeln!(
                    s,
                    "    {:>8} {:>12} {:>10} {:>10} {:>10}  {}",
                    k.count,
                    ms(k.total_ns),
                    us(k.mean_ns),
                    us(k.min_ns as f64),
                    us(k.max_ns as f64),
                    k.name
                );
            }
        }
        for c in &self.copies {
            let _ = writeln!(
                s,
                "  copies {} {}→{}: {} copies, {} bytes, {}, {:.2} GB/s",
                c.direction,
                c.src,
                c.dst,
                c.count,
                c.bytes,
                ms(c.total_ns),
                c.gb_per_s
            );
        }
        if self.memsets.count > 0 {
            let _ = writeln!(
                s,
                "  memsets: {}, {} bytes, {}",
                self.memsets.count,
                self.memsets.bytes,
                ms(self.memsets.total_ns)
            );
        }
        for b in &self.gpu_busy {
            let _ = writeln!(
                s,
                "  GPU{} busy: {:.1}% of {} ({} busy)",
                b.gpu,
                b.busy_percent,
                ms(b.last_ns.saturating_sub(b.first_ns)),
                ms(b.busy_ns)
            );
        }
        if !self.nvtx.is_empty() {
            let _ = writeln!(s, "  NVTX ranges:");
            for r in &self.nvtx {
                let _ = writeln!(
                    s,
                    "    {}/{}: {} ranges, CPU {}, GPU span {}, GPU work {}",
                    r.domain,
                    r.name,
                    r.count,
                    ms(r.cpu_ns),
                    ms(r.gpu_span_ns),
                    ms(r.gpu_kernel_ns)
                );
            }
        }
        self.vulkan.render_text(&mut s);
        if self.clock.calibrations > 0 {
            let _ = writeln!(
                s,
                "  clock: {} calibrations, bound median {} ns, max {} ns",
                self.clock.calibrations,
                self.clock.median_bound_ns.unwrap_or(0),
                self.clock.max_bound_ns.unwrap_or(0)
            );
        }
        for p in &self.gpu_metrics {
            let _ = writeln!(
                s,
                "  GPU{} metrics: {} samples over {} of {}",
                p.gpu,
                p.samples,
                ms(p.covered_ns),
                p.metrics.join(", ")
            );
        }
        for c in &self.counters {
            let _ = writeln!(
                s,
                "  GPU{} per-kernel counters: {} kernels measured, {} not, of {}",
                c.gpu,
                c.kernels_measured,
                c.kernels_unmeasured,
                c.metrics.join(", ")
            );
        }
        if self.serialized {
            let _ = writeln!(s, "  per-kernel counters serialized the kernels");
        }
        if self.pm_clocks_locked {
            let _ = writeln!(s, "  PM sampling locked the GPU clocks while it ran");
        }
        if self.drops.any() {
            let d = &self.drops;
            let mut parts: Vec<String> = d
                .injected_losses()
                .map(|(k, v)| format!("{} {v}", k.replace('_', " ")))
                .collect();
            for (k, v) in [
                ("frames lost", d.frames_lost),
                ("processes without goodbye", d.processes_without_goodbye),
                ("connections refused", d.connections_refused),
                ("connections closed at the deadline", d.connections_forced),
                ("unknown records", d.unknown_records),
                ("unknown references", d.unknown_references),
                ("over a table's cap", d.over_cap),
                ("incomplete records", d.incomplete),
                ("NVTX pops of an empty stack", d.nvtx_pop_empty),
                ("NVTX ranges left open", d.nvtx_unterminated),
                ("GPU work after its range's span", d.spans_late),
                ("records unsent at exit", d.unsent_at_exit),
            ] {
                if v > 0 {
                    parts.push(format!("{k} {v}"));
                }
            }
            let _ = writeln!(s, "  dropped or not drawn: {}", parts.join(", "));
        } else {
            let _ = writeln!(s, "  dropped: nothing");
        }
        for n in &self.notices {
            let times = if n.count > 1 {
                format!(" (×{})", n.count)
            } else {
                String::new()
            };
            let _ = writeln!(s, "  {}: {}{times}", n.severity, n.text);
        }
        match &self.trace.path {
            Some(p) => {
                let per = self
                    .trace
                    .bytes_per_kernel
                    .map(|b| format!(", {b:.1} bytes per kernel"))
                    .unwrap_or_default();
                let _ = writeln!(
                    s,
                    "  trace: {p}: {} bytes, {} packets{per}",
                    self.trace.bytes, self.trace.packets
                );
            }
            None => {
                let _ = writeln!(s, "  trace: not written");
            }
        }
        s
    }
}

#[derive(Debug, Clone, Copy)]
struct KernelAgg {
    count: u64,
    total: u64,
    min: u64,
    max: u64,
}

impl KernelAgg {
    fn add(&mut self, d: u64) {
        self.count += 1;
        self.total += d;
        self.min = self.min.min(d);
        self.max = self.max.max(d);
    }
}

#[derive(Debug, Default)]
struct Busy {
    first: Option<u64>,
    last: u64,
    folded: u64,
    horizon: u64,
    late: u64,
    intervals: BTreeMap<u64, u64>,
}

impl Busy {
    fn add(&mut self, start: u64, end: u64) {
        if end <= start {
            return;
        }
        self.first = Some(self.first.map_or(start, |f| f.min(start)));
        self.last = self.last.max(end);
        if start < self.horizon {
            self.late += 1;
            self.folded += end - start;
            return;
        }
        let (mut s, mut e) = (start, end);
        // Merge every interval that overlaps or touches [s, e].
        loop {
            let hit = self
                .intervals
                .range(..=e)
                .next_back()
                .filter(|(_, &ie)| ie >= s)
                .map(|(&is, &ie)| (is, ie));
            match hit {
                Some((is, ie)) => {
                    self.intervals.remove(&is);
                    s = s.min(is);
                    e = e.max(ie);
                }
                None => break,
            }
        }
        self.intervals.insert(s, e);
        // Fold what lies wholly before the window.
        let cut = self.last.saturating_sub(BUSY_WINDOW_NS);
        while let Some((&is, &ie)) = self.intervals.first_key_value() {
            if ie < cut || self.intervals.len() > BUSY_INTERVALS {
                self.intervals.remove(&is);
                self.folded += ie - is;
                self.horizon = self.horizon.max(ie);
            } else {
                break;
            }
        }
    }

    fn busy(&self) -> u64 {
        self.folded + self.intervals.iter().map(|(s, e)| e - s).sum::<u64>()
    }
}

/// The summary's aggregates, kept while the trace streams.
#[derive(Debug, Default)]
pub(crate) struct Aggregates {
    kernels: HashMap<Rc<str>, KernelAgg>,
    kernel_cap: usize,
    kernel_count: u64,
    kernel_total: u64,
    copies: HashMap<(u8, u8, u8), (u64, u64, u64)>,
    memsets: MemsetRow,
    busy: Vec<Busy>,
    ranges: HashMap<RangeKey, (u64, u64, u64, u64)>,
    range_cap: usize,
    bounds: Vec<u64>,
    calibrations: u64,
    max_bound: Option<u64>,
    notices: Vec<NoticeRow>,
    notice_index: HashMap<(String, String), usize>,
    notice_cap: usize,
    pub(crate) notices_dropped: u64,
    pm: BTreeMap<usize, PmRow>,
    counters: BTreeMap<usize, CounterRow>,
}

const OTHER: &str = "(other)";

/// An NVTX range's (domain, name).
type RangeKey = (Rc<str>, Rc<str>);

impl Aggregates {
    pub(crate) fn new(kernel_cap: usize, range_cap: usize, notice_cap: usize) -> Self {
        Aggregates {
            kernel_cap,
            range_cap,
            notice_cap,
            ..Default::default()
        }
    }

    pub(crate) fn kernel(&mut self, name: &Rc<str>, duration: u64) {
        self.kernel_count += 1;
        self.kernel_total += duration;
        let fresh = KernelAgg {
            count: 0,
            total: 0,
            min: u64::MAX,
            max: 0,
        };
        if let Some(a) = self.kernels.get_mut(name) {
            a.add(duration);
        } else if self.kernels.len() < self.kernel_cap {
            self.kernels
                .entry(name.clone())
                .or_insert(fresh)
                .add(duration);
        } else {
            self.kernels
                .entry(Rc::from(OTHER))
                .or_insert(fresh)
                .add(duration);
        }
    }

    pub(crate) fn copy(&mut self, kind: (u8, u8, u8), bytes: u64, duration: u64) {
        let e = self.copies.entry(kind).or_default();
        e.0 += 1;
        e.1 += bytes;
        e.2 += duration;
    }

    pub(crate) fn memset(&mut self, bytes: u64, duration: u64) {
        self.memsets.count += 1;
        self.memsets.bytes += bytes;
        self.memsets.total_ns += duration;
    }

    pub(crate) fn busy(&mut self, gpu: usize, start: u64, end: u64) {
        if self.busy.len() <= gpu {
            self.busy.resize_with(gpu + 1, Busy::default);
        }
        self.busy[gpu].add(start, end);
    }

    pub(crate) fn range(
        &mut self,
        domain: &Rc<str>,
        name: &Rc<str>,
        cpu: u64,
        span: u64,
        kernels: u64,
    ) {
        let key = (domain.clone(), name.clone());
        let e = if self.ranges.contains_key(&key) || self.ranges.len() < self.range_cap {
            self.ranges.entry(key).or_default()
        } else {
            self.ranges
                .entry((domain.clone(), Rc::from(OTHER)))
                .or_default()
        };
        e.0 += 1;
        e.1 += cpu;
        e.2 += span;
        e.3 += kernels;
    }

    pub(crate) fn clock(&mut self, bound: u64) {
        self.calibrations += 1;
        self.max_bound = Some(self.max_bound.map_or(bound, |m| m.max(bound)));
        if self.bounds.len() < CLOCK_BOUNDS {
            self.bounds.push(bound);
        }
    }

    /// PM sampling of `metrics` started on `gpu` (metrics new to the GPU's
    /// row are added to it).
    pub(crate) fn pm_config(&mut self, gpu: usize, metrics: &[String]) {
        let row = self.pm.entry(gpu).or_insert_with(|| PmRow {
            gpu,
            ..PmRow::default()
        });
        for m in metrics {
            if !row.metrics.contains(m) {
                row.metrics.push(m.clone());
            }
        }
    }

    /// A PM sample of `gpu` drawn.
    pub(crate) fn pm_sample(&mut self, gpu: usize, start: u64, end: u64) {
        let row = self.pm.entry(gpu).or_insert_with(|| PmRow {
            gpu,
            ..PmRow::default()
        });
        row.samples += 1;
        row.covered_ns += end.saturating_sub(start);
    }

    /// Per-kernel counters of `metrics` on `gpu` (metrics new to the row
    /// are added), with kernels measured and not.
    pub(crate) fn counters(&mut self, gpu: usize, metrics: &[String], measured: u64, not: u64) {
        let row = self.counters.entry(gpu).or_insert_with(|| CounterRow {
            gpu,
            ..CounterRow::default()
        });
        for m in metrics {
            if !row.metrics.contains(m) {
                row.metrics.push(m.clone());
            }
        }
        row.kernels_measured += measured;
        row.kernels_unmeasured += not;
    }

    pub(crate) fn notice(&mut self, severity: &str, text: &str) {
        let key = (severity.to_string(), text.to_string());
        if let Some(&i) = self.notice_index.get(&key) {
            self.notices[i].count += 1;
        } else if self.notices.len() < self.notice_cap {
            self.notice_index.insert(key, self.notices.len());
            self.notices.push(NoticeRow {
                severity: severity.into(),
                text: text.into(),
                count: 1,
            });
        } else {
            self.notices_dropped += 1;
        }
    }

    /// Fills the summary's aggregate parts.
    pub(crate) fn fill(mut self, s: &mut Summary) {
        let mut rows: Vec<KernelRow> = self
            .kernels
            .iter()
            .map(|(name, a)| KernelRow {
                name: name.to_string(),
                count: a.count,
                total_ns: a.total,
                mean_ns: a.total as f64 / a.count.max(1) as f64,
                min_ns: a.min,
                max_ns: a.max,
            })
            .collect();
        rows.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.name.cmp(&b.name)));
        rows.truncate(TOP_KERNELS);
        s.kernels = KernelTable {
            count: self.kernel_count,
            total_ns: self.kernel_total,
            distinct: self.kernels.len(),
            top: rows,
        };
        let mut copies: Vec<CopyRow> = self
            .copies
            .iter()
            .map(|(&(k, src, dst), &(count, bytes, ns))| CopyRow {
                direction: crate::protocol::copy_kind::name(k).into(),
                src: crate::protocol::memory_kind::name(src).into(),
                dst: crate::protocol::memory_kind::name(dst).into(),
                count,
                bytes,
                total_ns: ns,
                gb_per_s: if ns > 0 {
                    bytes as f64 / ns as f64
                } else {
                    0.0
                },
            })
            .collect();
        copies.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.direction.cmp(&b.direction)));
        s.copies = copies;
        s.memsets = self.memsets.clone();
        s.gpu_busy = self
            .busy
            .iter()
            .enumerate()
            .filter_map(|(gpu, b)| {
                let first = b.first?;
                let busy = b.busy();
                let span = b.last.saturating_sub(first);
                Some(BusyRow {
                    gpu,
                    first_ns: first,
                    last_ns: b.last,
                    busy_ns: busy,
                    busy_percent: if span > 0 {
                        100.0 * busy as f64 / span as f64
                    } else {
                        0.0
                    },
                    late: b.late,
                })
            })
            .collect();
        let mut ranges: Vec<RangeRow> = self
            .ranges
            .iter()
            .map(|((d, n), &(count, cpu, span, k))| RangeRow {
                domain: d.to_string(),
                name: n.to_string(),
                count,
                cpu_ns: cpu,
                gpu_span_ns: span,
                gpu_kernel_ns: k,
            })
            .collect();
        ranges.sort_by(|a, b| b.cpu_ns.cmp(&a.cpu_ns).then(a.name.cmp(&b.name)));
        s.nvtx = ranges;
        self.bounds.sort_unstable();
        s.clock = ClockSummary {
            calibrations: self.calibrations,
            max_bound_ns: self.max_bound,
            median_bound_ns: self.bounds.get(self.bounds.len() / 2).copied(),
        };
        s.notices = std::mem::take(&mut self.notices);
        s.gpu_metrics = std::mem::take(&mut self.pm).into_values().collect();
        s.counters = std::mem::take(&mut self.counters).into_values().collect();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_is_the_union_of_intervals() {
        let mut b = Busy::default();
        b.add(0, 10);
        b.add(5, 15);
        b.add(20, 30);
        b.add(30, 35);
        b.add(100, 100);
        assert_eq!(b.busy(), 15 + 15);
        assert_eq!(b.first, Some(0));
        assert_eq!(b.last, 35);
    }

    #[test]
    fn busy_folds_old_intervals_and_counts_late_ones() {
        let mut b = Busy::default();
        b.add(0, 10);
        b.add(BUSY_WINDOW_NS + 100, BUSY_WINDOW_NS + 200);
        assert_eq!(b.intervals.len(), 1, "the first interval was folded");
        b.add(5, 8);
        assert_eq!(b.late, 1);
        assert_eq!(b.busy(), 10 + 100 + 3);
    }
}
