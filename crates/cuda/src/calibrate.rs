//! The calibration pair from a burst of handshake reads: pure arithmetic,
//! tested without a GPU.
//!
//! One read is `(before, ticks, after)`: the CPU clock read just before
//! setting the flag, the `%globaltimer` value the GPU read once it saw the
//! flag, and the CPU clock read just after seeing the GPU's answer. The GPU
//! read happened inside `(before, after)`, and a timer that steps by `step`
//! ns reads up to one step before the true time, so the clocks' offset
//! (CPU time minus GPU time at one instant) lies in
//! `[before - ticks - step, after - ticks]`.
//!
//! Every read of a burst bounds the same offset (up to the clocks' drift
//! over the burst, allowed for at [`MAX_DRIFT`] per ns of distance), so the
//! burst bounds it by the intersection of all of them: at most as wide as
//! the best single window, narrower where the two one-way latencies (flag to
//! GPU, answer to CPU) reach their minimum in different reads. Where the
//! intervals do not meet (a clock stepped during the burst), the best single
//! window is used alone.

use gpu_counters_hal::TimestampPair;

/// Relative rate difference allowed between the two clocks over a burst:
/// 200 parts per million, hal's assumption for a rate not yet measured.
pub(crate) const MAX_DRIFT: f64 = 200e-6;

/// One handshake read: CPU ns before, GPU ticks, CPU ns after.
pub(crate) type Read = (u64, u64, u64);

/// How a burst's pair was found (for reports and tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Combined {
    /// The intersection of the reads' offset intervals.
    Intersection,
    /// The best single read (the intervals did not meet).
    BestWindow,
}

/// The calibration pair of `reads` (none empty-windowed: `before <= after`)
/// for a timer of step `step_ns`: the offset interval's middle, and a max
/// deviation that covers both the pair's read and a later sample's read of
/// the same quantized timer (half the interval plus half a step). `None`
/// for an empty burst.
pub(crate) fn combine(reads: &[Read], step_ns: u64) -> Option<(TimestampPair, Combined)> {
    let best = reads
        .iter()
        .copied()
        .filter(|&(b, _, a)| b <= a)
        .min_by_key(|&(b, _, a)| a - b)?;
    let step = step_ns as f64;
    let interval = |&(b, t, a): &Read, at_cpu: f64| {
        // Offsets as f64 relative to the reference read's ticks, so that
        // the large absolute values cancel before rounding.
        let drift = MAX_DRIFT * (b as f64 - at_cpu).abs() + 1.0;
        let lo = b as f64 - t as f64 - step - drift;
        let hi = a as f64 - t as f64 + drift;
        (lo, hi)
    };
    let (rb, rt, ra) = best;
    let reference = rb as f64;
    let (mut lo, mut hi) = (f64::NEG_INFINITY, f64::INFINITY);
    for r in reads.iter().filter(|&&(b, _, a)| b <= a) {
        let (l, h) = interval(r, reference);
        lo = lo.max(l);
        hi = hi.min(h);
    }
    let single = {
        let lo = rb as f64 - rt as f64 - step;
        let hi = ra as f64 - rt as f64;
        (lo, hi)
    };
    let ((lo, hi), how) = if lo <= hi && hi - lo <= single.1 - single.0 {
        ((lo, hi), Combined::Intersection)
    } else {
        (single, Combined::BestWindow)
    };
    // The middle, moved up half a step: a later sample's timer read is up
    // to one step early too, so the error of a converted sample is then
    // within ± (half the interval + half a step).
    let mid = (lo + hi) / 2.0 + step / 2.0;
    let half = (hi - lo) / 2.0 + step / 2.0;
    let cpu = rt as f64 + mid;
    if !(cpu.is_finite() && cpu >= 0.0 && cpu < u64::MAX as f64) {
        return None;
    }
    Some((
        TimestampPair {
            cpu_ns: cpu.round() as u64,
            gpu_ticks: rt,
            // Rounding of the middle to whole ns: one more.
            max_deviation_ns: half.ceil() as u64 + 1,
        },
        how,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A burst simulated with a known offset, latencies that vary per read
    /// and a timer of 32 ns steps: the pair's conversion error is within
    /// its max deviation for the reads and for later samples, and the
    /// intersection is tighter than the best window.
    #[test]
    fn intersection_holds_the_true_offset_and_beats_the_best_window() {
        let offset: i64 = -1_796_129_693_311_152_384; // CPU minus GPU, ns
        let step = 32u64;
        let gpu_of = |cpu: u64| (cpu as i64 - offset) as u64;
        let quantize = |t: u64| t - t % step;
        let mut reads = Vec::new();
        let mut x = 12345u64;
        let mut cpu = 5_000_000_000u64;
        for _ in 0..32 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let a = 900 + (x >> 40) % 1000; // flag to GPU
            let b = 900 + (x >> 20) % 1000; // answer to CPU
            let before = cpu;
            let read_at = before + a;
            let after = read_at + b;
            reads.push((before, quantize(gpu_of(read_at)), after));
            cpu += 20_000;
        }
        let (pair, how) = combine(&reads, step).unwrap();
        assert_eq!(how, Combined::Intersection);
        let best = reads.iter().map(|&(b, _, a)| a - b).min().unwrap();
        assert!(
            pair.max_deviation_ns < best / 2 + step,
            "{} vs best window {best}",
            pair.max_deviation_ns
        );
        // Samples at any true time near the burst convert within the bound.
        for k in 0..1000u64 {
            let true_cpu = 5_000_000_000 + k * 641;
            let ticks = quantize(gpu_of(true_cpu));
            let converted = pair.cpu_ns as i128 + (ticks as i128 - pair.gpu_ticks as i128);
            let err = (converted - true_cpu as i128).unsigned_abs() as u64;
            assert!(
                err <= pair.max_deviation_ns,
                "error {err} > {}",
                pair.max_deviation_ns
            );
        }
    }

    /// Reads whose intervals do not meet (a clock stepped inside the burst)
    /// fall back to the best single window; an empty burst has no pair.
    #[test]
    fn disjoint_reads_fall_back_to_the_best_window() {
        let reads = [(1_000, 10_000, 3_000), (100_000, 1_000_000, 101_500)];
        let (pair, how) = combine(&reads, 32).unwrap();
        assert_eq!(how, Combined::BestWindow);
        assert_eq!(pair.gpu_ticks, 1_000_000);
        // Half the 1500 ns window, the step (half of it for the pair's read,
        // half for a sample's), plus rounding: what the best-of-burst
        // bound was before.
        assert_eq!(pair.max_deviation_ns, 750 + 32 + 1);
        assert!(combine(&[], 32).is_none());
        assert!(
            combine(&[(5, 1, 4)], 32).is_none(),
            "a window that ends before it starts"
        );
    }
}
