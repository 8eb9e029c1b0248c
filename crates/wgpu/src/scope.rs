//! Profiled passes: a profiler scope whose two timestamps are the pass's own
//! timestamp writes (and, with statistics, whose statistics are the pass's
//! statistics query), as a wgpu-profiler user knows them. Needs only
//! [`wgpu::Features::TIMESTAMP_QUERY`], not timestamps between passes.
//!
//! Timestamps only, the scope is the profiler's
//! [`gpu_counters_profiler::Frame::pass_scope`]: begun and ended at once in
//! recording order just before the pass, with its two timestamps noted as
//! the pass's pair of writes; on the GPU it spans exactly the pass.
//!
//! With statistics, the generic profiler's
//! [`gpu_counters_profiler::Frame::scope`] and
//! [`gpu_counters_profiler::Scope::end`] sample through
//! [`gpu_counters_hal::BackendRecorder::sample_counters`]; while a profiled
//! pass is set up, the recorder captures those samples (with hal's
//! bookkeeping) instead of writing them between passes, and the pass it then
//! begins writes them.

use crate::stats::Open;
use crate::{CounterSampleBuffer, Recorder};
use gpu_counters_hal::{CommonCounterSet, Error, Result};

/// The samples of one profiled pass's scope, as the profiler asked for
/// them. It lives in its recorder and is filled in place (a capture is made
/// for every profiled pass).
#[derive(Default)]
pub(crate) struct Capture {
    /// Whether a profiled pass's scope is being set up: samples go here.
    pub(crate) active: bool,
    /// The buffer of the scope's timestamps (the first one's), and whether
    /// the second was of another buffer.
    timestamp_buffer: Option<CounterSampleBuffer>,
    mixed: bool,
    /// The start and end timestamp indices, the first `timestamps` of them.
    timestamp_indices: [u32; 2],
    timestamps: usize,
    /// The start statistic sample, until the end one comes.
    statistic_start: Option<(CounterSampleBuffer, u32)>,
    /// The statistics query: buffer, start index, the open chain.
    statistics: Option<(CounterSampleBuffer, u32, Open)>,
}

impl Recorder {
    /// A sample the profiler asked for while a profiled pass is set up:
    /// hal's bookkeeping now (so that a refused index fails the profiler's
    /// scope), the write by the pass.
    pub(crate) fn capture_sample(
        &mut self,
        buffer: &CounterSampleBuffer,
        index: u32,
    ) -> Result<()> {
        match buffer.storage().samples.set {
            CommonCounterSet::Timestamp => {
                let k = self.capture.timestamps;
                if k >= 2 {
                    return Err(Error::Internal(
                        "a profiled pass's scope sampled more than two timestamps".into(),
                    ));
                }
                self.device.require(
                    wgpu::Features::TIMESTAMP_QUERY,
                    "TIMESTAMP_QUERY",
                    "profiled passes need it",
                )?;
                self.note_writes(buffer.storage(), &[index])?;
                let capture = &mut self.capture;
                match &capture.timestamp_buffer {
                    // The usual second timestamp: the same buffer, kept once.
                    Some(b) => {
                        capture.mixed |= !std::sync::Arc::ptr_eq(b.storage(), buffer.storage())
                    }
                    None => capture.timestamp_buffer = Some(buffer.clone()),
                }
                capture.timestamp_indices[k] = index;
                capture.timestamps = k + 1;
            }
            CommonCounterSet::Statistic => match self.capture.statistic_start.take() {
                None if self.capture.statistics.is_none() => {
                    self.check_device(buffer.storage())?;
                    let s = &buffer.storage().samples;
                    let slots = s.lock()?;
                    s.check_write(&slots, index, false, self.ticket.id())?;
                    self.capture.statistic_start = Some((buffer.clone(), index));
                }
                Some((start_buffer, start))
                    if std::sync::Arc::ptr_eq(start_buffer.storage(), buffer.storage()) =>
                {
                    let open = self.note_statistics(buffer, start, index)?;
                    self.capture.statistics = Some((buffer.clone(), start, open));
                }
                _ => {
                    return Err(Error::Internal(
                        "a profiled pass's scope sampled statistics out of order".into(),
                    ))
                }
            },
            set => {
                return Err(Error::Internal(format!(
                    "a profiled pass's scope sampled {set:?} counters"
                )))
            }
        }
        Ok(())
    }
}

#[cfg(feature = "profiler")]
mod profiled {
    use super::Capture;
    use crate::{ComputePass, CounterSampleBuffer, Device, Recorder, RenderPass};
    use gpu_counters_hal::timeline::PassKind;
    use gpu_counters_hal::Error;
    use gpu_counters_profiler::{Frame, ProfilerError};

    /// A profiled pass's timestamp writes, `(buffer, start, end)`, where
    /// the scope owns them (with statistics).
    type OwnedStamps = Option<(CounterSampleBuffer, u32, u32)>;

    /// A profiled pass's statistics query: buffer, start index, the open
    /// chain.
    type Counted = Option<(CounterSampleBuffer, u32, crate::stats::Open)>;

    /// The timestamp writes of a profiled pass: `(query set, start, end)`.
    type Stamps<'a> = Option<(&'a wgpu::QuerySet, u32, u32)>;

    impl Recorder {
        /// The scope of a profiled pass labelled `label`: its timestamp
        /// writes, borrowed from `frame` or from `owned`, and its
        /// statistics query.
        ///
        /// Without statistics, through [`Frame::pass_scope`]: the scope's
        /// two timestamps are noted at once, as a pass's pair of writes (one
        /// claim check), with nothing captured. With statistics, through
        /// the frame's `scope` and `end` (see [`Recorder::profiled_scope`]),
        /// into `owned`.
        #[inline]
        fn profiled_pass_scope<'a>(
            &mut self,
            frame: &'a Frame<'_, Device>,
            label: &str,
            kind: PassKind,
            owned: &'a mut OwnedStamps,
        ) -> Result<(Stamps<'a>, Counted), ProfilerError> {
            if frame.samples_statistics() {
                let (timestamps, counted) = self.profiled_scope(frame, label, kind)?;
                *owned = timestamps;
                let stamps = owned
                    .as_ref()
                    .map(|(b, start, end)| (&b.storage().query_set, *start, *end));
                return Ok((stamps, counted));
            }
            let Some(scope) = frame.pass_scope(self, label, kind)? else {
                // Dropped by the frame: the pass writes nothing.
                return Ok((None, None));
            };
            let buffer = scope.timestamps();
            let (start, end) = (scope.start_index(), scope.end_index());
            if let Err(e) = self.reserve_pass_timestamps(buffer, Some(start), Some(end)) {
                return Err(scope.failed(e));
            }
            scope.recorded();
            Ok((Some((&buffer.storage().query_set, start, end)), None))
        }

        /// Begins and ends `frame`'s scope `label` with the recorder
        /// capturing its samples: what the pass must write.
        fn profiled_scope(
            &mut self,
            frame: &Frame<'_, Device>,
            label: &str,
            kind: PassKind,
        ) -> Result<(OwnedStamps, Counted), ProfilerError> {
            self.capture = Capture {
                active: true,
                ..Capture::default()
            };
            let ended = frame
                .scope(self, label, kind)
                .and_then(|scope| scope.end(self));
            let capture = std::mem::take(&mut self.capture);
            let statistics = capture.statistics;
            // Taken before the error, so that an open chain is closed.
            ended?;
            let [start, end] = capture.timestamp_indices;
            let timestamps = match (capture.timestamp_buffer, capture.timestamps) {
                // A dropped scope (no ring slot or room): nothing to write.
                (None, 0) => None,
                (Some(b), 2) if !capture.mixed => Some((b, start, end)),
                _ => {
                    return Err(Error::Internal(
                        "a profiled pass's scope sampled unpaired timestamps".into(),
                    )
                    .into())
                }
            };
            Ok((timestamps, statistics))
        }

        /// Begins a compute pass labelled `label` as a scope of `frame`
        /// (a [`PassKind::Compute`] scope, nested in the scopes open on this
        /// recorder): the scope's start and end timestamps are the pass's
        /// own timestamp writes, and with the profiler's statistics on, its
        /// statistics are the pass's statistics query. The scope is complete
        /// when the pass (dropped) ends. Needs only
        /// [`wgpu::Features::TIMESTAMP_QUERY`] (and
        /// [`wgpu::Features::PIPELINE_STATISTICS_QUERY`] for statistics).
        /// A scope the frame drops (see the profiler's `WhenFull`) records
        /// nothing; the pass is still begun. Refused, before anything is
        /// recorded: `frame` of another device's profiler (`ForeignObject`
        /// naming the recorder), and any pass while a guard of this
        /// recorder was leaked (`EncoderState` naming the leaked pass).
        #[inline]
        pub fn begin_profiled_compute_pass<'e>(
            &'e mut self,
            frame: &Frame<'_, Device>,
            label: &str,
        ) -> Result<ComputePass<'e>, ProfilerError> {
            self.pass.check()?;
            let mut owned = None;
            let (stamps, counted) =
                self.profiled_pass_scope(frame, label, PassKind::Compute, &mut owned)?;
            let timestamp_writes =
                stamps.map(|(query_set, start, end)| wgpu::ComputePassTimestampWrites {
                    query_set,
                    beginning_of_pass_write_index: Some(start),
                    end_of_pass_write_index: Some(end),
                });
            let descriptor = wgpu::ComputePassDescriptor {
                label: Some(label),
                timestamp_writes,
            };
            Ok(match counted {
                Some((b, start, open)) => self.guarded_compute_pass(
                    &descriptor,
                    label,
                    Some((&b.storage().query_set, start, open)),
                ),
                None => self.guarded_compute_pass(&descriptor, label, None),
            })
        }

        /// As [`Recorder::begin_profiled_compute_pass`], for a render pass
        /// of `descriptor` (whose label is the scope's label, `"render pass"`
        /// without one; its `timestamp_writes` must be `None`: the scope's
        /// take their place).
        #[inline]
        pub fn begin_profiled_render_pass<'e>(
            &'e mut self,
            frame: &Frame<'_, Device>,
            descriptor: &wgpu::RenderPassDescriptor<'_>,
        ) -> Result<RenderPass<'e>, ProfilerError> {
            self.pass.check()?;
            if descriptor.timestamp_writes.is_some() {
                return Err(Error::from(gpu_counters_hal::InvalidInput::Argument(
                    "a profiled render pass's descriptor has timestamp writes of its own: the scope's take their place".into(),
                ))
                .into());
            }
            let label = descriptor.label.unwrap_or("render pass");
            let mut owned = None;
            let (stamps, counted) =
                self.profiled_pass_scope(frame, label, PassKind::Render, &mut owned)?;
            let timestamp_writes =
                stamps.map(|(query_set, start, end)| wgpu::RenderPassTimestampWrites {
                    query_set,
                    beginning_of_pass_write_index: Some(start),
                    end_of_pass_write_index: Some(end),
                });
            let descriptor = wgpu::RenderPassDescriptor {
                timestamp_writes,
                ..descriptor.clone()
            };
            Ok(match counted {
                Some((b, start, open)) => self.guarded_render_pass(
                    &descriptor,
                    label,
                    Some((&b.storage().query_set, start, open)),
                ),
                None => self.guarded_render_pass(&descriptor, label, None),
            })
        }
    }
}
