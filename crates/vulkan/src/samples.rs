//! What counter sample buffers and counter heaps share: query pools, the
//! per-sample bookkeeping, and the CPU and GPU resolves.
//!
//! Each sample index has a state (never written, recorded, invalidated, or an
//! alias of another index for coalesced relaxed timestamps) and a generation
//! that grows each time the index is recorded again.
//!
//! Statistic samples are a chain per encoder: sampling index `i` ends the
//! pipeline-statistics query of the previous sample `p` and begins query `i`,
//! so query `p` holds what was counted between the two. Sample `i` resolves to
//! the sum of the queries before it in its chain: 0 at the chain's start, and
//! end minus start of two samples is exactly what the GPU counted between them.

use crate::buffer::{BufferRef, GpuBuffer, MemoryLocation};
use crate::query::QueryPool;
use crate::resolve::{ResolveParams, RESOLVE_WORKGROUP};
use crate::Device;
use ash::vk;
use gpu_counters_core::{
    CommonCounter, CommonCounterSet, Error, InvalidInput, ResolvedCounters, Result, SampleStatus,
    StorageMode, COUNTER_ERROR_VALUE,
};
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// Set once the GPU finished a command buffer. A sample re-recorded after an
/// inline reset keeps its command buffer's ticket: until the ticket is set the
/// old value may still be visible, so the sample resolves as not ready.
pub(crate) type Ticket = Arc<AtomicBool>;

pub(crate) const NONE: u32 = u32::MAX;
/// Field map entry: the device does not count this field.
pub(crate) const ABSENT: u8 = 0xFF;
/// Field map entry: the field comes from the occlusion query.
pub(crate) const OCCLUSION: u8 = 0xFE;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub(crate) enum SlotState {
    Fresh = 0,
    Recorded = 1,
    Invalidated = 2,
    Alias = 3,
}

pub(crate) struct Slots {
    pub(crate) state: Vec<SlotState>,
    pub(crate) link: Vec<u32>,
    pub(crate) link_gen: Vec<u32>,
    pub(crate) gen: Vec<u32>,
    pub(crate) occlusion: Vec<bool>,
    pub(crate) ticket: Vec<Option<Ticket>>,
}

impl Slots {
    /// Whether the GPU may still show an older value for `i`.
    pub(crate) fn stale(&self, i: usize) -> bool {
        self.ticket[i]
            .as_ref()
            .is_some_and(|t| !t.load(Ordering::Acquire))
    }
}

struct GpuResolveState {
    scratch: GpuBuffer,
    table: GpuBuffer,
}

pub(crate) struct Samples {
    pub(crate) device: Device,
    pub(crate) label: String,
    pub(crate) set: CommonCounterSet,
    pub(crate) storage: StorageMode,
    pub(crate) count: u32,
    pub(crate) main: QueryPool,
    pub(crate) occlusion: Option<QueryPool>,
    /// For each field of `CounterResultStatistic`: its position among the
    /// statistic query's values, [`OCCLUSION`] or [`ABSENT`].
    pub(crate) field_map: [u8; 8],
    pub(crate) slots: Mutex<Slots>,
    gpu: Mutex<Option<GpuResolveState>>,
    pub(crate) valid_mask: u64,
    /// What an index is called in messages: `sample` or `heap entry`.
    pub(crate) what: &'static str,
}

/// Vulkan's pipeline statistics in bit order, with the Metal field each feeds.
const VK_STATISTICS: [(vk::QueryPipelineStatisticFlags, CommonCounter); 7] = [
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
        let n = count as usize;
        Ok(Self {
            device: device.clone(),
            label,
            set,
            storage,
            count,
            main,
            occlusion,
            field_map,
            slots: Mutex::new(Slots {
                state: vec![SlotState::Fresh; n],
                link: vec![NONE; n],
                link_gen: vec![0; n],
                gen: vec![0; n],
                occlusion: vec![false; n],
                ticket: vec![None; n],
            }),
            gpu: Mutex::new(None),
            valid_mask: crate::device::mask(device.shared.caps.timestamp_valid_bits),
            what,
        })
    }

    pub(crate) fn lock(&self) -> Result<std::sync::MutexGuard<'_, Slots>> {
        self.slots
            .lock()
            .map_err(|_| Error::Internal(format!("`{}` state lock poisoned", self.label)))
    }

    pub(crate) fn check_index(&self, index: u32) -> Result<()> {
        if index >= self.count {
            return Err(InvalidInput::IndexOutOfRange {
                what: self.what,
                label: self.label.clone(),
                index,
                count: self.count,
            }
            .into());
        }
        Ok(())
    }

    pub(crate) fn check_range(&self, range: &Range<u64>) -> Result<(u32, u32)> {
        if range.start >= range.end || range.end > self.count as u64 {
            return Err(InvalidInput::RangeOutOfBounds {
                label: self.label.clone(),
                start: range.start,
                end: range.end,
                count: self.count,
            }
            .into());
        }
        Ok((range.start as u32, (range.end - range.start) as u32))
    }

    /// Checks that `index` may be written now; returns whether it needs an
    /// inline reset first (it was recorded before and not reset since).
    pub(crate) fn prepare_write(
        &self,
        slots: &Slots,
        index: u32,
        in_render_pass: bool,
    ) -> Result<bool> {
        self.check_index(index)?;
        match slots.state[index as usize] {
            SlotState::Fresh | SlotState::Invalidated => Ok(false),
            SlotState::Recorded | SlotState::Alias if in_render_pass => {
                Err(InvalidInput::SampleIndexReuse {
                    label: self.label.clone(),
                    index,
                    reason: "was already written since the last reset, and Vulkan cannot reset it inside a render pass; reset the buffer or use another index",
                }
                .into())
            }
            _ => Ok(true),
        }
    }

    /// Records the inline reset of `index` (outside any render pass). Until
    /// `ticket` is set, the index resolves as not ready.
    pub(crate) fn record_reset(
        &self,
        slots: &mut Slots,
        cmd: vk::CommandBuffer,
        ticket: &Ticket,
        index: u32,
    ) {
        slots.ticket[index as usize] = Some(ticket.clone());
        let d = self.device.raw();
        // SAFETY: index < count (checked by prepare_write); the command buffer
        // is recording outside a render pass (callers guarantee).
        unsafe {
            d.cmd_reset_query_pool(cmd, self.main.raw, index, 1);
            if let Some(o) = &self.occlusion {
                d.cmd_reset_query_pool(cmd, o.raw, index, 1);
            }
        }
    }

    pub(crate) fn mark_recorded(slots: &mut Slots, index: u32, link: u32, occlusion: bool) {
        let i = index as usize;
        slots.gen[i] = slots.gen[i].wrapping_add(1);
        slots.state[i] = SlotState::Recorded;
        slots.link[i] = link;
        slots.link_gen[i] = if link == NONE {
            0
        } else {
            slots.gen[link as usize]
        };
        slots.occlusion[i] = occlusion;
    }

    pub(crate) fn mark_alias(slots: &mut Slots, index: u32, target: u32) {
        let i = index as usize;
        slots.gen[i] = slots.gen[i].wrapping_add(1);
        slots.state[i] = SlotState::Alias;
        slots.link[i] = target;
        slots.link_gen[i] = slots.gen[target as usize];
        slots.occlusion[i] = false;
    }

    /// Host reset of every index; fails while a recorded index is still
    /// pending on the GPU.
    pub(crate) fn reset(&self) -> Result<()> {
        let mut slots = self.lock()?;
        let (_, available) = self.main.read(0, self.count)?;
        if let Some(i) = (0..self.count as usize)
            .find(|&i| slots.state[i] == SlotState::Recorded && !available[i])
        {
            return Err(InvalidInput::SampleIndexReuse {
                label: self.label.clone(),
                index: i as u32,
                reason: "is still pending on the GPU: wait for its submission before reset",
            }
            .into());
        }
        self.host_reset_locked(&mut slots, 0, self.count, SlotState::Fresh);
        Ok(())
    }

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
        for i in first as usize..(first + count) as usize {
            slots.state[i] = state;
            slots.gen[i] = slots.gen[i].wrapping_add(1);
            slots.link[i] = NONE;
            slots.occlusion[i] = false;
            slots.ticket[i] = None;
        }
    }

    /// The indices a resolve of `first..first+count` reads: the range and every
    /// index its chains or aliases lead to, as one span.
    fn span(&self, slots: &Slots, first: u32, count: u32) -> (u32, u32) {
        let (mut lo, mut hi) = (first, first + count);
        for s in first..first + count {
            let mut cur = slots.link[s as usize];
            let mut steps = 0;
            while cur != NONE && steps <= self.count {
                lo = lo.min(cur);
                hi = hi.max(cur + 1);
                if slots.state[s as usize] == SlotState::Alias {
                    break;
                }
                cur = slots.link[cur as usize];
                steps += 1;
            }
        }
        (lo, hi)
    }

    /// Resolves on the CPU into Metal's layout.
    pub(crate) fn resolve_cpu(&self, range: Range<u64>) -> Result<ResolvedCounters> {
        if self.storage == StorageMode::Private {
            return Err(InvalidInput::CpuResolveOfPrivateBuffer {
                label: self.label.clone(),
            }
            .into());
        }
        let (first, count) = self.check_range(&range)?;
        let slots = self.lock()?;
        let (lo, hi) = self.span(&slots, first, count);
        let (values, available) = self.main.read(lo, hi - lo)?;
        let occlusion = match &self.occlusion {
            Some(o) => Some(o.read(lo, hi - lo)?),
            None => None,
        };
        let per = self.main.values as usize;
        let at = |s: u32| (s - lo) as usize;
        let fields = self.set.result_size() / 8;
        let mut bytes = Vec::with_capacity(count as usize * fields * 8);
        let mut status = Vec::with_capacity(count as usize);
        let mut out = vec![0u64; fields];
        for s in first..first + count {
            let i = s as usize;
            let st = match (self.set, slots.state[i]) {
                (_, SlotState::Fresh) => SampleStatus::NotWritten,
                (_, _) if slots.stale(i) => SampleStatus::NotReady,
                (_, SlotState::Invalidated) => SampleStatus::Invalidated,
                (CommonCounterSet::Timestamp, state) => {
                    let (src, ok) = if state == SlotState::Alias {
                        let t = slots.link[i];
                        let same_gen = slots.gen[t as usize] == slots.link_gen[i];
                        (
                            t,
                            same_gen && slots.state[t as usize] == SlotState::Recorded,
                        )
                    } else {
                        (s, true)
                    };
                    if !ok {
                        SampleStatus::Error
                    } else if slots.stale(src as usize) {
                        SampleStatus::NotReady
                    } else if available[at(src)] {
                        out[0] = values[at(src)] & self.valid_mask;
                        SampleStatus::Written
                    } else {
                        SampleStatus::NotReady
                    }
                }
                (_, _) => self.sum_chain(
                    &slots,
                    s,
                    lo,
                    &values,
                    &available,
                    occlusion.as_ref(),
                    per,
                    &mut out,
                ),
            };
            match st {
                SampleStatus::Written => {}
                SampleStatus::Invalidated => out.iter_mut().for_each(|v| *v = 0),
                _ => out.iter_mut().for_each(|v| *v = COUNTER_ERROR_VALUE),
            }
            bytes.extend(out.iter().flat_map(|v| v.to_ne_bytes()));
            status.push(st);
        }
        ResolvedCounters::new(self.set, first, bytes, status)
    }

    #[allow(clippy::too_many_arguments)]
    fn sum_chain(
        &self,
        slots: &Slots,
        s: u32,
        lo: u32,
        values: &[u64],
        available: &[bool],
        occlusion: Option<&(Vec<u64>, Vec<bool>)>,
        per: usize,
        out: &mut [u64],
    ) -> SampleStatus {
        let at = |s: u32| (s - lo) as usize;
        if slots.state[s as usize] != SlotState::Recorded {
            return SampleStatus::Error;
        }
        if !available[at(s)] {
            return SampleStatus::NotReady;
        }
        out.iter_mut().for_each(|v| *v = 0);
        let mut cur = slots.link[s as usize];
        let mut cur_gen = slots.link_gen[s as usize];
        let mut steps = 0;
        while cur != NONE {
            let c = cur as usize;
            if steps > self.count
                || slots.gen[c] != cur_gen
                || slots.state[c] != SlotState::Recorded
            {
                // The chain was broken: an earlier sample was re-recorded.
                return SampleStatus::Error;
            }
            if !available[at(cur)] || slots.stale(c) {
                return SampleStatus::NotReady;
            }
            for (f, &pos) in self.field_map.iter().enumerate() {
                match pos {
                    ABSENT => {}
                    OCCLUSION => {
                        if slots.occlusion[c] {
                            if let Some((ov, oa)) = occlusion {
                                if !oa[at(cur)] {
                                    return SampleStatus::NotReady;
                                }
                                out[f] = out[f].wrapping_add(ov[at(cur)]);
                            }
                        }
                    }
                    p => out[f] = out[f].wrapping_add(values[at(cur) * per + p as usize]),
                }
            }
            cur_gen = slots.link_gen[c];
            cur = slots.link[c];
            steps += 1;
        }
        for (f, &pos) in self.field_map.iter().enumerate() {
            if pos == ABSENT {
                out[f] = COUNTER_ERROR_VALUE;
            }
        }
        SampleStatus::Written
    }

    /// Records a GPU resolve of `range` into `dst` at `offset`: copies the
    /// query results with availability into scratch, then a compute shader
    /// writes Metal's layout with the error value for every sample that has no
    /// value. Must be recorded outside any pass.
    pub(crate) fn record_resolve_gpu(
        &self,
        cmd: vk::CommandBuffer,
        range: Range<u64>,
        dst: BufferRef,
        offset: u64,
    ) -> Result<()> {
        let (first, count) = self.check_range(&range)?;
        if dst.device_id != self.device.id() {
            return Err(InvalidInput::ForeignObject {
                what: "destination buffer",
            }
            .into());
        }
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
        let slots = self.lock()?;
        let (lo, hi) = self.span(&slots, first, count);
        let mut gpu = self
            .gpu
            .lock()
            .map_err(|_| Error::Internal("resolve state lock poisoned".into()))?;
        let main_stride = (self.main.values as u64 + 1) * 8;
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
                table: GpuBuffer::new(
                    &self.device,
                    16 * self.count as u64,
                    MemoryLocation::HostVisible,
                )?,
            });
        }
        let state = gpu
            .as_ref()
            .ok_or_else(|| Error::Internal("no resolve state".into()))?;
        // The shader reads the bookkeeping of the span at execution time.
        let mut table = Vec::with_capacity(((hi - lo) * 4) as usize);
        for i in lo as usize..hi as usize {
            table.extend_from_slice(&[
                slots.state[i] as u32 | ((slots.occlusion[i] as u32) << 8),
                slots.link[i],
                slots.link_gen[i],
                slots.gen[i],
            ]);
        }
        state
            .table
            .write(lo as u64 * 16, bytemuck::cast_slice(&table))?;
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
                    .buffer(state.table.raw())
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
        Ok(())
    }
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

/// Maximal runs `(first, count)` of indices in `lo..hi` for which `keep` holds.
fn runs(lo: u32, hi: u32, keep: impl Fn(u32) -> bool) -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    let mut i = lo;
    while i < hi {
        if !keep(i) {
            i += 1;
            continue;
        }
        let start = i;
        while i < hi && keep(i) {
            i += 1;
        }
        out.push((start, i - start));
    }
    out
}

fn field_index(counter: CommonCounter) -> usize {
    CommonCounter::STATISTICS
        .iter()
        .position(|&c| c == counter)
        .unwrap_or(0)
}
