//! Devices: what the layer keeps of each (its next layer's commands, queue
//! families, calibration, query blocks, command buffers, queues, frames).
//! Made and released by [`crate::lifecycle`].

use crate::blocks::BlockPool;
use crate::chain;
use crate::config::Level;
use crate::frames::Frames;
use crate::instance::Gdpa;
pub use crate::instance::HostReset;
use crate::queue::QueueData;
use crate::recorded::{NameRef, Recorded, Recording};
use crate::sink;
use ash::vk;
use gpu_counters_hal::Calibration;
use gpu_counters_record::protocol::{scope_kind, Clock, Record};
use gpu_counters_vulkan::{CalibratedClock, CalibratedTimestamps};
use std::collections::HashMap;
use std::ffi::CStr;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, RwLock};

/// What `vkCreateDevice` turned on.
#[derive(Debug)]
pub struct DeviceSetup {
    /// The calibrated-timestamps extension enabled (by the application or
    /// the layer).
    pub calibration: Option<CalibratedTimestamps>,
    /// How host query reset is enabled.
    pub host_reset: HostReset,
    /// `pipelineStatisticsQuery` is enabled for the layer's statistics.
    pub statistics: bool,
    /// Extensions the layer added (their commands are hidden from the
    /// application).
    pub added: Vec<&'static CStr>,
}

/// A queue family.
#[derive(Debug, Clone, Copy)]
pub struct Family {
    /// Its flags.
    pub flags: vk::QueueFlags,
    /// `timestampValidBits` (0 where a test asked the layer to treat the
    /// family as untimed: `GPU_COUNTERS_VK_LAYER_UNTIMED_FAMILIES`).
    pub valid_bits: u32,
}

/// The device commands the layer calls or wraps, from the next layer.
macro_rules! next_commands {
    ($($field:ident: $pfn:ident = $name:literal),* $(,)?) => {
        /// The next layer's commands the layer wraps (absent where the
        /// application did not enable them).
        #[derive(Clone, Copy)]
        pub struct Next {
            $(
                /// The next layer's command of this name, if it has it.
                pub $field: Option<vk::$pfn>,
            )*
        }

        impl Next {
            /// Loads them through the next layer's `vkGetDeviceProcAddr`.
            ///
            /// # Safety
            ///
            /// `device` was made by the layer below `gdpa`.
            pub unsafe fn load(gdpa: Gdpa, device: vk::Device) -> Next {
                Next {
                    $(
                        // SAFETY: the caller's promise; `$pfn` is the
                        // command's type.
                        $field: unsafe { load_device::<vk::$pfn>(gdpa, device, $name) },
                    )*
                }
            }
        }
    };
}

next_commands! {
    destroy_device: PFN_vkDestroyDevice = c"vkDestroyDevice",
    get_device_queue: PFN_vkGetDeviceQueue = c"vkGetDeviceQueue",
    get_device_queue2: PFN_vkGetDeviceQueue2 = c"vkGetDeviceQueue2",
    create_command_pool: PFN_vkCreateCommandPool = c"vkCreateCommandPool",
    destroy_command_pool: PFN_vkDestroyCommandPool = c"vkDestroyCommandPool",
    reset_command_pool: PFN_vkResetCommandPool = c"vkResetCommandPool",
    allocate_command_buffers: PFN_vkAllocateCommandBuffers = c"vkAllocateCommandBuffers",
    free_command_buffers: PFN_vkFreeCommandBuffers = c"vkFreeCommandBuffers",
    begin_command_buffer: PFN_vkBeginCommandBuffer = c"vkBeginCommandBuffer",
    end_command_buffer: PFN_vkEndCommandBuffer = c"vkEndCommandBuffer",
    reset_command_buffer: PFN_vkResetCommandBuffer = c"vkResetCommandBuffer",
    create_render_pass: PFN_vkCreateRenderPass = c"vkCreateRenderPass",
    create_render_pass2: PFN_vkCreateRenderPass2 = c"vkCreateRenderPass2",
    create_render_pass2_khr: PFN_vkCreateRenderPass2 = c"vkCreateRenderPass2KHR",
    destroy_render_pass: PFN_vkDestroyRenderPass = c"vkDestroyRenderPass",
    cmd_begin_render_pass: PFN_vkCmdBeginRenderPass = c"vkCmdBeginRenderPass",
    cmd_begin_render_pass2: PFN_vkCmdBeginRenderPass2 = c"vkCmdBeginRenderPass2",
    cmd_begin_render_pass2_khr: PFN_vkCmdBeginRenderPass2 = c"vkCmdBeginRenderPass2KHR",
    cmd_next_subpass: PFN_vkCmdNextSubpass = c"vkCmdNextSubpass",
    cmd_next_subpass2: PFN_vkCmdNextSubpass2 = c"vkCmdNextSubpass2",
    cmd_next_subpass2_khr: PFN_vkCmdNextSubpass2 = c"vkCmdNextSubpass2KHR",
    cmd_end_render_pass: PFN_vkCmdEndRenderPass = c"vkCmdEndRenderPass",
    cmd_end_render_pass2: PFN_vkCmdEndRenderPass2 = c"vkCmdEndRenderPass2",
    cmd_end_render_pass2_khr: PFN_vkCmdEndRenderPass2 = c"vkCmdEndRenderPass2KHR",
    cmd_begin_rendering: PFN_vkCmdBeginRendering = c"vkCmdBeginRendering",
    cmd_begin_rendering_khr: PFN_vkCmdBeginRendering = c"vkCmdBeginRenderingKHR",
    cmd_end_rendering: PFN_vkCmdEndRendering = c"vkCmdEndRendering",
    cmd_end_rendering_khr: PFN_vkCmdEndRendering = c"vkCmdEndRenderingKHR",
    cmd_dispatch: PFN_vkCmdDispatch = c"vkCmdDispatch",
    cmd_dispatch_indirect: PFN_vkCmdDispatchIndirect = c"vkCmdDispatchIndirect",
    cmd_dispatch_base: PFN_vkCmdDispatchBase = c"vkCmdDispatchBase",
    cmd_dispatch_base_khr: PFN_vkCmdDispatchBase = c"vkCmdDispatchBaseKHR",
    cmd_copy_buffer: PFN_vkCmdCopyBuffer = c"vkCmdCopyBuffer",
    cmd_copy_image: PFN_vkCmdCopyImage = c"vkCmdCopyImage",
    cmd_blit_image: PFN_vkCmdBlitImage = c"vkCmdBlitImage",
    cmd_copy_buffer_to_image: PFN_vkCmdCopyBufferToImage = c"vkCmdCopyBufferToImage",
    cmd_copy_image_to_buffer: PFN_vkCmdCopyImageToBuffer = c"vkCmdCopyImageToBuffer",
    cmd_update_buffer: PFN_vkCmdUpdateBuffer = c"vkCmdUpdateBuffer",
    cmd_fill_buffer: PFN_vkCmdFillBuffer = c"vkCmdFillBuffer",
    cmd_clear_color_image: PFN_vkCmdClearColorImage = c"vkCmdClearColorImage",
    cmd_clear_depth_stencil_image: PFN_vkCmdClearDepthStencilImage = c"vkCmdClearDepthStencilImage",
    cmd_resolve_image: PFN_vkCmdResolveImage = c"vkCmdResolveImage",
    cmd_copy_buffer2: PFN_vkCmdCopyBuffer2 = c"vkCmdCopyBuffer2",
    cmd_copy_buffer2_khr: PFN_vkCmdCopyBuffer2 = c"vkCmdCopyBuffer2KHR",
    cmd_copy_image2: PFN_vkCmdCopyImage2 = c"vkCmdCopyImage2",
    cmd_copy_image2_khr: PFN_vkCmdCopyImage2 = c"vkCmdCopyImage2KHR",
    cmd_copy_buffer_to_image2: PFN_vkCmdCopyBufferToImage2 = c"vkCmdCopyBufferToImage2",
    cmd_copy_buffer_to_image2_khr: PFN_vkCmdCopyBufferToImage2 = c"vkCmdCopyBufferToImage2KHR",
    cmd_copy_image_to_buffer2: PFN_vkCmdCopyImageToBuffer2 = c"vkCmdCopyImageToBuffer2",
    cmd_copy_image_to_buffer2_khr: PFN_vkCmdCopyImageToBuffer2 = c"vkCmdCopyImageToBuffer2KHR",
    cmd_blit_image2: PFN_vkCmdBlitImage2 = c"vkCmdBlitImage2",
    cmd_blit_image2_khr: PFN_vkCmdBlitImage2 = c"vkCmdBlitImage2KHR",
    cmd_resolve_image2: PFN_vkCmdResolveImage2 = c"vkCmdResolveImage2",
    cmd_resolve_image2_khr: PFN_vkCmdResolveImage2 = c"vkCmdResolveImage2KHR",
    cmd_draw: PFN_vkCmdDraw = c"vkCmdDraw",
    cmd_draw_indexed: PFN_vkCmdDrawIndexed = c"vkCmdDrawIndexed",
    cmd_draw_indirect: PFN_vkCmdDrawIndirect = c"vkCmdDrawIndirect",
    cmd_draw_indexed_indirect: PFN_vkCmdDrawIndexedIndirect = c"vkCmdDrawIndexedIndirect",
    cmd_draw_indirect_count: PFN_vkCmdDrawIndirectCount = c"vkCmdDrawIndirectCount",
    cmd_draw_indirect_count_khr: PFN_vkCmdDrawIndirectCount = c"vkCmdDrawIndirectCountKHR",
    cmd_draw_indexed_indirect_count: PFN_vkCmdDrawIndexedIndirectCount = c"vkCmdDrawIndexedIndirectCount",
    cmd_draw_indexed_indirect_count_khr: PFN_vkCmdDrawIndexedIndirectCount = c"vkCmdDrawIndexedIndirectCountKHR",
    cmd_execute_commands: PFN_vkCmdExecuteCommands = c"vkCmdExecuteCommands",
    queue_submit: PFN_vkQueueSubmit = c"vkQueueSubmit",
    queue_submit2: PFN_vkQueueSubmit2 = c"vkQueueSubmit2",
    queue_submit2_khr: PFN_vkQueueSubmit2 = c"vkQueueSubmit2KHR",
    queue_present: PFN_vkQueuePresentKHR = c"vkQueuePresentKHR",
    queue_wait_idle: PFN_vkQueueWaitIdle = c"vkQueueWaitIdle",
    device_wait_idle: PFN_vkDeviceWaitIdle = c"vkDeviceWaitIdle",
    wait_for_fences: PFN_vkWaitForFences = c"vkWaitForFences",
}

/// The next layer's device command `name` as `F`.
///
/// # Safety
///
/// `F` is the command's function pointer type; `device` was made by the
/// layer below `gdpa`.
pub unsafe fn load_device<F: Copy>(gdpa: Gdpa, device: vk::Device, name: &CStr) -> Option<F> {
    // SAFETY: the next layer's vkGetDeviceProcAddr with a valid name.
    let f = unsafe { gdpa(device, name.as_ptr()) }?;
    // SAFETY: the caller's promise about `F`.
    Some(unsafe { std::mem::transmute_copy::<unsafe extern "system" fn(), F>(&f) })
}

/// A command buffer the application allocated.
#[derive(Debug)]
pub struct CbState {
    /// Its pool.
    pub pool: vk::CommandPool,
    /// Its pool's queue family.
    pub family: u32,
    /// Allocated as a secondary command buffer.
    pub secondary: bool,
    /// Being recorded.
    pub rec: Option<Recording>,
    /// Its last finished recording.
    pub done: Option<Arc<Recorded>>,
    /// For a secondary: the scopes its last recording counted (not timed).
    pub seen: u64,
}

/// The calibrations of one device, one per distinct `timestampValidBits`.
pub struct Clocks {
    /// The device's clock.
    pub clock: CalibratedClock,
    /// (valid bits, calibration).
    pub by_bits: Vec<(u32, Calibration)>,
}

/// What the layer keeps of a device it times.
pub struct Active {
    /// The layer's id of the device, per process.
    pub id: u32,
    /// The device's commands, through the next layer.
    pub ash: ash::Device,
    /// The commands the layer wraps, loaded at the first
    /// `vkGetDeviceProcAddr` ([`Active::next`]).
    pub(crate) next: std::sync::OnceLock<Next>,
    /// The next layer's `vkGetDeviceProcAddr` and the device.
    pub(crate) gdpa: Gdpa,
    pub(crate) device: vk::Device,
    /// The next layer's debug-utils label commands (of its instance
    /// chain, through which the loader dispatches them).
    pub labels: crate::instance::LabelFns,
    /// The loader's `vkSetDeviceLoaderData`.
    pub set_data: chain::SetDeviceLoaderData,
    /// Queue families.
    pub families: Vec<Family>,
    /// `timestampPeriod`, ns.
    pub period_ns: f64,
    /// The physical device's memory types.
    pub memory: vk::PhysicalDeviceMemoryProperties,
    /// The calibration, where the device has calibrated timestamps.
    pub clocks: Option<Mutex<Clocks>>,
    /// Host query reset, where enabled.
    pub host_reset: Option<vk::PFN_vkResetQueryPool>,
    /// The statistics the layer takes per pass, and how many.
    pub statistics: Option<(vk::QueryPipelineStatisticFlags, usize)>,
    /// How finely.
    pub level: Level,
    /// Command names the application must not see (of extensions the layer
    /// added).
    pub hidden: Vec<&'static CStr>,
    /// Timestamp blocks.
    pub ts_blocks: BlockPool,
    /// Statistics blocks (with statistics).
    pub stat_blocks: Option<BlockPool>,
    /// Command pools: their queue family.
    pub pools: Mutex<HashMap<vk::CommandPool, u32>>,
    /// Command buffers the application allocated.
    pub cbs: RwLock<HashMap<vk::CommandBuffer, Arc<Mutex<CbState>>>>,
    /// Render passes with multiview.
    pub multiview: Mutex<HashMap<vk::RenderPass, bool>>,
    /// Queues, by handle.
    pub queues: Mutex<HashMap<vk::Queue, Arc<QueueData>>>,
    /// Frames.
    pub frames: Mutex<Frames>,
    /// Names of scope kinds, interned once.
    pub(crate) names: Mutex<HashMap<&'static str, NameRef>>,
    /// Serializes retiring (and destruction): the Vulkan calls that read
    /// results happen under it.
    pub retire_lock: Mutex<()>,
    /// The device was lost.
    pub lost: AtomicBool,
    /// The device was destroyed (or the process is exiting).
    pub destroyed: AtomicBool,
    pub(crate) next_queue: AtomicU32,
}

/// What the layer keeps of a device.
pub struct DeviceData {
    /// The device.
    pub handle: vk::Device,
    /// The next layer's `vkGetDeviceProcAddr`.
    pub gdpa: Gdpa,
    /// Present where the layer times this device.
    pub active: Option<Active>,
}

/// The name of scope kind `kind`, interned.
pub fn kind_name(dev: &Active, kind: u8) -> NameRef {
    static_name(dev, scope_kind::name(kind))
}

/// A static name, interned once per device.
pub fn static_name(dev: &Active, name: &'static str) -> NameRef {
    let mut names = dev.names.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(n) = names.get(name) {
        return n.clone();
    }
    let n = match sink::get().and_then(|s| s.intern(name)) {
        Some(id) => NameRef::Id(id),
        None => NameRef::Text(name.into()),
    };
    names.insert(name, n.clone());
    n
}

impl DeviceData {
    /// A device the layer does not time: calls pass straight through.
    pub fn passthrough(handle: vk::Device, gdpa: Gdpa) -> DeviceData {
        DeviceData {
            handle,
            gdpa,
            active: None,
        }
    }
}

/// Sends a calibration anchor as a `Clock` record.
pub fn send_clock(
    sink: &sink::Sink,
    device: u32,
    period_ns: f64,
    pair: &gpu_counters_hal::TimestampPair,
) {
    let gpu_ns = pair.gpu_ticks as f64 * period_ns;
    sink.push(&Record::Clock(Clock {
        device,
        cpu_ns: pair.cpu_ns,
        offset_ns: (pair.cpu_ns as f64 - gpu_ns) as i64,
        bound_ns: pair.max_deviation_ns,
    }));
}

impl Active {
    /// The next layer's commands the layer wraps. Loaded at the first
    /// `vkGetDeviceProcAddr`, after the loader finished making the device:
    /// some of its commands (the debug-utils labels of the instance
    /// extension) are only given out then.
    pub fn next(&self) -> &Next {
        // SAFETY: the device was made by the layer below `gdpa`.
        self.next
            .get_or_init(|| unsafe { Next::load(self.gdpa, self.device) })
    }

    /// The command buffer's state.
    pub fn cb(&self, cb: vk::CommandBuffer) -> Option<Arc<Mutex<CbState>>> {
        self.cbs
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&cb)
            .cloned()
    }

    /// A new queue id.
    pub fn next_queue_id(&self) -> u32 {
        self.next_queue.fetch_add(1, Ordering::Relaxed) | (self.id << 16)
    }

    /// Whether the family's work can be timed.
    pub fn family_timed(&self, family: u32) -> bool {
        self.families
            .get(family as usize)
            .is_some_and(|f| f.valid_bits > 0)
            && self.clocks.is_some()
    }
}
