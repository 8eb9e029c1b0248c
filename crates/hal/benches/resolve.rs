//! hal's CPU resolve on the fake backend: `resolve_counter_range` of 1k and
//! 64k timestamps, every one written and available, into a new result and
//! into one reused between resolves. No GPU: the bookkeeping and the
//! status and value checks every backend's CPU resolve runs, over a
//! backend whose query read is a plain memory copy.
//!
//! ```text
//! cargo bench -p gpu-counters-hal --bench resolve
//! ```

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use gpu_counters_hal::fake::{FakeDevice, FakeSampleBuffer};
use gpu_counters_hal::{
    BackendDevice, BackendRecorder, CommonCounterSet, CounterSampleBufferDescriptor,
    ResolvedCounters, Result, SampleStatus, TimestampGranularity,
};
use std::hint::black_box;

/// A buffer of `n` timestamps, each written by the fake GPU.
fn written(device: &FakeDevice, n: u32) -> Result<FakeSampleBuffer> {
    let buffer = device.make_counter_sample_buffer(&CounterSampleBufferDescriptor::new(
        CommonCounterSet::Timestamp,
        "resolve bench",
        n,
    ))?;
    let mut cmd = device.recorder();
    for i in 0..n {
        cmd.sample_counters(&buffer, i, TimestampGranularity::Relaxed)?;
    }
    device.submit(cmd)?.wait();
    Ok(buffer)
}

fn resolve(c: &mut Criterion) {
    let device = FakeDevice::new("fake GPU", 64).expect("fake device");
    let mut group = c.benchmark_group("resolve_counter_range");
    for n in [1024u32, 65536] {
        let buffer = written(&device, n).expect("recorded samples");
        let range = 0..u64::from(n);
        let check = buffer
            .resolve_counter_range(range.clone())
            .expect("resolve");
        assert!(check.statuses().iter().all(|s| *s == SampleStatus::Written));
        group.throughput(Throughput::Elements(u64::from(n)));
        group.bench_with_input(BenchmarkId::new("new", n), &n, |b, _| {
            b.iter(|| {
                black_box(
                    buffer
                        .resolve_counter_range(range.clone())
                        .expect("resolve"),
                )
            })
        });
        let mut out = ResolvedCounters::default();
        group.bench_with_input(BenchmarkId::new("into", n), &n, |b, _| {
            b.iter(|| {
                buffer
                    .resolve_counter_range_into(range.clone(), &mut out)
                    .expect("resolve");
                black_box(&out);
            })
        });
    }
    group.finish();
}

criterion_group!(benches, resolve);
criterion_main!(benches);
