//! Metal's pass attachments on a stream: a compute pass is the range of
//! kernels launched between [`Recorder::begin_compute_pass`] and
//! [`ComputePass::end`]; its start indices are sampled before the first,
//! its end indices after the last.

use crate::storage::MappedStorage;
use crate::{CounterSampleBuffer, Recorder};
use gpu_counters_hal::bookkeeping::check_pass_attachments;
use gpu_counters_hal::Result;
use std::sync::Arc;

/// Where a compute pass samples a buffer
/// (`MTLComputePassSampleBufferAttachmentDescriptor`); `None` is Metal's
/// `MTLCounterDontSample`.
#[derive(Clone, Copy)]
pub struct PassAttachment<'a> {
    /// The buffer to sample into.
    pub sample_buffer: &'a CounterSampleBuffer,
    /// Index sampled before the pass's first kernel.
    pub start_of_encoder_sample_index: Option<u32>,
    /// Index sampled after all of the pass's work.
    pub end_of_encoder_sample_index: Option<u32>,
}

/// An open compute pass: launch its kernels on [`ComputePass::stream`].
/// Ending it (or dropping it) samples its end indices.
pub struct ComputePass<'r> {
    recorder: &'r mut Recorder,
    ends: Vec<(Arc<MappedStorage>, u32)>,
}

impl Recorder {
    /// Begins a compute pass sampling `attachments`: every index is checked
    /// (inside its buffer, not attached twice, writable now) before any is
    /// sampled, then the start indices are sampled.
    pub fn begin_compute_pass<'r>(
        &'r mut self,
        attachments: &[PassAttachment<'_>],
    ) -> Result<ComputePass<'r>> {
        let points = attachments.iter().flat_map(|a| {
            let key = Arc::as_ptr(a.sample_buffer.storage()) as usize;
            let s = &a.sample_buffer.storage().samples;
            [
                a.start_of_encoder_sample_index,
                a.end_of_encoder_sample_index,
            ]
            .into_iter()
            .flatten()
            .map(move |i| (key, s, i))
        });
        check_pass_attachments(points.clone())?;
        for a in attachments {
            self.check_timestamp(a.sample_buffer.storage(), a.start_of_encoder_sample_index)?;
            self.check_timestamp(a.sample_buffer.storage(), a.end_of_encoder_sample_index)?;
        }
        let mut ends = Vec::new();
        for a in attachments {
            let storage = a.sample_buffer.storage();
            if let Some(i) = a.start_of_encoder_sample_index {
                // Before the pass's first kernel (zero-intrusion: its start).
                self.timestamp(storage, i, false)?;
            }
            if let Some(i) = a.end_of_encoder_sample_index {
                ends.push((storage.clone(), i));
            }
        }
        Ok(ComputePass {
            recorder: self,
            ends,
        })
    }
}

impl ComputePass<'_> {
    /// The stream to launch the pass's kernels on.
    pub fn stream(&self) -> &Arc<cudarc::driver::CudaStream> {
        self.recorder.stream()
    }

    /// Ends the pass: samples its end indices after all its work.
    pub fn end(mut self) -> Result<()> {
        self.end_samples()
    }

    fn end_samples(&mut self) -> Result<()> {
        let mut result = Ok(());
        for (storage, index) in std::mem::take(&mut self.ends) {
            // Each end is tried: one failing leaves only its own sample
            // unwritten (it resolves as NotWritten).
            // After all of the pass's work (zero-intrusion: its last
            // kernel's end).
            let done = self.recorder.timestamp(&storage, index, true);
            if result.is_ok() {
                result = done;
            }
        }
        result
    }
}

impl Drop for ComputePass<'_> {
    fn drop(&mut self) {
        // Not ended explicitly: the end samples still follow the pass's
        // work; a failure leaves them NotWritten, never a made-up value.
        let _ = self.end_samples();
    }
}
