//! The GPU resolve of a sample buffer or heap (Metal's blit
//! `resolveCounters`, Metal 4's `resolveCounterHeap`): query results copied
//! into scratch, then a compute shader writes Metal's layout.

use crate::buffer::{BufferRef, GpuBuffer, MemoryLocation};
use crate::recording::Tracker;
use crate::resolve::{ResolveParams, RESOLVE_WORKGROUP};
use crate::samples::{GpuResolveState, Samples};
use crate::util::barrier;
use ash::vk;
use gpu_counters_hal::bookkeeping::{runs, QueryRead, SlotState, STILL_OPEN};
use gpu_counters_hal::{CommonCounterSet, Error, InvalidInput, Result};
use std::ops::Range;
use std::sync::Arc;

/// Why a GPU resolve inside a pass cannot read an index.
pub(crate) const WRITTEN_AFTER_RESOLVE: &str = "is written when the open encoder ends, after this resolve, which would wait on the GPU for it: resolve it after end_encoding";

impl Samples {
    /// Records a GPU resolve of `range` into `dst` at `offset`: copies the
    /// query results with availability into scratch, then a compute shader
    /// writes Metal's layout with the error value for every sample that has no
    /// value. Must be recorded outside any render pass instance and
    /// statistic query (a blit pass's own chain counts its compute work).
    ///
    /// `pending` are indices of this set whose writes the open pass records
    /// when it ends, after this resolve: refused where the resolve would
    /// read them (it would wait on the GPU for a write recorded after it).
    #[allow(clippy::too_many_arguments)] // the recording context, the range and its destination, the pass's pending writes
    pub(crate) fn record_resolve_gpu(
        self: &Arc<Self>,
        tracker: &mut Tracker,
        cmd: vk::CommandBuffer,
        range: Range<u64>,
        dst: BufferRef,
        offset: u64,
        pending: &[u32],
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
        if let Some(i) = pending.iter().copied().filter(|&i| lo <= i && i < hi).min() {
            return Err(self.reuse(i, WRITTEN_AFTER_RESOLVE));
        }
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
