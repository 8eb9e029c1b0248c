//! The wgpu, wgpu-profiler and gpu-counters-wgpu variants, on wgpu's own
//! Vulkan instance and the adapter with the same name as gpu-counters'
//! device: one wgpu device for all three tools. gpu-counters' profiled
//! passes are `gpu_counters::wgpu::Profiler`'s scoped compute passes (the
//! drop-in for wgpu-profiler), on the same raw encoders as wgpu-profiler's.

use crate::vulkan::{ITERATIONS, WORKGROUP_SIZE};
use crate::{
    check_written, timestamps_ns, BenchError, ComparisonSpec, Harness, HarnessRow, Measurement,
    Placement, Rows, Tool, Variant, VariantSpec,
};
use gpu_counters::wgpu::{Profiler, ProfilerSettings};
use gpu_counters_hal::{Calibration, CounterSampleBufferDescriptor, DeviceInfo};
use gpu_counters_wgpu as gcw;
use std::cell::RefCell;
use std::hint::black_box;
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::time::Instant;
use wgpu_profiler::{GpuProfiler, GpuProfilerSettings};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Baseline,
    BaselinePassPerDispatch,
    PassTimestampWrites,
    PassTimestampWritesLabelled,
    WriteTimestampInPass,
    ProfilerPassScopes,
    ProfilerScopesInPass,
    GcwBaselinePassPerDispatch,
    GcwPassTimestampWrites,
    DropInPasses,
}

const BASELINE: &str = "wgpu baseline (1 pass)";
const BASELINE_PASSES: &str = "wgpu baseline (pass per dispatch)";
const PASS_TIMESTAMP_WRITES: &str = "wgpu pass timestamp_writes";
const PASS_TIMESTAMP_WRITES_LABELLED: &str = "wgpu pass timestamp_writes, labelled passes";
const PROFILER_PASS_SCOPES: &str = "wgpu-profiler pass scope per dispatch";
const GCW_BASELINE: &str = "gpu-counters-wgpu baseline (pass per dispatch)";
const GCW_PASS_TIMESTAMP_WRITES: &str = "gpu-counters-wgpu pass timestamp writes per dispatch";
const GCW_PROFILED_PASSES: &str = "gpu-counters-wgpu profiled pass per dispatch";

impl Kind {
    /// (name, tool, placement, samples per dispatch, baseline)
    fn describe(self) -> (&'static str, Tool, Placement, u64, Option<&'static str>) {
        match self {
            Kind::Baseline => (BASELINE, Tool::Wgpu, Placement::None, 0, None),
            Kind::BaselinePassPerDispatch => {
                (BASELINE_PASSES, Tool::Wgpu, Placement::None, 0, None)
            }
            Kind::PassTimestampWrites => (
                PASS_TIMESTAMP_WRITES,
                Tool::Wgpu,
                Placement::Pass,
                2,
                Some(BASELINE_PASSES),
            ),
            Kind::PassTimestampWritesLabelled => (
                PASS_TIMESTAMP_WRITES_LABELLED,
                Tool::Wgpu,
                Placement::Pass,
                2,
                Some(BASELINE_PASSES),
            ),
            Kind::WriteTimestampInPass => (
                "wgpu ComputePass::write_timestamp",
                Tool::Wgpu,
                Placement::Precise,
                1,
                Some(BASELINE),
            ),
            Kind::ProfilerPassScopes => (
                PROFILER_PASS_SCOPES,
                Tool::WgpuProfiler,
                Placement::Pass,
                2,
                Some(BASELINE_PASSES),
            ),
            Kind::ProfilerScopesInPass => (
                "wgpu-profiler scope in pass per dispatch",
                Tool::WgpuProfiler,
                Placement::Pass,
                2,
                Some(BASELINE),
            ),
            Kind::GcwBaselinePassPerDispatch => (
                GCW_BASELINE,
                Tool::GpuCountersWgpu,
                Placement::None,
                0,
                None,
            ),
            Kind::GcwPassTimestampWrites => (
                GCW_PASS_TIMESTAMP_WRITES,
                Tool::GpuCountersWgpu,
                Placement::Pass,
                2,
                Some(GCW_BASELINE),
            ),
            Kind::DropInPasses => (
                GCW_PROFILED_PASSES,
                Tool::GpuCountersWgpu,
                Placement::Pass,
                2,
                Some(GCW_BASELINE),
            ),
        }
    }

    /// Recorded through gpu-counters-wgpu (`gcw::Device::submit`).
    fn is_gpu_counters(self) -> bool {
        matches!(
            self,
            Kind::GcwBaselinePassPerDispatch | Kind::GcwPassTimestampWrites
        )
    }
}

/// The derived comparisons of the gpu-counters-wgpu rows: each against
/// wgpu-profiler's pass scopes (target: no higher) and against raw wgpu's
/// pass timestamp writes (target: at most 1.1 times); profiled passes
/// also against raw writes into passes labelled as theirs are, their own
/// floor: wgpu copies a labelled pass's label at its begin and clones it
/// at its end, a cost of wgpu's that labelling alone adds.
pub(crate) fn comparisons() -> Vec<ComparisonSpec> {
    let mut specs: Vec<ComparisonSpec> = [GCW_PROFILED_PASSES, GCW_PASS_TIMESTAMP_WRITES]
        .into_iter()
        .flat_map(|variant| {
            [
                ComparisonSpec {
                    variant,
                    against: PROFILER_PASS_SCOPES,
                    target: 1.0,
                },
                ComparisonSpec {
                    variant,
                    against: PASS_TIMESTAMP_WRITES,
                    target: 1.1,
                },
            ]
        })
        .collect();
    specs.push(ComparisonSpec {
        variant: GCW_PROFILED_PASSES,
        against: PASS_TIMESTAMP_WRITES_LABELLED,
        target: 1.1,
    });
    specs
}

const SHADER: &str = "@group(0) @binding(0) var<storage, read_write> data: array<u32>;

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if (i >= arrayLength(&data)) {
        return;
    }
    var x = data[i] ^ i;
    for (var k = 0u; k < ITERATIONSu; k = k + 1u) {
        x = x * 1664525u + 1013904223u;
    }
    data[i] = x;
}
";

/// The settings of `gpu_counters::wgpu::Profiler` for the bench's
/// profiled-pass row (and `wgpu_host_cost`'s): as wgpu-profiler's in the
/// bench (timer queries, no debug groups), frames of up to `n` scopes, at
/// most [`DROP_IN_MAX_SCOPES`].
pub fn drop_in_settings(n: u32) -> ProfilerSettings {
    ProfilerSettings {
        enable_timer_queries: true,
        enable_debug_groups: false,
        pipeline_statistics: false,
        max_scopes_per_frame: n.clamp(1, DROP_IN_MAX_SCOPES),
        queue_name: "queue".into(),
    }
}

/// The scopes a frame of `gpu_counters::wgpu::Profiler` holds at most (one
/// query set of wgpu's largest, two timestamps a scope): more dispatches
/// are profiled over several frames, each its own encoder and submission.
pub const DROP_IN_MAX_SCOPES: u32 = wgpu::QUERY_SET_MAX_QUERIES / 2;

/// Checks the drop-in's `frames` for `n` dispatches: every scope timed
/// (none dropped, none missing).
pub fn check_drop_in_frames(
    frames: &[gpu_counters::wgpu::ProfiledFrame],
    n: u32,
) -> Result<(), BenchError> {
    let scopes: usize = frames.iter().map(|f| f.scopes().len()).sum();
    let dropped: u32 = frames.iter().map(|f| f.result.dropped_scopes).sum();
    let expected = n.div_ceil(DROP_IN_MAX_SCOPES) as usize;
    if frames.len() != expected || scopes != n as usize || dropped != 0 {
        return Err(BenchError::Measurement(format!(
            "gpu_counters::wgpu::Profiler returned {} frame(s) (expected {expected}) with {scopes} scopes ({dropped} dropped) for {n} dispatches",
            frames.len()
        )));
    }
    Ok(())
}

/// The bench's workload on wgpu: one workgroup of the tiny kernel the
/// Vulkan rows dispatch, its pipeline and data (the bench's wgpu rows, and
/// `wgpu_host_cost`'s).
pub struct TinyCompute {
    /// The kernel's pipeline.
    pub pipeline: wgpu::ComputePipeline,
    /// Its data buffer, bound at group 0.
    pub bind_group: wgpu::BindGroup,
}

impl TinyCompute {
    /// The pipeline and data on `device`.
    pub fn new(device: &wgpu::Device) -> Self {
        let source = SHADER
            .replace("WORKGROUP_SIZE", &WORKGROUP_SIZE.to_string())
            .replace("ITERATIONS", &ITERATIONS.to_string());
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("tiny compute"),
            source: wgpu::ShaderSource::Wgsl(source.into()),
        });
        let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some("tiny compute"),
            layout: None,
            module: &module,
            entry_point: Some("main"),
            compilation_options: Default::default(),
            cache: None,
        });
        let storage = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("tiny compute data"),
            size: WORKGROUP_SIZE as u64 * 4,
            usage: wgpu::BufferUsages::STORAGE,
            mapped_at_creation: false,
        });
        let bind_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("tiny compute"),
            layout: &pipeline.get_bind_group_layout(0),
            entries: &[wgpu::BindGroupEntry {
                binding: 0,
                resource: storage.as_entire_binding(),
            }],
        });
        Self {
            pipeline,
            bind_group,
        }
    }

    /// One workgroup of the kernel in `pass`.
    pub fn dispatch(&self, pass: &mut wgpu::ComputePass<'_>) {
        pass.set_pipeline(&self.pipeline);
        pass.set_bind_group(0, &self.bind_group, &[]);
        pass.dispatch_workgroups(1, 1, 1);
    }
}

/// Raw wgpu timestamp queries as a wgpu user keeps them: query sets of at
/// most [`wgpu::QUERY_SET_MAX_QUERIES`], with a resolve and a read-back
/// buffer made once. The bench's raw wgpu rows, and `wgpu_host_cost`'s.
pub struct RawWgpuQueries {
    sets: Vec<wgpu::QuerySet>,
    resolve: wgpu::Buffer,
    readback: wgpu::Buffer,
    count: u32,
}

impl RawWgpuQueries {
    /// `count` timestamp queries labelled `label` on `device`.
    pub fn new(device: &wgpu::Device, count: u32, label: &str) -> Self {
        let max = wgpu::QUERY_SET_MAX_QUERIES;
        let sets = (0..count.div_ceil(max))
            .map(|k| {
                device.create_query_set(&wgpu::QuerySetDescriptor {
                    label: Some(label),
                    ty: wgpu::QueryType::Timestamp,
                    count: (count - k * max).min(max),
                })
            })
            .collect();
        let size = count as u64 * wgpu::QUERY_SIZE as u64;
        Self {
            sets,
            resolve: device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size,
                usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: false,
            }),
            readback: device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size,
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            }),
            count,
        }
    }

    /// The query set and index holding query `i`.
    pub fn at(&self, i: u32) -> (&wgpu::QuerySet, u32) {
        let max = wgpu::QUERY_SET_MAX_QUERIES;
        (&self.sets[(i / max) as usize], i % max)
    }

    /// Records the resolve of the first `count` queries and the copy into the
    /// readback buffer.
    pub fn record_resolve(&self, encoder: &mut wgpu::CommandEncoder, count: u32) {
        let max = wgpu::QUERY_SET_MAX_QUERIES;
        let mut first = 0;
        while first < count {
            let (set, _) = self.at(first);
            let n = (count - first).min(max);
            encoder.resolve_query_set(
                set,
                0..n,
                &self.resolve,
                first as u64 * wgpu::QUERY_SIZE as u64,
            );
            first += n;
        }
        encoder.copy_buffer_to_buffer(
            &self.resolve,
            0,
            &self.readback,
            0,
            count as u64 * wgpu::QUERY_SIZE as u64,
        );
    }

    /// Maps the readback buffer and converts the first `count` timestamps to
    /// nanoseconds since the first one.
    pub fn read(
        &self,
        device: &wgpu::Device,
        count: u32,
        period_ns: f64,
    ) -> Result<Vec<f64>, BenchError> {
        let bytes = count as u64 * wgpu::QUERY_SIZE as u64;
        debug_assert!(count <= self.count);
        let slice = self.readback.slice(0..bytes);
        let status = Arc::new(Mutex::new(None));
        let s = status.clone();
        slice.map_async(wgpu::MapMode::Read, move |r| {
            if let Ok(mut s) = s.lock() {
                *s = Some(r);
            }
        });
        device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| BenchError::Wgpu(format!("poll: {e}")))?;
        match status.lock().ok().and_then(|mut s| s.take()) {
            Some(Ok(())) => {}
            Some(Err(e)) => return Err(BenchError::Wgpu(format!("map_async: {e}"))),
            None => return Err(BenchError::Wgpu("map_async did not complete".into())),
        }
        let ns = {
            let view = slice
                .get_mapped_range()
                .map_err(|e| BenchError::Wgpu(format!("get_mapped_range: {e}")))?;
            let ticks: &[u8] = &view;
            let value = |k: usize| {
                let mut b = [0u8; 8];
                b.copy_from_slice(&ticks[8 * k..8 * k + 8]);
                u64::from_ne_bytes(b)
            };
            let first = value(0);
            (0..count as usize)
                .map(|k| value(k).wrapping_sub(first) as f64 * period_ns)
                .collect()
        };
        self.readback.unmap();
        Ok(ns)
    }
}

/// wgpu's device, pipeline, query sets, wgpu-profiler and gpu-counters-wgpu,
/// shared by every wgpu, wgpu-profiler and gpu-counters-wgpu variant.
struct WgpuBench {
    /// gpu-counters-wgpu's device over `device` and `queue`.
    gc: gcw::Device,
    /// The gpu-counters-wgpu sample buffers of the pass timestamp writes
    /// (`2 * n` samples over buffers of at most
    /// [`gpu_counters_wgpu::MAX_SAMPLE_COUNT`]).
    gc_buffers: Vec<gcw::CounterSampleBuffer>,
    /// `gpu_counters::wgpu::Profiler` over `gc`: a frame per
    /// [`DROP_IN_MAX_SCOPES`] dispatches of a run.
    drop_in: Profiler,
    /// `gc`'s calibration, for converting resolved timestamps.
    calibration: Calibration,
    device: wgpu::Device,
    queue: wgpu::Queue,
    pipeline: wgpu::ComputePipeline,
    bind_group: wgpu::BindGroup,
    samples: RawWgpuQueries,
    brackets: Option<RawWgpuQueries>,
    profiler: GpuProfiler,
    kinds: Vec<Kind>,
    errors: Arc<Mutex<Vec<String>>>,
    period_ns: f64,
    adapter_name: String,
    matched: bool,
    n: u32,
    /// Whether each pass records its dispatch: false for the samples-alone
    /// rows, whose passes are empty.
    work: bool,
}

impl WgpuBench {
    /// Opens wgpu on the Vulkan adapter named like `info` (else the first
    /// Vulkan adapter) and builds the pipeline and query sets for `n`
    /// dispatches (`n` empty passes where `work` is false).
    fn new(info: &DeviceInfo, n: u32, work: bool) -> Result<Self, BenchError> {
        let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
        desc.backends = wgpu::Backends::VULKAN;
        // No validation layer and no debug labels: measure wgpu as shipped.
        desc.flags = wgpu::InstanceFlags::empty();
        let instance = wgpu::Instance::new(desc);
        let adapters = pollster::block_on(instance.enumerate_adapters(wgpu::Backends::VULKAN));
        let matched = adapters.iter().position(|a| a.get_info().name == info.name);
        let adapter = match matched {
            Some(i) => adapters[i].clone(),
            None => adapters
                .first()
                .cloned()
                .ok_or_else(|| BenchError::Wgpu("no wgpu Vulkan adapter".into()))?,
        };
        let adapter_name = adapter.get_info().name;
        let wanted = wgpu::Features::TIMESTAMP_QUERY
            | wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS
            | wgpu::Features::TIMESTAMP_QUERY_INSIDE_PASSES;
        let features = adapter.features() & wanted;
        if !features.contains(wgpu::Features::TIMESTAMP_QUERY) {
            return Err(BenchError::Wgpu(format!(
                "adapter `{adapter_name}` has no TIMESTAMP_QUERY"
            )));
        }
        // One device for raw wgpu, wgpu-profiler and gpu-counters-wgpu, so
        // that every wgpu row runs on the same queue, driver state and
        // pipeline. It is opened with `gcw::Device::request`, as a
        // gpu-counters-wgpu user would, so that gpu-counters-wgpu calibrates
        // with a calibrated pair where the driver has
        // VK_EXT/KHR_calibrated_timestamps; that extension is all it adds to
        // wgpu's own `request_device` (same features and limits), and it
        // changes nothing in the passes, query writes and resolves raw wgpu
        // and wgpu-profiler record.
        let gc = pollster::block_on(gcw::Device::request(
            &adapter,
            &wgpu::DeviceDescriptor {
                label: Some("gpu-counters bench"),
                required_features: features,
                required_limits: wgpu::Limits::default(),
                ..Default::default()
            },
        ))
        .map_err(|e| BenchError::Wgpu(format!("request_device: {e}")))?;
        let (device, queue) = (gc.device().clone(), gc.queue().clone());
        let errors = Arc::new(Mutex::new(Vec::new()));
        let sink = errors.clone();
        device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
            if let Ok(mut v) = sink.lock() {
                v.push(e.to_string());
            }
        }));
        let TinyCompute {
            pipeline,
            bind_group,
        } = TinyCompute::new(&device);
        let samples = RawWgpuQueries::new(&device, 2 * n, "bench samples");
        let brackets = features
            .contains(wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS)
            .then(|| RawWgpuQueries::new(&device, 2, "brackets"));
        let profiler = GpuProfiler::new(
            &device,
            GpuProfilerSettings {
                enable_timer_queries: true,
                enable_debug_groups: false,
                max_num_pending_frames: 3,
            },
        )
        .map_err(|e| BenchError::Wgpu(format!("GpuProfiler::new: {e}")))?;
        let max = gpu_counters_wgpu::MAX_SAMPLE_COUNT;
        let gc_buffers = (0..(2 * n).div_ceil(max))
            .map(|k| {
                gc.make_counter_sample_buffer(&CounterSampleBufferDescriptor::new(
                    gpu_counters_hal::CommonCounterSet::Timestamp,
                    "bench samples",
                    (2 * n - k * max).min(max),
                ))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let drop_in = Profiler::with_device(&gc, drop_in_settings(n))?;
        let calibration = gc.calibration()?;
        // Without the work, only the pass-per-dispatch rows: the in-pass
        // rows' one pass would leave their samples nothing to sit between.
        let inside_passes =
            work && features.contains(wgpu::Features::TIMESTAMP_QUERY_INSIDE_PASSES);
        let mut kinds = Vec::new();
        if work {
            kinds.push(Kind::Baseline);
        }
        kinds.extend([
            Kind::BaselinePassPerDispatch,
            Kind::PassTimestampWrites,
            Kind::PassTimestampWritesLabelled,
        ]);
        if inside_passes {
            kinds.push(Kind::WriteTimestampInPass);
        }
        kinds.push(Kind::ProfilerPassScopes);
        if inside_passes {
            kinds.push(Kind::ProfilerScopesInPass);
        }
        kinds.extend([
            Kind::GcwBaselinePassPerDispatch,
            Kind::GcwPassTimestampWrites,
            Kind::DropInPasses,
        ]);
        let period_ns = queue.get_timestamp_period() as f64;
        let this = Self {
            gc,
            gc_buffers,
            drop_in,
            calibration,
            device,
            queue,
            pipeline,
            bind_group,
            samples,
            brackets,
            profiler,
            kinds,
            errors,
            period_ns,
            adapter_name,
            matched: matched.is_some(),
            n,
            work,
        };
        this.check_errors()?;
        Ok(this)
    }

    fn notes(&self) -> Vec<String> {
        let mut notes = Vec::new();
        if !self.matched {
            notes.push(format!(
                "wgpu has no adapter named like gpu-counters' device; it ran on `{}`",
                self.adapter_name
            ));
        }
        if self.brackets.is_none() {
            notes.push(
                "wgpu: no TIMESTAMP_QUERY_INSIDE_ENCODERS, so wgpu's GPU time is the CPU time from submit to the end of poll(Wait)".into(),
            );
        }
        if !self.kinds.contains(&Kind::WriteTimestampInPass) {
            notes.push(
                "wgpu: no TIMESTAMP_QUERY_INSIDE_PASSES: write_timestamp in passes and wgpu-profiler scopes in passes skipped".into(),
            );
        }
        if self.gc.calibrated_timestamps_extension().is_none() {
            notes.push(
                "gpu-counters-wgpu: no calibrated timestamps on wgpu's device: its calibration brackets a submission".into(),
            );
        }
        notes
    }

    fn check_errors(&self) -> Result<(), BenchError> {
        let errors = self
            .errors
            .lock()
            .map(|mut e| std::mem::take(&mut *e))
            .unwrap_or_default();
        if errors.is_empty() {
            Ok(())
        } else {
            Err(BenchError::Wgpu(errors.join("; ")))
        }
    }

    fn dispatch(&self, pass: &mut wgpu::ComputePass<'_>) {
        if !self.work {
            return;
        }
        pass.set_pipeline(&self.pipeline);
        pass.set_bind_group(0, &self.bind_group, &[]);
        pass.dispatch_workgroups(1, 1, 1);
    }

    /// One measurement of `kind`.
    fn run(&mut self, kind: Kind) -> Result<Measurement, BenchError> {
        if kind.is_gpu_counters() {
            return self.run_gpu_counters(kind);
        }
        if kind == Kind::DropInPasses {
            return self.run_drop_in();
        }
        let per = kind.describe().3;
        let samples = (per * self.n as u64) as u32;
        let n = self.n;
        let mut encoder = self.begin_bracket();
        let t = Instant::now();
        match kind {
            Kind::Baseline | Kind::WriteTimestampInPass => {
                let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor::default());
                for i in 0..n {
                    self.dispatch(&mut pass);
                    if kind == Kind::WriteTimestampInPass {
                        let (set, q) = self.samples.at(i);
                        pass.write_timestamp(set, q);
                    }
                }
            }
            Kind::BaselinePassPerDispatch => {
                for _ in 0..n {
                    let mut pass =
                        encoder.begin_compute_pass(&wgpu::ComputePassDescriptor::default());
                    self.dispatch(&mut pass);
                }
            }
            Kind::PassTimestampWrites | Kind::PassTimestampWritesLabelled => {
                // Labelled as profiled passes are: with the scope's label.
                let label = (kind == Kind::PassTimestampWritesLabelled).then_some("dispatch");
                for i in 0..n {
                    let (set, q) = self.samples.at(2 * i);
                    let (_, q1) = self.samples.at(2 * i + 1);
                    let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                        label,
                        timestamp_writes: Some(wgpu::ComputePassTimestampWrites {
                            query_set: set,
                            beginning_of_pass_write_index: Some(q),
                            end_of_pass_write_index: Some(q1),
                        }),
                    });
                    self.dispatch(&mut pass);
                }
            }
            Kind::ProfilerPassScopes => {
                for _ in 0..n {
                    let query = self.profiler.begin_pass_query("dispatch", &mut encoder);
                    {
                        // Labelled as wgpu-profiler's README labels its
                        // passes, and as gpu-counters-wgpu's profiled passes
                        // are (with the scope's label).
                        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                            label: Some("dispatch"),
                            timestamp_writes: query.compute_pass_timestamp_writes(),
                        });
                        self.dispatch(&mut pass);
                    }
                    self.profiler.end_query(&mut encoder, query);
                }
            }
            Kind::ProfilerScopesInPass => {
                let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor::default());
                for _ in 0..n {
                    let mut scope = self.profiler.scope("dispatch", &mut pass);
                    scope.set_pipeline(&self.pipeline);
                    scope.set_bind_group(0, &self.bind_group, &[]);
                    scope.dispatch_workgroups(1, 1, 1);
                }
            }
            Kind::GcwBaselinePassPerDispatch
            | Kind::GcwPassTimestampWrites
            | Kind::DropInPasses => {
                return Err(BenchError::Measurement(format!(
                    "{kind:?} is recorded through gpu-counters"
                )))
            }
        }
        let mut record_ns = t.elapsed().as_nanos() as f64;
        // The query resolve and copy are GPU work that sampling adds: they
        // go before the end bracket.
        let t = Instant::now();
        match kind {
            Kind::PassTimestampWrites
            | Kind::PassTimestampWritesLabelled
            | Kind::WriteTimestampInPass => self.samples.record_resolve(&mut encoder, samples),
            Kind::ProfilerPassScopes | Kind::ProfilerScopesInPass => {
                self.profiler.resolve_queries(&mut encoder)
            }
            _ => {}
        }
        record_ns += t.elapsed().as_nanos() as f64;
        self.end_bracket(&mut encoder);
        // `finish` and `submit` count as recording: wgpu tracks each pass's
        // query set usage there, and gpu-counters-wgpu's rows count their
        // `gcw::Device::submit` (which finishes and submits) the same way.
        let t = Instant::now();
        let commands = encoder.finish();
        let submitted = Instant::now();
        self.queue.submit([commands]);
        record_ns += t.elapsed().as_nanos() as f64;
        let gpu_ns = self.wait_gpu_ns(submitted)?;
        let t = Instant::now();
        match kind {
            Kind::PassTimestampWrites
            | Kind::PassTimestampWritesLabelled
            | Kind::WriteTimestampInPass => {
                black_box(self.samples.read(&self.device, samples, self.period_ns)?);
            }
            Kind::ProfilerPassScopes | Kind::ProfilerScopesInPass => {
                self.profiler
                    .end_frame()
                    .map_err(|e| BenchError::Wgpu(format!("end_frame: {e}")))?;
                self.wait()?;
                let results = self
                    .profiler
                    .process_finished_frame(self.queue.get_timestamp_period())
                    .ok_or_else(|| {
                        BenchError::Wgpu("wgpu-profiler returned no finished frame".into())
                    })?;
                let timed = results.iter().filter(|r| r.time.is_some()).count();
                if timed != n as usize {
                    return Err(BenchError::Measurement(format!(
                        "wgpu-profiler returned {timed} timed scopes for {n} dispatches"
                    )));
                }
                black_box(results);
            }
            _ => {}
        }
        let resolve_ns = if samples > 0 {
            t.elapsed().as_nanos() as f64
        } else {
            0.0
        };
        self.check_errors()?;
        Ok(Measurement {
            gpu_ns,
            record_ns,
            resolve_ns,
        })
    }
}

impl WgpuBench {
    /// A new command encoder beginning with the start bracket.
    fn begin_bracket(&self) -> wgpu::CommandEncoder {
        let mut encoder = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
        if let Some(b) = &self.brackets {
            let (set, i) = b.at(0);
            encoder.write_timestamp(set, i);
        }
        encoder
    }

    /// Records the end bracket and its resolve into `encoder`.
    fn end_bracket(&self, encoder: &mut wgpu::CommandEncoder) {
        if let Some(b) = &self.brackets {
            let (set, i) = b.at(1);
            encoder.write_timestamp(set, i);
            b.record_resolve(encoder, 2);
        }
    }

    /// Waits for everything submitted.
    fn wait(&self) -> Result<(), BenchError> {
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| BenchError::Wgpu(format!("poll: {e}")))?;
        Ok(())
    }

    /// Waits for everything submitted and returns the GPU time between the
    /// brackets (without brackets: the CPU time since `submitted`).
    fn wait_gpu_ns(&self, submitted: Instant) -> Result<f64, BenchError> {
        self.wait()?;
        let wall_ns = submitted.elapsed().as_nanos() as f64;
        self.check_errors()?;
        match &self.brackets {
            Some(b) => Ok(b.read(&self.device, 2, self.period_ns)?[1]),
            None => Ok(wall_ns),
        }
    }

    /// The gpu-counters-wgpu buffer and index of pass sample `i`.
    fn gc_sample(&self, i: u32) -> Result<(&gcw::CounterSampleBuffer, u32), BenchError> {
        let max = gpu_counters_wgpu::MAX_SAMPLE_COUNT;
        self.gc_buffers
            .get((i / max) as usize)
            .map(|b| (b, i % max))
            .ok_or_else(|| BenchError::Measurement(format!("no sample buffer for sample {i}")))
    }

    /// One measurement of a gpu-counters-wgpu `kind`: a compute pass per
    /// dispatch on a [`gcw::Device::wrap`]ped encoder, submitted with
    /// [`gcw::Device::submit`], which records the read-back of the samples at
    /// the encoder's end and submits it itself. So the end bracket, which
    /// must follow that read-back as it follows raw wgpu's resolve, goes in
    /// a second submission right after (timestamps follow all earlier work
    /// of the queue); the gpu-counters-wgpu baseline has the same two
    /// submissions, so the difference is the sampling alone.
    fn run_gpu_counters(&mut self, kind: Kind) -> Result<Measurement, BenchError> {
        let n = self.n;
        if kind == Kind::GcwPassTimestampWrites {
            // As the Vulkan variants reset theirs: not timed.
            for b in &self.gc_buffers {
                b.reset()?;
            }
        }
        let encoder = self.begin_bracket();
        let t = Instant::now();
        let mut rec = self.gc.wrap(encoder);
        match kind {
            Kind::GcwPassTimestampWrites => {
                for i in 0..n {
                    let (buffer, q) = self.gc_sample(2 * i)?;
                    let writes = rec.compute_pass_timestamp_writes(buffer, Some(q), Some(q + 1))?;
                    let mut pass = rec
                        .encoder()
                        .begin_compute_pass(&wgpu::ComputePassDescriptor {
                            label: None,
                            timestamp_writes: Some(writes),
                        });
                    self.dispatch(&mut pass);
                }
            }
            _ => {
                for _ in 0..n {
                    let mut pass = rec
                        .encoder()
                        .begin_compute_pass(&wgpu::ComputePassDescriptor::default());
                    self.dispatch(&mut pass);
                }
            }
        }
        let submitted = Instant::now();
        let submission = self.gc.submit(rec)?;
        let record_ns = t.elapsed().as_nanos() as f64;
        let mut end = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
        self.end_bracket(&mut end);
        self.queue.submit([end.finish()]);
        let mut resolve_ns = 0.0;
        let gpu_ns = self.wait_gpu_ns(submitted)?;
        submission.wait()?;
        let t = Instant::now();
        match kind {
            Kind::GcwPassTimestampWrites => {
                let mut resolved_ns = Vec::with_capacity(self.gc_buffers.len());
                for b in &self.gc_buffers {
                    let resolved = b.resolve_counter_range(0..u64::from(b.sample_count()))?;
                    resolved_ns.push(timestamps_ns(&resolved, &self.calibration)?);
                }
                resolve_ns += t.elapsed().as_nanos() as f64;
                for ns in &resolved_ns {
                    check_written(ns, &format!("{kind:?}"))?;
                }
                black_box(resolved_ns);
            }
            _ => resolve_ns = 0.0,
        }
        self.check_errors()?;
        Ok(Measurement {
            gpu_ns,
            record_ns,
            resolve_ns,
        })
    }
}

impl WgpuBench {
    /// One measurement of the drop-in's profiled passes: a
    /// `gpu_counters::wgpu::Profiler::scoped_compute_pass` per dispatch on
    /// raw encoders, as wgpu-profiler's row records its pass scopes. A frame
    /// holds at most [`DROP_IN_MAX_SCOPES`] scopes, so `n` dispatches are
    /// `ceil(n / DROP_IN_MAX_SCOPES)` frames, each an encoder submitted
    /// with `queue.submit` and followed by `end_frame` (the first encoder
    /// holds the start bracket, the last the end one). Recording runs to
    /// each `queue.submit`'s return; `end_frame` (the read-back's
    /// submission) and `collect` count as resolve, as wgpu-profiler's
    /// `end_frame` and `process_finished_frame` do.
    fn run_drop_in(&mut self) -> Result<Measurement, BenchError> {
        let n = self.n;
        let frames = n.div_ceil(DROP_IN_MAX_SCOPES).max(1);
        let mut record_ns = 0.0;
        let mut resolve_ns = 0.0;
        let mut submitted = None;
        let mut left = n;
        for f in 0..frames {
            let mut encoder = if f == 0 {
                self.begin_bracket()
            } else {
                self.device
                    .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None })
            };
            let t = Instant::now();
            let k = left.min(DROP_IN_MAX_SCOPES);
            left -= k;
            for _ in 0..k {
                let mut pass = self.drop_in.scoped_compute_pass("dispatch", &mut encoder);
                self.dispatch(&mut pass);
            }
            self.drop_in.resolve_queries(&mut encoder);
            let mut step_ns = t.elapsed().as_nanos() as f64;
            if f + 1 == frames {
                self.end_bracket(&mut encoder);
            }
            let t = Instant::now();
            let commands = encoder.finish();
            if submitted.is_none() {
                submitted = Some(Instant::now());
            }
            self.queue.submit([commands]);
            step_ns += t.elapsed().as_nanos() as f64;
            record_ns += step_ns;
            let t = Instant::now();
            self.drop_in.end_frame()?;
            resolve_ns += t.elapsed().as_nanos() as f64;
        }
        let gpu_ns = self.wait_gpu_ns(submitted.unwrap_or_else(Instant::now))?;
        let t = Instant::now();
        let done = self.drop_in.collect()?;
        resolve_ns += t.elapsed().as_nanos() as f64;
        check_drop_in_frames(&done, n)?;
        black_box(done);
        self.check_errors()?;
        Ok(Measurement {
            gpu_ns,
            record_ns,
            resolve_ns,
        })
    }
}

impl Harness for WgpuBench {
    type Kind = Kind;

    fn run(&mut self, kind: Kind) -> Result<Measurement, BenchError> {
        WgpuBench::run(self, kind)
    }

    fn busy() -> BenchError {
        BenchError::Wgpu("the wgpu harness is already running".into())
    }
}

/// The wgpu, wgpu-profiler and gpu-counters-wgpu variants of `n`
/// dispatches, on the wgpu adapter named like `info` (see
/// [`WgpuBench::new`]), the notes on how they measure (fallbacks, skipped
/// variants) and the comparisons of gpu-counters-wgpu with the others.
/// With `work` false, the pass-per-dispatch rows only, each pass empty:
/// the samples-alone rows.
pub(crate) fn variants(info: &DeviceInfo, n: u32, work: bool) -> Result<Rows, BenchError> {
    let bench = WgpuBench::new(info, n, work)?;
    let notes = bench.notes();
    let kinds = bench.kinds.clone();
    let bench = Rc::new(RefCell::new(bench));
    let variants = kinds
        .into_iter()
        .map(|kind| {
            let (name, tool, placement, per, baseline) = kind.describe();
            Box::new(HarnessRow {
                bench: bench.clone(),
                kind,
                spec: VariantSpec {
                    name: name.into(),
                    tool,
                    placement,
                    samples: per * u64::from(n),
                    timestamps_written: per * u64::from(n),
                    baseline: baseline.map(Into::into),
                },
            }) as Box<dyn Variant>
        })
        .collect();
    Ok(Rows {
        variants,
        notes,
        comparisons: comparisons(),
    })
}
