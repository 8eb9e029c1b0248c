//! The device list: every Vulkan 1.3 device with its counter sets, sampling
//! points and timestamp properties.

mod common;

use gpu_counters_hal::{CommonCounter, CommonCounterSet, CounterSamplingPoint, DeviceType};
use gpu_counters_vulkan::{Instance, InstanceOptions};

#[test]
fn lists_devices_with_their_counter_sets() {
    let instance = Instance::new(&InstanceOptions { validation: true }).unwrap();
    let devices = instance.devices().unwrap();
    assert!(!devices.is_empty(), "no Vulkan 1.3 device");
    let default = instance.default_device_index().unwrap();
    assert!(default < devices.len());
    if !devices.iter().any(|d| d.device_type.is_hardware()) {
        assert_eq!(devices[default].device_type, DeviceType::Cpu);
    }
    for (i, d) in devices.iter().enumerate() {
        assert_eq!(d.index, i);
        assert!(!d.name.is_empty());
        assert!(d.timestamp_period_ns > 0.0);
        assert!(d.timestamp_valid_bits > 0 && d.timestamp_valid_bits <= 64);
        let ts = d
            .counter_set(CommonCounterSet::Timestamp)
            .expect("timestamp set");
        assert_eq!(ts.counters, vec![CommonCounter::Timestamp]);
        let stats = d
            .counter_set(CommonCounterSet::Statistic)
            .expect("statistic set");
        for c in [
            CommonCounter::VertexInvocations,
            CommonCounter::ClipperInvocations,
            CommonCounter::ClipperPrimitivesOut,
            CommonCounter::FragmentInvocations,
            CommonCounter::ComputeKernelInvocations,
        ] {
            assert!(stats.contains(c), "{c} missing");
        }
        // Never invented: no device here has VK_KHR_performance_query cycles.
        assert!(d.counter_set(CommonCounterSet::StageUtilization).is_none());
        assert!(d.supports_counter_sampling(CounterSamplingPoint::AtStageBoundary));
        assert!(d.supports_counter_sampling(CounterSamplingPoint::AtDispatchBoundary));
        assert!(d.supports_counter_sampling(CounterSamplingPoint::AtDrawBoundary));
        assert!(d.supports_counter_sampling(CounterSamplingPoint::AtBlitBoundary));
        assert!(!d.supports_counter_sampling(CounterSamplingPoint::AtTileDispatchBoundary));
    }
    assert!(instance.validation_messages().is_empty());
}

#[test]
fn calibration_pair_is_current() {
    let device = common::device();
    let before = gpu_counters_hal::cpu_monotonic_ns();
    let pair = device.sample_timestamps().unwrap();
    let after = gpu_counters_hal::cpu_monotonic_ns();
    assert!(
        pair.cpu_ns + pair.max_deviation_ns >= before
            && pair.cpu_ns <= after + pair.max_deviation_ns,
        "{pair:?} outside [{before}, {after}]"
    );
    let c = device.calibration().unwrap();
    assert_eq!(c.method(), device.info().calibration);
    assert!(device.timestamp_frequency() > 0.0);
    common::assert_no_validation_messages(&device);
}
