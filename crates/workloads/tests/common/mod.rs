//! Test harness: a Vulkan 1.3 instance with the Khronos validation layer and a
//! debug messenger that records every warning and error, and a device with the
//! features the workloads and the queries need.

#![allow(dead_code)]

use std::ffi::{c_void, CStr};
use std::sync::{Mutex, MutexGuard};

use ash::vk;
use gpu_counters_workloads::{find_memory_type, GpuContext};

/// Every WARNING or ERROR message the validation layer (or loader) sent.
pub static MESSAGES: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Serializes the tests of one binary so each message is attributed to the
/// test that caused it.
static SERIAL: Mutex<()> = Mutex::new(());

const VALIDATION_LAYER: &CStr = c"VK_LAYER_KHRONOS_validation";

unsafe extern "system" fn debug_callback(
    severity: vk::DebugUtilsMessageSeverityFlagsEXT,
    types: vk::DebugUtilsMessageTypeFlagsEXT,
    data: *const vk::DebugUtilsMessengerCallbackDataEXT<'_>,
    _user: *mut c_void,
) -> vk::Bool32 {
    let wanted = vk::DebugUtilsMessageSeverityFlagsEXT::WARNING
        | vk::DebugUtilsMessageSeverityFlagsEXT::ERROR;
    if severity.intersects(wanted) {
        // SAFETY: the loader passes a valid callback data pointer whose
        // message, when not null, is a NUL-terminated string.
        let message = unsafe {
            data.as_ref()
                .and_then(|d| d.message_as_c_str())
                .map(|m| m.to_string_lossy().into_owned())
                .unwrap_or_default()
        };
        let line = format!("{severity:?} {types:?}: {message}");
        eprintln!("{line}");
        MESSAGES
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(line);
    }
    vk::FALSE
}

/// A device to run workloads on; dropped at the end of each test.
pub struct Gpu {
    _serial: MutexGuard<'static, ()>,
    pub entry: ash::Entry,
    pub instance: ash::Instance,
    debug_utils: ash::ext::debug_utils::Instance,
    messenger: vk::DebugUtilsMessengerEXT,
    pub physical_device: vk::PhysicalDevice,
    pub device: ash::Device,
    pub queue_family_index: u32,
    pub queue: vk::Queue,
    command_pool: vk::CommandPool,
    torn_down: bool,
}

fn messenger_info() -> vk::DebugUtilsMessengerCreateInfoEXT<'static> {
    vk::DebugUtilsMessengerCreateInfoEXT::default()
        .message_severity(
            vk::DebugUtilsMessageSeverityFlagsEXT::WARNING
                | vk::DebugUtilsMessageSeverityFlagsEXT::ERROR,
        )
        .message_type(
            vk::DebugUtilsMessageTypeFlagsEXT::GENERAL
                | vk::DebugUtilsMessageTypeFlagsEXT::VALIDATION
                | vk::DebugUtilsMessageTypeFlagsEXT::PERFORMANCE,
        )
        .pfn_user_callback(Some(debug_callback))
}

impl Gpu {
    /// Creates the instance (validation layer on), the messenger, and a
    /// device on the first physical device. Panics with a clear message when
    /// something is missing.
    pub fn new() -> Self {
        let serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        MESSAGES.lock().unwrap_or_else(|e| e.into_inner()).clear();

        // SAFETY: loading the system Vulkan loader library.
        let entry = unsafe { ash::Entry::load() }
            .expect("cannot load the Vulkan loader (libvulkan.so.1); install libvulkan1");
        // SAFETY: a plain global query.
        let layers = unsafe { entry.enumerate_instance_layer_properties() }
            .expect("vkEnumerateInstanceLayerProperties");
        let has_layer = layers
            .iter()
            .any(|l| l.layer_name_as_c_str().ok() == Some(VALIDATION_LAYER));
        assert!(
            has_layer,
            "the Vulkan validation layer VK_LAYER_KHRONOS_validation is not installed \
             (Debian/Ubuntu: apt-get install vulkan-validationlayers); found layers: {:?}",
            layers
                .iter()
                .map(|l| l
                    .layer_name_as_c_str()
                    .map(|s| s.to_string_lossy().into_owned()))
                .collect::<Vec<_>>()
        );

        let app = vk::ApplicationInfo::default()
            .application_name(c"gpu-counters-workloads tests")
            .api_version(vk::API_VERSION_1_3);
        let layer_names = [VALIDATION_LAYER.as_ptr()];
        let extension_names = [ash::ext::debug_utils::NAME.as_ptr()];
        let mut instance_messenger = messenger_info();
        let instance_info = vk::InstanceCreateInfo::default()
            .application_info(&app)
            .enabled_layer_names(&layer_names)
            .enabled_extension_names(&extension_names)
            .push_next(&mut instance_messenger);
        // SAFETY: valid create info; the layer and extension exist.
        let instance =
            unsafe { entry.create_instance(&instance_info, None) }.expect("vkCreateInstance");
        let debug_utils = ash::ext::debug_utils::Instance::new(&entry, &instance);
        // SAFETY: valid create info for an instance with debug utils enabled.
        let messenger =
            unsafe { debug_utils.create_debug_utils_messenger(&messenger_info(), None) }
                .expect("vkCreateDebugUtilsMessengerEXT");

        // SAFETY: valid instance.
        let physical_devices =
            unsafe { instance.enumerate_physical_devices() }.expect("vkEnumeratePhysicalDevices");
        let physical_device = *physical_devices
            .first()
            .expect("no Vulkan physical device (install mesa-vulkan-drivers for lavapipe)");
        // SAFETY: valid physical device.
        let props = unsafe { instance.get_physical_device_properties(physical_device) };
        eprintln!(
            "device: {:?}, API {}.{}",
            props.device_name_as_c_str().unwrap_or(c"?"),
            vk::api_version_major(props.api_version),
            vk::api_version_minor(props.api_version)
        );
        assert!(
            props.api_version >= vk::API_VERSION_1_3,
            "the device must support Vulkan 1.3"
        );

        let mut f13 = vk::PhysicalDeviceVulkan13Features::default();
        let mut features2 = vk::PhysicalDeviceFeatures2::default().push_next(&mut f13);
        // SAFETY: valid physical device; the chain is well formed.
        unsafe { instance.get_physical_device_features2(physical_device, &mut features2) };
        let base = features2.features;
        assert_eq!(
            base.pipeline_statistics_query,
            vk::TRUE,
            "no pipelineStatisticsQuery"
        );
        assert_eq!(
            base.occlusion_query_precise,
            vk::TRUE,
            "no occlusionQueryPrecise"
        );
        assert_eq!(f13.synchronization2, vk::TRUE, "no synchronization2");
        assert_eq!(f13.dynamic_rendering, vk::TRUE, "no dynamicRendering");

        // SAFETY: valid physical device.
        let families =
            unsafe { instance.get_physical_device_queue_family_properties(physical_device) };
        let wanted = vk::QueueFlags::GRAPHICS | vk::QueueFlags::COMPUTE;
        let queue_family_index = families
            .iter()
            .position(|f| f.queue_flags.contains(wanted))
            .expect("no graphics+compute queue family") as u32;

        let priorities = [1.0f32];
        let queue_infos = [vk::DeviceQueueCreateInfo::default()
            .queue_family_index(queue_family_index)
            .queue_priorities(&priorities)];
        let enabled = vk::PhysicalDeviceFeatures {
            pipeline_statistics_query: vk::TRUE,
            occlusion_query_precise: vk::TRUE,
            ..Default::default()
        };
        let mut enabled13 = vk::PhysicalDeviceVulkan13Features::default()
            .synchronization2(true)
            .dynamic_rendering(true);
        let device_info = vk::DeviceCreateInfo::default()
            .queue_create_infos(&queue_infos)
            .enabled_features(&enabled)
            .push_next(&mut enabled13);
        // SAFETY: valid create info with supported features.
        let device = unsafe { instance.create_device(physical_device, &device_info, None) }
            .expect("vkCreateDevice");
        // SAFETY: the family and index 0 were created with the device.
        let queue = unsafe { device.get_device_queue(queue_family_index, 0) };
        let pool_info = vk::CommandPoolCreateInfo::default().queue_family_index(queue_family_index);
        // SAFETY: valid create info.
        let command_pool =
            unsafe { device.create_command_pool(&pool_info, None) }.expect("vkCreateCommandPool");

        Self {
            _serial: serial,
            entry,
            instance,
            debug_utils,
            messenger,
            physical_device,
            device,
            queue_family_index,
            queue,
            command_pool,
            torn_down: false,
        }
    }

    /// The context the workloads are built with.
    pub fn ctx(&self) -> GpuContext<'_> {
        // SAFETY: the device was created above from this physical device of
        // this instance with Vulkan 1.3, synchronization2 and
        // dynamicRendering, on a graphics and compute family, and all live as
        // long as `self`, which the context borrows.
        unsafe {
            GpuContext::from_raw(
                &self.instance,
                self.physical_device,
                &self.device,
                self.queue_family_index,
                true,
            )
        }
    }

    /// The device limits.
    pub fn limits(&self) -> vk::PhysicalDeviceLimits {
        // SAFETY: valid physical device.
        unsafe {
            self.instance
                .get_physical_device_properties(self.physical_device)
        }
        .limits
    }

    /// Records one primary command buffer with `record`, submits it and waits
    /// for it to finish.
    pub fn submit_and_wait(&self, record: impl FnOnce(vk::CommandBuffer)) {
        let device = &self.device;
        let alloc = vk::CommandBufferAllocateInfo::default()
            .command_pool(self.command_pool)
            .level(vk::CommandBufferLevel::PRIMARY)
            .command_buffer_count(1);
        // SAFETY: valid pool of this device; everything below uses this
        // command buffer on this thread only and waits before freeing it.
        unsafe {
            let cmd = device.allocate_command_buffers(&alloc).expect("allocate")[0];
            device
                .begin_command_buffer(
                    cmd,
                    &vk::CommandBufferBeginInfo::default()
                        .flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT),
                )
                .expect("vkBeginCommandBuffer");
            record(cmd);
            device.end_command_buffer(cmd).expect("vkEndCommandBuffer");
            let fence = device
                .create_fence(&vk::FenceCreateInfo::default(), None)
                .expect("vkCreateFence");
            let cmds = [cmd];
            let submit = vk::SubmitInfo::default().command_buffers(&cmds);
            device
                .queue_submit(self.queue, &[submit], fence)
                .expect("vkQueueSubmit");
            device
                .wait_for_fences(&[fence], true, u64::MAX)
                .expect("vkWaitForFences");
            device.destroy_fence(fence, None);
            device.free_command_buffers(self.command_pool, &cmds);
        }
    }

    /// Creates a query pool of `ty` with `count` queries.
    pub fn query_pool(
        &self,
        ty: vk::QueryType,
        statistics: vk::QueryPipelineStatisticFlags,
        count: u32,
    ) -> vk::QueryPool {
        let info = vk::QueryPoolCreateInfo::default()
            .query_type(ty)
            .query_count(count)
            .pipeline_statistics(statistics);
        // SAFETY: valid create info; the needed features are enabled.
        unsafe { self.device.create_query_pool(&info, None) }.expect("vkCreateQueryPool")
    }

    /// Reads `N` 64-bit values of query 0, waiting for them.
    pub fn query_results<const N: usize>(&self, pool: vk::QueryPool) -> [u64; N] {
        let mut data = [[0u64; N]; 1];
        // SAFETY: the pool has at least one query whose result has N values.
        unsafe {
            self.device.get_query_pool_results(
                pool,
                0,
                &mut data,
                vk::QueryResultFlags::TYPE_64 | vk::QueryResultFlags::WAIT,
            )
        }
        .expect("vkGetQueryPoolResults");
        data[0]
    }

    /// A host-visible, host-coherent buffer of `size` bytes usable as a
    /// transfer destination.
    pub fn host_buffer(&self, size: u64) -> HostBuffer {
        let device = &self.device;
        let info = vk::BufferCreateInfo::default()
            .size(size)
            .usage(vk::BufferUsageFlags::TRANSFER_DST)
            .sharing_mode(vk::SharingMode::EXCLUSIVE);
        // SAFETY: valid create info; memory is allocated from a fitting type
        // and bound once; the mapping covers the whole allocation.
        unsafe {
            let buffer = device.create_buffer(&info, None).expect("vkCreateBuffer");
            let reqs = device.get_buffer_memory_requirements(buffer);
            let type_index = find_memory_type(
                &self.ctx(),
                reqs.memory_type_bits,
                vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT,
            )
            .expect("host-visible memory");
            let memory = device
                .allocate_memory(
                    &vk::MemoryAllocateInfo::default()
                        .allocation_size(reqs.size)
                        .memory_type_index(type_index),
                    None,
                )
                .expect("vkAllocateMemory");
            device
                .bind_buffer_memory(buffer, memory, 0)
                .expect("vkBindBufferMemory");
            let ptr = device
                .map_memory(memory, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty())
                .expect("vkMapMemory");
            HostBuffer {
                buffer,
                memory,
                ptr: ptr.cast(),
                size: size as usize,
            }
        }
    }

    /// Records a transfer-write to host-read barrier, so the host can read
    /// what transfers wrote after the submission's fence signals.
    pub fn record_transfer_to_host(&self, cmd: vk::CommandBuffer) {
        let barriers = [vk::MemoryBarrier2::default()
            .src_stage_mask(vk::PipelineStageFlags2::TRANSFER)
            .src_access_mask(vk::AccessFlags2::TRANSFER_WRITE)
            .dst_stage_mask(vk::PipelineStageFlags2::HOST)
            .dst_access_mask(vk::AccessFlags2::HOST_READ)];
        // SAFETY: `cmd` is recording outside a render pass.
        unsafe {
            self.device.cmd_pipeline_barrier2(
                cmd,
                &vk::DependencyInfo::default().memory_barriers(&barriers),
            )
        };
    }

    /// Waits for the device, destroys everything, and asserts that the
    /// validation layer sent no warning or error.
    pub fn finish(mut self) {
        self.teardown();
        // Taken while this test still holds the serializing lock.
        let messages = std::mem::take(&mut *MESSAGES.lock().unwrap_or_else(|e| e.into_inner()));
        assert!(
            messages.is_empty(),
            "validation layer reported {} warning(s)/error(s):\n{}",
            messages.len(),
            messages.join("\n")
        );
    }

    fn teardown(&mut self) {
        if std::mem::replace(&mut self.torn_down, true) {
            return;
        }
        // SAFETY: every object was created here; waiting for idle first means
        // none is in use when destroyed.
        unsafe {
            let _ = self.device.device_wait_idle();
            self.device.destroy_command_pool(self.command_pool, None);
            self.device.destroy_device(None);
            self.debug_utils
                .destroy_debug_utils_messenger(self.messenger, None);
            self.instance.destroy_instance(None);
        }
    }
}

impl Drop for Gpu {
    fn drop(&mut self) {
        self.teardown();
    }
}

/// A mapped host-visible buffer.
pub struct HostBuffer {
    pub buffer: vk::Buffer,
    memory: vk::DeviceMemory,
    ptr: *const u8,
    size: usize,
}

impl HostBuffer {
    /// The buffer's bytes (read after the GPU work writing them finished).
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: `ptr` maps at least `size` bytes of coherent memory that
        // stays mapped until `destroy`.
        unsafe { std::slice::from_raw_parts(self.ptr, self.size) }
    }

    /// Frees the buffer.
    pub fn destroy(self, device: &ash::Device) {
        // SAFETY: the caller waited for the GPU work using it.
        unsafe {
            device.destroy_buffer(self.buffer, None);
            device.free_memory(self.memory, None);
        }
    }
}
