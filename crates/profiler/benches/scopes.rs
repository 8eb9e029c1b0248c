//! The profiler's own host cost per scope on hal's fake backend (its
//! recording and resolve are plain memory, so what is timed is the
//! profiler's bookkeeping and hal's, not a driver's): recording a
//! `Frame::scope` / `Scope::end` pair, and `Profiler::collect_into` of a
//! finished frame. Frames of 256 scopes; criterion's throughput is per
//! scope.
//!
//! ```text
//! cargo bench -p gpu-counters-profiler --bench scopes
//! ```

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use gpu_counters_hal::fake::FakeDevice;
use gpu_counters_hal::timeline::PassKind;
use gpu_counters_profiler::{FrameResult, Profiler, ProfilerOptions, WhenFull};
use std::time::{Duration, Instant};

const SCOPES: u32 = 256;

/// What one frame's recording and collection took.
struct FrameCost {
    record: Duration,
    collect: Duration,
}

/// Records one frame of [`SCOPES`] scopes, runs it on the fake GPU and
/// collects it into `results` (whose frames it takes back first, as an
/// application's loop does), timing the recording and the collection apart.
fn frame(
    device: &FakeDevice,
    profiler: &Profiler<FakeDevice>,
    results: &mut Vec<FrameResult>,
) -> FrameCost {
    let frame = profiler.begin_frame().expect("frame");
    let mut cmd = device.recorder();
    let t = Instant::now();
    for _ in 0..SCOPES {
        let scope = frame
            .scope(&mut cmd, "dispatch", PassKind::Compute)
            .expect("scope");
        scope.end(&mut cmd).expect("scope end");
    }
    let record = t.elapsed();
    let submission = device.submit(cmd).expect("submit");
    profiler.end_frame(frame, [&submission]).expect("end frame");
    submission.wait();
    let t = Instant::now();
    profiler.collect_into(results).expect("collect");
    let collect = t.elapsed();
    assert_eq!(results.len(), 1, "one frame finished");
    assert_eq!(results[0].scopes.len(), SCOPES as usize, "every scope");
    FrameCost { record, collect }
}

fn scopes(c: &mut Criterion) {
    let device = FakeDevice::new("fake GPU", 64).expect("fake device");
    let profiler = Profiler::new(
        &device,
        ProfilerOptions {
            frames_in_flight: 2,
            max_scopes_per_frame: SCOPES,
            statistics: false,
            when_full: WhenFull::Wait {
                timeout: Duration::from_secs(10),
            },
            queue_name: None,
        },
    )
    .expect("profiler");
    let mut results = Vec::new();
    let mut group = c.benchmark_group("profiler");
    group.throughput(Throughput::Elements(u64::from(SCOPES)));
    group.bench_function("scope record", |b| {
        b.iter_custom(|frames| {
            (0..frames)
                .map(|_| frame(&device, &profiler, &mut results).record)
                .sum()
        })
    });
    group.bench_function("collect", |b| {
        b.iter_custom(|frames| {
            (0..frames)
                .map(|_| frame(&device, &profiler, &mut results).collect)
                .sum()
        })
    });
    group.finish();
}

criterion_group!(benches, scopes);
criterion_main!(benches);
