//! What every CUDA test file shares.

use gpu_counters_cuda::{CounterSampleBuffer, Device, DeviceOptions};
use gpu_counters_hal::{CommonCounterSet, CounterSampleBufferDescriptor};

/// Whether a CUDA driver and at least one device are here; if not, prints
/// the one line saying why `test` skipped.
pub fn gpu_present(test: &str) -> bool {
    if !gpu_counters_cuda::driver_present() {
        eprintln!("skipped {test}: no CUDA driver (libcuda.so.1) on this machine");
        return false;
    }
    match gpu_counters_cuda::device_count() {
        Ok(0) => {
            eprintln!("skipped {test}: the CUDA driver sees no device");
            false
        }
        Ok(_) => true,
        Err(e) => panic!("device_count with a driver present: {e}"),
    }
}

/// Every counter set asked for: statistics and hardware counters.
#[allow(dead_code)] // not every test file uses it
pub fn all_sets() -> DeviceOptions {
    DeviceOptions {
        statistics: true,
        hardware_counters: true,
        ..DeviceOptions::default()
    }
}

/// Device 0 with every counter set asked for, or `None` (after one line
/// saying why) without a driver or a device.
#[allow(dead_code)] // not every test file uses it
pub fn device(test: &str) -> Option<Device> {
    gpu_present(test).then(|| Device::open_with(0, &all_sets()).expect("Device::open(0)"))
}

#[allow(dead_code)] // not every test file uses it
pub fn timestamps(d: &Device, n: u32) -> CounterSampleBuffer {
    d.make_counter_sample_buffer(&CounterSampleBufferDescriptor::new(
        CommonCounterSet::Timestamp,
        "timestamps",
        n,
    ))
    .unwrap()
}
