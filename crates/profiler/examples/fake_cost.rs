//! The profiler's own host cost, without a driver: `Frame::scope` /
//! `Scope::end` pairs and `Profiler::collect_into` on hal's fake backend
//! (its recording and resolve are plain memory), so what is timed is the
//! profiler's bookkeeping and hal's, not a GPU driver's.
//!
//! ```text
//! cargo run --release -p gpu-counters-profiler --example fake_cost -- 4096 200
//! ```
//!
//! Prints the median record and collect ns per scope over the frames.

use gpu_counters_hal::fake::FakeDevice;
use gpu_counters_hal::timeline::PassKind;
use gpu_counters_profiler::{Profiler, ProfilerOptions, WhenFull};
use std::time::{Duration, Instant};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let n: u32 = args.next().map_or(Ok(4096), |s| s.parse())?;
    let frames: usize = args.next().map_or(Ok(200), |s| s.parse())?;
    let device = FakeDevice::new("fake GPU", 64)?;
    let profiler = Profiler::new(
        &device,
        ProfilerOptions {
            frames_in_flight: 2,
            max_scopes_per_frame: n,
            statistics: false,
            when_full: WhenFull::Wait {
                timeout: Duration::from_secs(10),
            },
            queue_name: None,
        },
    )?;
    let (mut record, mut collect) = (Vec::new(), Vec::new());
    let mut results = Vec::new();
    for _ in 0..frames {
        let frame = profiler.begin_frame()?;
        let mut cmd = device.recorder();
        let t = Instant::now();
        for _ in 0..n {
            let scope = frame.scope(&mut cmd, "dispatch", PassKind::Compute)?;
            scope.end(&mut cmd)?;
        }
        record.push(t.elapsed().as_nanos() as f64 / f64::from(n));
        let submission = device.submit(cmd)?;
        profiler.end_frame(frame, [&submission])?;
        submission.wait();
        let t = Instant::now();
        profiler.collect_into(&mut results)?;
        collect.push(t.elapsed().as_nanos() as f64 / f64::from(n));
        if results.len() != 1 || results[0].scopes.len() != n as usize {
            return Err("a frame was not complete".into());
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    println!(
        "fake backend, {n} scopes a frame, median of {frames} frames: record {:.1} ns/scope, collect {:.1} ns/scope",
        median(&mut record),
        median(&mut collect)
    );
    Ok(())
}
