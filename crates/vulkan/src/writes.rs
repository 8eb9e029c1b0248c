//! The commands that write samples, for every encoder and the command
//! buffer alike: timestamps (claimed without the lock, or checked under it)
//! and the statistic chains of pipeline-statistics queries.

use crate::device::Device;
use crate::recording::Tracker;
use crate::samples::{Samples, Slots};
use ash::vk;
use gpu_counters_hal::bookkeeping::{LocalClaims, SampleTable, NONE};
use gpu_counters_hal::{Error, InvalidInput, Result};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// An open statistic chain: the buffer and the index whose queries are
/// active, and the chain's id (the origin its samples count from).
pub(crate) struct Chain {
    samples: Arc<Samples>,
    index: u32,
    id: u64,
}

/// A chain id no other chain has; never 0.
fn next_chain_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

#[cold]
fn not_timestamps(samples: &Samples) -> Error {
    InvalidInput::Argument(format!(
        "`{}` holds {} samples, not timestamps",
        samples.label, samples.set
    ))
    .into()
}

/// The stage a timestamp sample is taken at: after all prior work with
/// `barrier`, else when the GPU reaches it.
#[inline(always)]
pub(crate) fn barrier_stage(barrier: bool) -> vk::PipelineStageFlags2 {
    if barrier {
        vk::PipelineStageFlags2::ALL_COMMANDS
    } else {
        vk::PipelineStageFlags2::TOP_OF_PIPE
    }
}

/// Records one timestamp into `samples[index]` at `stage`.
#[inline(always)]
pub(crate) fn write_timestamp(
    device: &Device,
    cmd: vk::CommandBuffer,
    samples: &Arc<Samples>,
    index: u32,
    stage: vk::PipelineStageFlags2,
    in_render_pass: bool,
    tracker: &mut Tracker,
) -> Result<()> {
    if samples.set != gpu_counters_hal::CommonCounterSet::Timestamp {
        return Err(not_timestamps(samples));
    }
    if record_claimed(device, cmd, samples, &mut tracker.claims, index, stage) {
        return Ok(());
    }
    write_timestamp_locked(device, cmd, samples, index, stage, in_render_pass, tracker)
}

/// Records a timestamp into `samples[index]` at `stage` if the recording
/// whose claims are `claims` claimed the index clean, with no lock; returns
/// whether it did. `claims` must be the claims of the recording of `cmd`
/// on `device`, and `cmd` recording.
///
/// A recording claims only sets of timestamps of its own device: a claim
/// follows a locked write, which checked both, into a set the recording
/// holds until its claims end (so no other set can take the claimed set's
/// address meanwhile). So a write that finds its claim needs neither
/// check again, and a set of another device or of other counters finds
/// none.
#[inline(always)]
pub(crate) fn record_claimed(
    device: &Device,
    cmd: vk::CommandBuffer,
    samples: &Samples,
    claims: &mut LocalClaims,
    index: u32,
    stage: vk::PipelineStageFlags2,
) -> bool {
    if !claims.try_write(samples, index) {
        return false;
    }
    // SAFETY: the index is clean in a block this recording claimed
    // (`LocalClaims::try_write`): inside the set, its query reset and
    // written by no other recording; the claim makes the set a timestamp
    // set of `device` (see above), and `cmd` is recording (what every
    // caller holds to).
    unsafe {
        device
            .raw()
            .cmd_write_timestamp2(cmd, stage, samples.main.raw, index)
    };
    true
}

/// [`write_timestamp`] under the bookkeeping lock: the first write into a
/// block (which claims it), and every write that needs a reset or a check.
#[inline(never)]
fn write_timestamp_locked(
    device: &Device,
    cmd: vk::CommandBuffer,
    samples: &Arc<Samples>,
    index: u32,
    stage: vk::PipelineStageFlags2,
    in_render_pass: bool,
    tracker: &mut Tracker,
) -> Result<()> {
    let mut slots = samples.lock_block(index)?;
    write_timestamp_in(
        device,
        cmd,
        samples,
        &mut slots,
        index,
        stage,
        in_render_pass,
        tracker,
    )
}

/// [`write_timestamp_locked`] with `slots` locked from `samples` already:
/// checks the write (resetting a re-used index), records it, notes it, and
/// claims its block for this recording.
#[allow(clippy::too_many_arguments)] // the recording context, the set and its table, the write
pub(crate) fn write_timestamp_in(
    device: &Device,
    cmd: vk::CommandBuffer,
    samples: &Arc<Samples>,
    slots: &mut SampleTable,
    index: u32,
    stage: vk::PipelineStageFlags2,
    in_render_pass: bool,
    tracker: &mut Tracker,
) -> Result<()> {
    if samples.prepare_write(slots, index, in_render_pass, tracker)? {
        samples.record_reset(slots, cmd, tracker, index);
    }
    // SAFETY: index < count (prepare_write), the query was reset (on the host
    // at creation/reset, or inline just above), and `cmd` is recording.
    unsafe {
        device
            .raw()
            .cmd_write_timestamp2(cmd, stage, samples.main.raw, index)
    };
    slots.mark_recorded(
        index,
        gpu_counters_hal::bookkeeping::NONE,
        false,
        tracker.ticket.id(),
        0,
    );
    tracker.claims.claim(samples, slots, index, &tracker.ticket);
    Ok(())
}

/// Takes statistic sample `index` in a chain: ends the open query of the
/// chain (its segment ends here) and begins query `index`.
#[allow(clippy::too_many_arguments)] // the recording context, the chain and the sample
pub(crate) fn chain_sample(
    d: &ash::Device,
    cmd: vk::CommandBuffer,
    chain: &mut Option<Chain>,
    samples: &Arc<Samples>,
    index: u32,
    in_render_pass: bool,
    with_occlusion: bool,
    tracker: &mut Tracker,
) -> Result<()> {
    let mut slots = samples.lock()?;
    if samples.prepare_write(&mut slots, index, in_render_pass, tracker)? {
        samples.record_reset(&mut slots, cmd, tracker, index);
    }
    let occlusion = samples.occlusion.as_ref().filter(|_| with_occlusion);
    let mut link = NONE;
    let mut id = None;
    // The chain's reference to `samples`, when it already holds one.
    let mut held = None;
    if let Some(open) = chain.take() {
        if Arc::ptr_eq(&open.samples, samples) {
            link = open.index;
            id = Some(open.id);
            end_queries(d, cmd, samples, &mut slots, open.index);
            held = Some(open.samples);
        } else {
            let mut open_slots = open.samples.lock()?;
            end_queries(d, cmd, &open.samples, &mut open_slots, open.index);
        }
    }
    let id = id.unwrap_or_else(next_chain_id);
    // SAFETY: index < count and the query is reset and not active
    // (prepare_write); the only active queries of these pools were ended
    // above.
    unsafe {
        d.cmd_begin_query(cmd, samples.main.raw, index, vk::QueryControlFlags::empty());
        if let Some(o) = occlusion {
            d.cmd_begin_query(cmd, o.raw, index, vk::QueryControlFlags::PRECISE);
        }
    }
    slots.mark_recorded(index, link, occlusion.is_some(), tracker.ticket.id(), id);
    slots.open[index as usize] = true;
    drop(slots);
    *chain = Some(Chain {
        samples: held.unwrap_or_else(|| samples.clone()),
        index,
        id,
    });
    Ok(())
}

/// Ends the open query of a chain, if any.
pub(crate) fn chain_close(
    d: &ash::Device,
    cmd: vk::CommandBuffer,
    chain: &mut Option<Chain>,
) -> Result<()> {
    if let Some(open) = chain.take() {
        let mut slots = open.samples.lock()?;
        end_queries(d, cmd, &open.samples, &mut slots, open.index);
    }
    Ok(())
}

fn end_queries(
    d: &ash::Device,
    cmd: vk::CommandBuffer,
    samples: &Samples,
    slots: &mut Slots,
    index: u32,
) {
    let i = index as usize;
    // SAFETY: the queries were begun by this encoder in this command buffer
    // (and render pass instance, if any) and are still active (`open`).
    unsafe {
        d.cmd_end_query(cmd, samples.main.raw, index);
        if slots.occlusion[i] {
            if let Some(o) = &samples.occlusion {
                d.cmd_end_query(cmd, o.raw, index);
            }
        }
    }
    slots.open[i] = false;
}
