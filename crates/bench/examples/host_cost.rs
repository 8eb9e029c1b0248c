//! Host cost of one recording variant, alone, for `perf` and callgrind:
//! records `N` samples (no GPU work besides the samples) `ROUNDS` times,
//! submits, waits, and resolves them as `gpu-counters bench` does.
//!
//! ```text
//! cargo build --release -p gpu-counters-bench --example host_cost
//! valgrind --tool=callgrind target/release/examples/host_cost profiler 4096 20
//! ```
//!
//! Arguments: `VARIANT N ROUNDS [CAPACITY]`; `CAPACITY` (at least `N`, `N`
//! by default) is the profiler's `max_scopes_per_frame`, for frames that
//! use part of their slot.
//!
//! Variants: `raw-pass` (raw ash `TOP_OF_PIPE` + `ALL_COMMANDS` pairs),
//! `raw-frame` (`raw-pass`, then a host reset of the queries after reading
//! them, timed with the read: what a raw profiler does each frame, and the
//! profiler's own baseline), `raw-scopes` (a hand-rolled raw ash profiler at
//! the profiler's placement: both ends of a scope `ALL_COMMANDS`, after all
//! prior work, each read back with its availability, reset after reading, a
//! labelled record per scope, and its start and end in nanoseconds from the
//! device's timestamp period), `raw-scopes-top` (the same with each start
//! `TOP_OF_PIPE`, as Tracy's Vulkan zones have it: a cheaper start on some
//! drivers, and one that can begin before the prior work ends), `raw-precise`, `heap-precise`, `scope-pairs`, `attachments`,
//! `encoder-sample` (`sample_counters` with a barrier in one compute
//! encoder), `heap-relaxed` (relaxed heap writes, all in one pass: one
//! timestamp written for them all), `relaxed-pass` (a relaxed heap write in a pass each), `passes` (a pass
//! each and no sample: the baseline of `attachments` and `relaxed-pass`),
//! `profiler`
//! (`Frame::scope` / `Scope::end` pairs, then `Profiler::collect`).
//! Prints the median record and resolve ns per sample over the rounds.
//!
//! `VARIANT` may name several, comma-separated (`raw-pass,scope-pairs`):
//! they then take turns round by round, and each later one's host cost
//! (record + resolve) over the first one's is printed per round, as a
//! median with quartiles, so a ratio is read from runs a moment apart.
//! With `HOST_COST_ROUNDS` set, every round's record and resolve ns per
//! sample are printed too (`round R VARIANT record X resolve Y`), so that
//! each primitive's cost over its baseline can be set against raw ash's
//! round by round.

use ash::vk;
use gpu_counters_hal::timeline::PassKind;
use gpu_counters_hal::{
    CommonCounterSet, CounterHeapDescriptor, CounterSampleBufferDescriptor, TimestampGranularity,
};
use gpu_counters_profiler::{Profiler, ProfilerOptions, WhenFull};
use gpu_counters_vulkan::{
    CommandBuffer, ComputePassDescriptor, Device, InstanceOptions, PassSampleBufferAttachment,
};
use std::error::Error;
use std::hint::black_box;
use std::time::Instant;

type R<T> = Result<T, Box<dyn Error + Send + Sync>>;

/// Runs `f`, out of line: the recording phase, as one function for
/// callgrind's `--toggle-collect`.
#[inline(never)]
fn record_phase<T>(f: impl FnOnce() -> T) -> T {
    f()
}

/// Runs `f`, out of line: the resolve phase, for callgrind's
/// `--toggle-collect='host_cost::resolve_phase*'`.
#[inline(never)]
fn resolve_phase<T>(f: impl FnOnce() -> T) -> T {
    f()
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> R<()> {
    let mut args = std::env::args().skip(1);
    let variant = args.next().unwrap_or_else(|| "profiler".into());
    let n: u32 = args.next().map_or(Ok(4096), |s| s.parse())?;
    let rounds: usize = args.next().map_or(Ok(20), |s| s.parse())?;
    // The profiler's scopes per frame (ring page size); `N` by default.
    let capacity: u32 = args.next().map_or(Ok(n), |s| s.parse())?;
    let device = Device::open_default(&InstanceOptions::default())?;
    let buffer = device.make_counter_sample_buffer(&CounterSampleBufferDescriptor::new(
        CommonCounterSet::Timestamp,
        "host cost",
        2 * n,
    ))?;
    let heap = device.make_counter_heap(&CounterHeapDescriptor::timestamp(2 * n))?;
    let profiler = Profiler::new(
        &device,
        ProfilerOptions {
            frames_in_flight: 2,
            max_scopes_per_frame: capacity.max(n),
            statistics: false,
            when_full: WhenFull::Wait {
                timeout: std::time::Duration::from_secs(30),
            },
            queue_name: None,
        },
    )?;
    let d = device.raw().clone();
    // A raw pool for the raw variants.
    // SAFETY: a valid create-info on this device; destroyed at the end after
    // the device is idle.
    let pool = unsafe {
        d.create_query_pool(
            &vk::QueryPoolCreateInfo::default()
                .query_type(vk::QueryType::TIMESTAMP)
                .query_count(2 * n),
            None,
        )?
    };
    let variants: Vec<&str> = variant.split(',').collect();
    // Timestamps each variant writes per round.
    let samples_of = |v: &str| {
        if matches!(
            v,
            "raw-precise" | "heap-precise" | "heap-relaxed" | "relaxed-pass" | "encoder-sample"
        ) {
            n
        } else {
            2 * n
        }
    };
    let mut rec = vec![Vec::new(); variants.len()];
    let mut res = vec![Vec::new(); variants.len()];
    // `Profiler::end_frame`'s ns per sample (0 for the other variants):
    // outside record and resolve, printed apart and in a ratio of its own.
    let mut endf = vec![Vec::new(); variants.len()];
    let mut spare: Option<CommandBuffer> = None;
    let mut raw_out = vec![[0u64; 2]; 2 * n as usize];
    // The raw profiler's scopes (label, first query) and results (label,
    // start and end ns).
    let mut raw_scopes: Vec<(&str, u32)> = Vec::new();
    let mut raw_results: Vec<(&str, u64, u64)> = Vec::new();
    let period = 1e9 / device.timestamp_frequency();
    let mut frames = Vec::new();
    // The probes' memory: a scope record's worth (64 bytes) per
    // iteration, 256 KiB in all, as the profiler's records are.
    let mut probe_mem = vec![0u64; 8 * n as usize];
    let probe_atomic = std::sync::atomic::AtomicU64::new(0);
    // Several variants take turns, round by round (the first of each round
    // rotating), so that each round's ratios compare runs a moment apart.
    for round in 0..rounds * variants.len() {
        let k = (round + round / variants.len()) % variants.len();
        let variant = variants[k];
        let samples = samples_of(variant);
        buffer.reset()?;
        heap.invalidate_counter_range(0..2 * n as u64)?;
        // SAFETY: the pool's queries are not in use (every round waits).
        unsafe { d.reset_query_pool(pool, 0, 2 * n) };
        let mut cmd = match spare.take() {
            Some(c) => c,
            None => CommandBuffer::new(&device)?,
        };
        let t = Instant::now();
        let frame = if variant == "profiler" {
            Some(profiler.begin_frame()?)
        } else {
            None
        };
        // The recording, in a function of its own (`record_phase`), so that
        // callgrind can count it alone:
        // `--collect-atstart=no --toggle-collect='host_cost::record_phase*'`.
        record_phase(|| -> R<()> {
            match variant {
                v if v.starts_with("probe-") => {
                    // raw-pass with extra memory operations around each write
                    // (see `Probe`): what one store, load or atomic costs
                    // between a driver's commands.
                    let probe = Probe::parse(v).ok_or_else(|| format!("bad probe {v}"))?;
                    for i in 0..n {
                        // SAFETY: as raw-pass.
                        unsafe {
                            d.cmd_write_timestamp2(
                                cmd.raw(),
                                vk::PipelineStageFlags2::TOP_OF_PIPE,
                                pool,
                                2 * i,
                            );
                        }
                        probe.run(&mut probe_mem, &probe_atomic, i, probe.count / 2);
                        // SAFETY: as raw-pass.
                        unsafe {
                            d.cmd_write_timestamp2(
                                cmd.raw(),
                                vk::PipelineStageFlags2::ALL_COMMANDS,
                                pool,
                                2 * i + 1,
                            );
                        }
                        probe.run(
                            &mut probe_mem,
                            &probe_atomic,
                            i,
                            probe.count - probe.count / 2,
                        );
                    }
                }
                "raw-pass" | "raw-frame" | "raw-scopes" | "raw-scopes-top" | "raw-precise" => {
                    raw_scopes.clear();
                    // `raw-scopes` starts each scope after all prior work, as the
                    // profiler does; the others at the top of the pipe.
                    let start = if variant == "raw-scopes" {
                        vk::PipelineStageFlags2::ALL_COMMANDS
                    } else {
                        vk::PipelineStageFlags2::TOP_OF_PIPE
                    };
                    for i in 0..n {
                        if variant.starts_with("raw-scopes") {
                            raw_scopes.push(("dispatch", 2 * i));
                        }
                        // SAFETY: `cmd` is recording outside a render pass; the
                        // queries were reset above.
                        unsafe {
                            if variant != "raw-precise" {
                                d.cmd_write_timestamp2(cmd.raw(), start, pool, 2 * i);
                                d.cmd_write_timestamp2(
                                    cmd.raw(),
                                    vk::PipelineStageFlags2::ALL_COMMANDS,
                                    pool,
                                    2 * i + 1,
                                );
                            } else {
                                d.cmd_write_timestamp2(
                                    cmd.raw(),
                                    vk::PipelineStageFlags2::ALL_COMMANDS,
                                    pool,
                                    i,
                                );
                            }
                        }
                    }
                }
                "heap-precise" | "heap-relaxed" => {
                    let granularity = if variant == "heap-precise" {
                        TimestampGranularity::Precise
                    } else {
                        TimestampGranularity::Relaxed
                    };
                    let mut enc = cmd.compute_encoder(&ComputePassDescriptor::default())?;
                    for i in 0..n {
                        enc.write_timestamp(granularity, &heap, i)?;
                    }
                    enc.end_encoding()?;
                }
                "encoder-sample" => {
                    let mut enc = cmd.compute_encoder(&ComputePassDescriptor::default())?;
                    for i in 0..n {
                        enc.sample_counters(&buffer, i, true)?;
                    }
                    enc.end_encoding()?;
                }
                "relaxed-pass" => {
                    for i in 0..n {
                        let mut enc = cmd.compute_encoder(&ComputePassDescriptor::default())?;
                        enc.write_timestamp(TimestampGranularity::Relaxed, &heap, i)?;
                        enc.end_encoding()?;
                    }
                }
                "passes" => {
                    for _ in 0..n {
                        let enc = cmd.compute_encoder(&ComputePassDescriptor::default())?;
                        enc.end_encoding()?;
                    }
                }
                "attachments" => {
                    for i in 0..n {
                        let enc = cmd.compute_encoder(&ComputePassDescriptor {
                            sample_buffer_attachments: &[PassSampleBufferAttachment {
                                sample_buffer: &buffer,
                                start_of_encoder_sample_index: Some(2 * i),
                                end_of_encoder_sample_index: Some(2 * i + 1),
                            }],
                        })?;
                        enc.end_encoding()?;
                    }
                }
                "scope-pairs" => {
                    for i in 0..n {
                        cmd.sample_counters(&buffer, 2 * i, TimestampGranularity::Relaxed)?;
                        cmd.sample_counters(&buffer, 2 * i + 1, TimestampGranularity::Precise)?;
                    }
                }
                "profiler" => {
                    let frame = frame.as_ref().ok_or("no frame")?;
                    for _ in 0..n {
                        let scope = frame.scope(&mut cmd, "dispatch", PassKind::Compute)?;
                        scope.end(&mut cmd)?;
                    }
                }
                other => return Err(format!("unknown variant {other}").into()),
            }
            Ok(())
        })?;
        rec[k].push(t.elapsed().as_nanos() as f64 / samples as f64);
        let submission = cmd.commit()?;
        let t = Instant::now();
        if let Some(frame) = frame {
            profiler.end_frame(frame, [&submission])?;
        }
        endf[k].push(t.elapsed().as_nanos() as f64 / samples as f64);
        submission.wait()?;
        device.wait_idle()?;
        let t = Instant::now();
        resolve_phase(|| -> R<()> {
            match variant {
                v if v == "raw-pass"
                    || v == "raw-frame"
                    || v == "raw-scopes"
                    || v == "raw-scopes-top"
                    || v == "raw-precise"
                    || v.starts_with("probe-") =>
                {
                    // SAFETY: `raw_out` holds `samples` (value, availability) pairs.
                    unsafe {
                        d.get_query_pool_results(
                            pool,
                            0,
                            &mut raw_out[..samples as usize],
                            vk::QueryResultFlags::TYPE_64 | vk::QueryResultFlags::WITH_AVAILABILITY,
                        )?
                    };
                    black_box(&raw_out);
                    if variant != "raw-pass"
                        && variant != "raw-precise"
                        && !variant.starts_with("probe-")
                    {
                        // SAFETY: the GPU is done with the queries (waited above).
                        unsafe { d.reset_query_pool(pool, 0, samples) };
                    }
                    if variant.starts_with("raw-scopes") {
                        raw_results.clear();
                        for &(label, q) in &raw_scopes {
                            let ([t0, a0], [t1, a1]) =
                                (raw_out[q as usize], raw_out[q as usize + 1]);
                            if a0 != 0 && a1 != 0 {
                                let ns = |t: u64| (t as f64 * period) as u64;
                                raw_results.push((label, ns(t0), ns(t1)));
                            }
                        }
                        if raw_results.len() != n as usize {
                            return Err("raw-scopes: a scope not available".into());
                        }
                        black_box(&raw_results);
                    }
                }
                "profiler" => {
                    profiler.collect_into(&mut frames)?;
                    if frames.len() != 1 || frames[0].scopes.len() != n as usize {
                        return Err("profiler: frame not complete".into());
                    }
                    black_box(&frames);
                }
                v => {
                    let r = if v == "heap-precise" || v == "heap-relaxed" || v == "relaxed-pass" {
                        heap.resolve_counter_range(0..samples as u64)?
                    } else {
                        buffer.resolve_counter_range(0..samples as u64)?
                    };
                    black_box(r);
                }
            }
            Ok(())
        })?;
        res[k].push(t.elapsed().as_nanos() as f64 / samples as f64);
        spare = Some(submission.reuse()?);
    }
    device.wait_idle()?;
    // SAFETY: the device is idle; nothing uses the pool any more.
    unsafe { d.destroy_query_pool(pool, None) };
    for (k, v) in variants.iter().enumerate() {
        let samples = samples_of(v);
        println!(
            "{v}: record {:.1} ns/sample, resolve {:.1} ns/sample (median of {rounds}, {samples} samples)",
            median(&mut rec[k].clone()),
            median(&mut res[k].clone())
        );
        if *v == "profiler" {
            let per_sample = median(&mut endf[k].clone());
            println!(
                "{v}: end_frame {:.0} ns per frame, {per_sample:.2} ns/sample (median of {rounds})",
                per_sample * samples as f64
            );
        }
    }
    // Every round's figures, for ratios against a baseline variant taken
    // round by round.
    if std::env::var_os("HOST_COST_ROUNDS").is_some() {
        for (k, v) in variants.iter().enumerate() {
            for r in 0..rounds {
                println!(
                    "round {r} {v} record {:.2} resolve {:.2} samples {}",
                    rec[k][r],
                    res[k][r],
                    samples_of(v)
                );
            }
        }
    }
    // Each later variant's host cost (record + resolve) over the first's,
    // round by round; for the profiler also with `end_frame` counted (the
    // first variant's own `end_frame` is 0 unless it is the profiler).
    for k in 1..variants.len() {
        let with_end = variants[k] == "profiler";
        for counted in [false, true] {
            if counted && !with_end {
                continue;
            }
            let cost =
                |k: usize, r: usize| rec[k][r] + res[k][r] + if counted { endf[k][r] } else { 0.0 };
            let mut ratios: Vec<f64> = (0..rounds).map(|r| cost(k, r) / cost(0, r)).collect();
            ratios.sort_by(f64::total_cmp);
            let q = |p: f64| ratios[((ratios.len() - 1) as f64 * p).round() as usize];
            println!(
                "{} / {}: host ratio per round{}, median {:.2} [quartiles {:.2}, {:.2}; min {:.2}, max {:.2}]",
                variants[k],
                variants[0],
                if counted { " with end_frame" } else { "" },
                q(0.5),
                q(0.25),
                q(0.75),
                ratios[0],
                ratios[ratios.len() - 1]
            );
        }
    }
    Ok(())
}

/// A `probe-KIND-K` variant: raw-pass with `K` extra operations per pair of
/// writes (half after each), of one kind:
/// - `stores`: plain stores into the iteration's own 64 bytes of a 256 KiB
///   array (as a scope's record is written);
/// - `hot`: stores into the first 64 bytes of it (always in L1);
/// - `loads`: loads from the iteration's own 64 bytes;
/// - `atomic`: relaxed `fetch_add`s on one atomic (a locked instruction).
struct Probe {
    kind: ProbeKind,
    count: usize,
}

#[derive(Clone, Copy)]
enum ProbeKind {
    Stores,
    Hot,
    Loads,
    Atomic,
}

impl Probe {
    fn parse(v: &str) -> Option<Self> {
        let rest = v.strip_prefix("probe-")?;
        let (kind, count) = rest.rsplit_once('-')?;
        let kind = match kind {
            "stores" => ProbeKind::Stores,
            "hot" => ProbeKind::Hot,
            "loads" => ProbeKind::Loads,
            "atomic" => ProbeKind::Atomic,
            _ => return None,
        };
        Some(Self {
            kind,
            count: count.parse().ok()?,
        })
    }

    #[inline(always)]
    fn run(&self, mem: &mut [u64], atomic: &std::sync::atomic::AtomicU64, i: u32, k: usize) {
        let base = (8 * i as usize) % mem.len();
        for j in 0..k {
            let at = base + (j % 8);
            let p = mem.as_mut_ptr();
            match self.kind {
                // SAFETY: `at` is inside `mem` (its length is a multiple of 8).
                ProbeKind::Stores => unsafe { std::ptr::write_volatile(p.add(at), u64::from(i)) },
                // SAFETY: `j % 8` is inside `mem` (at least 8 long).
                ProbeKind::Hot => unsafe { std::ptr::write_volatile(p.add(j % 8), u64::from(i)) },
                ProbeKind::Loads => {
                    // SAFETY: as for `Stores`.
                    black_box(unsafe { std::ptr::read_volatile(p.add(at)) });
                }
                ProbeKind::Atomic => {
                    atomic.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
            }
        }
    }
}
