//! Hardware counters and stage utilization from CUPTI's range profiler. On a
//! machine without a CUDA driver, or where the device offers no hardware
//! counters (no CUPTI library, counters not permitted, ...), each test
//! prints one line saying it skipped and why; on the H200 through `device`
//! they all run.
//!
//! The kernel of known shape: one block of 128 threads per multiprocessor,
//! each spinning until its SM's `%clock64` has advanced a given number of
//! cycles, so the range's `sm__cycles_elapsed.max` is that number plus the
//! launch's own cycles, whatever the clock.

#![cfg(feature = "cupti")]

mod common;

use cudarc::driver::sys::CUdevice_attribute;
use cudarc::driver::{CudaFunction, LaunchConfig, PushKernelArg};
use gpu_counters_cuda::hardware::{REQUIRED_METRICS, STAGE_UTILIZATION_METRIC};
use gpu_counters_cuda::{Device, DeviceOptions, HardwareCounters, HardwareError};
use gpu_counters_hal::{
    CommonCounter, CommonCounterSet, CounterSampleBufferDescriptor, InvalidInput, SampleStatus,
    SampleValue, TimestampGranularity, COUNTER_ERROR_VALUE,
};
use std::sync::{Mutex, MutexGuard};

/// CUPTI's range profiler runs one session per context, and these tests
/// share device 0's primary context: one at a time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Device 0 and its hardware counters, or `None` after one line saying why
/// the test skipped.
fn hardware(test: &str) -> Option<(Device, HardwareCounters)> {
    if !common::gpu_present(test) {
        return None;
    }
    let options = DeviceOptions {
        hardware_counters: true,
        ..DeviceOptions::default()
    };
    let d = Device::open_with(0, &options).expect("Device::open(0)");
    match d.hardware_counters() {
        Ok(h) => {
            let h = h.clone();
            Some((d, h))
        }
        Err(e) => {
            eprintln!("skipped {test}: no hardware counters: {e}");
            None
        }
    }
}

/// `spin(cycles)`: every thread spins until its SM's `%clock64` advanced
/// `cycles`.
const SPIN_PTX: &str = include_str!("../src/spin.ptx");

struct Spin {
    f: CudaFunction,
    sms: u32,
}

impl Spin {
    fn new(d: &Device) -> Self {
        let module = d
            .context()
            .load_module(cudarc::nvrtc::Ptx::from_src(SPIN_PTX))
            .unwrap();
        let sms = d
            .context()
            .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            .unwrap() as u32;
        Self {
            f: module.load_function("spin").unwrap(),
            sms,
        }
    }

    /// One block of 128 threads per SM, each spinning `cycles`.
    fn launch(&self, d: &Device, cycles: u64) -> Result<(), cudarc::driver::DriverError> {
        let mut l = d.stream().launch_builder(&self.f);
        l.arg(&cycles);
        let cfg = LaunchConfig {
            grid_dim: (self.sms, 1, 1),
            block_dim: (128, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: `spin` takes one u64, given; it touches no memory.
        unsafe { l.launch(cfg) }.map(|_| ())
    }
}

const CYCLES: u64 = 2_000_000;

/// The set lists the chip's metrics: the four required ones each with a
/// unit, a description and its pass count; `sm__cycles_elapsed.max` (stage
/// utilization's) in one pass. The stage-utilization set is offered with
/// total cycles.
#[test]
fn listing_has_the_required_metrics_with_units_and_passes() {
    let _one = serial();
    let Some((d, h)) = hardware("listing_has_the_required_metrics_with_units_and_passes") else {
        return;
    };
    let bases = h.base_metrics().unwrap();
    eprintln!("{}: {} base metrics", h.chip(), bases.len());
    assert!(bases.len() > 100, "{}", bases.len());
    for m in REQUIRED_METRICS {
        let info = h.metric(m).unwrap();
        eprintln!(
            "{m}: {} ({}), {} pass(es): {}",
            info.unit,
            info.kind.name(),
            info.passes,
            info.description
        );
        assert_eq!(info.name, m);
        assert!(!info.unit.is_empty(), "{info:?}");
        assert!(!info.description.is_empty(), "{info:?}");
        assert!(info.passes >= 1, "{info:?}");
        let base = m.split('.').next().unwrap();
        assert!(bases.iter().any(|b| b.name == base), "{base} not listed");
    }
    assert_eq!(h.metric(STAGE_UTILIZATION_METRIC).unwrap().passes, 1);
    assert!(h
        .metric("gpu__time_duration.sum")
        .unwrap()
        .unit
        .contains("second"));
    let set = d
        .info()
        .counter_set(CommonCounterSet::StageUtilization)
        .expect("stage utilization offered with hardware counters");
    assert_eq!(set.counters, [CommonCounter::TotalCycles]);
    assert!(d.hardware_counters_unavailable().is_none());
}

/// A kernel of known shape: the cycles are what it spins plus its launch,
/// the duration is those cycles at a plausible clock, DRAM is idle.
#[test]
fn spin_kernel_metrics_are_plausible() {
    let _one = serial();
    let Some((d, h)) = hardware("spin_kernel_metrics_are_plausible") else {
        return;
    };
    let spin = Spin::new(&d);
    spin.launch(&d, CYCLES).unwrap();
    d.stream().synchronize().unwrap();
    let metrics = [
        "sm__cycles_elapsed.max",
        "gpu__time_duration.sum",
        "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    ];
    let range = h.begin(&metrics).unwrap();
    spin.launch(&d, CYCLES).unwrap();
    let m = range.end().unwrap();
    eprintln!("{m:?}");
    assert_eq!(m.passes, 1);
    let cycles = m.value("sm__cycles_elapsed.max").unwrap();
    let ns = m.value("gpu__time_duration.sum").unwrap();
    let dram = m
        .value("dram__throughput.avg.pct_of_peak_sustained_elapsed")
        .unwrap();
    assert!(
        cycles >= CYCLES as f64 && cycles < 1.2 * CYCLES as f64,
        "{cycles} cycles for a {CYCLES}-cycle spin"
    );
    let ghz = cycles / ns;
    assert!((0.3..3.0).contains(&ghz), "{cycles} cycles in {ns} ns");
    assert!(
        (0.0..5.0).contains(&dram),
        "DRAM {dram}% for a kernel that reads nothing"
    );
    // Twice the spin, twice the cycles (plus the range's own start).
    let range = h.begin(&["sm__cycles_elapsed.max"]).unwrap();
    spin.launch(&d, CYCLES).unwrap();
    spin.launch(&d, CYCLES).unwrap();
    let two = range
        .end()
        .unwrap()
        .value("sm__cycles_elapsed.max")
        .unwrap();
    let c = CYCLES as f64;
    assert!(
        (2.0 * c..2.2 * c).contains(&two),
        "two spins {two} cycles, one {cycles}"
    );
}

/// A metric needing more passes than a range is a typed error naming it and
/// its passes; `measure` replays the work once per pass instead.
#[test]
fn multi_pass_metrics_are_named_or_replayed() {
    let _one = serial();
    let Some((d, h)) = hardware("multi_pass_metrics_are_named_or_replayed") else {
        return;
    };
    let spin = Spin::new(&d);
    let Some(multi) = REQUIRED_METRICS
        .iter()
        .copied()
        .find(|m| h.metric(m).unwrap().passes > 1)
    else {
        eprintln!("skipped multi_pass_metrics_are_named_or_replayed: every required metric takes one pass on this chip");
        return;
    };
    let passes = h.metric(multi).unwrap().passes;
    match h.begin(&[STAGE_UTILIZATION_METRIC, multi]) {
        Err(HardwareError::TooManyPasses { metric, passes: p }) => {
            assert_eq!((metric.as_str(), p), (multi, passes))
        }
        other => panic!("{multi} in one range: {:?}", other.map(|_| ())),
    }
    let mut runs = 0;
    let m = h
        .measure(&[STAGE_UTILIZATION_METRIC, multi], |_stream| {
            runs += 1;
            spin.launch(&d, CYCLES)
        })
        .unwrap();
    eprintln!("{multi}: {passes} passes, {runs} runs: {m:?}");
    assert_eq!(m.passes, runs);
    assert!(runs >= passes, "{runs} runs for {passes} passes");
    let v = m.value(multi).unwrap();
    assert!((0.0..=100.0).contains(&v), "{multi} = {v}");
    let cycles = m.value(STAGE_UTILIZATION_METRIC).unwrap();
    assert!(
        cycles >= CYCLES as f64 && cycles < 1.2 * CYCLES as f64,
        "{cycles}"
    );
}

/// Unknown metrics are typed errors naming them, however they are asked
/// for; a second session on the context is `Busy`, not a CUPTI failure.
#[test]
fn unknown_metrics_and_busy_sessions_are_typed_errors() {
    let _one = serial();
    let Some((_d, h)) = hardware("unknown_metrics_and_busy_sessions_are_typed_errors") else {
        return;
    };
    for bad in [
        "sm__no_such_counter.sum",
        "sm__cycles_elapsed.nonsense",
        "bogus",
    ] {
        for e in [
            h.metric(bad).err(),
            h.begin(&[bad]).err(),
            h.begin(&[STAGE_UTILIZATION_METRIC, bad]).err(),
            h.passes(&[bad]).err(),
        ] {
            match e {
                Some(HardwareError::UnknownMetric { ref metric, .. }) if metric == bad => {
                    assert!(e.unwrap().to_string().contains(bad))
                }
                other => panic!("{bad}: {other:?}"),
            }
        }
    }
    let range = h.begin(&[STAGE_UTILIZATION_METRIC]).unwrap();
    assert!(matches!(
        h.begin(&[STAGE_UTILIZATION_METRIC]),
        Err(HardwareError::Busy)
    ));
    drop(range);
    // Dropped without ending: the context is free again.
    h.begin(&[STAGE_UTILIZATION_METRIC]).unwrap().end().unwrap();
}

/// Stage utilization through a recorder: each sample's `total_cycles` sums
/// `sm__cycles_elapsed.max` of the ranges before it, so end minus start of
/// one spin equals the hardware metric of one spin (the same kernel
/// measured by `begin`/`end`, within 3%), two spins twice that; the other
/// fields are the error value.
#[test]
fn stage_utilization_total_cycles_is_the_hardware_metric() {
    let _one = serial();
    let Some((d, h)) = hardware("stage_utilization_total_cycles_is_the_hardware_metric") else {
        return;
    };
    let spin = Spin::new(&d);
    spin.launch(&d, CYCLES).unwrap();
    d.stream().synchronize().unwrap();
    let buffer = d
        .make_counter_sample_buffer(&CounterSampleBufferDescriptor::new(
            CommonCounterSet::StageUtilization,
            "stage utilization",
            4,
        ))
        .unwrap();
    let mut rec = d.recorder();
    rec.sample_counters(&buffer, 0, TimestampGranularity::Precise)
        .unwrap();
    spin.launch(&d, CYCLES).unwrap();
    rec.sample_counters(&buffer, 1, TimestampGranularity::Precise)
        .unwrap();
    spin.launch(&d, CYCLES).unwrap();
    spin.launch(&d, CYCLES).unwrap();
    rec.sample_counters(&buffer, 2, TimestampGranularity::Precise)
        .unwrap();
    // While the recorder's session runs, another one is refused.
    assert!(matches!(
        h.begin(&[STAGE_UTILIZATION_METRIC]),
        Err(HardwareError::Busy)
    ));
    d.submit(rec).unwrap().wait().unwrap();
    let r = buffer.resolve_counter_range(0..4).unwrap();
    assert_eq!(
        r.statuses(),
        [
            SampleStatus::Written,
            SampleStatus::Written,
            SampleStatus::Written,
            SampleStatus::NotWritten
        ]
    );
    let su = r.stage_utilization().unwrap();
    eprintln!("{su:?}");
    assert_eq!(su[0].total_cycles, 0);
    assert_eq!(su[3].total_cycles, COUNTER_ERROR_VALUE);
    for s in &su[..3] {
        assert_eq!(
            [
                s.vertex_cycles,
                s.tessellation_cycles,
                s.post_tessellation_vertex_cycles,
                s.fragment_cycles,
                s.render_target_cycles
            ],
            [COUNTER_ERROR_VALUE; 5]
        );
    }
    let between = |a, b| match r.stage_utilization_between(a, b).unwrap() {
        SampleValue::Value(v) => v.total_cycles,
        other => panic!("{a}..{b}: {other:?}"),
    };
    let one = between(0, 1) as f64;
    let two = between(1, 2) as f64;
    let range = h.begin(&[STAGE_UTILIZATION_METRIC]).unwrap();
    spin.launch(&d, CYCLES).unwrap();
    let m = range.end().unwrap();
    let metric = m.value(STAGE_UTILIZATION_METRIC).unwrap();
    eprintln!("stage utilization: one spin {one}, two {two}; the metric of one spin {metric}");
    assert_eq!(
        m.stage_utilization().total_cycles,
        metric.round() as u64,
        "the measurement's stage-utilization view is the metric"
    );
    assert!((one / metric - 1.0).abs() < 0.03, "{one} vs {metric}");
    // Each range also holds the profiler's own start (tens of
    // microseconds, more in a session's first range): bounds, not ratios.
    let c = CYCLES as f64;
    assert!(
        (c..1.1 * c).contains(&one),
        "{one} for one spin of {CYCLES}"
    );
    assert!(
        (2.0 * c..2.2 * c).contains(&two),
        "{two} for two spins of {CYCLES}"
    );
}

/// Turned off, neither hardware counters nor stage utilization is offered,
/// and asking for the set is a typed error, never zeros.
#[test]
fn turned_off_hardware_counters_are_not_offered() {
    if !common::gpu_present("turned_off_hardware_counters_are_not_offered") {
        return;
    }
    let d = Device::open_with(
        0,
        &DeviceOptions {
            hardware_counters: false,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(
        d.hardware_counters_unavailable(),
        Some("DeviceOptions::hardware_counters is off")
    );
    assert!(d.hardware_counters().is_err());
    assert!(d
        .info()
        .counter_set(CommonCounterSet::StageUtilization)
        .is_none());
    let e = d
        .make_counter_sample_buffer(&CounterSampleBufferDescriptor::new(
            CommonCounterSet::StageUtilization,
            "x",
            2,
        ))
        .expect_err("stage utilization without hardware counters");
    assert!(
        matches!(
            e.invalid(),
            Some(InvalidInput::UnsupportedCounterSet { .. })
        ),
        "{e}"
    );
}
