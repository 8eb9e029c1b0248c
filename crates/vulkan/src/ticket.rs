//! What the sample bookkeeping knows of one command buffer's life, and the
//! GPU objects a recording keeps alive until the GPU is done with them.
//!
//! Every [`crate::CommandBuffer`] has a [`Ticket`]. Samples remember the
//! ticket of the recording that last wrote them, so that the bookkeeping can
//! tell a sample whose command buffer is still being recorded, was submitted,
//! finished, or was dropped without ever being submitted.

use crate::buffer::BufferShared;
use crate::samples::Samples;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

/// Where a command buffer is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Phase {
    /// Commands are being recorded; nothing of it has reached the GPU.
    Recording = 0,
    /// Submitted by gpu-counters; its fence tells when it is done.
    Submitted = 1,
    /// A caller's command buffer ([`crate::CommandBuffer::from_raw`]) whose
    /// wrapper was dropped: the caller submits it, and says it finished
    /// through [`crate::Completion::signal`].
    External = 2,
    /// The GPU finished it.
    Done = 3,
    /// Dropped without being submitted: none of its commands ever ran.
    Abandoned = 4,
}

impl Phase {
    fn from_u8(v: u8) -> Self {
        match v {
            0 => Phase::Recording,
            1 => Phase::Submitted,
            2 => Phase::External,
            3 => Phase::Done,
            _ => Phase::Abandoned,
        }
    }
}

/// GPU objects referenced by recorded commands.
#[derive(Default)]
pub(crate) struct Held {
    pub(crate) samples: Vec<Arc<Samples>>,
    pub(crate) buffers: Vec<Arc<BufferShared>>,
}

impl Held {
    pub(crate) fn is_empty(&self) -> bool {
        self.samples.is_empty() && self.buffers.is_empty()
    }
}

struct TicketInner {
    id: u64,
    phase: AtomicU8,
    /// For a caller's command buffer whose wrapper is gone but whose
    /// completion handle was taken: what it references, until signaled.
    held: Mutex<Held>,
}

/// One command buffer's life, shared by the bookkeeping of every sample it
/// wrote. Cloning shares it.
#[derive(Clone)]
pub(crate) struct Ticket(Arc<TicketInner>);

impl std::fmt::Debug for Ticket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ticket")
            .field("id", &self.0.id)
            .field("phase", &self.phase())
            .finish()
    }
}

impl Ticket {
    /// A ticket in the recording phase, with an id no other ticket has
    /// (never 0, which the bookkeeping uses for "no recording").
    pub(crate) fn new() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        Self(Arc::new(TicketInner {
            id: NEXT.fetch_add(1, Ordering::Relaxed),
            phase: AtomicU8::new(Phase::Recording as u8),
            held: Mutex::new(Held::default()),
        }))
    }

    pub(crate) fn id(&self) -> u64 {
        self.0.id
    }

    pub(crate) fn phase(&self) -> Phase {
        Phase::from_u8(self.0.phase.load(Ordering::Acquire))
    }

    pub(crate) fn is_done(&self) -> bool {
        self.phase() == Phase::Done
    }

    /// Moves to `phase`. `Done` and `Abandoned` are final.
    pub(crate) fn set_phase(&self, phase: Phase) {
        let _ = self
            .0
            .phase
            .fetch_update(
                Ordering::AcqRel,
                Ordering::Acquire,
                |old| match Phase::from_u8(old) {
                    Phase::Done | Phase::Abandoned => None,
                    _ => Some(phase as u8),
                },
            );
    }

    /// The GPU finished: releases what the ticket holds.
    pub(crate) fn complete(&self) {
        self.set_phase(Phase::Done);
        let held = match self.0.held.lock() {
            Ok(mut h) => std::mem::take(&mut *h),
            Err(p) => std::mem::take(&mut *p.into_inner()),
        };
        drop(held);
    }

    /// Keeps `held` alive until [`Ticket::complete`] (at once, if it already
    /// happened).
    pub(crate) fn hold_until_complete(&self, held: Held) {
        if self.is_done() {
            return;
        }
        match self.0.held.lock() {
            Ok(mut h) => {
                h.samples.extend(held.samples);
                h.buffers.extend(held.buffers);
            }
            Err(p) => {
                let mut h = p.into_inner();
                h.samples.extend(held.samples);
                h.buffers.extend(held.buffers);
            }
        }
        // Completed while we were adding: release now.
        if self.is_done() {
            self.complete();
        }
    }
}
