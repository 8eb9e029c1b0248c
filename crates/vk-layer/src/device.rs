//! Devices: what the layer keeps of each (its next layer's commands, queue
//! families, calibration, query blocks, command buffers, queues, frames),
//! `vkGetDeviceProcAddr`, and `vkDestroyDevice`.

use crate::blocks::BlockPool;
use crate::config::Level;
use crate::instance::{Caps, Gdpa, InstanceData};
use crate::recording::{NameRef, Recorded, Recording, STAT_BLOCK, TS_BLOCK};
use crate::sink::{self, stat};
use crate::{chain, global, hooks, retire, submit};
use ash::vk;
use gpu_counters_hal::{Calibration, CalibrationMethod};
use gpu_counters_record::protocol::{
    scope_kind, Clock, Record, Seq, VkDevice as VkDeviceRecord, VkStatNames,
};
use gpu_counters_vulkan::{CalibratedClock, CalibratedTimestamps};
use std::collections::HashMap;
use std::ffi::{c_char, CStr};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, RwLock};

/// How the device resets queries on the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HostReset {
    /// It cannot: every execution resets its queries on the GPU.
    #[default]
    None,
    /// `vkResetQueryPool` (Vulkan 1.2's `hostQueryReset`).
    Core,
    /// `vkResetQueryPoolEXT` (`VK_EXT_host_query_reset`).
    Ext,
}

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
    next: std::sync::OnceLock<Next>,
    /// The next layer's `vkGetDeviceProcAddr` and the device.
    gdpa: Gdpa,
    device: vk::Device,
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
    pub queues: Mutex<HashMap<vk::Queue, Arc<submit::QueueData>>>,
    /// Frames.
    pub frames: Mutex<retire::Frames>,
    /// Names of scope kinds, interned once.
    names: Mutex<HashMap<&'static str, NameRef>>,
    /// Serializes retiring (and destruction): the Vulkan calls that read
    /// results happen under it.
    pub retire_lock: Mutex<()>,
    /// The device was lost.
    pub lost: AtomicBool,
    /// The device was destroyed (or the process is exiting).
    pub destroyed: AtomicBool,
    next_queue: AtomicU32,
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

static NEXT_DEVICE: AtomicU32 = AtomicU32::new(1);

/// The device of a dispatchable handle.
///
/// # Safety
///
/// `h` is a valid dispatchable handle of a device.
pub unsafe fn of<H: vk::Handle>(h: H) -> Option<Arc<DeviceData>> {
    // SAFETY: the caller's promise.
    global::device(unsafe { global::key(h) })
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

/// Families a test asks to treat as untimed
/// (`GPU_COUNTERS_VK_LAYER_UNTIMED_FAMILIES=0,2`): the layer then does what
/// it does on a driver whose family has `timestampValidBits` 0.
fn untimed_families() -> Vec<u32> {
    std::env::var("GPU_COUNTERS_VK_LAYER_UNTIMED_FAMILIES")
        .ok()
        .map(|v| v.split(',').filter_map(|s| s.trim().parse().ok()).collect())
        .unwrap_or_default()
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

    /// Registers a device the layer times.
    ///
    /// # Safety
    ///
    /// `device` was just made by the next layer from `pd` of `inst`, as
    /// `setup` says; `app` is the application's create info.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn register(
        inst: &InstanceData,
        pd: vk::PhysicalDevice,
        device: vk::Device,
        gdpa: Gdpa,
        set_data: chain::SetDeviceLoaderData,
        caps: &Caps,
        setup: DeviceSetup,
        app: &vk::DeviceCreateInfo<'_>,
    ) {
        let _ = app;
        // SAFETY: the physical device belongs to the instance.
        let memory = unsafe { inst.instance.get_physical_device_memory_properties(pd) };
        let Some(sink) = sink::get() else {
            // SAFETY: the caller's promise.
            unsafe {
                global::add_device(
                    global::key(device),
                    Arc::new(Self::passthrough(device, gdpa)),
                )
            };
            return;
        };
        // SAFETY: the next layer's commands of this device.
        let ash_device = unsafe {
            ash::Device::load_with(
                |name| {
                    std::mem::transmute::<vk::PFN_vkVoidFunction, *const std::ffi::c_void>(gdpa(
                        device,
                        name.as_ptr(),
                    ))
                },
                device,
            )
        };
        let untimed = untimed_families();
        let families: Vec<Family> = caps
            .families
            .iter()
            .enumerate()
            .map(|(i, &(flags, bits))| Family {
                flags,
                valid_bits: if untimed.contains(&(i as u32)) {
                    0
                } else {
                    bits
                },
            })
            .collect();
        let host_reset: Option<vk::PFN_vkResetQueryPool> = match setup.host_reset {
            HostReset::None => None,
            HostReset::Core => Some(ash_device.fp_v1_2().reset_query_pool),
            // SAFETY: the command's type; the device is the next layer's.
            HostReset::Ext => unsafe {
                load_device::<vk::PFN_vkResetQueryPool>(gdpa, device, c"vkResetQueryPoolEXT")
            },
        };
        let id = NEXT_DEVICE.fetch_add(1, Ordering::Relaxed);
        // The instance's commands with this device's next
        // vkGetDeviceProcAddr (the loader's instance-level lookup of it may
        // give none), for loading the device's extension commands.
        // SAFETY: the next layer's lookups of this instance and device.
        let with_gdpa = unsafe {
            let (gipa, handle) = (inst.gipa, inst.handle);
            ash::Instance::load_with(
                |name| {
                    if name == c"vkGetDeviceProcAddr" {
                        gdpa as *const std::ffi::c_void
                    } else {
                        std::mem::transmute::<vk::PFN_vkVoidFunction, *const std::ffi::c_void>(
                            gipa(handle, name.as_ptr()),
                        )
                    }
                },
                handle,
            )
        };
        let clocks = setup.calibration.and_then(|ext| {
            // SAFETY: the extension was enabled on this device, whose
            // physical device offers the DEVICE and CLOCK_MONOTONIC domains.
            let clock = unsafe { CalibratedClock::new(&with_gdpa, &ash_device, ext, 64) };
            let pair = clock
                .read_best(gpu_counters_vulkan::CALIBRATION_BURST)
                .ok()?;
            let mut by_bits: Vec<(u32, Calibration)> = Vec::new();
            for f in &families {
                if f.valid_bits == 0 || by_bits.iter().any(|(b, _)| *b == f.valid_bits) {
                    continue;
                }
                if let Ok(c) = Calibration::new(
                    CalibrationMethod::CalibratedPair,
                    caps.period_ns,
                    f.valid_bits,
                    pair,
                ) {
                    by_bits.push((f.valid_bits, c));
                }
            }
            send_clock(sink, id, caps.period_ns, &pair);
            Some(Mutex::new(Clocks { clock, by_bits }))
        });
        let statistics = setup.statistics.then(|| {
            let mut flags = vk::QueryPipelineStatisticFlags::empty();
            for (f, _) in gpu_counters_vulkan::VK_STATISTICS {
                flags |= f;
            }
            (flags, gpu_counters_vulkan::VK_STATISTICS.len())
        });
        let max_blocks = sink.config.max_blocks;
        let active = Active {
            id,
            ash: ash_device,
            next: std::sync::OnceLock::new(),
            gdpa,
            device,
            labels: inst.labels,
            set_data,
            families,
            period_ns: caps.period_ns,
            memory,
            clocks,
            host_reset,
            statistics,
            level: sink.config.level,
            hidden: setup.added,
            ts_blocks: BlockPool::new(
                vk::QueryType::TIMESTAMP,
                vk::QueryPipelineStatisticFlags::empty(),
                TS_BLOCK,
                max_blocks,
            ),
            stat_blocks: statistics.map(|(flags, _)| {
                BlockPool::new(
                    vk::QueryType::PIPELINE_STATISTICS,
                    flags,
                    STAT_BLOCK,
                    max_blocks,
                )
            }),
            pools: Mutex::new(HashMap::new()),
            cbs: RwLock::new(HashMap::new()),
            multiview: Mutex::new(HashMap::new()),
            queues: Mutex::new(HashMap::new()),
            frames: Mutex::new(retire::Frames::default()),
            names: Mutex::new(HashMap::new()),
            retire_lock: Mutex::new(()),
            lost: AtomicBool::new(false),
            destroyed: AtomicBool::new(false),
            next_queue: AtomicU32::new(1),
        };
        let name = sink.intern(&caps.name).unwrap_or(0);
        let driver = if caps.driver.is_empty() {
            0
        } else {
            sink.intern(&caps.driver).unwrap_or(0)
        };
        sink.push(&Record::VkDevice(VkDeviceRecord {
            id,
            uuid: caps.uuid,
            name,
            driver,
            api_version: caps.api_version,
            period_ps: (caps.period_ns * 1000.0).round() as u64,
            calibration: u8::from(active.clocks.is_some()),
        }));
        if statistics.is_some() {
            let ids: Vec<u32> = gpu_counters_vulkan::VK_STATISTICS
                .iter()
                .map(|(_, c)| sink.intern(c.name()).unwrap_or(0))
                .collect();
            sink.push(&Record::VkStatNames(VkStatNames {
                device: id,
                names: Seq::Slice(&ids),
            }));
        }
        // SAFETY: the caller's promise.
        let k = unsafe { global::key(device) };
        global::add_device(
            k,
            Arc::new(DeviceData {
                handle: device,
                gdpa,
                active: Some(active),
            }),
        );
        retire::start_thread();
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

/// The layer's `vkGetDeviceProcAddr`.
pub(crate) unsafe extern "system" fn get_device_proc_addr(
    device: vk::Device,
    name: *const c_char,
) -> vk::PFN_vkVoidFunction {
    if device == vk::Device::null() || name.is_null() {
        return None;
    }
    // SAFETY: the loader or application passes a device and a name.
    let (dev, n) = unsafe { (of(device), CStr::from_ptr(name)) };
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
        if hooks::hidden(a, n) {
            return None;
        }
        if let Some(h) = hooks::device_hook(a, n) {
            return Some(h);
        }
    }
    // SAFETY: the next layer's vkGetDeviceProcAddr.
    unsafe { (dev.gdpa)(device, name) }
}

/// Retires and releases what the layer made of `dev`; called by
/// `vkDestroyDevice` before the device goes.
///
/// # Safety
///
/// The application is destroying the device: no other call uses it.
pub unsafe fn destroy(a: &Active) {
    let _g = a.retire_lock.lock().unwrap_or_else(|e| e.into_inner());
    if a.destroyed.swap(true, Ordering::AcqRel) {
        return;
    }
    let queues: Vec<Arc<submit::QueueData>> = a
        .queues
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .values()
        .cloned()
        .collect();
    // SAFETY: the caller's promise; the retire lock is held.
    unsafe { retire::drain(a, &queues) };
    if let Some(s) = sink::get() {
        let open: u64 = queues.iter().map(|q| retire::unbalanced(q)).sum();
        s.counts.add(stat::LABEL_UNBALANCED, open);
    }
    retire::flush_frames(a, true);
    for q in &queues {
        // SAFETY: every submission of the layer's on the queue finished (or
        // was given up after the drain's deadline, when the device is
        // lost or the application destroys a device with work in flight).
        unsafe { q.destroy(a) };
    }
    a.cbs.write().unwrap_or_else(|e| e.into_inner()).clear();
    // SAFETY: as above: no work of the layer's is in flight; recordings
    // are gone, so the blocks are free.
    unsafe {
        a.ts_blocks.destroy(&a.ash);
        if let Some(b) = &a.stat_blocks {
            b.destroy(&a.ash);
        }
    }
    if let Some(s) = sink::get() {
        s.send_stats();
    }
}

/// At exit: every device's executions still in flight are counted as not
/// retired; no Vulkan call is made (the driver may be going away).
pub fn exit_all() {
    retire::EXITING.store(true, Ordering::Release);
    for d in global::devices() {
        let Some(a) = &d.active else { continue };
        // Wait (bounded) for a retire in progress to finish its calls.
        let until = std::time::Instant::now() + std::time::Duration::from_millis(500);
        let guard = loop {
            match a.retire_lock.try_lock() {
                Ok(g) => break Some(g),
                Err(std::sync::TryLockError::Poisoned(p)) => break Some(p.into_inner()),
                Err(_) if std::time::Instant::now() >= until => break None,
                Err(_) => std::thread::sleep(std::time::Duration::from_millis(1)),
            }
        };
        if a.destroyed.swap(true, Ordering::AcqRel) {
            continue;
        }
        let queues: Vec<Arc<submit::QueueData>> = a
            .queues
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect();
        let mut n = 0;
        for q in &queues {
            n += q.abandon();
        }
        if let Some(s) = sink::get() {
            s.counts.add(stat::UNRETIRED, n);
        }
        retire::flush_frames(a, true);
        // Keep the lock: no retire runs after this.
        std::mem::forget(guard);
    }
}
