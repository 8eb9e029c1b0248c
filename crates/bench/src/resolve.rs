//! CPU resolve throughput of a large counter sample buffer, against a plain
//! memory copy and against the driver's own `vkGetQueryPoolResults`.

use crate::stats::median;
use crate::{vk_err, BenchError, ResolveReport};
use ash::vk;
use gpu_counters_hal::{
    CommonCounterSet, CounterSampleBufferDescriptor, SampleStatus, TimestampGranularity,
};
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
        cmd.sample_counters(&buffer, i, TimestampGranularity::Relaxed)?;
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

    // Every repetition times the four side by side (their order turning
    // each time), so that the ratio to a copy compares runs a moment apart
    // rather than two blocks of runs on a shared, noisy machine: the
    // steady state (one result resolved into again and again; the copy
    // also writes into a destination written before), a new result each
    // time, the driver's own read of a raw pool, and the plain copy.
    let mut resolved = gpu_counters_hal::ResolvedCounters::default();
    let mut data = vec![[0u64; 2]; count as usize];
    let source: Vec<u64> = (0..count as u64).collect();
    let mut destination = vec![0u64; count as usize];
    let (mut resolve, mut fresh, mut driver, mut copy) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut ratios = Vec::new();
    let check = |written: usize| {
        if written == count as usize {
            Ok(())
        } else {
            Err(BenchError::Measurement(format!(
                "resolve throughput: {written} of {count} timestamps written"
            )))
        }
    };
    for rep in 0..=reps {
        let mut times = [0f64; 4];
        for k in 0..4 {
            let which = (k + rep as usize) % 4;
            let t = Instant::now();
            match which {
                0 => {
                    buffer.resolve_counter_range_into(0..count as u64, &mut resolved)?;
                    let written = resolved.count(SampleStatus::Written);
                    times[0] = t.elapsed().as_nanos() as f64;
                    check(written)?;
                    black_box(&resolved);
                }
                1 => {
                    let fresh_result = buffer.resolve_counter_range(0..count as u64)?;
                    let written = fresh_result.count(SampleStatus::Written);
                    times[1] = t.elapsed().as_nanos() as f64;
                    check(written)?;
                    black_box(fresh_result);
                }
                2 => {
                    // SAFETY: the pool holds `count` queries and `data` one
                    // (value, availability) pair of u64 for each.
                    unsafe {
                        device.raw().get_query_pool_results(
                            raw.pool,
                            0,
                            &mut data,
                            vk::QueryResultFlags::TYPE_64 | vk::QueryResultFlags::WITH_AVAILABILITY,
                        )
                    }
                    .map_err(vk_err("vkGetQueryPoolResults"))?;
                    times[2] = t.elapsed().as_nanos() as f64;
                    black_box(&data);
                }
                _ => {
                    destination.copy_from_slice(black_box(&source));
                    black_box(&destination);
                    times[3] = t.elapsed().as_nanos() as f64;
                }
            }
        }
        // The first repetition warms up.
        if rep > 0 {
            resolve.push(times[0]);
            fresh.push(times[1]);
            driver.push(times[2]);
            copy.push(times[3]);
            ratios.push(times[3].max(1.0) / times[0].max(1.0));
        }
    }
    drop(resolved);
    let resolve_ns = median(resolve).max(1.0);
    let copy_ns = median(copy).max(1.0);
    Ok(ResolveReport {
        samples: count,
        samples_per_s: count as f64 / (resolve_ns * 1e-9),
        ratio_to_copy: median(ratios),
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
