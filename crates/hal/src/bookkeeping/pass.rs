//! What every backend checks and coalesces in a pass: its sample-buffer
//! attachments, and the relaxed timestamp writes it may serve with one
//! timestamp.

use super::SampleSet;
use crate::{CommonCounterSet, InvalidInput, Result};

/// Checks a pass's attachment points, each `(key, samples, index)` where
/// `key` tells buffers apart (equal keys: the same buffer): every index is
/// inside its buffer, none is attached twice, and at most one statistic
/// buffer is attached (one statistic query can be active at a time).
pub fn check_pass_attachments<'a>(
    points: impl Iterator<Item = (usize, &'a SampleSet, u32)> + Clone,
) -> Result<()> {
    // Attachments are few: look back instead of keeping a set, over the
    // first ones kept here (walking the points again costs more).
    const FEW: usize = 8;
    let mut few = [(0usize, 0u32); FEW];
    let mut statistic: Option<usize> = None;
    for (k, (key, samples, index)) in points.clone().enumerate() {
        samples.check_index(index)?;
        let twice = if k <= FEW {
            few[..k]
                .iter()
                .any(|&(other, i)| other == key && i == index)
        } else {
            points
                .clone()
                .take(k)
                .any(|(other, _, i)| other == key && i == index)
        };
        if k < FEW {
            few[k] = (key, index);
        }
        if twice {
            return Err(InvalidInput::SampleIndexReuse {
                label: samples.label.clone(),
                index,
                reason: "is attached twice to the same pass",
            }
            .into());
        }
        if samples.set == CommonCounterSet::Statistic {
            match statistic {
                Some(first) if first != key => {
                    return Err(InvalidInput::Argument(
                        "a pass can attach at most one statistic sample buffer: one statistic query can be active at a time".into(),
                    )
                    .into())
                }
                _ => statistic = Some(key),
            }
        }
    }
    Ok(())
}

/// The relaxed timestamp writes of one heap in one pass, coalesced: they
/// share one timestamp taken at the pass's end (the cheapest legal
/// placement). A later precise write of an index takes it out: the last
/// write in program order wins.
#[derive(Debug, Clone)]
pub struct RelaxedWrites {
    /// The indices in the order first written.
    indices: Vec<u32>,
    /// Which indices are in `indices`, one bit each, once there are enough
    /// of them that searching the list would cost more.
    seen: Vec<u64>,
    /// The heap's size.
    count: u32,
}

impl RelaxedWrites {
    /// Searched linearly up to this many indices.
    const LINEAR: usize = 16;

    /// No writes yet, for a heap of `count` entries.
    pub fn new(count: u32) -> Self {
        Self {
            indices: Vec::new(),
            seen: Vec::new(),
            count,
        }
    }

    /// Empties the list for a heap of `count` entries, keeping its memory.
    pub fn reuse(&mut self, count: u32) {
        self.indices.clear();
        self.seen.clear();
        self.count = count;
    }

    /// Adds `index` (checked against the heap by the caller) unless it is
    /// already there.
    pub fn insert(&mut self, index: u32) {
        if self.seen.is_empty() {
            if self.indices.len() < Self::LINEAR {
                if !self.indices.contains(&index) {
                    self.indices.push(index);
                }
                return;
            }
            self.seen.resize((self.count as usize).div_ceil(64), 0);
            for &i in &self.indices {
                self.seen[i as usize / 64] |= 1 << (i % 64);
            }
        }
        let (word, bit) = (index as usize / 64, 1u64 << (index % 64));
        if self.seen[word] & bit == 0 {
            self.seen[word] |= bit;
            self.indices.push(index);
        }
    }

    /// Removes `index`, if there: a later precise write to it wins.
    pub fn remove(&mut self, index: u32) {
        if !self.seen.is_empty() {
            let (word, bit) = (index as usize / 64, 1u64 << (index % 64));
            if self.seen[word] & bit == 0 {
                return;
            }
            self.seen[word] &= !bit;
        }
        if let Some(p) = self.indices.iter().position(|&i| i == index) {
            self.indices.remove(p);
        }
    }

    /// The indices, in the order first written: the first takes the
    /// timestamp, the others alias it.
    pub fn indices(&self) -> &[u32] {
        &self.indices
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bookkeeping::ABSENT;
    use crate::StorageMode;

    fn set(kind: CommonCounterSet, n: u32) -> SampleSet {
        SampleSet::new(
            "p".into(),
            kind,
            StorageMode::Shared,
            n,
            [ABSENT; 8],
            !0,
            "sample",
        )
        .unwrap()
    }

    #[test]
    fn attachments_twice_or_two_statistic_buffers_are_refused() {
        let t = set(CommonCounterSet::Timestamp, 4);
        let s1 = set(CommonCounterSet::Statistic, 4);
        let s2 = set(CommonCounterSet::Statistic, 4);
        check_pass_attachments([(1, &t, 0), (1, &t, 1), (2, &s1, 0), (2, &s1, 1)].into_iter())
            .unwrap();
        assert!(check_pass_attachments([(1, &t, 0), (1, &t, 0)].into_iter()).is_err());
        assert!(check_pass_attachments([(2, &s1, 0), (3, &s2, 1)].into_iter()).is_err());
        assert!(check_pass_attachments([(1, &t, 4)].into_iter()).is_err());
    }

    #[test]
    fn relaxed_writes_keep_first_order_and_lose_to_later_precise_ones() {
        for n in [3u32, 40] {
            let mut r = RelaxedWrites::new(64);
            for i in (0..n).rev() {
                r.insert(i);
                r.insert(i);
            }
            r.remove(n - 1);
            r.remove(63);
            let expected: Vec<u32> = (0..n - 1).rev().collect();
            assert_eq!(r.indices(), expected.as_slice(), "{n} writes");
        }
    }
}
