//! The state of a command buffer's open pass, kept in the command buffer
//! (which has at most one open encoder): its kind and flags
//! ([`OpenPass`]), its end-of-pass samples, statistic chain and relaxed
//! writes ([`PassEnds`]), and the emptied lists ended passes leave for the
//! next ones ([`SpareRelaxed`]).

use crate::samples::Samples;
use crate::writes::Chain;
use ash::vk;
use gpu_counters_hal::bookkeeping::RelaxedWrites;
use gpu_counters_hal::CounterSamplingPoint;
use std::sync::Arc;

#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum EncoderKind {
    Compute = 0,
    Render = 1,
    Blit = 2,
}

impl EncoderKind {
    pub(crate) fn point(self) -> CounterSamplingPoint {
        match self {
            EncoderKind::Compute => CounterSamplingPoint::AtDispatchBoundary,
            EncoderKind::Render => CounterSamplingPoint::AtDrawBoundary,
            EncoderKind::Blit => CounterSamplingPoint::AtBlitBoundary,
        }
    }
}

/// An end-of-pass sample to take when the encoder ends.
pub(crate) struct EndSample {
    pub(crate) samples: EndSet,
    pub(crate) index: u32,
    pub(crate) stage: vk::PipelineStageFlags2,
}

/// The set an end-of-pass sample goes into, kept alive until the pass ends.
pub(crate) enum EndSet {
    /// At this place in the sets the command buffer holds (an `Arc` clone
    /// and drop are two atomic operations per pass saved).
    Held(usize),
    /// A set the command buffer does not hold yet.
    Owned(Arc<Samples>),
}

/// The state of the open encoder of a command buffer (a command buffer has
/// at most one) but its few hot fields: its end-of-pass samples, its
/// statistic chain and its relaxed writes. Kept in the command buffer, not
/// in the encoder, so that an encoder stays small: making one stores a few
/// words, and it is moved as it is made and returned without copying
/// through memory (a load of what was just stored in other widths waits for
/// the CPU's stores to drain, and right after a driver call that is the
/// driver's command writes), and the lists' capacity serves every pass.
/// Empty whenever no encoder is open.
#[derive(Default)]
pub(crate) struct PassEnds {
    /// Timestamp samples, in the order of the pass's attachments.
    pub(crate) timestamps: Vec<EndSample>,
    /// Statistic samples, in the order of the pass's attachments.
    pub(crate) statistics: Vec<(Arc<Samples>, u32)>,
    /// The pass's statistic chain: the buffer and the index whose queries
    /// are active.
    pub(crate) chain: Option<Chain>,
    /// Relaxed heap writes waiting for the pass's end, per heap.
    pub(crate) relaxed: Vec<HeapRelaxed>,
    /// The pass's one relaxed write while it has only one, noted as
    /// written in a block this recording claimed when it was made (the
    /// usual pass; `relaxed` is then empty): its command is all that is
    /// left for the pass's end, where the lists' one write would be. Any
    /// other write goes into the lists.
    pub(crate) relaxed_one: MarkedEnd,
    /// The end sample of a pass begun by [`EncoderCore::begin_claimed`](crate::pass::EncoderCore::begin_claimed)
    /// (taken after all the pass's work, as every compute end sample).
    pub(crate) marked_end: MarkedEnd,
}

/// One heap's relaxed writes waiting for the pass's end.
pub(crate) struct HeapRelaxed {
    pub(crate) heap: Arc<Samples>,
    pub(crate) writes: RelaxedWrites,
}

/// What ended encoders leave for the next ones of their command buffer:
/// emptied write lists, each with the heap it was last used for (so that
/// the next pass writing that heap takes no new reference to it: an atomic
/// operation per pass).
#[derive(Default)]
pub(crate) struct SpareRelaxed {
    pub(crate) writes: Vec<HeapRelaxed>,
}

/// A pass's end sample (an attachment's end, or its one relaxed heap
/// write) that was noted as written in a block this recording claimed (so
/// clean, and no other recording's to write) when the pass began or the
/// write was made: all that is left is its command, at the pass's end. A
/// null `pool` is none.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct MarkedEnd {
    pub(crate) pool: vk::QueryPool,
    pub(crate) index: u32,
}

impl MarkedEnd {
    pub(crate) const NONE: Self = Self {
        pool: vk::QueryPool::null(),
        index: 0,
    };

    /// `samples[index]`.
    pub(crate) fn of(samples: &Samples, index: u32) -> Self {
        Self {
            pool: samples.main.raw,
            index,
        }
    }

    pub(crate) fn is_none(self) -> bool {
        self.pool == vk::QueryPool::null()
    }

    /// Makes it none: its pool alone (one store, as each pass ends).
    #[inline(always)]
    pub(crate) fn clear(&mut self) {
        self.pool = vk::QueryPool::null();
    }
}

impl Default for MarkedEnd {
    fn default() -> Self {
        Self::NONE
    }
}

/// The open encoder's flags, kept in its command buffer (which has at most
/// one open encoder) as one byte: beginning a pass is one store of it and
/// ending one another, and the encoder itself is only a pointer to the
/// command buffer, kept in a register. (Every word an encoder kept of its
/// own was stored as it was made, and a store right after a driver call
/// waits behind the driver's command writes.)
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct OpenPass(pub(crate) u8);

impl OpenPass {
    /// No encoder is open.
    pub(crate) const CLOSED: Self = Self(0);
    pub(crate) const OPEN: u8 = 1;
    /// The device samples at the encoder kind's point.
    pub(crate) const POINT: u8 = 1 << 1;
    /// A render pass instance begun by the encoder is open.
    pub(crate) const IN_RENDER_PASS: u8 = 1 << 2;
    /// ... begun with `vkCmdBeginRenderPass2` (else `vkCmdBeginRendering`).
    pub(crate) const RENDER_PASS2: u8 = 1 << 3;
    pub(crate) const KIND_SHIFT: u32 = 4;

    pub(crate) fn open(kind: EncoderKind, point_supported: bool) -> Self {
        Self(
            Self::OPEN
                | if point_supported { Self::POINT } else { 0 }
                | (kind as u8) << Self::KIND_SHIFT,
        )
    }

    /// Whether an encoder began and has not ended.
    pub(crate) fn is_open(self) -> bool {
        self.0 & Self::OPEN != 0
    }

    pub(crate) fn has(self, bit: u8) -> bool {
        self.0 & bit != 0
    }

    pub(crate) fn kind(self) -> EncoderKind {
        match self.0 >> Self::KIND_SHIFT {
            0 => EncoderKind::Compute,
            1 => EncoderKind::Render,
            _ => EncoderKind::Blit,
        }
    }
}
