//! Query blocks: a device's queries, in pools of [`POOL_BLOCKS`] blocks of
//! a fixed size, handed to recordings a block at a time and back when the
//! last holder (a recording, or an execution in flight) lets go.
//!
//! A device holds at most `max_blocks` blocks of each kind; a recording
//! that finds none left records without timing what is left of it, and
//! that is counted. Memory is bounded by the blocks, whatever the number of
//! command buffers.

use ash::vk;
use std::sync::{Arc, Mutex, Weak};

/// Blocks per `VkQueryPool`.
pub const POOL_BLOCKS: u32 = 64;

struct Free {
    pools: Vec<vk::QueryPool>,
    free: Vec<u32>,
}

/// The blocks of one kind of query of a device.
pub struct BlockPool {
    kind: vk::QueryType,
    statistics: vk::QueryPipelineStatisticFlags,
    /// Queries per block.
    pub size: u32,
    max_blocks: u32,
    state: Arc<Mutex<Free>>,
}

/// A block of queries: `size` queries of `pool` from `first`. Dropping it
/// gives it back.
pub struct Block {
    /// The pool.
    pub pool: vk::QueryPool,
    /// Its first query.
    pub first: u32,
    index: u32,
    owner: Weak<Mutex<Free>>,
}

impl Drop for Block {
    fn drop(&mut self) {
        if let Some(o) = self.owner.upgrade() {
            o.lock()
                .unwrap_or_else(|e| e.into_inner())
                .free
                .push(self.index);
        }
    }
}

impl std::fmt::Debug for Block {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Block")
            .field("first", &self.first)
            .field("index", &self.index)
            .finish_non_exhaustive()
    }
}

impl BlockPool {
    /// Blocks of `size` queries of `kind` (with `statistics` for pipeline
    /// statistics), at most `max_blocks` of them.
    pub fn new(
        kind: vk::QueryType,
        statistics: vk::QueryPipelineStatisticFlags,
        size: u32,
        max_blocks: u32,
    ) -> Self {
        BlockPool {
            kind,
            statistics,
            size,
            max_blocks,
            state: Arc::new(Mutex::new(Free {
                pools: Vec::new(),
                free: Vec::new(),
            })),
        }
    }

    /// A free block, making a query pool where none is free; `None` where
    /// the device holds `max_blocks` already or the pool cannot be made.
    /// `reset`, when given, resets the block's queries on the host (so that
    /// its first use needs no reset on the GPU).
    pub fn take(
        &self,
        device: &ash::Device,
        reset: Option<vk::PFN_vkResetQueryPool>,
    ) -> Option<Block> {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let index = match s.free.pop() {
            Some(i) => i,
            None => {
                let made = s.pools.len() as u32 * POOL_BLOCKS;
                if made >= self.max_blocks {
                    return None;
                }
                let info = vk::QueryPoolCreateInfo::default()
                    .query_type(self.kind)
                    .query_count(POOL_BLOCKS * self.size)
                    .pipeline_statistics(self.statistics);
                // SAFETY: a valid create info on a live device; the pool is
                // destroyed in `destroy`, after every use of it.
                let pool = unsafe { device.create_query_pool(&info, None) }.ok()?;
                s.pools.push(pool);
                let base = made;
                s.free.extend((base + 1..base + POOL_BLOCKS).rev());
                base
            }
        };
        let pool = s.pools[(index / POOL_BLOCKS) as usize];
        let first = (index % POOL_BLOCKS) * self.size;
        drop(s);
        if let Some(reset) = reset {
            // SAFETY: the block is free: no recording holds it and no
            // execution in flight uses it (both hold the block until done).
            unsafe { reset(device.handle(), pool, first, self.size) };
        }
        Some(Block {
            pool,
            first,
            index,
            owner: Arc::downgrade(&self.state),
        })
    }

    /// Destroys every query pool.
    ///
    /// # Safety
    ///
    /// No GPU work uses them any more.
    pub unsafe fn destroy(&self, device: &ash::Device) {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        for p in s.pools.drain(..) {
            // SAFETY: the caller's promise.
            unsafe { device.destroy_query_pool(p, None) };
        }
        s.free.clear();
    }

    /// Blocks made so far.
    pub fn made(&self) -> u32 {
        self.state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pools
            .len() as u32
            * POOL_BLOCKS
    }
}
