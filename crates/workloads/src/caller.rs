//! A command buffer of the caller's own, as a renderer holds one, for
//! tests and examples of `CommandBuffer::from_raw`.

use crate::error::{vk_err, WorkloadError};
use ash::vk;
use gpu_counters_vulkan::Device;

/// A command pool of the device's queue family with one primary command
/// buffer, begun for recording, and a fence: what a caller's renderer owns.
/// [`CallerCommandBuffer::submit`] ends and submits it under the device's
/// queue lock; dropping it waits for the fence (if submitted) and destroys
/// the pool and fence.
pub struct CallerCommandBuffer {
    device: Device,
    pool: vk::CommandPool,
    raw: vk::CommandBuffer,
    fence: vk::Fence,
    submitted: bool,
}

impl CallerCommandBuffer {
    /// A new command buffer, recording.
    pub fn new(device: &Device) -> Result<Self, WorkloadError> {
        let d = device.raw();
        // SAFETY: a valid create-info on a live device; destroyed in `Drop`.
        let pool = unsafe {
            d.create_command_pool(
                &vk::CommandPoolCreateInfo::default()
                    .queue_family_index(device.queue_family_index()),
                None,
            )
        }
        .map_err(vk_err("vkCreateCommandPool"))?;
        let mut this = Self {
            device: device.clone(),
            pool,
            raw: vk::CommandBuffer::null(),
            fence: vk::Fence::null(),
            submitted: false,
        };
        // SAFETY: the pool is this device's; the buffer and fence are
        // destroyed with it in `Drop` (which runs on the error paths too).
        unsafe {
            this.raw = d
                .allocate_command_buffers(
                    &vk::CommandBufferAllocateInfo::default()
                        .command_pool(pool)
                        .level(vk::CommandBufferLevel::PRIMARY)
                        .command_buffer_count(1),
                )
                .map_err(vk_err("vkAllocateCommandBuffers"))?[0];
            d.begin_command_buffer(this.raw, &vk::CommandBufferBeginInfo::default())
                .map_err(vk_err("vkBeginCommandBuffer"))?;
            this.fence = d
                .create_fence(&vk::FenceCreateInfo::default(), None)
                .map_err(vk_err("vkCreateFence"))?;
        }
        Ok(this)
    }

    /// The command buffer, for `CommandBuffer::from_raw` and raw commands.
    pub fn raw(&self) -> vk::CommandBuffer {
        self.raw
    }

    /// Ends recording and submits it to the device's queue, under
    /// `Device::queue`'s lock (once).
    pub fn submit(&mut self) -> Result<(), WorkloadError> {
        if self.submitted {
            return Err(WorkloadError::Vulkan(gpu_counters_hal::Error::Internal(
                "a caller's command buffer submitted twice".into(),
            )));
        }
        let d = self.device.raw();
        let infos = [vk::CommandBufferSubmitInfo::default().command_buffer(self.raw)];
        let submit = [vk::SubmitInfo2::default().command_buffer_infos(&infos)];
        let queue = self.device.queue().lock().map_err(|_| {
            WorkloadError::Vulkan(gpu_counters_hal::Error::Internal(
                "queue lock poisoned".into(),
            ))
        })?;
        // SAFETY: the buffer is recording (begun in `new`, submitted at most
        // once); the queue is locked above; the fence is unsignaled.
        unsafe {
            d.end_command_buffer(self.raw)
                .map_err(vk_err("vkEndCommandBuffer"))?;
            d.queue_submit2(*queue, &submit, self.fence)
                .map_err(vk_err("vkQueueSubmit2"))?;
        }
        self.submitted = true;
        Ok(())
    }

    /// Waits until the GPU finished it (at once if it was never submitted).
    pub fn wait(&self) -> Result<(), WorkloadError> {
        if !self.submitted {
            return Ok(());
        }
        // SAFETY: the fence is this device's and was submitted.
        unsafe {
            self.device
                .raw()
                .wait_for_fences(&[self.fence], true, u64::MAX)
        }
        .map_err(vk_err("vkWaitForFences"))
    }
}

impl Drop for CallerCommandBuffer {
    fn drop(&mut self) {
        if self.wait().is_err() {
            // Device lost: the GPU may never let go of them; leak them.
            return;
        }
        let d = self.device.raw();
        // SAFETY: the GPU finished with the buffer (waited above, or never
        // submitted); null handles are ignored.
        unsafe {
            d.destroy_fence(self.fence, None);
            d.destroy_command_pool(self.pool, None);
        }
    }
}
