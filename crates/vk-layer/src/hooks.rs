//! The device commands the layer wraps: command pools and buffers, render
//! passes, dispatches, copies, draws (at `--level draw`), debug labels and
//! `vkCmdExecuteCommands`; the queue commands are in [`crate::submit`].
//!
//! [`device_hook`] hands out a wrapper only where the next layer has the
//! command (an application that did not enable an extension gets no
//! wrapper for its commands), and draws only at `--level draw`: at the
//! other levels they go straight to the next layer.

use crate::config::Level;
use crate::device::{self, Active, CbState};
use crate::recording::{NameRef, Op, Recording};
use crate::sink;
use crate::submit;
use ash::vk;
use gpu_counters_record::protocol::scope_kind;
use std::ffi::{c_void, CStr};
use std::sync::{Arc, Mutex};

/// Whether `name` is a command of an extension the layer added.
pub fn hidden(a: &Active, name: &CStr) -> bool {
    let calibrated = [
        (
            ash::ext::calibrated_timestamps::NAME,
            &[c"vkGetCalibratedTimestampsEXT"][..],
        ),
        (
            ash::khr::calibrated_timestamps::NAME,
            &[c"vkGetCalibratedTimestampsKHR"][..],
        ),
        (
            ash::ext::host_query_reset::NAME,
            &[c"vkResetQueryPoolEXT"][..],
        ),
    ];
    calibrated
        .iter()
        .any(|(ext, cmds)| a.hidden.contains(ext) && cmds.contains(&name))
}

fn as_void(f: *const ()) -> unsafe extern "system" fn() {
    // SAFETY: `f` is one of this module's `extern "system"` functions; the
    // loader casts it back to the command's type.
    unsafe { std::mem::transmute::<*const (), unsafe extern "system" fn()>(f) }
}

/// The layer's wrapper of device command `name`, where it wraps it.
pub fn device_hook(a: &Active, name: &CStr) -> Option<unsafe extern "system" fn()> {
    table(a)
        .into_iter()
        .find(|(n, _, _)| *n == name)
        .and_then(|(_, wanted, f)| wanted.then(|| as_void(f)))
}

/// (command name, whether the next layer has it and the level wants it,
/// the wrapper).
fn table(a: &Active) -> Vec<(&'static CStr, bool, *const ())> {
    let n = a.next();
    let draws = a.level == Level::Draw;
    vec![
        (
            c"vkDestroyDevice",
            n.destroy_device.is_some(),
            destroy_device as *const (),
        ),
        (
            c"vkGetDeviceQueue",
            n.get_device_queue.is_some(),
            submit::get_device_queue as *const (),
        ),
        (
            c"vkGetDeviceQueue2",
            n.get_device_queue2.is_some(),
            submit::get_device_queue2 as *const (),
        ),
        (
            c"vkCreateCommandPool",
            n.create_command_pool.is_some(),
            create_command_pool as *const (),
        ),
        (
            c"vkDestroyCommandPool",
            n.destroy_command_pool.is_some(),
            destroy_command_pool as *const (),
        ),
        (
            c"vkResetCommandPool",
            n.reset_command_pool.is_some(),
            reset_command_pool as *const (),
        ),
        (
            c"vkAllocateCommandBuffers",
            n.allocate_command_buffers.is_some(),
            allocate_command_buffers as *const (),
        ),
        (
            c"vkFreeCommandBuffers",
            n.free_command_buffers.is_some(),
            free_command_buffers as *const (),
        ),
        (
            c"vkBeginCommandBuffer",
            n.begin_command_buffer.is_some(),
            begin_command_buffer as *const (),
        ),
        (
            c"vkEndCommandBuffer",
            n.end_command_buffer.is_some(),
            end_command_buffer as *const (),
        ),
        (
            c"vkResetCommandBuffer",
            n.reset_command_buffer.is_some(),
            reset_command_buffer as *const (),
        ),
        (
            c"vkCreateRenderPass",
            n.create_render_pass.is_some(),
            create_render_pass as *const (),
        ),
        (
            c"vkCreateRenderPass2",
            n.create_render_pass2.is_some(),
            create_render_pass2 as *const (),
        ),
        (
            c"vkCreateRenderPass2KHR",
            n.create_render_pass2_khr.is_some(),
            create_render_pass2_khr as *const (),
        ),
        (
            c"vkDestroyRenderPass",
            n.destroy_render_pass.is_some(),
            destroy_render_pass as *const (),
        ),
        (
            c"vkCmdBeginRenderPass",
            n.cmd_begin_render_pass.is_some(),
            cmd_begin_render_pass as *const (),
        ),
        (
            c"vkCmdBeginRenderPass2",
            n.cmd_begin_render_pass2.is_some(),
            cmd_begin_render_pass2 as *const (),
        ),
        (
            c"vkCmdBeginRenderPass2KHR",
            n.cmd_begin_render_pass2_khr.is_some(),
            cmd_begin_render_pass2_khr as *const (),
        ),
        (
            c"vkCmdNextSubpass",
            n.cmd_next_subpass.is_some(),
            cmd_next_subpass as *const (),
        ),
        (
            c"vkCmdNextSubpass2",
            n.cmd_next_subpass2.is_some(),
            cmd_next_subpass2 as *const (),
        ),
        (
            c"vkCmdNextSubpass2KHR",
            n.cmd_next_subpass2_khr.is_some(),
            cmd_next_subpass2_khr as *const (),
        ),
        (
            c"vkCmdEndRenderPass",
            n.cmd_end_render_pass.is_some(),
            cmd_end_render_pass as *const (),
        ),
        (
            c"vkCmdEndRenderPass2",
            n.cmd_end_render_pass2.is_some(),
            cmd_end_render_pass2 as *const (),
        ),
        (
            c"vkCmdEndRenderPass2KHR",
            n.cmd_end_render_pass2_khr.is_some(),
            cmd_end_render_pass2_khr as *const (),
        ),
        (
            c"vkCmdBeginRendering",
            n.cmd_begin_rendering.is_some(),
            cmd_begin_rendering as *const (),
        ),
        (
            c"vkCmdBeginRenderingKHR",
            n.cmd_begin_rendering_khr.is_some(),
            cmd_begin_rendering_khr as *const (),
        ),
        (
            c"vkCmdEndRendering",
            n.cmd_end_rendering.is_some(),
            cmd_end_rendering as *const (),
        ),
        (
            c"vkCmdEndRenderingKHR",
            n.cmd_end_rendering_khr.is_some(),
            cmd_end_rendering_khr as *const (),
        ),
        (
            c"vkCmdDispatch",
            n.cmd_dispatch.is_some(),
            cmd_dispatch as *const (),
        ),
        (
            c"vkCmdDispatchIndirect",
            n.cmd_dispatch_indirect.is_some(),
            cmd_dispatch_indirect as *const (),
        ),
        (
            c"vkCmdDispatchBase",
            n.cmd_dispatch_base.is_some(),
            cmd_dispatch_base as *const (),
        ),
        (
            c"vkCmdDispatchBaseKHR",
            n.cmd_dispatch_base_khr.is_some(),
            cmd_dispatch_base_khr as *const (),
        ),
        (
            c"vkCmdCopyBuffer",
            n.cmd_copy_buffer.is_some(),
            cmd_copy_buffer as *const (),
        ),
        (
            c"vkCmdCopyImage",
            n.cmd_copy_image.is_some(),
            cmd_copy_image as *const (),
        ),
        (
            c"vkCmdBlitImage",
            n.cmd_blit_image.is_some(),
            cmd_blit_image as *const (),
        ),
        (
            c"vkCmdCopyBufferToImage",
            n.cmd_copy_buffer_to_image.is_some(),
            cmd_copy_buffer_to_image as *const (),
        ),
        (
            c"vkCmdCopyImageToBuffer",
            n.cmd_copy_image_to_buffer.is_some(),
            cmd_copy_image_to_buffer as *const (),
        ),
        (
            c"vkCmdUpdateBuffer",
            n.cmd_update_buffer.is_some(),
            cmd_update_buffer as *const (),
        ),
        (
            c"vkCmdFillBuffer",
            n.cmd_fill_buffer.is_some(),
            cmd_fill_buffer as *const (),
        ),
        (
            c"vkCmdClearColorImage",
            n.cmd_clear_color_image.is_some(),
            cmd_clear_color_image as *const (),
        ),
        (
            c"vkCmdClearDepthStencilImage",
            n.cmd_clear_depth_stencil_image.is_some(),
            cmd_clear_depth_stencil_image as *const (),
        ),
        (
            c"vkCmdResolveImage",
            n.cmd_resolve_image.is_some(),
            cmd_resolve_image as *const (),
        ),
        (
            c"vkCmdCopyBuffer2",
            n.cmd_copy_buffer2.is_some(),
            cmd_copy_buffer2 as *const (),
        ),
        (
            c"vkCmdCopyBuffer2KHR",
            n.cmd_copy_buffer2_khr.is_some(),
            cmd_copy_buffer2_khr as *const (),
        ),
        (
            c"vkCmdCopyImage2",
            n.cmd_copy_image2.is_some(),
            cmd_copy_image2 as *const (),
        ),
        (
            c"vkCmdCopyImage2KHR",
            n.cmd_copy_image2_khr.is_some(),
            cmd_copy_image2_khr as *const (),
        ),
        (
            c"vkCmdCopyBufferToImage2",
            n.cmd_copy_buffer_to_image2.is_some(),
            cmd_copy_buffer_to_image2 as *const (),
        ),
        (
            c"vkCmdCopyBufferToImage2KHR",
            n.cmd_copy_buffer_to_image2_khr.is_some(),
            cmd_copy_buffer_to_image2_khr as *const (),
        ),
        (
            c"vkCmdCopyImageToBuffer2",
            n.cmd_copy_image_to_buffer2.is_some(),
            cmd_copy_image_to_buffer2 as *const (),
        ),
        (
            c"vkCmdCopyImageToBuffer2KHR",
            n.cmd_copy_image_to_buffer2_khr.is_some(),
            cmd_copy_image_to_buffer2_khr as *const (),
        ),
        (
            c"vkCmdBlitImage2",
            n.cmd_blit_image2.is_some(),
            cmd_blit_image2 as *const (),
        ),
        (
            c"vkCmdBlitImage2KHR",
            n.cmd_blit_image2_khr.is_some(),
            cmd_blit_image2_khr as *const (),
        ),
        (
            c"vkCmdResolveImage2",
            n.cmd_resolve_image2.is_some(),
            cmd_resolve_image2 as *const (),
        ),
        (
            c"vkCmdResolveImage2KHR",
            n.cmd_resolve_image2_khr.is_some(),
            cmd_resolve_image2_khr as *const (),
        ),
        (
            c"vkCmdDraw",
            draws && n.cmd_draw.is_some(),
            cmd_draw as *const (),
        ),
        (
            c"vkCmdDrawIndexed",
            draws && n.cmd_draw_indexed.is_some(),
            cmd_draw_indexed as *const (),
        ),
        (
            c"vkCmdDrawIndirect",
            draws && n.cmd_draw_indirect.is_some(),
            cmd_draw_indirect as *const (),
        ),
        (
            c"vkCmdDrawIndexedIndirect",
            draws && n.cmd_draw_indexed_indirect.is_some(),
            cmd_draw_indexed_indirect as *const (),
        ),
        (
            c"vkCmdDrawIndirectCount",
            draws && n.cmd_draw_indirect_count.is_some(),
            cmd_draw_indirect_count as *const (),
        ),
        (
            c"vkCmdDrawIndirectCountKHR",
            draws && n.cmd_draw_indirect_count_khr.is_some(),
            cmd_draw_indirect_count_khr as *const (),
        ),
        (
            c"vkCmdDrawIndexedIndirectCount",
            draws && n.cmd_draw_indexed_indirect_count.is_some(),
            cmd_draw_indexed_indirect_count as *const (),
        ),
        (
            c"vkCmdDrawIndexedIndirectCountKHR",
            draws && n.cmd_draw_indexed_indirect_count_khr.is_some(),
            cmd_draw_indexed_indirect_count_khr as *const (),
        ),
        (
            c"vkCmdBeginDebugUtilsLabelEXT",
            a.labels.0.is_some(),
            cmd_begin_debug_utils_label as *const (),
        ),
        (
            c"vkCmdEndDebugUtilsLabelEXT",
            a.labels.1.is_some(),
            cmd_end_debug_utils_label as *const (),
        ),
        (
            c"vkCmdExecuteCommands",
            n.cmd_execute_commands.is_some(),
            cmd_execute_commands as *const (),
        ),
        (
            c"vkQueueSubmit",
            n.queue_submit.is_some(),
            submit::queue_submit as *const (),
        ),
        (
            c"vkQueueSubmit2",
            n.queue_submit2.is_some(),
            submit::queue_submit2 as *const (),
        ),
        (
            c"vkQueueSubmit2KHR",
            n.queue_submit2_khr.is_some(),
            submit::queue_submit2_khr as *const (),
        ),
        (
            c"vkQueuePresentKHR",
            n.queue_present.is_some(),
            submit::queue_present as *const (),
        ),
        (
            c"vkQueueWaitIdle",
            n.queue_wait_idle.is_some(),
            submit::queue_wait_idle as *const (),
        ),
        (
            c"vkDeviceWaitIdle",
            n.device_wait_idle.is_some(),
            submit::device_wait_idle as *const (),
        ),
        (
            c"vkWaitForFences",
            n.wait_for_fences.is_some(),
            submit::wait_for_fences as *const (),
        ),
    ]
}

/// A command buffer's state, where the layer knows it.
type State = Option<Arc<Mutex<CbState>>>;

/// The active device of a command buffer, and its state.
///
/// # Safety
///
/// `cb` is a valid command buffer.
unsafe fn lookup(cb: vk::CommandBuffer) -> Option<(Arc<device::DeviceData>, State)> {
    // SAFETY: the caller's promise.
    let d = unsafe { device::of(cb) }?;
    let state = d.active.as_ref()?.cb(cb);
    Some((d, state))
}

/// Runs `f` on the command buffer's open recording.
fn with_rec(state: &Option<Arc<Mutex<CbState>>>, f: impl FnOnce(&mut Recording)) {
    if let Some(s) = state {
        let mut s = s.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(r) = s.rec.as_mut() {
            f(r);
        }
    }
}

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
    let mut start = crate::recording::NO_QUERY;
    with_rec(&state, |r| start = r.before_execute(a, cb, scopes));
    // SAFETY: the application's call, passed on.
    unsafe { next(cb, n, cbs) };
    with_rec(&state, |r| r.after_execute(a, cb, start));
}

// Command pools and buffers.

pub(crate) unsafe extern "system" fn create_command_pool(
    device: vk::Device,
    info: *const vk::CommandPoolCreateInfo<'_>,
    alloc: *const vk::AllocationCallbacks<'_>,
    out: *mut vk::CommandPool,
) -> vk::Result {
    // SAFETY: the application's device.
    let Some(d) = (unsafe { device::of(device) }) else {
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
    let Some(d) = (unsafe { device::of(device) }) else {
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
    let Some(d) = (unsafe { device::of(device) }) else {
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
    let Some(d) = (unsafe { device::of(device) }) else {
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
    let Some(d) = (unsafe { device::of(device) }) else {
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
    let Some(d) = (unsafe { device::of(device) }) else {
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
            let Some(d) = (unsafe { device::of(device) }) else {
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
    let Some(d) = (unsafe { device::of(device) }) else {
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
    let k = unsafe { crate::global::key(device) };
    let Some(d) = crate::global::remove_device(k) else {
        return;
    };
    if let Some(a) = d.active.as_ref() {
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            // SAFETY: the application is destroying the device.
            unsafe { device::destroy(a) }
        }));
        if let Some(next) = a.next().destroy_device {
            // SAFETY: the application's call, passed on.
            unsafe { next(device, alloc) };
        }
    }
}
