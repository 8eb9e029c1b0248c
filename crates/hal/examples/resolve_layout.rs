//! What hal's CPU resolve costs beyond reading the backend's queries: N
//! timestamps, recorded and available, resolved from host memory (a
//! backend whose read is a copy, or one that loads each word atomically, as
//! the CUDA backend reads its mapped memory), against a plain copy of the
//! same 16-byte (value, availability) pairs. No GPU: the floor any backend
//! adds to its driver's read.
//!
//! ```text
//! cargo run --release -p gpu-counters-hal --example resolve_layout -- 100000 atomic
//! ```
//!
//! Prints the best of 200 resolves into a result kept between them, in ms.

use gpu_counters_hal::bookkeeping::{QueryRead, SampleSet, ABSENT, NONE};
use gpu_counters_hal::{CommonCounterSet, ResolvedCounters, Result, SampleStatus, StorageMode};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// Queries in host memory, read with a copy.
struct Copied(Vec<u64>);

impl QueryRead for Copied {
    fn values(&self) -> u32 {
        1
    }

    fn read(&self, first: u32, count: u32, out: &mut [u64]) -> Result<()> {
        let from = 2 * first as usize;
        out.copy_from_slice(&self.0[from..from + 2 * count as usize]);
        Ok(())
    }
}

/// Queries read word by word with atomic loads; a value that is not 0 is
/// its own availability, as in the CUDA backend.
struct Atomic(Vec<AtomicU64>);

impl QueryRead for Atomic {
    fn values(&self) -> u32 {
        1
    }

    fn read(&self, first: u32, count: u32, out: &mut [u64]) -> Result<()> {
        let from = 2 * first as usize;
        let words = &self.0[from..from + 2 * count as usize];
        for (o, w) in out.chunks_exact_mut(2).zip(words.chunks_exact(2)) {
            let a = w[1].load(Ordering::Acquire);
            let v = w[0].load(Ordering::Acquire);
            o[0] = v;
            o[1] = if a != 0 { a } else { u64::from(v != 0) };
        }
        Ok(())
    }
}

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let n: u32 = args.next().and_then(|s| s.parse().ok()).unwrap_or(65536);
    let atomic = args.next().is_some_and(|s| s == "atomic");
    let samples = SampleSet::new(
        "resolve layout".into(),
        CommonCounterSet::Timestamp,
        StorageMode::Shared,
        n,
        [ABSENT; 8],
        u64::MAX,
        "sample",
    )?;
    {
        let mut slots = samples.lock()?;
        for i in 0..n {
            slots.mark_recorded(i, NONE, false, 1, 0);
        }
    }
    // (value, availability) pairs: values from 1, every one available.
    let pairs: Vec<u64> = (0..u64::from(n)).flat_map(|i| [i + 1, 1]).collect();
    let copied = Copied(pairs.clone());
    let atomic_words = Atomic(pairs.iter().map(|&w| AtomicU64::new(w)).collect());
    let queries: &dyn QueryRead = if atomic { &atomic_words } else { &copied };
    let mut out = ResolvedCounters::default();
    let mut copy_into = vec![0u64; pairs.len()];
    let (mut resolve_ms, mut copy_ms) = (f64::MAX, f64::MAX);
    for _ in 0..200 {
        let t = Instant::now();
        samples.resolve_cpu_into(0..u64::from(n), queries, None, &mut out)?;
        resolve_ms = resolve_ms.min(t.elapsed().as_secs_f64() * 1e3);
        assert_eq!(out.count(SampleStatus::Written), n as usize);
        let t = Instant::now();
        copy_into.copy_from_slice(std::hint::black_box(&pairs));
        copy_ms = copy_ms.min(t.elapsed().as_secs_f64() * 1e3);
    }
    println!(
        "{n} timestamps ({} read): resolve {resolve_ms:.3} ms, copy of the 16-byte pairs {copy_ms:.3} ms",
        if atomic { "atomic" } else { "copied" }
    );
    Ok(())
}
