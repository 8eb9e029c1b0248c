//! The copy (blit) workload.

use ash::vk;

use crate::context::{allocate_buffer_memory, largest_heap, GpuContext};
use crate::error::{vk_err, WorkloadError};

/// A blit workload: a copy of `bytes` bytes from one device-local buffer to
/// another (`vkCmdCopyBuffer`), optionally after filling the source
/// (`vkCmdFillBuffer`).
///
/// The workload owns its Vulkan objects; call [`CopyWorkload::destroy`]
/// before destroying the device.
#[derive(Debug)]
pub struct CopyWorkload {
    bytes: u64,
    src: vk::Buffer,
    src_memory: vk::DeviceMemory,
    dst: vk::Buffer,
    dst_memory: vk::DeviceMemory,
}

impl CopyWorkload {
    /// Creates two device-local buffers of `bytes` bytes each.
    ///
    /// # Errors
    ///
    /// - [`WorkloadError::InvalidSize`] when `bytes` is 0 or larger than the
    ///   largest device-local memory heap.
    /// - [`WorkloadError::Vulkan`], [`WorkloadError::NoMemoryType`] when
    ///   building fails (e.g. out of device memory).
    pub fn new(ctx: &GpuContext, bytes: u64) -> Result<Self, WorkloadError> {
        if bytes == 0 {
            return Err(WorkloadError::invalid_size(
                &["bytes"],
                "bytes is 0; it must be at least 1",
            ));
        }
        let heap = largest_heap(ctx, vk::MemoryHeapFlags::DEVICE_LOCAL);
        if bytes > heap {
            return Err(WorkloadError::invalid_size(
                &["bytes"],
                format!("bytes {bytes} is over the largest device-local memory heap, {heap} bytes"),
            ));
        }
        let mut workload = Self {
            bytes,
            src: vk::Buffer::null(),
            src_memory: vk::DeviceMemory::null(),
            dst: vk::Buffer::null(),
            dst_memory: vk::DeviceMemory::null(),
        };
        match workload.init(ctx) {
            Ok(()) => Ok(workload),
            Err(e) => {
                // SAFETY: the objects were created just now from this device
                // and never used; null handles are ignored.
                unsafe { workload.destroy(ctx.device) };
                Err(e)
            }
        }
    }

    fn init(&mut self, ctx: &GpuContext) -> Result<(), WorkloadError> {
        let info = vk::BufferCreateInfo::default()
            .size(self.bytes)
            .usage(vk::BufferUsageFlags::TRANSFER_SRC | vk::BufferUsageFlags::TRANSFER_DST)
            .sharing_mode(vk::SharingMode::EXCLUSIVE);
        // SAFETY: valid create info with a non-zero size.
        self.src =
            unsafe { ctx.device.create_buffer(&info, None) }.map_err(vk_err("vkCreateBuffer"))?;
        self.src_memory = allocate_buffer_memory(
            ctx,
            self.src,
            vk::MemoryPropertyFlags::DEVICE_LOCAL,
            vk::MemoryPropertyFlags::empty(),
            "the copy source buffer",
        )?;
        // SAFETY: as above.
        self.dst =
            unsafe { ctx.device.create_buffer(&info, None) }.map_err(vk_err("vkCreateBuffer"))?;
        self.dst_memory = allocate_buffer_memory(
            ctx,
            self.dst,
            vk::MemoryPropertyFlags::DEVICE_LOCAL,
            vk::MemoryPropertyFlags::empty(),
            "the copy destination buffer",
        )?;
        Ok(())
    }

    /// The number of bytes one [`CopyWorkload::record_copy`] copies.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The source buffer.
    pub fn src_buffer(&self) -> vk::Buffer {
        self.src
    }

    /// The destination buffer.
    pub fn dst_buffer(&self) -> vk::Buffer {
        self.dst
    }

    /// Fills the source buffer with the 32-bit `value` repeated
    /// (`vkCmdFillBuffer`; when `bytes` is not a multiple of 4 the last
    /// `bytes % 4` bytes are left as they are), then records a
    /// transfer-to-transfer barrier so a following copy reads the filled data.
    ///
    /// # Safety
    ///
    /// - `device` must be the device the workload was created with, with
    ///   `synchronization2` enabled, and `cmd` a command buffer allocated
    ///   from it, in the recording state, outside a render pass instance, on
    ///   a queue family with transfer, graphics or compute support.
    /// - The workload must outlive the GPU's use of `cmd`: do not
    ///   [`destroy`](CopyWorkload::destroy) it until every submission of
    ///   `cmd` has completed (or `cmd` is reset or freed unsubmitted).
    pub unsafe fn record_fill(&self, device: &ash::Device, cmd: vk::CommandBuffer, value: u32) {
        // SAFETY: `cmd` is a recording command buffer of `device` outside a
        // render pass (caller's contract); the buffer is live with
        // TRANSFER_DST usage and stays live while the GPU uses it (caller's
        // contract); WHOLE_SIZE is always a valid fill size from offset 0.
        unsafe { device.cmd_fill_buffer(cmd, self.src, 0, vk::WHOLE_SIZE, value) };
        // SAFETY: this function's own contract is `record_barrier`'s.
        unsafe { self.record_barrier(device, cmd) };
    }

    /// Records `vkCmdCopyBuffer` of `bytes` bytes from the source to the
    /// destination buffer, both at offset 0.
    ///
    /// # Safety
    ///
    /// - `device` must be the device the workload was created with, and
    ///   `cmd` a command buffer allocated from it, in the recording state,
    ///   outside a render pass instance, on a queue family with transfer,
    ///   graphics or compute support.
    /// - The workload must outlive the GPU's use of `cmd` (see
    ///   [`CopyWorkload::record_fill`]).
    pub unsafe fn record_copy(&self, device: &ash::Device, cmd: vk::CommandBuffer) {
        let regions = [vk::BufferCopy {
            src_offset: 0,
            dst_offset: 0,
            size: self.bytes,
        }];
        // SAFETY: `cmd` is a recording command buffer of `device` outside a
        // render pass (caller's contract); both buffers are live (and stay so
        // while the GPU uses them: caller's contract), `bytes` long, with the
        // needed usages, and distinct, so the region does not overlap itself.
        unsafe { device.cmd_copy_buffer(cmd, self.src, self.dst, &regions) };
    }

    /// Records a transfer-to-transfer memory barrier on both buffers
    /// (`vkCmdPipelineBarrier2`), to serialize repeated fills and copies.
    ///
    /// # Safety
    ///
    /// - `device` must be the device the workload was created with, with
    ///   `synchronization2` enabled, and `cmd` a command buffer allocated
    ///   from it, in the recording state, outside a render pass instance.
    /// - The workload must outlive the GPU's use of `cmd` (see
    ///   [`CopyWorkload::record_fill`]).
    pub unsafe fn record_barrier(&self, device: &ash::Device, cmd: vk::CommandBuffer) {
        let barrier = |buffer| {
            vk::BufferMemoryBarrier2::default()
                .src_stage_mask(vk::PipelineStageFlags2::TRANSFER)
                .src_access_mask(vk::AccessFlags2::TRANSFER_WRITE | vk::AccessFlags2::TRANSFER_READ)
                .dst_stage_mask(vk::PipelineStageFlags2::TRANSFER)
                .dst_access_mask(vk::AccessFlags2::TRANSFER_READ | vk::AccessFlags2::TRANSFER_WRITE)
                .src_queue_family_index(vk::QUEUE_FAMILY_IGNORED)
                .dst_queue_family_index(vk::QUEUE_FAMILY_IGNORED)
                .buffer(buffer)
                .offset(0)
                .size(vk::WHOLE_SIZE)
        };
        let barriers = [barrier(self.src), barrier(self.dst)];
        let dependency = vk::DependencyInfo::default().buffer_memory_barriers(&barriers);
        // SAFETY: `cmd` is a recording command buffer of `device` outside a
        // render pass, and synchronization2 is enabled (caller's contract);
        // the barriers name live buffers of `device` with no queue family
        // transfer, which stay live while the GPU uses them (caller's
        // contract).
        unsafe { device.cmd_pipeline_barrier2(cmd, &dependency) };
    }

    /// Destroys the workload's buffers and memory. Calling it again does
    /// nothing.
    ///
    /// # Safety
    ///
    /// `device` must be the device the workload was created with, and no
    /// pending command buffer may still use the workload.
    pub unsafe fn destroy(&mut self, device: &ash::Device) {
        // SAFETY: the caller guarantees the objects are of `device` and no
        // longer in use; null handles are ignored by the destroy functions.
        unsafe {
            device.destroy_buffer(self.src, None);
            device.free_memory(self.src_memory, None);
            device.destroy_buffer(self.dst, None);
            device.free_memory(self.dst_memory, None);
        }
        self.src = vk::Buffer::null();
        self.src_memory = vk::DeviceMemory::null();
        self.dst = vk::Buffer::null();
        self.dst_memory = vk::DeviceMemory::null();
    }
}
