//! The correlation join: an API call's thread, entry time and NVTX range,
//! found again when the GPU record of the work it launched arrives.
//!
//! CUPTI gives a launch's API callback and its activity record the same
//! correlation id. The observer notes every launch at its entry
//! ([`Join::enter`]) and completes it at its exit ([`Join::exit`], with
//! the newest activity buffer handed to CUPTI by then: its records are in
//! buffers up to that one). The record sink looks the id up
//! ([`Join::record`]). A single launch's entry goes with its record; a
//! graph launch's stays for all its nodes, until every buffer up to its
//! own came back ([`Join::buffers_returned`]). An entry whose buffers all
//! came back without its record is counted as unmatched and dropped, so
//! the map never holds more than the launches in flight (and at most
//! [`MAX_ENTRIES`]; beyond that the oldest is dropped and counted).
//!
//! A launch made inside another observed call of the same thread (the
//! runtime's `cudaLaunchKernel` calling the driver's `cuLaunchKernel`) is
//! an alias of the outer one: its record is joined to the outer call, and
//! reported under the outer call's correlation id, so that the API slice
//! and the GPU work it launched name the same event.

use std::collections::{HashMap, VecDeque};

/// Entries kept at most.
pub const MAX_ENTRIES: usize = 1 << 20;

/// How a launch's records come.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// One record (a kernel, copy or memset).
    Single,
    /// A record per graph node.
    Graph,
    /// No record is expected (a synchronization): never unmatched.
    NoRecord,
}

/// What the record learns of its launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Launch {
    /// The launching thread.
    pub tid: u32,
    /// The call's entry, `CLOCK_MONOTONIC` ns.
    pub enter_ns: u64,
    /// The innermost NVTX range open on the thread then, 0 for none.
    pub range_id: u64,
    /// The correlation id the API slice carries (the outermost observed
    /// call of the thread).
    pub correlation: u32,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    launch: Launch,
    kind: Kind,
    /// Newest buffer handed out at the call's exit; `None` before it.
    last_buffer: Option<u64>,
    matched: bool,
}

/// The join's counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JoinStats {
    /// Records joined with their launch.
    pub joined: u64,
    /// Records whose launch was not observed (made before the injection,
    /// or dropped from the map).
    pub unjoined: u64,
    /// Launches whose record never came (all their buffers came back
    /// without it, or the call failed after its entry was noted).
    pub unmatched: u64,
    /// Entries dropped at the cap.
    pub evicted: u64,
}

/// The map from correlation ids to launches.
#[derive(Debug, Default)]
pub struct Join {
    map: HashMap<u32, Entry>,
    /// Completed entries in exit order, with their last buffer.
    order: VecDeque<(u32, u64)>,
    stats: JoinStats,
}

impl Join {
    /// An empty join.
    pub fn new() -> Self {
        Self::default()
    }

    /// A launch with correlation id `c` entered.
    pub fn enter(&mut self, c: u32, launch: Launch, kind: Kind) {
        if self.map.len() >= MAX_ENTRIES {
            self.evict_oldest();
        }
        self.map.insert(
            c,
            Entry {
                launch,
                kind,
                last_buffer: None,
                matched: false,
            },
        );
    }

    /// The entry of `c`'s launch, for an alias made inside it.
    pub fn launch(&self, c: u32) -> Option<Launch> {
        self.map.get(&c).map(|e| e.launch)
    }

    /// The call `c` returned (`ok`: successfully), with `last_buffer` the
    /// newest activity buffer handed out. A failed call's entry goes.
    pub fn exit(&mut self, c: u32, ok: bool, last_buffer: u64) {
        let Some(e) = self.map.get_mut(&c) else {
            return;
        };
        if !ok || e.kind == Kind::NoRecord {
            self.map.remove(&c);
            return;
        }
        if e.kind == Kind::Single && e.matched {
            self.map.remove(&c);
            return;
        }
        e.last_buffer = Some(last_buffer);
        self.order.push_back((c, last_buffer));
    }

    /// A record with correlation id `c` arrived: its launch, if observed.
    pub fn record(&mut self, c: u32) -> Option<Launch> {
        let Some(e) = self.map.get_mut(&c) else {
            self.stats.unjoined += 1;
            return None;
        };
        self.stats.joined += 1;
        let launch = e.launch;
        match e.kind {
            Kind::Single if e.last_buffer.is_some() => {
                self.map.remove(&c);
            }
            // The exit has not run yet: it removes the entry.
            Kind::Single => e.matched = true,
            Kind::Graph | Kind::NoRecord => e.matched = true,
        }
        Some(launch)
    }

    /// Every buffer up to `n` came back: entries whose records were all in
    /// those buffers go, counted as unmatched where no record came.
    pub fn buffers_returned(&mut self, n: u64) {
        while let Some(&(c, last)) = self.order.front() {
            if last > n {
                break;
            }
            self.order.pop_front();
            if let Some(e) = self.map.get(&c) {
                if e.last_buffer == Some(last) {
                    if !e.matched {
                        self.stats.unmatched += 1;
                    }
                    self.map.remove(&c);
                }
            }
        }
    }

    fn evict_oldest(&mut self) {
        while let Some((c, last)) = self.order.pop_front() {
            if let Some(e) = self.map.get(&c) {
                if e.last_buffer == Some(last) {
                    self.map.remove(&c);
                    self.stats.evicted += 1;
                    return;
                }
            }
        }
        // Only entries still inside their calls: drop any one.
        if let Some(&c) = self.map.keys().next() {
            self.map.remove(&c);
            self.stats.evicted += 1;
        }
    }

    /// Entries held now.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether no entry is held.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// The counts so far.
    pub fn stats(&self) -> JoinStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l(tid: u32, c: u32) -> Launch {
        Launch {
            tid,
            enter_ns: 1000 + u64::from(c),
            range_id: 7,
            correlation: c,
        }
    }

    /// A single launch joins its record once, whether the record comes
    /// after the call's exit or before it; then the entry is gone.
    #[test]
    fn single_launch_joins_once_in_either_order() {
        let mut j = Join::new();
        j.enter(1, l(10, 1), Kind::Single);
        j.exit(1, true, 3);
        assert_eq!(j.record(1), Some(l(10, 1)));
        assert!(j.is_empty());
        assert_eq!(j.record(1), None);

        j.enter(2, l(11, 2), Kind::Single);
        assert_eq!(j.record(2), Some(l(11, 2)));
        j.exit(2, true, 3);
        assert!(j.is_empty());
        j.buffers_returned(10);
        let s = j.stats();
        assert_eq!((s.joined, s.unjoined, s.unmatched), (2, 1, 0));
    }

    /// A graph launch joins every node's record until its buffers are all
    /// back; a launch whose buffers came back without its record is
    /// unmatched; a failed call is neither.
    #[test]
    fn graphs_keep_their_entry_and_lost_records_are_counted() {
        let mut j = Join::new();
        j.enter(5, l(1, 5), Kind::Graph);
        j.exit(5, true, 4);
        j.enter(6, l(1, 6), Kind::Single);
        j.exit(6, true, 4);
        j.enter(7, l(1, 7), Kind::Single);
        j.exit(7, false, 4);
        j.enter(8, l(1, 8), Kind::Single);
        j.exit(8, true, 9);
        for _ in 0..3 {
            assert_eq!(j.record(5), Some(l(1, 5)));
        }
        j.buffers_returned(3);
        assert_eq!(j.record(5), Some(l(1, 5)));
        j.buffers_returned(4);
        assert_eq!(j.record(5), None);
        assert_eq!(j.len(), 1, "launch 8's buffers are not back");
        let s = j.stats();
        assert_eq!((s.joined, s.unjoined, s.unmatched), (4, 1, 1));
    }

    /// Synchronizations expect no record: never unmatched.
    #[test]
    fn calls_without_records_leave_no_entry() {
        let mut j = Join::new();
        j.enter(3, l(1, 3), Kind::NoRecord);
        j.exit(3, true, 1);
        assert!(j.is_empty());
        j.buffers_returned(5);
        assert_eq!(j.stats().unmatched, 0);
    }
}
