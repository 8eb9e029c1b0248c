//! The device a workload is built on, and memory helpers.

use ash::vk;

use crate::error::{vk_err, WorkloadError};

/// The Vulkan objects a workload is built with. Borrowed; the workloads never
/// create or destroy instances or devices.
///
/// Made safely from a gpu-counters [`gpu_counters_vulkan::Device`]
/// ([`GpuContext::from_device`]), or from raw handles the caller vouches for
/// ([`GpuContext::from_raw`]): the workloads call Vulkan with these handles,
/// so they must belong together.
#[derive(Clone, Copy)]
pub struct GpuContext<'a> {
    /// The instance the device was created from.
    pub(crate) instance: &'a ash::Instance,
    /// The physical device of `device`.
    pub(crate) physical_device: vk::PhysicalDevice,
    /// The logical device: Vulkan 1.3 with `synchronization2`.
    pub(crate) device: &'a ash::Device,
    /// The queue family the command buffers the workloads record into are
    /// submitted to; it supports graphics and compute.
    pub(crate) queue_family_index: u32,
    /// Whether `dynamicRendering` is enabled (the render workload needs it).
    pub(crate) dynamic_rendering: bool,
}

impl<'a> GpuContext<'a> {
    /// The context of a gpu-counters device: its instance, physical and
    /// logical device and queue family, which belong together by
    /// construction.
    pub fn from_device(device: &'a gpu_counters_vulkan::Device) -> Self {
        Self {
            instance: device.instance().raw(),
            physical_device: device.physical_device(),
            device: device.raw(),
            queue_family_index: device.queue_family_index(),
            dynamic_rendering: device.enabled_features().dynamic_rendering,
        }
    }

    /// A context from raw handles.
    ///
    /// # Safety
    /// `device` must have been created from `physical_device` of `instance`
    /// with Vulkan 1.3 and the `synchronization2` feature (and
    /// `dynamicRendering` for the render workload, as `dynamic_rendering`
    /// says), `queue_family_index` must be a graphics and compute family of
    /// it, and all must outlive the workloads built with the context.
    pub unsafe fn from_raw(
        instance: &'a ash::Instance,
        physical_device: vk::PhysicalDevice,
        device: &'a ash::Device,
        queue_family_index: u32,
        dynamic_rendering: bool,
    ) -> Self {
        Self {
            instance,
            physical_device,
            device,
            queue_family_index,
            dynamic_rendering,
        }
    }

    /// The logical device.
    pub fn device(&self) -> &'a ash::Device {
        self.device
    }

    /// The queue family index.
    pub fn queue_family_index(&self) -> u32 {
        self.queue_family_index
    }
}

impl std::fmt::Debug for GpuContext<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuContext")
            .field("instance", &self.instance.handle())
            .field("physical_device", &self.physical_device)
            .field("device", &self.device.handle())
            .field("queue_family_index", &self.queue_family_index)
            .finish()
    }
}

impl GpuContext<'_> {
    /// The physical device's properties (limits included).
    pub(crate) fn properties(&self) -> vk::PhysicalDeviceProperties {
        // SAFETY: `physical_device` was enumerated from `instance` (a
        // requirement of `GpuContext`), and the call only reads properties.
        unsafe {
            self.instance
                .get_physical_device_properties(self.physical_device)
        }
    }

    /// The physical device's memory types and heaps.
    pub(crate) fn memory_properties(&self) -> vk::PhysicalDeviceMemoryProperties {
        // SAFETY: as in `properties`: a valid physical device of `instance`.
        unsafe {
            self.instance
                .get_physical_device_memory_properties(self.physical_device)
        }
    }
}

/// Finds the index of the first memory type that is allowed by `type_bits` (the
/// `memoryTypeBits` of a `vk::MemoryRequirements`) and has all of `flags`.
///
/// # Errors
///
/// [`WorkloadError::NoMemoryType`] when no memory type fits.
pub fn find_memory_type(
    ctx: &GpuContext,
    type_bits: u32,
    flags: vk::MemoryPropertyFlags,
) -> Result<u32, WorkloadError> {
    let props = ctx.memory_properties();
    let count = props.memory_type_count.min(vk::MAX_MEMORY_TYPES as u32);
    (0..count)
        .find(|&i| {
            let allowed = type_bits & (1u32 << i) != 0;
            let has_flags = props
                .memory_types
                .get(i as usize)
                .is_some_and(|t| t.property_flags.contains(flags));
            allowed && has_flags
        })
        .ok_or(WorkloadError::NoMemoryType(
            "the requested memory type bits and property flags",
        ))
}

/// The size of the largest memory heap that has all of `flags`, or of any heap
/// when none has them. Used to reject sizes that can never be allocated.
pub(crate) fn largest_heap(ctx: &GpuContext, flags: vk::MemoryHeapFlags) -> u64 {
    let props = ctx.memory_properties();
    let count = props.memory_heap_count.min(vk::MAX_MEMORY_HEAPS as u32) as usize;
    let heaps = props.memory_heaps.get(..count).unwrap_or(&[]);
    heaps
        .iter()
        .filter(|h| h.flags.contains(flags))
        .map(|h| h.size)
        .max()
        .or_else(|| heaps.iter().map(|h| h.size).max())
        .unwrap_or(0)
}

/// Allocates memory for `buffer` from the first memory type with `preferred`
/// flags, else with `required` flags, and binds it. `what` names the buffer in
/// [`WorkloadError::NoMemoryType`].
pub(crate) fn allocate_buffer_memory(
    ctx: &GpuContext,
    buffer: vk::Buffer,
    preferred: vk::MemoryPropertyFlags,
    required: vk::MemoryPropertyFlags,
    what: &'static str,
) -> Result<vk::DeviceMemory, WorkloadError> {
    let device = ctx.device;
    // SAFETY: `buffer` is a valid buffer created from `device` by this crate.
    let reqs = unsafe { device.get_buffer_memory_requirements(buffer) };
    let memory = allocate(ctx, reqs, preferred, required, what)?;
    // SAFETY: `memory` was just allocated from a type allowed by the buffer's
    // requirements with at least `reqs.size` bytes; offset 0 satisfies any
    // alignment; the buffer has no memory bound yet.
    if let Err(e) = unsafe { device.bind_buffer_memory(buffer, memory, 0) } {
        // SAFETY: `memory` is unused (binding failed) and owned by us.
        unsafe { device.free_memory(memory, None) };
        return Err(vk_err("vkBindBufferMemory")(e));
    }
    Ok(memory)
}

/// Allocates memory for `image` as [`allocate_buffer_memory`] does for a buffer.
pub(crate) fn allocate_image_memory(
    ctx: &GpuContext,
    image: vk::Image,
    preferred: vk::MemoryPropertyFlags,
    required: vk::MemoryPropertyFlags,
    what: &'static str,
) -> Result<vk::DeviceMemory, WorkloadError> {
    let device = ctx.device;
    // SAFETY: `image` is a valid image created from `device` by this crate.
    let reqs = unsafe { device.get_image_memory_requirements(image) };
    let memory = allocate(ctx, reqs, preferred, required, what)?;
    // SAFETY: as for buffers: fitting type and size, offset 0, nothing bound.
    if let Err(e) = unsafe { device.bind_image_memory(image, memory, 0) } {
        // SAFETY: `memory` is unused (binding failed) and owned by us.
        unsafe { device.free_memory(memory, None) };
        return Err(vk_err("vkBindImageMemory")(e));
    }
    Ok(memory)
}

fn allocate(
    ctx: &GpuContext,
    reqs: vk::MemoryRequirements,
    preferred: vk::MemoryPropertyFlags,
    required: vk::MemoryPropertyFlags,
    what: &'static str,
) -> Result<vk::DeviceMemory, WorkloadError> {
    let type_index = find_memory_type(ctx, reqs.memory_type_bits, preferred)
        .or_else(|_| find_memory_type(ctx, reqs.memory_type_bits, required))
        .map_err(|_| WorkloadError::NoMemoryType(what))?;
    let info = vk::MemoryAllocateInfo::default()
        .allocation_size(reqs.size)
        .memory_type_index(type_index);
    // SAFETY: `info` is a valid allocation info for a memory type of this
    // device; the returned memory is owned and freed by the caller.
    unsafe { ctx.device.allocate_memory(&info, None) }.map_err(vk_err("vkAllocateMemory"))
}

/// Creates a shader module from SPIR-V words.
pub(crate) fn create_shader_module(
    device: &ash::Device,
    words: &[u32],
) -> Result<vk::ShaderModule, WorkloadError> {
    let info = vk::ShaderModuleCreateInfo::default().code(words);
    // SAFETY: `words` is SPIR-V written and validated by naga (see
    // `compile_wgsl`); `info` borrows it for the duration of the call.
    unsafe { device.create_shader_module(&info, None) }.map_err(vk_err("vkCreateShaderModule"))
}
