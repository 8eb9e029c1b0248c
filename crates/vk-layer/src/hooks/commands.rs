//! The recorded commands the layer wraps: dispatches, draws, copies,
//! render passes, dynamic rendering, debug labels and
//! `vkCmdExecuteCommands`.

use crate::device::{Active, CbState};
use crate::recorded::{NameRef, Op};
use crate::sink;
use ash::vk;
use gpu_counters_record::protocol::scope_kind;
use std::ffi::{c_void, CStr};
use std::sync::{Arc, Mutex};

use super::{lookup, with_rec};

/// Calls `$next` of the active device of `$cb` with the rest of the
/// arguments, wrapped by `$before` and `$after` on the open recording.
macro_rules! wrap {
    ($name:ident, $field:ident, ($($arg:ident: $ty:ty),*), $before:expr, $after:expr) => {
        pub(crate) unsafe extern "system" fn $name(cb: vk::CommandBuffer, $($arg: $ty),*) {
            // SAFETY: the application's command buffer.
            let Some((d, state)) = (unsafe { lookup(cb) }) else { return };
            let Some(a) = d.active.as_ref() else { return };
            let Some(next) = a.next().$field else { return };
            #[allow(clippy::redundant_closure_call)]
            ($before)(a, &state, cb, $($arg),*);
            // SAFETY: the application's call, passed on.
            unsafe { next(cb, $($arg),*) };
            #[allow(clippy::redundant_closure_call)]
            ($after)(a, &state, cb);
        }
    };
}

/// Wraps a transfer command (a run of copies outside render passes).
macro_rules! copy_cmd {
    ($name:ident, $field:ident, ($($arg:ident: $ty:ty),*)) => {
        wrap!($name, $field, ($($arg: $ty),*),
            |a: &Active, s: &Option<Arc<Mutex<CbState>>>, cb, $(_: $ty),*| with_rec(s, |r| r.before(a, cb, Op::Copy)),
            |_: &Active, _: &Option<Arc<Mutex<CbState>>>, _| {});
    };
}

/// Wraps a dispatch or draw (`$op`): a run of dispatches, and each at the
/// finer level.
macro_rules! work_cmd {
    ($name:ident, $field:ident, $op:expr, ($($arg:ident: $ty:ty),*)) => {
        wrap!($name, $field, ($($arg: $ty),*),
            |a: &Active, s: &Option<Arc<Mutex<CbState>>>, cb, $(_: $ty),*| with_rec(s, |r| r.before(a, cb, $op)),
            |a: &Active, s: &Option<Arc<Mutex<CbState>>>, cb| with_rec(s, |r| r.after(a, cb)));
    };
}

work_cmd!(cmd_dispatch, cmd_dispatch, Op::Dispatch("vkCmdDispatch"), (x: u32, y: u32, z: u32));
work_cmd!(cmd_dispatch_indirect, cmd_dispatch_indirect, Op::Dispatch("vkCmdDispatchIndirect"), (buffer: vk::Buffer, offset: vk::DeviceSize));
work_cmd!(cmd_dispatch_base, cmd_dispatch_base, Op::Dispatch("vkCmdDispatchBase"), (bx: u32, by: u32, bz: u32, x: u32, y: u32, z: u32));
work_cmd!(cmd_dispatch_base_khr, cmd_dispatch_base_khr, Op::Dispatch("vkCmdDispatchBase"), (bx: u32, by: u32, bz: u32, x: u32, y: u32, z: u32));
work_cmd!(cmd_draw, cmd_draw, Op::Draw("vkCmdDraw"), (v: u32, i: u32, fv: u32, fi: u32));
work_cmd!(cmd_draw_indexed, cmd_draw_indexed, Op::Draw("vkCmdDrawIndexed"), (ic: u32, inst: u32, fi: u32, vo: i32, finst: u32));
work_cmd!(cmd_draw_indirect, cmd_draw_indirect, Op::Draw("vkCmdDrawIndirect"), (b: vk::Buffer, o: vk::DeviceSize, n: u32, s: u32));
work_cmd!(cmd_draw_indexed_indirect, cmd_draw_indexed_indirect, Op::Draw("vkCmdDrawIndexedIndirect"), (b: vk::Buffer, o: vk::DeviceSize, n: u32, s: u32));
work_cmd!(cmd_draw_indirect_count, cmd_draw_indirect_count, Op::Draw("vkCmdDrawIndirectCount"), (b: vk::Buffer, o: vk::DeviceSize, cb2: vk::Buffer, co: vk::DeviceSize, n: u32, s: u32));
work_cmd!(cmd_draw_indirect_count_khr, cmd_draw_indirect_count_khr, Op::Draw("vkCmdDrawIndirectCount"), (b: vk::Buffer, o: vk::DeviceSize, cb2: vk::Buffer, co: vk::DeviceSize, n: u32, s: u32));
work_cmd!(cmd_draw_indexed_indirect_count, cmd_draw_indexed_indirect_count, Op::Draw("vkCmdDrawIndexedIndirectCount"), (b: vk::Buffer, o: vk::DeviceSize, cb2: vk::Buffer, co: vk::DeviceSize, n: u32, s: u32));
work_cmd!(cmd_draw_indexed_indirect_count_khr, cmd_draw_indexed_indirect_count_khr, Op::Draw("vkCmdDrawIndexedIndirectCount"), (b: vk::Buffer, o: vk::DeviceSize, cb2: vk::Buffer, co: vk::DeviceSize, n: u32, s: u32));

copy_cmd!(cmd_copy_buffer, cmd_copy_buffer, (src: vk::Buffer, dst: vk::Buffer, n: u32, r: *const vk::BufferCopy));
copy_cmd!(cmd_copy_image, cmd_copy_image, (src: vk::Image, sl: vk::ImageLayout, dst: vk::Image, dl: vk::ImageLayout, n: u32, r: *const vk::ImageCopy));
copy_cmd!(cmd_blit_image, cmd_blit_image, (src: vk::Image, sl: vk::ImageLayout, dst: vk::Image, dl: vk::ImageLayout, n: u32, r: *const vk::ImageBlit, f: vk::Filter));
copy_cmd!(cmd_copy_buffer_to_image, cmd_copy_buffer_to_image, (src: vk::Buffer, dst: vk::Image, dl: vk::ImageLayout, n: u32, r: *const vk::BufferImageCopy));
copy_cmd!(cmd_copy_image_to_buffer, cmd_copy_image_to_buffer, (src: vk::Image, sl: vk::ImageLayout, dst: vk::Buffer, n: u32, r: *const vk::BufferImageCopy));
copy_cmd!(cmd_update_buffer, cmd_update_buffer, (dst: vk::Buffer, o: vk::DeviceSize, size: vk::DeviceSize, data: *const c_void));
copy_cmd!(cmd_fill_buffer, cmd_fill_buffer, (dst: vk::Buffer, o: vk::DeviceSize, size: vk::DeviceSize, data: u32));
copy_cmd!(cmd_clear_color_image, cmd_clear_color_image, (img: vk::Image, l: vk::ImageLayout, c: *const vk::ClearColorValue, n: u32, r: *const vk::ImageSubresourceRange));
copy_cmd!(cmd_clear_depth_stencil_image, cmd_clear_depth_stencil_image, (img: vk::Image, l: vk::ImageLayout, c: *const vk::ClearDepthStencilValue, n: u32, r: *const vk::ImageSubresourceRange));
copy_cmd!(cmd_resolve_image, cmd_resolve_image, (src: vk::Image, sl: vk::ImageLayout, dst: vk::Image, dl: vk::ImageLayout, n: u32, r: *const vk::ImageResolve));
copy_cmd!(cmd_copy_buffer2, cmd_copy_buffer2, (i: *const vk::CopyBufferInfo2<'_>));
copy_cmd!(cmd_copy_buffer2_khr, cmd_copy_buffer2_khr, (i: *const vk::CopyBufferInfo2<'_>));
copy_cmd!(cmd_copy_image2, cmd_copy_image2, (i: *const vk::CopyImageInfo2<'_>));
copy_cmd!(cmd_copy_image2_khr, cmd_copy_image2_khr, (i: *const vk::CopyImageInfo2<'_>));
copy_cmd!(cmd_copy_buffer_to_image2, cmd_copy_buffer_to_image2, (i: *const vk::CopyBufferToImageInfo2<'_>));
copy_cmd!(cmd_copy_buffer_to_image2_khr, cmd_copy_buffer_to_image2_khr, (i: *const vk::CopyBufferToImageInfo2<'_>));
copy_cmd!(cmd_copy_image_to_buffer2, cmd_copy_image_to_buffer2, (i: *const vk::CopyImageToBufferInfo2<'_>));
copy_cmd!(cmd_copy_image_to_buffer2_khr, cmd_copy_image_to_buffer2_khr, (i: *const vk::CopyImageToBufferInfo2<'_>));
copy_cmd!(cmd_blit_image2, cmd_blit_image2, (i: *const vk::BlitImageInfo2<'_>));
copy_cmd!(cmd_blit_image2_khr, cmd_blit_image2_khr, (i: *const vk::BlitImageInfo2<'_>));
copy_cmd!(cmd_resolve_image2, cmd_resolve_image2, (i: *const vk::ResolveImageInfo2<'_>));
copy_cmd!(cmd_resolve_image2_khr, cmd_resolve_image2_khr, (i: *const vk::ResolveImageInfo2<'_>));

/// Whether render pass `rp` is multiview.
fn multiview(a: &Active, rp: vk::RenderPass) -> bool {
    a.multiview
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(&rp)
        .copied()
        .unwrap_or(false)
}

fn begin_rp(
    a: &Active,
    state: &Option<Arc<Mutex<CbState>>>,
    cb: vk::CommandBuffer,
    info: *const vk::RenderPassBeginInfo<'_>,
    contents: vk::SubpassContents,
) {
    if info.is_null() {
        return;
    }
    // SAFETY: the application's valid begin info.
    let rp = unsafe { (*info).render_pass };
    let inside = contents == vk::SubpassContents::INLINE && !multiview(a, rp);
    with_rec(state, |r| {
        r.begin_pass(a, cb, scope_kind::RENDER_PASS, inside, false)
    });
}

pub(crate) unsafe extern "system" fn cmd_begin_render_pass(
    cb: vk::CommandBuffer,
    info: *const vk::RenderPassBeginInfo<'_>,
    contents: vk::SubpassContents,
) {
    // SAFETY: the application's command buffer.
    let Some((d, state)) = (unsafe { lookup(cb) }) else {
        return;
    };
    let Some(a) = d.active.as_ref() else { return };
    let Some(next) = a.next().cmd_begin_render_pass else {
        return;
    };
    begin_rp(a, &state, cb, info, contents);
    // SAFETY: the application's call, passed on.
    unsafe { next(cb, info, contents) };
}

fn begin_rp2(
    a: &Active,
    state: &Option<Arc<Mutex<CbState>>>,
    cb: vk::CommandBuffer,
    info: *const vk::RenderPassBeginInfo<'_>,
    sp: *const vk::SubpassBeginInfo<'_>,
) {
    let contents = if sp.is_null() {
        vk::SubpassContents::INLINE
    } else {
        // SAFETY: the application's valid subpass begin info.
        unsafe { (*sp).contents }
    };
    begin_rp(a, state, cb, info, contents);
}

macro_rules! begin_rp2_hook {
    ($name:ident, $field:ident) => {
        pub(crate) unsafe extern "system" fn $name(
            cb: vk::CommandBuffer,
            info: *const vk::RenderPassBeginInfo<'_>,
            sp: *const vk::SubpassBeginInfo<'_>,
        ) {
            // SAFETY: the application's command buffer.
            let Some((d, state)) = (unsafe { lookup(cb) }) else {
                return;
            };
            let Some(a) = d.active.as_ref() else { return };
            let Some(next) = a.next().$field else { return };
            begin_rp2(a, &state, cb, info, sp);
            // SAFETY: the application's call, passed on.
            unsafe { next(cb, info, sp) };
        }
    };
}
begin_rp2_hook!(cmd_begin_render_pass2, cmd_begin_render_pass2);
begin_rp2_hook!(cmd_begin_render_pass2_khr, cmd_begin_render_pass2_khr);

wrap!(cmd_next_subpass, cmd_next_subpass, (contents: vk::SubpassContents),
    |_: &Active, s: &Option<Arc<Mutex<CbState>>>, _, contents: vk::SubpassContents| with_rec(s, |r| r.next_subpass(contents == vk::SubpassContents::INLINE)),
    |_: &Active, _: &Option<Arc<Mutex<CbState>>>, _| {});

fn next_subpass2(s: &Option<Arc<Mutex<CbState>>>, sp: *const vk::SubpassBeginInfo<'_>) {
    // SAFETY: the application's valid subpass begin info (or null).
    let inline = sp.is_null() || unsafe { (*sp).contents } == vk::SubpassContents::INLINE;
    with_rec(s, |r| r.next_subpass(inline));
}
wrap!(cmd_next_subpass2, cmd_next_subpass2, (sp: *const vk::SubpassBeginInfo<'_>, se: *const vk::SubpassEndInfo<'_>),
    |_: &Active, s: &Option<Arc<Mutex<CbState>>>, _, sp: *const vk::SubpassBeginInfo<'_>, _: *const vk::SubpassEndInfo<'_>| next_subpass2(s, sp),
    |_: &Active, _: &Option<Arc<Mutex<CbState>>>, _| {});
wrap!(cmd_next_subpass2_khr, cmd_next_subpass2_khr, (sp: *const vk::SubpassBeginInfo<'_>, se: *const vk::SubpassEndInfo<'_>),
    |_: &Active, s: &Option<Arc<Mutex<CbState>>>, _, sp: *const vk::SubpassBeginInfo<'_>, _: *const vk::SubpassEndInfo<'_>| next_subpass2(s, sp),
    |_: &Active, _: &Option<Arc<Mutex<CbState>>>, _| {});

fn end_pass(a: &Active, s: &Option<Arc<Mutex<CbState>>>, cb: vk::CommandBuffer) {
    with_rec(s, |r| r.end_pass(a, cb, false));
}
wrap!(
    cmd_end_render_pass,
    cmd_end_render_pass,
    (),
    |_: &Active, _: &Option<Arc<Mutex<CbState>>>, _| {},
    end_pass
);
wrap!(cmd_end_render_pass2, cmd_end_render_pass2, (i: *const vk::SubpassEndInfo<'_>), |_: &Active, _: &Option<Arc<Mutex<CbState>>>, _, _: *const vk::SubpassEndInfo<'_>| {}, end_pass);
wrap!(cmd_end_render_pass2_khr, cmd_end_render_pass2_khr, (i: *const vk::SubpassEndInfo<'_>), |_: &Active, _: &Option<Arc<Mutex<CbState>>>, _, _: *const vk::SubpassEndInfo<'_>| {}, end_pass);

/// The open dynamic rendering instances' `SUSPENDING` flags, per command
/// buffer, to tell at `vkCmdEndRendering` whether the instance suspends.
fn begin_rendering(
    a: &Active,
    s: &Option<Arc<Mutex<CbState>>>,
    cb: vk::CommandBuffer,
    info: *const vk::RenderingInfo<'_>,
) {
    if info.is_null() {
        return;
    }
    // SAFETY: the application's valid rendering info.
    let (flags, view_mask) = unsafe { ((*info).flags, (*info).view_mask) };
    let inside =
        view_mask == 0 && !flags.contains(vk::RenderingFlags::CONTENTS_SECONDARY_COMMAND_BUFFERS);
    let resuming = flags.contains(vk::RenderingFlags::RESUMING);
    let suspending = flags.contains(vk::RenderingFlags::SUSPENDING);
    if let Some(st) = s {
        let mut st = st.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(r) = st.rec.as_mut() {
            r.begin_pass(a, cb, scope_kind::RENDER_PASS, inside, resuming);
            r.suspending = suspending;
        }
    }
}

fn end_rendering(a: &Active, s: &Option<Arc<Mutex<CbState>>>, cb: vk::CommandBuffer) {
    with_rec(s, |r| {
        let suspending = std::mem::take(&mut r.suspending);
        r.end_pass(a, cb, suspending);
    });
}
wrap!(cmd_begin_rendering, cmd_begin_rendering, (i: *const vk::RenderingInfo<'_>), begin_rendering, |_: &Active, _: &Option<Arc<Mutex<CbState>>>, _| {});
wrap!(cmd_begin_rendering_khr, cmd_begin_rendering_khr, (i: *const vk::RenderingInfo<'_>), begin_rendering, |_: &Active, _: &Option<Arc<Mutex<CbState>>>, _| {});
wrap!(
    cmd_end_rendering,
    cmd_end_rendering,
    (),
    |_: &Active, _: &Option<Arc<Mutex<CbState>>>, _| {},
    end_rendering
);
wrap!(
    cmd_end_rendering_khr,
    cmd_end_rendering_khr,
    (),
    |_: &Active, _: &Option<Arc<Mutex<CbState>>>, _| {},
    end_rendering
);

fn label_begin(
    a: &Active,
    s: &Option<Arc<Mutex<CbState>>>,
    cb: vk::CommandBuffer,
    info: *const vk::DebugUtilsLabelEXT<'_>,
) {
    // SAFETY: the application's valid label (or null) with a
    // NUL-terminated name (or null).
    let text = unsafe {
        if info.is_null() || (*info).p_label_name.is_null() {
            String::new()
        } else {
            CStr::from_ptr((*info).p_label_name)
                .to_string_lossy()
                .into_owned()
        }
    };
    with_rec(s, |r| {
        if r.timed() {
            let name = match sink::get().and_then(|k| k.intern(&text)) {
                Some(id) => NameRef::Id(id),
                None => NameRef::Text(text.into_boxed_str()),
            };
            r.label_begin(a, cb, name);
        } else {
            r.label_begin(a, cb, NameRef::Id(0));
        }
    });
}
/// The layer's `vkCmdBeginDebugUtilsLabelEXT` (the loader hands out the
/// instance chain's: see `lib.rs`).
pub(crate) unsafe extern "system" fn cmd_begin_debug_utils_label(
    cb: vk::CommandBuffer,
    info: *const vk::DebugUtilsLabelEXT<'_>,
) {
    // SAFETY: the application's command buffer.
    let Some((d, state)) = (unsafe { lookup(cb) }) else {
        return;
    };
    let Some(a) = d.active.as_ref() else { return };
    let Some(next) = a.labels.0 else { return };
    label_begin(a, &state, cb, info);
    // SAFETY: the application's call, passed on.
    unsafe { next(cb, info) };
}

/// The layer's `vkCmdEndDebugUtilsLabelEXT`.
pub(crate) unsafe extern "system" fn cmd_end_debug_utils_label(cb: vk::CommandBuffer) {
    // SAFETY: the application's command buffer.
    let Some((d, state)) = (unsafe { lookup(cb) }) else {
        return;
    };
    let Some(a) = d.active.as_ref() else { return };
    let Some(next) = a.labels.1 else { return };
    with_rec(&state, |r| r.label_end(a, cb));
    // SAFETY: the application's call, passed on.
    unsafe { next(cb) };
}

pub(crate) unsafe extern "system" fn cmd_execute_commands(
    cb: vk::CommandBuffer,
    n: u32,
    cbs: *const vk::CommandBuffer,
) {
    // SAFETY: the application's command buffer.
    let Some((d, state)) = (unsafe { lookup(cb) }) else {
        return;
    };
    let Some(a) = d.active.as_ref() else { return };
    let Some(next) = a.next().cmd_execute_commands else {
        return;
    };
    let list: &[vk::CommandBuffer] = if cbs.is_null() || n == 0 {
        &[]
    } else {
        // SAFETY: the application's array of `n` handles.
        unsafe { std::slice::from_raw_parts(cbs, n as usize) }
    };
    let scopes: u64 = list
        .iter()
        .filter_map(|s| a.cb(*s))
        .map(|s| s.lock().unwrap_or_else(|e| e.into_inner()).seen)
        .sum();
    let mut start = crate::recorded::NO_QUERY;
    with_rec(&state, |r| start = r.before_execute(a, cb, scopes));
    // SAFETY: the application's call, passed on.
    unsafe { next(cb, n, cbs) };
    with_rec(&state, |r| r.after_execute(a, cb, start));
}
