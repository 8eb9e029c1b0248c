//! Resolving a finished frame's samples into its result.

use super::Profiler;
use crate::error::{ProfilerError, Result};
use crate::lock;
use crate::result::{DropCounts, FrameResult, ScopeResult};
use crate::store::{state, FrameStore, NO_SCOPE};
use gpu_counters_hal::{
    cpu_monotonic_ns, BackendDevice, BackendSampleBuffer, ResolvedCounters, ResolvedTimestamps,
    SampleStatus, SampleValue,
};

/// What frames are resolved into, kept between collects so that resolving
/// allocates nothing.
#[derive(Default)]
pub(super) struct Resolved {
    /// Per page: timestamps, and statistics.
    stamps: Vec<ResolvedTimestamps>,
    stats: Vec<ResolvedCounters>,
    /// Per scope: its place in the results.
    position: Vec<u32>,
}

impl<D: BackendDevice> Profiler<D> {
    /// Resolves a frame's samples, with how many scopes the resolve found
    /// dropped (not ended, abandoned, failed on the GPU); `None` while any
    /// sample is not available yet.
    /// One CPU resolve per used page and counter set, covering only the
    /// samples the frame's scopes took.
    #[allow(unsafe_code)]
    pub(super) fn resolve(
        &self,
        store: &FrameStore<D>,
        ids: u32,
        drops: DropCounts,
        index: u64,
        cpu_submit_ns: Option<u64>,
    ) -> Result<Option<(FrameResult, u32)>> {
        let n = ids as usize;
        let per = self.options.max_scopes_per_frame as usize;
        let used = n.div_ceil(per);
        let mut resolved = lock(&self.resolved);
        let Resolved {
            stamps,
            stats,
            position,
        } = &mut *resolved;
        stamps.resize_with(stamps.len().max(used), ResolvedTimestamps::default);
        let mut pages_with_stats = 0;
        for (p, page, count) in store.used_pages(ids, per as u32) {
            let range = 0..2 * count as u64;
            let r = &mut stamps[p];
            page.timestamps.resolve_timestamps_into(range.clone(), r)?;
            if r.count(SampleStatus::NotReady) > 0 {
                return Ok(None);
            }
            if let Some(sb) = &page.statistics {
                if stats.len() <= p {
                    stats.resize_with(p + 1, ResolvedCounters::default);
                }
                let r = &mut stats[p];
                sb.resolve_counter_range_into(range, r)?;
                if r.count(SampleStatus::NotReady) > 0 {
                    return Ok(None);
                }
                pages_with_stats += 1;
            }
        }
        let stats = &stats[..pages_with_stats.min(stats.len())];
        let with_stats = self.options.statistics && pages_with_stats == used;

        let cpu_complete_ns = cpu_monotonic_ns();
        let mut calibration = lock(&self.calibration);
        self.device.refresh_calibration(&mut calibration)?;

        let mut drops = drops;
        let mut gpu_failed = 0u32;
        let mut abandoned = 0u32;
        let mut not_ended = 0u32;
        // Result position of each scope, NO_SCOPE where it has none.
        position.clear();
        position.resize(n, NO_SCOPE);
        // A spare vector still holds an earlier frame's results: the first
        // `len` become this frame's, overwritten in place; the rest go.
        let mut scopes: Vec<ScopeResult> = lock(&self.spare_scopes).pop().unwrap_or_default();
        scopes.reserve(n.saturating_sub(scopes.len()));
        let mut len = 0usize;
        let convert = calibration.converter();
        for (p, page, count) in store.used_pages(ids, per as u32) {
            let stamps = &stamps[p];
            if stamps.span_count() != count {
                return Err(ProfilerError::Counters(gpu_counters_hal::Error::Internal(
                    format!(
                        "profiler: a page of {count} scopes resolved {} samples",
                        stamps.len()
                    ),
                )));
            }
            // Scope `k` of the page sampled `2 * k` and the next index: the
            // page's span `k`, in step with its record. The closure is
            // inlined into both of the loops (one a scope).
            let records = &page.records[..count];
            stamps.for_each_span_with(
                records,
                #[inline(always)]
                |k, rec, (t0, s0), (t1, s1)| {
                    // Failed scopes were counted when the recording failed.
                    let word = rec.load();
                    if word.state() != state::ENDED {
                        not_ended +=
                            u32::from(matches!(word.state(), state::OPEN | state::DROPPED));
                        return;
                    }
                    let at = 2 * k;
                    if s0 == SampleStatus::NotWritten && s1 == SampleStatus::NotWritten {
                        // Recorded, so only a command buffer dropped unsubmitted
                        // leaves both unwritten.
                        abandoned += 1;
                        return;
                    }
                    if s0 != SampleStatus::Written || s1 != SampleStatus::Written {
                        gpu_failed += 1;
                        return;
                    }
                    // SAFETY: the store is back in its ring slot (its frame
                    // ended), so no scope of it is being recorded.
                    let meta = unsafe { rec.meta() };
                    let statistics = if self.options.statistics && word.statistics() {
                        match stats
                            .get(p)
                            .filter(|_| with_stats)
                            .map(|r| r.statistics_between(at, at + 1))
                        {
                            Some(Ok(SampleValue::Value(counted))) => Some(Box::new(counted)),
                            _ => {
                                gpu_failed += 1;
                                return;
                            }
                        }
                    } else {
                        None
                    };
                    // The nearest enclosing scope that has a result.
                    let mut parent = NO_SCOPE;
                    let mut up = word.parent();
                    while up != NO_SCOPE {
                        let pos = position[up as usize];
                        if pos != NO_SCOPE {
                            parent = pos;
                            break;
                        }
                        up = store.cell(up, per as u32).map_or(NO_SCOPE, |c| c.parent());
                    }
                    let (parent, depth) = match parent {
                        NO_SCOPE => (None, 0),
                        p => (Some(p as usize), scopes[p as usize].depth + 1),
                    };
                    // A scope whose timestamps do not convert (or end before they
                    // start) failed: it gets no made-up time.
                    let Ok((start_ns, end_ns, error_bound_ns)) = convert.span_to_cpu_ns(t0, t1)
                    else {
                        gpu_failed += 1;
                        return;
                    };
                    if end_ns < start_ns {
                        gpu_failed += 1;
                        return;
                    }
                    position[p * per + k] = len as u32;
                    match scopes.get_mut(len) {
                        Some(old) => {
                            // Overwritten in place. Every field is named, so
                            // a new one cannot be left out. A steady frame
                            // repeats its labels and threads: where an
                            // earlier frame's result holds the same shared
                            // string, it stays (no drop, no clone).
                            let ScopeResult {
                                label: old_label,
                                kind: old_kind,
                                thread: old_thread,
                                depth: old_depth,
                                parent: old_parent,
                                start_ns: old_start_ns,
                                end_ns: old_end_ns,
                                duration_ns: old_duration_ns,
                                start_ticks: old_start_ticks,
                                end_ticks: old_end_ticks,
                                error_bound_ns: old_error_bound_ns,
                                statistics: old_statistics,
                            } = old;
                            if !old_label.is_same(&meta.label) {
                                *old_label = meta.label.clone();
                            }
                            if !old_thread.is_same(&meta.thread) {
                                *old_thread = meta.thread.clone();
                            }
                            *old_kind = word.kind();
                            *old_depth = depth;
                            *old_parent = parent;
                            *old_start_ns = start_ns;
                            *old_end_ns = end_ns;
                            *old_duration_ns = end_ns - start_ns;
                            *old_start_ticks = t0;
                            *old_end_ticks = t1;
                            *old_error_bound_ns = error_bound_ns;
                            *old_statistics = statistics;
                        }
                        None => scopes.push(ScopeResult {
                            label: meta.label.clone(),
                            kind: word.kind(),
                            thread: meta.thread.clone(),
                            depth,
                            parent,
                            start_ns,
                            end_ns,
                            duration_ns: end_ns - start_ns,
                            start_ticks: t0,
                            end_ticks: t1,
                            error_bound_ns,
                            statistics,
                        }),
                    }
                    len += 1;
                },
            );
        }
        scopes.truncate(len);
        drop(calibration);
        drops.failed += gpu_failed;
        drops.abandoned += abandoned;
        drops.not_ended += not_ended;
        let result = FrameResult {
            index,
            queue: self.queue_name.clone(),
            cpu_submit_ns,
            cpu_complete_ns,
            scopes,
            dropped_scopes: drops.total(),
            drops,
        };
        Ok(Some((result, gpu_failed + abandoned + not_ended)))
    }
}
