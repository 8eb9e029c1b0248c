//! Host cost of the wgpu rows of `gpu-counters bench`, alone and round by
//! round, for `perf` and callgrind: records `N` compute passes of one
//! dispatch each `ROUNDS` times on wgpu's Vulkan backend, finishes and
//! submits them, waits, and reads the samples back, as the bench's wgpu
//! rows do, with the bench's kernel (`TinyCompute`).
//!
//! ```text
//! cargo build --release -p gpu-counters-bench --example wgpu_host_cost
//! HOST_COST_ROUNDS=1 target/release/examples/wgpu_host_cost \
//!     raw-passes,raw-writes,gcw-passes,gcw-writes,drop-in,wgpu-profiler 4096 40
//! ```
//!
//! Arguments: `VARIANTS N ROUNDS`. `VARIANTS` is a comma-separated list
//! of:
//! - `raw-passes`: a pass per dispatch, no timestamps (raw wgpu's baseline);
//! - `raw-writes`: the same with each pass's `timestamp_writes` on raw query
//!   sets, resolved and copied at the encoder's end; read back by mapping
//!   and converted to ns with the queue's timestamp period;
//! - `raw-writes-labelled`: `raw-writes` with each pass labelled
//!   `"dispatch"`, as profiled passes and wgpu-profiler's are (wgpu copies
//!   a pass's label into a `String`): how much of a profiled pass's cost is
//!   its label;
//! - `gcw-passes`: a pass per dispatch on a `gcw::Device::wrap`ped encoder,
//!   submitted with `gcw::Device::submit` (gpu-counters-wgpu's baseline);
//! - `gcw-writes`: the same with `gcw::Recorder::compute_pass_timestamp_writes`
//!   per pass; read back with `resolve_counter_range` and converted with the
//!   device's calibration;
//! - `drop-in`: `gpu_counters::wgpu::Profiler::scoped_compute_pass` per
//!   dispatch on raw encoders, `queue.submit` and `end_frame` per frame of
//!   at most `DROP_IN_MAX_SCOPES` scopes, and `collect`;
//! - `wgpu-profiler`: wgpu-profiler 0.28's pass query per dispatch,
//!   `end_frame` and `process_finished_frame`.
//!
//! Record time runs to the return of `Queue::submit` (for gpu-counters-wgpu,
//! of `gcw::Device::submit`), as in the bench; resolve time from the end of
//! the wait to the last value converted (`end_frame` of either profiler
//! counts as resolve). The variants take turns round by round, the first
//! of each round rotating. With `HOST_COST_EMPTY` set, every pass is
//! empty (no dispatch), as in the bench's samples-alone rows. With
//! `HOST_COST_ROUNDS` set, every round's record and resolve ns per sample
//! are printed
//! (`round R VARIANT record X resolve Y samples S`).

use gpu_counters::wgpu::Profiler;
use gpu_counters_bench::{
    check_drop_in_frames, check_written, drop_in_settings, timestamps_ns, RawWgpuQueries,
    TinyCompute, DROP_IN_MAX_SCOPES,
};
use gpu_counters_hal::CounterSampleBufferDescriptor;
use gpu_counters_wgpu as gcw;
use std::error::Error;
use std::hint::black_box;
use std::time::Instant;
use wgpu_profiler::{GpuProfiler, GpuProfilerSettings};

type R<T> = Result<T, Box<dyn Error + Send + Sync>>;

/// Defines, for each variant, a function per phase that runs `f` out of
/// line, and `record_phase` and `resolve_phase`, which run `f` in the
/// variant's function, for callgrind:
/// `--toggle-collect='wgpu_host_cost::record_phase*'` (the recording phase
/// of every variant) or
/// `--toggle-collect='wgpu_host_cost::record_phase_drop_in*'` (one
/// variant's, in a process where others take turns); `resolve_phase`
/// alike. Functions of the example's own, so that their symbols name it.
/// The two dispatchers are always inlined: a function of their name would
/// match the toggles too, and callgrind toggles collection on entering and
/// leaving each match.
macro_rules! phases {
    ($($variant:literal => $record:ident, $resolve:ident;)*) => {
        $(phases!(@one $record); phases!(@one $resolve);)*

        #[inline(always)]
        fn record_phase<T>(variant: &str, f: impl FnOnce() -> T) -> T {
            match variant {
                $($variant => $record(f),)*
                // An unknown variant: its recording fails.
                _ => f(),
            }
        }

        #[inline(always)]
        fn resolve_phase<T>(variant: &str, f: impl FnOnce() -> T) -> T {
            match variant {
                $($variant => $resolve(f),)*
                _ => f(),
            }
        }
    };
    (@one $name:ident) => {
        #[inline(never)]
        fn $name<T>(f: impl FnOnce() -> T) -> T {
            // A body of its own, so that the functions are not merged.
            black_box(stringify!($name));
            f()
        }
    };
}
phases! {
    "raw-passes" => record_phase_raw_passes, resolve_phase_raw_passes;
    "raw-writes" => record_phase_raw_writes, resolve_phase_raw_writes;
    "raw-writes-labelled" => record_phase_raw_writes_labelled, resolve_phase_raw_writes_labelled;
    "wgpu-profiler" => record_phase_wgpu_profiler, resolve_phase_wgpu_profiler;
    "gcw-passes" => record_phase_gcw_passes, resolve_phase_gcw_passes;
    "gcw-writes" => record_phase_gcw_writes, resolve_phase_gcw_writes;
    "drop-in" => record_phase_drop_in, resolve_phase_drop_in;
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> R<()> {
    let mut args = std::env::args().skip(1);
    let variant = args
        .next()
        .unwrap_or_else(|| "raw-passes,raw-writes,gcw-passes,gcw-writes".into());
    let n: u32 = args.next().map_or(Ok(4096), |s| s.parse())?;
    let rounds: usize = args.next().map_or(Ok(20), |s| s.parse())?;

    let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
    desc.backends = wgpu::Backends::VULKAN;
    // No validation layer and no debug labels: wgpu as shipped.
    desc.flags = wgpu::InstanceFlags::empty();
    let instance = wgpu::Instance::new(desc);
    let adapters = pollster::block_on(instance.enumerate_adapters(wgpu::Backends::VULKAN));
    // The first adapter that is not a CPU one, else the first.
    let adapter = adapters
        .iter()
        .find(|a| a.get_info().device_type != wgpu::DeviceType::Cpu)
        .or(adapters.first())
        .cloned()
        .ok_or("no wgpu Vulkan adapter")?;
    let features = adapter.features()
        & (wgpu::Features::TIMESTAMP_QUERY | wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS);
    let gc = pollster::block_on(gcw::Device::request(
        &adapter,
        &wgpu::DeviceDescriptor {
            label: Some("wgpu host cost"),
            required_features: features,
            required_limits: wgpu::Limits::default(),
            ..Default::default()
        },
    ))?;
    let (device, queue) = (gc.device().clone(), gc.queue().clone());
    eprintln!("adapter: {}", adapter.get_info().name);
    // The bench's own kernel and data: the same workload as its wgpu rows.
    let tiny = TinyCompute::new(&device);
    // `HOST_COST_EMPTY` set: every pass empty, as in the bench's
    // samples-alone rows.
    let empty = std::env::var_os("HOST_COST_EMPTY").is_some();
    let dispatch = |pass: &mut wgpu::ComputePass<'_>| {
        if !empty {
            tiny.dispatch(pass)
        }
    };
    let raw = RawWgpuQueries::new(&device, 2 * n, "raw samples");
    let period_ns = f64::from(queue.get_timestamp_period());
    let max = gpu_counters_wgpu::MAX_SAMPLE_COUNT;
    let buffers: Vec<gcw::CounterSampleBuffer> = (0..(2 * n).div_ceil(max))
        .map(|k| {
            gc.make_counter_sample_buffer(&CounterSampleBufferDescriptor::new(
                gpu_counters_hal::CommonCounterSet::Timestamp,
                "host cost",
                (2 * n - k * max).min(max),
            ))
        })
        .collect::<Result<_, _>>()?;
    let calibration = gc.calibration()?;
    let drop_in = Profiler::with_device(&gc, drop_in_settings(n))?;
    let mut profiler = GpuProfiler::new(
        &device,
        GpuProfilerSettings {
            enable_timer_queries: true,
            enable_debug_groups: false,
            max_num_pending_frames: 3,
        },
    )?;

    let variants: Vec<&str> = variant.split(',').collect();
    let mut rec = vec![Vec::new(); variants.len()];
    let mut res = vec![Vec::new(); variants.len()];
    for round in 0..rounds * variants.len() {
        let k = (round + round / variants.len()) % variants.len();
        let variant = variants[k];
        let samples = 2 * n;
        if variant == "gcw-writes" {
            // As the bench resets them: not timed.
            for b in &buffers {
                b.reset()?;
            }
        }
        let mut encoder =
            device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
        let t = Instant::now();
        let submission = record_phase(variant, || -> R<Option<gcw::Submission>> {
            match variant {
                "raw-passes" | "raw-writes" | "raw-writes-labelled" => {
                    let label = (variant == "raw-writes-labelled").then_some("dispatch");
                    for i in 0..n {
                        let timestamp_writes = (variant != "raw-passes").then(|| {
                            let (set, q) = raw.at(2 * i);
                            wgpu::ComputePassTimestampWrites {
                                query_set: set,
                                beginning_of_pass_write_index: Some(q),
                                end_of_pass_write_index: Some(raw.at(2 * i + 1).1),
                            }
                        });
                        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                            label,
                            timestamp_writes,
                        });
                        dispatch(&mut pass);
                    }
                    if variant != "raw-passes" {
                        raw.record_resolve(&mut encoder, samples);
                    }
                    queue.submit([encoder.finish()]);
                    Ok(None)
                }
                "wgpu-profiler" => {
                    for _ in 0..n {
                        let query = profiler.begin_pass_query("dispatch", &mut encoder);
                        {
                            let mut pass =
                                encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                                    label: Some("dispatch"),
                                    timestamp_writes: query.compute_pass_timestamp_writes(),
                                });
                            dispatch(&mut pass);
                        }
                        profiler.end_query(&mut encoder, query);
                    }
                    profiler.resolve_queries(&mut encoder);
                    queue.submit([encoder.finish()]);
                    Ok(None)
                }
                "gcw-passes" | "gcw-writes" => {
                    let mut recorder = gc.wrap(encoder);
                    for i in 0..n {
                        let timestamp_writes = if variant == "gcw-writes" {
                            let b = &buffers[(2 * i / max) as usize];
                            let q = 2 * i % max;
                            Some(recorder.compute_pass_timestamp_writes(b, Some(q), Some(q + 1))?)
                        } else {
                            None
                        };
                        let mut pass =
                            recorder
                                .encoder()
                                .begin_compute_pass(&wgpu::ComputePassDescriptor {
                                    label: None,
                                    timestamp_writes,
                                });
                        dispatch(&mut pass);
                    }
                    Ok(Some(gc.submit(recorder)?))
                }
                "drop-in" => {
                    let mut left = n;
                    let mut encoder = Some(encoder);
                    while left > 0 {
                        let mut encoder = encoder.take().unwrap_or_else(|| {
                            device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
                                label: None,
                            })
                        });
                        let k = left.min(DROP_IN_MAX_SCOPES);
                        left -= k;
                        for _ in 0..k {
                            let mut pass = drop_in.scoped_compute_pass("dispatch", &mut encoder);
                            dispatch(&mut pass);
                        }
                        drop_in.resolve_queries(&mut encoder);
                        queue.submit([encoder.finish()]);
                        drop_in.end_frame()?;
                    }
                    Ok(None)
                }
                other => Err(format!("unknown variant {other}").into()),
            }
        })?;
        rec[k].push(t.elapsed().as_nanos() as f64 / f64::from(samples));
        match &submission {
            Some(s) => {
                s.wait()?;
            }
            None => {
                device.poll(wgpu::PollType::wait_indefinitely())?;
            }
        }
        let t = Instant::now();
        resolve_phase(variant, || -> R<()> {
            match variant {
                "raw-writes" | "raw-writes-labelled" => {
                    black_box(raw.read(&device, samples, period_ns)?);
                }
                "wgpu-profiler" => {
                    profiler.end_frame()?;
                    device.poll(wgpu::PollType::wait_indefinitely())?;
                    let results = profiler
                        .process_finished_frame(queue.get_timestamp_period())
                        .ok_or("wgpu-profiler: no finished frame")?;
                    if results.iter().filter(|r| r.time.is_some()).count() != n as usize {
                        return Err("wgpu-profiler: a scope without a time".into());
                    }
                    black_box(results);
                }
                "gcw-writes" => {
                    for b in &buffers {
                        let r = b.resolve_counter_range(0..u64::from(b.sample_count()))?;
                        let ns = timestamps_ns(&r, &calibration)?;
                        check_written(&ns, "gcw-writes")?;
                        black_box(ns);
                    }
                }
                "drop-in" => {
                    let frames = drop_in.collect()?;
                    check_drop_in_frames(&frames, n)?;
                    black_box(frames);
                }
                _ => {}
            }
            Ok(())
        })?;
        let resolve = if variant.ends_with("passes") {
            0.0
        } else {
            t.elapsed().as_nanos() as f64 / f64::from(samples)
        };
        res[k].push(resolve);
    }
    for (k, v) in variants.iter().enumerate() {
        println!(
            "{v}: record {:.1} ns/sample, resolve {:.1} ns/sample (median of {rounds}, {} samples)",
            median(&mut rec[k].clone()),
            median(&mut res[k].clone()),
            2 * n
        );
    }
    if std::env::var_os("HOST_COST_ROUNDS").is_some() {
        for (k, v) in variants.iter().enumerate() {
            for r in 0..rounds {
                println!(
                    "round {r} {v} record {:.2} resolve {:.2} samples {}",
                    rec[k][r],
                    res[k][r],
                    2 * n
                );
            }
        }
    }
    Ok(())
}
