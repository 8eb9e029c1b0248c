//! Pipeline statistics of a pass: wgpu's only place for them.
//!
//! wgpu counts statistics with one query begun and ended inside a pass: one
//! set of values per query, not Metal's cumulative samples. Each counted pass
//! is mapped onto a statistic chain of two samples of the buffer, `start` and
//! `end`, with one origin of their own:
//!
//! - `start` holds the wgpu query; it resolves to 0 for every counted field
//!   (nothing is counted before the chain's first sample);
//! - `end` is never a wgpu query of its own (its resolved 0 is ignored); it
//!   resolves to the query's values, so
//!   [`gpu_counters_hal::ResolvedCounters::statistics_between`]`(start, end)`
//!   is exactly the pass's work.
//!
//! Two passes' samples have different origins: comparing them is
//! `NotComparable`, as in Metal across chains. Fields wgpu does not count
//! (tessellation, post-tessellation vertices, fragments passed) hold the
//! error value.

use crate::storage::QuerySetStorage;
use crate::{CounterSampleBuffer, Recorder};
use gpu_counters_hal::bookkeeping::NONE;
use gpu_counters_hal::{CommonCounterSet, Error, InvalidInput, Result};
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

fn next_chain() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// The open statistics query of a pass: `start` and `end` of `storage`.
pub(crate) struct Open {
    storage: Arc<QuerySetStorage>,
    start: u32,
    end: u32,
}

impl Drop for Open {
    /// The query is ended (or was never begun): its samples may be written
    /// again (by a later recording) and resolved as soon as its submission
    /// is done.
    fn drop(&mut self) {
        if let Ok(mut slots) = self.storage.samples.lock() {
            slots.open[self.start as usize] = false;
            slots.open[self.end as usize] = false;
        }
    }
}

/// The pass a recorder's guard ([`ComputePass`], [`RenderPass`])
/// holds open on the recorder's encoder. Every guard the recorder hands out
/// is begun through here ([`Recorder::guarded`]) and clears it when
/// dropped. A guard borrows its recorder for as long as it lives, so where
/// the recorder is used again while a pass is still open, its guard was
/// leaked (`mem::forget`): wgpu keeps the encoder locked for ever. The
/// recorder then refuses, naming the pass, everything that would record
/// into its encoder and its submission ([`PassSlot::check`]).
#[derive(Default)]
pub(crate) struct PassSlot {
    /// A guard is out (or was leaked).
    open: bool,
    /// The open pass's label, for the errors naming it (a buffer kept from
    /// pass to pass: no allocation per pass).
    label: String,
    /// Its statistics query, if it counts: ended by the guard's drop;
    /// closed in the bookkeeping by the recorder's drop if leaked.
    statistics: Option<Open>,
    /// Where [`Recorder::encoder`] records once a guard was leaked:
    /// never submitted.
    detached: Option<wgpu::CommandEncoder>,
}

impl PassSlot {
    /// Notes a pass labelled `label` begun, counting `statistics`.
    #[inline]
    pub(crate) fn begin(&mut self, label: &str, statistics: Option<Open>) {
        self.open = true;
        self.label.clear();
        self.label.push_str(label);
        self.statistics = statistics;
    }

    /// Notes the pass ended (its guard dropped): its statistics query, to
    /// end in the pass, if it counts.
    #[inline]
    fn end(&mut self) -> Option<Open> {
        self.open = false;
        self.statistics.take()
    }

    /// Whether a pass is open: with the recorder in hand, a leaked guard's.
    #[inline]
    pub(crate) fn is_open(&self) -> bool {
        self.open
    }

    /// Fails, naming the pass, where a guard was leaked.
    #[inline]
    pub(crate) fn check(&self) -> Result<()> {
        if self.open {
            return Err(self.leaked());
        }
        Ok(())
    }

    #[cold]
    #[inline(never)]
    fn leaked(&self) -> Error {
        InvalidInput::EncoderState(format!(
            "pass `{}` is still open: its guard was leaked (never dropped), so wgpu keeps the recorder's encoder locked; nothing more can be recorded into it, and it cannot be submitted (dropped, its samples resolve NotWritten)",
            self.label
        ))
        .into()
    }

    /// Closes a leaked pass's statistics query in the bookkeeping (its
    /// samples are no longer open); its recording is being dropped.
    pub(crate) fn close_leaked(&mut self) {
        self.statistics = None;
    }

    /// The detached encoder (made on first use) of `device`.
    pub(crate) fn detached(&mut self, device: &wgpu::Device) -> &mut wgpu::CommandEncoder {
        self.detached.get_or_insert_with(|| {
            device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("gpu-counters: detached after a leaked pass (never submitted)"),
            })
        })
    }
}

/// A compute pass begun by a [`Recorder`]: counting its pipeline
/// statistics into a statistic sample buffer (see
/// [`Recorder::begin_compute_pass_with_statistics`]), or a profiled
/// pass. Dereferences to the [`wgpu::ComputePass`]; dropping it ends the
/// statistics query, then the pass.
///
/// Leaking it (`std::mem::forget`) is safe: wgpu then keeps the recorder's
/// encoder locked, so the recorder refuses everything that would record
/// into it, and its submission, with a typed error naming the pass; the
/// recording, dropped, is abandoned (its samples resolve `NotWritten`,
/// never wgpu's 0), and the pass's statistic samples stay open (refused to
/// other recordings) until then.
pub struct ComputePass<'e> {
    pub(crate) pass: wgpu::ComputePass<'e>,
    /// The recorder's pass slot, cleared by the drop.
    slot: &'e mut PassSlot,
}

impl<'e> Deref for ComputePass<'e> {
    type Target = wgpu::ComputePass<'e>;
    fn deref(&self) -> &Self::Target {
        &self.pass
    }
}

impl DerefMut for ComputePass<'_> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.pass
    }
}

impl Drop for ComputePass<'_> {
    fn drop(&mut self) {
        if let Some(open) = self.slot.end() {
            self.pass.end_pipeline_statistics_query();
            drop(open);
        }
    }
}

/// A render pass begun by a [`Recorder`], as [`ComputePass`] is for
/// compute (see [`Recorder::begin_render_pass_with_statistics`]).
/// Dereferences to the [`wgpu::RenderPass`]; dropping it ends the
/// statistics query, then the pass. Leaking it is safe, with the same
/// outcome as leaking a [`ComputePass`].
pub struct RenderPass<'e> {
    pub(crate) pass: wgpu::RenderPass<'e>,
    /// The recorder's pass slot, cleared by the drop.
    slot: &'e mut PassSlot,
}

impl<'e> Deref for RenderPass<'e> {
    type Target = wgpu::RenderPass<'e>;
    fn deref(&self) -> &Self::Target {
        &self.pass
    }
}

impl DerefMut for RenderPass<'_> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.pass
    }
}

impl Drop for RenderPass<'_> {
    fn drop(&mut self) {
        if let Some(open) = self.slot.end() {
            self.pass.end_pipeline_statistics_query();
            drop(open);
        }
    }
}

impl Recorder {
    /// Begins a compute pass of `descriptor` on the wrapped encoder, its
    /// guard holding the recorder's pass slot (labelled `label`), with the
    /// statistics query of `statistics` (`(query set, start, open)`) begun
    /// first. The caller checked the slot.
    pub(crate) fn guarded_compute_pass<'e>(
        &'e mut self,
        descriptor: &wgpu::ComputePassDescriptor<'_>,
        label: &str,
        statistics: Option<(&wgpu::QuerySet, u32, Open)>,
    ) -> ComputePass<'e> {
        let (query, open) = split(statistics);
        let (encoder, slot) = self.guarded(label, open);
        let mut pass = encoder.begin_compute_pass(descriptor);
        if let Some((set, start)) = query {
            pass.begin_pipeline_statistics_query(set, start);
        }
        ComputePass { pass, slot }
    }

    /// As [`Recorder::guarded_compute_pass`], for a render pass.
    pub(crate) fn guarded_render_pass<'e>(
        &'e mut self,
        descriptor: &wgpu::RenderPassDescriptor<'_>,
        label: &str,
        statistics: Option<(&wgpu::QuerySet, u32, Open)>,
    ) -> RenderPass<'e> {
        let (query, open) = split(statistics);
        let (encoder, slot) = self.guarded(label, open);
        let mut pass = encoder.begin_render_pass(descriptor);
        if let Some((set, start)) = query {
            pass.begin_pipeline_statistics_query(set, start);
        }
        RenderPass { pass, slot }
    }
}

/// A pass's statistics query and its bookkeeping, apart.
#[allow(clippy::type_complexity)]
fn split(
    statistics: Option<(&wgpu::QuerySet, u32, Open)>,
) -> (Option<(&wgpu::QuerySet, u32)>, Option<Open>) {
    match statistics {
        Some((set, start, open)) => (Some((set, start)), Some(open)),
        None => (None, None),
    }
}

impl Recorder {
    /// The hal's bookkeeping of a counted pass: `start` and `end` of `buffer`
    /// checked, then recorded as a new two-sample chain, both open until the
    /// pass ends.
    pub(crate) fn note_statistics(
        &mut self,
        buffer: &CounterSampleBuffer,
        start: u32,
        end: u32,
    ) -> Result<Open> {
        let storage = buffer.storage();
        self.check_device(storage)?;
        if storage.samples.set != CommonCounterSet::Statistic {
            return Err(InvalidInput::Argument(format!(
                "`{}` holds {:?} samples: a pass's pipeline statistics need a statistic sample buffer",
                storage.samples.label, storage.samples.set
            ))
            .into());
        }
        self.device.require(
            wgpu::Features::PIPELINE_STATISTICS_QUERY,
            "PIPELINE_STATISTICS_QUERY",
            "pass pipeline statistics need it",
        )?;
        if start == end {
            return Err(InvalidInput::Argument(format!(
                "a pass's start and end statistic samples are both index {start}"
            ))
            .into());
        }
        let chain = next_chain();
        let id = self.ticket.id();
        self.note_writes_with(storage, &[start, end], |slots, _, _| {
            slots.mark_recorded(start, NONE, false, id, chain);
            slots.mark_recorded(end, start, false, id, chain);
            slots.open[start as usize] = true;
            slots.open[end as usize] = true;
        })?;
        Ok(Open {
            storage: storage.clone(),
            start,
            end,
        })
    }

    /// Begins a compute pass on this recorder's encoder that counts its
    /// pipeline statistics into `buffer` (a statistic sample buffer):
    /// sample `start` reads 0s, sample `end` the pass's counts, so
    /// `statistics_between(start, end)` is the pass's work (see the module
    /// docs of the mapping). The statistics query is begun before anything
    /// the caller records in the pass, and ended when the pass is dropped.
    ///
    /// Refused, before anything is recorded: a buffer of another device
    /// (`ForeignObject`) or counter set, `start == end`, an index out of
    /// range, open (still counted by a pass) or recorded by another
    /// recording still open, and any pass while a guard of this recorder
    /// was leaked (`EncoderState` naming the leaked pass).
    pub fn begin_compute_pass_with_statistics<'e>(
        &'e mut self,
        descriptor: &wgpu::ComputePassDescriptor<'_>,
        buffer: &CounterSampleBuffer,
        start: u32,
        end: u32,
    ) -> Result<ComputePass<'e>> {
        self.pass.check()?;
        let open = self.note_statistics(buffer, start, end)?;
        let label = descriptor.label.unwrap_or("compute pass");
        Ok(self.guarded_compute_pass(
            descriptor,
            label,
            Some((&buffer.storage().query_set, start, open)),
        ))
    }

    /// As [`Recorder::begin_compute_pass_with_statistics`], for a render
    /// pass.
    pub fn begin_render_pass_with_statistics<'e>(
        &'e mut self,
        descriptor: &wgpu::RenderPassDescriptor<'_>,
        buffer: &CounterSampleBuffer,
        start: u32,
        end: u32,
    ) -> Result<RenderPass<'e>> {
        self.pass.check()?;
        let open = self.note_statistics(buffer, start, end)?;
        let label = descriptor.label.unwrap_or("render pass");
        Ok(self.guarded_render_pass(
            descriptor,
            label,
            Some((&buffer.storage().query_set, start, open)),
        ))
    }
}
