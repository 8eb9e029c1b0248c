//! Thin ownership wrapper around a `VkQueryPool`.

use crate::buffer::{GpuBuffer, MemoryLocation};
use crate::util::vk_err;
use crate::Device;
use ash::vk;
use gpu_counters_core::bookkeeping::QueryRead;
use gpu_counters_core::{Error, Result};
use std::sync::{Mutex, MutexGuard};

pub(crate) struct QueryPool {
    pub(crate) device: Device,
    pub(crate) raw: vk::QueryPool,
    /// `u64` values per query (without the availability word).
    pub(crate) values: u32,
    /// Where large resolves copy the results on the GPU (made on first use;
    /// `Unavailable` where the device has no host-cached memory).
    staging: Mutex<StagingState>,
}

/// How long a staged read waits for its GPU copy before reading through
/// the driver instead. The copy follows no work of this pool (every query
/// read is done), but the queue may hold the caller's work ahead of it.
const STAGED_COPY_TIMEOUT_NS: u64 = 1_000_000_000;

enum StagingState {
    /// Not made yet.
    None,
    /// The device has no host-cached memory, or making it failed: reads go
    /// through the driver.
    Unavailable,
    Ready(Staging),
}

/// A host-cached buffer the results are copied into, and the command
/// buffer and fence that copy them.
struct Staging {
    buffer: GpuBuffer,
    pool: vk::CommandPool,
    cmd: vk::CommandBuffer,
    fence: vk::Fence,
    /// A copy was submitted and its fence not yet seen signaled: the
    /// command buffer and the buffer are still the GPU's.
    in_flight: bool,
}

impl Staging {
    fn new(device: &Device, bytes: u64) -> Result<Self> {
        let buffer = GpuBuffer::new(device, bytes, MemoryLocation::HostCached)?;
        if !buffer.is_host_cached() {
            return Err(Error::Internal("no host-cached memory".into()));
        }
        let d = device.raw();
        let pool_info = vk::CommandPoolCreateInfo::default()
            .queue_family_index(device.queue_family_index())
            .flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER);
        // SAFETY: valid create-infos; the objects are destroyed on the error
        // paths here or in `QueryPool`'s drop (once no copy is in flight).
        unsafe {
            let pool = d
                .create_command_pool(&pool_info, None)
                .map_err(vk_err("vkCreateCommandPool"))?;
            let alloc = vk::CommandBufferAllocateInfo::default()
                .command_pool(pool)
                .level(vk::CommandBufferLevel::PRIMARY)
                .command_buffer_count(1);
            let cmd = match d.allocate_command_buffers(&alloc) {
                Ok(b) => b[0],
                Err(e) => {
                    d.destroy_command_pool(pool, None);
                    return Err(vk_err("vkAllocateCommandBuffers")(e));
                }
            };
            let fence = match d.create_fence(&vk::FenceCreateInfo::default(), None) {
                Ok(f) => f,
                Err(e) => {
                    d.destroy_command_pool(pool, None);
                    return Err(vk_err("vkCreateFence")(e));
                }
            };
            Ok(Self {
                buffer,
                pool,
                cmd,
                fence,
                in_flight: false,
            })
        }
    }

    /// Whether the last copy finished (so the command buffer and the buffer
    /// may be reused), waiting up to `timeout_ns`.
    fn settle(&mut self, device: &Device, timeout_ns: u64) -> bool {
        if !self.in_flight {
            return true;
        }
        // SAFETY: the fence belongs to this device. A timeout leaves the
        // copy the GPU's; device lost or any other error leaves the objects
        // alone for good (never freed while possibly in use).
        let signaled = unsafe {
            device
                .raw()
                .wait_for_fences(&[self.fence], true, timeout_ns)
        }
        .is_ok();
        // SAFETY: signaled, so no queue operation uses the fence.
        if signaled && unsafe { device.raw().reset_fences(&[self.fence]) }.is_ok() {
            self.in_flight = false;
        }
        !self.in_flight
    }

    /// Copies queries `first..first + count` of `pool` (with `stride` words
    /// each) into the buffer and waits for the copy: whether it completed.
    fn copy(
        &mut self,
        device: &Device,
        pool: vk::QueryPool,
        first: u32,
        count: u32,
        stride: u64,
    ) -> Result<bool> {
        if !self.settle(device, 0) {
            return Ok(false);
        }
        let d = device.raw();
        // SAFETY: the command buffer is not in use (settled above: no copy in
        // flight), its pool allows resetting it; the copy's range is inside
        // the pool (callers check) and the destination holds `count`
        // strides (made or grown for them by `QueryPool::staged`); the
        // queue is externally synchronized by its lock; the fence is
        // unsignaled (reset when the last copy settled).
        unsafe {
            d.reset_command_buffer(self.cmd, vk::CommandBufferResetFlags::empty())
                .map_err(vk_err("vkResetCommandBuffer"))?;
            let begin = vk::CommandBufferBeginInfo::default()
                .flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT);
            d.begin_command_buffer(self.cmd, &begin)
                .map_err(vk_err("vkBeginCommandBuffer"))?;
            d.cmd_copy_query_pool_results(
                self.cmd,
                pool,
                first,
                count,
                self.buffer.raw(),
                0,
                stride * 8,
                vk::QueryResultFlags::TYPE_64 | vk::QueryResultFlags::WITH_AVAILABILITY,
            );
            // The copy's writes made visible to the host's reads.
            let barrier = [vk::MemoryBarrier2::default()
                .src_stage_mask(vk::PipelineStageFlags2::COPY)
                .src_access_mask(vk::AccessFlags2::TRANSFER_WRITE)
                .dst_stage_mask(vk::PipelineStageFlags2::HOST)
                .dst_access_mask(vk::AccessFlags2::HOST_READ)];
            d.cmd_pipeline_barrier2(
                self.cmd,
                &vk::DependencyInfo::default().memory_barriers(&barrier),
            );
            d.end_command_buffer(self.cmd)
                .map_err(vk_err("vkEndCommandBuffer"))?;
            let infos = [vk::CommandBufferSubmitInfo::default().command_buffer(self.cmd)];
            let submit = [vk::SubmitInfo2::default().command_buffer_infos(&infos)];
            let queue = device
                .queue()
                .lock()
                .map_err(|_| Error::Internal("queue lock poisoned".into()))?;
            d.queue_submit2(*queue, &submit, self.fence)
                .map_err(vk_err("vkQueueSubmit2"))?;
        }
        self.in_flight = true;
        Ok(self.settle(device, STAGED_COPY_TIMEOUT_NS))
    }
}

/// Queries read from a [`Staging`] copy (held for the resolve).
struct StagedRead<'a> {
    staging: MutexGuard<'a, StagingState>,
    values: u32,
    first: u32,
    count: u32,
}

impl QueryRead for StagedRead<'_> {
    fn values(&self) -> u32 {
        self.values
    }

    fn read(&self, first: u32, count: u32, data: &mut [u64]) -> Result<()> {
        let StagingState::Ready(s) = &*self.staging else {
            return Err(Error::Internal("staged read without staging".into()));
        };
        let stride = self.stride();
        if first < self.first
            || first + count > self.first + self.count
            || data.len() != count as usize * stride
        {
            return Err(Error::Internal(format!(
                "staged read of {count} queries at {first} outside {}..{} or into {} words",
                self.first,
                self.first + self.count,
                data.len()
            )));
        }
        s.buffer
            .read_words(((first - self.first) as usize * stride * 8) as u64, data)
    }
}

impl QueryPool {
    /// Creates a pool of `count` queries and resets them all on the host.
    pub(crate) fn new(
        device: &Device,
        kind: vk::QueryType,
        count: u32,
        statistics: Option<vk::QueryPipelineStatisticFlags>,
    ) -> Result<Self> {
        let mut info = vk::QueryPoolCreateInfo::default()
            .query_type(kind)
            .query_count(count);
        let mut values = 1;
        if let Some(flags) = statistics {
            info = info.pipeline_statistics(flags);
            values = flags.as_raw().count_ones();
        }
        // SAFETY: valid device and create-info; the pool is destroyed in Drop.
        let raw = unsafe { device.raw().create_query_pool(&info, None) }
            .map_err(vk_err("vkCreateQueryPool"))?;
        let pool = Self {
            device: device.clone(),
            raw,
            values,
            staging: Mutex::new(StagingState::None),
        };
        pool.host_reset(0, count);
        Ok(pool)
    }

    /// Resets queries on the host. Callers make sure no pending GPU work
    /// uses them.
    pub(crate) fn host_reset(&self, first: u32, count: u32) {
        if count == 0 {
            return;
        }
        // SAFETY: hostQueryReset is enabled on every device gpu-counters
        // drives; the range is inside the pool (callers check), and callers
        // guarantee no pending command uses these queries.
        unsafe { self.device.raw().reset_query_pool(self.raw, first, count) };
    }
}

impl QueryRead for QueryPool {
    fn values(&self) -> u32 {
        self.values
    }

    /// One GPU copy of the range into host-cached memory, then reads from
    /// there: the driver's own read of a large range is several times
    /// slower than memory (it reads the pool's memory uncached). `None`
    /// where the device has no host-cached memory, or the copy failed or
    /// did not finish in time (the driver's read is then used).
    fn staged(&self, first: u32, count: u32) -> Option<Box<dyn QueryRead + '_>> {
        let mut staging = self.staging.lock().ok()?;
        let stride = self.stride() as u64;
        let bytes = u64::from(count) * stride * 8;
        let fits = match &mut *staging {
            StagingState::Unavailable => return None,
            StagingState::Ready(s) => s.buffer.size() >= bytes,
            StagingState::None => false,
        };
        if !fits {
            // Made (or grown) once: a copy still in flight keeps the old one.
            if let StagingState::Ready(s) = &mut *staging {
                if !s.settle(&self.device, 0) {
                    return None;
                }
            }
            let old = std::mem::replace(&mut *staging, StagingState::Unavailable);
            if let StagingState::Ready(s) = old {
                self.destroy_staging(s);
            }
            if let Ok(s) = Staging::new(&self.device, bytes) {
                *staging = StagingState::Ready(s);
            } else {
                return None;
            }
        }
        let StagingState::Ready(s) = &mut *staging else {
            return None;
        };
        match s.copy(&self.device, self.raw, first, count, stride) {
            Ok(true) => {
                self.device
                    .shared
                    .staged_reads
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                Some(Box::new(StagedRead {
                    staging,
                    values: self.values,
                    first,
                    count,
                }))
            }
            _ => None,
        }
    }

    fn read(&self, first: u32, count: u32, data: &mut [u64]) -> Result<()> {
        if data.len() != count as usize * self.stride() {
            return Err(Error::Internal(format!(
                "query read of {count} queries into {} words",
                data.len()
            )));
        }
        // SAFETY: `data` holds `count` strides of (values + availability)
        // initialised u64s (checked above), exactly what the flags ask the
        // driver to write; the range is inside the pool (callers check). The
        // pool needs no external synchronisation here, so reads of disjoint
        // ranges may run on several threads at once.
        let r = unsafe {
            (self.device.raw().fp_v1_0().get_query_pool_results)(
                self.device.raw().handle(),
                self.raw,
                first,
                count,
                std::mem::size_of_val(data),
                data.as_mut_ptr().cast(),
                (self.stride() * 8) as u64,
                vk::QueryResultFlags::TYPE_64 | vk::QueryResultFlags::WITH_AVAILABILITY,
            )
        };
        match r {
            vk::Result::SUCCESS | vk::Result::NOT_READY => Ok(()),
            e => Err(vk_err("vkGetQueryPoolResults")(e)),
        }
    }
}

impl QueryPool {
    /// Frees `s`'s Vulkan objects, unless its copy may still be running
    /// (then they are left for good: never freed while in use).
    fn destroy_staging(&self, mut s: Staging) {
        if !s.settle(&self.device, 0) {
            std::mem::forget(s.buffer);
            return;
        }
        // SAFETY: no copy in flight (settled), so the GPU uses neither the
        // command buffer nor the fence; both belong to this device.
        unsafe {
            self.device.raw().destroy_fence(s.fence, None);
            self.device.raw().destroy_command_pool(s.pool, None);
        }
    }
}

impl Drop for QueryPool {
    fn drop(&mut self) {
        let staging = std::mem::replace(
            self.staging
                .get_mut()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
            StagingState::None,
        );
        if let StagingState::Ready(mut s) = staging {
            if !s.settle(&self.device, 0) {
                // A copy that never settled reads this pool: leave the pool
                // too, rather than destroy it under the GPU.
                std::mem::forget(s.buffer);
                return;
            }
            self.destroy_staging(s);
        }
        // SAFETY: the pool belongs to this device; owners keep pools alive
        // until the GPU work using them has been waited for (sample buffers
        // are dropped by users after their submissions complete, as Vulkan
        // requires of any object).
        unsafe { self.device.raw().destroy_query_pool(self.raw, None) };
    }
}
