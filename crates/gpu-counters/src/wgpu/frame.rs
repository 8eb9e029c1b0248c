//! A frame of the drop-in profiler: its GPU objects (timestamp and
//! statistics query sets, the marker words, the read-back buffer), the
//! records of its scopes, and the read-back that turns them into results.
//!
//! Every root scope (a scope begun on an application's encoder) first copies
//! a non-zero word into its own marker slot, in the same encoder. The
//! frame's read-back, submitted by [`Profiler::end_frame`](super::Profiler::end_frame)
//! after the application's submissions, copies the markers with the
//! resolved queries: a zero marker means that the root's encoder did not run
//! before the read-back (submitted later, or never), so its queries hold no
//! value of this frame (wgpu resolves an unwritten query as 0, or as what an
//! earlier use of the query set wrote) and its scopes are counted as
//! abandoned, never reported. A frame whose encoders may still run (a
//! missed root, or a scope still open at `end_frame`) gives its GPU objects
//! up instead of reusing them, so that a late write never lands in another
//! frame.

use super::results::ProfiledFrame;
use gpu_counters_hal::timeline::PassKind;
use gpu_counters_hal::{Calibration, CounterResultStatistic, COUNTER_ERROR_VALUE};
use gpu_counters_profiler::{DropCounts, FrameResult, ScopeResult, SharedStr};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// Bytes of one resolved pipeline-statistics query: wgpu's five counters.
pub(crate) const STATISTICS_BYTES: u64 = 5 * 8;

/// The statistics a pass counts: all of wgpu's, in bit order.
pub(crate) const STATISTIC_TYPES: wgpu::PipelineStatisticsTypes =
    wgpu::PipelineStatisticsTypes::all();

/// Locks `m`, taking the data of a poisoned lock (a panic while it was held
/// leaves the records consistent: each write is one field).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A frame's GPU objects, reused by later frames unless a late write may
/// still reach them.
pub(crate) struct Resources {
    /// Scopes the frame holds (two timestamps each).
    pub(crate) capacity: u32,
    /// Two timestamps per scope, where timer queries are on.
    pub(crate) timestamps: Option<wgpu::QuerySet>,
    /// One statistics query per scope, where statistics are on.
    pub(crate) statistics: Option<wgpu::QuerySet>,
    /// `QUERY_RESOLVE | COPY_SRC`: the timestamps, resolved.
    resolve: wgpu::Buffer,
    /// `QUERY_RESOLVE | COPY_SRC`: the statistics, resolved.
    statistics_resolve: Option<wgpu::Buffer>,
    /// `COPY_DST | COPY_SRC`: one word per root scope, non-zero once its
    /// encoder ran. Never mapped, so a late submission never conflicts.
    pub(crate) markers: wgpu::Buffer,
    /// `MAP_READ | COPY_DST`: timestamps, then markers, then statistics.
    read: wgpu::Buffer,
}

impl Resources {
    pub(crate) fn new(
        device: &wgpu::Device,
        capacity: u32,
        timestamps: bool,
        statistics: bool,
    ) -> Self {
        let buffer = |label: &str, size: u64, usage| {
            device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size: size.max(8),
                usage,
                mapped_at_creation: false,
            })
        };
        let cap = u64::from(capacity);
        let resolve_usage = wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC;
        Self {
            capacity,
            timestamps: timestamps.then(|| {
                device.create_query_set(&wgpu::QuerySetDescriptor {
                    label: Some("gpu-counters profiler timestamps"),
                    ty: wgpu::QueryType::Timestamp,
                    count: capacity * 2,
                })
            }),
            statistics: statistics.then(|| {
                device.create_query_set(&wgpu::QuerySetDescriptor {
                    label: Some("gpu-counters profiler statistics"),
                    ty: wgpu::QueryType::PipelineStatistics(STATISTIC_TYPES),
                    count: capacity,
                })
            }),
            resolve: buffer("gpu-counters profiler resolve", cap * 16, resolve_usage),
            statistics_resolve: statistics.then(|| {
                buffer(
                    "gpu-counters profiler statistics resolve",
                    cap * STATISTICS_BYTES,
                    resolve_usage,
                )
            }),
            markers: buffer(
                "gpu-counters profiler markers",
                cap * 8,
                wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::COPY_SRC,
            ),
            read: buffer(
                "gpu-counters profiler read-back",
                cap * (16 + 8 + if statistics { STATISTICS_BYTES } else { 0 }),
                wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            ),
        }
    }

    fn markers_offset(&self) -> u64 {
        u64::from(self.capacity) * 16
    }

    fn statistics_offset(&self) -> u64 {
        u64::from(self.capacity) * 24
    }
}

/// One scope as recorded.
pub(crate) struct ScopeRecord {
    pub(crate) label: SharedStr,
    pub(crate) kind: PassKind,
    pub(crate) thread: SharedStr,
    /// The record of the enclosing scope.
    pub(crate) parent: Option<u32>,
    /// Its root's marker slot.
    pub(crate) root: u32,
    /// Its start timestamp's index (the end's is the next), if it got
    /// queries and its encoder can write them.
    pub(crate) query: Option<u32>,
    /// Its statistics query, if it counts statistics.
    pub(crate) statistics: Option<u32>,
    /// Ended (by `end` or a drop) before the frame ended.
    pub(crate) ended: bool,
    /// Ended by a drop while its thread was panicking.
    pub(crate) panicked: bool,
    /// Why it has no queries, if it has none.
    pub(crate) untimed: Option<Untimed>,
}

/// Why a scope has no queries.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Untimed {
    /// The frame's scopes were all taken.
    OverCapacity,
    /// A scope over an encoder on a device without
    /// `TIMESTAMP_QUERY_INSIDE_ENCODERS`, or timer queries off.
    NoTimestamps,
}

/// What the frame's scopes took and did.
#[derive(Default)]
pub(crate) struct FrameState {
    pub(crate) scopes: Vec<ScopeRecord>,
    /// Scope slots taken (two timestamps each).
    pub(crate) queries: u32,
    pub(crate) statistics: u32,
    /// Root marker slots taken.
    pub(crate) roots: u32,
    /// `end_frame` ran: scopes ending later count as not ended.
    pub(crate) closed: bool,
    /// Scopes still open when the frame ended, and roots whose encoders
    /// may still write: the GPU objects are not reused.
    pub(crate) poisoned: bool,
}

/// A frame: its number, objects and records.
pub(crate) struct FrameData {
    pub(crate) index: u64,
    pub(crate) res: Resources,
    pub(crate) state: Mutex<FrameState>,
}

impl FrameData {
    pub(crate) fn new(index: u64, res: Resources) -> Self {
        Self {
            index,
            res,
            state: Mutex::new(FrameState::default()),
        }
    }

    /// Records the frame's read-back into `encoder`: the resolves, the
    /// copies into the mappable buffer, and the markers' clearing (for the
    /// objects' next frame). `None` where the frame has no scope.
    pub(crate) fn record_readback(&self, encoder: &mut wgpu::CommandEncoder) -> Option<Readback> {
        let mut state = lock(&self.state);
        state.closed = true;
        if state.scopes.iter().any(|s| !s.ended) {
            state.poisoned = true;
        }
        if state.scopes.is_empty() {
            return None;
        }
        let r = &self.res;
        if let (Some(set), true) = (&r.timestamps, state.queries > 0) {
            let n = state.queries * 2;
            encoder.resolve_query_set(set, 0..n, &r.resolve, 0);
            encoder.copy_buffer_to_buffer(&r.resolve, 0, &r.read, 0, u64::from(n) * 8);
        }
        if let (Some(set), Some(resolve), true) =
            (&r.statistics, &r.statistics_resolve, state.statistics > 0)
        {
            let n = state.statistics;
            encoder.resolve_query_set(set, 0..n, resolve, 0);
            encoder.copy_buffer_to_buffer(
                resolve,
                0,
                &r.read,
                r.statistics_offset(),
                u64::from(n) * STATISTICS_BYTES,
            );
        }
        let markers = u64::from(state.roots) * 8;
        if markers > 0 {
            encoder.copy_buffer_to_buffer(&r.markers, 0, &r.read, r.markers_offset(), markers);
            encoder.clear_buffer(&r.markers, 0, Some(markers));
        }
        Some(Readback {
            mapped: Arc::new(Mutex::new(None)),
        })
    }

    /// Starts mapping the read-back buffer; `readback` learns the outcome.
    pub(crate) fn start_map(&self, readback: &Readback) {
        let sink = readback.mapped.clone();
        self.res
            .read
            .slice(..)
            .map_async(wgpu::MapMode::Read, move |r| *lock(&sink) = Some(r));
    }

    /// The frame's results from the mapped read-back (`None`: the frame
    /// had no scope), and whether its objects may be reused.
    pub(crate) fn results(
        &self,
        readback: Option<&Readback>,
        calibration: &Calibration,
        queue: &str,
        cpu_end_frame_ns: u64,
        cpu_complete_ns: u64,
    ) -> gpu_counters_hal::Result<(ProfiledFrame, bool)> {
        let state = lock(&self.state);
        let mut words = Vec::new();
        if readback.is_some() {
            let view = self.res.read.slice(..).get_mapped_range().map_err(|e| {
                gpu_counters_hal::Error::Internal(format!("profiler read-back: {e}"))
            })?;
            words.extend(
                view.chunks_exact(8)
                    .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8]))),
            );
            drop(view);
            self.res.read.unmap();
        }
        let word = |i: u64| words.get(i as usize).copied().unwrap_or(0);
        let cap = u64::from(self.res.capacity);
        let ran = |root: u32| word(cap * 2 + u64::from(root)) != 0;
        let converter = calibration.converter();
        let mut drops = DropCounts::default();
        let mut scopes: Vec<ScopeResult> = Vec::with_capacity(state.scopes.len());
        let mut ended_by_panic = Vec::new();
        // The result index of each record, if it has one.
        let mut at: Vec<Option<usize>> = Vec::with_capacity(state.scopes.len());
        let mut roots_missed = vec![false; state.roots as usize];
        for rec in &state.scopes {
            let result = if rec.untimed == Some(Untimed::OverCapacity) {
                drops.over_capacity += 1;
                None
            } else if !ran(rec.root) {
                roots_missed[rec.root as usize] = true;
                // A scope open at `end_frame` kept its encoder from being
                // submitted before it: not ended is the cause to report.
                if rec.ended {
                    drops.abandoned += 1;
                } else {
                    drops.not_ended += 1;
                }
                None
            } else if !rec.ended {
                drops.not_ended += 1;
                None
            } else {
                match rec.query {
                    Some(q) => {
                        let (s, e) = (word(u64::from(q)), word(u64::from(q) + 1));
                        // No GPU clock reads 0: a 0 is a query never
                        // written, whatever wgpu resolved it to.
                        match converter.span_to_cpu_ns(s, e) {
                            Ok((start_ns, end_ns, bound))
                                if s != 0 && e != 0 && end_ns >= start_ns =>
                            {
                                Some((s, e, start_ns, end_ns, bound))
                            }
                            _ => {
                                drops.failed += 1;
                                None
                            }
                        }
                    }
                    None => {
                        drops.failed += 1;
                        None
                    }
                }
            };
            let Some((s, e, start_ns, end_ns, bound)) = result else {
                at.push(None);
                continue;
            };
            // The nearest enclosing scope that has a result.
            let mut up = rec.parent;
            let parent = loop {
                match up {
                    Some(p) => match at[p as usize] {
                        Some(i) => break Some(i),
                        None => up = state.scopes[p as usize].parent,
                    },
                    None => break None,
                }
            };
            let statistics = rec.statistics.map(|i| {
                let base = cap * 3 + u64::from(i) * (STATISTICS_BYTES / 8);
                // wgpu's order: vertex shader invocations, clipper
                // invocations, clipper primitives out, fragment shader
                // invocations, compute shader invocations.
                Box::new(CounterResultStatistic {
                    vertex_invocations: word(base),
                    clipper_invocations: word(base + 1),
                    clipper_primitives_out: word(base + 2),
                    fragment_invocations: word(base + 3),
                    compute_kernel_invocations: word(base + 4),
                    // Not counted by wgpu: the error value, never 0.
                    tessellation_input_patches: COUNTER_ERROR_VALUE,
                    post_tessellation_vertex_invocations: COUNTER_ERROR_VALUE,
                    fragments_passed: COUNTER_ERROR_VALUE,
                })
            });
            if rec.panicked {
                ended_by_panic.push(scopes.len());
            }
            at.push(Some(scopes.len()));
            scopes.push(ScopeResult {
                label: rec.label.clone(),
                kind: rec.kind,
                thread: rec.thread.clone(),
                depth: parent.map_or(0, |p| scopes[p].depth + 1),
                parent,
                start_ns,
                end_ns,
                duration_ns: end_ns - start_ns,
                start_ticks: s,
                end_ticks: e,
                error_bound_ns: bound,
                statistics,
            });
        }
        let encoders_missed = roots_missed.iter().filter(|&&m| m).count() as u32;
        let reusable = !state.poisoned && encoders_missed == 0;
        let frame = FrameResult {
            index: self.index,
            queue: queue.to_string(),
            cpu_submit_ns: None,
            cpu_complete_ns,
            dropped_scopes: drops.total(),
            scopes,
            drops,
        };
        Ok((
            ProfiledFrame {
                result: frame,
                root_scopes: state.roots,
                root_scopes_not_run: encoders_missed,
                ended_by_panic,
                cpu_end_frame_ns,
            },
            reusable,
        ))
    }
}

/// A frame's read-back in flight: the outcome of its mapping, once known.
pub(crate) struct Readback {
    pub(crate) mapped: Arc<Mutex<Option<Result<(), wgpu::BufferAsyncError>>>>,
}
