//! Where the time of a large CPU resolve goes: the ways of getting N
//! timestamp query results (value and availability) from the GPU into host
//! memory, timed on one device. Raw ash throughout (gpu-counters' device
//! only opens the device and serializes the queue).
//!
//! ```text
//! cargo build --release -p gpu-counters-bench --example query_read_paths
//! target/release/examples/query_read_paths 1000000 7
//! ```
//!
//! Paths, each the median of `REPS` runs after one warm-up, in ms:
//! - `driver 1 thread`: `vkGetQueryPoolResults` of all N into host memory;
//! - `driver T threads`: the same split into T disjoint ranges at once
//!   (`resolve_counter_range` uses up to 16, one per 2^16 samples);
//! - `driver P parts, pool`: the same on threads started once (rayon's
//!   pool, as `resolve_counter_range` does);
//! - `driver T threads, values only`: without the availability word (8
//!   bytes each; the call says `VK_NOT_READY` unless every query has one);
//! - `gpu-counters resolve_into`: `resolve_counter_range_into` of as many
//!   timestamps into a result kept between runs, then (`read`) the count
//!   of its written samples that `gpu-counters bench` times with it;
//! - `gpu-counters 2^16` against `driver 1 thread, 2^16`: one resolve
//!   thread's share;
//! - `fresh 8-byte output`: writing a newly allocated 8 N-byte vector once
//!   (what a resolve that allocates its result pays for the allocation);
//! - `copy+avail -> cached`: `vkCmdCopyQueryPoolResults` (64-bit values with
//!   availability, 16 bytes each) into host-visible, host-cached memory,
//!   submitted and waited for, then the host's copy out of it (`read`);
//! - `copy -> cached`: the same without availability (8 bytes each);
//! - `copy+avail -> uncached`: into host-visible memory that is not cached;
//! - `memcpy`: a plain copy of 8 N bytes in host memory.

use ash::vk;
use gpu_counters_hal::{
    CommonCounterSet, CounterSampleBufferDescriptor, ResolvedCounters, SampleStatus,
    TimestampGranularity,
};
use gpu_counters_vulkan::{CommandBuffer, Device, InstanceOptions};
use std::error::Error;
use std::hint::black_box;
use std::time::Instant;

type R<T> = Result<T, Box<dyn Error + Send + Sync>>;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// A buffer of `size` bytes in memory with `flags`, mapped; `None` where
/// the device has no such memory.
struct Mapped {
    buffer: vk::Buffer,
    memory: vk::DeviceMemory,
    ptr: *const u8,
}

fn mapped(
    device: &Device,
    size: u64,
    flags: vk::MemoryPropertyFlags,
    not: vk::MemoryPropertyFlags,
) -> R<Option<Mapped>> {
    let d = device.raw();
    // SAFETY: the physical device belongs to the instance.
    let props = unsafe {
        device
            .instance()
            .raw()
            .get_physical_device_memory_properties(device.physical_device())
    };
    // SAFETY: a valid create-info; destroyed by `free`.
    let buffer = unsafe {
        d.create_buffer(
            &vk::BufferCreateInfo::default()
                .size(size)
                .usage(vk::BufferUsageFlags::TRANSFER_DST),
            None,
        )?
    };
    // SAFETY: the buffer was just created on this device.
    let req = unsafe { d.get_buffer_memory_requirements(buffer) };
    let Some(index) = (0..props.memory_type_count).find(|&i| {
        let f = props.memory_types[i as usize].property_flags;
        req.memory_type_bits & (1 << i) != 0 && f.contains(flags) && !f.intersects(not)
    }) else {
        // SAFETY: unused.
        unsafe { d.destroy_buffer(buffer, None) };
        return Ok(None);
    };
    // SAFETY: valid allocate-info; bound and mapped once, freed by `free`.
    unsafe {
        let memory = d.allocate_memory(
            &vk::MemoryAllocateInfo::default()
                .allocation_size(req.size)
                .memory_type_index(index),
            None,
        )?;
        d.bind_buffer_memory(buffer, memory, 0)?;
        let ptr = d.map_memory(memory, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty())?;
        Ok(Some(Mapped {
            buffer,
            memory,
            ptr: ptr.cast(),
        }))
    }
}

/// Records `f` into a command buffer of gpu-counters, submits and waits:
/// the ms from submit to done.
fn submit(device: &Device, f: impl FnOnce(vk::CommandBuffer)) -> R<f64> {
    let cmd = CommandBuffer::new(device)?;
    f(cmd.raw());
    let t = Instant::now();
    cmd.commit()?.wait()?;
    Ok(t.elapsed().as_secs_f64() * 1e3)
}

fn main() -> R<()> {
    let mut args = std::env::args().skip(1);
    let n: u32 = args.next().map_or(Ok(1_000_000), |s| s.parse())?;
    let reps: usize = args.next().map_or(Ok(7), |s| s.parse())?;
    let device = Device::open_default(&InstanceOptions::default())?;
    let d = device.raw().clone();
    println!(
        "device: {}, {n} timestamps, median of {reps}",
        device.info().name
    );
    // SAFETY: a valid create-info; destroyed at the end, device idle.
    let pool = unsafe {
        d.create_query_pool(
            &vk::QueryPoolCreateInfo::default()
                .query_type(vk::QueryType::TIMESTAMP)
                .query_count(n),
            None,
        )?
    };
    // SAFETY: hostQueryReset is enabled by gpu-counters; nothing uses the pool.
    unsafe { d.reset_query_pool(pool, 0, n) };
    submit(&device, |cmd| {
        for i in 0..n {
            // SAFETY: recording, outside any pass; each query written once.
            unsafe { d.cmd_write_timestamp2(cmd, vk::PipelineStageFlags2::TOP_OF_PIPE, pool, i) };
        }
    })?;
    let flags = vk::QueryResultFlags::TYPE_64 | vk::QueryResultFlags::WITH_AVAILABILITY;
    let mut host = vec![[0u64; 2]; n as usize];
    let time = |name: &str, f: &mut dyn FnMut() -> R<(f64, f64)>| -> R<()> {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for rep in 0..=reps {
            let (x, y) = f()?;
            if rep > 0 {
                a.push(x);
                b.push(y);
            }
        }
        let (a, b) = (median(a), median(b));
        println!(
            "{name:<28} {:>8.3} ms  (gpu/driver {a:.3} + read {b:.3})",
            a + b
        );
        Ok(())
    };
    time("driver 1 thread", &mut || {
        let t = Instant::now();
        // SAFETY: `host` holds n (value, availability) pairs.
        unsafe { d.get_query_pool_results(pool, 0, &mut host, flags) }?;
        black_box(&host);
        Ok((t.elapsed().as_secs_f64() * 1e3, 0.0))
    })?;
    for threads in [4usize, 8, 16] {
        time(&format!("driver {threads} threads"), &mut || {
            let t = Instant::now();
            let per = (n as usize).div_ceil(threads);
            std::thread::scope(|s| {
                for (k, chunk) in host.chunks_mut(per).enumerate() {
                    let d = &d;
                    s.spawn(move || {
                        // SAFETY: disjoint ranges of the pool into disjoint
                        // chunks of n pairs.
                        unsafe { d.get_query_pool_results(pool, (k * per) as u32, chunk, flags) }
                    });
                }
            });
            black_box(&host);
            Ok((t.elapsed().as_secs_f64() * 1e3, 0.0))
        })?;
    }
    // The same parts on threads started once (rayon's pool, which the
    // resolve uses): what starting a thread per part costs.
    for parts in [8usize, 16] {
        time(&format!("driver {parts} parts, pool"), &mut || {
            use rayon::prelude::*;
            let t = Instant::now();
            let per = (n as usize).div_ceil(parts);
            let ok = host
                .par_chunks_mut(per)
                .with_max_len(1)
                .enumerate()
                .map(|(k, chunk)| {
                    // SAFETY: disjoint ranges of the pool into disjoint
                    // chunks of n pairs.
                    unsafe { d.get_query_pool_results(pool, (k * per) as u32, chunk, flags) }
                        .is_ok()
                })
                .reduce(|| true, |a, b| a & b);
            assert!(ok, "a driver read failed");
            black_box(&host);
            Ok((t.elapsed().as_secs_f64() * 1e3, 0.0))
        })?;
    }
    // Values only (no availability word): the driver writes 8 bytes per
    // query and returns VK_NOT_READY unless every query has its value.
    let mut values = vec![0u64; n as usize];
    for threads in [1usize, 16] {
        time(
            &format!("driver {threads} threads, values only"),
            &mut || {
                let t = Instant::now();
                let per = (n as usize).div_ceil(threads);
                let ready = std::thread::scope(|s| {
                    let handles: Vec<_> = values
                        .chunks_mut(per)
                        .enumerate()
                        .map(|(k, chunk)| {
                            let d = &d;
                            s.spawn(move || {
                                // SAFETY: disjoint ranges of the pool into
                                // disjoint chunks of n values.
                                unsafe {
                                    (d.fp_v1_0().get_query_pool_results)(
                                        d.handle(),
                                        pool,
                                        (k * per) as u32,
                                        chunk.len() as u32,
                                        std::mem::size_of_val(chunk),
                                        chunk.as_mut_ptr().cast(),
                                        8,
                                        vk::QueryResultFlags::TYPE_64,
                                    )
                                }
                            })
                        })
                        .collect();
                    handles
                        .into_iter()
                        .all(|h| h.join().is_ok_and(|r| r == vk::Result::SUCCESS))
                });
                assert!(ready, "a query had no value");
                black_box(&values);
                Ok((t.elapsed().as_secs_f64() * 1e3, 0.0))
            },
        )?;
    }
    // gpu-counters' own resolve of as many timestamps (a sample buffer
    // written the same way), into a result kept between runs.
    let buffer = device.make_counter_sample_buffer(&CounterSampleBufferDescriptor::new(
        CommonCounterSet::Timestamp,
        "query read paths",
        n,
    ))?;
    let mut cmd = CommandBuffer::new(&device)?;
    for i in 0..n {
        cmd.sample_counters(&buffer, i, TimestampGranularity::Relaxed)?;
    }
    cmd.commit()?.wait()?;
    let mut out = ResolvedCounters::default();
    time("gpu-counters resolve_into", &mut || {
        let t = Instant::now();
        buffer.resolve_counter_range_into(0..u64::from(n), &mut out)?;
        let a = t.elapsed().as_secs_f64() * 1e3;
        let t = Instant::now();
        let written = out.count(SampleStatus::Written);
        assert_eq!(written, n as usize);
        Ok((a, t.elapsed().as_secs_f64() * 1e3))
    })?;
    // One thread's share: 2^16 timestamps, by the driver and by
    // gpu-counters (which reads them on one thread).
    let part = 65536.min(n);
    time("driver 1 thread, 2^16", &mut || {
        let t = Instant::now();
        // SAFETY: `host` holds at least `part` pairs.
        unsafe { d.get_query_pool_results(pool, 0, &mut host[..part as usize], flags) }?;
        black_box(&host);
        Ok((t.elapsed().as_secs_f64() * 1e3, 0.0))
    })?;
    time("gpu-counters 2^16", &mut || {
        let t = Instant::now();
        buffer.resolve_counter_range_into(0..u64::from(part), &mut out)?;
        Ok((t.elapsed().as_secs_f64() * 1e3, 0.0))
    })?;
    time("fresh 8-byte output", &mut || {
        // What a resolve that allocates its result pays: a new 8 N-byte
        // vector written once (the kernel maps and zeroes its pages).
        let t = Instant::now();
        let mut v: Vec<u64> = Vec::with_capacity(n as usize);
        v.extend((0..u64::from(n)).map(black_box));
        black_box(&v);
        Ok((t.elapsed().as_secs_f64() * 1e3, 0.0))
    })?;
    let cached = vk::MemoryPropertyFlags::HOST_VISIBLE
        | vk::MemoryPropertyFlags::HOST_COHERENT
        | vk::MemoryPropertyFlags::HOST_CACHED;
    let visible = vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT;
    let paths = [
        (
            "copy+avail -> cached",
            cached,
            vk::MemoryPropertyFlags::empty(),
            true,
        ),
        (
            "copy -> cached",
            cached,
            vk::MemoryPropertyFlags::empty(),
            false,
        ),
        (
            "copy+avail -> uncached",
            visible,
            vk::MemoryPropertyFlags::HOST_CACHED,
            true,
        ),
    ];
    for (name, want, not, avail) in paths {
        let Some(m) = mapped(&device, 16 * u64::from(n), want, not)? else {
            println!("{name:<28} no such memory");
            continue;
        };
        let stride = if avail { 16 } else { 8 };
        let words = n as usize * stride / 8;
        let mut out = vec![0u64; words];
        time(name, &mut || {
            let gpu = submit(&device, |cmd| {
                // SAFETY: the pool's n queries into a buffer of 16 n bytes;
                // then the copy's writes made visible to the host.
                unsafe {
                    d.cmd_copy_query_pool_results(
                        cmd,
                        pool,
                        0,
                        n,
                        m.buffer,
                        0,
                        stride as u64,
                        if avail {
                            flags
                        } else {
                            vk::QueryResultFlags::TYPE_64
                        },
                    );
                    let barrier = [vk::MemoryBarrier2::default()
                        .src_stage_mask(vk::PipelineStageFlags2::COPY)
                        .src_access_mask(vk::AccessFlags2::TRANSFER_WRITE)
                        .dst_stage_mask(vk::PipelineStageFlags2::HOST)
                        .dst_access_mask(vk::AccessFlags2::HOST_READ)];
                    d.cmd_pipeline_barrier2(
                        cmd,
                        &vk::DependencyInfo::default().memory_barriers(&barrier),
                    );
                }
            })?;
            let t = Instant::now();
            // SAFETY: the mapping holds at least `words` u64s, written by the
            // copy waited for above; coherent memory.
            unsafe { std::ptr::copy_nonoverlapping(m.ptr.cast::<u64>(), out.as_mut_ptr(), words) };
            black_box(&out);
            Ok((gpu, t.elapsed().as_secs_f64() * 1e3))
        })?;
        // SAFETY: the device finished every copy (waited); unmapped and
        // freed once.
        unsafe {
            d.unmap_memory(m.memory);
            d.destroy_buffer(m.buffer, None);
            d.free_memory(m.memory, None);
        }
    }
    let src = vec![1u64; n as usize];
    let mut dst = vec![0u64; n as usize];
    time("memcpy 8 bytes each", &mut || {
        let t = Instant::now();
        dst.copy_from_slice(black_box(&src));
        black_box(&dst);
        Ok((t.elapsed().as_secs_f64() * 1e3, 0.0))
    })?;
    device.wait_idle()?;
    // SAFETY: idle; destroyed once.
    unsafe { d.destroy_query_pool(pool, None) };
    Ok(())
}
