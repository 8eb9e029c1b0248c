//! What the layer adds to a submission: the queue's ring and command pool
//! (made on first use), and the layer's command buffers that reset an
//! execution's queries before it and copy its results into the ring after
//! it, with the fence that says when the copies are done.

use crate::device::Active;
use crate::queue::{undo, Mapped};
use crate::queue::{Execution, QueueData, QueueState, Ring, RingAlloc};
use crate::recorded::Recorded;
use crate::retire;
use crate::sink::{self, stat};
use ash::vk;
use gpu_counters_hal::bookkeeping::{SampleSet, NONE};
use gpu_counters_hal::{CommonCounterSet, StorageMode};
use std::sync::Arc;

/// A memory type with all of `want` allowed by `bits`.
pub(super) fn memory_type(a: &Active, bits: u32, want: vk::MemoryPropertyFlags) -> Option<u32> {
    let m = &a.memory;
    (0..m.memory_type_count)
        .find(|&i| bits & (1 << i) != 0 && m.memory_types[i as usize].property_flags.contains(want))
}

/// Makes the queue's command pool and ring.
pub(super) fn prepare(a: &Active, q: &QueueData, st: &mut QueueState) -> bool {
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

/// A command buffer of the layer's, begun.
pub(super) fn layer_cb(
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
pub(super) struct Instrumented {
    /// Each batch's command buffers, with the layer's.
    pub(super) lists: Vec<Vec<vk::CommandBuffer>>,
    /// The copies, submitted after the application's batches.
    pub(super) copy: Option<vk::CommandBuffer>,
    pub(super) cbs: Vec<vk::CommandBuffer>,
    pub(super) executions: Vec<Execution>,
}

/// Records the layer's command buffers for `batches` (each a list of the
/// application's command buffers); `None` where nothing is timed.
pub(super) fn instrument(
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

/// Before an execution whose queries were not reset on the host: their
/// reset.
pub(super) fn reset_execution(a: &Active, cb: vk::CommandBuffer, e: &Execution) {
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
pub(super) fn abandon(st: &mut QueueState, ins: Instrumented) {
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
pub(super) fn fence(a: &Active, st: &mut QueueState) -> Option<vk::Fence> {
    if let Some(f) = st.free_fences.pop() {
        return Some(f);
    }
    // SAFETY: a valid create info; destroyed with the queue's data.
    unsafe { a.ash.create_fence(&vk::FenceCreateInfo::default(), None) }.ok()
}
