//! Nesting intervals onto tracks that viewers draw as stacks of slices.
//!
//! Perfetto's begin/end slices and Tracy's GPU zones must nest on their
//! track: an interval that starts inside another must end inside it. A queue
//! normally runs its intervals nested or one after another, but intervals of
//! two frames in flight, or of two command buffers, can overlap without
//! nesting. [`Lanes`] places each interval on the first *lane* (lane 0 is
//! the track itself, lanes 1, 2, ... are extra tracks beside it) where it
//! nests, and reports the begin and end events of each lane in an order that
//! nests: outer begin, inner begin, inner end, outer end.
//!
//! Its memory is one stack per lane, as deep as the deepest nesting, and it
//! is emptied at the end of every [`Lanes::place`] call (a frame).

use gpu_counters_hal::timeline::TimelineFrame;

/// One event of a lane: an interval begins or ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LaneEvent<T> {
    /// `item` begins on `lane` at `at`.
    Begin {
        /// The lane (0: the track itself).
        lane: usize,
        /// The caller's item.
        item: T,
        /// Its start.
        at: u64,
    },
    /// `item` ends on `lane` at `at`.
    End {
        /// The lane.
        lane: usize,
        /// The caller's item.
        item: T,
        /// Its end.
        at: u64,
    },
}

#[derive(Debug, Default)]
struct Lane<T> {
    /// Open intervals, outermost first: (start, end, item).
    open: Vec<(u64, u64, T)>,
    /// The latest end of an interval closed on this lane: a later interval
    /// must not start before it.
    closed_until: u64,
}

/// Lanes of one track, kept from one [`Lanes::place`] call to the next so
/// that an interval overlapping one of an earlier call goes beside it.
#[derive(Debug)]
pub(crate) struct Lanes<T> {
    lanes: Vec<Lane<T>>,
}

impl<T> Default for Lanes<T> {
    fn default() -> Self {
        Self { lanes: Vec::new() }
    }
}

impl<T: Copy> Lanes<T> {
    /// How many lanes have been used so far.
    #[cfg(test)]
    pub(crate) fn count(&self) -> usize {
        self.lanes.len()
    }

    /// Places `items`, given as `(start, end, item)` sorted by start, then
    /// longer first (parents before children at the same start), and calls
    /// `emit` with every begin and end in nesting order; closes every
    /// interval before it returns. An `end` before its `start` counts as
    /// `start`.
    pub(crate) fn place(
        &mut self,
        items: impl IntoIterator<Item = (u64, u64, T)>,
        mut emit: impl FnMut(LaneEvent<T>),
    ) {
        for (start, end, item) in items {
            let end = end.max(start);
            let mut chosen = None;
            for (n, lane) in self.lanes.iter_mut().enumerate() {
                // Close what ended before this interval starts, unless this
                // interval nests in it (a zero-length child at its end).
                while let Some(&(s, e, it)) = lane.open.last() {
                    let nests = s <= start && end <= e;
                    if nests || e > start {
                        break;
                    }
                    lane.open.pop();
                    lane.closed_until = lane.closed_until.max(e);
                    emit(LaneEvent::End {
                        lane: n,
                        item: it,
                        at: e,
                    });
                }
                let fits = match lane.open.last() {
                    Some(&(s, e, _)) => s <= start && end <= e,
                    None => true,
                };
                if fits && start >= lane.closed_until {
                    chosen = Some(n);
                    break;
                }
            }
            let n = chosen.unwrap_or_else(|| {
                self.lanes.push(Lane {
                    open: Vec::new(),
                    closed_until: 0,
                });
                self.lanes.len() - 1
            });
            self.lanes[n].open.push((start, end, item));
            emit(LaneEvent::Begin {
                lane: n,
                item,
                at: start,
            });
        }
        for (n, lane) in self.lanes.iter_mut().enumerate() {
            while let Some((_, e, it)) = lane.open.pop() {
                lane.closed_until = lane.closed_until.max(e);
                emit(LaneEvent::End {
                    lane: n,
                    item: it,
                    at: e,
                });
            }
        }
    }
}

/// Sorts `items` as [`Lanes::place`] wants them: by start, longer first, then
/// in the given order (parents come before their children in a frame).
pub(crate) fn sort_for_lanes<T: Copy + Ord>(items: &mut [(u64, u64, T)]) {
    items.sort_by(|a, b| {
        a.0.cmp(&b.0)
            .then_with(|| b.1.max(b.0).cmp(&a.1.max(a.0)))
            .then_with(|| a.2.cmp(&b.2))
    });
}

/// The queues of a frame's intervals, in order of first appearance.
pub(crate) fn frame_queues(frame: &TimelineFrame) -> Vec<&str> {
    let mut queues: Vec<&str> = Vec::new();
    for i in &frame.intervals {
        if !queues.contains(&i.queue.as_str()) {
            queues.push(&i.queue);
        }
    }
    queues
}

/// The frame's intervals on `queue` as [`Lanes::place`] items (their
/// indices in the frame), sorted.
pub(crate) fn queue_items(frame: &TimelineFrame, queue: &str) -> Vec<(u64, u64, usize)> {
    let mut items: Vec<(u64, u64, usize)> = frame
        .intervals
        .iter()
        .enumerate()
        .filter(|(_, i)| i.queue == queue)
        .map(|(n, i)| (i.start_ns, i.end_ns, n))
        .collect();
    sort_for_lanes(&mut items);
    items
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(lanes: &mut Lanes<u32>, mut items: Vec<(u64, u64, u32)>) -> Vec<LaneEvent<u32>> {
        sort_for_lanes(&mut items);
        let mut out = Vec::new();
        lanes.place(items, |e| out.push(e));
        out
    }

    use LaneEvent::{Begin as B, End as E};

    #[test]
    fn nested_intervals_share_lane_zero_in_nesting_order() {
        let mut lanes = Lanes::default();
        let ev = run(
            &mut lanes,
            vec![(0, 100, 0), (10, 20, 1), (20, 90, 2), (30, 40, 3)],
        );
        assert_eq!(
            ev,
            vec![
                B {
                    lane: 0,
                    item: 0,
                    at: 0
                },
                B {
                    lane: 0,
                    item: 1,
                    at: 10
                },
                E {
                    lane: 0,
                    item: 1,
                    at: 20
                },
                B {
                    lane: 0,
                    item: 2,
                    at: 20
                },
                B {
                    lane: 0,
                    item: 3,
                    at: 30
                },
                E {
                    lane: 0,
                    item: 3,
                    at: 40
                },
                E {
                    lane: 0,
                    item: 2,
                    at: 90
                },
                E {
                    lane: 0,
                    item: 0,
                    at: 100
                },
            ]
        );
        assert_eq!(lanes.count(), 1);
    }

    #[test]
    fn zero_length_child_at_the_parents_end_nests() {
        let mut lanes = Lanes::default();
        let ev = run(&mut lanes, vec![(0, 10, 0), (10, 10, 1), (11, 20, 2)]);
        assert_eq!(
            ev,
            vec![
                B {
                    lane: 0,
                    item: 0,
                    at: 0
                },
                B {
                    lane: 0,
                    item: 1,
                    at: 10
                },
                E {
                    lane: 0,
                    item: 1,
                    at: 10
                },
                E {
                    lane: 0,
                    item: 0,
                    at: 10
                },
                B {
                    lane: 0,
                    item: 2,
                    at: 11
                },
                E {
                    lane: 0,
                    item: 2,
                    at: 20
                },
            ]
        );
        // Where an interval ends as the next begins, the next begins after
        // the end.
        let ev = run(&mut lanes, vec![(30, 40, 3), (40, 50, 4)]);
        assert_eq!(
            ev[1],
            E {
                lane: 0,
                item: 3,
                at: 40
            }
        );
        assert_eq!(
            ev[2],
            B {
                lane: 0,
                item: 4,
                at: 40
            }
        );
    }

    #[test]
    fn overlapping_intervals_go_beside() {
        let mut lanes = Lanes::default();
        let ev = run(&mut lanes, vec![(0, 10, 0), (5, 15, 1)]);
        assert_eq!(
            ev,
            vec![
                B {
                    lane: 0,
                    item: 0,
                    at: 0
                },
                B {
                    lane: 1,
                    item: 1,
                    at: 5
                },
                E {
                    lane: 0,
                    item: 0,
                    at: 10
                },
                E {
                    lane: 1,
                    item: 1,
                    at: 15
                },
            ]
        );
        // A later call that starts before lane 0's last end goes beside it,
        // one that starts after it goes back to lane 0.
        let ev = run(&mut lanes, vec![(8, 9, 2)]);
        assert_eq!(
            ev[0],
            B {
                lane: 2,
                item: 2,
                at: 8
            }
        );
        let ev = run(&mut lanes, vec![(20, 30, 3)]);
        assert_eq!(
            ev[0],
            B {
                lane: 0,
                item: 3,
                at: 20
            }
        );
    }

    #[test]
    fn end_before_start_is_empty() {
        let mut lanes = Lanes::default();
        let ev = run(&mut lanes, vec![(10, 5, 0)]);
        assert_eq!(
            ev,
            vec![
                B {
                    lane: 0,
                    item: 0,
                    at: 10
                },
                E {
                    lane: 0,
                    item: 0,
                    at: 10
                }
            ]
        );
    }
}
