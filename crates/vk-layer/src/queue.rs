//! What the layer keeps of a queue: its ring of results (a FIFO of
//! entries the layer's copies write and the reader reads), its submissions
//! in flight, and the debug labels open on it.

use crate::recorded::{NameRef, Recorded};
use ash::vk;
use gpu_counters_hal::bookkeeping::{QueryRead, SampleSet};
use gpu_counters_hal::CalibratedTime;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

/// A FIFO allocator of ring entries: allocations are freed in the order
/// they were made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingAlloc {
    cap: u32,
    head: u32,
    tail: u32,
    used: u32,
}

impl RingAlloc {
    /// A ring of `cap` entries.
    pub fn new(cap: u32) -> Self {
        RingAlloc {
            cap,
            head: 0,
            tail: 0,
            used: 0,
        }
    }

    /// `n` contiguous entries: (first, entries charged, padding included),
    /// or `None` where they do not fit now.
    pub fn alloc(&mut self, n: u32) -> Option<(u32, u32)> {
        if n == 0 {
            return Some((0, 0));
        }
        if n > self.cap {
            return None;
        }
        if self.used == 0 {
            self.head = 0;
            self.tail = 0;
        }
        if self.used == self.cap {
            return None;
        }
        if self.tail >= self.head {
            if self.cap - self.tail >= n {
                let at = self.tail;
                self.tail += n;
                self.used += n;
                return Some((at, n));
            }
            if self.head >= n {
                let pad = self.cap - self.tail;
                self.tail = n;
                self.used += pad + n;
                return Some((0, pad + n));
            }
            return None;
        }
        if self.head - self.tail >= n {
            let at = self.tail;
            self.tail += n;
            self.used += n;
            return Some((at, n));
        }
        None
    }

    /// Frees the oldest allocation, `charged` entries.
    pub fn free(&mut self, charged: u32) {
        self.used -= charged.min(self.used);
        self.head = (self.head + charged) % self.cap.max(1);
        if self.used == 0 {
            self.head = 0;
            self.tail = 0;
        }
    }

    /// Entries in use.
    pub fn used(&self) -> u32 {
        self.used
    }
}

/// The mapped results of a ring, as the core's resolve reads them.
pub(crate) struct Mapped {
    pub(crate) ptr: *const u64,
    pub(crate) words: usize,
}

// SAFETY: the mapping is read only, by whoever holds the queue's lock.
unsafe impl Send for Mapped {}
// SAFETY: as above.
unsafe impl Sync for Mapped {}

impl QueryRead for Mapped {
    fn values(&self) -> u32 {
        1
    }

    fn read(&self, first: u32, count: u32, out: &mut [u64]) -> gpu_counters_hal::Result<()> {
        let start = first as usize * 2;
        let n = count as usize * 2;
        if start + n > self.words || out.len() != n {
            return Err(gpu_counters_hal::Error::Internal(format!(
                "ring read of {count} timestamps at {first} past its {} words",
                self.words
            )));
        }
        // SAFETY: inside the mapping (checked); the GPU's writes to these
        // entries finished (their fence signaled) and were made visible to
        // the host by the copy's barrier; nothing writes them until freed.
        unsafe { std::ptr::copy_nonoverlapping(self.ptr.add(start), out.as_mut_ptr(), n) };
        Ok(())
    }
}

/// A queue's ring of results: timestamps (value and availability word,
/// resolved by the core's bookkeeping) then statistics.
pub struct Ring {
    pub(crate) buffer: vk::Buffer,
    pub(crate) memory: vk::DeviceMemory,
    pub(crate) mapped: Mapped,
    /// Timestamp entries.
    pub ts: RingAlloc,
    /// The timestamps' bookkeeping and resolve.
    pub set: SampleSet,
    /// Statistics entries.
    pub stats: RingAlloc,
    /// Words per statistics entry (values and availability).
    pub stat_words: u32,
    /// Where the statistics start, in words.
    pub(crate) stat_base: u32,
}

/// A command buffer's execution in flight.
pub struct Execution {
    /// Its id (per process).
    pub id: u64,
    /// What it recorded.
    pub rec: Arc<Recorded>,
    /// Its timestamps' ring entries: (first, charged).
    pub ts_slot: Option<(u32, u32)>,
    /// Its statistics' ring entries.
    pub stat_slot: Option<(u32, u32)>,
    /// Its frame.
    pub frame: u64,
    /// Why it is not read, when it is not (a `scope_status`).
    pub unread: Option<u8>,
}

/// One submission call's work of the layer, in flight.
pub struct Flight {
    /// Signaled after the layer's copies.
    pub fence: vk::Fence,
    /// The layer's command buffers it used.
    pub cbs: Vec<vk::CommandBuffer>,
    /// The executions.
    pub executions: Vec<Execution>,
    /// When it was submitted, `CLOCK_MONOTONIC` ns.
    pub cpu_ns: u64,
}

/// A queue's mutable state, under its lock.
#[derive(Default)]
pub struct QueueState {
    pub(crate) pool: vk::CommandPool,
    pub(crate) free_cbs: Vec<vk::CommandBuffer>,
    pub(crate) free_fences: Vec<vk::Fence>,
    /// The ring, once made.
    pub ring: Option<Ring>,
    /// Submissions in flight, oldest first.
    pub in_flight: VecDeque<Flight>,
    /// Making the ring or pool failed: the queue is not timed.
    pub(crate) failed: bool,
}

/// What the layer keeps of a queue.
pub struct QueueData {
    /// The layer's id of the queue.
    pub id: u32,
    /// The queue.
    pub handle: vk::Queue,
    /// Its family.
    pub family: u32,
    /// Its index in the family.
    pub index: u32,
    /// The family's valid timestamp bits (0: not timed).
    pub valid_bits: u32,
    /// Its work is timed.
    pub timed: bool,
    /// State under a lock (the application synchronizes its own calls on
    /// the queue; the reader thread takes this lock too).
    pub state: Mutex<QueueState>,
    /// The debug labels open on the queue, as its executions are read.
    pub labels: Mutex<LabelStack>,
}

impl QueueData {
    /// Destroys the layer's objects of this queue.
    ///
    /// # Safety
    ///
    /// No work of the layer's on it is in flight any more.
    pub unsafe fn destroy(&self, d: &ash::Device) {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: the caller's promise; the objects are the layer's.
        unsafe {
            for f in st.free_fences.drain(..) {
                d.destroy_fence(f, None);
            }
            for fl in st.in_flight.drain(..) {
                d.destroy_fence(fl.fence, None);
            }
            if st.pool != vk::CommandPool::null() {
                d.destroy_command_pool(st.pool, None);
                st.pool = vk::CommandPool::null();
            }
            st.free_cbs.clear();
            if let Some(r) = st.ring.take() {
                d.unmap_memory(r.memory);
                d.destroy_buffer(r.buffer, None);
                d.free_memory(r.memory, None);
            }
        }
    }

    /// Forgets what is in flight without a Vulkan call (at exit); returns
    /// how many executions that was.
    pub fn abandon(&self) -> u64 {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.in_flight
            .drain(..)
            .map(|f| f.executions.len() as u64)
            .sum()
    }
}

impl Ring {
    /// The statistics words of entry `i` (values then availability).
    pub fn stat_entry(&self, i: u32) -> &[u64] {
        let at = (self.stat_base + i * self.stat_words) as usize;
        let n = self.stat_words as usize;
        if at + n > self.mapped.words {
            return &[];
        }
        // SAFETY: inside the mapping (checked); read only after the copy
        // that wrote it finished and was made visible (see `Mapped::read`).
        unsafe { std::slice::from_raw_parts(self.mapped.ptr.add(at), n) }
    }

    /// Reads timestamps `first..first+count` through the core's resolve.
    pub fn reader(&self) -> &dyn QueryRead {
        &self.mapped
    }
}

/// The debug labels open on a queue: name, start (or why it has none),
/// and the execution and frame it began in.
#[derive(Debug, Default)]
pub struct LabelStack {
    pub(crate) open: Vec<(NameRef, Result<CalibratedTime, u8>, u64, u64)>,
}

/// `alloc`'s last allocation of `charged` entries undone.
pub(crate) fn undo(mut r: RingAlloc, charged: u32) -> RingAlloc {
    r.used -= charged;
    r.tail = (r.tail + r.cap - charged % r.cap.max(1)) % r.cap.max(1);
    if r.used == 0 {
        r.head = 0;
        r.tail = 0;
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ring hands out contiguous entries, wraps with padding, refuses
    /// what does not fit, and frees in order.
    #[test]
    fn ring_alloc_is_fifo_with_wrap() {
        let mut r = RingAlloc::new(10);
        assert_eq!(r.alloc(4), Some((0, 4)));
        assert_eq!(r.alloc(4), Some((4, 4)));
        assert_eq!(r.alloc(4), None, "2 left at the end, 0 at the front");
        r.free(4);
        // 2 at the end are padding; 4 at the front.
        assert_eq!(r.alloc(3), Some((0, 5)));
        assert_eq!(r.used(), 9);
        assert_eq!(r.alloc(2), None);
        r.free(4);
        assert_eq!(r.alloc(2), Some((3, 2)));
        r.free(5);
        r.free(2);
        assert_eq!(r.used(), 0);
        assert_eq!(r.alloc(10), Some((0, 10)));
        assert_eq!(r.alloc(1), None);
        assert_eq!(r.alloc(11), None);
        r.free(10);
        assert_eq!(r.alloc(0), Some((0, 0)));
        // Undoing the newest allocation restores the ring.
        let before = r;
        let (_, c) = r.alloc(7).unwrap();
        assert_eq!(undo(r, c), before);
    }
}
