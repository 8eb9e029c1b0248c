//! Host cost of zero-intrusion pass attachments, alone, for `perf`: `ROUNDS`
//! recorders of `N` passes, each around one tiny kernel, submitted, waited
//! for and resolved; prints the median record and resolve ns per pass.
//!
//! ```text
//! cargo build --release -p gpu-counters-cuda --example zero_intrusion_cost
//! perf record -g target/release/examples/zero_intrusion_cost 4000 20
//! ```
//!
//! Without a CUDA driver or CUPTI it says so and exits 1.

use cudarc::driver::LaunchConfig;
use gpu_counters_cuda::{Device, DeviceOptions, PassAttachment, TimestampSource};
use gpu_counters_hal::{CommonCounterSet, CounterSampleBufferDescriptor, SampleStatus};
use std::error::Error;
use std::time::Instant;

const PTX: &str = r#"
.version 7.0
.target sm_70
.address_size 64
.visible .entry tiny()
{
    ret;
}
"#;

fn main() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args().skip(1);
    let n: u32 = args.next().map_or(Ok(4000), |s| s.parse())?;
    let rounds: usize = args.next().map_or(Ok(20), |s| s.parse())?;
    let options = DeviceOptions {
        timestamps: TimestampSource::Activity,
        ..DeviceOptions::default()
    };
    let d = match Device::open_with(0, &options) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    };
    let module = d.context().load_module(cudarc::nvrtc::Ptx::from_src(PTX))?;
    let tiny = module.load_function("tiny")?;
    let buffer = d.make_counter_sample_buffer(&CounterSampleBufferDescriptor::new(
        CommonCounterSet::Timestamp,
        "zero-intrusion cost",
        2 * n,
    ))?;
    let (mut record, mut resolve) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        buffer.reset()?;
        let t = Instant::now();
        let mut rec = d.recorder();
        for i in 0..n {
            let pass = rec.begin_compute_pass(&[PassAttachment {
                sample_buffer: &buffer,
                start_of_encoder_sample_index: Some(2 * i),
                end_of_encoder_sample_index: Some(2 * i + 1),
            }])?;
            let mut l = pass.stream().launch_builder(&tiny);
            // SAFETY: `tiny` takes no arguments and touches no memory.
            unsafe { l.launch(LaunchConfig::for_num_elems(1)) }?;
            pass.end()?;
        }
        let submission = d.submit(rec)?;
        record.push(t.elapsed().as_nanos() as f64 / f64::from(n));
        submission.wait()?;
        let t = Instant::now();
        let r = buffer.resolve_counter_range(0..u64::from(2 * n))?;
        resolve.push(t.elapsed().as_nanos() as f64 / f64::from(n));
        if r.count(SampleStatus::Written) != 2 * n as usize {
            return Err(format!("{} of {} written", r.count(SampleStatus::Written), 2 * n).into());
        }
    }
    record.sort_by(f64::total_cmp);
    resolve.sort_by(f64::total_cmp);
    println!(
        "{n} zero-intrusion passes, median of {rounds}: record {:.0} ns, resolve {:.0} ns per pass",
        record[rounds / 2],
        resolve[rounds / 2]
    );
    Ok(())
}
