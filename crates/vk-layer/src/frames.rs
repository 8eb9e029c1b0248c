//! A device's frames as the reader accumulates them: the one open now and
//! those waiting for their executions to be read.

use std::collections::VecDeque;

/// A frame being accumulated.
#[derive(Debug)]
pub(crate) struct FrameAcc {
    pub(crate) n: u64,
    pub(crate) cpu_start: u64,
    pub(crate) cpu_end: Option<u64>,
    pub(crate) presented: bool,
    pub(crate) executions: u32,
    pub(crate) untimed: u32,
    pub(crate) pending: u32,
    pub(crate) gpu: Option<(u64, u64)>,
    pub(crate) bound: u64,
}

/// A device's frames: the one open now and those waiting for their
/// executions to be read.
#[derive(Debug, Default)]
pub struct Frames {
    pub(crate) presented: bool,
    pub(crate) next: u64,
    pub(crate) open: Option<u64>,
    pub(crate) frames: VecDeque<FrameAcc>,
    pub(crate) boundary: u64,
    pub(crate) last_submit: u64,
}

impl Frames {
    pub(crate) fn find(&mut self, n: u64) -> Option<&mut FrameAcc> {
        self.frames.iter_mut().find(|f| f.n == n)
    }

    pub(crate) fn open_frame(&mut self, start: u64) -> u64 {
        self.next += 1;
        let n = self.next;
        self.frames.push_back(FrameAcc {
            n,
            cpu_start: start,
            cpu_end: None,
            presented: false,
            executions: 0,
            untimed: 0,
            pending: 0,
            gpu: None,
            bound: 0,
        });
        self.open = Some(n);
        n
    }
}
