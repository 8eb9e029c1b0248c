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

use crate::device::Active;
use crate::global;
use crate::queue::LabelStack;
pub use crate::queue::{Execution, Flight, QueueData, QueueState, Ring, RingAlloc};
use crate::retire;
use crate::sink::{self, stat};
use ash::vk;
use gpu_counters_record::protocol::{
    api_kind, execution_correlation, Api, Record, Thread, VkQueue,
};
use std::sync::{Arc, Mutex};

mod instrument;

use instrument::{abandon, fence, instrument};

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
        labels: Mutex::new(LabelStack::default()),
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
    let Some(d) = (unsafe { global::device_of(device) }) else {
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
    let Some(d) = (unsafe { global::device_of(device) }) else {
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
    let Some(d) = (unsafe { global::device_of(queue) }) else {
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
    let Some(d) = (unsafe { global::device_of(queue) }) else {
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
    let Some(d) = (unsafe { global::device_of(queue) }) else {
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
    let Some(d) = (unsafe { global::device_of(queue) }) else {
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
    let Some(d) = (unsafe { global::device_of(queue) }) else {
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
    let Some(d) = (unsafe { global::device_of(device) }) else {
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
    let Some(d) = (unsafe { global::device_of(device) }) else {
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
