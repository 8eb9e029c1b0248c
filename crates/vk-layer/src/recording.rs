//! What the layer records into a command buffer, and what it keeps of it.
//!
//! A primary command buffer of a family with timestamps gets, as it is
//! recorded, timestamp writes at the boundaries of what it times (render
//! passes, runs of dispatches, runs of copies, debug labels; each draw or
//! dispatch at the finer levels), into query blocks it holds. Indices 0 and
//! 1 of its first block are its own start and end, written first thing at
//! `vkBeginCommandBuffer` and last thing at `vkEndCommandBuffer`.
//!
//! Starts are written at `TOP_OF_PIPE` and ends at `BOTTOM_OF_PIPE`, so a
//! scope's interval holds all of its work. Render passes are timed from
//! outside (a write before `vkCmdBeginRenderPass*` and after the end), so
//! multiview and secondary-contents passes are timed too; labels, draws
//! and dispatches inside a pass are timed only in a pass whose contents
//! are recorded inline and that is not multiview (where a timestamp would
//! take one query per view). Secondary command buffers are timed as a
//! whole from the primary (outside a render pass) or by their pass; what is
//! recorded in them is counted, not timed.
//!
//! At `vkEndCommandBuffer` the recording becomes a [`Recorded`]: its blocks
//! and its events in order, shared by every execution of it until each is
//! read.

use crate::device::Active;
pub use crate::recorded::{
    Event, NameRef, Op, Recorded, Recording, ResetState, MAX_TIMESTAMPS, NO_QUERY, STAT_BLOCK,
    TS_BLOCK,
};
use crate::recorded::{Group, Pass};
use ash::vk;

impl Recording {
    /// A recording of `cb` (begun); `timed` for a primary command buffer of
    /// a family with timestamps, whose start is written now if its first
    /// block can be taken. `graphics`: the family supports graphics
    /// (statistics need it).
    pub fn new(dev: &Active, cb: vk::CommandBuffer, timed: bool, graphics: bool) -> Recording {
        let mut r = Recording {
            data: Recorded::default(),
            timed,
            graphics,
            group: None,
            pass: None,
            fine: None,
            out_of_queries: false,
            seen: 0,
            suspending: false,
        };
        if timed {
            match dev.ts_blocks.take(&dev.ash, dev.host_reset) {
                Some(b) => {
                    r.data.ts.push(b);
                    r.data.ts_used = 2;
                    r.data
                        .reset
                        .get_mut()
                        .unwrap_or_else(|e| e.into_inner())
                        .host_reset = dev.host_reset.is_some();
                    let (pool, q) = r.data.ts_at(0);
                    // SAFETY: `cb` was just begun (outside any render pass)
                    // on a family with timestamps; the query is reset on the
                    // host or on the GPU before each execution.
                    unsafe {
                        dev.ash.cmd_write_timestamp(
                            cb,
                            vk::PipelineStageFlags::TOP_OF_PIPE,
                            pool,
                            q,
                        )
                    };
                }
                None => {
                    r.timed = false;
                    r.data.capped += 1;
                }
            }
        }
        r
    }

    /// Whether the command buffer is timed.
    pub fn timed(&self) -> bool {
        self.timed
    }

    fn next_ts(&mut self, dev: &Active) -> Option<u32> {
        if !self.timed || self.out_of_queries {
            return None;
        }
        let i = self.data.ts_used;
        if i >= MAX_TIMESTAMPS {
            self.out_of_queries = true;
            return None;
        }
        if i >= self.data.ts.len() as u32 * TS_BLOCK {
            match dev.ts_blocks.take(&dev.ash, dev.host_reset) {
                Some(b) => self.data.ts.push(b),
                None => {
                    self.out_of_queries = true;
                    return None;
                }
            }
        }
        self.data.ts_used += 1;
        Some(i)
    }

    /// Writes a timestamp at `stage`; its index, or [`NO_QUERY`] where none
    /// is left.
    fn ts(&mut self, dev: &Active, cb: vk::CommandBuffer, stage: vk::PipelineStageFlags) -> u32 {
        match self.next_ts(dev) {
            Some(i) => {
                let (pool, q) = self.data.ts_at(i);
                // SAFETY: `cb` is recording (the application's call we are
                // in), outside a render pass or inside one whose contents
                // are inline (callers check), on a family with timestamps;
                // the query was reset (on the host, or on the GPU before
                // each execution).
                unsafe { dev.ash.cmd_write_timestamp(cb, stage, pool, q) };
                i
            }
            None => NO_QUERY,
        }
    }

    fn stat_begin(&mut self, dev: &Active, cb: vk::CommandBuffer) -> Option<u32> {
        if !self.timed || self.out_of_queries || !self.graphics || dev.statistics.is_none() {
            return None;
        }
        let i = self.data.stat_used;
        if i >= self.data.stats.len() as u32 * STAT_BLOCK {
            let blocks = dev.stat_blocks.as_ref()?;
            match blocks.take(&dev.ash, dev.host_reset) {
                Some(b) => self.data.stats.push(b),
                None => return None,
            }
        }
        self.data.stat_used += 1;
        let (pool, q) = self.data.stat_at(i);
        // SAFETY: `cb` is recording outside a render pass on a graphics
        // family, no statistics query of the layer is active in it (passes
        // and runs do not nest), and the query was reset.
        unsafe {
            dev.ash
                .cmd_begin_query(cb, pool, q, vk::QueryControlFlags::empty())
        };
        Some(i)
    }

    fn stat_end(&self, dev: &Active, cb: vk::CommandBuffer, stat: Option<u32>) {
        if let Some(i) = stat {
            let (pool, q) = self.data.stat_at(i);
            // SAFETY: the query was begun in this command buffer, at the
            // same render pass level.
            unsafe { dev.ash.cmd_end_query(cb, pool, q) };
        }
    }

    /// Counts a scope recorded where nothing is timed (a secondary command
    /// buffer, a family without timestamps).
    fn untimed_scope(&mut self) {
        self.seen += 1;
    }

    /// Timestamps may be written here: outside a render pass, or inside
    /// one that allows them.
    fn can_write(&self) -> bool {
        self.pass.is_none_or(|p| p.inside && !p.suspended)
    }

    /// Ends the open run of dispatches or copies.
    pub fn close_group(&mut self, dev: &Active, cb: vk::CommandBuffer) {
        if !self.timed {
            self.group = None;
            return;
        }
        if let Some(g) = self.group.take() {
            let end = if g.start == NO_QUERY {
                NO_QUERY
            } else {
                self.ts(dev, cb, vk::PipelineStageFlags::BOTTOM_OF_PIPE)
            };
            self.stat_end(dev, cb, g.stat);
            let name = crate::device::kind_name(dev, g.kind);
            self.push_scope(g.kind, name, g.start, end, g.stat);
        }
    }

    fn push_scope(&mut self, kind: u8, name: NameRef, start: u32, end: u32, stat: Option<u32>) {
        if start == NO_QUERY || end == NO_QUERY {
            self.data.capped += 1;
            return;
        }
        self.data.events.push(Event::Scope {
            kind,
            name,
            start,
            end,
            stat,
        });
    }

    /// Before a dispatch, copy or draw.
    pub fn before(&mut self, dev: &Active, cb: vk::CommandBuffer, op: Op) {
        use gpu_counters_record::protocol::scope_kind as k;
        if !self.timed {
            if matches!(op, Op::Dispatch(_) | Op::Copy) && self.group.is_none() {
                self.untimed_scope();
                self.group = Some(Group {
                    kind: 0,
                    start: NO_QUERY,
                    stat: None,
                });
            }
            return;
        }
        match op {
            Op::Dispatch(_) | Op::Copy if self.pass.is_none() => {
                let kind = if matches!(op, Op::Copy) {
                    k::COPY
                } else {
                    k::COMPUTE
                };
                if self.group.is_some_and(|g| g.kind != kind) {
                    self.close_group(dev, cb);
                }
                if self.group.is_none() {
                    let start = self.ts(dev, cb, vk::PipelineStageFlags::TOP_OF_PIPE);
                    let stat = if kind == k::COMPUTE && start != NO_QUERY {
                        self.stat_begin(dev, cb)
                    } else {
                        None
                    };
                    self.group = Some(Group { kind, start, stat });
                }
                if let Op::Dispatch(name) = op {
                    if dev.level == crate::config::Level::Dispatch {
                        let start = self.ts(dev, cb, vk::PipelineStageFlags::TOP_OF_PIPE);
                        self.fine = Some((start, k::DISPATCH, name));
                    }
                }
            }
            Op::Draw(name) if dev.level == crate::config::Level::Draw => {
                if self.can_write() {
                    let start = self.ts(dev, cb, vk::PipelineStageFlags::TOP_OF_PIPE);
                    self.fine = Some((start, k::DRAW, name));
                } else {
                    // Multiview or secondary contents: one query per view,
                    // or none allowed.
                    self.data.capped += 1;
                }
            }
            _ => {}
        }
    }

    /// After a dispatch or draw of the finer levels.
    pub fn after(&mut self, dev: &Active, cb: vk::CommandBuffer) {
        if let Some((start, kind, name)) = self.fine.take() {
            let end = if start == NO_QUERY {
                NO_QUERY
            } else {
                self.ts(dev, cb, vk::PipelineStageFlags::BOTTOM_OF_PIPE)
            };
            let name = crate::device::static_name(dev, name);
            self.push_scope(kind, name, start, end, None);
        }
    }

    /// Before a render pass begins (`kind` render pass); `inside`: its
    /// contents are inline and it is not multiview. `resuming`: a dynamic
    /// rendering instance that resumes a suspended one.
    pub fn begin_pass(
        &mut self,
        dev: &Active,
        cb: vk::CommandBuffer,
        kind: u8,
        inside: bool,
        resuming: bool,
    ) {
        self.close_group(dev, cb);
        if !self.timed {
            if !resuming {
                self.untimed_scope();
            }
            self.pass = Some(Pass {
                kind,
                start: NO_QUERY,
                stat: None,
                inside: false,
                suspended: false,
                counted: true,
            });
            return;
        }
        if resuming {
            if let Some(p) = self.pass.as_mut().filter(|p| p.suspended) {
                p.suspended = false;
                p.inside = inside;
                return;
            }
            // Resumes a pass suspended in another command buffer: its
            // pieces are not timed.
            self.data.capped += 1;
            self.pass = Some(Pass {
                kind,
                start: NO_QUERY,
                stat: None,
                inside,
                suspended: false,
                counted: true,
            });
            return;
        }
        let start = self.ts(dev, cb, vk::PipelineStageFlags::TOP_OF_PIPE);
        let stat = if start != NO_QUERY {
            self.stat_begin(dev, cb)
        } else {
            None
        };
        self.pass = Some(Pass {
            kind,
            start,
            stat,
            inside,
            suspended: false,
            counted: false,
        });
    }

    /// A subpass begun with `inside` contents (`inside` is false for a
    /// subpass whose contents are secondary command buffers).
    pub fn next_subpass(&mut self, inside: bool) {
        if let Some(p) = self.pass.as_mut() {
            p.inside = inside && p.inside;
        }
    }

    /// After a render pass ended; `suspending`: a dynamic rendering
    /// instance suspended (it resumes later).
    pub fn end_pass(&mut self, dev: &Active, cb: vk::CommandBuffer, suspending: bool) {
        let Some(mut p) = self.pass.take() else {
            return;
        };
        if suspending {
            p.suspended = true;
            self.pass = Some(p);
            return;
        }
        if !self.timed || p.counted {
            return;
        }
        let end = if p.start == NO_QUERY {
            NO_QUERY
        } else {
            self.ts(dev, cb, vk::PipelineStageFlags::BOTTOM_OF_PIPE)
        };
        self.stat_end(dev, cb, p.stat);
        let name = crate::device::kind_name(dev, p.kind);
        self.push_scope(p.kind, name, p.start, end, p.stat);
    }

    /// A debug label begun.
    pub fn label_begin(&mut self, dev: &Active, cb: vk::CommandBuffer, name: NameRef) {
        self.close_group(dev, cb);
        if !self.timed {
            self.untimed_scope();
            return;
        }
        let q = if self.can_write() {
            self.ts(dev, cb, vk::PipelineStageFlags::TOP_OF_PIPE)
        } else {
            NO_QUERY
        };
        self.data.events.push(Event::LabelBegin { name, q });
    }

    /// The innermost debug label ended.
    pub fn label_end(&mut self, dev: &Active, cb: vk::CommandBuffer) {
        self.close_group(dev, cb);
        if !self.timed {
            return;
        }
        let q = if self.can_write() {
            self.ts(dev, cb, vk::PipelineStageFlags::BOTTOM_OF_PIPE)
        } else {
            NO_QUERY
        };
        self.data.events.push(Event::LabelEnd { q });
    }

    /// Before `vkCmdExecuteCommands` of secondaries whose recordings
    /// counted `scopes` scopes; returns the start of the scope to end with
    /// [`Recording::after_execute`] (outside a render pass).
    pub fn before_execute(&mut self, dev: &Active, cb: vk::CommandBuffer, scopes: u64) -> u32 {
        self.close_group(dev, cb);
        self.data.secondary_scopes += scopes;
        if !self.timed || self.pass.is_some() {
            return NO_QUERY;
        }
        self.ts(dev, cb, vk::PipelineStageFlags::TOP_OF_PIPE)
    }

    /// After `vkCmdExecuteCommands` begun with `start`.
    pub fn after_execute(&mut self, dev: &Active, cb: vk::CommandBuffer, start: u32) {
        if start == NO_QUERY {
            return;
        }
        let end = self.ts(dev, cb, vk::PipelineStageFlags::BOTTOM_OF_PIPE);
        let name =
            crate::device::kind_name(dev, gpu_counters_record::protocol::scope_kind::SECONDARY);
        self.push_scope(
            gpu_counters_record::protocol::scope_kind::SECONDARY,
            name,
            start,
            end,
            None,
        );
    }

    /// At `vkEndCommandBuffer`: closes what is open and hands over what was
    /// recorded.
    pub fn finish(mut self, dev: &Active, cb: vk::CommandBuffer) -> Recorded {
        self.close_group(dev, cb);
        let suspended = self.pass.take();
        if let Some(p) = suspended {
            // Suspended at the end: it resumes in another command buffer,
            // and is not timed.
            if self.timed && !p.counted {
                self.stat_end(dev, cb, p.stat);
                self.data.capped += 1;
            }
        }
        if self.timed && self.data.ts_used >= 2 {
            if suspended.is_some() {
                // Nothing may come between a suspended render pass and its
                // resumption: the end is not written, and the execution
                // reads as not timed.
                self.data.end_written = false;
            } else {
                let (pool, q) = self.data.ts_at(1);
                // SAFETY: `cb` is recording, outside a render pass; the
                // query was reset with the start's.
                unsafe {
                    dev.ash
                        .cmd_write_timestamp(cb, vk::PipelineStageFlags::BOTTOM_OF_PIPE, pool, q)
                };
                self.data.end_written = true;
            }
        }
        self.data
    }

    /// Scopes recorded while not timed (for a secondary command buffer:
    /// what each execution of it leaves untimed).
    pub fn seen(&self) -> u64 {
        self.seen
    }
}
