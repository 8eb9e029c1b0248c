//! What the sample bookkeeping knows of one recording's life (a command
//! buffer, a command encoder, a stream's range of work), and the GPU objects
//! it keeps alive until the GPU is done with them.
//!
//! A backend gives every recording a [`Ticket`]. Samples remember the ticket
//! of the recording that last wrote them, so that the bookkeeping can tell a
//! sample whose recording is still open, was submitted, finished, or was
//! dropped without ever being submitted.

use std::any::Any;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

/// Where a recording is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Phase {
    /// Commands are being recorded; nothing of it has reached the GPU.
    Recording = 0,
    /// Submitted by gpu-counters; the backend learns when it is done.
    Submitted = 1,
    /// A caller's recording whose wrapper was dropped: the caller submits
    /// it, and says when it finished.
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

/// Objects a recording keeps alive, of any backend's types.
pub type Held = Vec<Box<dyn Any + Send + Sync>>;

struct TicketInner {
    id: u64,
    phase: AtomicU8,
    /// For a caller's recording whose wrapper is gone but whose completion
    /// handle was taken: what it references, until signaled.
    held: Mutex<Held>,
}

/// One recording's life, shared by the bookkeeping of every sample it wrote.
/// Cloning shares it.
#[derive(Clone)]
pub struct Ticket(Arc<TicketInner>);

impl std::fmt::Debug for Ticket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ticket")
            .field("id", &self.0.id)
            .field("phase", &self.phase())
            .finish()
    }
}

impl Default for Ticket {
    fn default() -> Self {
        Self::new()
    }
}

impl Ticket {
    /// A ticket in the recording phase, with an id no other ticket has
    /// (never 0, which the bookkeeping uses for "no recording").
    pub fn new() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        Self(Arc::new(TicketInner {
            id: NEXT.fetch_add(1, Ordering::Relaxed),
            phase: AtomicU8::new(Phase::Recording as u8),
            held: Mutex::new(Held::new()),
        }))
    }

    /// The ticket's id, unique in the process.
    pub fn id(&self) -> u64 {
        self.0.id
    }

    /// Where the recording is now.
    pub fn phase(&self) -> Phase {
        Phase::from_u8(self.0.phase.load(Ordering::Acquire))
    }

    /// Whether the GPU finished it.
    pub fn is_done(&self) -> bool {
        self.phase() == Phase::Done
    }

    /// Moves to `phase`. `Done` and `Abandoned` are final.
    pub fn set_phase(&self, phase: Phase) {
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
    pub fn complete(&self) {
        self.set_phase(Phase::Done);
        let held = match self.0.held.lock() {
            Ok(mut h) => std::mem::take(&mut *h),
            Err(p) => std::mem::take(&mut *p.into_inner()),
        };
        drop(held);
    }

    /// Keeps `held` alive until [`Ticket::complete`] (at once, if it already
    /// happened).
    pub fn hold_until_complete(&self, held: Held) {
        if self.is_done() {
            return;
        }
        match self.0.held.lock() {
            Ok(mut h) => h.extend(held),
            Err(p) => p.into_inner().extend(held),
        }
        // Completed while we were adding: release now.
        if self.is_done() {
            self.complete();
        }
    }
}
