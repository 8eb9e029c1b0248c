/// Reads the CPU's `CLOCK_MONOTONIC` in nanoseconds.
///
/// This is the clock every calibrated GPU time in gpu-counters is expressed
/// on: the CPU clock that GPU APIs' calibrated reads name as `CLOCK_MONOTONIC`.
pub fn cpu_monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec and CLOCK_MONOTONIC is always
    // available on Linux; clock_gettime writes only into `ts`.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    debug_assert_eq!(rc, 0);
    (ts.tv_sec as u64) * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    #[test]
    fn monotonic_never_goes_back() {
        let a = super::cpu_monotonic_ns();
        let b = super::cpu_monotonic_ns();
        assert!(b >= a);
        assert!(a > 0);
    }
}
