//! The descriptors of passes (Metal's pass descriptors and their sample
//! buffer attachments).

use crate::sample_buffer::CounterSampleBuffer;
use ash::vk;

/// Where a compute or blit pass samples a buffer
/// (`MTLComputePassSampleBufferAttachmentDescriptor`); `None` is Metal's
/// `MTLCounterDontSample`.
#[derive(Debug, Clone)]
pub struct PassSampleBufferAttachment<'a> {
    /// The buffer to sample into.
    pub sample_buffer: &'a CounterSampleBuffer,
    /// Index sampled when the pass starts.
    pub start_of_encoder_sample_index: Option<u32>,
    /// Index sampled when the pass's work has finished.
    pub end_of_encoder_sample_index: Option<u32>,
}

/// Describes a compute pass (`MTLComputePassDescriptor`).
#[derive(Debug, Clone, Default)]
pub struct ComputePassDescriptor<'a> {
    /// Buffers sampled at the pass's boundaries (a slice, so that a pass
    /// needs no allocation: an array on the stack does).
    pub sample_buffer_attachments: &'a [PassSampleBufferAttachment<'a>],
}

/// Describes a blit (transfer) pass (`MTLBlitPassDescriptor`).
#[derive(Debug, Clone, Default)]
pub struct BlitPassDescriptor<'a> {
    /// Buffers sampled at the pass's boundaries (a slice, so that a pass
    /// needs no allocation: an array on the stack does).
    pub sample_buffer_attachments: &'a [PassSampleBufferAttachment<'a>],
}

/// Where a render pass samples a buffer
/// (`MTLRenderPassSampleBufferAttachmentDescriptor`).
///
/// Vulkan has no event for "fragment work started": the start indices both
/// sample when the pass begins, the end of vertex when all its
/// pre-rasterization work is done, the end of fragment when all of it is.
#[derive(Debug, Clone)]
pub struct RenderPassSampleBufferAttachment<'a> {
    /// The buffer to sample into.
    pub sample_buffer: &'a CounterSampleBuffer,
    /// Index sampled when vertex work starts.
    pub start_of_vertex_sample_index: Option<u32>,
    /// Index sampled when vertex work ends.
    pub end_of_vertex_sample_index: Option<u32>,
    /// Index sampled when fragment work starts.
    pub start_of_fragment_sample_index: Option<u32>,
    /// Index sampled when fragment work ends.
    pub end_of_fragment_sample_index: Option<u32>,
}

/// How a render encoder begins its render pass instance.
#[derive(Debug, Clone, Copy)]
pub enum RenderTarget<'a> {
    /// Dynamic rendering (`vkCmdBeginRendering`).
    Dynamic(&'a vk::RenderingInfo<'a>),
    /// A classic render pass (`vkCmdBeginRenderPass2`), inline contents.
    RenderPass(&'a vk::RenderPassBeginInfo<'a>),
}

/// Describes a render pass (`MTLRenderPassDescriptor`).
#[derive(Debug, Clone)]
pub struct RenderPassDescriptor<'a> {
    /// The attachments and area to render into.
    pub target: RenderTarget<'a>,
    /// Buffers sampled at the pass's stage boundaries (a slice, as for
    /// [`ComputePassDescriptor`]).
    pub sample_buffer_attachments: &'a [RenderPassSampleBufferAttachment<'a>],
}
