//! The raw-ash and gpu-counters variants, on one gpu-counters [`Device`].
//!
//! Raw ash records into its own command pool and buffer, submits to the
//! device's queue (under its lock) and reads its own query pool. gpu-counters
//! records through [`CommandBuffer`], its encoders, sample buffers and heaps.
//! Both write the same two bracket timestamps (raw ash calls, on a separate
//! query pool) at the very start and end of the command buffer for the GPU
//! time, outside the timed recording.

use crate::{
    check_profiler_frames, check_written, timestamps_ns, vk_err, BenchError, ComparisonSpec,
    Harness, HarnessRow, Measurement, Placement, Tool, Variant, VariantSpec, Variants,
};
use ash::vk;
use gpu_counters_hal::timeline::PassKind;
use gpu_counters_hal::{
    Calibration, CommonCounterSet, CounterHeapDescriptor, CounterSampleBufferDescriptor,
    TimestampGranularity,
};
use gpu_counters_profiler::{Profiler, ProfilerOptions, WhenFull};
use gpu_counters_vulkan::{
    CommandBuffer, ComputePassDescriptor, CounterHeap, CounterSampleBuffer, Device,
    PassSampleBufferAttachment,
};
use gpu_counters_workloads::{ComputeWorkload, GpuContext};
use std::cell::RefCell;
use std::hint::black_box;
use std::rc::Rc;
use std::time::Instant;

/// Workgroup size of the tiny dispatch (and of wgpu's equivalent shader).
pub(crate) const WORKGROUP_SIZE: u32 = 64;
/// Arithmetic steps per invocation.
pub(crate) const ITERATIONS: u32 = 16;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    RawBaseline,
    RawPrecise,
    RawRelaxed,
    RawPass,
    RawPrecisePass,
    RawScopes,
    GcBaseline,
    GcBaselinePassPerDispatch,
    GcSampleBarrier,
    GcSampleNoBarrier,
    GcHeapPrecise,
    GcHeapRelaxed,
    GcHeapRelaxedPassPerDispatch,
    GcPassAttachments,
    GcScopePairs,
    GcProfilerScopes,
}

const KINDS: [Kind; 16] = [
    Kind::RawBaseline,
    Kind::RawPrecise,
    Kind::RawRelaxed,
    Kind::RawPass,
    Kind::RawPrecisePass,
    Kind::RawScopes,
    Kind::GcBaseline,
    Kind::GcBaselinePassPerDispatch,
    Kind::GcSampleBarrier,
    Kind::GcSampleNoBarrier,
    Kind::GcHeapPrecise,
    Kind::GcHeapRelaxed,
    Kind::GcHeapRelaxedPassPerDispatch,
    Kind::GcPassAttachments,
    Kind::GcScopePairs,
    Kind::GcProfilerScopes,
];

const RAW_BASELINE: &str = "raw-ash baseline";
const GC_BASELINE: &str = "gpu-counters baseline (1 encoder)";
const RAW_SCOPES: &str = "raw-ash hand-rolled profiler scopes (ALL_COMMANDS pairs, labelled)";
const PROFILER_SCOPES: &str = "gpu-counters profiler Frame::scope per dispatch";
const GC_BASELINE_PASSES: &str = "gpu-counters baseline (encoder per dispatch)";

impl Kind {
    /// (name, tool, placement, samples per dispatch, baseline)
    fn describe(self) -> (&'static str, Tool, Placement, u64, Option<&'static str>) {
        use Placement as P;
        use Tool::{GpuCounters as G, RawAsh as R};
        match self {
            Kind::RawBaseline => (RAW_BASELINE, R, P::None, 0, None),
            Kind::RawPrecise => (
                "raw-ash write_timestamp2 ALL_COMMANDS",
                R,
                P::Precise,
                1,
                Some(RAW_BASELINE),
            ),
            Kind::RawRelaxed => (
                "raw-ash write_timestamp2 TOP_OF_PIPE",
                R,
                P::Relaxed,
                1,
                Some(RAW_BASELINE),
            ),
            Kind::RawPass => (
                "raw-ash TOP_OF_PIPE + ALL_COMMANDS around dispatch",
                R,
                P::Pass,
                2,
                Some(RAW_BASELINE),
            ),
            Kind::RawPrecisePass => (
                "raw-ash ALL_COMMANDS + ALL_COMMANDS around dispatch",
                R,
                P::PrecisePass,
                2,
                Some(RAW_BASELINE),
            ),
            // What a raw ash user writes to get what a profiler scope
            // gives: the precise-pass writes plus a labelled record per
            // scope, read back with availability into kept results, the
            // queries reset after reading.
            Kind::RawScopes => (RAW_SCOPES, R, P::PrecisePass, 2, Some(RAW_BASELINE)),
            Kind::GcBaseline => (GC_BASELINE, G, P::None, 0, None),
            Kind::GcBaselinePassPerDispatch => (GC_BASELINE_PASSES, G, P::None, 0, None),
            Kind::GcSampleBarrier => (
                "gpu-counters encoder sample_counters barrier=true",
                G,
                P::Precise,
                1,
                Some(GC_BASELINE),
            ),
            Kind::GcSampleNoBarrier => (
                "gpu-counters encoder sample_counters barrier=false",
                G,
                P::Relaxed,
                1,
                Some(GC_BASELINE),
            ),
            Kind::GcHeapPrecise => (
                "gpu-counters heap write_timestamp precise",
                G,
                P::Precise,
                1,
                Some(GC_BASELINE),
            ),
            Kind::GcHeapRelaxed => (
                "gpu-counters heap write_timestamp relaxed (1 pass)",
                G,
                P::Relaxed,
                1,
                Some(GC_BASELINE),
            ),
            // Compared with raw `ALL_COMMANDS`: the one write each pass
            // coalesces to follows all the pass's work, as Metal's
            // `writeTimestamp` has it, so that is its placement.
            Kind::GcHeapRelaxedPassPerDispatch => (
                "gpu-counters heap write_timestamp relaxed (pass per dispatch)",
                G,
                P::Precise,
                1,
                Some(GC_BASELINE_PASSES),
            ),
            Kind::GcPassAttachments => (
                "gpu-counters compute pass start/end attachments",
                G,
                P::Pass,
                2,
                Some(GC_BASELINE_PASSES),
            ),
            Kind::GcScopePairs => (
                "gpu-counters CommandBuffer::sample_counters scope pairs",
                G,
                P::Pass,
                2,
                Some(GC_BASELINE),
            ),
            // Both ends of a profiler scope follow all prior work.
            Kind::GcProfilerScopes => (PROFILER_SCOPES, G, P::PrecisePass, 2, Some(GC_BASELINE)),
        }
    }

    /// Timestamps really written on the GPU for `n` dispatches.
    fn written(self, n: u64) -> u64 {
        match self {
            Kind::GcHeapRelaxed => 1,
            k => k.describe().3 * n,
        }
    }
}

/// The derived comparisons of the gpu-counters rows: each against the
/// raw-ash row of its placement, ratio taken per round (the bench's own
/// `host_ratio_to_raw` divides medians), then the profiler's scopes against
/// the hand-rolled raw profiler. Targets: the profiler's scopes at most 1.5
/// times raw, every primitive at most 1.2.
pub(crate) fn comparisons() -> Vec<ComparisonSpec> {
    let rows = KINDS.map(Kind::describe);
    let mut specs: Vec<ComparisonSpec> = rows
        .iter()
        .filter(|(_, tool, placement, _, baseline)| {
            *tool == Tool::GpuCounters && *placement != Placement::None && baseline.is_some()
        })
        .filter_map(|&(variant, _, placement, _, _)| {
            let (against, ..) = rows.iter().find(|(name, tool, p, _, baseline)| {
                *tool == Tool::RawAsh
                    && *p == placement
                    && baseline.is_some()
                    && *name != RAW_SCOPES
            })?;
            Some(ComparisonSpec {
                variant,
                against,
                target: if placement == Placement::PrecisePass {
                    1.5
                } else {
                    1.2
                },
            })
        })
        .collect();
    // The profiler's scopes also against a hand-rolled raw profiler, whose
    // results are what the profiler's are: labelled scope times.
    specs.push(ComparisonSpec {
        variant: PROFILER_SCOPES,
        against: RAW_SCOPES,
        target: 1.5,
    });
    specs
}

/// Raw Vulkan objects of the raw-ash variants and the brackets.
struct RawObjects {
    pool: vk::CommandPool,
    cmd: vk::CommandBuffer,
    fence: vk::Fence,
    samples: vk::QueryPool,
    brackets: vk::QueryPool,
}

/// The objects every raw-ash and gpu-counters variant records with.
struct VulkanBench {
    device: Device,
    workload: ComputeWorkload,
    raw: RawObjects,
    buffer: CounterSampleBuffer,
    heap: CounterHeap,
    calibration: Calibration,
    /// The last submission's command buffer, reset and recording again
    /// (`Submission::reuse`), so gpu-counters, like raw ash, records into a
    /// warm command pool.
    spare: Option<CommandBuffer>,
    /// The profiler of the profiler-scopes variant, one frame per run.
    profiler: Profiler<Device>,
    /// Its results, collected into again each run (`collect_into`), as the
    /// resolves of the other rows go into results kept between runs.
    frames: Vec<gpu_counters_profiler::FrameResult>,
    period_ns: f64,
    mask: u64,
    n: u32,
    /// The hand-rolled raw profiler's state, kept between runs as a frame
    /// loop keeps it: each scope's label and first query, the read-back
    /// (value, availability) pairs, and the results (label, start and end
    /// ns since the first scope's start).
    raw_scopes: Vec<(&'static str, u32)>,
    raw_read: Vec<[u64; 2]>,
    raw_results: Vec<(&'static str, f64, f64)>,
    /// Whether the workload's dispatches and barriers are recorded: false
    /// for the samples-alone rows, whose host cost is then the samples'
    /// own, without a baseline many times their size to subtract.
    work: bool,
    destroyed: bool,
}

impl VulkanBench {
    fn new(device: &Device, n: u32, work: bool) -> Result<Self, BenchError> {
        let ctx = GpuContext::from_device(device);
        let workload = ComputeWorkload::new(&ctx, WORKGROUP_SIZE, 1, ITERATIONS)?;
        let mut this = Self {
            device: device.clone(),
            workload,
            raw: RawObjects {
                pool: vk::CommandPool::null(),
                cmd: vk::CommandBuffer::null(),
                fence: vk::Fence::null(),
                samples: vk::QueryPool::null(),
                brackets: vk::QueryPool::null(),
            },
            buffer: device.make_counter_sample_buffer(&CounterSampleBufferDescriptor::new(
                CommonCounterSet::Timestamp,
                "bench samples",
                2 * n,
            ))?,
            heap: device.make_counter_heap(&CounterHeapDescriptor::timestamp(n))?,
            calibration: device.calibration()?,
            spare: None,
            frames: Vec::new(),
            profiler: Profiler::new(
                device,
                ProfilerOptions {
                    frames_in_flight: 2,
                    max_scopes_per_frame: n,
                    statistics: false,
                    when_full: WhenFull::Wait {
                        timeout: std::time::Duration::from_secs(30),
                    },
                    queue_name: None,
                },
            )?,
            period_ns: device.info().timestamp_period_ns,
            mask: mask(device.info().timestamp_valid_bits),
            n,
            raw_scopes: Vec::with_capacity(n as usize),
            raw_read: vec![[0; 2]; 2 * n as usize],
            raw_results: Vec::with_capacity(n as usize),
            work,
            destroyed: false,
        };
        this.create_raw()?;
        Ok(this)
    }

    fn create_raw(&mut self) -> Result<(), BenchError> {
        let d = self.device.raw();
        // SAFETY: valid create-infos of this device; every object is stored
        // in `self.raw` at once and destroyed in `destroy`.
        unsafe {
            self.raw.pool = d
                .create_command_pool(
                    &vk::CommandPoolCreateInfo::default()
                        .queue_family_index(self.device.queue_family_index())
                        .flags(vk::CommandPoolCreateFlags::TRANSIENT),
                    None,
                )
                .map_err(vk_err("vkCreateCommandPool"))?;
            self.raw.cmd = d
                .allocate_command_buffers(
                    &vk::CommandBufferAllocateInfo::default()
                        .command_pool(self.raw.pool)
                        .level(vk::CommandBufferLevel::PRIMARY)
                        .command_buffer_count(1),
                )
                .map_err(vk_err("vkAllocateCommandBuffers"))?[0];
            self.raw.fence = d
                .create_fence(&vk::FenceCreateInfo::default(), None)
                .map_err(vk_err("vkCreateFence"))?;
            self.raw.samples = d
                .create_query_pool(
                    &vk::QueryPoolCreateInfo::default()
                        .query_type(vk::QueryType::TIMESTAMP)
                        .query_count(2 * self.n),
                    None,
                )
                .map_err(vk_err("vkCreateQueryPool"))?;
            self.raw.brackets = d
                .create_query_pool(
                    &vk::QueryPoolCreateInfo::default()
                        .query_type(vk::QueryType::TIMESTAMP)
                        .query_count(2),
                    None,
                )
                .map_err(vk_err("vkCreateQueryPool"))?;
        }
        Ok(())
    }

    /// Destroys the raw objects and the workload; waits for the GPU first.
    fn destroy(&mut self) {
        if self.destroyed {
            return;
        }
        self.destroyed = true;
        self.spare = None;
        let d = self.device.raw();
        let _ = self.device.wait_idle();
        // SAFETY: the device is idle, so nothing uses these objects; null
        // handles are ignored by the destroy calls.
        unsafe {
            d.destroy_query_pool(self.raw.brackets, None);
            d.destroy_query_pool(self.raw.samples, None);
            d.destroy_fence(self.raw.fence, None);
            d.destroy_command_pool(self.raw.pool, None);
            self.workload.destroy(d);
        }
    }

    /// One measurement of `kind`.
    fn run(&mut self, kind: Kind) -> Result<Measurement, BenchError> {
        let samples = (kind.describe().3 * self.n as u64) as u32;
        match kind.describe().1 {
            Tool::RawAsh => self.run_raw(kind, samples),
            _ => self.run_gpu_counters(kind, samples),
        }
    }

    /// Writes bracket timestamp `index` into `cmd`.
    fn bracket(&self, cmd: vk::CommandBuffer, index: u32) {
        let stage = if index == 0 {
            vk::PipelineStageFlags2::TOP_OF_PIPE
        } else {
            vk::PipelineStageFlags2::ALL_COMMANDS
        };
        // SAFETY: `cmd` is recording outside any render pass and the bracket
        // pool was reset on the host before recording.
        unsafe {
            self.device
                .raw()
                .cmd_write_timestamp2(cmd, stage, self.raw.brackets, index)
        };
    }

    /// GPU nanoseconds between the two brackets of a finished submission.
    fn bracket_ns(&self) -> Result<f64, BenchError> {
        let mut data = [[0u64; 2]; 2];
        // SAFETY: the pool has 2 queries; `data` holds 2 (value, availability)
        // pairs of u64, what the flags ask for.
        unsafe {
            self.device.raw().get_query_pool_results(
                self.raw.brackets,
                0,
                &mut data,
                vk::QueryResultFlags::TYPE_64 | vk::QueryResultFlags::WITH_AVAILABILITY,
            )
        }
        .map_err(vk_err("vkGetQueryPoolResults"))?;
        if data[0][1] == 0 || data[1][1] == 0 {
            return Err(BenchError::Measurement(
                "bracket timestamps not available after the submission finished".into(),
            ));
        }
        let d = (data[1][0].wrapping_sub(data[0][0])) & self.mask;
        Ok(d as f64 * self.period_ns)
    }

    fn reset_brackets(&self) {
        // SAFETY: hostQueryReset is enabled on gpu-counters' devices and no
        // pending work uses the pool (every run waits for its submission).
        unsafe { self.device.raw().reset_query_pool(self.raw.brackets, 0, 2) };
    }

    fn run_raw(&mut self, kind: Kind, samples: u32) -> Result<Measurement, BenchError> {
        // Recording contract of the workload's `record_*` calls below: `cmd`
        // is a primary command buffer of `d` (allocated in `create_raw` from
        // a pool of the device's queue family, which supports compute),
        // begun below and never inside a render pass; synchronization2 is
        // enabled on every device gpu-counters opens; the workload was built
        // on this device and is destroyed only in `destroy`, after the
        // device is idle, and every run waits for its submission.
        let d = self.device.raw().clone();
        let cmd = self.raw.cmd;
        let pool = self.raw.samples;
        // The workload's dispatches and barriers, unless the samples are
        // recorded alone.
        let wl = self.work.then_some(&self.workload);
        let write = |stage: vk::PipelineStageFlags2, index: u32| {
            // SAFETY: `cmd` is recording; the query was reset on the host
            // below before recording and is written once.
            unsafe { d.cmd_write_timestamp2(cmd, stage, pool, index) }
        };
        // SAFETY: the previous submission was waited for, so the pool, the
        // queries and the fence are not in use.
        unsafe {
            d.reset_command_pool(self.raw.pool, vk::CommandPoolResetFlags::empty())
                .map_err(vk_err("vkResetCommandPool"))?;
            d.reset_query_pool(pool, 0, 2 * self.n);
            d.begin_command_buffer(
                cmd,
                &vk::CommandBufferBeginInfo::default()
                    .flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT),
            )
            .map_err(vk_err("vkBeginCommandBuffer"))?;
        }
        self.reset_brackets();
        self.bracket(cmd, 0);
        let t = Instant::now();
        self.raw_scopes.clear();
        for i in 0..self.n {
            match kind {
                Kind::RawBaseline => {
                    if let Some(wl) = wl {
                        // SAFETY: `cmd` is recording (begun above) outside any render
                        // pass; see `run_raw`'s recording contract.
                        unsafe {
                            wl.record_dispatch(&d, cmd);
                            wl.record_barrier(&d, cmd);
                        }
                    }
                }
                Kind::RawPrecise | Kind::RawRelaxed => {
                    let stage = if kind == Kind::RawPrecise {
                        vk::PipelineStageFlags2::ALL_COMMANDS
                    } else {
                        vk::PipelineStageFlags2::TOP_OF_PIPE
                    };
                    if let Some(wl) = wl {
                        // SAFETY: `cmd` is recording (begun above) outside any render
                        // pass; see `run_raw`'s recording contract.
                        unsafe { wl.record_dispatch(&d, cmd) };
                    }
                    write(stage, i);
                    if let Some(wl) = wl {
                        // SAFETY: as the dispatch above.
                        unsafe { wl.record_barrier(&d, cmd) };
                    }
                }
                _ => {
                    let start = if kind == Kind::RawPass {
                        vk::PipelineStageFlags2::TOP_OF_PIPE
                    } else {
                        vk::PipelineStageFlags2::ALL_COMMANDS
                    };
                    if kind == Kind::RawScopes {
                        self.raw_scopes.push(("dispatch", 2 * i));
                    }
                    write(start, 2 * i);
                    if let Some(wl) = wl {
                        // SAFETY: `cmd` is recording (begun above) outside any render
                        // pass; see `run_raw`'s recording contract.
                        unsafe {
                            wl.record_dispatch(&d, cmd);
                            wl.record_barrier(&d, cmd);
                        }
                    }
                    write(vk::PipelineStageFlags2::ALL_COMMANDS, 2 * i + 1);
                }
            }
        }
        let record_ns = t.elapsed().as_nanos() as f64;
        self.bracket(cmd, 1);
        // SAFETY: the command buffer is recording; the queue is externally
        // synchronised by gpu-counters' queue lock; the fence is unsignaled.
        unsafe {
            d.end_command_buffer(cmd)
                .map_err(vk_err("vkEndCommandBuffer"))?;
            let infos = [vk::CommandBufferSubmitInfo::default().command_buffer(cmd)];
            let submit = [vk::SubmitInfo2::default().command_buffer_infos(&infos)];
            {
                let queue = self
                    .device
                    .queue()
                    .lock()
                    .map_err(|_| BenchError::Measurement("queue lock poisoned".into()))?;
                d.queue_submit2(*queue, &submit, self.raw.fence)
                    .map_err(vk_err("vkQueueSubmit2"))?;
            }
            d.wait_for_fences(&[self.raw.fence], true, u64::MAX)
                .map_err(vk_err("vkWaitForFences"))?;
            d.reset_fences(&[self.raw.fence])
                .map_err(vk_err("vkResetFences"))?;
        }
        let gpu_ns = self.bracket_ns()?;
        let mut resolve_ns = 0.0;
        if kind == Kind::RawScopes {
            let t = Instant::now();
            self.resolve_raw_scopes(samples)?;
            resolve_ns = t.elapsed().as_nanos() as f64;
            black_box(&self.raw_results);
        } else if samples > 0 {
            let t = Instant::now();
            let ns = raw_resolve(&d, pool, samples, self.mask, self.period_ns)?;
            resolve_ns = t.elapsed().as_nanos() as f64;
            let missing = ns.iter().filter(|v| v.is_nan()).count();
            if missing > 0 {
                return Err(BenchError::Measurement(format!(
                    "{:?}: {missing} of {samples} raw timestamps unavailable",
                    kind
                )));
            }
            black_box(ns);
        }
        Ok(Measurement {
            gpu_ns,
            record_ns,
            resolve_ns,
        })
    }

    /// The hand-rolled raw profiler's collect: reads the `samples` queries
    /// with their availability into the kept read-back, resets them for the
    /// next frame, and makes each scope's (label, start, end) in ns since
    /// the first scope's start, into the kept results. Fails when a scope's
    /// timestamp is unavailable, as the profiler's check does.
    fn resolve_raw_scopes(&mut self, samples: u32) -> Result<(), BenchError> {
        let d = self.device.raw();
        let read = &mut self.raw_read[..samples as usize];
        // SAFETY: the pool holds `2 * n` >= `samples` queries; `read` holds
        // one (value, availability) pair of u64 per query.
        unsafe {
            d.get_query_pool_results(
                self.raw.samples,
                0,
                read,
                vk::QueryResultFlags::TYPE_64 | vk::QueryResultFlags::WITH_AVAILABILITY,
            )
        }
        .map_err(vk_err("vkGetQueryPoolResults"))?;
        // SAFETY: hostQueryReset is enabled on gpu-counters' devices and the
        // submission that wrote the queries has finished (waited for).
        unsafe { d.reset_query_pool(self.raw.samples, 0, samples) };
        let (mask, period) = (self.mask, self.period_ns);
        let first = read.first().map_or(0, |q| q[0] & mask);
        let ns = |t: u64| ((t & mask).wrapping_sub(first) & mask) as f64 * period;
        self.raw_results.clear();
        for &(label, q) in &self.raw_scopes {
            let ([t0, a0], [t1, a1]) = (read[q as usize], read[q as usize + 1]);
            if a0 != 0 && a1 != 0 {
                self.raw_results.push((label, ns(t0), ns(t1)));
            }
        }
        if self.raw_results.len() != self.raw_scopes.len() {
            return Err(BenchError::Measurement(format!(
                "raw scopes: {} of {} scopes unavailable",
                self.raw_scopes.len() - self.raw_results.len(),
                self.raw_scopes.len()
            )));
        }
        Ok(())
    }

    fn run_gpu_counters(&mut self, kind: Kind, samples: u32) -> Result<Measurement, BenchError> {
        // Recording contract of the workload's `record_*` calls below: `cmd`
        // is a gpu-counters command buffer of this device (recording from
        // when it is made or recycled), on its graphics and compute queue
        // family; compute encoders and profiler scopes open no render pass;
        // synchronization2 is enabled on every device gpu-counters opens; the
        // workload was built on this device and is destroyed only in
        // `destroy`, after the device is idle, and every run waits for its
        // submission.
        let d = self.device.raw().clone();
        let n = self.n;
        // The workload's dispatches and barriers, unless the samples are
        // recorded alone.
        let wl = self.work.then_some(&self.workload);
        let buffer = &self.buffer;
        let heap = &self.heap;
        buffer.reset()?;
        heap.invalidate_counter_range(0..n as u64)?;
        let mut cmd = match self.spare.take() {
            Some(c) => c,
            None => CommandBuffer::new(&self.device)?,
        };
        self.reset_brackets();
        self.bracket(cmd.raw(), 0);
        let t = Instant::now();
        let frame = match kind {
            Kind::GcProfilerScopes => Some(self.profiler.begin_frame()?),
            _ => None,
        };
        match kind {
            Kind::GcBaseline
            | Kind::GcSampleBarrier
            | Kind::GcSampleNoBarrier
            | Kind::GcHeapPrecise
            | Kind::GcHeapRelaxed => {
                let mut enc = cmd.compute_encoder(&ComputePassDescriptor::default())?;
                for i in 0..n {
                    if let Some(wl) = wl {
                        // SAFETY: `enc.raw()` is recording outside any render pass; see
                        // `run_gpu_counters`' recording contract.
                        unsafe { wl.record_dispatch(&d, enc.raw()) };
                    }
                    match kind {
                        Kind::GcSampleBarrier => enc.sample_counters(buffer, i, true)?,
                        Kind::GcSampleNoBarrier => enc.sample_counters(buffer, i, false)?,
                        Kind::GcHeapPrecise => {
                            enc.write_timestamp(TimestampGranularity::Precise, heap, i)?
                        }
                        Kind::GcHeapRelaxed => {
                            enc.write_timestamp(TimestampGranularity::Relaxed, heap, i)?
                        }
                        _ => {}
                    }
                    if let Some(wl) = wl {
                        // SAFETY: `enc.raw()` is recording outside any render pass; see
                        // `run_gpu_counters`' recording contract.
                        unsafe { wl.record_barrier(&d, enc.raw()) };
                    }
                }
                enc.end_encoding()?;
            }
            Kind::GcBaselinePassPerDispatch | Kind::GcHeapRelaxedPassPerDispatch => {
                for i in 0..n {
                    let mut enc = cmd.compute_encoder(&ComputePassDescriptor::default())?;
                    if let Some(wl) = wl {
                        // SAFETY: `enc.raw()` is recording outside any render pass; see
                        // `run_gpu_counters`' recording contract.
                        unsafe { wl.record_dispatch(&d, enc.raw()) };
                    }
                    if kind == Kind::GcHeapRelaxedPassPerDispatch {
                        enc.write_timestamp(TimestampGranularity::Relaxed, heap, i)?;
                    }
                    if let Some(wl) = wl {
                        // SAFETY: `enc.raw()` is recording outside any render pass; see
                        // `run_gpu_counters`' recording contract.
                        unsafe { wl.record_barrier(&d, enc.raw()) };
                    }
                    enc.end_encoding()?;
                }
            }
            Kind::GcPassAttachments => {
                for i in 0..n {
                    let enc = cmd.compute_encoder(&ComputePassDescriptor {
                        sample_buffer_attachments: &[PassSampleBufferAttachment {
                            sample_buffer: buffer,
                            start_of_encoder_sample_index: Some(2 * i),
                            end_of_encoder_sample_index: Some(2 * i + 1),
                        }],
                    })?;
                    if let Some(wl) = wl {
                        // SAFETY: `enc.raw()` is recording outside any render pass; see
                        // `run_gpu_counters`' recording contract.
                        unsafe {
                            wl.record_dispatch(&d, enc.raw());
                            wl.record_barrier(&d, enc.raw());
                        }
                    }
                    enc.end_encoding()?;
                }
            }
            Kind::GcScopePairs => {
                for i in 0..n {
                    cmd.sample_counters(buffer, 2 * i, TimestampGranularity::Relaxed)?;
                    if let Some(wl) = wl {
                        // SAFETY: `cmd.raw()` is recording outside any render pass; see
                        // `run_gpu_counters`' recording contract.
                        unsafe {
                            wl.record_dispatch(&d, cmd.raw());
                            wl.record_barrier(&d, cmd.raw());
                        }
                    }
                    cmd.sample_counters(buffer, 2 * i + 1, TimestampGranularity::Precise)?;
                }
            }
            Kind::GcProfilerScopes => {
                for _ in 0..n {
                    let scope = frame
                        .as_ref()
                        .ok_or_else(|| BenchError::Measurement("no profiler frame".into()))?
                        .scope(&mut cmd, "dispatch", PassKind::Compute)?;
                    if let Some(wl) = wl {
                        // SAFETY: `cmd.raw()` is recording outside any render pass; see
                        // `run_gpu_counters`' recording contract.
                        unsafe {
                            wl.record_dispatch(&d, cmd.raw());
                            wl.record_barrier(&d, cmd.raw());
                        }
                    }
                    scope.end(&mut cmd)?;
                }
            }
            _ => unreachable!("raw-ash kinds run in run_raw"),
        }
        let record_ns = t.elapsed().as_nanos() as f64;
        self.bracket(cmd.raw(), 1);
        let submission = cmd.commit()?;
        // `end_frame` counts as resolve (raw ash has no such call), as
        // wgpu-profiler's does in the wgpu rows.
        let mut end_frame_ns = 0.0;
        if let Some(frame) = frame {
            let t = Instant::now();
            self.profiler.end_frame(frame, [&submission])?;
            end_frame_ns = t.elapsed().as_nanos() as f64;
        }
        submission.wait()?;
        let gpu_ns = self.bracket_ns()?;
        let mut resolve_ns = 0.0;
        if kind == Kind::GcProfilerScopes {
            // Waiting for the submission told the profiler the frame's work
            // is done (no marker behind it).
            let t = Instant::now();
            self.profiler.collect_into(&mut self.frames)?;
            resolve_ns = t.elapsed().as_nanos() as f64 + end_frame_ns;
            check_profiler_frames(&self.frames, n, "profiler")?;
            black_box(&self.frames);
        } else if samples > 0 {
            let uses_heap = matches!(
                kind,
                Kind::GcHeapPrecise | Kind::GcHeapRelaxed | Kind::GcHeapRelaxedPassPerDispatch
            );
            let t = Instant::now();
            let resolved = if uses_heap {
                heap.resolve_counter_range(0..samples as u64)?
            } else {
                buffer.resolve_counter_range(0..samples as u64)?
            };
            let ns = timestamps_ns(&resolved, &self.calibration)?;
            resolve_ns = t.elapsed().as_nanos() as f64;
            check_written(&ns, &format!("{kind:?}"))?;
            black_box(ns);
        }
        self.spare = Some(submission.reuse()?);
        Ok(Measurement {
            gpu_ns,
            record_ns,
            resolve_ns,
        })
    }
}

impl Harness for VulkanBench {
    type Kind = Kind;

    fn run(&mut self, kind: Kind) -> Result<Measurement, BenchError> {
        VulkanBench::run(self, kind)
    }

    fn busy() -> BenchError {
        BenchError::Measurement("the Vulkan harness is already running".into())
    }
}

/// The raw-ash and gpu-counters variants of `n` dispatches on `device`,
/// sharing one harness (destroyed, after the device is idle, with the last
/// of them).
///
/// With `work` false, no row records the workload's dispatches and
/// barriers: each records its samples alone (`samples_alone`), so its host
/// cost over its baseline is the samples' own.
pub(crate) fn variants(device: &Device, n: u32, work: bool) -> Result<Variants, BenchError> {
    let bench = Rc::new(RefCell::new(VulkanBench::new(device, n, work)?));
    Ok(KINDS
        .iter()
        .map(|&kind| {
            let (name, tool, placement, per, baseline) = kind.describe();
            Box::new(HarnessRow {
                bench: bench.clone(),
                kind,
                spec: VariantSpec {
                    name: name.into(),
                    tool,
                    placement,
                    samples: per * u64::from(n),
                    timestamps_written: kind.written(u64::from(n)),
                    baseline: baseline.map(Into::into),
                },
            }) as Box<dyn Variant>
        })
        .collect())
}

impl Drop for VulkanBench {
    fn drop(&mut self) {
        self.destroy();
    }
}

/// Raw ash readback: `vkGetQueryPoolResults` (64-bit, with availability) of
/// `count` timestamps and conversion to nanoseconds since the first one; an
/// unavailable query becomes NaN.
pub(crate) fn raw_resolve(
    d: &ash::Device,
    pool: vk::QueryPool,
    count: u32,
    mask: u64,
    period_ns: f64,
) -> Result<Vec<f64>, BenchError> {
    let mut data = vec![[0u64; 2]; count as usize];
    // SAFETY: the pool holds at least `count` queries; `data` holds one
    // (value, availability) pair of u64 per query.
    unsafe {
        d.get_query_pool_results(
            pool,
            0,
            &mut data,
            vk::QueryResultFlags::TYPE_64 | vk::QueryResultFlags::WITH_AVAILABILITY,
        )
    }
    .map_err(vk_err("vkGetQueryPoolResults"))?;
    let first = data[0][0] & mask;
    Ok(data
        .iter()
        .map(|&[v, available]| {
            if available != 0 {
                ((v & mask).wrapping_sub(first) & mask) as f64 * period_ns
            } else {
                f64::NAN
            }
        })
        .collect())
}

pub(crate) fn mask(bits: u32) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}
