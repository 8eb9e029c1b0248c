//! Vulkan's side of counter sample buffers and heaps: query pools, the
//! recording hooks into core's bookkeeping ([`SampleSet`]), and the GPU
//! resolve. The bookkeeping itself and the CPU resolve live in
//! `gpu_counters_core::bookkeeping`, shared by every backend.

use crate::buffer::{BufferRef, GpuBuffer, MemoryLocation};
use crate::command::Tracker;
use crate::query::QueryPool;
use crate::resolve::{ResolveParams, RESOLVE_WORKGROUP};
use crate::Device;
use ash::vk;
use gpu_counters_core::bookkeeping::{
    runs, QueryRead, SampleSet, SampleTable, SlotState, ABSENT, OCCLUSION, STILL_OPEN,
};
use gpu_counters_core::{
    CommonCounter, CommonCounterSet, Error, InvalidInput, ResolvedCounters, ResolvedTimestamps,
    Result, StorageMode,
};
use std::ops::{Deref, Range};
use std::sync::{Arc, Mutex};

/// The table of one sample buffer or heap, locked.
pub(crate) type Slots = SampleTable;

struct GpuResolveState {
    /// Where query results are copied for the shader: GPU-only, and ordered
    /// between resolves by the barriers each resolve records.
    scratch: GpuBuffer,
    /// The bookkeeping snapshots the shader reads, one per recorded resolve:
    /// the host writes a snapshot when the resolve is recorded, so two
    /// resolves in flight need two. A table no command buffer holds any more
    /// is reused.
    tables: Vec<GpuBuffer>,
}

pub(crate) struct Samples {
    /// The backend-neutral part: label, set, layout and bookkeeping.
    pub(crate) core: SampleSet,
    pub(crate) device: Device,
    pub(crate) main: QueryPool,
    pub(crate) occlusion: Option<QueryPool>,
    gpu: Mutex<Option<GpuResolveState>>,
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
                crate::device::mask(device.shared.caps.timestamp_valid_bits),
                what,
            )?,
            device: device.clone(),
            main,
            occlusion,
            gpu: Mutex::new(None),
        })
    }

    /// Checks that `index` may be written now by the recording `tracker`
    /// tracks (see [`SampleSet::check_write`]), and makes the recording hold
    /// these samples; returns whether the index needs an inline reset first.
    #[inline]
    pub(crate) fn prepare_write(
        self: &Arc<Self>,
        slots: &mut Slots,
        index: u32,
        in_render_pass: bool,
        tracker: &mut Tracker,
    ) -> Result<bool> {
        // A locked write of this recording into these samples: its claim
        // (whose clean indices this write may change) ends first.
        tracker.release_claim(self, slots);
        let dirty = self
            .core
            .check_write(slots, index, in_render_pass, tracker.ticket.id())?;
        if tracker.hold_samples(self) {
            slots.register(&tracker.ticket);
        }
        Ok(dirty)
    }

    /// Records the inline reset of `index` (outside any render pass). Until
    /// the GPU finished the command buffer of `tracker`, the index resolves
    /// as not ready (its old value may still be visible).
    pub(crate) fn record_reset(
        &self,
        slots: &mut Slots,
        cmd: vk::CommandBuffer,
        tracker: &Tracker,
        index: u32,
    ) {
        slots.note_reset(index, &tracker.ticket);
        let d = self.device.raw();
        // SAFETY: index < count (checked by prepare_write); the command buffer
        // is recording outside a render pass (callers guarantee), and the
        // query is not active (prepare_write refuses open ones).
        unsafe {
            d.cmd_reset_query_pool(cmd, self.main.raw, index, 1);
            if let Some(o) = &self.occlusion {
                d.cmd_reset_query_pool(cmd, o.raw, index, 1);
            }
        }
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
    /// for the error): [`CounterSampleBuffer::reset_counter_range`] and
    /// [`CounterHeap::invalidate_counter_range`].
    ///
    /// [`CounterSampleBuffer::reset_counter_range`]: crate::CounterSampleBuffer::reset_counter_range
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

    /// Records a GPU resolve of `range` into `dst` at `offset`: copies the
    /// query results with availability into scratch, then a compute shader
    /// writes Metal's layout with the error value for every sample that has no
    /// value. Must be recorded outside any pass.
    pub(crate) fn record_resolve_gpu(
        self: &Arc<Self>,
        tracker: &mut Tracker,
        cmd: vk::CommandBuffer,
        range: Range<u64>,
        dst: BufferRef,
        offset: u64,
    ) -> Result<()> {
        let (first, count) = self.check_range(&range)?;
        self.device
            .id()
            .check(dst.device_id, "destination buffer")?;
        if !offset.is_multiple_of(8) {
            return Err(InvalidInput::DestinationOffsetUnaligned {
                offset,
                alignment: 8,
            }
            .into());
        }
        let needed = count as u64 * self.set.result_size() as u64;
        let available = dst.size.saturating_sub(offset);
        if offset > dst.size || available < needed {
            return Err(InvalidInput::DestinationTooSmall {
                offset,
                needed,
                available,
            }
            .into());
        }
        if !dst.usage.contains(vk::BufferUsageFlags::STORAGE_BUFFER) {
            return Err(InvalidInput::DestinationUsage {
                usage: "STORAGE_BUFFER",
            }
            .into());
        }
        let pipeline = self.device.resolve_pipeline()?;
        let push = self.device.shared.push_descriptor.as_ref().ok_or_else(|| {
            Error::from(InvalidInput::Unsupported(
                "GPU resolve needs VK_KHR_push_descriptor, which this device lacks".into(),
            ))
        })?;
        let mut slots = self.lock()?;
        if let Some(i) = slots.first_open(first, count) {
            return Err(self.reuse(i, STILL_OPEN));
        }
        let (lo, hi) = self.span(&slots, first, count);
        let mut gpu = self
            .gpu
            .lock()
            .map_err(|_| Error::Internal("resolve state lock poisoned".into()))?;
        let main_stride = self.main.stride() as u64 * 8;
        let occ_base = main_stride * self.count as u64;
        if gpu.is_none() {
            let scratch_size = occ_base
                + if self.occlusion.is_some() {
                    16 * self.count as u64
                } else {
                    0
                };
            *gpu = Some(GpuResolveState {
                scratch: GpuBuffer::new(&self.device, scratch_size, MemoryLocation::DeviceLocal)?,
                tables: Vec::new(),
            });
        }
        let state = gpu
            .as_mut()
            .ok_or_else(|| Error::Internal("no resolve state".into()))?;
        let table = match state.tables.iter().position(|t| t.is_unshared()) {
            Some(t) => t,
            None => {
                state.tables.push(GpuBuffer::new(
                    &self.device,
                    16 * self.count as u64,
                    MemoryLocation::HostVisible,
                )?);
                state.tables.len() - 1
            }
        };
        let table = &state.tables[table];
        // The shader reads the bookkeeping of the span as it is now.
        let mut rows = Vec::with_capacity(((hi - lo) * 4) as usize);
        for i in lo as usize..hi as usize {
            rows.extend_from_slice(&[
                slots.state[i] as u32 | ((slots.occlusion[i] as u32) << 8),
                slots.link[i],
                slots.link_gen[i],
                slots.gen[i],
            ]);
        }
        table_buffer_write(table, lo as u64 * 16, &rows)?;
        let d = self.device.raw();
        let flags = vk::QueryResultFlags::TYPE_64 | vk::QueryResultFlags::WITH_AVAILABILITY;
        // SAFETY: every handle belongs to this device; ranges were checked
        // against the pools, scratch and destination sizes above; the command
        // buffer is recording outside any pass (encoders end theirs first).
        unsafe {
            // Order all earlier query writes (and earlier reads of scratch)
            // before the copy: without it the copy may see stale queries.
            barrier(
                d,
                cmd,
                vk::PipelineStageFlags2::ALL_COMMANDS,
                vk::AccessFlags2::MEMORY_READ | vk::AccessFlags2::MEMORY_WRITE,
                vk::PipelineStageFlags2::COPY,
                vk::AccessFlags2::TRANSFER_WRITE,
            );
            // Scratch starts as "unavailable" everywhere; then only recorded
            // queries are copied, with WAIT: without it some drivers (NVIDIA
            // 580) report availability 0 even after the barrier above, and
            // waiting on a query nothing writes would hang the GPU.
            let main_span = (hi - lo) as u64 * main_stride;
            d.cmd_fill_buffer(
                cmd,
                state.scratch.raw(),
                lo as u64 * main_stride,
                main_span,
                0,
            );
            if self.occlusion.is_some() {
                d.cmd_fill_buffer(
                    cmd,
                    state.scratch.raw(),
                    occ_base + lo as u64 * 16,
                    (hi - lo) as u64 * 16,
                    0,
                );
            }
            barrier(
                d,
                cmd,
                vk::PipelineStageFlags2::CLEAR,
                vk::AccessFlags2::TRANSFER_WRITE,
                vk::PipelineStageFlags2::COPY,
                vk::AccessFlags2::TRANSFER_WRITE,
            );
            let wait = flags | vk::QueryResultFlags::WAIT;
            for (first_run, count_run) in
                runs(lo, hi, |i| slots.state[i as usize] == SlotState::Recorded)
            {
                d.cmd_copy_query_pool_results(
                    cmd,
                    self.main.raw,
                    first_run,
                    count_run,
                    state.scratch.raw(),
                    first_run as u64 * main_stride,
                    main_stride,
                    wait,
                );
            }
            if let Some(o) = &self.occlusion {
                let with_occlusion = |i: u32| {
                    slots.state[i as usize] == SlotState::Recorded && slots.occlusion[i as usize]
                };
                for (first_run, count_run) in runs(lo, hi, with_occlusion) {
                    d.cmd_copy_query_pool_results(
                        cmd,
                        o.raw,
                        first_run,
                        count_run,
                        state.scratch.raw(),
                        occ_base + first_run as u64 * 16,
                        16,
                        wait,
                    );
                }
            }
            barrier(
                d,
                cmd,
                vk::PipelineStageFlags2::COPY | vk::PipelineStageFlags2::ALL_COMMANDS,
                vk::AccessFlags2::TRANSFER_WRITE | vk::AccessFlags2::MEMORY_WRITE,
                vk::PipelineStageFlags2::COMPUTE_SHADER,
                vk::AccessFlags2::SHADER_STORAGE_READ | vk::AccessFlags2::SHADER_STORAGE_WRITE,
            );
            let infos = [
                [vk::DescriptorBufferInfo::default()
                    .buffer(state.scratch.raw())
                    .range(vk::WHOLE_SIZE)],
                [vk::DescriptorBufferInfo::default()
                    .buffer(table.raw())
                    .range(vk::WHOLE_SIZE)],
                [vk::DescriptorBufferInfo::default()
                    .buffer(dst.raw)
                    .range(vk::WHOLE_SIZE)],
            ];
            let writes: Vec<_> = infos
                .iter()
                .enumerate()
                .map(|(b, info)| {
                    vk::WriteDescriptorSet::default()
                        .dst_binding(b as u32)
                        .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                        .buffer_info(info)
                })
                .collect();
            d.cmd_bind_pipeline(cmd, vk::PipelineBindPoint::COMPUTE, pipeline.pipeline);
            push.cmd_push_descriptor_set(
                cmd,
                vk::PipelineBindPoint::COMPUTE,
                pipeline.layout,
                0,
                &writes,
            );
            let mut map = [0u32; 2];
            for (f, &pos) in self.field_map.iter().enumerate() {
                map[f / 4] |= (pos as u32) << ((f % 4) * 8);
            }
            let params = ResolveParams {
                first,
                count,
                dst_word: (offset / 4) as u32,
                kind: if self.set == CommonCounterSet::Timestamp {
                    0
                } else {
                    1
                },
                stride_words: (main_stride / 4) as u32,
                occ_base_word: (occ_base / 4) as u32,
                mask_lo: self.valid_mask as u32,
                mask_hi: (self.valid_mask >> 32) as u32,
                map_lo: map[0],
                map_hi: map[1],
                total: self.count,
                has_occlusion: self.occlusion.is_some() as u32,
            };
            d.cmd_push_constants(
                cmd,
                pipeline.layout,
                vk::ShaderStageFlags::COMPUTE,
                0,
                bytemuck::bytes_of(&params),
            );
            d.cmd_dispatch(cmd, count.div_ceil(RESOLVE_WORKGROUP), 1, 1);
            // Make the results visible to whatever reads the destination
            // next: later commands, or the host after the fence.
            barrier(
                d,
                cmd,
                vk::PipelineStageFlags2::COMPUTE_SHADER,
                vk::AccessFlags2::SHADER_STORAGE_WRITE,
                vk::PipelineStageFlags2::ALL_COMMANDS | vk::PipelineStageFlags2::HOST,
                vk::AccessFlags2::MEMORY_READ
                    | vk::AccessFlags2::MEMORY_WRITE
                    | vk::AccessFlags2::HOST_READ,
            );
        }
        // The command buffer keeps everything the resolve uses alive, and no
        // host reset may happen before it finished.
        if tracker.hold_samples(self) {
            slots.register(&tracker.ticket);
        }
        tracker.hold_buffer(table.shared());
        if let Some(b) = dst.keep {
            tracker.hold_buffer(b);
        }
        slots.add_gpu_resolve(&tracker.ticket);
        Ok(())
    }
}

/// Writes a bookkeeping snapshot into a GPU-resolve table.
fn table_buffer_write(table: &GpuBuffer, offset: u64, rows: &[u32]) -> Result<()> {
    table.write(offset, bytemuck::cast_slice(rows))
}

/// Records one global memory barrier (synchronization2).
///
/// # Safety
/// `cmd` must be a command buffer of `d` in the recording state.
pub(crate) unsafe fn barrier(
    d: &ash::Device,
    cmd: vk::CommandBuffer,
    src_stage: vk::PipelineStageFlags2,
    src_access: vk::AccessFlags2,
    dst_stage: vk::PipelineStageFlags2,
    dst_access: vk::AccessFlags2,
) {
    let barriers = [vk::MemoryBarrier2::default()
        .src_stage_mask(src_stage)
        .src_access_mask(src_access)
        .dst_stage_mask(dst_stage)
        .dst_access_mask(dst_access)];
    let dep = vk::DependencyInfo::default().memory_barriers(&barriers);
    // SAFETY: forwarded from the caller.
    unsafe { d.cmd_pipeline_barrier2(cmd, &dep) };
}

fn field_index(counter: CommonCounter) -> usize {
    CommonCounter::STATISTICS
        .iter()
        .position(|&c| c == counter)
        .unwrap_or(0)
}
