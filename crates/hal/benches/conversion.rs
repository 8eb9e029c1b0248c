//! GPU ticks to CPU-clock nanoseconds with a bound: `Calibration::to_cpu_ns`,
//! a `Converter` over a frame's timestamps (one at a time and as start/end
//! spans), and `Calibration::duration` between two resolved samples.
//! Each conversion batch is 1,024 timestamps (512 spans), so criterion's
//! throughput is per timestamp (per span).
//!
//! ```text
//! cargo bench -p gpu-counters-hal --bench conversion
//! ```

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use gpu_counters_hal::fake::FakeDevice;
use gpu_counters_hal::{
    BackendDevice, BackendRecorder, Calibration, CalibrationMethod, CommonCounterSet,
    CounterSampleBufferDescriptor, SampleValue, TimestampGranularity, TimestampPair,
};
use std::hint::black_box;

const BATCH: u64 = 1024;

/// Three anchors 100 ms apart, the GPU clock 0.1 ppm fast, 1 ns ticks.
fn calibration() -> Calibration {
    let pair = |cpu_ns, gpu_ticks| TimestampPair {
        cpu_ns,
        gpu_ticks,
        max_deviation_ns: 300,
    };
    let mut c = Calibration::new(
        CalibrationMethod::CalibratedPair,
        1.0,
        64,
        pair(1_000_000_000, 5_000_000),
    )
    .expect("calibration");
    c.add_anchor(pair(1_100_000_000, 105_000_010))
        .expect("anchor");
    c.add_anchor(pair(1_200_000_000, 205_000_030))
        .expect("anchor");
    c
}

fn conversion(c: &mut Criterion) {
    let cal = calibration();
    // Between the two newest anchors (a calibration refreshed after the
    // work), and after the newest (the usual case between refits).
    let between: Vec<u64> = (0..BATCH).map(|i| 150_000_000 + i * 997).collect();
    let after: Vec<u64> = (0..BATCH).map(|i| 205_000_100 + i * 997).collect();

    let mut group = c.benchmark_group("to_cpu_ns");
    group.throughput(Throughput::Elements(BATCH));
    for (name, ticks) in [("between anchors", &between), ("after newest", &after)] {
        group.bench_function(format!("Calibration/{name}"), |b| {
            b.iter(|| {
                for &t in ticks {
                    black_box(cal.to_cpu_ns(black_box(t)).expect("in range"));
                }
            })
        });
        group.bench_function(format!("Converter/{name}"), |b| {
            let convert = cal.converter();
            b.iter(|| {
                for &t in ticks {
                    black_box(convert.to_cpu_ns(black_box(t)).expect("in range"));
                }
            })
        });
    }
    group.finish();

    let mut group = c.benchmark_group("span_to_cpu_ns");
    group.throughput(Throughput::Elements(BATCH / 2));
    for (name, ticks) in [("between anchors", &between), ("after newest", &after)] {
        group.bench_function(name, |b| {
            let convert = cal.converter();
            b.iter(|| {
                for span in ticks.chunks_exact(2) {
                    black_box(
                        convert
                            .span_to_cpu_ns(black_box(span[0]), black_box(span[1]))
                            .expect("in range"),
                    );
                }
            })
        });
    }
    group.finish();

    // Two samples written by the fake GPU, calibrated by its device.
    let device = FakeDevice::new("fake GPU", 64).expect("fake device");
    let times = device
        .make_counter_sample_buffer(&CounterSampleBufferDescriptor::new(
            CommonCounterSet::Timestamp,
            "duration bench",
            2,
        ))
        .expect("buffer");
    let mut cmd = device.recorder();
    for i in 0..2 {
        cmd.sample_counters(&times, i, TimestampGranularity::Precise)
            .expect("sample");
    }
    device.submit(cmd).expect("submit").wait();
    let resolved = times.resolve_counter_range(0..2).expect("resolve");
    let cal = device.calibration().expect("calibration");
    assert!(matches!(
        cal.duration(&resolved, 0, 1),
        Ok(SampleValue::Value(_))
    ));
    c.bench_function("Calibration::duration", |b| {
        b.iter(|| black_box(cal.duration(black_box(&resolved), 0, 1).expect("duration")))
    });
}

criterion_group!(benches, conversion);
criterion_main!(benches);
