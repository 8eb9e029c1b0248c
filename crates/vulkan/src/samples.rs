//! Vulkan's side of counter sample buffers and heaps: the query pools behind
//! hal's bookkeeping ([`SampleSet`]), host resets and the CPU resolve. The
//! bookkeeping itself lives in `gpu_counters_hal::bookkeeping`, shared by
//! every backend; what a recording checks before a write is in
//! `recording`, and the GPU resolve in `gpu_resolve`.

use crate::buffer::GpuBuffer;
use crate::device::Device;
use crate::query::QueryPool;
use ash::vk;
use gpu_counters_hal::bookkeeping::{
    QueryRead, SampleSet, SampleTable, SlotState, ABSENT, OCCLUSION,
};
use gpu_counters_hal::{
    CommonCounter, CommonCounterSet, Error, InvalidInput, ResolvedCounters, ResolvedTimestamps,
    Result, StorageMode,
};
use std::ops::{Deref, Range};
use std::sync::Mutex;

/// The table of one sample buffer or heap, locked.
pub(crate) type Slots = SampleTable;

pub(crate) struct GpuResolveState {
    /// Where query results are copied for the shader: GPU-only, and ordered
    /// between resolves by the barriers each resolve records.
    pub(crate) scratch: GpuBuffer,
    /// The bookkeeping snapshots the shader reads, one per recorded resolve:
    /// the host writes a snapshot when the resolve is recorded, so two
    /// resolves in flight need two. A table no command buffer holds any more
    /// is reused.
    pub(crate) tables: Vec<GpuBuffer>,
}

pub(crate) struct Samples {
    /// The backend-neutral part: label, set, layout and bookkeeping.
    pub(crate) core: SampleSet,
    pub(crate) device: Device,
    pub(crate) main: QueryPool,
    pub(crate) occlusion: Option<QueryPool>,
    pub(crate) gpu: Mutex<Option<GpuResolveState>>,
}

impl Deref for Samples {
    type Target = SampleSet;

    fn deref(&self) -> &SampleSet {
        &self.core
    }
}

/// Vulkan's pipeline statistics gpu-counters reads, in bit order, with the
/// Metal field each feeds (a query of these flags writes its values in
/// this order).
pub const VK_STATISTICS: [(vk::QueryPipelineStatisticFlags, CommonCounter); 7] = [
    (
        vk::QueryPipelineStatisticFlags::VERTEX_SHADER_INVOCATIONS,
        CommonCounter::VertexInvocations,
    ),
    (
        vk::QueryPipelineStatisticFlags::CLIPPING_INVOCATIONS,
        CommonCounter::ClipperInvocations,
    ),
    (
        vk::QueryPipelineStatisticFlags::CLIPPING_PRIMITIVES,
        CommonCounter::ClipperPrimitivesOut,
    ),
    (
        vk::QueryPipelineStatisticFlags::FRAGMENT_SHADER_INVOCATIONS,
        CommonCounter::FragmentInvocations,
    ),
    (
        vk::QueryPipelineStatisticFlags::TESSELLATION_CONTROL_SHADER_PATCHES,
        CommonCounter::TessellationInputPatches,
    ),
    (
        vk::QueryPipelineStatisticFlags::TESSELLATION_EVALUATION_SHADER_INVOCATIONS,
        CommonCounter::PostTessellationVertexInvocations,
    ),
    (
        vk::QueryPipelineStatisticFlags::COMPUTE_SHADER_INVOCATIONS,
        CommonCounter::ComputeKernelInvocations,
    ),
];

impl Samples {
    pub(crate) fn new(
        device: &Device,
        set: CommonCounterSet,
        label: String,
        storage: StorageMode,
        count: u32,
        what: &'static str,
    ) -> Result<Self> {
        let info = device.info();
        let counters = info
            .counter_set(set)
            .ok_or_else(|| {
                Error::from(InvalidInput::UnsupportedCounterSet {
                    set,
                    device: info.name.clone(),
                })
            })?
            .counters
            .clone();
        let mut field_map = [ABSENT; 8];
        let (main, occlusion) = match set {
            CommonCounterSet::Timestamp => (
                QueryPool::new(device, vk::QueryType::TIMESTAMP, count, None)?,
                None,
            ),
            CommonCounterSet::Statistic => {
                // Vulkan writes enabled statistics in bit order; VK_STATISTICS
                // is in bit order, so positions follow the enabled ones.
                let mut flags = vk::QueryPipelineStatisticFlags::empty();
                let mut position = 0u8;
                for (flag, counter) in VK_STATISTICS {
                    if counters.contains(&counter) {
                        flags |= flag;
                        field_map[field_index(counter)] = position;
                        position += 1;
                    }
                }
                let occlusion = if counters.contains(&CommonCounter::FragmentsPassed) {
                    field_map[field_index(CommonCounter::FragmentsPassed)] = OCCLUSION;
                    Some(QueryPool::new(
                        device,
                        vk::QueryType::OCCLUSION,
                        count,
                        None,
                    )?)
                } else {
                    None
                };
                (
                    QueryPool::new(
                        device,
                        vk::QueryType::PIPELINE_STATISTICS,
                        count,
                        Some(flags),
                    )?,
                    occlusion,
                )
            }
            CommonCounterSet::StageUtilization => {
                return Err(InvalidInput::UnsupportedCounterSet {
                    set,
                    device: info.name.clone(),
                }
                .into())
            }
        };
        Ok(Self {
            core: SampleSet::new(
                label,
                set,
                storage,
                count,
                field_map,
                crate::util::mask(device.shared.caps.timestamp_valid_bits),
                what,
            )?,
            device: device.clone(),
            main,
            occlusion,
            gpu: Mutex::new(None),
        })
    }

    /// Host reset of every index; fails while a recorded index is still
    /// pending on the GPU.
    pub(crate) fn reset(&self) -> Result<()> {
        let mut slots = self.lock()?;
        self.check_host_reset(&mut slots, 0, self.count, "reset")?;
        self.host_reset_locked(&mut slots, 0, self.count, SlotState::Fresh);
        Ok(())
    }

    /// Fails unless `first..first+count` may be reset on the host now. An
    /// index whose command buffer was submitted and not seen finished fails
    /// at once, before the driver is asked about the rest: some drivers'
    /// query reads (lavapipe's) wait for the device to go idle, and a reset
    /// must not wait for the GPU.
    pub(crate) fn check_host_reset(
        &self,
        slots: &mut Slots,
        first: u32,
        count: u32,
        what: &'static str,
    ) -> Result<()> {
        self.core.check_not_submitted(slots, first, count)?;
        self.core
            .check_host_reset(slots, &self.main, first, count, what)
    }

    /// Resets `range` on the host to `state` once it may be (`what` says why,
    /// for the error): [`CounterSampleBuffer::reset_range`] and
    /// [`CounterHeap::invalidate_counter_range`].
    ///
    /// [`CounterSampleBuffer::reset_range`]: crate::CounterSampleBuffer::reset_range
    /// [`CounterHeap::invalidate_counter_range`]: crate::CounterHeap::invalidate_counter_range
    pub(crate) fn host_reset_range(
        &self,
        range: &Range<u64>,
        what: &'static str,
        state: SlotState,
    ) -> Result<()> {
        let (first, count) = self.check_range(range)?;
        let mut slots = self.lock()?;
        self.check_host_reset(&mut slots, first, count, what)?;
        self.host_reset_locked(&mut slots, first, count, state);
        Ok(())
    }

    /// Resets `first..first+count` on the host: the queries and their
    /// bookkeeping. Callers checked [`Samples::check_host_reset`].
    pub(crate) fn host_reset_locked(
        &self,
        slots: &mut Slots,
        first: u32,
        count: u32,
        state: SlotState,
    ) {
        self.main.host_reset(first, count);
        if let Some(o) = &self.occlusion {
            o.host_reset(first, count);
        }
        self.core.host_reset_table(slots, first, count, state);
    }

    /// Resolves on the CPU into Metal's layout.
    pub(crate) fn resolve_cpu(&self, range: Range<u64>) -> Result<ResolvedCounters> {
        self.core.resolve_cpu(
            range,
            &self.main,
            self.occlusion.as_ref().map(|o| o as &dyn QueryRead),
        )
    }

    /// [`Samples::resolve_cpu`] into `out`, reusing its memory.
    pub(crate) fn resolve_cpu_into(
        &self,
        range: Range<u64>,
        out: &mut ResolvedCounters,
    ) -> Result<()> {
        self.core.resolve_cpu_into(
            range,
            &self.main,
            self.occlusion.as_ref().map(|o| o as &dyn QueryRead),
            out,
        )
    }

    /// The timestamp resolve of `range` for a caller that reads each sample
    /// once (see `SampleSet::resolve_timestamps_into`).
    pub(crate) fn resolve_timestamps_into(
        &self,
        range: Range<u64>,
        out: &mut ResolvedTimestamps,
    ) -> Result<()> {
        self.core.resolve_timestamps_into(range, &self.main, out)
    }
}

fn field_index(counter: CommonCounter) -> usize {
    CommonCounter::STATISTICS
        .iter()
        .position(|&c| c == counter)
        .unwrap_or(0)
}
