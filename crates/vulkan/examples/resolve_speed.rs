//! Host-side cost of gpu-counters' hot paths against raw Vulkan, on the
//! default device:
//!
//! - CPU resolve of `N` timestamps (`resolve_counter_range`) against the
//!   driver's own `vkGetQueryPoolResults` of the same count into a reused
//!   buffer, and a plain copy of the resolved bytes;
//! - recording: `CommandBuffer::sample_counters`, encoder `sample_counters`,
//!   relaxed heap writes in one pass, and passes with start/end attachments,
//!   each against raw `vkCmdWriteTimestamp2` calls.
//!
//! `cargo run --release -p gpu-counters-vulkan --example resolve_speed -- [N] [REPS]`
//! (defaults: 1000000 timestamps, 7 reps; medians are printed).

use ash::vk;
use gpu_counters_hal::{
    CommonCounterSet, CounterHeapDescriptor, CounterSampleBufferDescriptor, SampleStatus,
    TimestampGranularity,
};
use gpu_counters_vulkan::{
    CommandBuffer, ComputePassDescriptor, Device, InstanceOptions, PassSampleBufferAttachment,
};
use std::hint::black_box;
use std::time::Instant;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Median of `reps` timed runs of `f` (after one warm-up); `f` returns the
/// nanoseconds it measured itself.
fn timed(reps: u32, mut f: impl FnMut() -> Res<f64>) -> Res<f64> {
    f()?;
    let mut v = Vec::new();
    for _ in 0..reps {
        v.push(f()?);
    }
    Ok(median(v))
}

/// The fastest of `reps` timed runs of `f` (after one warm-up): recording
/// costs are noisy (the driver grows its command memory), and the fastest run
/// is the closest to what the calls themselves cost.
fn fastest(reps: u32, mut f: impl FnMut() -> Res<f64>) -> Res<f64> {
    f()?;
    let mut best = f64::INFINITY;
    for _ in 0..reps {
        best = best.min(f()?);
    }
    Ok(best)
}

struct RawPool {
    device: Device,
    pool: vk::QueryPool,
}

impl RawPool {
    fn new(device: &Device, count: u32) -> Res<Self> {
        let info = vk::QueryPoolCreateInfo::default()
            .query_type(vk::QueryType::TIMESTAMP)
            .query_count(count);
        // SAFETY: valid create-info; hostQueryReset is enabled on
        // gpu-counters' devices; destroyed in Drop after the device idles.
        let pool = unsafe {
            let pool = device.raw().create_query_pool(&info, None)?;
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
        // SAFETY: the device is idle.
        unsafe { self.device.raw().destroy_query_pool(self.pool, None) };
    }
}

fn timestamps(
    device: &Device,
    label: &str,
    count: u32,
) -> Res<gpu_counters_vulkan::CounterSampleBuffer> {
    Ok(
        device.make_counter_sample_buffer(&CounterSampleBufferDescriptor::new(
            CommonCounterSet::Timestamp,
            label,
            count,
        ))?,
    )
}

fn main() -> Res<()> {
    let mut args = std::env::args().skip(1);
    let n: u32 = args
        .next()
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(1_000_000);
    let reps: u32 = args.next().map(|s| s.parse()).transpose()?.unwrap_or(7);
    let device = Device::open_default(&InstanceOptions::default())?;
    println!("device: {}", device.info().name);
    let d = device.raw().clone();

    // --- CPU resolve -----------------------------------------------------
    let buffer = timestamps(&device, "resolve speed", n)?;
    let raw = RawPool::new(&device, n)?;
    let mut cmd = CommandBuffer::new(&device)?;
    for i in 0..n {
        cmd.sample_counters(&buffer, i, TimestampGranularity::Relaxed)?;
    }
    // SAFETY: recording outside any pass; each raw query written once.
    unsafe {
        for i in 0..n {
            d.cmd_write_timestamp2(cmd.raw(), vk::PipelineStageFlags2::TOP_OF_PIPE, raw.pool, i);
        }
    }
    cmd.commit()?.wait()?;

    let resolve = timed(reps, || {
        let t = Instant::now();
        let r = buffer.resolve_counter_range(0..n as u64)?;
        let ns = t.elapsed().as_nanos() as f64;
        let written = r
            .statuses()
            .iter()
            .filter(|s| **s == SampleStatus::Written)
            .count();
        assert_eq!(written, n as usize);
        black_box(r);
        Ok(ns)
    })?;
    let mut data = vec![[0u64; 2]; n as usize];
    let driver = timed(reps, || {
        let t = Instant::now();
        // SAFETY: `data` holds one (value, availability) pair per query.
        unsafe {
            d.get_query_pool_results(
                raw.pool,
                0,
                &mut data,
                vk::QueryResultFlags::TYPE_64 | vk::QueryResultFlags::WITH_AVAILABILITY,
            )?
        };
        let ns = t.elapsed().as_nanos() as f64;
        black_box(&data);
        Ok(ns)
    })?;
    // The driver's read split over as many threads as gpu-counters' resolve
    // uses for this count (vkGetQueryPoolResults needs no external
    // synchronisation of the pool).
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    let threads = cores.min(8).min(n as usize / 65536).max(1);
    let per = (n as usize).div_ceil(threads);
    let driver_threaded = timed(reps, || {
        let t = Instant::now();
        std::thread::scope(|scope| {
            for (k, chunk) in data.chunks_mut(per).enumerate() {
                let d = &d;
                let pool = raw.pool;
                scope.spawn(move || {
                    // SAFETY: `chunk` holds one pair per query of its range.
                    unsafe {
                        d.get_query_pool_results(
                            pool,
                            (k * per) as u32,
                            chunk,
                            vk::QueryResultFlags::TYPE_64 | vk::QueryResultFlags::WITH_AVAILABILITY,
                        )
                    }
                    .expect("read");
                });
            }
        });
        Ok(t.elapsed().as_nanos() as f64)
    })?;
    let source: Vec<u64> = (0..n as u64).collect();
    let mut dest = vec![0u64; n as usize];
    let copy = timed(reps, || {
        let t = Instant::now();
        dest.copy_from_slice(black_box(&source));
        black_box(&dest);
        Ok(t.elapsed().as_nanos() as f64)
    })?;
    let ours = (resolve - driver_threaded).max(1.0);
    println!(
        "resolve {n} timestamps: {:.3} ms; driver vkGetQueryPoolResults alone {:.3} ms on 1 thread, {:.3} ms split over {threads}; ours (resolve minus split read) {:.3} ms = {:.2} ns/sample; memcpy {} B {:.3} ms; memcpy/ours {:.2}x; memcpy/resolve {:.3}x",
        resolve / 1e6,
        driver / 1e6,
        driver_threaded / 1e6,
        ours / 1e6,
        ours / n as f64,
        8 * n as u64,
        copy / 1e6,
        copy / ours,
        copy / resolve,
    );
    drop(raw);
    drop(buffer);

    // --- Statistic chain resolve --------------------------------------------
    if device
        .info()
        .counter_set(CommonCounterSet::Statistic)
        .is_some()
    {
        let c = n.min(20_000);
        let stats = device.make_counter_sample_buffer(&CounterSampleBufferDescriptor::new(
            CommonCounterSet::Statistic,
            "chain",
            c,
        ))?;
        let mut cmd = CommandBuffer::new(&device)?;
        for i in 0..c {
            cmd.sample_counters(&stats, i, TimestampGranularity::Relaxed)?;
        }
        cmd.commit()?.wait()?;
        let chain = timed(reps.min(3), || {
            let t = Instant::now();
            let r = stats.resolve_counter_range(0..c as u64)?;
            let ns = t.elapsed().as_nanos() as f64;
            assert!(r.all_written());
            Ok(ns)
        })?;
        println!(
            "resolve of a statistic chain of {c} samples (CommandBuffer::sample_counters): {:.3} ms",
            chain / 1e6
        );
    }

    // --- Recording ---------------------------------------------------------
    let m = n.min(16_384);
    let reps = 4 * reps + 1;
    let raw = RawPool::new(&device, m)?;
    let raw_record = fastest(reps, || {
        let cmd = CommandBuffer::new(&device)?;
        let t = Instant::now();
        // SAFETY: recording; the pool is never submitted.
        unsafe {
            for i in 0..m {
                d.cmd_write_timestamp2(
                    cmd.raw(),
                    vk::PipelineStageFlags2::TOP_OF_PIPE,
                    raw.pool,
                    i,
                );
            }
        }
        Ok(t.elapsed().as_nanos() as f64 / m as f64)
    })?;
    let cmd_record = fastest(reps, || {
        let b = timestamps(&device, "record", m)?;
        let mut cmd = CommandBuffer::new(&device)?;
        let t = Instant::now();
        for i in 0..m {
            cmd.sample_counters(&b, i, TimestampGranularity::Relaxed)?;
        }
        Ok(t.elapsed().as_nanos() as f64 / m as f64)
    })?;
    let enc_record = fastest(reps, || {
        let b = timestamps(&device, "record", m)?;
        let mut cmd = CommandBuffer::new(&device)?;
        let mut enc = cmd.compute_encoder(&ComputePassDescriptor::default())?;
        let t = Instant::now();
        for i in 0..m {
            enc.sample_counters(&b, i, false)?;
        }
        let ns = t.elapsed().as_nanos() as f64 / m as f64;
        enc.end_encoding()?;
        Ok(ns)
    })?;
    let heap_precise = fastest(reps, || {
        let h = device.make_counter_heap(&CounterHeapDescriptor::timestamp(m))?;
        let mut cmd = CommandBuffer::new(&device)?;
        let mut enc = cmd.compute_encoder(&ComputePassDescriptor::default())?;
        let t = Instant::now();
        for i in 0..m {
            enc.write_timestamp(TimestampGranularity::Precise, &h, i)?;
        }
        let ns = t.elapsed().as_nanos() as f64 / m as f64;
        enc.end_encoding()?;
        Ok(ns)
    })?;
    let relaxed_n = m.min(16_384);
    let heap_relaxed = fastest(reps, || {
        let h = device.make_counter_heap(&CounterHeapDescriptor::timestamp(relaxed_n))?;
        let mut cmd = CommandBuffer::new(&device)?;
        let t = Instant::now();
        let mut enc = cmd.compute_encoder(&ComputePassDescriptor::default())?;
        for i in 0..relaxed_n {
            enc.write_timestamp(TimestampGranularity::Relaxed, &h, i)?;
        }
        enc.end_encoding()?;
        Ok(t.elapsed().as_nanos() as f64 / relaxed_n as f64)
    })?;
    let passes = m / 2;
    let raw_pass = fastest(reps, || {
        let cmd = CommandBuffer::new(&device)?;
        let t = Instant::now();
        // SAFETY: recording; the pool is never submitted.
        unsafe {
            for p in 0..passes {
                d.cmd_write_timestamp2(
                    cmd.raw(),
                    vk::PipelineStageFlags2::TOP_OF_PIPE,
                    raw.pool,
                    2 * p,
                );
                d.cmd_write_timestamp2(
                    cmd.raw(),
                    vk::PipelineStageFlags2::ALL_COMMANDS,
                    raw.pool,
                    2 * p + 1,
                );
            }
        }
        Ok(t.elapsed().as_nanos() as f64 / passes as f64)
    })?;
    let pass = fastest(reps, || {
        let b = timestamps(&device, "passes", 2 * passes)?;
        let mut cmd = CommandBuffer::new(&device)?;
        let t = Instant::now();
        for p in 0..passes {
            let enc = cmd.compute_encoder(&ComputePassDescriptor {
                sample_buffer_attachments: &[PassSampleBufferAttachment {
                    sample_buffer: &b,
                    start_of_encoder_sample_index: Some(2 * p),
                    end_of_encoder_sample_index: Some(2 * p + 1),
                }],
            })?;
            enc.end_encoding()?;
        }
        Ok(t.elapsed().as_nanos() as f64 / passes as f64)
    })?;
    println!("record, host ns per sample ({m} samples, fastest of {reps}):");
    println!("  raw vkCmdWriteTimestamp2                 {raw_record:8.1}");
    println!(
        "  CommandBuffer::sample_counters           {cmd_record:8.1}  ({:.2}x raw)",
        cmd_record / raw_record
    );
    println!(
        "  encoder sample_counters                  {enc_record:8.1}  ({:.2}x raw)",
        enc_record / raw_record
    );
    println!(
        "  heap write_timestamp precise             {heap_precise:8.1}  ({:.2}x raw)",
        heap_precise / raw_record
    );
    println!("  heap relaxed, {relaxed_n} in one pass       {heap_relaxed:8.1}");
    println!("host ns per pass with start/end attachments ({passes} passes):");
    println!("  raw 2x vkCmdWriteTimestamp2              {raw_pass:8.1}");
    println!(
        "  compute_encoder + end_encoding           {pass:8.1}  ({:.2}x raw)",
        pass / raw_pass
    );
    Ok(())
}
