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
use crate::global;
use crate::recorded::Recording;
use crate::submit;
use ash::vk;
use std::ffi::{c_char, CStr};
use std::sync::{Arc, Mutex};

mod commands;
mod objects;

pub(crate) use commands::*;
pub(crate) use objects::*;

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
    let d = unsafe { global::device_of(cb) }?;
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

/// The layer's `vkGetDeviceProcAddr`.
pub(crate) unsafe extern "system" fn get_device_proc_addr(
    device: vk::Device,
    name: *const c_char,
) -> vk::PFN_vkVoidFunction {
    if device == vk::Device::null() || name.is_null() {
        return None;
    }
    // SAFETY: the loader or application passes a device and a name.
    let (dev, n) = unsafe { (global::device_of(device), CStr::from_ptr(name)) };
    let dev = dev?;
    if n == c"vkGetDeviceProcAddr" {
        // SAFETY: a function of the right type.
        return unsafe {
            Some(
                std::mem::transmute::<*const (), unsafe extern "system" fn()>(
                    get_device_proc_addr as *const (),
                ),
            )
        };
    }
    if let Some(a) = &dev.active {
        if hidden(a, n) {
            return None;
        }
        if let Some(h) = device_hook(a, n) {
            return Some(h);
        }
    }
    // SAFETY: the next layer's vkGetDeviceProcAddr.
    unsafe { (dev.gdpa)(device, name) }
}
