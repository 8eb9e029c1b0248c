//! Thin ownership wrapper around a `VkQueryPool`.

use crate::device::Device;
use crate::util::vk_err;
use ash::vk;
use gpu_counters_hal::bookkeeping::QueryRead;
use gpu_counters_hal::{Error, Result};

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
}

impl QueryRead for QueryPool {
    fn values(&self) -> u32 {
        self.values
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

impl Drop for QueryPool {
    fn drop(&mut self) {
        // SAFETY: the pool belongs to this device; owners keep pools alive
        // until the GPU work using them has been waited for (sample buffers
        // are dropped by users after their submissions complete, as Vulkan
        // requires of any object).
        unsafe { self.device.raw().destroy_query_pool(self.raw, None) };
    }
}
