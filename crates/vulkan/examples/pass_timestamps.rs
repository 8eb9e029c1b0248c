//! Metal's counter-sampling walkthrough on Vulkan: find the counter sets,
//! make sample buffers, sample a compute pass's start and end, resolve on the
//! CPU, check for error values and convert timestamps to CPU-clock
//! nanoseconds.
//!
//! ```text
//! cargo run -p gpu-counters-vulkan --example pass_timestamps
//! ```

use gpu_counters_hal::{
    CommonCounterSet, CounterResultTimestamp, CounterSampleBufferDescriptor, SampleValue,
};
use gpu_counters_vulkan::{
    CommandBuffer, ComputePassDescriptor, Device, InstanceOptions, PassSampleBufferAttachment,
};
use gpu_counters_workloads::{ComputeWorkload, GpuContext};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let device = Device::open_default(&InstanceOptions::default())?;
    let info = device.info();
    println!("device: {} ({:?})", info.name, info.device_type);
    for set in &info.counter_sets {
        let names: Vec<_> = set.counters.iter().map(|c| c.name()).collect();
        println!("  counter set {}: {}", set.name(), names.join(", "));
    }

    // Confirm the device has the sets, then make one buffer per set.
    let times = device.make_counter_sample_buffer(&CounterSampleBufferDescriptor::new(
        CommonCounterSet::Timestamp,
        "compute pass times",
        2,
    ))?;
    let stats = device.make_counter_sample_buffer(&CounterSampleBufferDescriptor::new(
        CommonCounterSet::Statistic,
        "compute pass statistics",
        2,
    ))?;

    // 3 dispatches of 100 workgroups of 64 invocations.
    let ctx = GpuContext::from_device(&device);
    let mut work = ComputeWorkload::new(&ctx, 64, 100, 200)?;
    let mut cmd = CommandBuffer::new(&device)?;
    let attach = |b| PassSampleBufferAttachment {
        sample_buffer: b,
        start_of_encoder_sample_index: Some(0),
        end_of_encoder_sample_index: Some(1),
    };
    let pass = cmd.compute_encoder(&ComputePassDescriptor {
        sample_buffer_attachments: &[attach(&times), attach(&stats)],
    })?;
    for _ in 0..3 {
        // SAFETY: `pass.raw()` is recording outside any render pass (a compute encoder)
        // on `device`, where the workload was built; the GPU is done with it
        // (the submission is waited for) before it is destroyed.
        unsafe {
            work.record_dispatch(device.raw(), pass.raw());
            work.record_barrier(device.raw(), pass.raw());
        }
    }
    pass.end_encoding()?;
    let submission = cmd.commit()?;
    submission.wait()?;

    // Resolve, check every sample, convert.
    let calibration = device.calibration()?;
    let resolved = times.resolve_counter_range(0..2)?;
    let mut ns = Vec::new();
    for i in 0..resolved.len() {
        match resolved.sample::<CounterResultTimestamp>(i)? {
            SampleValue::Value(t) => {
                let c = calibration.to_cpu_ns(t.timestamp)?;
                println!(
                    "  timestamp {i}: {} ticks = {} ns ± {} ns (CLOCK_MONOTONIC)",
                    t.timestamp, c.ns, c.error_bound_ns
                );
                ns.push(c.ns);
            }
            other => println!("  timestamp {i} has no value: {other:?}"),
        }
    }
    if let [start, end] = ns[..] {
        println!("  pass took {:.3} us", (end - start) as f64 / 1e3);
    }
    let s = stats.resolve_counter_range(0..2)?;
    let st = s.statistics()?;
    println!(
        "  compute kernel invocations: {} (expected {})",
        st[1].since(&st[0]).compute_kernel_invocations,
        work.expected_invocations(3)
    );
    // SAFETY: the submission completed, so the GPU no longer uses the workload.
    unsafe { work.destroy(device.raw()) };
    Ok(())
}
