//! What one GPU-to-CPU timestamp conversion costs on this host, against a
//! plain multiply by the timestamp period (what a hand-rolled profiler does,
//! without an error bound or drift):
//!
//! ```text
//! cargo run --release -p gpu-counters-hal --example conversion_cost
//! ```
//!
//! Converts 8,192 timestamps with one [`Converter`](gpu_counters_hal::Converter)
//! 200 times and prints the fastest run's ns per timestamp, for times
//! between the two newest anchors (a calibration refreshed after the work)
//! and after the newest (the usual case between refits).

use gpu_counters_hal::{Calibration, CalibrationMethod, TimestampPair};
use std::hint::black_box;
use std::time::Instant;

/// The fastest of 200 runs of `f` over `ticks`, in ns per timestamp.
fn fastest(ticks: &[u64], f: impl Fn(u64) -> u64) -> f64 {
    let mut best = f64::MAX;
    for _ in 0..200 {
        let t = Instant::now();
        let mut sum = 0u64;
        for &x in ticks {
            sum = sum.wrapping_add(f(black_box(x)));
        }
        black_box(sum);
        best = best.min(t.elapsed().as_nanos() as f64 / ticks.len() as f64);
    }
    best
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let pair = |cpu_ns, gpu_ticks| TimestampPair {
        cpu_ns,
        gpu_ticks,
        max_deviation_ns: 300,
    };
    // Three anchors 100 ms apart, the GPU clock 0.1 ppm fast.
    let mut c = Calibration::new(
        CalibrationMethod::CalibratedPair,
        1.0,
        64,
        pair(1_000_000_000, 5_000_000),
    )?;
    c.add_anchor(pair(1_100_000_000, 105_000_010))?;
    c.add_anchor(pair(1_200_000_000, 205_000_030))?;
    let between: Vec<u64> = (0..8192u64).map(|i| 150_000_000 + i * 997).collect();
    let after: Vec<u64> = (0..8192u64).map(|i| 205_000_100 + i * 997).collect();
    let convert = c.converter();
    let to_ns = |x| convert.to_cpu_ns(x).map_or(0, |t| t.ns ^ t.error_bound_ns);
    println!(
        "ns per timestamp: between anchors {:.2}, after the newest {:.2}, plain multiply {:.2}",
        fastest(&between, to_ns),
        fastest(&after, to_ns),
        fastest(&after, |x| (x as f64 * c.period_ns()) as u64),
    );
    Ok(())
}
