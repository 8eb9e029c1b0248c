//! The Vulkan layer's part of the summary: queues (and those that could not
//! be timed), frames, command buffer executions, and the top passes and
//! labels by GPU time.

use super::{ms, us, KernelAgg};
use crate::protocol::scope_kind;
use serde::Serialize;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::rc::Rc;

/// Passes and labels each in the summary's top lists.
pub const TOP_SCOPES: usize = 20;

/// One queue a process used through the layer.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct VkQueueRow {
    /// The process.
    pub pid: u32,
    /// The GPU's index in the trace.
    pub gpu: usize,
    /// The layer's id of the `VkDevice` (a process's first is 1).
    pub vk_device: u32,
    /// The device's name.
    pub device: String,
    /// The queue family.
    pub family: u32,
    /// The queue's index in its family.
    pub index: u32,
    /// The family's `timestampValidBits`.
    pub timestamp_valid_bits: u32,
    /// Whether its work could be timed (`timestampValidBits > 0` and the
    /// device calibrated).
    pub timed: bool,
    /// Command buffer executions timed on it.
    pub executions: u64,
}

impl VkQueueRow {
    /// How the summary names the queue.
    pub fn describe(&self) -> String {
        let device = if self.vk_device == 1 {
            String::new()
        } else {
            format!(" (device {})", self.vk_device)
        };
        format!(
            "pid {} GPU{} {}{device} queue family {} index {}",
            self.pid, self.gpu, self.device, self.family, self.index
        )
    }
}

/// One (kind, name)'s totals.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ScopeRow {
    /// `render pass`, `compute`, `copy`, `label`, ...
    pub kind: String,
    /// The label's text or the pass's name (`(other)` past the cap).
    pub name: String,
    /// Scopes timed.
    pub count: u64,
    /// Their total GPU time, ns.
    pub total_ns: u64,
    /// Mean, ns.
    pub mean_ns: f64,
    /// Shortest, ns.
    pub min_ns: u64,
    /// Longest, ns.
    pub max_ns: u64,
}

/// What the Vulkan layer timed, over every process.
#[derive(Debug, Clone, Serialize, PartialEq, Default)]
pub struct VulkanSummary {
    /// Every queue seen.
    pub queues: Vec<VkQueueRow>,
    /// The queues whose work could not be timed, as the text names them.
    pub untimed_queues: Vec<String>,
    /// Frames seen (presents, or submissions of programs that never present).
    pub frames: u64,
    /// Frames with a GPU time.
    pub frames_timed: u64,
    /// The median GPU time of a frame (first start to last end of its
    /// executions), ns.
    pub frame_gpu_median_ns: Option<u64>,
    /// Command buffer executions timed.
    pub executions: u64,
    /// Scopes (executions, passes, labels, draws, dispatches) sent without
    /// times, each with the reason counted in the layer's statistics.
    pub untimed_scopes: u64,
    /// Passes (render passes, compute and copy runs, draws, dispatches,
    /// secondary command buffers) by total GPU time.
    pub passes: Vec<ScopeRow>,
    /// Debug-utils labels by total GPU time.
    pub labels: Vec<ScopeRow>,
    /// The largest bound of a time drawn, ns.
    pub max_bound_ns: Option<u64>,
}

impl VulkanSummary {
    /// Appends the Vulkan lines of the text summary (none when the layer
    /// timed nothing and saw no queue).
    pub(super) fn render_text(&self, s: &mut String) {
        if self.queues.is_empty() && self.frames == 0 && self.executions == 0 {
            return;
        }
        let _ = writeln!(
            s,
            "  Vulkan: {} frames ({} with GPU time{}), {} command buffer executions timed, {} scopes without times",
            self.frames,
            self.frames_timed,
            self.frame_gpu_median_ns
                .map(|m| format!(", median {}", ms(m)))
                .unwrap_or_default(),
            self.executions,
            self.untimed_scopes
        );
        if let Some(b) = self.max_bound_ns {
            let _ = writeln!(s, "    every time within {b} ns");
        }
        for q in &self.queues {
            if q.timed {
                let _ = writeln!(
                    s,
                    "    queue: {}: {} executions timed",
                    q.describe(),
                    q.executions
                );
            }
        }
        for u in &self.untimed_queues {
            let _ = writeln!(s, "    untimed queue: {u}");
        }
        for (title, rows) in [("passes", &self.passes), ("labels", &self.labels)] {
            if rows.is_empty() {
                continue;
            }
            let _ = writeln!(s, "    {title} by total GPU time:");
            let _ = writeln!(
                s,
                "      {:>8} {:>12} {:>10} {:>10} {:>10}  name",
                "count", "total", "mean", "min", "max"
            );
            for r in rows.iter() {
                let name = if r.kind == scope_kind::name(scope_kind::LABEL) {
                    r.name.clone()
                } else if r.name == r.kind {
                    r.kind.clone()
                } else {
                    format!("{} ({})", r.name, r.kind)
                };
                let _ = writeln!(
                    s,
                    "      {:>8} {:>12} {:>10} {:>10} {:>10}  {}",
                    r.count,
                    ms(r.total_ns),
                    us(r.mean_ns),
                    us(r.min_ns as f64),
                    us(r.max_ns as f64),
                    name
                );
            }
        }
    }
}

/// Frame GPU times kept for the median.
const FRAME_TIMES: usize = 65_536;

/// The Vulkan aggregates, kept while the trace streams.
#[derive(Debug, Default)]
pub(crate) struct VkAggregates {
    scopes: HashMap<(u8, Rc<str>), KernelAgg>,
    cap: usize,
    pub(crate) queues: Vec<VkQueueRow>,
    pub(crate) frames: u64,
    frames_timed: u64,
    frame_times: Vec<u64>,
    pub(crate) executions: u64,
    pub(crate) untimed_scopes: u64,
    max_bound: Option<u64>,
}

const OTHER: &str = "(other)";

impl VkAggregates {
    pub(crate) fn new(cap: usize) -> Self {
        VkAggregates {
            cap,
            ..Default::default()
        }
    }

    /// A timed scope of `kind` named `name`, `duration` ns, bound `bound`.
    pub(crate) fn scope(&mut self, kind: u8, name: &Rc<str>, duration: u64, bound: u64) {
        self.max_bound = Some(self.max_bound.map_or(bound, |m| m.max(bound)));
        if kind == scope_kind::COMMAND_BUFFER {
            self.executions += 1;
            return;
        }
        let fresh = KernelAgg {
            count: 0,
            total: 0,
            min: u64::MAX,
            max: 0,
        };
        let key = (kind, name.clone());
        if let Some(a) = self.scopes.get_mut(&key) {
            a.add(duration);
        } else if self.scopes.len() < self.cap {
            self.scopes.entry(key).or_insert(fresh).add(duration);
        } else {
            self.scopes
                .entry((kind, Rc::from(OTHER)))
                .or_insert(fresh)
                .add(duration);
        }
    }

    /// A frame, with its GPU time when it has one.
    pub(crate) fn frame(&mut self, gpu_ns: Option<u64>) {
        self.frames += 1;
        if let Some(d) = gpu_ns {
            self.frames_timed += 1;
            if self.frame_times.len() < FRAME_TIMES {
                self.frame_times.push(d);
            }
        }
    }

    /// Fills the summary's Vulkan part.
    pub(crate) fn fill(mut self) -> VulkanSummary {
        let rows = |pick: &dyn Fn(u8) -> bool, scopes: &HashMap<(u8, Rc<str>), KernelAgg>| {
            let mut rows: Vec<ScopeRow> = scopes
                .iter()
                .filter(|((k, _), _)| pick(*k))
                .map(|((k, n), a)| ScopeRow {
                    kind: scope_kind::name(*k).to_string(),
                    name: n.to_string(),
                    count: a.count,
                    total_ns: a.total,
                    mean_ns: a.total as f64 / a.count.max(1) as f64,
                    min_ns: a.min,
                    max_ns: a.max,
                })
                .collect();
            rows.sort_by(|a, b| {
                b.total_ns
                    .cmp(&a.total_ns)
                    .then(a.name.cmp(&b.name))
                    .then(a.kind.cmp(&b.kind))
            });
            rows.truncate(TOP_SCOPES);
            rows
        };
        let passes = rows(&|k| k != scope_kind::LABEL, &self.scopes);
        let labels = rows(&|k| k == scope_kind::LABEL, &self.scopes);
        self.frame_times.sort_unstable();
        let untimed_queues = self
            .queues
            .iter()
            .filter(|q| !q.timed)
            .map(|q| {
                format!(
                    "{} (timestampValidBits {}): its work was not timed",
                    q.describe(),
                    q.timestamp_valid_bits
                )
            })
            .collect();
        VulkanSummary {
            queues: std::mem::take(&mut self.queues),
            untimed_queues,
            frames: self.frames,
            frames_timed: self.frames_timed,
            frame_gpu_median_ns: self.frame_times.get(self.frame_times.len() / 2).copied(),
            executions: self.executions,
            untimed_scopes: self.untimed_scopes,
            passes,
            labels,
            max_bound_ns: self.max_bound,
        }
    }
}
