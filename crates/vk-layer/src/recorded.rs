//! What a command buffer's recording holds: its query blocks, its events
//! in order, and (while it is recorded) its open scopes. The recording
//! itself is done by [`crate::recording`].

use crate::blocks::Block;
use ash::vk;
use std::sync::Mutex;

/// No query: a scope or label end that could not be timed.
pub const NO_QUERY: u32 = u32::MAX;
/// Timestamps per block.
pub const TS_BLOCK: u32 = 32;
/// Pipeline statistics queries per block.
pub const STAT_BLOCK: u32 = 8;
/// Timestamps one recording takes at most; what is past them is not
/// timed, and counted.
pub const MAX_TIMESTAMPS: u32 = 1 << 16;

/// A name: an interned string's id, or the text where the table is full.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NameRef {
    /// A string the sink sent.
    Id(u32),
    /// The text.
    Text(Box<str>),
}

/// What a recording timed, in recorded order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A scope wholly inside the command buffer.
    Scope {
        /// One of `scope_kind`.
        kind: u8,
        /// Its name.
        name: NameRef,
        /// The start's query ([`NO_QUERY`]: not timed).
        start: u32,
        /// The end's query.
        end: u32,
        /// Its statistics query, if any.
        stat: Option<u32>,
    },
    /// A debug label begun (it may end in another command buffer).
    LabelBegin {
        /// Its text.
        name: NameRef,
        /// The start's query.
        q: u32,
    },
    /// The innermost label ended.
    LabelEnd {
        /// The end's query.
        q: u32,
    },
}

/// Whether the queries of a [`Recorded`] are reset (on the host) and how
/// many executions of it are in flight.
#[derive(Debug, Default)]
pub struct ResetState {
    /// Executions submitted and not yet read.
    pub in_flight: u32,
    /// Every query it uses was reset on the host since its last execution.
    pub host_reset: bool,
    /// The queue its executions in flight run on.
    pub queue: u32,
}

/// A finished recording, shared by its executions.
#[derive(Debug, Default)]
pub struct Recorded {
    /// Timestamp blocks.
    pub ts: Vec<Block>,
    /// Timestamps used (0 and 1 are the command buffer's start and end).
    pub ts_used: u32,
    /// Statistics blocks.
    pub stats: Vec<Block>,
    /// Statistics queries used.
    pub stat_used: u32,
    /// What it timed.
    pub events: Vec<Event>,
    /// Scopes it could not time (queries or blocks ran out).
    pub capped: u64,
    /// Scopes recorded in the secondary command buffers it executes.
    pub secondary_scopes: u64,
    /// Reset bookkeeping.
    pub reset: Mutex<ResetState>,
    /// Its end (query 1) was written at `vkEndCommandBuffer`.
    pub end_written: bool,
}

impl Recorded {
    /// Whether its executions are timed (it holds its first block).
    pub fn timed(&self) -> bool {
        self.ts_used >= 2
    }

    /// The pool and query of timestamp `i`.
    pub fn ts_at(&self, i: u32) -> (vk::QueryPool, u32) {
        let b = &self.ts[(i / TS_BLOCK) as usize];
        (b.pool, b.first + i % TS_BLOCK)
    }

    /// The pool and query of statistics query `i`.
    pub fn stat_at(&self, i: u32) -> (vk::QueryPool, u32) {
        let b = &self.stats[(i / STAT_BLOCK) as usize];
        (b.pool, b.first + i % STAT_BLOCK)
    }

    /// The used ranges of its blocks: (pool, first, count, kind is
    /// statistics).
    pub fn ranges(&self) -> impl Iterator<Item = (vk::QueryPool, u32, u32, bool)> + '_ {
        let used = |used: u32, size: u32, k: usize| (used - (k as u32 * size)).min(size);
        let ts = self
            .ts
            .iter()
            .enumerate()
            .map(move |(k, b)| (b.pool, b.first, used(self.ts_used, TS_BLOCK, k), false));
        let st = self
            .stats
            .iter()
            .enumerate()
            .map(move |(k, b)| (b.pool, b.first, used(self.stat_used, STAT_BLOCK, k), true));
        ts.chain(st).filter(|r| r.2 > 0)
    }

    /// Scopes and labels it times (for counting what is lost with it).
    pub fn scope_count(&self) -> u64 {
        self.events
            .iter()
            .filter(|e| !matches!(e, Event::LabelEnd { .. }))
            .count() as u64
            + 1
    }
}

/// An open run of dispatches or copies.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Group {
    pub(crate) kind: u8,
    pub(crate) start: u32,
    pub(crate) stat: Option<u32>,
}

/// An open render pass.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Pass {
    pub(crate) kind: u8,
    pub(crate) start: u32,
    pub(crate) stat: Option<u32>,
    /// Timestamps may be written inside it (inline contents, no multiview).
    pub(crate) inside: bool,
    /// Suspended (dynamic rendering with `SUSPENDING`): it resumes later.
    pub(crate) suspended: bool,
    /// Already counted as not timed.
    pub(crate) counted: bool,
}

/// A command buffer being recorded.
#[derive(Debug)]
pub struct Recording {
    /// What it becomes.
    pub data: Recorded,
    /// Primary in a family with timestamps: timed. Otherwise only counted.
    pub(crate) timed: bool,
    pub(crate) graphics: bool,
    pub(crate) group: Option<Group>,
    pub(crate) pass: Option<Pass>,
    /// An open draw or dispatch of the finer levels: its start and kind.
    pub(crate) fine: Option<(u32, u8, &'static str)>,
    /// The blocks ran out: nothing more is timed.
    pub(crate) out_of_queries: bool,
    /// Scopes recorded while not timed (a secondary command buffer's).
    pub(crate) seen: u64,
    /// The open dynamic rendering instance suspends at its end.
    pub suspending: bool,
}

/// What the layer records for one kind of command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// A dispatch (named).
    Dispatch(&'static str),
    /// A transfer command.
    Copy,
    /// A draw (named).
    Draw(&'static str),
}
