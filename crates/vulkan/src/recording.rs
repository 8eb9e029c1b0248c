//! What a recording references and writes: the [`Tracker`] every command
//! buffer records under (its ticket, the objects it holds until the GPU is
//! done, its block claims), and the checks and inline resets that come
//! before a write into a sample buffer or heap.

use crate::buffer::BufferShared;
use crate::samples::{Samples, Slots};
use ash::vk;
use gpu_counters_hal::bookkeeping::SampleTable;
use gpu_counters_hal::bookkeeping::{LocalClaims, Phase, Ticket, WRITTEN_CONCURRENTLY};
use gpu_counters_hal::{Error, Result};
use std::sync::Arc;

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

    /// The same objects, type-erased for hal's [`Ticket`].
    pub(crate) fn erased(self) -> gpu_counters_hal::bookkeeping::Held {
        let mut out: gpu_counters_hal::bookkeeping::Held = Vec::new();
        out.extend(
            self.samples
                .into_iter()
                .map(|s| Box::new(s) as Box<dyn std::any::Any + Send + Sync>),
        );
        out.extend(
            self.buffers
                .into_iter()
                .map(|b| Box::new(b) as Box<dyn std::any::Any + Send + Sync>),
        );
        out
    }
}

/// What a recording references and the ticket it records under: the command
/// buffer, then its submission, hold every sample buffer, heap and resolve
/// destination it recorded into until the GPU has finished with them.
pub(crate) struct Tracker {
    pub(crate) ticket: Ticket,
    pub(crate) held: Held,
    /// The samples held last, so that a run of samples into one buffer costs
    /// one comparison each.
    pub(crate) last: usize,
    /// Blocks of timestamp indices this recording writes without the lock.
    pub(crate) claims: LocalClaims,
    /// An index another recording wrote too while this one had it claimed:
    /// this recording must not be submitted.
    pub(crate) conflict: Option<Error>,
}

impl Tracker {
    pub(crate) fn new() -> Self {
        Self {
            ticket: Ticket::new(),
            held: Held::default(),
            last: 0,
            claims: LocalClaims::default(),
            conflict: None,
        }
    }

    /// Ends this recording's claim on `samples` (locked into `slots`), if
    /// any, noting a conflict it reports.
    #[inline]
    pub(crate) fn release_claim(&mut self, samples: &Samples, slots: &mut SampleTable) {
        if self.claims.is_empty() {
            return;
        }
        if let Some(index) = self.claims.release(samples, slots, &self.ticket) {
            self.conflict
                .get_or_insert_with(|| samples.reuse(index, WRITTEN_CONCURRENTLY));
        }
    }

    /// Ends every claim of this recording, so that the tables know all it
    /// wrote; fails if another recording wrote one of its indices too.
    pub(crate) fn release_claims(&mut self) -> Result<()> {
        if !self.claims.is_empty() {
            for i in 0..self.held.samples.len() {
                let samples = self.held.samples[i].clone();
                if !self.claims.holds(&samples) {
                    continue;
                }
                let mut slots = samples.lock()?;
                self.release_claim(&samples, &mut slots);
            }
            // Claims on sets this recording no longer holds cannot exist
            // (a claim is taken on a held set), but never keep one.
            self.claims.clear();
        }
        match &self.conflict {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    /// Holds `samples` until the GPU is done; returns whether this recording
    /// had not held them before.
    #[inline]
    pub(crate) fn hold_samples(&mut self, samples: &Arc<Samples>) -> bool {
        let p = Arc::as_ptr(samples) as usize;
        if p == self.last {
            return false;
        }
        self.last = p;
        if self
            .held
            .samples
            .iter()
            .any(|h| Arc::as_ptr(h) as usize == p)
        {
            return false;
        }
        self.held.samples.push(samples.clone());
        true
    }

    /// Where `samples` is in the sets this recording holds until the GPU is
    /// done, if it holds them.
    #[inline]
    pub(crate) fn held_position(&self, samples: &Arc<Samples>) -> Option<usize> {
        let p = Arc::as_ptr(samples);
        self.held.samples.iter().position(|h| Arc::as_ptr(h) == p)
    }

    /// Holds a buffer until the GPU is done.
    pub(crate) fn hold_buffer(&mut self, buffer: Arc<BufferShared>) {
        if !self.held.buffers.iter().any(|b| Arc::ptr_eq(b, &buffer)) {
            self.held.buffers.push(buffer);
        }
    }

    /// The recording will never run: forgets what it recorded in every
    /// sample table it touched and lets go of what it held.
    pub(crate) fn abandon(&mut self) {
        // The tables learn every write first, so that they forget them all.
        let _ = self.release_claims();
        self.ticket.set_phase(Phase::Abandoned);
        let id = self.ticket.id();
        for samples in &self.held.samples {
            if let Ok(mut slots) = samples.lock() {
                slots.abandon(id);
            }
        }
        self.held = Held::default();
        self.last = 0;
    }

    pub(crate) fn take_held(&mut self) -> Held {
        self.last = 0;
        std::mem::take(&mut self.held)
    }
}

impl Samples {
    /// Checks that `index` may be written now by the recording `tracker`
    /// tracks (see [`SampleSet::check_write`](gpu_counters_hal::bookkeeping::SampleSet::check_write)), and makes the recording hold
    /// these samples; returns whether the index needs an inline reset first.
    #[inline]
    pub(crate) fn prepare_write(
        self: &Arc<Self>,
        slots: &mut Slots,
        index: u32,
        in_render_pass: bool,
        tracker: &mut Tracker,
    ) -> Result<bool> {
        // A locked write of this recording into these samples: its claim
        // (whose clean indices this write may change) ends first.
        tracker.release_claim(self, slots);
        let dirty = self
            .core
            .check_write(slots, index, in_render_pass, tracker.ticket.id())?;
        if tracker.hold_samples(self) {
            slots.register(&tracker.ticket);
        }
        Ok(dirty)
    }

    /// Records the inline reset of `index` (outside any render pass). Until
    /// the GPU finished the command buffer of `tracker`, the index resolves
    /// as not ready (its old value may still be visible).
    pub(crate) fn record_reset(
        &self,
        slots: &mut Slots,
        cmd: vk::CommandBuffer,
        tracker: &Tracker,
        index: u32,
    ) {
        slots.note_reset(index, &tracker.ticket);
        let d = self.device.raw();
        // SAFETY: index < count (checked by prepare_write); the command buffer
        // is recording outside a render pass (callers guarantee), and the
        // query is not active (prepare_write refuses open ones).
        unsafe {
            d.cmd_reset_query_pool(cmd, self.main.raw, index, 1);
            if let Some(o) = &self.occlusion {
                d.cmd_reset_query_pool(cmd, o.raw, index, 1);
            }
        }
    }
}
