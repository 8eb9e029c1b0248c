//! The profiler's state on one recorder, kept in the recorder's
//! [`ScopeStack`](gpu_counters_hal::ScopeStack) (which the backend holds and only this crate's type can be
//! read from): per frame, the innermost scope open on the recorder (the
//! profiler keeps each scope's parent, so this is a whole stack), and the
//! scope ids it claimed from the frame and has not used yet.
//!
//! Frames are told apart by a key unique in the process. A recorder rarely
//! has scopes of more than one frame open, so the first frame's entry is
//! kept inline.
//!
//! The profiler writes a scope's record without a lock because each id is
//! handed to one recorder only, and a recorder's innermost scope was begun
//! on it. So a stack cannot be cloned, and what puts an id on it is
//! `unsafe`. No other crate can reach a [`Stack`]: a backend can move,
//! swap or drop the `ScopeStack` that holds it, never forge or copy one.

use gpu_counters_hal::BackendRecorder;

/// The profiler's [`Stack`] on `cmd` (an empty one where the recorder has
/// none).
#[inline(always)]
pub(crate) fn stack<R: BackendRecorder + ?Sized>(cmd: &mut R) -> &mut Stack {
    cmd.scope_stack().state::<Stack>()
}

/// The scopes open on one recorder and the ids it holds, per frame.
#[derive(Debug, Default)]
pub(crate) struct Stack {
    first: StackEntry,
    /// Entries of further frames.
    more: Vec<StackEntry>,
}

/// One frame's entry in a [`Stack`]; frame 0 is no entry (frame keys
/// start at 1).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StackEntry {
    frame: u64,
    innermost: Option<u32>,
    /// Claimed ids not used yet: `next..end`.
    next: u32,
    end: u32,
    /// How many ids the recorder asked for in its last claim (it may have
    /// got fewer).
    block: u32,
}

impl StackEntry {
    /// Takes the next unused id the recorder claimed from the entry's
    /// frame.
    #[inline]
    pub(crate) fn take_claimed(&mut self) -> Option<u32> {
        if self.next < self.end {
            self.next += 1;
            Some(self.next - 1)
        } else {
            None
        }
    }

    /// The innermost scope of the entry's frame open on the recorder, as
    /// the profiler last set it.
    #[inline]
    pub(crate) fn innermost(&self) -> Option<u32> {
        self.innermost
    }

    /// Makes `scope` the innermost open scope of the entry's frame.
    ///
    /// # Safety
    /// As [`Stack::set_innermost`].
    #[inline]
    #[allow(unsafe_code)]
    pub(crate) unsafe fn set_innermost(&mut self, scope: Option<u32>) {
        self.innermost = scope;
    }
}

impl Stack {
    #[inline]
    fn entry(&self, frame: u64) -> Option<&StackEntry> {
        if frame == 0 {
            return None;
        }
        if self.first.frame == frame {
            return Some(&self.first);
        }
        self.more.iter().find(|e| e.frame == frame)
    }

    /// The entry of `frame`, if there is one.
    #[inline]
    fn existing_mut(&mut self, frame: u64) -> Option<&mut StackEntry> {
        if frame == 0 {
            return None;
        }
        if self.first.frame == frame {
            return Some(&mut self.first);
        }
        self.more.iter_mut().find(|e| e.frame == frame)
    }

    /// The entry of `frame` (not 0), made if there is none. A new entry
    /// takes the place of one with no scope open (its unused ids are given
    /// up).
    #[inline]
    pub(crate) fn entry_mut(&mut self, frame: u64) -> &mut StackEntry {
        if self.first.frame != frame {
            if self.first.innermost.is_some() {
                return self.more_mut(frame);
            }
            if let Some(i) = self.more.iter().position(|e| e.frame == frame) {
                std::mem::swap(&mut self.first, &mut self.more[i]);
            } else {
                self.first = StackEntry {
                    frame,
                    ..StackEntry::default()
                };
            }
        }
        &mut self.first
    }

    #[cold]
    fn more_mut(&mut self, frame: u64) -> &mut StackEntry {
        let fresh = StackEntry {
            frame,
            ..StackEntry::default()
        };
        let i = match self.more.iter().position(|e| e.frame == frame) {
            Some(i) => i,
            None => match self.more.iter().position(|e| e.innermost.is_none()) {
                Some(i) => {
                    self.more[i] = fresh;
                    i
                }
                None => {
                    self.more.push(fresh);
                    self.more.len() - 1
                }
            },
        };
        &mut self.more[i]
    }

    /// The innermost scope open on the recorder in frame `frame`, as the
    /// profiler last set it.
    #[inline]
    pub(crate) fn innermost(&self, frame: u64) -> Option<u32> {
        self.entry(frame).and_then(|e| e.innermost)
    }

    /// Sets the innermost open scope of frame `frame` (`None`: no scope of
    /// the frame is open on the recorder). Frame 0 is ignored.
    ///
    /// # Safety
    /// `scope` is a scope of frame `frame` begun on this stack's recorder
    /// (and, once it is set, its record was written): the profiler reads
    /// the record of the innermost scope without a lock.
    #[inline]
    #[allow(unsafe_code)]
    pub(crate) unsafe fn set_innermost(&mut self, frame: u64, scope: Option<u32>) {
        if frame == 0 || (scope.is_none() && self.entry(frame).is_none()) {
            return;
        }
        self.entry_mut(frame).innermost = scope;
    }

    /// Ends the innermost scope of frame `frame`, `from`, if it is the
    /// innermost one: sets `outer` in its place and returns true, in one
    /// lookup of the frame's entry; returns false, changing nothing,
    /// otherwise.
    ///
    /// # Safety
    /// As [`Stack::set_innermost`] of `outer`.
    #[inline]
    #[allow(unsafe_code)]
    pub(crate) unsafe fn end_innermost(
        &mut self,
        frame: u64,
        from: u32,
        outer: Option<u32>,
    ) -> bool {
        let e = if self.first.frame == frame {
            Some(&mut self.first)
        } else {
            self.existing_mut(frame)
        };
        match e {
            Some(e) if e.innermost == Some(from) => {
                e.innermost = outer;
                true
            }
            _ => false,
        }
    }

    /// Takes the next unused id this recorder claimed from frame `frame`
    /// (the profiler takes them through [`Stack::entry_mut`]).
    #[cfg(test)]
    pub(crate) fn take_claimed(&mut self, frame: u64) -> Option<u32> {
        self.existing_mut(frame)?.take_claimed()
    }

    /// How many ids the recorder asked for when it last claimed from frame
    /// `frame` (0 if it did not).
    #[inline]
    pub(crate) fn last_claim(&self, frame: u64) -> u32 {
        self.entry(frame).map_or(0, |e| e.block)
    }

    /// Keeps the ids of `claim`, claimed from frame `frame` when `asked`
    /// were asked for, but its first (which the caller uses), for
    /// [`Stack::take_claimed`], in place of what was left of the last
    /// claim. Frame 0 is ignored.
    ///
    /// # Safety
    /// `claim` was claimed from frame `frame`'s counter for this stack
    /// alone: the profiler writes the record of an id it takes from here
    /// without a lock.
    #[allow(unsafe_code)]
    pub(crate) unsafe fn keep_claimed(
        &mut self,
        frame: u64,
        claim: std::ops::Range<u32>,
        asked: u32,
    ) {
        if frame == 0 {
            return;
        }
        let e = self.entry_mut(frame);
        e.block = asked;
        (e.next, e.end) = (claim.start.saturating_add(1), claim.end);
    }

    /// Whether no scope of any frame is open on the recorder (as far as the
    /// profiler set it).
    #[inline]
    pub(crate) fn no_open_scopes(&self) -> bool {
        self.first.innermost.is_none() && self.more.iter().all(|e| e.innermost.is_none())
    }
}

#[cfg(test)]
mod tests {
    use super::Stack;

    /// Entries per frame: the innermost scope and the claimed ids of each
    /// frame are kept apart, a second frame goes beside the first, and an
    /// entry with no scope open makes room for another frame.
    #[test]
    #[allow(unsafe_code)]
    fn entries_per_frame() {
        let mut s = Stack::default();
        assert_eq!(s.innermost(1), None);
        assert_eq!(s.take_claimed(1), None);
        assert!(s.no_open_scopes());
        // SAFETY: a test of the bookkeeping alone; no records are read.
        unsafe {
            s.keep_claimed(1, 10..14, 4);
            s.set_innermost(1, Some(10));
            s.keep_claimed(2, 20..22, 3);
            s.set_innermost(2, Some(20));
        }
        assert_eq!(s.last_claim(1), 4);
        assert_eq!(s.last_claim(2), 3, "what it asked for");
        assert_eq!((s.take_claimed(1), s.take_claimed(1)), (Some(11), Some(12)));
        assert_eq!((s.take_claimed(2), s.take_claimed(2)), (Some(21), None));
        assert_eq!((s.innermost(1), s.innermost(2)), (Some(10), Some(20)));
        assert!(!s.no_open_scopes());
        // SAFETY: as above.
        unsafe { s.set_innermost(1, None) };
        assert_eq!(s.innermost(1), None);
        // Frame 1 keeps its ids while it has no scope open...
        assert_eq!(s.take_claimed(1), Some(13));
        // SAFETY: as above.
        unsafe {
            s.set_innermost(2, None);
            // ...until a new frame takes its place.
            s.keep_claimed(3, 30..31, 1);
        }
        assert!(s.no_open_scopes());
        assert_eq!(s.take_claimed(3), None, "the first id is the caller's");
        assert_eq!(s.last_claim(3), 1);
        // Frame 0 is no frame.
        // SAFETY: as above.
        unsafe {
            s.set_innermost(0, Some(1));
            s.keep_claimed(0, 0..8, 8);
        }
        assert_eq!((s.innermost(0), s.take_claimed(0)), (None, None));
    }
}
