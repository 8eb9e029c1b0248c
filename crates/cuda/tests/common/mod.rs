//! What every CUDA test file shares.

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
