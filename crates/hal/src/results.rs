use crate::{CommonCounterSet, Error, InvalidInput, Result};
use bytemuck::{Pod, Zeroable};
#[cfg(feature = "serde")]
use serde::{Deserialize, Serialize};

/// The value a resolved sample holds when the GPU did not write it, had not
/// finished it, or failed (Metal's `MTLCounterErrorValue`).
pub const COUNTER_ERROR_VALUE: u64 = u64::MAX;

/// A resolved timestamp sample (`MTLCounterResultTimestamp`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Pod, Zeroable)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
pub struct CounterResultTimestamp {
    /// GPU ticks, masked to the queue's valid bits; multiply by the device's
    /// timestamp period for nanoseconds, or use [`crate::Calibration`].
    pub timestamp: u64,
}

/// A resolved stage-utilization sample (`MTLCounterResultStageUtilization`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Pod, Zeroable)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
pub struct CounterResultStageUtilization {
    /// Total GPU cycles.
    pub total_cycles: u64,
    /// Cycles of vertex work.
    pub vertex_cycles: u64,
    /// Cycles of tessellation.
    pub tessellation_cycles: u64,
    /// Cycles of post-tessellation vertex work.
    pub post_tessellation_vertex_cycles: u64,
    /// Cycles of fragment work.
    pub fragment_cycles: u64,
    /// Cycles writing render targets.
    pub render_target_cycles: u64,
}

impl CounterResultStageUtilization {
    /// Number of `u64` fields.
    pub const FIELDS: usize = 6;

    /// The fields as an array, in Metal's order.
    pub fn to_array(self) -> [u64; 6] {
        bytemuck::cast(self)
    }

    /// Field-wise `self - start`, with the error value kept as
    /// [`CounterResultStatistic::since`] keeps it: a field either side
    /// holds as the error value (a stage the device has no counter for),
    /// or where `start` exceeds `self`, is the error value. Prefer
    /// [`ResolvedCounters::stage_utilization_between`], which also checks
    /// that both samples were written and count from the same origin.
    pub fn since(&self, start: &CounterResultStageUtilization) -> CounterResultStageUtilization {
        let (a, b) = (self.to_array(), start.to_array());
        bytemuck::cast(std::array::from_fn::<u64, 6, _>(|i| difference(a[i], b[i])))
    }
}

/// `a - b` of one cumulative counter, the error value where either is it or
/// `b` exceeds `a`.
fn difference(a: u64, b: u64) -> u64 {
    if a == COUNTER_ERROR_VALUE || b == COUNTER_ERROR_VALUE {
        COUNTER_ERROR_VALUE
    } else {
        a.checked_sub(b).unwrap_or(COUNTER_ERROR_VALUE)
    }
}

/// A resolved statistic sample (`MTLCounterResultStatistic`), in Metal's
/// field order. Each field is cumulative from the first statistic sample of
/// the same encoder, so end minus start is what the GPU counted between them.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Pod, Zeroable)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
pub struct CounterResultStatistic {
    /// Patches read by the tessellator.
    pub tessellation_input_patches: u64,
    /// Vertex shader invocations.
    pub vertex_invocations: u64,
    /// Post-tessellation vertex shader invocations.
    pub post_tessellation_vertex_invocations: u64,
    /// Primitives that reached the clipper.
    pub clipper_invocations: u64,
    /// Primitives that left the clipper.
    pub clipper_primitives_out: u64,
    /// Fragment shader invocations.
    pub fragment_invocations: u64,
    /// Samples that passed the depth and stencil tests.
    pub fragments_passed: u64,
    /// Compute kernel invocations.
    pub compute_kernel_invocations: u64,
}

impl CounterResultStatistic {
    /// Number of `u64` fields.
    pub const FIELDS: usize = 8;

    /// The fields as an array, in Metal's order.
    pub fn to_array(self) -> [u64; 8] {
        bytemuck::cast(self)
    }

    /// Field-wise `self - start`: what was counted between the two samples.
    ///
    /// A field either side holds as [`COUNTER_ERROR_VALUE`] (a counter the
    /// device lacks, or a sample without a value) stays the error value, and
    /// so does a field where `start` exceeds `self` (samples that do not
    /// count from the same origin): never a plausible 0. Prefer
    /// [`ResolvedCounters::statistics_between`], which also checks that both
    /// samples were written and count from the same origin.
    pub fn since(&self, start: &CounterResultStatistic) -> CounterResultStatistic {
        let (a, b) = (self.to_array(), start.to_array());
        bytemuck::cast(std::array::from_fn::<u64, 8, _>(|i| difference(a[i], b[i])))
    }

    /// `(name, value)` pairs with the snake-case counter names.
    pub fn named(&self) -> [(&'static str, u64); 8] {
        let values = self.to_array();
        let mut out = [("", 0u64); 8];
        for (i, counter) in crate::CommonCounter::STATISTICS.iter().enumerate() {
            out[i] = (counter.name(), values[i]);
        }
        out
    }
}

/// A result struct that resolved bytes can be cast to.
pub trait CounterResult: Pod + std::fmt::Debug {
    /// The counter set whose samples have this layout.
    const SET: CommonCounterSet;
}

impl CounterResult for CounterResultTimestamp {
    const SET: CommonCounterSet = CommonCounterSet::Timestamp;
}
impl CounterResult for CounterResultStatistic {
    const SET: CommonCounterSet = CommonCounterSet::Statistic;
}
impl CounterResult for CounterResultStageUtilization {
    const SET: CommonCounterSet = CommonCounterSet::StageUtilization;
}

/// Why a resolved sample has the value it has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum SampleStatus {
    /// The GPU wrote the sample and it is complete.
    Written,
    /// No command ever wrote this index (since creation or the last reset).
    NotWritten,
    /// A command writes this index but the GPU has not finished it yet.
    NotReady,
    /// The GPU reported a failure for this sample.
    Error,
    /// A heap entry that was invalidated; its bytes are 0, as Metal 4 defines.
    Invalidated,
}

/// The typed view of one resolved sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SampleValue<T> {
    /// The sample's value.
    Value(T),
    /// Nothing was written to the index; its bytes are the error value.
    NotWritten,
    /// The GPU has not finished the sample; its bytes are the error value.
    NotReady,
    /// The GPU failed to sample; its bytes are the error value.
    Error,
    /// An invalidated heap entry; its bytes are 0.
    Invalidated,
    /// Only for a difference of two samples
    /// ([`ResolvedCounters::statistics_between`]): both have values, but they
    /// count from different origins (statistic samples of different
    /// encoders or command buffers), so their difference means nothing.
    NotComparable,
}

impl<T> SampleValue<T> {
    /// The value, if the sample has one.
    pub fn value(self) -> Option<T> {
        match self {
            SampleValue::Value(v) => Some(v),
            _ => None,
        }
    }

    /// The same status for a result of another type, derived from a sample
    /// that lacks a value (a value here, which callers rule out, is
    /// `Error`: never a made-up number).
    pub(crate) fn without_value<U>(self) -> SampleValue<U> {
        match self {
            SampleValue::Value(_) | SampleValue::Error => SampleValue::Error,
            SampleValue::NotWritten => SampleValue::NotWritten,
            SampleValue::NotReady => SampleValue::NotReady,
            SampleValue::Invalidated => SampleValue::Invalidated,
            SampleValue::NotComparable => SampleValue::NotComparable,
        }
    }
}

/// Counter data resolved into Metal's standard layout: packed result structs
/// with [`COUNTER_ERROR_VALUE`] in every field of a sample that has no value,
/// plus the reason for each sample.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedCounters {
    counter_set: CommonCounterSet,
    first_index: u32,
    bytes: Vec<u8>,
    status: Vec<SampleStatus>,
    /// For statistics: per sample, the origin its cumulative values count
    /// from (0 where unknown); empty when the backend does not say.
    origins: Vec<u64>,
}

impl Default for ResolvedCounters {
    /// No samples (of the timestamp set): a value to resolve into with a
    /// backend's `resolve_counter_range_into`.
    fn default() -> Self {
        Self {
            counter_set: CommonCounterSet::Timestamp,
            first_index: 0,
            bytes: Vec::new(),
            status: Vec::new(),
            origins: Vec::new(),
        }
    }
}

impl ResolvedCounters {
    /// Empties `self`, handing back its byte and status vectors (cleared,
    /// their capacity kept) for the next resolve into it.
    pub(crate) fn take_buffers(&mut self) -> (Vec<u8>, Vec<SampleStatus>) {
        let mut bytes = std::mem::take(&mut self.bytes);
        let mut status = std::mem::take(&mut self.status);
        bytes.clear();
        status.clear();
        self.origins.clear();
        (bytes, status)
    }

    /// Builds resolved data from bytes in Metal's layout and one status per
    /// sample. Fails if the lengths disagree.
    pub fn new(
        counter_set: CommonCounterSet,
        first_index: u32,
        bytes: Vec<u8>,
        status: Vec<SampleStatus>,
    ) -> Result<Self> {
        if bytes.len() != status.len() * counter_set.result_size() {
            return Err(Error::Internal(format!(
                "resolved {} bytes for {} samples of {} ({} bytes each)",
                bytes.len(),
                status.len(),
                counter_set,
                counter_set.result_size()
            )));
        }
        Ok(Self {
            counter_set,
            first_index,
            bytes,
            status,
            origins: Vec::new(),
        })
    }

    /// Adds, per sample, the origin its cumulative statistic values count
    /// from: an id that is equal for two samples exactly when their
    /// difference is what the GPU counted between them (0: no value). Fails
    /// if the length disagrees.
    pub fn with_origins(mut self, origins: Vec<u64>) -> Result<Self> {
        if origins.len() != self.status.len() {
            return Err(Error::Internal(format!(
                "{} origins for {} resolved samples",
                origins.len(),
                self.status.len()
            )));
        }
        self.origins = origins;
        Ok(self)
    }

    /// The origin sample `i` counts from (see [`ResolvedCounters::with_origins`]),
    /// if known.
    pub fn origin(&self, i: usize) -> Option<u64> {
        self.origins.get(i).copied().filter(|&o| o != 0)
    }

    /// What the GPU counted between statistic samples `start` and `end`
    /// (0-based within this resolve): `end - start` field by field, with the
    /// error value kept for counters the device lacks.
    ///
    /// When either sample has no value, the view of the first one that
    /// lacks it ([`SampleValue::NotWritten`], `NotReady`, ...); when both have
    /// values but count from different origins (different encoders or
    /// command buffers), [`SampleValue::NotComparable`]: never a plausible 0.
    pub fn statistics_between(
        &self,
        start: usize,
        end: usize,
    ) -> Result<SampleValue<CounterResultStatistic>> {
        self.between(start, end, CounterResultStatistic::since)
    }

    /// What the hardware counted between stage-utilization samples `start`
    /// and `end` (0-based within this resolve), as
    /// [`ResolvedCounters::statistics_between`] does for statistics: `end -
    /// start` field by field, the error value kept for stages the device has
    /// no counter for, and [`SampleValue::NotComparable`] for samples of
    /// different origins.
    pub fn stage_utilization_between(
        &self,
        start: usize,
        end: usize,
    ) -> Result<SampleValue<CounterResultStageUtilization>> {
        self.between(start, end, CounterResultStageUtilization::since)
    }

    /// `since(end, start)` of two cumulative samples of one origin.
    fn between<T: CounterResult>(
        &self,
        start: usize,
        end: usize,
        since: impl Fn(&T, &T) -> T,
    ) -> Result<SampleValue<T>> {
        let a = self.sample::<T>(start)?;
        let b = self.sample::<T>(end)?;
        let (a, b) = match (a, b) {
            (SampleValue::Value(a), SampleValue::Value(b)) => (a, b),
            (SampleValue::Value(_), other) | (other, _) => return Ok(other.without_value()),
        };
        if self.origins.is_empty() || self.origins[start] != self.origins[end] {
            return Ok(SampleValue::NotComparable);
        }
        Ok(SampleValue::Value(since(&b, &a)))
    }

    /// The counter set the samples belong to.
    pub fn counter_set(&self) -> CommonCounterSet {
        self.counter_set
    }

    /// The buffer index of the first resolved sample.
    pub fn first_index(&self) -> u32 {
        self.first_index
    }

    /// Number of resolved samples.
    pub fn len(&self) -> usize {
        self.status.len()
    }

    /// Whether no sample was resolved.
    pub fn is_empty(&self) -> bool {
        self.status.is_empty()
    }

    /// How many samples have `status`. Counted in blocks of 255 with a
    /// byte-sized sum, which vectorises: about 50 µs for a million samples,
    /// against about 0.4 ms for `statuses().iter().filter(..).count()`.
    pub fn count(&self, status: SampleStatus) -> usize {
        self.status
            .chunks(255)
            .map(|c| usize::from(c.iter().map(|s| u8::from(*s == status)).sum::<u8>()))
            .sum()
    }

    /// Whether every sample was written and is complete
    /// ([`SampleStatus::Written`]).
    pub fn all_written(&self) -> bool {
        self.count(SampleStatus::Written) == self.len()
    }

    /// The raw bytes, Metal's layout (what `resolveCounterRange` returns).
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The status of every sample, in order.
    pub fn statuses(&self) -> &[SampleStatus] {
        &self.status
    }

    /// Casts the bytes to result structs of type `T`; fails if `T` is not the
    /// buffer's set's result type.
    pub fn results<T: CounterResult>(&self) -> Result<&[T]> {
        if T::SET != self.counter_set {
            return Err(InvalidInput::Argument(format!(
                "resolved samples are of the {} set, not {}",
                self.counter_set,
                T::SET
            ))
            .into());
        }
        bytemuck::try_cast_slice(&self.bytes)
            .map_err(|e| Error::Internal(format!("casting resolved bytes: {e}")))
    }

    /// The timestamps, if this is timestamp data.
    pub fn timestamps(&self) -> Result<&[CounterResultTimestamp]> {
        self.results()
    }

    /// The stage-utilization samples, if this is stage-utilization data.
    pub fn stage_utilization(&self) -> Result<&[CounterResultStageUtilization]> {
        self.results()
    }

    /// The statistics, if this is statistic data.
    pub fn statistics(&self) -> Result<&[CounterResultStatistic]> {
        self.results()
    }

    /// The typed view of sample `i` (0-based within this resolve).
    pub fn sample<T: CounterResult>(&self, i: usize) -> Result<SampleValue<T>> {
        let results = self.results::<T>()?;
        let value = results.get(i).ok_or_else(|| {
            Error::from(InvalidInput::IndexOutOfRange {
                what: "resolved sample",
                label: format!("resolve of {}", self.counter_set),
                index: i as u64,
                count: results.len() as u64,
            })
        })?;
        Ok(match self.status[i] {
            SampleStatus::Written => SampleValue::Value(*value),
            SampleStatus::NotWritten => SampleValue::NotWritten,
            SampleStatus::NotReady => SampleValue::NotReady,
            SampleStatus::Error => SampleValue::Error,
            SampleStatus::Invalidated => SampleValue::Invalidated,
        })
    }
}

/// Timestamps of a range resolved for a caller that reads each sample once,
/// such as a profiler turning start and end samples into spans. When every
/// sample was written and is complete (the usual case for finished work),
/// it holds what the driver read, with no pass that lays the values out in
/// Metal's layout first; otherwise it holds that layout and a status per
/// sample, as [`ResolvedCounters`] does. Either way it reads as the same
/// ticks and statuses as a `resolve_counter_range` of the range.
///
/// Resolved into with a backend's `resolve_timestamps_into`; reusing one
/// keeps its memory, so steady-state resolves allocate nothing.
#[derive(Debug, Default)]
pub struct ResolvedTimestamps {
    /// The number of samples.
    pub(crate) len: usize,
    /// Whether every sample was written and is complete: `pairs` holds
    /// them; otherwise `laid` does.
    pub(crate) all_written: bool,
    /// Per sample, its raw value and availability word, as read.
    pub(crate) pairs: Vec<u64>,
    /// The valid bits of a raw value.
    pub(crate) mask: u64,
    /// Metal's layout with statuses, when not every sample was written.
    pub(crate) laid: ResolvedCounters,
}

impl ResolvedTimestamps {
    /// Resolves into `self` through `resolve`, a resolve into Metal's
    /// layout (a backend's `resolve_counter_range_into`): the way for a
    /// backend without a resolve of its own that skips the layout. Fails,
    /// leaving `self` empty, where `resolve` fails or resolves another
    /// counter set.
    pub fn resolve_laid_out(
        &mut self,
        resolve: impl FnOnce(&mut ResolvedCounters) -> Result<()>,
    ) -> Result<()> {
        self.len = 0;
        self.all_written = false;
        if let Err(e) = resolve(&mut self.laid) {
            self.laid = ResolvedCounters::default();
            return Err(e);
        }
        if self.laid.counter_set() != CommonCounterSet::Timestamp {
            let set = self.laid.counter_set();
            self.laid = ResolvedCounters::default();
            return Err(InvalidInput::Argument(format!(
                "resolved samples are of the {set} set, not timestamps"
            ))
            .into());
        }
        self.len = self.laid.len();
        Ok(())
    }

    /// The number of samples.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are no samples.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether every sample was written and is complete
    /// ([`SampleStatus::Written`]).
    pub fn all_written(&self) -> bool {
        self.all_written || (self.laid.len() == self.len && self.laid.all_written())
    }

    /// How many samples have `status`.
    pub fn count(&self, status: SampleStatus) -> usize {
        match (self.all_written, status) {
            (true, SampleStatus::Written) => self.len,
            (true, _) => 0,
            (false, _) => self.laid.count(status),
        }
    }

    /// Sample `i`'s ticks ([`COUNTER_ERROR_VALUE`] where it has none, 0 for
    /// an invalidated heap entry) and status; `None` past the end.
    pub fn get(&self, i: usize) -> Option<(u64, SampleStatus)> {
        if i >= self.len {
            None
        } else if self.all_written {
            Some((self.pairs.get(2 * i)? & self.mask, SampleStatus::Written))
        } else {
            let t = self.laid.timestamps().ok()?.get(i)?;
            Some((t.timestamp, *self.laid.statuses().get(i)?))
        }
    }

    /// The number of spans: samples `(2k, 2k + 1)` taken as the start and
    /// end of span `k` (a last sample without a partner is none).
    pub fn span_count(&self) -> usize {
        self.len / 2
    }

    /// Calls `f(k, start, end)` for each span `k` in order (see
    /// [`ResolvedTimestamps::span_count`]): each end's ticks and status, as
    /// [`ResolvedTimestamps::get`] gives them. One loop for all samples
    /// written and one for the rest, each with `f` inlined, so that the
    /// usual case tests no status.
    #[inline]
    pub fn for_each_span(&self, mut f: impl FnMut(usize, SpanEnd, SpanEnd)) {
        let all = vec![(); self.span_count()];
        self.for_each_span_with(&all, |k, (), start, end| f(k, start, end));
    }

    /// [`ResolvedTimestamps::for_each_span`] in step with `items`, one per
    /// span (a caller's record of what each span measured): `f(k,
    /// &items[k], start, end)` for each span that has an item, with no
    /// index to check.
    #[inline]
    pub fn for_each_span_with<T>(
        &self,
        items: &[T],
        mut f: impl FnMut(usize, &T, SpanEnd, SpanEnd),
    ) {
        let spans = self.span_count().min(items.len());
        let items = &items[..spans];
        if self.all_written {
            let mask = self.mask;
            let pairs = self.pairs.get(..4 * spans).unwrap_or(&[]);
            for (k, (item, q)) in items.iter().zip(pairs.chunks_exact(4)).enumerate() {
                f(
                    k,
                    item,
                    (q[0] & mask, SampleStatus::Written),
                    (q[2] & mask, SampleStatus::Written),
                );
            }
        } else {
            let ticks = self.laid.timestamps().unwrap_or(&[]);
            let status = self.laid.statuses();
            let n = (2 * spans).min(ticks.len()).min(status.len()) & !1;
            let ends = ticks[..n].chunks_exact(2).zip(status[..n].chunks_exact(2));
            for (k, (item, (t, s))) in items.iter().zip(ends).enumerate() {
                f(k, item, (t[0].timestamp, s[0]), (t[1].timestamp, s[1]));
            }
        }
    }
}

/// One end of a span of [`ResolvedTimestamps::for_each_span`]: its ticks
/// and status.
pub type SpanEnd = (u64, SampleStatus);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_match_metal() {
        assert_eq!(std::mem::size_of::<CounterResultTimestamp>(), 8);
        assert_eq!(std::mem::size_of::<CounterResultStatistic>(), 64);
        assert_eq!(std::mem::size_of::<CounterResultStageUtilization>(), 48);
    }

    #[test]
    fn counts_match_a_plain_count_across_block_edges() {
        let all = [
            SampleStatus::Written,
            SampleStatus::NotWritten,
            SampleStatus::NotReady,
            SampleStatus::Error,
            SampleStatus::Invalidated,
        ];
        // Lengths around the 255-sample blocks, one status in 7 not written.
        for n in [0usize, 1, 254, 255, 256, 510, 1000, 70_001] {
            let status: Vec<SampleStatus> = (0..n)
                .map(|i| if i % 7 == 3 { all[1 + i % 4] } else { all[0] })
                .collect();
            let r = ResolvedCounters::new(
                CommonCounterSet::Timestamp,
                0,
                vec![0u8; 8 * n],
                status.clone(),
            )
            .unwrap();
            for s in all {
                assert_eq!(
                    r.count(s),
                    status.iter().filter(|x| **x == s).count(),
                    "{n} {s:?}"
                );
            }
            assert_eq!(r.all_written(), n < 4, "{n}");
        }
    }

    #[test]
    fn typed_view_follows_status() {
        let bytes: Vec<u8> = [5u64, COUNTER_ERROR_VALUE, 0]
            .iter()
            .flat_map(|v| v.to_ne_bytes())
            .collect();
        let r = ResolvedCounters::new(
            CommonCounterSet::Timestamp,
            3,
            bytes,
            vec![
                SampleStatus::Written,
                SampleStatus::NotReady,
                SampleStatus::Invalidated,
            ],
        )
        .unwrap();
        assert_eq!(
            r.sample::<CounterResultTimestamp>(0).unwrap(),
            SampleValue::Value(CounterResultTimestamp { timestamp: 5 })
        );
        assert_eq!(
            r.sample::<CounterResultTimestamp>(1).unwrap(),
            SampleValue::NotReady
        );
        assert_eq!(
            r.sample::<CounterResultTimestamp>(2).unwrap(),
            SampleValue::Invalidated
        );
        assert!(r.statistics().is_err());
        assert!(r.sample::<CounterResultTimestamp>(3).is_err());
    }

    #[test]
    fn statistic_difference() {
        let a = CounterResultStatistic {
            vertex_invocations: 3,
            compute_kernel_invocations: 10,
            ..Default::default()
        };
        let b = CounterResultStatistic {
            vertex_invocations: 9,
            compute_kernel_invocations: 110,
            ..Default::default()
        };
        let d = b.since(&a);
        assert_eq!(d.vertex_invocations, 6);
        assert_eq!(d.compute_kernel_invocations, 100);
    }

    /// Soundness item 9: a counter either side lacks stays the error value
    /// (it saturated to 0 before), and so does a start above the end.
    #[test]
    fn since_keeps_the_error_value() {
        let start = CounterResultStatistic {
            compute_kernel_invocations: 10,
            fragments_passed: COUNTER_ERROR_VALUE,
            vertex_invocations: 7,
            ..Default::default()
        };
        let end = CounterResultStatistic {
            compute_kernel_invocations: 110,
            fragments_passed: 5,
            vertex_invocations: 3,
            ..Default::default()
        };
        let d = end.since(&start);
        assert_eq!(d.compute_kernel_invocations, 100);
        assert_eq!(d.fragments_passed, COUNTER_ERROR_VALUE);
        assert_eq!(d.vertex_invocations, COUNTER_ERROR_VALUE);
        assert_eq!(d.clipper_invocations, 0);
        let lacking = CounterResultStatistic {
            fragments_passed: COUNTER_ERROR_VALUE,
            ..end
        };
        assert_eq!(lacking.since(&end).fragments_passed, COUNTER_ERROR_VALUE);
    }

    /// Soundness item 8: samples of different origins are not comparable;
    /// a missing sample gives its own status.
    #[test]
    fn statistics_between_checks_origins_and_statuses() {
        let a = CounterResultStatistic {
            compute_kernel_invocations: 4,
            ..Default::default()
        };
        let b = CounterResultStatistic {
            compute_kernel_invocations: 1028,
            ..Default::default()
        };
        let bytes: Vec<u8> = [a, b, b]
            .iter()
            .flat_map(|s| bytemuck::bytes_of(s).to_vec())
            .collect();
        let r = ResolvedCounters::new(
            CommonCounterSet::Statistic,
            0,
            bytes,
            vec![SampleStatus::Written; 3],
        )
        .unwrap();
        assert_eq!(
            r.statistics_between(0, 1).unwrap(),
            SampleValue::NotComparable,
            "no origins known"
        );
        let r = r.with_origins(vec![7, 7, 9]).unwrap();
        match r.statistics_between(0, 1).unwrap() {
            SampleValue::Value(d) => assert_eq!(d.compute_kernel_invocations, 1024),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            r.statistics_between(0, 2).unwrap(),
            SampleValue::NotComparable
        );
        let mut statuses = vec![SampleStatus::Written; 3];
        statuses[1] = SampleStatus::NotReady;
        let r = ResolvedCounters::new(
            CommonCounterSet::Statistic,
            0,
            r.as_bytes().to_vec(),
            statuses,
        )
        .unwrap()
        .with_origins(vec![7, 7, 7])
        .unwrap();
        assert_eq!(r.statistics_between(0, 1).unwrap(), SampleValue::NotReady);
        assert!(r.with_origins(vec![1]).is_err());
    }

    /// Soundness item 19: the error names the index given, not its low 32
    /// bits.
    #[test]
    fn out_of_range_message_names_the_real_index() {
        let r = ResolvedCounters::new(
            CommonCounterSet::Timestamp,
            0,
            5u64.to_ne_bytes().to_vec(),
            vec![SampleStatus::Written],
        )
        .unwrap();
        let e = r.sample::<CounterResultTimestamp>(1 << 32).unwrap_err();
        assert!(e.to_string().contains("4294967296"), "{e}");
    }
}
