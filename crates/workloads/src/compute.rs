//! The compute workload.

use ash::vk;

use crate::context::{allocate_buffer_memory, create_shader_module, GpuContext};
use crate::error::{vk_err, WorkloadError};
use crate::shader::compile_wgsl;

/// Size in bytes of one element of the storage buffer.
const ELEMENT_BYTES: u64 = 4;

/// A compute workload: each dispatch runs `W` workgroups (x dimension) of `S`
/// invocations (`@workgroup_size(S)`); each invocation does `iterations` steps
/// of cheap integer arithmetic on its own element of a storage buffer of
/// `W * S` `u32`s and writes the result back, so the work cannot be optimized
/// away.
///
/// `D` dispatches make exactly `D * W * S` compute shader invocations
/// ([`ComputeWorkload::expected_invocations`]).
///
/// The workload owns its Vulkan objects; call [`ComputeWorkload::destroy`]
/// before destroying the device.
#[derive(Debug)]
pub struct ComputeWorkload {
    workgroup_size: u32,
    workgroups: u32,
    iterations: u32,
    buffer_size: u64,
    buffer: vk::Buffer,
    memory: vk::DeviceMemory,
    set_layout: vk::DescriptorSetLayout,
    descriptor_pool: vk::DescriptorPool,
    descriptor_set: vk::DescriptorSet,
    pipeline_layout: vk::PipelineLayout,
    pipeline: vk::Pipeline,
}

/// The WGSL source of the compute shader for a workgroup size and an iteration
/// count.
pub(crate) fn compute_source(workgroup_size: u32, iterations: u32) -> String {
    format!(
        "@group(0) @binding(0) var<storage, read_write> data: array<u32>;\n\
         \n\
         @compute @workgroup_size({workgroup_size})\n\
         fn main(@builtin(global_invocation_id) gid: vec3<u32>) {{\n\
         \x20   let i = gid.x;\n\
         \x20   if (i >= arrayLength(&data)) {{\n\
         \x20       return;\n\
         \x20   }}\n\
         \x20   var x = data[i] ^ i;\n\
         \x20   for (var k = 0u; k < {iterations}u; k = k + 1u) {{\n\
         \x20       x = x * 1664525u + 1013904223u;\n\
         \x20   }}\n\
         \x20   data[i] = x;\n\
         }}\n"
    )
}

/// A device's limits on the compute workload's sizes, each with the name
/// its API gives it (for the messages).
pub(crate) struct ComputeLimits<'a> {
    /// The largest workgroup size in x.
    pub size_x: (&'static str, u32),
    /// The most invocations of one workgroup.
    pub invocations: (&'static str, u32),
    /// The most workgroups of one dispatch in x.
    pub count_x: (&'static str, u32),
    /// The limits on the storage buffer's size in bytes.
    pub buffer: &'a [(&'static str, u64)],
}

/// Checks the sizes of a compute workload against `limits` (and against
/// 0) and returns the storage buffer's size in bytes, `W * S * 4`: the one
/// check of both backends' compute workloads.
pub(crate) fn check_sizes(
    workgroup_size: u32,
    workgroups: u32,
    limits: &ComputeLimits<'_>,
) -> Result<u64, WorkloadError> {
    if workgroup_size == 0 {
        return Err(WorkloadError::invalid_size(
            &["workgroup_size"],
            "workgroup_size is 0; it must be at least 1",
        ));
    }
    if workgroups == 0 {
        return Err(WorkloadError::invalid_size(
            &["workgroups"],
            "workgroups is 0; it must be at least 1",
        ));
    }
    for (name, max) in [limits.size_x, limits.invocations] {
        if workgroup_size > max {
            return Err(WorkloadError::invalid_size(
                &["workgroup_size"],
                format!("workgroup_size {workgroup_size} is over the device limit {name} = {max}"),
            ));
        }
    }
    let (name, max) = limits.count_x;
    if workgroups > max {
        return Err(WorkloadError::invalid_size(
            &["workgroups"],
            format!("workgroups {workgroups} is over the device limit {name} = {max}"),
        ));
    }
    let buffer_size = u64::from(workgroup_size) * u64::from(workgroups) * ELEMENT_BYTES;
    for &(name, max) in limits.buffer {
        if buffer_size > max {
            return Err(WorkloadError::invalid_size(
                &["workgroup_size", "workgroups"],
                format!(
                    "storage buffer of workgroup_size {workgroup_size} * workgroups {workgroups} \
                     * 4 bytes = {buffer_size} bytes is over the device limit {name} = {max}"
                ),
            ));
        }
    }
    Ok(buffer_size)
}

impl ComputeWorkload {
    /// Builds the workload: compiles the shader for `workgroup_size`, creates
    /// the compute pipeline and a device-local storage buffer of
    /// `workgroup_size * workgroups` `u32`s.
    ///
    /// # Errors
    ///
    /// - [`WorkloadError::InvalidSize`] when `workgroup_size` or `workgroups`
    ///   is 0, `workgroup_size` is over `maxComputeWorkGroupSize[0]` or
    ///   `maxComputeWorkGroupInvocations`, `workgroups` is over
    ///   `maxComputeWorkGroupCount[0]`, or the buffer is over
    ///   `maxStorageBufferRange`; the message names the size and the limit.
    /// - [`WorkloadError::Shader`], [`WorkloadError::Vulkan`],
    ///   [`WorkloadError::NoMemoryType`] when building fails.
    pub fn new(
        ctx: &GpuContext,
        workgroup_size: u32,
        workgroups: u32,
        iterations: u32,
    ) -> Result<Self, WorkloadError> {
        let limits = ctx.properties().limits;
        let buffer_size = check_sizes(
            workgroup_size,
            workgroups,
            &ComputeLimits {
                size_x: (
                    "maxComputeWorkGroupSize[0]",
                    limits.max_compute_work_group_size[0],
                ),
                invocations: (
                    "maxComputeWorkGroupInvocations",
                    limits.max_compute_work_group_invocations,
                ),
                count_x: (
                    "maxComputeWorkGroupCount[0]",
                    limits.max_compute_work_group_count[0],
                ),
                buffer: &[(
                    "maxStorageBufferRange",
                    u64::from(limits.max_storage_buffer_range),
                )],
            },
        )?;

        let mut workload = Self {
            workgroup_size,
            workgroups,
            iterations,
            buffer_size,
            buffer: vk::Buffer::null(),
            memory: vk::DeviceMemory::null(),
            set_layout: vk::DescriptorSetLayout::null(),
            descriptor_pool: vk::DescriptorPool::null(),
            descriptor_set: vk::DescriptorSet::null(),
            pipeline_layout: vk::PipelineLayout::null(),
            pipeline: vk::Pipeline::null(),
        };
        match workload.init(ctx) {
            Ok(()) => Ok(workload),
            Err(e) => {
                // SAFETY: the objects were created just now from this device
                // and nothing has been recorded with them; null handles are
                // skipped by Vulkan's destroy functions.
                unsafe { workload.destroy(ctx.device) };
                Err(e)
            }
        }
    }

    /// Creates the Vulkan objects; on error, those already created are left in
    /// `self` for `destroy`.
    fn init(&mut self, ctx: &GpuContext) -> Result<(), WorkloadError> {
        let device = ctx.device;
        let words = compile_wgsl(&compute_source(self.workgroup_size, self.iterations))?;

        let buffer_info = vk::BufferCreateInfo::default()
            .size(self.buffer_size)
            .usage(
                vk::BufferUsageFlags::STORAGE_BUFFER
                    | vk::BufferUsageFlags::TRANSFER_SRC
                    | vk::BufferUsageFlags::TRANSFER_DST,
            )
            .sharing_mode(vk::SharingMode::EXCLUSIVE);
        // SAFETY: valid create info with a non-zero size (checked in `new`).
        self.buffer = unsafe { device.create_buffer(&buffer_info, None) }
            .map_err(vk_err("vkCreateBuffer"))?;
        self.memory = allocate_buffer_memory(
            ctx,
            self.buffer,
            vk::MemoryPropertyFlags::DEVICE_LOCAL,
            vk::MemoryPropertyFlags::empty(),
            "the compute storage buffer",
        )?;

        let bindings = [vk::DescriptorSetLayoutBinding::default()
            .binding(0)
            .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
            .descriptor_count(1)
            .stage_flags(vk::ShaderStageFlags::COMPUTE)];
        let layout_info = vk::DescriptorSetLayoutCreateInfo::default().bindings(&bindings);
        // SAFETY: valid create info; `bindings` outlives the call.
        self.set_layout = unsafe { device.create_descriptor_set_layout(&layout_info, None) }
            .map_err(vk_err("vkCreateDescriptorSetLayout"))?;

        let pool_sizes = [vk::DescriptorPoolSize::default()
            .ty(vk::DescriptorType::STORAGE_BUFFER)
            .descriptor_count(1)];
        let pool_info = vk::DescriptorPoolCreateInfo::default()
            .max_sets(1)
            .pool_sizes(&pool_sizes);
        // SAFETY: valid create info; `pool_sizes` outlives the call.
        self.descriptor_pool = unsafe { device.create_descriptor_pool(&pool_info, None) }
            .map_err(vk_err("vkCreateDescriptorPool"))?;

        let set_layouts = [self.set_layout];
        let alloc_info = vk::DescriptorSetAllocateInfo::default()
            .descriptor_pool(self.descriptor_pool)
            .set_layouts(&set_layouts);
        // SAFETY: the pool has room for exactly this one set of this layout.
        let sets = unsafe { device.allocate_descriptor_sets(&alloc_info) }
            .map_err(vk_err("vkAllocateDescriptorSets"))?;
        self.descriptor_set = sets
            .first()
            .copied()
            .ok_or_else(|| vk_err("vkAllocateDescriptorSets")(vk::Result::ERROR_UNKNOWN))?;

        let buffer_infos = [vk::DescriptorBufferInfo::default()
            .buffer(self.buffer)
            .offset(0)
            .range(vk::WHOLE_SIZE)];
        let writes = [vk::WriteDescriptorSet::default()
            .dst_set(self.descriptor_set)
            .dst_binding(0)
            .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
            .buffer_info(&buffer_infos)];
        // SAFETY: the set, binding and buffer (with memory bound) are valid,
        // and the set is not in use by any command buffer yet.
        unsafe { device.update_descriptor_sets(&writes, &[]) };

        let layout_info = vk::PipelineLayoutCreateInfo::default().set_layouts(&set_layouts);
        // SAFETY: valid create info referencing a live set layout.
        self.pipeline_layout = unsafe { device.create_pipeline_layout(&layout_info, None) }
            .map_err(vk_err("vkCreatePipelineLayout"))?;

        let module = create_shader_module(device, &words)?;
        let stage = vk::PipelineShaderStageCreateInfo::default()
            .stage(vk::ShaderStageFlags::COMPUTE)
            .module(module)
            .name(c"main");
        let pipeline_info = vk::ComputePipelineCreateInfo::default()
            .stage(stage)
            .layout(self.pipeline_layout);
        // SAFETY: the module has a compute entry point `main` whose single
        // binding matches the pipeline layout.
        let result = unsafe {
            device.create_compute_pipelines(vk::PipelineCache::null(), &[pipeline_info], None)
        };
        // SAFETY: the module is only needed while creating the pipeline.
        unsafe { device.destroy_shader_module(module, None) };
        let pipelines = result.map_err(|(_, e)| vk_err("vkCreateComputePipelines")(e))?;
        self.pipeline = pipelines
            .first()
            .copied()
            .ok_or_else(|| vk_err("vkCreateComputePipelines")(vk::Result::ERROR_UNKNOWN))?;
        Ok(())
    }

    /// The number of invocations in one workgroup (`S`).
    pub fn workgroup_size(&self) -> u32 {
        self.workgroup_size
    }

    /// The number of workgroups of one dispatch (`W`).
    pub fn workgroups(&self) -> u32 {
        self.workgroups
    }

    /// The arithmetic steps each invocation does.
    pub fn iterations(&self) -> u32 {
        self.iterations
    }

    /// The storage buffer the invocations write, `W * S` `u32`s.
    pub fn buffer(&self) -> vk::Buffer {
        self.buffer
    }

    /// The size of [`ComputeWorkload::buffer`] in bytes.
    pub fn buffer_size(&self) -> u64 {
        self.buffer_size
    }

    /// The exact number of compute shader invocations of `dispatches`
    /// dispatches: `dispatches * W * S`.
    pub fn expected_invocations(&self, dispatches: u32) -> u64 {
        // W * S <= 2^30 (the buffer fits maxStorageBufferRange), so this
        // cannot overflow; saturate anyway rather than panic.
        u64::from(dispatches)
            .saturating_mul(u64::from(self.workgroups))
            .saturating_mul(u64::from(self.workgroup_size))
    }

    /// Binds the pipeline and descriptor set and records one dispatch,
    /// `vkCmdDispatch(W, 1, 1)`. Call it `D` times for `D` dispatches, with
    /// [`ComputeWorkload::record_barrier`] in between to serialize them.
    ///
    /// # Safety
    ///
    /// - `device` must be the device the workload was created with, and
    ///   `cmd` a command buffer allocated from it, in the recording state,
    ///   outside a render pass instance, on a queue family with compute
    ///   support.
    /// - The workload must outlive the GPU's use of `cmd`: do not
    ///   [`destroy`](ComputeWorkload::destroy) it until every submission of
    ///   `cmd` has completed (or `cmd` is reset or freed unsubmitted).
    pub unsafe fn record_dispatch(&self, device: &ash::Device, cmd: vk::CommandBuffer) {
        // SAFETY: `cmd` is recording outside a render pass on a compute
        // queue family and of `device` (caller's contract); the pipeline,
        // layout and set are live objects of `device` and compatible, and
        // stay live while the GPU uses them (caller's contract).
        unsafe {
            device.cmd_bind_pipeline(cmd, vk::PipelineBindPoint::COMPUTE, self.pipeline);
            device.cmd_bind_descriptor_sets(
                cmd,
                vk::PipelineBindPoint::COMPUTE,
                self.pipeline_layout,
                0,
                &[self.descriptor_set],
                &[],
            );
            device.cmd_dispatch(cmd, self.workgroups, 1, 1);
        }
    }

    /// Records a compute-to-compute memory barrier on the storage buffer
    /// (`vkCmdPipelineBarrier2`), so that the next dispatch starts after the
    /// previous one's writes.
    ///
    /// # Safety
    ///
    /// - `device` must be the device the workload was created with, with
    ///   `synchronization2` enabled, and `cmd` a command buffer allocated
    ///   from it, in the recording state, outside a render pass instance.
    /// - The workload must outlive the GPU's use of `cmd` (see
    ///   [`ComputeWorkload::record_dispatch`]).
    pub unsafe fn record_barrier(&self, device: &ash::Device, cmd: vk::CommandBuffer) {
        let barriers = [vk::BufferMemoryBarrier2::default()
            .src_stage_mask(vk::PipelineStageFlags2::COMPUTE_SHADER)
            .src_access_mask(
                vk::AccessFlags2::SHADER_STORAGE_WRITE | vk::AccessFlags2::SHADER_STORAGE_READ,
            )
            .dst_stage_mask(vk::PipelineStageFlags2::COMPUTE_SHADER)
            .dst_access_mask(
                vk::AccessFlags2::SHADER_STORAGE_READ | vk::AccessFlags2::SHADER_STORAGE_WRITE,
            )
            .src_queue_family_index(vk::QUEUE_FAMILY_IGNORED)
            .dst_queue_family_index(vk::QUEUE_FAMILY_IGNORED)
            .buffer(self.buffer)
            .offset(0)
            .size(vk::WHOLE_SIZE)];
        let dependency = vk::DependencyInfo::default().buffer_memory_barriers(&barriers);
        // SAFETY: `cmd` is a recording command buffer of `device` outside a
        // render pass, and synchronization2 is enabled (caller's contract);
        // the barrier names a live buffer of `device` with no queue family
        // transfer, which stays live while the GPU uses it (caller's contract).
        unsafe { device.cmd_pipeline_barrier2(cmd, &dependency) };
    }

    /// Destroys the workload's Vulkan objects. Calling it again does nothing.
    ///
    /// # Safety
    ///
    /// `device` must be the device the workload was created with, and no
    /// pending command buffer may still use the workload (wait for their
    /// fences or for the device to be idle first).
    pub unsafe fn destroy(&mut self, device: &ash::Device) {
        // SAFETY: the caller guarantees the objects are of `device` and no
        // longer in use; null handles (already destroyed, or never created)
        // are ignored by the destroy functions. The set is freed with its pool.
        unsafe {
            device.destroy_pipeline(self.pipeline, None);
            device.destroy_pipeline_layout(self.pipeline_layout, None);
            device.destroy_descriptor_pool(self.descriptor_pool, None);
            device.destroy_descriptor_set_layout(self.set_layout, None);
            device.destroy_buffer(self.buffer, None);
            device.free_memory(self.memory, None);
        }
        self.pipeline = vk::Pipeline::null();
        self.pipeline_layout = vk::PipelineLayout::null();
        self.descriptor_pool = vk::DescriptorPool::null();
        self.descriptor_set = vk::DescriptorSet::null();
        self.set_layout = vk::DescriptorSetLayout::null();
        self.buffer = vk::Buffer::null();
        self.memory = vk::DeviceMemory::null();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn source_compiles_for_odd_sizes() {
        for (s, it) in [(1, 0), (13, 7), (64, 1000)] {
            compile_wgsl(&compute_source(s, it)).expect("generated compute WGSL compiles");
        }
    }
}
