//! Queues: `vkGetDeviceQueue*`, `vkQueueSubmit`/`vkQueueSubmit2`,
//! `vkQueuePresentKHR` and the waits.
//!
//! A timed command buffer carries its own start and end timestamps (see
//! [`crate::recording`]); its queries are reset on the host once an
//! execution's results are read, so the next execution needs nothing
//! before it. Where they are not (another execution of the same recording
//! is in flight, or the device has no host query reset), a command buffer
//! of the layer's resets them on the GPU right before it, in the same
//! batch. Then a second `vkQueueSubmit` (the layer's, after the
//! application's) copies every execution's results into a slot of the
//! queue's ring (`vkCmdCopyQueryPoolResults` with availability, waiting
//! for them) and signals a fence of the layer's: the application's
//! semaphores and fence wait for none of the layer's copies. When the
//! fence has signaled, a reader ([`crate::retire`]) reads the slot;
//! nothing ever waits on the GPU for the application. The same recording
//! submitted again later in one call has its results copied right after
//! it, before its queries are reset again (query commands on one queue run
//! in submission order):
//!
//! ```text
//! A [copy(A) + reset(A)] A   then, in the layer's submission: copy(A)
//! ```
//!
//! An execution whose results the ring cannot hold is not read (counted),
//! but its queries are still reset, so the application's command buffer
//! stays valid.

use crate::device::{self, Active};
use crate::recording::Recorded;
use crate::retire;
use crate::sink::{self, stat};
use ash::vk;
use gpu_counters_hal::bookkeeping::{QueryRead, SampleSet, NONE};
use gpu_counters_hal::{CommonCounterSet, StorageMode};
use gpu_counters_record::protocol::{
    api_kind, execution_correlation, Api, Record, Thread, VkQueue,
};
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
struct Mapped {
    ptr: *const u64,
    words: usize,
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
    buffer: vk::Buffer,
    memory: vk::DeviceMemory,
    mapped: Mapped,
    /// Timestamp entries.
    pub ts: RingAlloc,
    /// The timestamps' bookkeeping and resolve.
    pub set: SampleSet,
    /// Statistics entries.
    pub stats: RingAlloc,
    /// Words per statistics entry (values and availability).
    pub stat_words: u32,
    /// Where the statistics start, in words.
    stat_base: u32,
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
    pool: vk::CommandPool,
    pub(crate) free_cbs: Vec<vk::CommandBuffer>,
    pub(crate) free_fences: Vec<vk::Fence>,
    /// The ring, once made.
    pub ring: Option<Ring>,
    /// Submissions in flight, oldest first.
    pub in_flight: VecDeque<Flight>,
    /// Making the ring or pool failed: the queue is not timed.
    failed: bool,
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
    pub labels: Mutex<retire::LabelStack>,
}

impl QueueData {
    /// Destroys the layer's objects of this queue.
    ///
    /// # Safety
    ///
    /// No work of the layer's on it is in flight any more.
    pub unsafe fn destroy(&self, a: &Active) {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let d = &a.ash;
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

/// The queue's data, registered on first sight.
fn queue_of(a: &Active, queue: vk::Queue) -> Option<Arc<QueueData>> {
    a.queues
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(&queue)
        .cloned()
}

fn register_queue(a: &Active, queue: vk::Queue, family: u32, index: u32) {
    let mut qs = a.queues.lock().unwrap_or_else(|e| e.into_inner());
    if qs.contains_key(&queue) {
        return;
    }
    let f = a.families.get(family as usize).copied();
    let valid_bits = f.map_or(0, |f| f.valid_bits);
    let q = QueueData {
        id: a.next_queue_id(),
        handle: queue,
        family,
        index,
        valid_bits,
        timed: a.family_timed(family),
        state: Mutex::new(QueueState::default()),
        labels: Mutex::new(retire::LabelStack::default()),
    };
    if let Some(s) = sink::get() {
        s.push(&Record::VkQueue(VkQueue {
            id: q.id,
            device: a.id,
            family,
            index,
            flags: f.map_or(0, |f| f.flags.as_raw()),
            valid_bits,
        }));
    }
    qs.insert(queue, Arc::new(q));
}

pub(crate) unsafe extern "system" fn get_device_queue(
    device: vk::Device,
    family: u32,
    index: u32,
    out: *mut vk::Queue,
) {
    // SAFETY: the application's device.
    let Some(d) = (unsafe { device::of(device) }) else {
        return;
    };
    let Some(a) = d.active.as_ref() else { return };
    let Some(next) = a.next().get_device_queue else {
        return;
    };
    // SAFETY: the application's call, passed on.
    unsafe { next(device, family, index, out) };
    // SAFETY: `out` holds the queue now.
    let q = unsafe { *out };
    if q != vk::Queue::null() {
        register_queue(a, q, family, index);
    }
}

pub(crate) unsafe extern "system" fn get_device_queue2(
    device: vk::Device,
    info: *const vk::DeviceQueueInfo2<'_>,
    out: *mut vk::Queue,
) {
    // SAFETY: the application's device.
    let Some(d) = (unsafe { device::of(device) }) else {
        return;
    };
    let Some(a) = d.active.as_ref() else { return };
    let Some(next) = a.next().get_device_queue2 else {
        return;
    };
    // SAFETY: the application's call, passed on.
    unsafe { next(device, info, out) };
    // SAFETY: `out` holds the queue now; `info` is valid.
    let (q, family, index) = unsafe { (*out, (*info).queue_family_index, (*info).queue_index) };
    if q != vk::Queue::null() {
        register_queue(a, q, family, index);
    }
}

/// A memory type with all of `want` allowed by `bits`.
fn memory_type(a: &Active, bits: u32, want: vk::MemoryPropertyFlags) -> Option<u32> {
    let m = &a.memory;
    (0..m.memory_type_count)
        .find(|&i| bits & (1 << i) != 0 && m.memory_types[i as usize].property_flags.contains(want))
}

/// Makes the queue's command pool and ring.
fn prepare(a: &Active, q: &QueueData, st: &mut QueueState) -> bool {
    if st.ring.is_some() {
        return true;
    }
    if st.failed {
        return false;
    }
    let made = (|| -> Result<Ring, vk::Result> {
        let d = &a.ash;
        let info = vk::CommandPoolCreateInfo::default()
            .flags(
                vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER
                    | vk::CommandPoolCreateFlags::TRANSIENT,
            )
            .queue_family_index(q.family);
        // SAFETY: a valid create info; destroyed with the queue's data.
        st.pool = unsafe { d.create_command_pool(&info, None) }?;
        let ring_bytes = sink::get().map_or(4 << 20, |s| s.config.ring_bytes);
        let ts_cap = (ring_bytes * 3 / 4 / 16).min(1 << 22) as u32;
        let stat_words = a.statistics.map_or(0, |(_, n)| n as u32 + 1);
        let stat_cap = if stat_words == 0 {
            0
        } else {
            (ring_bytes / 4 / 8 / u64::from(stat_words)) as u32
        };
        let words = u64::from(ts_cap) * 2 + u64::from(stat_cap) * u64::from(stat_words);
        let binfo = vk::BufferCreateInfo::default()
            .size(words * 8)
            .usage(vk::BufferUsageFlags::TRANSFER_DST)
            .sharing_mode(vk::SharingMode::EXCLUSIVE);
        // SAFETY: a valid create info; destroyed with the queue's data.
        let buffer = unsafe { d.create_buffer(&binfo, None) }?;
        // SAFETY: the buffer just made.
        let req = unsafe { d.get_buffer_memory_requirements(buffer) };
        let host = vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT;
        let Some(ty) = memory_type(
            a,
            req.memory_type_bits,
            host | vk::MemoryPropertyFlags::HOST_CACHED,
        )
        .or_else(|| memory_type(a, req.memory_type_bits, host)) else {
            // SAFETY: the buffer just made, unused.
            unsafe { d.destroy_buffer(buffer, None) };
            return Err(vk::Result::ERROR_OUT_OF_DEVICE_MEMORY);
        };
        let ainfo = vk::MemoryAllocateInfo::default()
            .allocation_size(req.size)
            .memory_type_index(ty);
        // SAFETY: a valid allocate info; freed with the queue's data.
        let memory = match unsafe { d.allocate_memory(&ainfo, None) } {
            Ok(m) => m,
            Err(e) => {
                // SAFETY: the buffer just made, unused.
                unsafe { d.destroy_buffer(buffer, None) };
                return Err(e);
            }
        };
        // SAFETY: memory of a host-visible type, bound once, mapped whole.
        let ptr = unsafe {
            d.bind_buffer_memory(buffer, memory, 0)
                .and_then(|()| d.map_memory(memory, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty()))
        };
        let ptr = match ptr {
            Ok(p) => p as *const u64,
            Err(e) => {
                // SAFETY: both just made, unused.
                unsafe {
                    d.destroy_buffer(buffer, None);
                    d.free_memory(memory, None);
                }
                return Err(e);
            }
        };
        let set = SampleSet::new(
            format!("queue {}.{} results", q.family, q.index),
            CommonCounterSet::Timestamp,
            StorageMode::Shared,
            ts_cap,
            [gpu_counters_hal::bookkeeping::ABSENT; 8],
            crate::retire::mask(q.valid_bits),
            "sample",
        )
        .map_err(|_| vk::Result::ERROR_OUT_OF_HOST_MEMORY)?;
        Ok(Ring {
            buffer,
            memory,
            mapped: Mapped {
                ptr,
                words: words as usize,
            },
            ts: RingAlloc::new(ts_cap),
            set,
            stats: RingAlloc::new(stat_cap),
            stat_words,
            stat_base: ts_cap * 2,
        })
    })();
    match made {
        Ok(r) => {
            st.ring = Some(r);
            true
        }
        Err(e) => {
            st.failed = true;
            if let Some(s) = sink::get() {
                s.notice(
                    gpu_counters_record::protocol::severity::WARNING,
                    &format!(
                        "queue {}.{}: the layer's results ring could not be made ({e:?}): its work is not timed",
                        q.family, q.index
                    ),
                );
            }
            false
        }
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

/// A command buffer of the layer's, begun.
fn layer_cb(
    a: &Active,
    st: &mut QueueState,
    used: &mut Vec<vk::CommandBuffer>,
) -> Option<vk::CommandBuffer> {
    let d = &a.ash;
    let cb = match st.free_cbs.pop() {
        Some(cb) => cb,
        None => {
            let info = vk::CommandBufferAllocateInfo::default()
                .command_pool(st.pool)
                .level(vk::CommandBufferLevel::PRIMARY)
                .command_buffer_count(1);
            // SAFETY: the queue's pool, used under its lock.
            let cb = unsafe { d.allocate_command_buffers(&info) }.ok()?.pop()?;
            if let Some(set) = a.set_data {
                use vk::Handle;
                let object = cb.as_raw() as usize as *mut std::ffi::c_void;
                // SAFETY: a dispatchable object the layer made: the loader's
                // callback gives it the device's dispatch.
                if unsafe { set(d.handle(), object) } != vk::Result::SUCCESS {
                    return None;
                }
            }
            cb
        }
    };
    let begin =
        vk::CommandBufferBeginInfo::default().flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT);
    // SAFETY: a command buffer of the queue's pool (reset-able), not in
    // flight (its flight was read, or it is new).
    if unsafe { d.begin_command_buffer(cb, &begin) }.is_err() {
        st.free_cbs.push(cb);
        return None;
    }
    used.push(cb);
    Some(cb)
}

/// What the layer adds to one submission call.
struct Instrumented {
    /// Each batch's command buffers, with the layer's.
    lists: Vec<Vec<vk::CommandBuffer>>,
    /// The copies, submitted after the application's batches.
    copy: Option<vk::CommandBuffer>,
    cbs: Vec<vk::CommandBuffer>,
    executions: Vec<Execution>,
}

/// Records the layer's command buffers for `batches` (each a list of the
/// application's command buffers); `None` where nothing is timed.
fn instrument(
    a: &Active,
    q: &QueueData,
    st: &mut QueueState,
    batches: &[Vec<vk::CommandBuffer>],
) -> Option<Instrumented> {
    let sink = sink::get()?;
    // Each timed command buffer's recording, in order.
    let mut recs: Vec<Vec<Option<Arc<Recorded>>>> = Vec::with_capacity(batches.len());
    let mut any = false;
    for b in batches {
        let v: Vec<Option<Arc<Recorded>>> = b
            .iter()
            .map(|&cb| {
                let s = a.cb(cb)?;
                let s = s.lock().unwrap_or_else(|e| e.into_inner());
                s.done.clone().filter(|r| r.timed())
            })
            .collect();
        any |= v.iter().any(Option::is_some);
        recs.push(v);
    }
    if !any || !prepare(a, q, st) {
        return None;
    }
    let flat: Vec<&Arc<Recorded>> = recs.iter().flatten().flatten().collect();
    // Each execution: whether its queries need a reset on the GPU first
    // (not reset on the host since its last execution), and whether its
    // results are copied right after it (its recording runs again later
    // in this call, after another reset).
    let mut plans: Vec<(bool, bool)> = Vec::with_capacity(flat.len());
    let mut executions: Vec<Execution> = Vec::with_capacity(flat.len());
    let ring = st.ring.as_mut().expect("prepared above");
    for (i, rec) in flat.iter().enumerate() {
        let later = flat[i + 1..].iter().any(|r| Arc::ptr_eq(r, rec));
        let (gpu_reset, concurrent) = {
            let mut r = rec.reset.lock().unwrap_or_else(|e| e.into_inner());
            let concurrent = r.in_flight > 0 && r.queue != q.id;
            let gpu_reset = !(r.in_flight == 0 && r.host_reset);
            r.host_reset = false;
            r.in_flight += 1;
            r.queue = q.id;
            (gpu_reset, concurrent)
        };
        let mut e = Execution {
            id: retire::next_execution(),
            rec: Arc::clone(rec),
            ts_slot: None,
            stat_slot: None,
            frame: 0,
            unread: None,
        };
        if concurrent {
            sink.counts.add(stat::CONCURRENT, 1);
            e.unread = Some(gpu_counters_record::protocol::scope_status::NOT_READ);
        } else {
            match ring.ts.alloc(rec.ts_used) {
                Some(ts) => match ring.stats.alloc(rec.stat_used) {
                    Some(stats) => {
                        e.ts_slot = Some(ts);
                        e.stat_slot = Some(stats);
                    }
                    None => {
                        ring.ts = undo(ring.ts, ts.1);
                        e.unread = Some(gpu_counters_record::protocol::scope_status::NOT_READ);
                        sink.counts.add(stat::RING_FULL, 1);
                    }
                },
                None => {
                    e.unread = Some(gpu_counters_record::protocol::scope_status::NOT_READ);
                    sink.counts.add(stat::RING_FULL, 1);
                }
            }
        }
        if let Some((off, _)) = e.ts_slot {
            if let Ok(mut slots) = ring.set.lock() {
                for i in 0..rec.ts_used {
                    slots.mark_recorded(off + i, NONE, false, 1, 0);
                }
            }
        }
        plans.push((gpu_reset, later));
        executions.push(e);
    }
    // The layer's command buffers: one before an execution that needs a
    // reset (it also takes the copies of the execution before, where
    // those go right after it), one after a batch's last execution whose
    // copies go right after it, and the copies' command buffer.
    let mut slots_needed = 1usize;
    {
        let mut k = 0usize;
        for rb in &recs {
            let mut prev: Option<usize> = None;
            for r in rb.iter().flatten() {
                let _ = r;
                if prev.is_some_and(|p| plans[p].1) || plans[k].0 {
                    slots_needed += 1;
                }
                prev = Some(k);
                k += 1;
            }
            if prev.is_some_and(|p| plans[p].1) {
                slots_needed += 1;
            }
        }
    }
    let mut used = Vec::with_capacity(slots_needed);
    let mut cbs = Vec::with_capacity(slots_needed);
    for _ in 0..slots_needed {
        match layer_cb(a, st, &mut used) {
            Some(cb) => cbs.push(cb),
            None => {
                // Give back what was begun; nothing is timed this time.
                for cb in used {
                    // SAFETY: begun just now, not submitted.
                    unsafe {
                        let _ = a.ash.end_command_buffer(cb);
                    }
                    st.free_cbs.push(cb);
                }
                let ins = Instrumented {
                    lists: Vec::new(),
                    copy: None,
                    cbs: Vec::new(),
                    executions,
                };
                sink.counts.add(stat::QUERY_CAP, flat.len() as u64);
                abandon(st, ins);
                return None;
            }
        }
    }
    let ring = st.ring.as_mut().expect("prepared above");
    let mut cbs = cbs.into_iter();
    let d = &a.ash;
    let copy_cb = cbs.next().expect("counted above");
    let mut copied_any = false;
    // The copies of execution `e` into its slots.
    let copy = |cb: vk::CommandBuffer, e: &Execution, ring: &Ring| {
        let (Some((ts_off, _)), Some((st_off, _))) = (e.ts_slot, e.stat_slot) else {
            return;
        };
        let flags = vk::QueryResultFlags::TYPE_64
            | vk::QueryResultFlags::WITH_AVAILABILITY
            | vk::QueryResultFlags::WAIT;
        let (mut ts_i, mut st_i) = (0u32, 0u32);
        for (pool, first, count, stats) in e.rec.ranges() {
            let (offset, stride) = if stats {
                let o = u64::from(ring.stat_base + (st_off + st_i) * ring.stat_words) * 8;
                st_i += count;
                (o, u64::from(ring.stat_words) * 8)
            } else {
                let o = u64::from(ts_off + ts_i) * 16;
                ts_i += count;
                (o, 16)
            };
            // SAFETY: a recording command buffer of the layer's; the
            // queries were written before in submission order on this
            // queue; the destination lies in the ring's slot (allocated for
            // these counts).
            unsafe {
                d.cmd_copy_query_pool_results(
                    cb,
                    pool,
                    first,
                    count,
                    ring.buffer,
                    offset,
                    stride,
                    flags,
                )
            };
        }
    };
    let mut lists = Vec::with_capacity(batches.len());
    let mut k = 0usize;
    for (b, rb) in batches.iter().zip(&recs) {
        if rb.iter().all(Option::is_none) {
            lists.push(b.clone());
            continue;
        }
        let mut list = Vec::with_capacity(b.len() + 2);
        let mut prev: Option<usize> = None;
        for (&cb, r) in b.iter().zip(rb) {
            if r.is_none() {
                list.push(cb);
                continue;
            }
            let copy_prev = prev.filter(|&p| plans[p].1);
            if copy_prev.is_some() || plans[k].0 {
                let between = cbs.next().expect("counted above");
                if let Some(p) = copy_prev {
                    copy(between, &executions[p], ring);
                    copied_any = true;
                }
                if plans[k].0 {
                    reset_execution(a, between, &executions[k]);
                }
                // SAFETY: the layer's command buffer, begun above.
                let _ = unsafe { d.end_command_buffer(between) };
                list.push(between);
            }
            list.push(cb);
            prev = Some(k);
            k += 1;
        }
        if let Some(p) = prev.filter(|&p| plans[p].1) {
            let last = cbs.next().expect("counted above");
            copy(last, &executions[p], ring);
            copied_any = true;
            // SAFETY: the layer's command buffer, begun above.
            let _ = unsafe { d.end_command_buffer(last) };
            list.push(last);
        }
        lists.push(list);
    }
    for (e, p) in executions.iter().zip(&plans) {
        if !p.1 && e.ts_slot.is_some() {
            copy(copy_cb, e, ring);
            copied_any = true;
        }
    }
    if copied_any {
        let barrier = [vk::MemoryBarrier::default()
            .src_access_mask(vk::AccessFlags::TRANSFER_WRITE)
            .dst_access_mask(vk::AccessFlags::HOST_READ)];
        // SAFETY: the layer's recording command buffer.
        unsafe {
            d.cmd_pipeline_barrier(
                copy_cb,
                vk::PipelineStageFlags::TRANSFER,
                vk::PipelineStageFlags::HOST,
                vk::DependencyFlags::empty(),
                &barrier,
                &[],
                &[],
            )
        };
    }
    // SAFETY: the layer's command buffer, begun above.
    let _ = unsafe { d.end_command_buffer(copy_cb) };
    Some(Instrumented {
        lists,
        copy: copied_any.then_some(copy_cb),
        cbs: used,
        executions,
    })
}

/// `alloc`'s last allocation of `charged` entries undone.
fn undo(mut r: RingAlloc, charged: u32) -> RingAlloc {
    r.used -= charged;
    r.tail = (r.tail + r.cap - charged % r.cap.max(1)) % r.cap.max(1);
    if r.used == 0 {
        r.head = 0;
        r.tail = 0;
    }
    r
}

/// Before an execution whose queries were not reset on the host: their
/// reset.
fn reset_execution(a: &Active, cb: vk::CommandBuffer, e: &Execution) {
    // SAFETY: the layer's recording command buffer, outside a render pass;
    // the queries are the recording's, not used by work in flight on
    // another queue (checked), and ordered with it on this one.
    unsafe {
        for (pool, first, count, _) in e.rec.ranges() {
            a.ash.cmd_reset_query_pool(cb, pool, first, count);
        }
    }
}

/// Undoes what `instrument` counted for executions that were not submitted.
fn abandon(st: &mut QueueState, ins: Instrumented) {
    if let Some(ring) = st.ring.as_mut() {
        for e in ins.executions.iter().rev() {
            if let Some((_, c)) = e.stat_slot {
                ring.stats = undo(ring.stats, c);
            }
            if let Some((off, c)) = e.ts_slot {
                if let Ok(mut slots) = ring.set.lock() {
                    ring.set.host_reset_table(
                        &mut slots,
                        off,
                        e.rec.ts_used,
                        gpu_counters_hal::bookkeeping::SlotState::Fresh,
                    );
                }
                ring.ts = undo(ring.ts, c);
            }
        }
    }
    for e in &ins.executions {
        let mut r = e.rec.reset.lock().unwrap_or_else(|e| e.into_inner());
        r.in_flight = r.in_flight.saturating_sub(1);
    }
    st.free_cbs.extend(ins.cbs);
}

/// A fence of the layer's, unsignaled.
fn fence(a: &Active, st: &mut QueueState) -> Option<vk::Fence> {
    if let Some(f) = st.free_fences.pop() {
        return Some(f);
    }
    // SAFETY: a valid create info; destroyed with the queue's data.
    unsafe { a.ash.create_fence(&vk::FenceCreateInfo::default(), None) }.ok()
}

thread_local! {
    static THREAD_SENT: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Sends the calling thread's name once, and an `Api` slice of a queue call.
fn api(name: &str, enter: u64, exit: u64, result: vk::Result, execution: Option<u64>) {
    let Some(s) = sink::get() else { return };
    let tid = sink::gettid();
    if !THREAD_SENT.with(|t| t.replace(true)) {
        let comm = std::fs::read(format!("/proc/self/task/{tid}/comm")).unwrap_or_default();
        let comm = String::from_utf8_lossy(comm.strip_suffix(b"\n").unwrap_or(&comm)).into_owned();
        if let Some(id) = s.intern(&comm) {
            s.push(&Record::Thread(Thread { tid, name: id }));
        }
    }
    let Some(name) = s.intern(name) else { return };
    s.push(&Record::Api(Api {
        tid,
        domain: 0,
        kind: if execution.is_some() {
            api_kind::LAUNCH
        } else {
            api_kind::OTHER
        },
        cbid: 0,
        correlation: execution.map_or(0, execution_correlation),
        enter_ns: enter,
        exit_ns: exit,
        result: result.as_raw() as u32,
        range_id: 0,
        name,
    }));
}

/// The submission call shared by `vkQueueSubmit` and `vkQueueSubmit2`:
/// `batches` are the application's command buffers per batch, `submit`
/// makes the call with the given lists (or the application's own where
/// `None`).
fn submit_common(
    a: &Active,
    queue: vk::Queue,
    batches: Vec<Vec<vk::CommandBuffer>>,
    instrumentable: bool,
    call: &str,
    submit: impl FnOnce(Option<&[Vec<vk::CommandBuffer>]>) -> vk::Result,
) -> vk::Result {
    let enter = sink::now_ns();
    let Some(s) = sink::get() else {
        return submit(None);
    };
    let q = queue_of(a, queue);
    let total: usize = batches.iter().map(Vec::len).sum();
    let Some(q) = q.filter(|q| {
        q.timed && instrumentable && !a.lost.load(std::sync::atomic::Ordering::Relaxed)
    }) else {
        let lost = a.lost.load(std::sync::atomic::Ordering::Relaxed);
        let stat = if lost {
            stat::DEVICE_LOST
        } else if a.clocks.is_none() {
            stat::NO_CALIBRATION
        } else {
            stat::UNTIMED_QUEUE
        };
        s.counts.add(stat, total as u64);
        let frame = retire::note_submit(a, total as u32, total as u32, enter);
        let r = submit(None);
        retire::after_submit(a, frame, sink::now_ns());
        api(call, enter, sink::now_ns(), r, None);
        return r;
    };
    let mut st = q.state.lock().unwrap_or_else(|e| e.into_inner());
    let ins = instrument(a, &q, &mut st, &batches);
    let timed = ins.as_ref().map_or(0, |i| i.executions.len());
    let frame = retire::note_submit(a, total as u32, (total - timed) as u32, enter);
    let Some(mut ins) = ins else {
        drop(st);
        let r = submit(None);
        retire::after_submit(a, frame, sink::now_ns());
        api(call, enter, sink::now_ns(), r, None);
        return r;
    };
    for e in &mut ins.executions {
        e.frame = frame;
    }
    let first = ins.executions.first().map(|e| e.id);
    let r = submit(Some(&ins.lists));
    if r != vk::Result::SUCCESS {
        if r == vk::Result::ERROR_DEVICE_LOST {
            retire::device_lost(a, ins.executions.len() as u64);
        }
        retire::executions_dropped(a, frame, &ins.executions);
        abandon(&mut st, ins);
        drop(st);
        retire::after_submit(a, frame, sink::now_ns());
        api(call, enter, sink::now_ns(), r, None);
        return r;
    }
    let ours = match fence(a, &mut st) {
        Some(f) => {
            let lists = ins.copy.map(|c| [c]);
            let infos = lists
                .as_ref()
                .map(|c| [vk::SubmitInfo::default().command_buffers(c)]);
            let batch: &[vk::SubmitInfo<'_>] = infos.as_ref().map_or(&[], |i| &i[..]);
            // SAFETY: the queue is the application's, inside its own call
            // on it (externally synchronized); the batch holds the layer's
            // recorded command buffer.
            let r2 = unsafe { a.ash.queue_submit(queue, batch, f) };
            match r2 {
                Ok(()) => Some(f),
                Err(e) => {
                    st.free_fences.push(f);
                    if e == vk::Result::ERROR_DEVICE_LOST {
                        retire::device_lost(a, 0);
                    }
                    None
                }
            }
        }
        None => None,
    };
    match ours {
        Some(fence) => {
            let cbs = std::mem::take(&mut ins.cbs);
            st.in_flight.push_back(Flight {
                fence,
                cbs,
                executions: std::mem::take(&mut ins.executions),
                cpu_ns: enter,
            });
        }
        None => {
            // The executions ran, but their end cannot be known: their
            // slots and recordings stay held; counted as not read.
            s.counts.add(stat::UNRETIRED, ins.executions.len() as u64);
            retire::executions_dropped(a, frame, &ins.executions);
            std::mem::forget(ins.executions);
        }
    }
    drop(st);
    let exit = sink::now_ns();
    retire::after_submit(a, frame, exit);
    retire::wake();
    api(call, enter, exit, r, first);
    r
}

pub(crate) unsafe extern "system" fn queue_submit(
    queue: vk::Queue,
    count: u32,
    submits: *const vk::SubmitInfo<'_>,
    fence: vk::Fence,
) -> vk::Result {
    // SAFETY: the application's queue.
    let Some(d) = (unsafe { device::of(queue) }) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let Some(a) = d.active.as_ref() else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let Some(next) = a.next().queue_submit else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let infos: &[vk::SubmitInfo<'_>] = if submits.is_null() || count == 0 {
        &[]
    } else {
        // SAFETY: the application's array of `count` submit infos.
        unsafe { std::slice::from_raw_parts(submits, count as usize) }
    };
    let batches: Vec<Vec<vk::CommandBuffer>> = infos
        .iter()
        .map(|i| {
            if i.p_command_buffers.is_null() {
                Vec::new()
            } else {
                // SAFETY: a valid submit info's command buffers.
                unsafe {
                    std::slice::from_raw_parts(i.p_command_buffers, i.command_buffer_count as usize)
                }
                .to_vec()
            }
        })
        .collect();
    // A device group's masks or a protected batch cannot take the layer's
    // command buffers.
    let instrumentable = infos.iter().all(|i| {
        // SAFETY: a valid submit info's chain.
        unsafe {
            !has_struct(i.p_next, vk::StructureType::DEVICE_GROUP_SUBMIT_INFO)
                && !has_struct(i.p_next, vk::StructureType::PROTECTED_SUBMIT_INFO)
        }
    });
    submit_common(
        a,
        queue,
        batches,
        instrumentable,
        "vkQueueSubmit",
        |lists| match lists {
            // SAFETY: the application's call, passed on.
            None => unsafe { next(queue, count, submits, fence) },
            Some(lists) => {
                let modified: Vec<vk::SubmitInfo<'_>> = infos
                    .iter()
                    .zip(lists)
                    .map(|(i, l)| {
                        let mut m = *i;
                        m.command_buffer_count = l.len() as u32;
                        m.p_command_buffers = l.as_ptr();
                        m
                    })
                    .collect();
                // SAFETY: the application's batches with the layer's command
                // buffers added; every pointer lives through the call.
                unsafe { next(queue, modified.len() as u32, modified.as_ptr(), fence) }
            }
        },
    )
}

/// Whether the chain from `p_next` holds a structure of `s_type`.
///
/// # Safety
///
/// `p_next` is null or a valid chain.
unsafe fn has_struct(p_next: *const std::ffi::c_void, s_type: vk::StructureType) -> bool {
    let mut p = p_next as *const vk::BaseInStructure<'_>;
    // SAFETY: the caller's promise.
    unsafe {
        while !p.is_null() {
            if (*p).s_type == s_type {
                return true;
            }
            p = (*p).p_next;
        }
    }
    false
}

fn submit2(
    a: &Active,
    next: vk::PFN_vkQueueSubmit2,
    queue: vk::Queue,
    count: u32,
    submits: *const vk::SubmitInfo2<'_>,
    fence: vk::Fence,
    call: &str,
) -> vk::Result {
    let infos: &[vk::SubmitInfo2<'_>] = if submits.is_null() || count == 0 {
        &[]
    } else {
        // SAFETY: the application's array of `count` submit infos.
        unsafe { std::slice::from_raw_parts(submits, count as usize) }
    };
    let entries: Vec<&[vk::CommandBufferSubmitInfo<'_>]> = infos
        .iter()
        .map(|i| {
            if i.p_command_buffer_infos.is_null() {
                &[][..]
            } else {
                // SAFETY: a valid submit info's entries.
                unsafe {
                    std::slice::from_raw_parts(
                        i.p_command_buffer_infos,
                        i.command_buffer_info_count as usize,
                    )
                }
            }
        })
        .collect();
    let batches: Vec<Vec<vk::CommandBuffer>> = entries
        .iter()
        .map(|e| e.iter().map(|c| c.command_buffer).collect())
        .collect();
    let instrumentable = infos
        .iter()
        .all(|i| !i.flags.contains(vk::SubmitFlags::PROTECTED));
    submit_common(
        a,
        queue,
        batches,
        instrumentable,
        call,
        |lists| match lists {
            // SAFETY: the application's call, passed on.
            None => unsafe { next(queue, count, submits, fence) },
            Some(lists) => {
                // Each of the layer's command buffers takes the device mask of
                // the application's entry it follows (or precedes).
                let mut new_entries: Vec<Vec<vk::CommandBufferSubmitInfo<'_>>> =
                    Vec::with_capacity(lists.len());
                for (e, l) in entries.iter().zip(lists) {
                    let mut out = Vec::with_capacity(l.len());
                    let mut mask = e.first().map_or(0, |c| c.device_mask);
                    for &cb in l {
                        match e.iter().find(|c| c.command_buffer == cb) {
                            Some(c) => {
                                mask = c.device_mask;
                                out.push(*c);
                            }
                            None => out.push(
                                vk::CommandBufferSubmitInfo::default()
                                    .command_buffer(cb)
                                    .device_mask(mask),
                            ),
                        }
                    }
                    new_entries.push(out);
                }
                let modified: Vec<vk::SubmitInfo2<'_>> = infos
                    .iter()
                    .zip(&new_entries)
                    .map(|(i, e)| {
                        let mut m = *i;
                        m.command_buffer_info_count = e.len() as u32;
                        m.p_command_buffer_infos = e.as_ptr();
                        m
                    })
                    .collect();
                // SAFETY: the application's batches with the layer's command
                // buffers added; every pointer lives through the call.
                unsafe { next(queue, modified.len() as u32, modified.as_ptr(), fence) }
            }
        },
    )
}

pub(crate) unsafe extern "system" fn queue_submit2(
    queue: vk::Queue,
    count: u32,
    submits: *const vk::SubmitInfo2<'_>,
    fence: vk::Fence,
) -> vk::Result {
    // SAFETY: the application's queue.
    let Some(d) = (unsafe { device::of(queue) }) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let Some(a) = d.active.as_ref() else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let Some(next) = a.next().queue_submit2 else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    submit2(a, next, queue, count, submits, fence, "vkQueueSubmit2")
}

pub(crate) unsafe extern "system" fn queue_submit2_khr(
    queue: vk::Queue,
    count: u32,
    submits: *const vk::SubmitInfo2<'_>,
    fence: vk::Fence,
) -> vk::Result {
    // SAFETY: the application's queue.
    let Some(d) = (unsafe { device::of(queue) }) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let Some(a) = d.active.as_ref() else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let Some(next) = a.next().queue_submit2_khr else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    submit2(a, next, queue, count, submits, fence, "vkQueueSubmit2KHR")
}

pub(crate) unsafe extern "system" fn queue_present(
    queue: vk::Queue,
    info: *const vk::PresentInfoKHR<'_>,
) -> vk::Result {
    // SAFETY: the application's queue.
    let Some(d) = (unsafe { device::of(queue) }) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let Some(a) = d.active.as_ref() else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let Some(next) = a.next().queue_present else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let enter = sink::now_ns();
    // SAFETY: the application's call, passed on.
    let r = unsafe { next(queue, info) };
    let exit = sink::now_ns();
    if sink::get().is_some() {
        retire::note_present(a, enter, exit);
        api("vkQueuePresentKHR", enter, exit, r, None);
    }
    r
}

pub(crate) unsafe extern "system" fn queue_wait_idle(queue: vk::Queue) -> vk::Result {
    // SAFETY: the application's queue.
    let Some(d) = (unsafe { device::of(queue) }) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let Some(a) = d.active.as_ref() else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let Some(next) = a.next().queue_wait_idle else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    // SAFETY: the application's call, passed on.
    let r = unsafe { next(queue) };
    if r == vk::Result::SUCCESS {
        // Everything submitted to the queue, the layer's copies included,
        // is done: read it now.
        retire::retire_device(a, false);
    } else if r == vk::Result::ERROR_DEVICE_LOST {
        retire::device_lost(a, 0);
    }
    r
}

pub(crate) unsafe extern "system" fn device_wait_idle(device: vk::Device) -> vk::Result {
    // SAFETY: the application's device.
    let Some(d) = (unsafe { device::of(device) }) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let Some(a) = d.active.as_ref() else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let Some(next) = a.next().device_wait_idle else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    // SAFETY: the application's call, passed on.
    let r = unsafe { next(device) };
    if r == vk::Result::SUCCESS {
        retire::retire_device(a, false);
    } else if r == vk::Result::ERROR_DEVICE_LOST {
        retire::device_lost(a, 0);
    }
    r
}

pub(crate) unsafe extern "system" fn wait_for_fences(
    device: vk::Device,
    n: u32,
    fences: *const vk::Fence,
    all: vk::Bool32,
    timeout: u64,
) -> vk::Result {
    // SAFETY: the application's device.
    let Some(d) = (unsafe { device::of(device) }) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let Some(a) = d.active.as_ref() else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let Some(next) = a.next().wait_for_fences else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    // SAFETY: the application's call, passed on.
    let r = unsafe { next(device, n, fences, all, timeout) };
    match r {
        vk::Result::SUCCESS => retire::wake(),
        vk::Result::ERROR_DEVICE_LOST => retire::device_lost(a, 0),
        _ => {}
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
