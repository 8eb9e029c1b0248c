//! Hardware counters of a fixed, deterministic kernel, to compare with
//! Nsight Compute on the same kernel.
//!
//! ```text
//! cargo run -p gpu-counters-cuda --example hardware_counters [-- OPTIONS]
//!   --cycles N   cycles each thread spins (default 20000000, ~10 ms)
//!   --reps R     measured launches (default 5)
//!   --ncu        launch only (3 warm-ups, then R launches), with CUPTI's
//!                profiler left to Nsight Compute:
//!                ncu --clock-control none --kernel-name spin --launch-skip 3 \
//!                    --metrics sm__cycles_elapsed.max,gpu__time_duration.sum \
//!                    --print-units base --csv hardware_counters --ncu
//!   --list N     also describe the first N base metrics (units, passes),
//!                timing how long the listing takes
//! ```
//!
//! The kernel: one block of 128 threads per multiprocessor, each spinning
//! until its SM's `%clock64` advanced N cycles; it touches no memory, so
//! Nsight Compute's replays see the same kernel every time. Without
//! `--ncu`, each of R launches is measured alone over a range of
//! gpu-counters' hardware counters (sm__cycles_elapsed.max,
//! gpu__time_duration.sum), then the same kernel once more through the
//! stage-utilization set. Without a CUDA driver or hardware counters it says
//! so and exits 1.

use cudarc::driver::sys::CUdevice_attribute;
use cudarc::driver::{LaunchConfig, PushKernelArg};
use gpu_counters_cuda::hardware::REQUIRED_METRICS;
use gpu_counters_cuda::{Device, DeviceOptions};
use gpu_counters_hal::{
    CommonCounterSet, CounterSampleBufferDescriptor, SampleValue, TimestampGranularity,
};
use std::error::Error;
use std::time::Instant;

/// `spin(cycles)`: every thread spins until its SM's `%clock64` advanced
/// `cycles` (the crate's hardware tests use the same kernel).
const PTX: &str = include_str!("../src/spin.ptx");

const METRICS: [&str; 2] = ["sm__cycles_elapsed.max", "gpu__time_duration.sum"];

fn arg<T: std::str::FromStr>(args: &[String], name: &str, default: T) -> T {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().collect();
    let cycles: u64 = arg(&args, "--cycles", 20_000_000);
    let reps: usize = arg(&args, "--reps", 5).max(1);
    let list: usize = arg(&args, "--list", 0);
    let ncu = args.iter().any(|a| a == "--ncu");
    let t = Instant::now();
    let options = DeviceOptions {
        statistics: !ncu,
        hardware_counters: !ncu,
        ..Default::default()
    };
    let device = match Device::open_with(0, &options) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    };
    let opened = t.elapsed();
    let module = device
        .context()
        .load_module(cudarc::nvrtc::Ptx::from_src(PTX))?;
    let spin = module.load_function("spin")?;
    let sms = device
        .context()
        .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?
        as u32;
    let launch = || -> Result<(), Box<dyn Error>> {
        let mut l = device.stream().launch_builder(&spin);
        l.arg(&cycles);
        let cfg = LaunchConfig {
            grid_dim: (sms, 1, 1),
            block_dim: (128, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: `spin` takes one u64, given; it touches no memory.
        unsafe { l.launch(cfg) }?;
        Ok(())
    };
    println!(
        "{} ({} SMs): spin kernel, {sms} blocks x 128 threads, {cycles} cycles each",
        device.info().name,
        sms
    );
    // Warm-up: the clocks up, the module loaded.
    for _ in 0..3 {
        launch()?;
        device.stream().synchronize()?;
    }
    if ncu {
        for _ in 0..reps {
            launch()?;
            device.stream().synchronize()?;
        }
        println!("launched {reps} measured kernels after 3 warm-ups (for ncu --launch-skip 3)");
        return Ok(());
    }
    let hw = match device.hardware_counters() {
        Ok(h) => h.clone(),
        Err(e) => {
            eprintln!("error: no hardware counters: {e}");
            std::process::exit(1);
        }
    };
    println!(
        "chip {}; device opened (hardware counters probed) in {:.1} ms",
        hw.chip(),
        opened.as_secs_f64() * 1e3
    );
    let t = Instant::now();
    let bases = hw.base_metrics()?;
    println!(
        "{} base metrics listed in {:.2} ms",
        bases.len(),
        t.elapsed().as_secs_f64() * 1e3
    );
    for m in REQUIRED_METRICS {
        let t = Instant::now();
        let i = hw.metric(m)?;
        println!(
            "  {m}: unit {}, {} pass(es), {} [{:.1} ms]",
            i.unit,
            i.passes,
            i.description,
            t.elapsed().as_secs_f64() * 1e3
        );
    }
    if list > 0 {
        let t = Instant::now();
        let mut passes = std::collections::BTreeMap::<usize, usize>::new();
        for b in bases.iter().take(list) {
            let name = format!("{}{}", b.name, b.kind.default_rollup());
            match hw.metric(&name) {
                Ok(i) => *passes.entry(i.passes).or_default() += 1,
                Err(e) => println!("  {name}: {e}"),
            }
        }
        println!(
            "described {} base metrics in {:.0} ms; passes: {passes:?}",
            list.min(bases.len()),
            t.elapsed().as_secs_f64() * 1e3
        );
    }
    let mut cyc = Vec::new();
    let mut ns = Vec::new();
    for r in 0..reps {
        let t = Instant::now();
        let range = hw.begin(&METRICS)?;
        let begun = t.elapsed();
        launch()?;
        let m = range.end()?;
        let c = m.value(METRICS[0]).unwrap_or(f64::NAN);
        let d = m.value(METRICS[1]).unwrap_or(f64::NAN);
        println!(
            "rep {r}: sm__cycles_elapsed.max {c:.0} cycle, gpu__time_duration.sum {d:.0} ns ({:.3} GHz) [CPU: begin {:.1} ms, whole range {:.1} ms]",
            c / d,
            begun.as_secs_f64() * 1e3,
            t.elapsed().as_secs_f64() * 1e3
        );
        cyc.push(c);
        ns.push(d);
    }
    println!(
        "ours, median of {reps}: sm__cycles_elapsed.max {:.0} cycle, gpu__time_duration.sum {:.0} ns",
        median(cyc),
        median(ns)
    );
    // An empty range: what a range adds by itself, and its CPU cost.
    let t = Instant::now();
    let m = hw.begin(&METRICS)?.end()?;
    println!(
        "empty range: sm__cycles_elapsed.max {:.0} cycle, gpu__time_duration.sum {:.0} ns [CPU {:.1} ms]",
        m.value(METRICS[0]).unwrap_or(f64::NAN),
        m.value(METRICS[1]).unwrap_or(f64::NAN),
        t.elapsed().as_secs_f64() * 1e3
    );
    // The same kernel through the stage-utilization set.
    let buffer = device.make_counter_sample_buffer(&CounterSampleBufferDescriptor::new(
        CommonCounterSet::StageUtilization,
        "stage utilization",
        2,
    ))?;
    let mut rec = device.recorder();
    rec.sample_counters(&buffer, 0, TimestampGranularity::Precise)?;
    launch()?;
    rec.sample_counters(&buffer, 1, TimestampGranularity::Precise)?;
    device.submit(rec)?.wait()?;
    let r = buffer.resolve_counter_range(0..2)?;
    match r.stage_utilization_between(0, 1)? {
        SampleValue::Value(v) => println!(
            "stage utilization over one launch: total_cycles {} (other fields {:#x}: no CUDA meaning)",
            v.total_cycles, v.vertex_cycles
        ),
        other => println!("stage utilization over one launch: {other:?}"),
    }
    Ok(())
}
