//! The CPU clock every calibrated GPU time is expressed on: each platform's
//! monotonic clock, the one its GPU APIs pair GPU timestamps with.
//!
//! | Platform | Clock | Paired with it by |
//! |---|---|---|
//! | Linux, Android, other Unix | `clock_gettime(CLOCK_MONOTONIC)` | `vkGetCalibratedTimestamps` (`VK_TIME_DOMAIN_CLOCK_MONOTONIC`), CUPTI |
//! | macOS, iOS (Apple) | `clock_gettime(CLOCK_UPTIME_RAW)`: `mach_absolute_time` in ns | `MTLDevice.sampleTimestamps` (its CPU side is an `MTLTimestamp`: ns of Mach absolute time) |
//! | Windows | `QueryPerformanceCounter` in ns (`QueryPerformanceFrequency`) | `ID3D12CommandQueue::GetClockCalibration`, `VK_TIME_DOMAIN_QUERY_PERFORMANCE_COUNTER` |
//!
//! None of these counts time the machine spends asleep, so a GPU time and a
//! CPU time of one process are comparable on any of them.

#[cfg(not(any(unix, windows)))]
compile_error!(
    "gpu-counters-hal needs a monotonic CPU clock: Unix (clock_gettime) or Windows (QueryPerformanceCounter)"
);

/// The name of [`cpu_monotonic_ns`]'s clock on this platform, for exports and
/// reports that state which clock their times are on.
#[cfg(all(unix, not(target_vendor = "apple")))]
pub const CPU_CLOCK: &str = "CLOCK_MONOTONIC";
/// The name of [`cpu_monotonic_ns`]'s clock on this platform, for exports and
/// reports that state which clock their times are on.
#[cfg(target_vendor = "apple")]
pub const CPU_CLOCK: &str = "CLOCK_UPTIME_RAW";
/// The name of [`cpu_monotonic_ns`]'s clock on this platform, for exports and
/// reports that state which clock their times are on.
#[cfg(windows)]
pub const CPU_CLOCK: &str = "QueryPerformanceCounter";

/// Reads the CPU's monotonic clock in nanoseconds: the clock every calibrated
/// GPU time in gpu-counters is on.
///
/// - Linux, Android and other Unix: `clock_gettime(CLOCK_MONOTONIC)`, the
///   host domain of Vulkan's calibrated timestamps.
/// - macOS and iOS: `clock_gettime(CLOCK_UPTIME_RAW)`, which Apple's libc
///   computes as `mach_absolute_time()` scaled by `mach_timebase_info` (Apple's
///   replacement for `mach_absolute_time` in ns). Metal's
///   `MTLDevice.sampleTimestamps` gives its CPU side on this clock: an
///   `MTLTimestamp`, "nanoseconds ... in Mach absolute time".
/// - Windows: `QueryPerformanceCounter` scaled to ns by
///   `QueryPerformanceFrequency` ([`ticks_to_ns`], 128-bit intermediate), the
///   CPU side of D3D12's `ID3D12CommandQueue::GetClockCalibration`.
///
/// [`CPU_CLOCK`] names the clock of the running platform.
pub fn cpu_monotonic_ns() -> u64 {
    imp::now_ns()
}

/// `ticks × numer / denom`, rounded down, computed in 128 bits so that no
/// intermediate overflows; `None` when `denom` is 0 or the result does not
/// fit in a `u64`.
///
/// Converts a tick count to nanoseconds: a `QueryPerformanceCounter` value is
/// `ticks_to_ns(qpc, 1_000_000_000, frequency)`, a `mach_absolute_time` value
/// `ticks_to_ns(t, timebase.numer, timebase.denom)`.
pub fn ticks_to_ns(ticks: u64, numer: u64, denom: u64) -> Option<u64> {
    if denom == 0 {
        return None;
    }
    u64::try_from(u128::from(ticks) * u128::from(numer) / u128::from(denom)).ok()
}

/// A `QueryPerformanceCounter` value in nanoseconds on [`cpu_monotonic_ns`]'s
/// scale (Windows only): for CPU times that Windows APIs hand back as QPC
/// ticks, such as the CPU side of `ID3D12CommandQueue::GetClockCalibration`
/// or Vulkan's `VK_TIME_DOMAIN_QUERY_PERFORMANCE_COUNTER`. `None` for a
/// negative value.
#[cfg(windows)]
pub fn qpc_to_ns(qpc: i64) -> Option<u64> {
    imp::qpc_to_ns(qpc)
}

#[cfg(unix)]
mod imp {
    #[cfg(not(target_vendor = "apple"))]
    const CLOCK: libc::clockid_t = libc::CLOCK_MONOTONIC;
    #[cfg(target_vendor = "apple")]
    const CLOCK: libc::clockid_t = libc::CLOCK_UPTIME_RAW;

    pub(super) fn now_ns() -> u64 {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid, writable timespec, and `CLOCK` is a clock
        // every supported kernel has (CLOCK_MONOTONIC: POSIX; CLOCK_UPTIME_RAW:
        // macOS 10.12 / iOS 10 and later); clock_gettime writes only into `ts`.
        let rc = unsafe { libc::clock_gettime(CLOCK, &mut ts) };
        debug_assert_eq!(rc, 0);
        (ts.tv_sec as u64) * 1_000_000_000 + ts.tv_nsec as u64
    }
}

#[cfg(windows)]
mod imp {
    use std::sync::OnceLock;
    use windows_sys::Win32::System::Performance::{
        QueryPerformanceCounter, QueryPerformanceFrequency,
    };

    /// Ticks per second of the performance counter, fixed at boot: read once.
    fn frequency() -> u64 {
        static FREQUENCY: OnceLock<u64> = OnceLock::new();
        *FREQUENCY.get_or_init(|| {
            let mut f = 0i64;
            // SAFETY: `f` is a valid, writable i64; the call writes only
            // into it.
            let ok = unsafe { QueryPerformanceFrequency(&mut f) };
            // Windows XP and later: the call always succeeds and the
            // frequency is never 0 (QueryPerformanceFrequency's contract).
            debug_assert!(ok != 0 && f > 0);
            u64::try_from(f).unwrap_or(0)
        })
    }

    pub(super) fn qpc_to_ns(qpc: i64) -> Option<u64> {
        super::ticks_to_ns(u64::try_from(qpc).ok()?, 1_000_000_000, frequency())
    }

    pub(super) fn now_ns() -> u64 {
        let mut t = 0i64;
        // SAFETY: `t` is a valid, writable i64; the call writes only into it
        // (and always succeeds on Windows XP and later).
        unsafe { QueryPerformanceCounter(&mut t) };
        // At 10 MHz (the usual frequency) the counter reaches u64 nanoseconds
        // after 584 years of uptime; a frequency of 0 cannot happen (above).
        qpc_to_ns(t).unwrap_or(u64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::ticks_to_ns;

    #[test]
    fn monotonic_never_goes_back() {
        let a = super::cpu_monotonic_ns();
        let b = super::cpu_monotonic_ns();
        assert!(b >= a);
        assert!(a > 0);
    }

    #[test]
    fn monotonic_counts_nanoseconds() {
        // std's `Instant` reads the same clock on every platform
        // (CLOCK_MONOTONIC, CLOCK_UPTIME_RAW, QueryPerformanceCounter), so
        // between two reads of ours it sees at most what we see, and the
        // spin it measures as 2 ms lies inside our two reads: ticks counted
        // as ns (or any other unit) would fail one of the two bounds.
        let outer = std::time::Instant::now();
        let a = super::cpu_monotonic_ns();
        let inner = std::time::Instant::now();
        while inner.elapsed() < std::time::Duration::from_millis(2) {
            std::hint::spin_loop();
        }
        let b = super::cpu_monotonic_ns();
        let outer_ns = outer.elapsed().as_nanos() as u64;
        // 1 µs of slack for the two conversions' rounding.
        assert!(b - a + 1_000 >= 2_000_000, "advanced {} ns", b - a);
        assert!(
            b - a <= outer_ns + 1_000,
            "advanced {} ns, std saw {outer_ns}",
            b - a
        );
    }

    #[test]
    fn qpc_frequencies_convert_exactly() {
        // Performance-counter frequencies Windows reports: 10 MHz (Windows
        // 10 and later), 24 MHz (Arm64), 3.579545 MHz (ACPI PM timer).
        for f in [10_000_000u64, 24_000_000, 3_579_545] {
            // One second of ticks is one second.
            assert_eq!(ticks_to_ns(f, 1_000_000_000, f), Some(1_000_000_000));
            // One tick rounds down to whole nanoseconds.
            assert_eq!(ticks_to_ns(1, 1_000_000_000, f), Some(1_000_000_000 / f));
            assert_eq!(ticks_to_ns(0, 1_000_000_000, f), Some(0));
        }
        assert_eq!(ticks_to_ns(1, 1_000_000_000, 3_579_545), Some(279));
        assert_eq!(ticks_to_ns(7, 1_000_000_000, 24_000_000), Some(291));
        // A day of uptime at 10 MHz: ticks × 10^9 overflows u64 (8.6e11 ×
        // 1e9), the 128-bit product does not.
        let day = 86_400u64;
        assert_eq!(
            ticks_to_ns(day * 10_000_000, 1_000_000_000, 10_000_000),
            Some(day * 1_000_000_000)
        );
        // A year at 3.579545 MHz, and a remainder that must round down.
        let year_ticks = 365 * day * 3_579_545 + 3;
        assert_eq!(
            ticks_to_ns(year_ticks, 1_000_000_000, 3_579_545),
            Some(365 * day * 1_000_000_000 + 838)
        );
    }

    #[test]
    fn mach_timebases_convert_exactly() {
        // Apple Silicon's timebase is 125/3 (24 MHz ticks); Intel Macs' 1/1.
        assert_eq!(ticks_to_ns(24_000_000, 125, 3), Some(1_000_000_000));
        assert_eq!(ticks_to_ns(1, 125, 3), Some(41));
        assert_eq!(ticks_to_ns(3, 125, 3), Some(125));
        assert_eq!(ticks_to_ns(u64::MAX, 1, 1), Some(u64::MAX));
        // Ticks near u64::MAX / 125: the product needs more than 64 bits.
        let t = u64::MAX / 125 * 3;
        assert_eq!(ticks_to_ns(t, 125, 3), Some(t / 3 * 125));
    }

    #[test]
    fn out_of_range_is_none_not_wrapped() {
        assert_eq!(ticks_to_ns(5, 1, 0), None);
        assert_eq!(ticks_to_ns(u64::MAX, 125, 3), None);
        assert_eq!(ticks_to_ns(u64::MAX, 1_000_000_000, 10_000_000), None);
    }

    #[cfg(windows)]
    #[test]
    fn qpc_converts_on_the_clock_s_scale() {
        let mut qpc = 0i64;
        // SAFETY: `qpc` is a valid, writable i64.
        unsafe { windows_sys::Win32::System::Performance::QueryPerformanceCounter(&mut qpc) };
        let before = super::cpu_monotonic_ns();
        let converted = super::qpc_to_ns(qpc).unwrap();
        assert!(converted <= before, "{converted} > {before}");
        assert_eq!(super::qpc_to_ns(-1), None);
    }
}
