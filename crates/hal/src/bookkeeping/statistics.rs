//! Pipeline statistics: a sample's value is the sum along its chain of
//! queries (a pass's statistics query split across command buffers), each
//! link checked for availability.

use super::*;

impl SampleSet {
    /// The statistic resolve of `first..first+count`, whose chains lie in
    /// `lo..hi`: each sample is the sum of its chain.
    #[allow(clippy::too_many_arguments)]
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn resolve_statistics(
        &self,
        slots: &SampleTable,
        stride: usize,
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
                _ => self.chain_value(slots, stride, s, lo, main, occlusion, &mut sums, out),
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
    pub(super) fn chain_value(
        &self,
        slots: &SampleTable,
        stride: usize,
        s: u32,
        lo: u32,
        main: &[u64],
        occlusion: Option<&[u64]>,
        sums: &mut ChainSums,
        out: &mut [u64],
    ) -> SampleStatus {
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
            let st = self.walk(slots, stride, p, lo, main, occlusion, sums);
            if st != SampleStatus::Written {
                return st;
            }
            out.copy_from_slice(&sums.sums[at(p) * 8..at(p) * 8 + out.len()]);
        }
        // The set's own fields only: stage utilization has 6 of the map's 8.
        for (f, &pos) in self.field_map.iter().take(out.len()).enumerate() {
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
    #[allow(clippy::too_many_arguments)]
    pub(super) fn walk(
        &self,
        slots: &SampleTable,
        stride: usize,
        c0: u32,
        lo: u32,
        main: &[u64],
        occlusion: Option<&[u64]>,
        sums: &mut ChainSums,
    ) -> SampleStatus {
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
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn sum_chain(
        &self,
        slots: &SampleTable,
        stride: usize,
        s: u32,
        lo: u32,
        main: &[u64],
        occlusion: Option<&[u64]>,
        out: &mut [u64],
    ) -> SampleStatus {
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
        for (f, &pos) in self.field_map.iter().take(out.len()).enumerate() {
            if pos == ABSENT {
                out[f] = COUNTER_ERROR_VALUE;
            }
        }
        SampleStatus::Written
    }
}

/// The chain walks of one statistic resolve, per index of its span.
pub(super) struct ChainSums {
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
