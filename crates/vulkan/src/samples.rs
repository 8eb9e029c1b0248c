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
use crate::command::Tracker;
use crate::query::QueryPool;
use crate::resolve::{ResolveParams, RESOLVE_WORKGROUP};
use crate::ticket::{Phase, Ticket};
use crate::Device;
use ash::vk;
use gpu_counters_core::{
    CommonCounter, CommonCounterSet, Error, InvalidInput, ResolvedCounters, Result, SampleStatus,
    StorageMode, COUNTER_ERROR_VALUE,
};
use std::mem::MaybeUninit;
use std::ops::Range;
use std::sync::{Arc, Mutex, OnceLock};

pub(crate) const NONE: u32 = u32::MAX;

/// Why an index cannot be written or reset now.
pub(crate) const RECORDED_ELSEWHERE: &str = "was recorded in another command buffer that has not been submitted yet: submit (or drop) that one first, or use another index";
pub(crate) const STILL_OPEN: &str =
    "is still being counted (its statistic query is open): sample another index";
const NOT_SUBMITTED: &str =
    "is recorded in a command buffer that has not been submitted yet: submit or drop it first";
const PENDING: &str = "is still pending on the GPU: wait for its submission first";
/// Field map entry: the device does not count this field.
pub(crate) const ABSENT: u8 = 0xFF;
/// Field map entry: the field comes from the occlusion query.
pub(crate) const OCCLUSION: u8 = 0xFE;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
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
    /// The id of the ticket of the command buffer that last recorded a write
    /// or a reset of the index; 0 after a host reset.
    pub(crate) rec: Vec<u64>,
    /// Whether the index's query may hold a value, so that writing it again
    /// needs a reset first: set by every recorded write, cleared by resets.
    pub(crate) dirty: Vec<bool>,
    /// Whether the index's statistic query was begun and not yet ended.
    pub(crate) open: Vec<bool>,
    /// For statistics: the chain the sample belongs to (see the module
    /// docs); samples of different chains are not comparable.
    pub(crate) chain: Vec<u64>,
    /// Tickets of command buffers that recorded into these samples and were
    /// still recording when they did (pruned of the others as it grows).
    live: Vec<Ticket>,
    /// Tickets of command buffers with a GPU resolve of these samples: no
    /// host reset may happen before they finish, or the resolve, which waits
    /// on the GPU for the queries it was recorded against, would wait for
    /// ever.
    gpu_resolves: Vec<Ticket>,
    /// The ticket of an inline reset that the GPU may not have executed yet
    /// (the old value may still be visible until then). Set through
    /// [`Slots::set_ticket`] and [`Slots::clear_ticket`] only, so that
    /// `tickets` stays right.
    ticket: Vec<Option<Ticket>>,
    /// How many entries of `ticket` are `Some`: while 0, no index can be
    /// stale and resolves skip the ticket checks.
    tickets: usize,
    /// Whether an index may be an alias (set by `mark_alias`, cleared by a
    /// host reset of every index): while not, timestamp indices link nowhere.
    aliases: bool,
    /// Reused `vkGetQueryPoolResults` destinations of the main and the
    /// occlusion pool (see `QueryPool::read_into`).
    scratch: Vec<u64>,
    occlusion_scratch: Vec<u64>,
}

impl Slots {
    /// Whether the GPU may still show an older value for `i`.
    pub(crate) fn stale(&self, i: usize) -> bool {
        self.tickets != 0 && self.ticket[i].as_ref().is_some_and(|t| !t.is_done())
    }

    /// Whether ticket `id` belongs to a command buffer that recorded into
    /// these samples and is still being recorded.
    fn still_recording(&self, id: u64) -> bool {
        self.live
            .iter()
            .any(|t| t.id() == id && t.phase() == Phase::Recording)
    }

    /// Notes that `ticket`'s command buffer records into these samples.
    fn register(&mut self, ticket: &Ticket) {
        self.live.retain(|t| t.phase() == Phase::Recording);
        self.live.push(ticket.clone());
    }

    /// A GPU resolve of these samples that has not finished, if any.
    fn pending_gpu_resolve(&mut self) -> bool {
        self.gpu_resolves
            .retain(|t| !matches!(t.phase(), Phase::Done | Phase::Abandoned));
        !self.gpu_resolves.is_empty()
    }

    /// Forgets what the abandoned command buffer of ticket `id` recorded: its
    /// commands never ran, so its samples were never written. Their queries
    /// stay dirty (an older value may be there), so the next write resets
    /// them first.
    pub(crate) fn abandon(&mut self, id: u64) {
        for i in 0..self.rec.len() {
            if self.rec[i] != id {
                continue;
            }
            self.rec[i] = 0;
            self.state[i] = SlotState::Fresh;
            self.gen[i] = self.gen[i].wrapping_add(1);
            self.link[i] = NONE;
            self.open[i] = false;
            self.occlusion[i] = false;
            self.dirty[i] = true;
            if self.ticket[i].as_ref().is_some_and(|t| t.id() == id) {
                self.clear_ticket(i);
            }
        }
    }

    pub(crate) fn set_ticket(&mut self, i: usize, ticket: &Ticket) {
        if self.ticket[i].is_none() {
            self.tickets += 1;
        }
        self.ticket[i] = Some(ticket.clone());
    }

    pub(crate) fn clear_ticket(&mut self, i: usize) {
        if self.ticket[i].take().is_some() {
            self.tickets -= 1;
        }
    }

    /// Drops the tickets of `range` that are already set: a set ticket is
    /// never unset, so such an index can no longer be stale, and later
    /// resolves need not look at it (nor at any ticket once none is left).
    fn prune_tickets(&mut self, range: Range<usize>) {
        if self.tickets == 0 {
            return;
        }
        for i in range {
            if self.ticket[i].as_ref().is_some_and(|t| t.is_done()) {
                self.clear_ticket(i);
            }
        }
    }
}

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
        let oom = |what: &str| {
            Error::OutOfMemory(format!(
                "host memory for the bookkeeping of {count} samples of `{label}` ({what})"
            ))
        };
        let filled = |v| fallible_vec(n, v).ok_or_else(|| oom("state"));
        let state = filled(SlotState::Fresh)?;
        let link = fallible_vec(n, NONE).ok_or_else(|| oom("links"))?;
        let link_gen = fallible_vec(n, 0u32).ok_or_else(|| oom("links"))?;
        let gen = fallible_vec(n, 0u32).ok_or_else(|| oom("generations"))?;
        let occluded = fallible_vec(n, false).ok_or_else(|| oom("occlusion"))?;
        let rec = fallible_vec(n, 0u64).ok_or_else(|| oom("recordings"))?;
        let dirty = fallible_vec(n, false).ok_or_else(|| oom("resets"))?;
        let open = fallible_vec(n, false).ok_or_else(|| oom("open queries"))?;
        let chain = fallible_vec(n, 0u64).ok_or_else(|| oom("chains"))?;
        let ticket = fallible_vec(n, None).ok_or_else(|| oom("tickets"))?;
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
                state,
                link,
                link_gen,
                gen,
                occlusion: occluded,
                rec,
                dirty,
                open,
                chain,
                live: Vec::new(),
                gpu_resolves: Vec::new(),
                ticket,
                tickets: 0,
                aliases: false,
                scratch: Vec::new(),
                occlusion_scratch: Vec::new(),
            }),
            gpu: Mutex::new(None),
            valid_mask: crate::device::mask(device.shared.caps.timestamp_valid_bits),
            what,
        })
    }

    #[inline]
    pub(crate) fn lock(&self) -> Result<std::sync::MutexGuard<'_, Slots>> {
        match self.slots.lock() {
            Ok(slots) => Ok(slots),
            Err(_) => Err(self.poisoned()),
        }
    }

    #[cold]
    fn poisoned(&self) -> Error {
        Error::Internal(format!("`{}` state lock poisoned", self.label))
    }

    #[inline]
    pub(crate) fn check_index(&self, index: u32) -> Result<()> {
        if index >= self.count {
            return Err(self.index_out_of_range(index));
        }
        Ok(())
    }

    #[cold]
    fn index_out_of_range(&self, index: u32) -> Error {
        InvalidInput::IndexOutOfRange {
            what: self.what,
            label: self.label.clone(),
            index: index.into(),
            count: self.count.into(),
        }
        .into()
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

    /// Checks that `index` may be written now by the recording `tracker`
    /// tracks, and makes the recording hold these samples; returns whether
    /// the index needs an inline reset first (its query may hold a value).
    ///
    /// Refused: an index past the end; a statistic index whose query is
    /// still open (being counted); an index last recorded by another command
    /// buffer that is still being recorded (submitted after this one, its
    /// write would hit a query this one did not reset); a dirty index inside
    /// a render pass, where Vulkan cannot reset it.
    #[inline]
    pub(crate) fn prepare_write(
        self: &Arc<Self>,
        slots: &mut Slots,
        index: u32,
        in_render_pass: bool,
        tracker: &mut Tracker,
    ) -> Result<bool> {
        self.check_index(index)?;
        let i = index as usize;
        let prev = slots.rec[i];
        if prev != 0 && prev != tracker.ticket.id() && slots.still_recording(prev) {
            return Err(self.reuse(index, RECORDED_ELSEWHERE));
        }
        if slots.open[i] {
            return Err(self.reuse(index, STILL_OPEN));
        }
        let dirty = slots.dirty[i];
        if dirty && in_render_pass {
            return Err(self.reuse(index, "was already written since the last reset, and Vulkan cannot reset it inside a render pass; reset the buffer or use another index"));
        }
        if tracker.hold_samples(self) {
            slots.register(&tracker.ticket);
        }
        Ok(dirty)
    }

    #[cold]
    pub(crate) fn reuse(&self, index: u32, reason: &'static str) -> Error {
        InvalidInput::SampleIndexReuse {
            label: self.label.clone(),
            index,
            reason,
        }
        .into()
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
        let i = index as usize;
        slots.set_ticket(i, &tracker.ticket);
        slots.dirty[i] = false;
        slots.rec[i] = tracker.ticket.id();
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

    /// Notes a recorded write of `index` by ticket `rec`, in statistic chain
    /// `chain` (0 for timestamps) after chain element `link`.
    #[inline]
    pub(crate) fn mark_recorded(
        slots: &mut Slots,
        index: u32,
        link: u32,
        occlusion: bool,
        rec: u64,
        chain: u64,
    ) {
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
        slots.rec[i] = rec;
        slots.dirty[i] = true;
        slots.chain[i] = chain;
    }

    /// Notes that relaxed write `index` shares the timestamp of `target`,
    /// recorded by ticket `rec`.
    pub(crate) fn mark_alias(slots: &mut Slots, index: u32, target: u32, rec: u64) {
        let i = index as usize;
        slots.aliases = true;
        slots.gen[i] = slots.gen[i].wrapping_add(1);
        slots.state[i] = SlotState::Alias;
        slots.link[i] = target;
        slots.link_gen[i] = slots.gen[target as usize];
        slots.occlusion[i] = false;
        slots.rec[i] = rec;
    }

    /// Host reset of every index; fails while a recorded index is still
    /// pending on the GPU.
    pub(crate) fn reset(&self) -> Result<()> {
        let mut slots = self.lock()?;
        self.check_host_reset(&mut slots, 0, self.count, "reset")?;
        self.host_reset_locked(&mut slots, 0, self.count, SlotState::Fresh);
        Ok(())
    }

    /// Fails unless `first..first+count` may be reset on the host now: no
    /// index is pending on the GPU (see [`Samples::first_pending`]) and no
    /// GPU resolve of these samples is recorded and unfinished.
    pub(crate) fn check_host_reset(
        &self,
        slots: &mut Slots,
        first: u32,
        count: u32,
        what: &'static str,
    ) -> Result<()> {
        if slots.pending_gpu_resolve() {
            return Err(InvalidInput::EncoderState(format!(
                "`{}`: a GPU resolve of it is recorded and has not finished; wait for its submission (or signal the completion of a caller's command buffer) before {what}",
                self.label
            ))
            .into());
        }
        if let Some((index, reason)) = self.first_pending(slots, first, count)? {
            return Err(self.reuse(index, reason));
        }
        Ok(())
    }

    /// The first index of `first..first+count` whose query the GPU may still
    /// use, and why: recorded in a command buffer not submitted yet, recorded
    /// and not available yet, or re-recorded after an inline reset the GPU
    /// may not have executed yet.
    pub(crate) fn first_pending(
        &self,
        slots: &mut Slots,
        first: u32,
        count: u32,
    ) -> Result<Option<(u32, &'static str)>> {
        let mut data = std::mem::take(&mut slots.scratch);
        let read = self.main.read_into(first, count, &mut data);
        let stride = self.main.stride();
        let found = read.map(|()| {
            (first..first + count)
                .zip(data.chunks_exact(stride))
                .find_map(|(s, q)| {
                    let i = s as usize;
                    if slots.rec[i] != 0 && slots.still_recording(slots.rec[i]) {
                        Some((s, NOT_SUBMITTED))
                    } else if (slots.state[i] == SlotState::Recorded && q[stride - 1] == 0)
                        || slots.stale(i)
                    {
                        Some((s, PENDING))
                    } else {
                        None
                    }
                })
        });
        slots.scratch = data;
        found
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
            slots.rec[i] = 0;
            slots.dirty[i] = false;
            slots.open[i] = false;
            slots.chain[i] = 0;
            slots.clear_ticket(i);
        }
        if first == 0 && count == self.count {
            slots.aliases = false;
        }
    }

    /// The indices a resolve of `first..first+count` reads: the range and every
    /// index its chains or aliases lead to, as one span.
    fn span(&self, slots: &Slots, first: u32, count: u32) -> (u32, u32) {
        let (mut lo, mut hi) = (first, first + count);
        if self.set == CommonCounterSet::Timestamp && !slots.aliases {
            // Timestamps link only as aliases.
            return (lo, hi);
        }
        // Elements whose chain onwards is already in the span: chains share
        // their tails, so each element is followed once, not once per sample
        // after it.
        let mut followed = vec![0u64; (self.count as usize).div_ceil(64)];
        for s in first..first + count {
            let mut cur = slots.link[s as usize];
            if cur == NONE {
                continue;
            }
            if slots.state[s as usize] == SlotState::Alias {
                lo = lo.min(cur);
                hi = hi.max(cur + 1);
                continue;
            }
            let mut steps = 0;
            while cur != NONE && steps <= self.count {
                let (word, bit) = (cur as usize / 64, 1u64 << (cur % 64));
                if followed[word] & bit != 0 {
                    break;
                }
                followed[word] |= bit;
                lo = lo.min(cur);
                hi = hi.max(cur + 1);
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
        let mut slots = self.lock()?;
        let (lo, hi) = self.span(&slots, first, count);
        slots.prune_tickets(lo as usize..hi as usize);
        // The driver writes into scratch kept between resolves; it goes back
        // into `slots` whatever happens.
        let mut main = std::mem::take(&mut slots.scratch);
        let resolved = if self.set == CommonCounterSet::Timestamp {
            let threads = resolve_threads(hi - lo);
            self.resolve_timestamps(&slots, first, count, lo, hi, &mut main, threads)
        } else {
            let mut occlusion = std::mem::take(&mut slots.occlusion_scratch);
            let mut read = self.main.read_into(lo, hi - lo, &mut main);
            if let (Ok(()), Some(o)) = (&read, &self.occlusion) {
                read = o.read_into(lo, hi - lo, &mut occlusion);
            }
            let resolved = read.map(|()| {
                self.resolve_statistics(
                    &slots,
                    first,
                    count,
                    lo,
                    hi,
                    &main,
                    self.occlusion.as_ref().map(|_| occlusion.as_slice()),
                )
            });
            slots.occlusion_scratch = occlusion;
            resolved
        };
        slots.scratch = main;
        let (bytes, status) = resolved?;
        let origins = (self.set == CommonCounterSet::Statistic).then(|| {
            (first as usize..(first + count) as usize)
                .zip(&status)
                .map(|(i, st)| match st {
                    SampleStatus::Written => slots.chain[i],
                    _ => 0,
                })
                .collect::<Vec<u64>>()
        });
        let resolved = ResolvedCounters::new(self.set, first, bytes, status)?;
        match origins {
            Some(o) => resolved.with_origins(o),
            None => Ok(resolved),
        }
    }

    /// The timestamp resolve of `first..first+count`, reading the span
    /// `lo..hi` into `scratch` (on `threads` threads, each reading a part and
    /// laying out what of the range is in it while it is still in cache):
    /// first every value as if written and complete, then a pass over the
    /// exceptions (and every index while a ticket may be pending), which are
    /// rare in the common case of a range the GPU has finished.
    #[allow(clippy::too_many_arguments)]
    fn resolve_timestamps(
        &self,
        slots: &Slots,
        first: u32,
        count: u32,
        lo: u32,
        hi: u32,
        scratch: &mut Vec<u64>,
        threads: usize,
    ) -> Result<(Vec<u8>, Vec<SampleStatus>)> {
        let (n, f, l) = (count as usize, first as usize, lo as usize);
        let span = (hi - lo) as usize;
        if scratch.len() < 2 * span {
            scratch.resize(2 * span, 0);
        }
        let data = &mut scratch[..2 * span];
        let states = &slots.state[f..f + n];
        let mask = self.valid_mask;
        // Reads queries `a..` into `chunk`, then lays out the range's part of
        // them into `out`.
        let job = |a: usize, chunk: &mut [u64], out: &mut [MaybeUninit<u8>]| -> Result<bool> {
            let b = a + chunk.len() / 2;
            self.main.read_slice(a as u32, (b - a) as u32, chunk)?;
            let ia = a.clamp(f, f + n);
            let ib = b.clamp(ia, f + n);
            Ok(layout_timestamps(
                &chunk[2 * (ia - a)..2 * (ib - a)],
                &states[ia - f..ib - f],
                mask,
                out,
            ))
        };
        // Written without zero-filling first: a large output would otherwise
        // be written twice.
        let mut bytes: Vec<u8> = Vec::with_capacity(n * 8);
        let out = &mut bytes.spare_capacity_mut()[..n * 8];
        let all_written = if threads <= 1 {
            job(l, data, out)?
        } else {
            // Chunks of the span in order; the range's parts of them
            // partition the output in the same order.
            let per = span.div_ceil(threads);
            let mut jobs = Vec::with_capacity(threads);
            let mut rest = out;
            for (k, chunk) in data.chunks_mut(2 * per).enumerate() {
                let a = l + k * per;
                let b = a + chunk.len() / 2;
                let ia = a.clamp(f, f + n);
                let ib = b.clamp(ia, f + n);
                let (out, tail) = std::mem::take(&mut rest).split_at_mut(8 * (ib - ia));
                rest = tail;
                jobs.push((a, chunk, out));
            }
            run_jobs(jobs, threads, |(a, chunk, out)| job(a, chunk, out))?
        };
        // SAFETY: the jobs (all of them ran and succeeded, or we returned
        // above) called `layout_timestamps` on parts that partition the first
        // `n * 8` bytes of spare capacity, and it initialised every byte.
        unsafe { bytes.set_len(n * 8) };
        let mut status = vec![SampleStatus::Written; n];
        if all_written && slots.tickets == 0 {
            return Ok((bytes, status));
        }
        let data = &scratch[..2 * span];
        let pairs = &data[2 * (f - l)..2 * (f - l + n)];
        for (k, (out, st)) in bytes.chunks_exact_mut(8).zip(&mut status).enumerate() {
            let i = f + k;
            let q = &pairs[2 * k..2 * k + 2];
            if slots.state[i] == SlotState::Recorded && q[1] != 0 && !slots.stale(i) {
                continue;
            }
            let (v, s) = self.timestamp_exception(slots, i as u32, lo, data);
            out.copy_from_slice(&v.to_ne_bytes());
            *st = s;
        }
        Ok((bytes, status))
    }

    /// What timestamp index `s` resolves to when it is not simply recorded,
    /// complete and current.
    #[cold]
    fn timestamp_exception(
        &self,
        slots: &Slots,
        s: u32,
        lo: u32,
        data: &[u64],
    ) -> (u64, SampleStatus) {
        let i = s as usize;
        let at = |s: u32| 2 * (s - lo) as usize;
        let mut value = COUNTER_ERROR_VALUE;
        let status = match slots.state[i] {
            SlotState::Fresh => SampleStatus::NotWritten,
            _ if slots.stale(i) => SampleStatus::NotReady,
            SlotState::Invalidated => SampleStatus::Invalidated,
            state => {
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
                } else if data[at(src) + 1] != 0 {
                    value = data[at(src)] & self.valid_mask;
                    SampleStatus::Written
                } else {
                    SampleStatus::NotReady
                }
            }
        };
        if status == SampleStatus::Invalidated {
            value = 0;
        }
        (value, status)
    }

    /// The statistic resolve of `first..first+count`, whose chains lie in
    /// `lo..hi`: each sample is the sum of its chain.
    #[allow(clippy::too_many_arguments)]
    fn resolve_statistics(
        &self,
        slots: &Slots,
        first: u32,
        count: u32,
        lo: u32,
        hi: u32,
        main: &[u64],
        occlusion: Option<&[u64]>,
    ) -> (Vec<u8>, Vec<SampleStatus>) {
        let fields = self.set.result_size() / 8;
        let mut bytes = vec![0u8; count as usize * fields * 8];
        let mut status = Vec::with_capacity(count as usize);
        let mut out = [0u64; 8];
        let out = &mut out[..fields];
        let mut sums = ChainSums::new((hi - lo) as usize);
        for (s, chunk) in (first..first + count).zip(bytes.chunks_exact_mut(fields * 8)) {
            let i = s as usize;
            let st = match slots.state[i] {
                SlotState::Fresh => SampleStatus::NotWritten,
                _ if slots.stale(i) => SampleStatus::NotReady,
                SlotState::Invalidated => SampleStatus::Invalidated,
                _ => self.chain_value(slots, s, lo, main, occlusion, &mut sums, out),
            };
            match st {
                SampleStatus::Written => {}
                SampleStatus::Invalidated => out.fill(0),
                _ => out.fill(COUNTER_ERROR_VALUE),
            }
            for (dst, v) in chunk.chunks_exact_mut(8).zip(out.iter()) {
                dst.copy_from_slice(&v.to_ne_bytes());
            }
            status.push(st);
        }
        (bytes, status)
    }

    /// Sums the chain before statistic sample `s` into `out`, as walking the
    /// whole chain does, but walking each chain element once per resolve
    /// (`sums` remembers the walks from every element reached).
    #[allow(clippy::too_many_arguments)]
    fn chain_value(
        &self,
        slots: &Slots,
        s: u32,
        lo: u32,
        main: &[u64],
        occlusion: Option<&[u64]>,
        sums: &mut ChainSums,
        out: &mut [u64],
    ) -> SampleStatus {
        let stride = self.main.stride();
        let at = |s: u32| (s - lo) as usize;
        let available = |s: u32| main[at(s) * stride + stride - 1] != 0;
        if slots.state[s as usize] != SlotState::Recorded {
            return SampleStatus::Error;
        }
        if !available(s) {
            return SampleStatus::NotReady;
        }
        out.fill(0);
        let p = slots.link[s as usize];
        if p != NONE {
            let c = p as usize;
            if slots.gen[c] != slots.link_gen[s as usize] || slots.state[c] != SlotState::Recorded {
                // The chain was broken: an earlier sample was re-recorded.
                return SampleStatus::Error;
            }
            let st = self.walk(slots, p, lo, main, occlusion, sums);
            if st != SampleStatus::Written {
                return st;
            }
            out.copy_from_slice(&sums.sums[at(p) * 8..at(p) * 8 + out.len()]);
        }
        for (f, &pos) in self.field_map.iter().enumerate() {
            if pos == ABSENT {
                out[f] = COUNTER_ERROR_VALUE;
            }
        }
        SampleStatus::Written
    }

    /// The walk of a chain from element `c0` (whose generation its successor
    /// expects): its status and, when written, the sums of the queries of `c0`
    /// and every element before it, in `sums`. Each element is walked once:
    /// a walk stops at the first element already known and fills in the ones
    /// it passed on the way back.
    fn walk(
        &self,
        slots: &Slots,
        c0: u32,
        lo: u32,
        main: &[u64],
        occlusion: Option<&[u64]>,
        sums: &mut ChainSums,
    ) -> SampleStatus {
        let stride = self.main.stride();
        let at = |s: u32| (s - lo) as usize;
        let uses_occlusion = self.field_map.contains(&OCCLUSION);
        // Adds the query of element `c` to `out`.
        let add_query = |c: u32, out: &mut [u64]| {
            let values = &main[at(c) * stride..at(c) * stride + stride - 1];
            for (f, &pos) in self.field_map.iter().enumerate() {
                match pos {
                    ABSENT => {}
                    OCCLUSION => {
                        if let (true, Some(o)) = (slots.occlusion[c as usize], occlusion) {
                            out[f] = out[f].wrapping_add(o[at(c) * 2]);
                        }
                    }
                    p => out[f] = out[f].wrapping_add(values[p as usize]),
                }
            }
        };
        let mut path = std::mem::take(&mut sums.path);
        let mut c = c0;
        let status = loop {
            let k = at(c);
            if let Some(st) = sums.known(k) {
                break st;
            }
            let i = c as usize;
            let occlusion_pending = uses_occlusion
                && slots.occlusion[i]
                && occlusion.is_some_and(|o| o[k * 2 + 1] == 0);
            if main[k * stride + stride - 1] == 0 || slots.stale(i) || occlusion_pending {
                sums.set(k, SampleStatus::NotReady);
                break SampleStatus::NotReady;
            }
            let next = slots.link[i];
            if next == NONE {
                let mut own = [0u64; 8];
                add_query(c, &mut own);
                sums.sums[k * 8..k * 8 + 8].copy_from_slice(&own);
                sums.set(k, SampleStatus::Written);
                break SampleStatus::Written;
            }
            let n = next as usize;
            if path.len() > self.count as usize
                || slots.gen[n] != slots.link_gen[i]
                || slots.state[n] != SlotState::Recorded
            {
                // The chain was broken: an earlier sample was re-recorded.
                sums.set(k, SampleStatus::Error);
                break SampleStatus::Error;
            }
            path.push(c);
            c = next;
        };
        // Back along the path: each element's walk is its successor's plus
        // its own query.
        let mut after = c;
        while let Some(p) = path.pop() {
            let k = at(p);
            if status == SampleStatus::Written {
                let mut own = [0u64; 8];
                own.copy_from_slice(&sums.sums[at(after) * 8..at(after) * 8 + 8]);
                add_query(p, &mut own);
                sums.sums[k * 8..k * 8 + 8].copy_from_slice(&own);
            }
            sums.set(k, status);
            after = p;
        }
        sums.path = path;
        sums.known(at(c0)).unwrap_or(SampleStatus::Error)
    }

    /// Sums the chain before statistic sample `s` into `out`, walking the
    /// whole chain: the reference the memoised `chain_value` is tested
    /// against. `main` and `occlusion` are the pools' reads from `lo`
    /// (see `QueryPool::read_into`).
    #[cfg(test)]
    fn sum_chain(
        &self,
        slots: &Slots,
        s: u32,
        lo: u32,
        main: &[u64],
        occlusion: Option<&[u64]>,
        out: &mut [u64],
    ) -> SampleStatus {
        let stride = self.main.stride();
        let at = |s: u32| (s - lo) as usize;
        let available = |s: u32| main[at(s) * stride + stride - 1] != 0;
        if slots.state[s as usize] != SlotState::Recorded {
            return SampleStatus::Error;
        }
        if !available(s) {
            return SampleStatus::NotReady;
        }
        out.fill(0);
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
            if !available(cur) || slots.stale(c) {
                return SampleStatus::NotReady;
            }
            let values = &main[at(cur) * stride..at(cur) * stride + stride - 1];
            for (f, &pos) in self.field_map.iter().enumerate() {
                match pos {
                    ABSENT => {}
                    OCCLUSION => {
                        if slots.occlusion[c] {
                            if let Some(o) = occlusion {
                                if o[at(cur) * 2 + 1] == 0 {
                                    return SampleStatus::NotReady;
                                }
                                out[f] = out[f].wrapping_add(o[at(cur) * 2]);
                            }
                        }
                    }
                    p => out[f] = out[f].wrapping_add(values[p as usize]),
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
        self: &Arc<Self>,
        tracker: &mut Tracker,
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
        let mut slots = self.lock()?;
        if let Some(i) = (first..first + count).find(|&i| slots.open[i as usize]) {
            return Err(self.reuse(i, STILL_OPEN));
        }
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
        slots.gpu_resolves.push(tracker.ticket.clone());
        Ok(())
    }
}

/// Writes a bookkeeping snapshot into a GPU-resolve table.
fn table_buffer_write(table: &GpuBuffer, offset: u64, rows: &[u32]) -> Result<()> {
    table.write(offset, bytemuck::cast_slice(rows))
}

/// The chain walks of one statistic resolve, per index of its span.
struct ChainSums {
    /// 0: not walked yet; else 1 + the walk's status code.
    known: Vec<u8>,
    /// 8 sums (Metal's field order) per index, valid once walked as written.
    sums: Vec<u64>,
    /// The elements of the walk under way.
    path: Vec<u32>,
}

impl ChainSums {
    fn new(span: usize) -> Self {
        Self {
            known: vec![0; span],
            sums: vec![0; span * 8],
            path: Vec::new(),
        }
    }

    fn known(&self, k: usize) -> Option<SampleStatus> {
        match self.known[k] {
            0 => None,
            1 => Some(SampleStatus::Written),
            2 => Some(SampleStatus::NotReady),
            _ => Some(SampleStatus::Error),
        }
    }

    fn set(&mut self, k: usize, status: SampleStatus) {
        self.known[k] = match status {
            SampleStatus::Written => 1,
            SampleStatus::NotReady => 2,
            _ => 3,
        };
    }
}

/// `n` copies of `value`, or `None` where the host cannot allocate them.
fn fallible_vec<T: Clone>(n: usize, value: T) -> Option<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).ok()?;
    v.resize(n, value);
    Some(v)
}

/// Queries a thread of a parallel CPU resolve reads at least.
const RESOLVE_CHUNK: u32 = 1 << 16;
/// Threads a CPU resolve uses at most.
const RESOLVE_THREADS: usize = 8;

/// Threads for a CPU resolve reading `span` queries: 1 below two chunks'
/// worth (thread start-up would cost more than it saves).
fn resolve_threads(span: u32) -> usize {
    static CORES: OnceLock<usize> = OnceLock::new();
    let cores = *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    cores
        .min(RESOLVE_THREADS)
        .min((span / RESOLVE_CHUNK) as usize)
        .max(1)
}

/// Runs `work` on every job, on up to `threads` threads (this one included;
/// where a thread cannot be started, the others take its share). Returns
/// whether every job returned `true`, or the first error. Fails unless every
/// job ran.
fn run_jobs<J: Send>(
    jobs: Vec<J>,
    threads: usize,
    work: impl Fn(J) -> Result<bool> + Sync,
) -> Result<bool> {
    let total = jobs.len();
    let queue = Mutex::new(jobs);
    // (jobs finished, combined result)
    let done = Mutex::new((0usize, Ok(true)));
    let worker = || loop {
        let Some(job) = queue.lock().ok().and_then(|mut q| q.pop()) else {
            break;
        };
        let r = work(job);
        let Ok(mut d) = done.lock() else { break };
        d.0 += 1;
        d.1 = match (std::mem::replace(&mut d.1, Ok(true)), r) {
            (Err(e), _) | (Ok(_), Err(e)) => Err(e),
            (Ok(a), Ok(b)) => Ok(a & b),
        };
    };
    std::thread::scope(|scope| {
        for _ in 1..threads.min(total) {
            if std::thread::Builder::new()
                .name("gpu-counters resolve".into())
                .spawn_scoped(scope, worker)
                .is_err()
            {
                break;
            }
        }
        worker();
    });
    let (finished, result) = done
        .into_inner()
        .map_err(|_| Error::Internal("resolve worker lock poisoned".into()))?;
    if finished != total {
        return Err(Error::Internal(format!(
            "resolve ran {finished} of {total} parts"
        )));
    }
    result
}

/// Writes `out` (8 bytes per sample) from the (value, availability) `pairs`
/// of timestamp samples in `states`: the masked value where the sample is
/// recorded and available, the error value elsewhere. Returns whether every
/// sample was. Initialises every byte of `out`. Branch-free, so it vectorises.
#[inline(never)]
fn layout_timestamps(
    pairs: &[u64],
    states: &[SlotState],
    mask: u64,
    out: &mut [MaybeUninit<u8>],
) -> bool {
    // The error value is all ones: `(!ok as u64).wrapping_neg()` selects it.
    const _: () = assert!(COUNTER_ERROR_VALUE == u64::MAX);
    let n = states.len();
    assert!(pairs.len() == 2 * n && out.len() == 8 * n);
    let mut all = true;
    for ((dst, q), &state) in out
        .chunks_exact_mut(8)
        .zip(pairs.chunks_exact(2))
        .zip(states)
    {
        let ok = (state == SlotState::Recorded) & (q[1] != 0);
        all &= ok;
        let v = (q[0] & mask) | (!ok as u64).wrapping_neg();
        dst.copy_from_slice(&v.to_ne_bytes().map(MaybeUninit::new));
    }
    all
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

#[cfg(test)]
mod tests {
    use super::SlotState;
    use crate::{CommandBuffer, CounterSampleBuffer, Device, InstanceOptions};
    use gpu_counters_core::{CommonCounterSet, CounterSampleBufferDescriptor, SampleStatus};
    use std::hint::black_box;
    use std::time::Instant;

    fn median(mut v: Vec<f64>) -> f64 {
        v.sort_by(|a, b| a.total_cmp(b));
        v[v.len() / 2]
    }

    /// A timestamp buffer of `n` whose indices in `written` the GPU wrote.
    fn written(device: &Device, n: u32, written: impl Iterator<Item = u32>) -> CounterSampleBuffer {
        let buffer = device
            .make_counter_sample_buffer(&CounterSampleBufferDescriptor::new(
                CommonCounterSet::Timestamp,
                "resolve",
                n,
            ))
            .expect("buffer");
        let mut cmd = CommandBuffer::new(device).expect("command buffer");
        for i in written {
            cmd.sample_counters(&buffer, i, false).expect("sample");
        }
        cmd.commit().expect("commit").wait().expect("wait");
        buffer
    }

    /// The parallel timestamp resolve gives what the single-threaded one
    /// does, with gaps and parts that do not divide evenly, and the validation
    /// layer has nothing to say about reading one pool on several threads.
    #[test]
    fn parallel_timestamp_resolve_matches() {
        let device = Device::open_default(&InstanceOptions { validation: true }).expect("device");
        let n = 3 * super::RESOLVE_CHUNK + 123;
        let buffer = written(&device, n, (0..n).filter(|i| i % 1000 != 7));
        let samples = &buffer.inner;
        for (first, count) in [(0, n), (5, n - 11), (super::RESOLVE_CHUNK - 1, 2)] {
            let slots = samples.lock().expect("lock");
            let (lo, hi) = samples.span(&slots, first, count);
            let mut scratch = Vec::new();
            let one = samples
                .resolve_timestamps(&slots, first, count, lo, hi, &mut scratch, 1)
                .expect("resolve on one thread");
            for threads in [2, 3, 4] {
                let many = samples
                    .resolve_timestamps(&slots, first, count, lo, hi, &mut scratch, threads)
                    .expect("resolve on threads");
                assert!(one == many, "{threads} threads differ");
            }
            for (k, st) in one.1.iter().enumerate() {
                let i = first + k as u32;
                let expected = if i % 1000 == 7 {
                    SampleStatus::NotWritten
                } else {
                    SampleStatus::Written
                };
                assert_eq!(*st, expected, "sample {i}");
            }
        }
        let whole = buffer.resolve_counter_range(0..n as u64).expect("resolve");
        assert_eq!(whole.statuses().len(), n as usize);
        let messages = device.instance().validation_messages();
        assert!(messages.is_empty(), "{}", messages.join("\n"));
    }

    /// The memoised chain sums resolve to what walking every chain whole
    /// does: long chains, a chain broken by a re-recorded sample, a second
    /// chain, samples never written and samples not yet executed.
    #[test]
    fn chain_sums_match_whole_walks() {
        use gpu_counters_workloads::{ComputeWorkload, GpuContext};
        let device = Device::open_default(&InstanceOptions { validation: true }).expect("device");
        let ctx = GpuContext {
            instance: device.instance().raw(),
            physical_device: device.physical_device(),
            device: device.raw(),
            queue_family_index: device.queue_family_index(),
        };
        let work = ComputeWorkload::new(&ctx, 64, 2, 1).expect("workload");
        let n = 600;
        let buffer = device
            .make_counter_sample_buffer(&CounterSampleBufferDescriptor::new(
                CommonCounterSet::Statistic,
                "chains",
                n,
            ))
            .expect("buffer");
        let mut cmd = CommandBuffer::new(&device).expect("command buffer");
        for i in 0..300 {
            cmd.sample_counters(&buffer, i, false).expect("sample");
            if i % 3 == 0 {
                work.record_dispatch(device.raw(), cmd.raw());
                work.record_barrier(device.raw(), cmd.raw());
            }
        }
        cmd.commit().expect("commit").wait().expect("wait");
        let mut cmd = CommandBuffer::new(&device).expect("command buffer");
        for i in [400, 150, 401, 402] {
            cmd.sample_counters(&buffer, i, false).expect("sample");
            work.record_dispatch(device.raw(), cmd.raw());
            work.record_barrier(device.raw(), cmd.raw());
        }
        cmd.commit().expect("commit").wait().expect("wait");
        // Recorded, never submitted: not ready.
        let mut pending = CommandBuffer::new(&device).expect("command buffer");
        for i in 500..505 {
            pending.sample_counters(&buffer, i, false).expect("sample");
        }
        pending.end_statistics().expect("end");

        let samples = &buffer.inner;
        for (first, count) in [(0, n), (100, 220), (401, 2), (299, 1)] {
            let mut slots = samples.lock().expect("lock");
            let (lo, hi) = samples.span(&slots, first, count);
            // The span as every chain walked whole gives it.
            let (mut lo_whole, mut hi_whole) = (first, first + count);
            for s in first..first + count {
                let mut cur = slots.link[s as usize];
                while cur != super::NONE {
                    lo_whole = lo_whole.min(cur);
                    hi_whole = hi_whole.max(cur + 1);
                    cur = slots.link[cur as usize];
                }
            }
            assert_eq!((lo, hi), (lo_whole, hi_whole));
            let mut main = Vec::new();
            samples
                .main
                .read_into(lo, hi - lo, &mut main)
                .expect("read");
            let mut occlusion = Vec::new();
            if let Some(o) = &samples.occlusion {
                o.read_into(lo, hi - lo, &mut occlusion).expect("read");
            }
            let occlusion = samples.occlusion.as_ref().map(|_| occlusion.as_slice());
            slots.prune_tickets(lo as usize..hi as usize);
            let (bytes, status) =
                samples.resolve_statistics(&slots, first, count, lo, hi, &main, occlusion);
            let mut out = [0u64; 8];
            for (k, s) in (first..first + count).enumerate() {
                let expected = match slots.state[s as usize] {
                    SlotState::Fresh => SampleStatus::NotWritten,
                    _ if slots.stale(s as usize) => SampleStatus::NotReady,
                    SlotState::Invalidated => SampleStatus::Invalidated,
                    _ => samples.sum_chain(&slots, s, lo, &main, occlusion, &mut out),
                };
                assert_eq!(status[k], expected, "sample {s}");
                if expected == SampleStatus::Written {
                    let got: Vec<u64> = bytes[k * 64..k * 64 + 64]
                        .chunks_exact(8)
                        .map(|b| u64::from_ne_bytes(b.try_into().expect("8 bytes")))
                        .collect();
                    assert_eq!(got, out, "sample {s}");
                }
            }
            if (first, count) == (0, n) {
                let count = |st| status.iter().filter(|&&s| s == st).count();
                assert_eq!(
                    count(SampleStatus::Error),
                    149,
                    "151..300 follow the re-recorded 150"
                );
                assert_eq!(count(SampleStatus::NotReady), 5);
                assert!(count(SampleStatus::Written) == 150 + 4, "{status:?}");
            }
        }
        drop(pending);
        let messages = device.instance().validation_messages();
        assert!(messages.is_empty(), "{}", messages.join("\n"));
    }

    /// Times the phases of a CPU resolve of many timestamps: the driver's read
    /// into the reused scratch and the layout pass, on one thread, then the
    /// whole `resolve_counter_range` (parallel when large). Release build:
    /// `cargo test --release -p gpu-counters-vulkan --lib -- --ignored --nocapture resolve_phases`
    /// (`GPU_COUNTERS_RESOLVE_N` sets the count, default 1000000).
    #[test]
    #[ignore = "a timing, not a check; run it by hand"]
    fn resolve_phases() {
        let n: u32 = std::env::var("GPU_COUNTERS_RESOLVE_N")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(1_000_000);
        let device = Device::open_default(&InstanceOptions::default()).expect("device");
        let buffer = written(&device, n, 0..n);
        let samples = &buffer.inner;
        let reps = 11;
        let (mut read, mut one, mut whole) = (Vec::new(), Vec::new(), Vec::new());
        for rep in 0..=reps {
            let mut slots = samples.lock().expect("lock");
            let mut data = std::mem::take(&mut slots.scratch);
            let t = Instant::now();
            samples.main.read_into(0, n, &mut data).expect("read");
            let t_read = t.elapsed().as_nanos() as f64;
            let t = Instant::now();
            let (bytes, status) = samples
                .resolve_timestamps(&slots, 0, n, 0, n, &mut data, 1)
                .expect("resolve");
            let t_one = t.elapsed().as_nanos() as f64;
            assert!(status.iter().all(|s| *s == SampleStatus::Written));
            black_box((bytes, status));
            slots.scratch = data;
            drop(slots);
            let t = Instant::now();
            black_box(buffer.resolve_counter_range(0..n as u64).expect("resolve"));
            let t_whole = t.elapsed().as_nanos() as f64;
            if rep > 0 {
                read.push(t_read);
                one.push(t_one);
                whole.push(t_whole);
            }
        }
        let source: Vec<u64> = (0..n as u64).collect();
        let mut dest = vec![0u64; n as usize];
        let mut copy = Vec::new();
        for _ in 0..=reps {
            let t = Instant::now();
            dest.copy_from_slice(black_box(&source));
            black_box(&dest);
            copy.push(t.elapsed().as_nanos() as f64);
        }
        let (read, one, whole, copy) = (median(read), median(one), median(whole), median(copy));
        let ours = (one - read).max(1.0);
        println!(
            "{n} timestamps on {}: one thread: driver read {:.3} ms, read + layout {:.3} ms, so ours {:.3} ms = {:.2} ns/sample; whole resolve on {} thread(s) {:.3} ms; memcpy of {} B {:.3} ms; memcpy/ours {:.2}x, memcpy/whole {:.2}x",
            device.info().name,
            read / 1e6,
            one / 1e6,
            ours / 1e6,
            ours / n as f64,
            super::resolve_threads(n),
            whole / 1e6,
            8 * n as u64,
            copy / 1e6,
            copy / ours,
            copy / whole,
        );
    }
}
