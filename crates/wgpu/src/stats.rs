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
//!   [`gpu_counters_core::ResolvedCounters::statistics_between`]`(start, end)`
//!   is exactly the pass's work.
//!
//! Two passes' samples have different origins: comparing them is
//! `NotComparable`, as in Metal across chains. Fields wgpu does not count
//! (tessellation, post-tessellation vertices, fragments passed) hold the
//! error value.

use crate::storage::Storage;
use crate::{WgpuRecorder, WgpuSampleBuffer};
use gpu_counters_core::bookkeeping::NONE;
use gpu_counters_core::{CommonCounterSet, InvalidInput, Result};
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

fn next_chain() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// The open statistics query of a pass: `start` and `end` of `storage`.
pub(crate) struct Open {
    storage: Arc<Storage>,
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

/// A compute pass whose pipeline statistics are counted into a statistic
/// sample buffer (see [`WgpuRecorder::begin_compute_pass_with_statistics`]).
/// Dereferences to the [`wgpu::ComputePass`]; dropping it ends the
/// statistics query, then the pass.
///
/// Leaking it (`std::mem::forget`) is safe but leaves the pass unended: wgpu
/// then refuses to finish the encoder, and the pass's two samples stay marked
/// open, so writing them again is refused with a typed error.
pub struct WgpuComputePass<'e> {
    pub(crate) pass: wgpu::ComputePass<'e>,
    /// `None` where nothing is counted (a profiled pass without statistics).
    pub(crate) open: Option<Open>,
}

impl<'e> Deref for WgpuComputePass<'e> {
    type Target = wgpu::ComputePass<'e>;
    fn deref(&self) -> &Self::Target {
        &self.pass
    }
}

impl DerefMut for WgpuComputePass<'_> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.pass
    }
}

impl Drop for WgpuComputePass<'_> {
    fn drop(&mut self) {
        if let Some(open) = self.open.take() {
            self.pass.end_pipeline_statistics_query();
            drop(open);
        }
    }
}

/// A render pass whose pipeline statistics are counted into a statistic
/// sample buffer (see [`WgpuRecorder::begin_render_pass_with_statistics`]).
/// Dereferences to the [`wgpu::RenderPass`]; dropping it ends the
/// statistics query, then the pass.
///
/// Leaking it (`std::mem::forget`) is safe but leaves the pass unended: wgpu
/// then refuses to finish the encoder, and the pass's two samples stay marked
/// open, so writing them again is refused with a typed error.
pub struct WgpuRenderPass<'e> {
    pub(crate) pass: wgpu::RenderPass<'e>,
    /// `None` where nothing is counted (a profiled pass without statistics).
    pub(crate) open: Option<Open>,
}

impl<'e> Deref for WgpuRenderPass<'e> {
    type Target = wgpu::RenderPass<'e>;
    fn deref(&self) -> &Self::Target {
        &self.pass
    }
}

impl DerefMut for WgpuRenderPass<'_> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.pass
    }
}

impl Drop for WgpuRenderPass<'_> {
    fn drop(&mut self) {
        if let Some(open) = self.open.take() {
            self.pass.end_pipeline_statistics_query();
            drop(open);
        }
    }
}

impl WgpuRecorder {
    /// Core's bookkeeping of a counted pass: `start` and `end` of `buffer`
    /// checked, then recorded as a new two-sample chain, both open until the
    /// pass ends.
    pub(crate) fn note_statistics(
        &mut self,
        buffer: &WgpuSampleBuffer,
        start: u32,
        end: u32,
    ) -> Result<Open> {
        let storage = &buffer.storage;
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
    /// Refused, before anything is recorded: a buffer of another counter
    /// set, `start == end`, an index out of range, open (still counted by a
    /// pass) or recorded by another recording still open.
    pub fn begin_compute_pass_with_statistics<'e>(
        &'e mut self,
        descriptor: &wgpu::ComputePassDescriptor<'_>,
        buffer: &WgpuSampleBuffer,
        start: u32,
        end: u32,
    ) -> Result<WgpuComputePass<'e>> {
        let open = self.note_statistics(buffer, start, end)?;
        let mut pass = self.encoder().begin_compute_pass(descriptor);
        pass.begin_pipeline_statistics_query(&buffer.storage.query_set, start);
        Ok(WgpuComputePass {
            pass,
            open: Some(open),
        })
    }

    /// As [`WgpuRecorder::begin_compute_pass_with_statistics`], for a render
    /// pass.
    pub fn begin_render_pass_with_statistics<'e>(
        &'e mut self,
        descriptor: &wgpu::RenderPassDescriptor<'_>,
        buffer: &WgpuSampleBuffer,
        start: u32,
        end: u32,
    ) -> Result<WgpuRenderPass<'e>> {
        let open = self.note_statistics(buffer, start, end)?;
        let mut pass = self.encoder().begin_render_pass(descriptor);
        pass.begin_pipeline_statistics_query(&buffer.storage.query_set, start);
        Ok(WgpuRenderPass {
            pass,
            open: Some(open),
        })
    }
}
