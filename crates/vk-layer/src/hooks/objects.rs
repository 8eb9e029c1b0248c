//! The objects the layer follows: command pools and buffers (allocation,
//! begin, end, reset, free), render passes (for multiview), and
//! `vkDestroyDevice`.

use crate::device::{Active, CbState};
use crate::recorded::Recording;
use crate::{global, lifecycle};
use ash::vk;
use std::sync::{Arc, Mutex};

use super::lookup;

// Command pools and buffers.

pub(crate) unsafe extern "system" fn create_command_pool(
    device: vk::Device,
    info: *const vk::CommandPoolCreateInfo<'_>,
    alloc: *const vk::AllocationCallbacks<'_>,
    out: *mut vk::CommandPool,
) -> vk::Result {
    // SAFETY: the application's device.
    let Some(d) = (unsafe { global::device_of(device) }) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let Some(a) = d.active.as_ref() else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let Some(next) = a.next().create_command_pool else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    // SAFETY: the application's call, passed on.
    let r = unsafe { next(device, info, alloc, out) };
    if r == vk::Result::SUCCESS && !info.is_null() {
        // SAFETY: valid create info and the pool just made.
        let (pool, family) = unsafe { (*out, (*info).queue_family_index) };
        a.pools
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(pool, family);
    }
    r
}

/// Forgets every command buffer of `pool` (executions in flight keep what
/// they need).
fn forget_pool(a: &Active, pool: vk::CommandPool, reset_only: bool) {
    let mut cbs = a.cbs.write().unwrap_or_else(|e| e.into_inner());
    if reset_only {
        for s in cbs.values() {
            let mut s = s.lock().unwrap_or_else(|e| e.into_inner());
            if s.pool == pool {
                s.rec = None;
                s.done = None;
                s.seen = 0;
            }
        }
    } else {
        cbs.retain(|_, s| s.lock().unwrap_or_else(|e| e.into_inner()).pool != pool);
    }
}

pub(crate) unsafe extern "system" fn destroy_command_pool(
    device: vk::Device,
    pool: vk::CommandPool,
    alloc: *const vk::AllocationCallbacks<'_>,
) {
    // SAFETY: the application's device.
    let Some(d) = (unsafe { global::device_of(device) }) else {
        return;
    };
    let Some(a) = d.active.as_ref() else { return };
    let Some(next) = a.next().destroy_command_pool else {
        return;
    };
    if pool != vk::CommandPool::null() {
        forget_pool(a, pool, false);
        a.pools
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&pool);
    }
    // SAFETY: the application's call, passed on.
    unsafe { next(device, pool, alloc) };
}

pub(crate) unsafe extern "system" fn reset_command_pool(
    device: vk::Device,
    pool: vk::CommandPool,
    flags: vk::CommandPoolResetFlags,
) -> vk::Result {
    // SAFETY: the application's device.
    let Some(d) = (unsafe { global::device_of(device) }) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let Some(a) = d.active.as_ref() else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let Some(next) = a.next().reset_command_pool else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    forget_pool(a, pool, true);
    // SAFETY: the application's call, passed on.
    unsafe { next(device, pool, flags) }
}

pub(crate) unsafe extern "system" fn allocate_command_buffers(
    device: vk::Device,
    info: *const vk::CommandBufferAllocateInfo<'_>,
    out: *mut vk::CommandBuffer,
) -> vk::Result {
    // SAFETY: the application's device.
    let Some(d) = (unsafe { global::device_of(device) }) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let Some(a) = d.active.as_ref() else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let Some(next) = a.next().allocate_command_buffers else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    // SAFETY: the application's call, passed on.
    let r = unsafe { next(device, info, out) };
    if r == vk::Result::SUCCESS && !info.is_null() {
        // SAFETY: a valid allocate info; `out` holds `count` handles now.
        let (pool, level, list) = unsafe {
            let i = &*info;
            (
                i.command_pool,
                i.level,
                std::slice::from_raw_parts(out, i.command_buffer_count as usize),
            )
        };
        let family = a
            .pools
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&pool)
            .copied()
            .unwrap_or(u32::MAX);
        let mut cbs = a.cbs.write().unwrap_or_else(|e| e.into_inner());
        for &cb in list {
            cbs.insert(
                cb,
                Arc::new(Mutex::new(CbState {
                    pool,
                    family,
                    secondary: level == vk::CommandBufferLevel::SECONDARY,
                    rec: None,
                    done: None,
                    seen: 0,
                })),
            );
        }
    }
    r
}

pub(crate) unsafe extern "system" fn free_command_buffers(
    device: vk::Device,
    pool: vk::CommandPool,
    n: u32,
    list: *const vk::CommandBuffer,
) {
    // SAFETY: the application's device.
    let Some(d) = (unsafe { global::device_of(device) }) else {
        return;
    };
    let Some(a) = d.active.as_ref() else { return };
    let Some(next) = a.next().free_command_buffers else {
        return;
    };
    if !list.is_null() {
        // SAFETY: the application's array of `n` handles (some may be null).
        let list = unsafe { std::slice::from_raw_parts(list, n as usize) };
        let mut cbs = a.cbs.write().unwrap_or_else(|e| e.into_inner());
        for cb in list {
            cbs.remove(cb);
        }
    }
    // SAFETY: the application's call, passed on.
    unsafe { next(device, pool, n, list) };
}

pub(crate) unsafe extern "system" fn begin_command_buffer(
    cb: vk::CommandBuffer,
    info: *const vk::CommandBufferBeginInfo<'_>,
) -> vk::Result {
    // SAFETY: the application's command buffer.
    let Some((d, state)) = (unsafe { lookup(cb) }) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let Some(a) = d.active.as_ref() else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let Some(next) = a.next().begin_command_buffer else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let Some(state) = state else {
        // SAFETY: the application's call, passed on.
        return unsafe { next(cb, info) };
    };
    let mut st = state.lock().unwrap_or_else(|e| e.into_inner());
    // A secondary recorded while the layer takes statistics inherits them
    // (a pass's query may be active where it runs).
    let mut modified;
    let mut inheritance;
    let mut info_ptr = info;
    if st.secondary && !info.is_null() {
        if let Some((flags, _)) = a.statistics {
            // SAFETY: the application's valid begin info.
            unsafe {
                if !(*info).p_inheritance_info.is_null() {
                    inheritance = *(*info).p_inheritance_info;
                    inheritance.pipeline_statistics |= flags;
                    modified = *info;
                    modified.p_inheritance_info = &inheritance;
                    info_ptr = &modified;
                }
            }
        }
    }
    // SAFETY: the application's call (with the statistics it inherits),
    // passed on.
    let r = unsafe { next(cb, info_ptr) };
    if r == vk::Result::SUCCESS {
        let family = st.family;
        let timed = !st.secondary && a.family_timed(family);
        let graphics = a
            .families
            .get(family as usize)
            .is_some_and(|f| f.flags.contains(vk::QueueFlags::GRAPHICS));
        // Beginning resets the command buffer: its last recording goes
        // (executions in flight keep their own reference).
        st.done = None;
        st.rec = Some(Recording::new(a, cb, timed, graphics));
    }
    r
}

pub(crate) unsafe extern "system" fn end_command_buffer(cb: vk::CommandBuffer) -> vk::Result {
    // SAFETY: the application's command buffer.
    let Some((d, state)) = (unsafe { lookup(cb) }) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let Some(a) = d.active.as_ref() else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let Some(next) = a.next().end_command_buffer else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    if let Some(state) = &state {
        let mut st = state.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(r) = st.rec.take() {
            let seen = r.seen();
            let data = r.finish(a, cb);
            st.seen = seen;
            st.done = Some(Arc::new(data));
        }
    }
    // SAFETY: the application's call, passed on.
    unsafe { next(cb) }
}

pub(crate) unsafe extern "system" fn reset_command_buffer(
    cb: vk::CommandBuffer,
    flags: vk::CommandBufferResetFlags,
) -> vk::Result {
    // SAFETY: the application's command buffer.
    let Some((d, state)) = (unsafe { lookup(cb) }) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let Some(a) = d.active.as_ref() else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let Some(next) = a.next().reset_command_buffer else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    if let Some(state) = &state {
        let mut st = state.lock().unwrap_or_else(|e| e.into_inner());
        st.rec = None;
        st.done = None;
        st.seen = 0;
    }
    // SAFETY: the application's call, passed on.
    unsafe { next(cb, flags) }
}

// Render passes (for multiview).

fn note_render_pass(a: &Active, rp: vk::RenderPass, multiview: bool) {
    a.multiview
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(rp, multiview);
}

pub(crate) unsafe extern "system" fn create_render_pass(
    device: vk::Device,
    info: *const vk::RenderPassCreateInfo<'_>,
    alloc: *const vk::AllocationCallbacks<'_>,
    out: *mut vk::RenderPass,
) -> vk::Result {
    // SAFETY: the application's device.
    let Some(d) = (unsafe { global::device_of(device) }) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let Some(a) = d.active.as_ref() else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let Some(next) = a.next().create_render_pass else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    // SAFETY: the application's call, passed on.
    let r = unsafe { next(device, info, alloc, out) };
    if r == vk::Result::SUCCESS && !info.is_null() {
        // SAFETY: a valid create info whose chain may hold multiview info.
        let mv = unsafe {
            let mut p = (*info).p_next as *const vk::BaseInStructure<'_>;
            let mut found = false;
            while !p.is_null() {
                if (*p).s_type == vk::StructureType::RENDER_PASS_MULTIVIEW_CREATE_INFO {
                    let m = &*(p as *const vk::RenderPassMultiviewCreateInfo<'_>);
                    found = m.subpass_count > 0
                        && std::slice::from_raw_parts(m.p_view_masks, m.subpass_count as usize)
                            .iter()
                            .any(|&v| v != 0);
                }
                p = (*p).p_next;
            }
            found
        };
        // SAFETY: the render pass just made.
        note_render_pass(a, unsafe { *out }, mv);
    }
    r
}

fn rp2_multiview(info: *const vk::RenderPassCreateInfo2<'_>) -> bool {
    // SAFETY: the application's valid create info.
    unsafe {
        let i = &*info;
        i.subpass_count > 0
            && std::slice::from_raw_parts(i.p_subpasses, i.subpass_count as usize)
                .iter()
                .any(|s| s.view_mask != 0)
    }
}

macro_rules! create_rp2_hook {
    ($name:ident, $field:ident) => {
        pub(crate) unsafe extern "system" fn $name(
            device: vk::Device,
            info: *const vk::RenderPassCreateInfo2<'_>,
            alloc: *const vk::AllocationCallbacks<'_>,
            out: *mut vk::RenderPass,
        ) -> vk::Result {
            // SAFETY: the application's device.
            let Some(d) = (unsafe { global::device_of(device) }) else {
                return vk::Result::ERROR_INITIALIZATION_FAILED;
            };
            let Some(a) = d.active.as_ref() else {
                return vk::Result::ERROR_INITIALIZATION_FAILED;
            };
            let Some(next) = a.next().$field else {
                return vk::Result::ERROR_INITIALIZATION_FAILED;
            };
            // SAFETY: the application's call, passed on.
            let r = unsafe { next(device, info, alloc, out) };
            if r == vk::Result::SUCCESS && !info.is_null() {
                // SAFETY: the render pass just made.
                note_render_pass(a, unsafe { *out }, rp2_multiview(info));
            }
            r
        }
    };
}
create_rp2_hook!(create_render_pass2, create_render_pass2);
create_rp2_hook!(create_render_pass2_khr, create_render_pass2_khr);

pub(crate) unsafe extern "system" fn destroy_render_pass(
    device: vk::Device,
    rp: vk::RenderPass,
    alloc: *const vk::AllocationCallbacks<'_>,
) {
    // SAFETY: the application's device.
    let Some(d) = (unsafe { global::device_of(device) }) else {
        return;
    };
    let Some(a) = d.active.as_ref() else { return };
    let Some(next) = a.next().destroy_render_pass else {
        return;
    };
    a.multiview
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(&rp);
    // SAFETY: the application's call, passed on.
    unsafe { next(device, rp, alloc) };
}

pub(crate) unsafe extern "system" fn destroy_device(
    device: vk::Device,
    alloc: *const vk::AllocationCallbacks<'_>,
) {
    if device == vk::Device::null() {
        return;
    }
    // SAFETY: the application's device.
    let k = unsafe { global::key(device) };
    let Some(d) = global::remove_device(k) else {
        return;
    };
    if let Some(a) = d.active.as_ref() {
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            // SAFETY: the application is destroying the device.
            unsafe { lifecycle::destroy(a) }
        }));
        if let Some(next) = a.next().destroy_device {
            // SAFETY: the application's call, passed on.
            unsafe { next(device, alloc) };
        }
    }
}
