//! The zero-intrusion figures: GPU time two zero-intrusion samples add to
//! a stream of kernels, on the plain stream and with the host taken out
//! (gated batches).

use super::*;

/// The zero-intrusion stream figure: GPU time added to the N kernels by
/// two zero-intrusion samples around them, as a fraction of the
/// baseline's, per round.
#[derive(Debug, Clone, Serialize)]
pub struct ZeroIntrusionReport {
    /// The row measured.
    pub variant: String,
    /// Which launches CUPTI traced: "every launch", or "launches after
    /// samples".
    pub tracing: &'static str,
    /// Kernels in the stream.
    pub kernels: u32,
    /// `--kernel-ns` (0: the arithmetic kernel).
    pub kernel_ns: u64,
    /// Added GPU time over the baseline's, per round: median [min, max].
    pub added_gpu_fraction: Option<crate::RatioSpread>,
    /// The target: at most 1%.
    pub target: f64,
    /// Median baseline GPU ns of the N kernels.
    pub baseline_gpu_ns: f64,
    /// Median GPU ns with the two samples (every kernel traced).
    pub variant_gpu_ns: f64,
    /// Added GPU ns per kernel (median).
    pub added_gpu_ns_per_kernel: f64,
    /// CUPTI's clock against `%globaltimer` (delta ns, ± uncertainty ns),
    /// at the start and at the end of the run.
    pub activity_clock_start: Option<(i64, u64)>,
    /// At the end.
    pub activity_clock_end: Option<(i64, u64)>,
    /// Records CUPTI dropped over the run.
    pub dropped_records: u64,
}

/// Kernels a gated batch holds: few enough that their launches queue
/// without blocking while the stream waits on the gate.
const GATED_BATCH: u32 = 500;

/// Which recording a gated run makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Gated {
    Baseline,
    EveryLaunch,
    AfterSamples,
}

/// The zero-intrusion stream figure with the host taken out: the N kernels
/// run in batches of 500 (`batch`), each queued whole behind a gate kernel
/// that waits on a mapped flag the host sets once the batch is launched, so
/// the GPU runs a batch without waiting for launches; the GPU time is the
/// sum over the batches of two timing events around each batch's kernels.
#[derive(Debug, Clone, Serialize)]
pub struct GatedZeroIntrusionReport {
    /// Kernels in the stream.
    pub kernels: u32,
    /// Kernels per gated batch.
    pub batch: u32,
    /// `--kernel-ns` (0: the arithmetic kernel).
    pub kernel_ns: u64,
    /// Median GPU ns of the N kernels without samples.
    pub baseline_gpu_ns: f64,
    /// Added GPU time, every launch traced (2 samples around all N).
    pub every_launch: Option<crate::RatioSpread>,
    /// Added GPU time, only the launches after samples traced (2 samples
    /// around the first N - 1).
    pub launches_after_samples: Option<crate::RatioSpread>,
}

impl CudaBench {
    fn launch_gate(&self, want: u64) -> Result<(), BenchError> {
        let mut flag = self.stamps.device;
        let mut want = want;
        let mut args = [
            &mut flag as *mut u64 as *mut c_void,
            &mut want as *mut u64 as *mut c_void,
        ];
        // SAFETY: `gate` takes the device address of a mapped word inside
        // the stamps allocation and a u64, given; it only reads the word.
        check("cuLaunchKernel", unsafe {
            sys::cuLaunchKernel(
                self.gate,
                1,
                1,
                1,
                1,
                1,
                1,
                0,
                self.raw_stream(),
                args.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        })
    }

    fn set_gate(&self, value: u64) {
        // SAFETY: word 0 of the mapped allocation; the gate kernels only
        // read it.
        unsafe { std::ptr::write_volatile(self.stamps.host, value) };
    }

    /// One gated run: the GPU ns of the N kernels (summed over batches).
    fn run_gated(&self, mode: Gated) -> Result<f64, BenchError> {
        let n = self.n;
        let batches = n.div_ceil(GATED_BATCH);
        if self.events.len() < 2 * batches as usize {
            return Err(BenchError::Measurement(
                "too few events for the gated batches".into(),
            ));
        }
        let (device, buffer) = match mode {
            Gated::Baseline => (None, None),
            Gated::EveryLaunch => (self.zero.as_ref(), self.zero_buffer.as_ref()),
            Gated::AfterSamples => (
                self.zero_sampled.as_ref(),
                self.zero_sampled_buffer.as_ref(),
            ),
        };
        if mode != Gated::Baseline && (device.is_none() || buffer.is_none()) {
            return Err(BenchError::Cuda("no zero-intrusion device".into()));
        }
        if let Some(b) = buffer {
            b.reset()?;
        }
        self.stream
            .context()
            .bind_to_thread()
            .map_err(|e| BenchError::Cuda(e.to_string()))?;
        // The stream is idle (the last run was synchronized): no gate reads
        // the flag now.
        self.set_gate(0);
        /// Opens every gate however the run ends (a failed launch would
        /// otherwise leave the stream spinning on one).
        struct OpenGates<'a>(&'a CudaBench);
        impl Drop for OpenGates<'_> {
            fn drop(&mut self) {
                self.0.set_gate(u64::MAX);
            }
        }
        let _open = OpenGates(self);
        let mut rec = device.map(|d| d.recorder());
        for b in 0..batches {
            self.launch_gate(u64::from(b) + 1)?;
            self.record(self.events[2 * b as usize])?;
            let (k0, k1) = (b * GATED_BATCH, ((b + 1) * GATED_BATCH).min(n));
            for k in k0..k1 {
                if let (Some(r), Some(buf)) = (rec.as_mut(), buffer) {
                    if k == 0 {
                        r.sample_counters(buf, 0, TimestampGranularity::Relaxed)?;
                    }
                    if mode == Gated::AfterSamples && k == n - 1 {
                        r.sample_counters(buf, 1, TimestampGranularity::Precise)?;
                    }
                }
                self.launch_work()?;
            }
            if let (Some(r), Some(buf)) = (rec.as_mut(), buffer) {
                if mode == Gated::EveryLaunch && b == batches - 1 {
                    r.sample_counters(buf, 1, TimestampGranularity::Precise)?;
                }
            }
            self.record(self.events[2 * b as usize + 1])?;
            self.set_gate(u64::from(b) + 1);
        }
        let submission = match (device, rec) {
            (Some(d), Some(r)) => Some(d.submit(r)?),
            _ => None,
        };
        self.stream
            .synchronize()
            .map_err(|e| BenchError::Cuda(format!("cuStreamSynchronize: {e}")))?;
        if let Some(s) = &submission {
            s.wait()?;
        }
        let mut gpu = 0.0;
        for b in 0..batches as usize {
            gpu += self.elapsed_ns(self.events[2 * b], self.events[2 * b + 1])?;
        }
        if let Some(buf) = buffer {
            let r = buf.resolve_counter_range(0..2)?;
            if r.count(SampleStatus::Written) != 2 {
                return Err(BenchError::Measurement(format!(
                    "gated zero-intrusion ({mode:?}): samples {:?}",
                    r.statuses()
                )));
            }
        }
        Ok(gpu)
    }
}

/// The gated zero-intrusion figure: `reps` rounds (after one warm-up),
/// each a baseline run right before each mode's run.
pub(crate) fn gated_zero_intrusion(
    bench: &CudaBench,
    reps: u32,
) -> Result<Option<GatedZeroIntrusionReport>, BenchError> {
    if bench.zero.is_none() {
        return Ok(None);
    }
    let (mut every, mut after, mut base) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..=reps {
        let b1 = bench.run_gated(Gated::Baseline)?;
        let e = bench.run_gated(Gated::EveryLaunch)?;
        let b2 = bench.run_gated(Gated::Baseline)?;
        let a = if bench.zero_sampled.is_some() {
            Some(bench.run_gated(Gated::AfterSamples)?)
        } else {
            None
        };
        if round == 0 {
            continue;
        }
        base.extend([b1, b2]);
        if b1 > 0.0 {
            every.push((e - b1) / b1);
        }
        if let Some(a) = a.filter(|_| b2 > 0.0) {
            after.push((a - b2) / b2);
        }
    }
    let spread = |v: &[f64]| crate::RatioSpread::of(v, 0.01);
    Ok(Some(GatedZeroIntrusionReport {
        kernels: bench.n,
        batch: GATED_BATCH,
        kernel_ns: bench.kernel_ns,
        baseline_gpu_ns: median(base.iter().copied()),
        every_launch: spread(&every),
        launches_after_samples: spread(&after),
    }))
}
