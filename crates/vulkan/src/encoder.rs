//! Compute, render and blit encoders with Metal's pass attachments and
//! encoder-level sampling.

use crate::buffer::BufferRef;
use crate::command::CommandBuffer;
use crate::descriptors::{
    BlitPassDescriptor, ComputePassDescriptor, RenderPassDescriptor, RenderTarget,
};
use crate::pass::{detached, pass_encoder, render_attachments, start_samples, EncoderCore};
use crate::pass_state::{EncoderKind, OpenPass};
use crate::sample_buffer::{CounterHeap, CounterSampleBuffer};
use ash::vk;
use gpu_counters_hal::{RenderStage, Result, TimestampGranularity};
use std::ops::Range;

macro_rules! common_encoder_methods {
    () => {
        /// The Vulkan command buffer, for the caller's own commands inside
        /// the pass.
        pub fn raw(&self) -> vk::CommandBuffer {
            self.core.cmd.raw
        }

        /// The device.
        pub fn device(&self) -> &crate::device::Device {
            self.core.device()
        }

        /// Samples counters between commands
        /// (`sampleCounters(sampleBuffer:sampleIndex:barrier:)`). With
        /// `barrier` the sample follows all prior work; without, it is taken
        /// when the GPU reaches it, which can be before earlier work finishes.
        #[inline(always)]
        pub fn sample_counters(
            &mut self,
            buffer: &CounterSampleBuffer,
            index: u32,
            barrier: bool,
        ) -> Result<()> {
            if self.core.sample_claimed(buffer, index, barrier) {
                return Ok(());
            }
            detached(self.core.cmd, |core| {
                core.sample_counters(buffer, index, barrier)
            })
        }

        /// Ends the pass (`endEncoding`): takes the end-of-pass samples.
        // Inlined whole: its usual path is a few checks around the
        // driver's command, and a call of its own would save and restore
        // registers on the stack beside that command each pass.
        #[inline(always)]
        pub fn end_encoding(mut self) -> Result<()> {
            let ended = self.core.end();
            // Ended: the drop would only see that.
            std::mem::forget(self);
            ended
        }
    };
}

/// Records a compute pass (`MTLComputeCommandEncoder`).
pub struct ComputeEncoder<'c> {
    core: EncoderCore<'c>,
}

impl ComputeEncoder<'_> {
    common_encoder_methods!();

    /// Writes a timestamp into a heap after all prior work
    /// (`writeTimestamp(granularity:counterHeap:index:)`). Relaxed writes of
    /// one pass share one timestamp taken when the pass ends.
    #[inline(always)]
    pub fn write_timestamp(
        &mut self,
        granularity: TimestampGranularity,
        heap: &CounterHeap,
        index: u32,
    ) -> Result<()> {
        let stage = vk::PipelineStageFlags2::ALL_COMMANDS;
        if self
            .core
            .write_precise_claimed(granularity, heap, index, stage)
            || self.core.write_relaxed_first(granularity, heap, index)
        {
            return Ok(());
        }
        detached(self.core.cmd, |core| {
            core.write_heap_timestamp(granularity, heap, index, stage)
        })
    }
}

/// Records a transfer pass (`MTLBlitCommandEncoder`).
pub struct BlitEncoder<'c> {
    core: EncoderCore<'c>,
}

impl BlitEncoder<'_> {
    common_encoder_methods!();

    /// Records a GPU resolve of `range` into `destination` at
    /// `destination_offset` in this pass (Metal's blit
    /// `resolveCounters(_:range:destinationBuffer:destinationOffset:)`), as
    /// [`CommandBuffer::resolve_counters`] does between passes: it reads
    /// every sample recorded before it, this pass's start samples included.
    ///
    /// # Errors
    /// Those of [`CommandBuffer::resolve_counters`]; and
    /// [`InvalidInput::SampleIndexReuse`](gpu_counters_hal::InvalidInput::SampleIndexReuse)
    /// naming the first index the resolve reads that this pass writes when
    /// it ends (an end-of-encoder attachment), since the resolve would wait
    /// for a write recorded after it; and
    /// [`InvalidInput::EncoderState`](gpu_counters_hal::InvalidInput::EncoderState)
    /// while the pass samples statistics, which would count the resolve's
    /// own compute work.
    pub fn resolve_counters(
        &mut self,
        buffer: &CounterSampleBuffer,
        range: Range<u64>,
        destination: impl Into<BufferRef>,
        destination_offset: u64,
    ) -> Result<()> {
        let destination = destination.into();
        detached(self.core.cmd, |core| {
            core.resolve_counters(buffer, range, destination, destination_offset)
        })
    }
}

/// Records a render pass (`MTLRenderCommandEncoder`).
pub struct RenderEncoder<'c> {
    core: EncoderCore<'c>,
}

impl RenderEncoder<'_> {
    common_encoder_methods!();

    /// Writes a timestamp into a heap once render stage `after` is done
    /// (Metal 4's `writeTimestamp(granularity:after:counterHeap:index:)`).
    ///
    /// A `Precise` write is recorded here and waits for the pipeline stage
    /// that `after` maps to (vertex: `VERTEX_SHADER`, fragment:
    /// `FRAGMENT_SHADER`, object: `TASK_SHADER_EXT`, mesh:
    /// `MESH_SHADER_EXT`) to finish for every earlier command. Inside the
    /// render pass its entry must not have been written since it was last
    /// invalidated, as Vulkan cannot reset a query there. `Relaxed` writes of
    /// one pass share one timestamp, taken after all of the pass's work
    /// when it ends (so after every stage).
    ///
    /// # Errors
    /// - [`InvalidInput::UnsupportedRenderStage`](gpu_counters_hal::InvalidInput::UnsupportedRenderStage)
    ///   for a stage the device lacks ([`Device::supports_render_stage`](crate::Device::supports_render_stage)):
    ///   tile always, object and mesh without `VK_EXT_mesh_shader`'s
    ///   features;
    /// - `ForeignObject` for another device's heap, `IndexOutOfRange` past
    ///   its end, and `SampleIndexReuse` for a precise write into an entry
    ///   written before in this recording.
    #[inline(always)]
    pub fn write_timestamp(
        &mut self,
        granularity: TimestampGranularity,
        after: RenderStage,
        heap: &CounterHeap,
        index: u32,
    ) -> Result<()> {
        let stage = self.core.cmd.device.render_stage_flags(after)?;
        if self
            .core
            .write_precise_claimed(granularity, heap, index, stage)
            || self.core.write_relaxed_first(granularity, heap, index)
        {
            return Ok(());
        }
        detached(self.core.cmd, |core| {
            core.write_heap_timestamp(granularity, heap, index, stage)
        })
    }

    /// Samples counters at a tile-dispatch boundary, as Metal's tile shaders
    /// allow. Vulkan has no tile shaders, so on a device without the
    /// tile-dispatch sampling point (every Vulkan device) this fails with
    /// [`gpu_counters_hal::InvalidInput::UnsupportedSamplingPoint`]: ported
    /// Metal code gets a clear error instead of a silently missing sample.
    pub fn sample_counters_at_tile_dispatch(
        &mut self,
        buffer: &CounterSampleBuffer,
        index: u32,
        barrier: bool,
    ) -> Result<()> {
        self.device()
            .require_point(gpu_counters_hal::CounterSamplingPoint::AtTileDispatchBoundary)?;
        self.core.sample_counters(buffer, index, barrier)
    }
}

impl CommandBuffer {
    /// Begins a compute pass (`makeComputeCommandEncoder(descriptor:)`),
    /// sampling its attachments.
    #[inline]
    pub fn compute_encoder(
        &mut self,
        descriptor: &ComputePassDescriptor<'_>,
    ) -> Result<ComputeEncoder<'_>> {
        Ok(ComputeEncoder {
            core: pass_encoder(
                self,
                EncoderKind::Compute,
                descriptor.sample_buffer_attachments,
            )?,
        })
    }

    /// Begins a transfer pass (`makeBlitCommandEncoder(descriptor:)`).
    #[inline]
    pub fn blit_encoder(&mut self, descriptor: &BlitPassDescriptor<'_>) -> Result<BlitEncoder<'_>> {
        Ok(BlitEncoder {
            core: pass_encoder(
                self,
                EncoderKind::Blit,
                descriptor.sample_buffer_attachments,
            )?,
        })
    }

    /// Begins a render pass instance (`makeRenderCommandEncoder(descriptor:)`),
    /// sampling its attachments.
    ///
    /// The sampling side (the attachments' buffers, indices and sampling
    /// points) is checked and returns errors; the render target is the
    /// caller's raw Vulkan description, recorded as it is with
    /// `vkCmdBeginRendering` or `vkCmdBeginRenderPass2`.
    ///
    /// # Errors
    ///
    /// [`gpu_counters_hal::Error::Invalid`] when another encoder is open, or
    /// an attachment is of another device, out of range, attached twice, or
    /// the device cannot sample at stage boundaries.
    ///
    /// # Safety
    ///
    /// `descriptor.target` must be valid usage for the begin command it
    /// selects on this command buffer, as the Vulkan specification states it:
    ///
    /// - every handle it holds (image views, resolve views, render pass,
    ///   framebuffer, and those in its `p_next` chain) must be a live object
    ///   of this command buffer's device, and stay live until the GPU has
    ///   finished with this command buffer;
    /// - its pointers (attachment arrays, clear values, `p_next` chain) must
    ///   point to valid structures for the whole call;
    /// - the images must be in the layouts the info names when the commands
    ///   execute, the render area must lie inside the attachments, and for
    ///   [`RenderTarget::Dynamic`] the device must have `dynamicRendering`
    ///   enabled (every device gpu-counters opens does; a
    ///   [`Device::from_raw`](crate::Device::from_raw) device needs it
    ///   enabled by its creator).
    ///
    /// Within the pass, the commands recorded through
    /// [`RenderEncoder::raw`] are the caller's, under the same rules.
    pub unsafe fn render_encoder(
        &mut self,
        descriptor: &RenderPassDescriptor<'_>,
    ) -> Result<RenderEncoder<'_>> {
        let mut core = EncoderCore::new(self, EncoderKind::Render)?;
        let attachments = descriptor.sample_buffer_attachments;
        core.prepare_attachments(render_attachments(attachments))?;
        let cmd = core.cmd.raw;
        let d = core.cmd.device.raw();
        // SAFETY: the caller's begin-info is valid usage for this device and
        // command buffer, its handles live until the GPU is done (this
        // function's safety contract); the command buffer is recording
        // outside any render pass, as `EncoderCore::new` checked that no
        // other encoder is open.
        let uses_render_pass2 = unsafe {
            match descriptor.target {
                RenderTarget::Dynamic(info) => {
                    d.cmd_begin_rendering(cmd, info);
                    false
                }
                RenderTarget::RenderPass(info) => {
                    d.cmd_begin_render_pass2(
                        cmd,
                        info,
                        &vk::SubpassBeginInfo::default().contents(vk::SubpassContents::INLINE),
                    );
                    true
                }
            }
        };
        core.cmd.open_pass.0 |= OpenPass::IN_RENDER_PASS
            | if uses_render_pass2 {
                OpenPass::RENDER_PASS2
            } else {
                0
            };
        start_samples(&mut core, render_attachments(attachments))?;
        Ok(RenderEncoder { core })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An encoder is made and returned as the caller's variable, and a
    /// store costs most right after a driver call: it is only its command
    /// buffer's address (the open pass's state is in the command buffer).
    #[test]
    fn an_encoder_is_one_pointer() {
        let word = std::mem::size_of::<usize>();
        assert_eq!(std::mem::size_of::<ComputeEncoder<'static>>(), word);
        assert_eq!(std::mem::size_of::<RenderEncoder<'static>>(), word);
        assert_eq!(std::mem::size_of::<BlitEncoder<'static>>(), word);
        assert_eq!(std::mem::size_of::<OpenPass>(), 1);
    }
}
