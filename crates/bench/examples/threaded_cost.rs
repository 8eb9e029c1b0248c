//! Host cost of recording from several threads at once, each into a
//! command buffer of its own: what a renderer that records its passes in
//! parallel pays. `THREADS` threads start together (a barrier) and record
//! `N` scopes each; a round's record time is the slowest thread's, per
//! sample it wrote. Then every command buffer is submitted, waited for, and
//! resolved (untimed).
//!
//! ```text
//! cargo build --release -p gpu-counters-bench --example threaded_cost
//! target/release/examples/threaded_cost raw-scopes,profiler,scope-pairs,scope-pairs-own 4096 30 2
//! ```
//!
//! Arguments: `VARIANTS N ROUNDS THREADS`. `VARIANTS` is a comma-separated
//! list of:
//! - `raw-scopes`: raw ash, each thread writing `ALL_COMMANDS` pairs into
//!   its own range of one query pool (the floor);
//! - `profiler`: `Frame::scope` / `Scope::end` pairs, every thread into one
//!   shared frame (scope ids, and so sample blocks, are handed out to the
//!   threads as they come);
//! - `scope-pairs`: `CommandBuffer::sample_counters` pairs, each thread into
//!   its own range of one counter sample buffer;
//! - `scope-pairs-own`: the same, each thread into a counter sample buffer
//!   of its own (nothing shared: what `scope-pairs` costs for sharing).
//!
//! Each profiler frame has room for the scopes and 32 more a thread: a
//! recorder's last claim of scope ids may leave up to 31 unused.
//!
//! The variants take turns round by round, the first of each round
//! rotating. Prints each variant's median record ns per sample and, for
//! every later variant, its cost over the first one's, per round (median
//! and quartiles). Every result is checked complete.

use ash::vk;
use gpu_counters_hal::timeline::PassKind;
use gpu_counters_hal::{CommonCounterSet, CounterSampleBufferDescriptor, TimestampGranularity};
use gpu_counters_profiler::{Profiler, ProfilerOptions, WhenFull};
use gpu_counters_vulkan::{CommandBuffer, CounterSampleBuffer, Device, InstanceOptions};
use std::error::Error;
use std::sync::Barrier;
use std::time::Instant;

type R<T> = Result<T, Box<dyn Error + Send + Sync>>;

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// What a round records, shared by its threads.
struct Round<'a> {
    variant: &'a str,
    n: u32,
    buffer: &'a CounterSampleBuffer,
    own: &'a [CounterSampleBuffer],
    pool: vk::QueryPool,
    frame: Option<&'a gpu_counters_profiler::Frame<'a, Device>>,
}

impl Round<'_> {
    /// Thread `t`'s recording into `cmd`.
    fn record(&self, t: u32, cmd: &mut CommandBuffer) -> R<()> {
        let n = self.n;
        let base = 2 * n * t;
        match self.variant {
            "raw-scopes" => {
                let d = cmd.device().raw().clone();
                for i in 0..n {
                    // SAFETY: `cmd` is recording outside a render pass; the
                    // queries were reset before the round, and this thread
                    // alone writes `base..base + 2n`.
                    unsafe {
                        d.cmd_write_timestamp2(
                            cmd.raw(),
                            vk::PipelineStageFlags2::ALL_COMMANDS,
                            self.pool,
                            base + 2 * i,
                        );
                        d.cmd_write_timestamp2(
                            cmd.raw(),
                            vk::PipelineStageFlags2::ALL_COMMANDS,
                            self.pool,
                            base + 2 * i + 1,
                        );
                    }
                }
            }
            "scope-pairs-own" => {
                let b = &self.own[t as usize];
                for i in 0..n {
                    cmd.sample_counters(b, 2 * i, TimestampGranularity::Precise)?;
                    cmd.sample_counters(b, 2 * i + 1, TimestampGranularity::Precise)?;
                }
            }
            "scope-pairs" => {
                for i in 0..n {
                    cmd.sample_counters(self.buffer, base + 2 * i, TimestampGranularity::Precise)?;
                    cmd.sample_counters(
                        self.buffer,
                        base + 2 * i + 1,
                        TimestampGranularity::Precise,
                    )?;
                }
            }
            "profiler" => {
                let frame = self.frame.ok_or("no frame")?;
                for _ in 0..n {
                    let scope = frame.scope(cmd, "dispatch", PassKind::Compute)?;
                    scope.end(cmd)?;
                }
            }
            other => return Err(format!("unknown variant {other}").into()),
        }
        Ok(())
    }
}

fn main() -> R<()> {
    let mut args = std::env::args().skip(1);
    let variants = args.next().unwrap_or_else(|| "raw-scopes,profiler".into());
    let n: u32 = args.next().map_or(Ok(4096), |s| s.parse())?;
    let rounds: usize = args.next().map_or(Ok(20), |s| s.parse())?;
    let threads: u32 = args.next().map_or(Ok(2), |s| s.parse())?;
    let variants: Vec<&str> = variants.split(',').collect();
    let total = 2 * n * threads;
    let device = Device::open_default(&InstanceOptions::default())?;
    let buffer = device.make_counter_sample_buffer(&CounterSampleBufferDescriptor::new(
        CommonCounterSet::Timestamp,
        "threaded cost",
        total,
    ))?;
    let own = (0..threads)
        .map(|_| {
            device.make_counter_sample_buffer(&CounterSampleBufferDescriptor::new(
                CommonCounterSet::Timestamp,
                "threaded cost, one thread's",
                2 * n,
            ))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let profiler = Profiler::new(
        &device,
        ProfilerOptions {
            frames_in_flight: 2,
            // Room for the ids each thread's last claim leaves unused (at
            // most 127 a recorder: see `Frame::scope`'s ids).
            max_scopes_per_frame: n * threads + 128 * threads,
            statistics: false,
            when_full: WhenFull::Wait {
                timeout: std::time::Duration::from_secs(30),
            },
            queue_name: None,
        },
    )?;
    let d = device.raw().clone();
    // SAFETY: a valid create-info on this device; destroyed at the end after
    // the device is idle.
    let pool = unsafe {
        d.create_query_pool(
            &vk::QueryPoolCreateInfo::default()
                .query_type(vk::QueryType::TIMESTAMP)
                .query_count(total),
            None,
        )?
    };
    let mut spare: Vec<CommandBuffer> = Vec::new();
    let mut rec = vec![Vec::new(); variants.len()];
    let mut frames = Vec::new();
    let mut raw_out = vec![[0u64; 2]; total as usize];
    for round in 0..rounds * variants.len() {
        let k = (round + round / variants.len()) % variants.len();
        let variant = variants[k];
        buffer.reset()?;
        for b in &own {
            b.reset()?;
        }
        // SAFETY: the pool's queries are not in use (every round waits).
        unsafe { d.reset_query_pool(pool, 0, total) };
        let mut cmds = Vec::new();
        for _ in 0..threads {
            cmds.push(match spare.pop() {
                Some(c) => c,
                None => CommandBuffer::new(&device)?,
            });
        }
        let frame = if variant == "profiler" {
            Some(profiler.begin_frame()?)
        } else {
            None
        };
        let this = Round {
            variant,
            n,
            buffer: &buffer,
            own: &own,
            pool,
            frame: frame.as_ref(),
        };
        let barrier = Barrier::new(threads as usize);
        // Each thread's record time and its submission.
        let done: Vec<R<(f64, gpu_counters_vulkan::Submission)>> = std::thread::scope(|s| {
            let handles: Vec<_> = cmds
                .into_iter()
                .enumerate()
                .map(|(t, mut cmd)| {
                    let (this, barrier) = (&this, &barrier);
                    s.spawn(move || -> R<(f64, gpu_counters_vulkan::Submission)> {
                        barrier.wait();
                        let start = Instant::now();
                        this.record(t as u32, &mut cmd)?;
                        let ns = start.elapsed().as_nanos() as f64;
                        Ok((ns, cmd.commit()?))
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|_| Err("a thread panicked".into())))
                .collect()
        });
        let mut slowest = 0f64;
        let mut submissions = Vec::new();
        for r in done {
            let (ns, submission) = r?;
            slowest = slowest.max(ns);
            submissions.push(submission);
        }
        rec[k].push(slowest / (2 * n) as f64);
        if let Some(frame) = frame {
            profiler.end_frame(frame, &submissions)?;
        }
        for s in &submissions {
            s.wait()?;
        }
        device.wait_idle()?;
        match variant {
            "raw-scopes" => {
                // SAFETY: `raw_out` holds `total` (value, availability)
                // pairs; the GPU is done with the queries.
                unsafe {
                    d.get_query_pool_results(
                        pool,
                        0,
                        &mut raw_out,
                        vk::QueryResultFlags::TYPE_64 | vk::QueryResultFlags::WITH_AVAILABILITY,
                    )?
                };
                if raw_out.iter().any(|[_, a]| *a == 0) {
                    return Err("raw-scopes: a sample not available".into());
                }
            }
            "scope-pairs" => {
                let r = buffer.resolve_counter_range(0..u64::from(total))?;
                if !r.all_written() {
                    return Err("scope-pairs: a sample not written".into());
                }
            }
            "scope-pairs-own" => {
                for b in &own {
                    if !b.resolve_counter_range(0..u64::from(2 * n))?.all_written() {
                        return Err("scope-pairs-own: a sample not written".into());
                    }
                }
            }
            _ => {
                profiler.collect_into(&mut frames)?;
                let scopes: usize = frames.iter().map(|f| f.scopes.len()).sum();
                if frames.len() != 1 || scopes != (n * threads) as usize {
                    return Err(format!(
                        "profiler: frame not complete: {} frames, {scopes} scopes, dropped {:?}",
                        frames.len(),
                        frames.first().map(|f| f.drops)
                    )
                    .into());
                }
            }
        }
        for s in submissions {
            spare.push(s.reuse()?);
        }
    }
    device.wait_idle()?;
    // SAFETY: the device is idle; nothing uses the pool any more.
    unsafe { d.destroy_query_pool(pool, None) };
    for (k, v) in variants.iter().enumerate() {
        println!(
            "{v}: record {:.1} ns/sample, slowest of {threads} threads (median of {rounds})",
            median(&mut rec[k].clone())
        );
    }
    for k in 1..variants.len() {
        let mut ratios: Vec<f64> = (0..rounds).map(|r| rec[k][r] / rec[0][r]).collect();
        ratios.sort_by(f64::total_cmp);
        let q = |p: f64| ratios[((ratios.len() - 1) as f64 * p).round() as usize];
        println!(
            "{} / {}: record ratio per round, median {:.2} [quartiles {:.2}, {:.2}]",
            variants[k],
            variants[0],
            q(0.5),
            q(0.25),
            q(0.75)
        );
    }
    Ok(())
}
