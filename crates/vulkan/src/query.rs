//! Thin ownership wrapper around a `VkQueryPool`.

use crate::util::vk_err;
use crate::Device;
use ash::vk;
use gpu_counters_core::Result;

pub(crate) struct QueryPool {
    pub(crate) device: Device,
    pub(crate) raw: vk::QueryPool,
    /// `u64` values per query (without the availability word).
    pub(crate) values: u32,
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

    /// Reads `count` queries from `first` without waiting: the values (64-bit,
    /// `values` per query) and whether each is available.
    pub(crate) fn read(&self, first: u32, count: u32) -> Result<(Vec<u64>, Vec<bool>)> {
        let per = self.values as usize + 1;
        let mut data = vec![0u64; count as usize * per];
        // SAFETY: `data` holds `count` strides of (values + availability)
        // u64s, exactly what the flags ask the driver to write.
        let r = unsafe {
            (self.device.raw().fp_v1_0().get_query_pool_results)(
                self.device.raw().handle(),
                self.raw,
                first,
                count,
                std::mem::size_of_val(data.as_slice()),
                data.as_mut_ptr().cast(),
                (per * 8) as u64,
                vk::QueryResultFlags::TYPE_64 | vk::QueryResultFlags::WITH_AVAILABILITY,
            )
        };
        match r {
            vk::Result::SUCCESS | vk::Result::NOT_READY => {}
            e => return Err(vk_err("vkGetQueryPoolResults")(e)),
        }
        let mut values = Vec::with_capacity(count as usize * self.values as usize);
        let mut available = Vec::with_capacity(count as usize);
        for q in data.chunks_exact(per) {
            values.extend_from_slice(&q[..per - 1]);
            available.push(q[per - 1] != 0);
        }
        Ok((values, available))
    }
}

impl Drop for QueryPool {
    fn drop(&mut self) {
        // SAFETY: the pool belongs to this device; owners keep pools alive
        // until the GPU work using them has been waited for (sample buffers
        // are dropped by users after their submissions complete, as Vulkan
        // requires of any object).
        unsafe { self.device.raw().destroy_query_pool(self.raw, None) };
    }
}
