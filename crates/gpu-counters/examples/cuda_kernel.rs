//! Times one CUDA kernel with two timestamp samples around its launch on the
//! device's stream, where two CUDA events would go, and prints its duration
//! on the CPU clock with its error bound.
//!
//! ```text
//! cargo run -p gpu-counters --features cuda --example cuda_kernel
//! ```
//!
//! The kernel is launched with the application's own cudarc (the same
//! version gpu-counters' CUDA backend uses). The CUDA driver is loaded at
//! run time: without one (or without a device) the example prints one line
//! saying so and exits 0.

use cudarc::driver::{LaunchConfig, PushKernelArg};
use gpu_counters::cuda::{Device, OpenError};
use gpu_counters::{
    CommonCounterSet, CounterSampleBufferDescriptor, SampleValue, TimestampGranularity,
};
use std::error::Error;

/// The application's kernel: each thread spins `n` iterations.
const PTX: &str = "
.version 7.0
.target sm_70
.address_size 64
.visible .entry spin(.param .u32 n)
{
    .reg .b32 %r<3>;
    .reg .pred %p;
    ld.param.u32 %r1, [n];
    mov.u32 %r2, 0;
LOOP:
    add.u32 %r2, %r2, 1;
    setp.lt.u32 %p, %r2, %r1;
    @%p bra LOOP;
    ret;
}";

fn main() -> Result<(), Box<dyn Error>> {
    // Device 0's primary context and a stream of its own; timestamps only.
    let device = match Device::open(0) {
        Ok(device) => device,
        Err(e @ (OpenError::NoDriver { .. } | OpenError::NoDevice { .. })) => {
            println!("cuda_kernel: skipped: {e}");
            return Ok(());
        }
        Err(e) => return Err(e.into()),
    };
    let spin = device
        .context()
        .load_module(cudarc::nvrtc::Ptx::from_src(PTX))?
        .load_function("spin")?;
    let times = device.make_counter_sample_buffer(&CounterSampleBufferDescriptor::new(
        CommonCounterSet::Timestamp,
        "kernel",
        2,
    ))?;

    // The glue: a sample before and after the launch, on the same stream.
    let mut recorder = device.recorder();
    recorder.sample_counters(&times, 0, TimestampGranularity::Precise)?;
    let mut launch = device.stream().launch_builder(&spin);
    let n = 100_000u32;
    launch.arg(&n);
    // SAFETY: `spin` takes one u32, given; it touches no memory.
    unsafe { launch.launch(LaunchConfig::for_num_elems(64 * 256)) }?;
    recorder.sample_counters(&times, 1, TimestampGranularity::Precise)?;
    device.submit(recorder)?.wait()?;

    // Both samples onto the CPU's monotonic clock; a sample without a value
    // is a typed status, never a zero.
    let resolved = times.resolve_counter_range(0..2)?;
    match device.calibration()?.duration(&resolved, 0, 1)? {
        SampleValue::Value(d) => println!("kernel: {} ns ± {} ns", d.ns, d.error_bound_ns),
        lacking => return Err(format!("no duration: {lacking:?}").into()),
    }
    Ok(())
}
