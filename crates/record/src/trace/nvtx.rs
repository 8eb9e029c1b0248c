//! NVTX ranges: push/pop stacks per thread and domain, start/end ranges on
//! lanes of a per-domain track, marks, domains, and the GPU span each range
//! covers once its work is seen.

use super::*;
use crate::protocol::{NvtxDomain, NvtxEnd, NvtxPop, NvtxRange};

impl<W: Write> State<W> {
    pub(super) fn nvtx_push(&mut self, conn: &mut Conn, p: &NvtxRange<'_>) {
        conn.last_ts = conn.last_ts.max(p.ts_ns);
        let name = self.name(conn, &p.name);
        let domain_name = self.domain(conn, p.domain);
        let Some(track) = self.nvtx_track(conn, p.tid, p.domain) else {
            return;
        };
        let depth_cap = self.caps.nvtx_depth;
        let t = conn.threads.get_mut(&p.tid).expect("made by nvtx_track");
        let stack = t.stacks.entry(p.domain).or_default();
        if stack.open.len() >= depth_cap || stack.hidden > 0 {
            stack.hidden += 1;
            self.drops.over_cap += 1;
            return;
        }
        let parent = stack.open.last().map_or(0, |o| o.range_id);
        stack.open.push(OpenRange {
            range_id: p.range_id,
            ts: p.ts_ns,
            name: name.clone(),
        });
        let category = if p.domain == 0 { "nvtx" } else { &domain_name };
        self.out
            .put(|w| w.slice_begin(track, p.ts_ns, &name, Some(category), None));
        if p.range_id != 0 {
            if conn.spans.len() >= self.caps.span_ranges {
                self.flush_spans(conn, true);
            }
            if conn.spans.len() < self.caps.span_ranges {
                conn.spans.insert(
                    p.range_id,
                    Span {
                        tid: p.tid,
                        domain: p.domain,
                        parent,
                        name,
                        start: p.ts_ns,
                        end: None,
                        gpu: None,
                        kernel_ns: 0,
                    },
                );
            } else {
                self.drops.over_cap += 1;
            }
        }
    }

    pub(super) fn nvtx_pop(&mut self, conn: &mut Conn, p: &NvtxPop) {
        conn.last_ts = conn.last_ts.max(p.ts_ns);
        let Some(track) = self.nvtx_track(conn, p.tid, p.domain) else {
            return;
        };
        let t = conn.threads.get_mut(&p.tid).expect("made by nvtx_track");
        let stack = t.stacks.entry(p.domain).or_default();
        if stack.hidden > 0 {
            stack.hidden -= 1;
            return;
        }
        let Some(open) = stack.open.pop() else {
            self.drops.nvtx_pop_empty += 1;
            return;
        };
        self.out.put(|w| w.slice_end(track, p.ts_ns.max(open.ts)));
        self.close_span(conn, open, p.domain, p.ts_ns);
    }

    pub(super) fn nvtx_start(&mut self, conn: &mut Conn, s: &NvtxRange<'_>) {
        conn.last_ts = conn.last_ts.max(s.ts_ns);
        let name = self.name(conn, &s.name);
        if conn.async_open.len() >= self.caps.open_ranges {
            self.drops.over_cap += 1;
            return;
        }
        self.process_track(conn);
        let process = conn.process;
        let domain_name = self.domain(conn, s.domain);
        let lanes = conn.lanes.entry(s.domain).or_default();
        let lane = match lanes.iter().position(|(_, busy)| !busy) {
            Some(l) => l,
            None if lanes.len() < ASYNC_LANES => {
                let n = lanes.len();
                let track_name = if n == 0 {
                    format!("NVTX {domain_name}")
                } else {
                    format!("NVTX {domain_name} ({})", n + 1)
                };
                let u = self.out.track(|w| w.track(process, &track_name));
                let lanes = conn.lanes.get_mut(&s.domain).expect("entry made above");
                lanes.push((u, false));
                n
            }
            None => {
                self.drops.over_cap += 1;
                return;
            }
        };
        let lanes = conn.lanes.get_mut(&s.domain).expect("entry made above");
        lanes[lane].1 = true;
        let track = lanes[lane].0;
        let category = if s.domain == 0 { "nvtx" } else { &domain_name };
        self.out
            .put(|w| w.slice_begin(track, s.ts_ns, &name, Some(category), None));
        conn.async_open.insert(
            s.range_id,
            AsyncOpen {
                domain: s.domain,
                lane,
                ts: s.ts_ns,
                name,
            },
        );
    }

    pub(super) fn nvtx_end(&mut self, conn: &mut Conn, e: &NvtxEnd) {
        conn.last_ts = conn.last_ts.max(e.ts_ns);
        let Some(open) = conn.async_open.remove(&e.range_id) else {
            self.drops.nvtx_pop_empty += 1;
            return;
        };
        if let Some(lanes) = conn.lanes.get_mut(&open.domain) {
            let (track, _) = lanes[open.lane];
            lanes[open.lane].1 = false;
            self.out.put(|w| w.slice_end(track, e.ts_ns.max(open.ts)));
        }
        let domain = self.domain(conn, open.domain);
        self.agg
            .range(&domain, &open.name, e.ts_ns.saturating_sub(open.ts), 0, 0);
    }

    pub(super) fn nvtx_mark(&mut self, conn: &mut Conn, m: &NvtxRange<'_>) {
        conn.last_ts = conn.last_ts.max(m.ts_ns);
        let name = self.name(conn, &m.name);
        if let Some(track) = self.nvtx_track(conn, m.tid, m.domain) {
            self.out
                .put(|w| w.instant(track, m.ts_ns, &name, Some("nvtx")));
        }
    }

    pub(super) fn nvtx_domain(&mut self, conn: &mut Conn, d: &NvtxDomain<'_>) {
        if conn.domains.len() < self.caps.strings_per_connection {
            conn.domains.insert(d.id, Rc::from(text(d.name)));
        } else {
            self.drops.over_cap += 1;
        }
    }

    pub(super) fn close_span(&mut self, conn: &mut Conn, open: OpenRange, domain: u32, ts: u64) {
        let cpu = ts.saturating_sub(open.ts);
        match conn.spans.get_mut(&open.range_id) {
            Some(s) => s.end = Some(ts.max(s.start)),
            None => {
                let d = self.domain(conn, domain);
                self.agg.range(&d, &open.name, cpu, 0, 0);
            }
        }
    }

    /// Writes the GPU spans of closed ranges (all, when `only_closed` is
    /// false: the connection ended) and adds them to the summary.
    pub(super) fn flush_spans(&mut self, conn: &mut Conn, only_closed: bool) {
        let mut ids: Vec<u64> = conn
            .spans
            .iter()
            .filter(|(_, s)| !only_closed || s.end.is_some())
            .map(|(&id, _)| id)
            .collect();
        if ids.is_empty() {
            return;
        }
        ids.sort_unstable();
        // Children (later ids) fold into their parents first.
        for &id in ids.iter().rev() {
            let (parent, gpu, k) = {
                let s = &conn.spans[&id];
                (s.parent, s.gpu, s.kernel_ns)
            };
            if let (Some((a, b)), Some(p)) = (gpu, conn.spans.get_mut(&parent)) {
                p.gpu = Some(match p.gpu {
                    None => (a, b),
                    Some((pa, pb)) => (pa.min(a), pb.max(b)),
                });
                p.kernel_ns += k;
            }
        }
        let set: std::collections::HashSet<u64> = ids.iter().copied().collect();
        let mut children: HashMap<u64, Vec<u64>> = HashMap::new();
        let mut roots = Vec::new();
        for &id in &ids {
            let p = conn.spans[&id].parent;
            if set.contains(&p) {
                children.entry(p).or_default().push(id);
            } else {
                roots.push(id);
            }
        }
        // Depth-first: a parent's begin before its children's, its end after.
        let mut stack: Vec<(u64, bool)> = roots.into_iter().rev().map(|r| (r, false)).collect();
        while let Some((id, done)) = stack.pop() {
            let (tid, domain, gpu) = {
                let s = &conn.spans[&id];
                (s.tid, s.domain, s.gpu)
            };
            if done {
                if let Some((_, b)) = gpu {
                    if let Some(t) = self.span_track(conn, tid, domain) {
                        self.out.put(|w| w.slice_end(t, b));
                    }
                }
                continue;
            }
            if let Some((a, _)) = gpu {
                if let Some(t) = self.span_track(conn, tid, domain) {
                    let name = conn.spans[&id].name.clone();
                    self.out
                        .put(|w| w.slice_begin(t, a, &name, Some("gpu span"), None));
                }
            }
            stack.push((id, true));
            if let Some(c) = children.get(&id) {
                stack.extend(c.iter().rev().map(|&c| (c, false)));
            }
        }
        for id in ids {
            let s = conn.spans.remove(&id).expect("listed above");
            conn.spans_flushed_upto = conn.spans_flushed_upto.max(id);
            let d = self.domain(conn, s.domain);
            let cpu = s.end.unwrap_or(conn.last_ts).saturating_sub(s.start);
            let span = s.gpu.map_or(0, |(a, b)| b - a);
            self.agg.range(&d, &s.name, cpu, span, s.kernel_ns);
        }
    }

    pub(super) fn span_track(&mut self, conn: &mut Conn, tid: u32, domain: u32) -> Option<u64> {
        let uuid = self.thread(conn, tid)?;
        if let Some(&u) = conn.threads.get(&tid)?.span_tracks.get(&domain) {
            return Some(u);
        }
        let name = if domain == 0 {
            "GPU span".to_string()
        } else {
            format!("GPU span ({})", self.domain(conn, domain))
        };
        let u = self.out.track(|w| w.track(uuid, &name));
        conn.threads.get_mut(&tid)?.span_tracks.insert(domain, u);
        Some(u)
    }
}
