//! CPU resolve throughput of a large counter sample buffer, against a plain
//! memory copy and against the driver's own `vkGetQueryPoolResults`.

use crate::stats::median;
use crate::{vk_err, BenchError, ResolveReport};
use ash::vk;
use gpu_counters_core::{CommonCounterSet, CounterSampleBufferDescriptor, SampleStatus};
use gpu_counters_vulkan::{CommandBuffer, Device};
use std::hint::black_box;
use std::time::Instant;

/// Writes `count` timestamps on the GPU into a sample buffer and into a raw
/// query pool, then times `reps` resolves of each (after one warm-up) and
/// `reps` copies of `8 * count` bytes.
pub(crate) fn measure(device: &Device, count: u32, reps: u32) -> Result<ResolveReport, BenchError> {
    let buffer = device.make_counter_sample_buffer(&CounterSampleBufferDescriptor::new(
        CommonCounterSet::Timestamp,
        "resolve throughput",
        count,
    ))?;
    let raw = RawPool::new(device, count)?;
    let mut cmd = CommandBuffer::new(device)?;
    for i in 0..count {
        cmd.sample_counters(&buffer, i, false)?;
    }
    // SAFETY: the raw pool was reset on the host at creation; each query is
    // written once; the command buffer is recording outside any pass.
    unsafe {
        for i in 0..count {
            device.raw().cmd_write_timestamp2(
                cmd.raw(),
                vk::PipelineStageFlags2::TOP_OF_PIPE,
                raw.pool,
                i,
            );
        }
    }
    cmd.commit()?.wait()?;

    // Steady state: one result resolved into again and again (the copy
    // below also writes into a destination written before).
    let mut resolve = Vec::new();
    let mut resolved = gpu_counters_core::ResolvedCounters::default();
    for rep in 0..=reps {
        let t = Instant::now();
        buffer.resolve_counter_range_into(0..count as u64, &mut resolved)?;
        let written = resolved.count(SampleStatus::Written);
        let elapsed = t.elapsed().as_nanos() as f64;
        if written != count as usize {
            return Err(BenchError::Measurement(format!(
                "resolve throughput: {written} of {count} timestamps written"
            )));
        }
        black_box(&resolved);
        if rep > 0 {
            resolve.push(elapsed);
        }
    }
    drop(resolved);
    // A new result each time.
    let mut fresh = Vec::new();
    for rep in 0..=reps {
        let t = Instant::now();
        let resolved = buffer.resolve_counter_range(0..count as u64)?;
        let written = resolved.count(SampleStatus::Written);
        let elapsed = t.elapsed().as_nanos() as f64;
        if written != count as usize {
            return Err(BenchError::Measurement(format!(
                "resolve throughput: {written} of {count} timestamps written"
            )));
        }
        black_box(resolved);
        if rep > 0 {
            fresh.push(elapsed);
        }
    }

    let mut driver = Vec::new();
    let mut data = vec![[0u64; 2]; count as usize];
    for rep in 0..=reps {
        let t = Instant::now();
        // SAFETY: the pool holds `count` queries and `data` one (value,
        // availability) pair of u64 for each.
        unsafe {
            device.raw().get_query_pool_results(
                raw.pool,
                0,
                &mut data,
                vk::QueryResultFlags::TYPE_64 | vk::QueryResultFlags::WITH_AVAILABILITY,
            )
        }
        .map_err(vk_err("vkGetQueryPoolResults"))?;
        let elapsed = t.elapsed().as_nanos() as f64;
        black_box(&data);
        if rep > 0 {
            driver.push(elapsed);
        }
    }

    let source: Vec<u64> = (0..count as u64).collect();
    let mut destination = vec![0u64; count as usize];
    let mut copy = Vec::new();
    for rep in 0..=reps {
        let t = Instant::now();
        destination.copy_from_slice(black_box(&source));
        black_box(&destination);
        let elapsed = t.elapsed().as_nanos() as f64;
        if rep > 0 {
            copy.push(elapsed);
        }
    }
    let resolve_ns = median(resolve).max(1.0);
    let copy_ns = median(copy).max(1.0);
    Ok(ResolveReport {
        samples: count,
        samples_per_s: count as f64 / (resolve_ns * 1e-9),
        ratio_to_copy: copy_ns / resolve_ns,
        resolve_ns,
        copy_ns,
        driver_read_ns: median(driver),
        fresh_result_ns: median(fresh),
    })
}

/// A raw timestamp query pool, destroyed on drop (after the device is idle).
struct RawPool {
    device: Device,
    pool: vk::QueryPool,
}

impl RawPool {
    fn new(device: &Device, count: u32) -> Result<Self, BenchError> {
        let info = vk::QueryPoolCreateInfo::default()
            .query_type(vk::QueryType::TIMESTAMP)
            .query_count(count);
        // SAFETY: a valid create-info; the pool is destroyed in Drop and reset
        // on the host (hostQueryReset is enabled) before any use.
        let pool = unsafe {
            let pool = device
                .raw()
                .create_query_pool(&info, None)
                .map_err(vk_err("vkCreateQueryPool"))?;
            device.raw().reset_query_pool(pool, 0, count);
            pool
        };
        Ok(Self {
            device: device.clone(),
            pool,
        })
    }
}

impl Drop for RawPool {
    fn drop(&mut self) {
        let _ = self.device.wait_idle();
        // SAFETY: the device is idle, so no work uses the pool.
        unsafe { self.device.raw().destroy_query_pool(self.pool, None) };
    }
}
