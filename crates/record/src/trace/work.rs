//! The GPU work of CUDA: kernels, memory copies, memsets and
//! synchronizations, each a slice on its queue's track and counted in the
//! summary.

use super::*;
use crate::protocol::{Kernel, MemCopy, Memset, SyncEvent};

impl<W: Write> State<W> {
    pub(super) fn kernel(&mut self, conn: &mut Conn, k: &Kernel) {
        if !self.complete(&k.work) {
            return;
        }
        let name = match conn.kernel_names.get(&k.name) {
            Some(n) => n.clone(),
            None => {
                let mangled = self.string(conn, k.name);
                let n: Rc<str> = Rc::from(demangle(&mangled));
                if conn.kernel_names.len() < self.caps.strings_per_connection {
                    conn.kernel_names.insert(k.name, n.clone());
                }
                n
            }
        };
        let (gpu, queue, context) = self.work_common(conn, &k.work);
        let shape = [
            k.grid[0],
            k.grid[1],
            k.grid[2],
            k.block[0],
            k.block[1],
            k.block[2],
            k.smem_static,
            k.smem_dynamic,
        ];
        let key = (name.clone(), shape, k.registers);
        let describe = || {
            let mut d = format!(
                "grid {}x{}x{} block {}x{}x{} smem {}+{} regs {}",
                k.grid[0],
                k.grid[1],
                k.grid[2],
                k.block[0],
                k.block[1],
                k.block[2],
                k.smem_static,
                k.smem_dynamic,
                k.registers
            );
            if k.work.graph_id != 0 {
                d.push_str(&format!(" graph {}/{}", k.work.graph_id, k.work.graph_node));
            }
            d
        };
        let stage = match self.stages.get(&key) {
            Some(&s) => Some(s),
            None if self.stages.len() < self.caps.stages => {
                let desc = describe();
                let s = self
                    .out
                    .put(|w| Ok(w.stage(&name, &desc, StageCategory::Compute)));
                if let Some(s) = s {
                    self.stages.insert(key, s);
                }
                s
            }
            None => {
                self.drops.over_cap += 1;
                None
            }
        };
        let desc = if stage.is_none() {
            describe()
        } else {
            String::new()
        };
        let extra: &[(&str, &str)] = if stage.is_none() {
            &[("shape", desc.as_str())]
        } else {
            &[]
        };
        let ev = RenderStage {
            ts: k.work.start_ns,
            duration: k.work.end_ns - k.work.start_ns,
            event_id: event_id(conn.pid, k.work.correlation),
            queue,
            stage,
            context,
            gpu_id: gpu as i32,
            name: &name,
            extra,
        };
        self.out.put(|w| w.render_stage(&ev));
        self.kernels += 1;
        self.agg.kernel(&name, k.work.end_ns - k.work.start_ns);
        self.attribute(conn, &k.work);
        if conn.recent.len() >= RECENT_KERNELS {
            if let Some(old) = conn.recent_order.pop_front() {
                conn.recent.remove(&old);
            }
        }
        if conn
            .recent
            .insert(k.work.correlation, (k.work.end_ns, gpu))
            .is_none()
        {
            conn.recent_order.push_back(k.work.correlation);
        }
        let device = u32::from(k.work.device);
        if let Some(t) = conn.counters.get_mut(&device) {
            t.kernels += 1;
        }
        if let Some((device, values)) = conn.pending_counters.remove(&k.work.correlation) {
            self.kernel_counters(conn, device, k.work.end_ns, &values);
        }
    }

    pub(super) fn copy(&mut self, conn: &mut Conn, c: &MemCopy) {
        if !self.complete(&c.work) {
            return;
        }
        let (gpu, queue, context) = self.work_common(conn, &c.work);
        let name = format!(
            "memcpy {} {}→{}",
            copy_kind::name(c.kind),
            memory_kind::name(c.src_kind),
            memory_kind::name(c.dst_kind)
        );
        let stage = self.other_stage(&name);
        let bytes = c.bytes.to_string();
        let ev = RenderStage {
            ts: c.work.start_ns,
            duration: c.work.end_ns - c.work.start_ns,
            event_id: event_id(conn.pid, c.work.correlation),
            queue,
            stage,
            context,
            gpu_id: gpu as i32,
            name: &name,
            extra: &[("bytes", &bytes)],
        };
        self.out.put(|w| w.render_stage(&ev));
        self.agg.copy(
            (c.kind, c.src_kind, c.dst_kind),
            c.bytes,
            c.work.end_ns - c.work.start_ns,
        );
        self.attribute(conn, &c.work);
    }

    pub(super) fn memset(&mut self, conn: &mut Conn, m: &Memset) {
        if !self.complete(&m.work) {
            return;
        }
        let (gpu, queue, context) = self.work_common(conn, &m.work);
        let name = format!("memset {}", memory_kind::name(m.memory_kind as u8));
        let stage = self.other_stage(&name);
        let bytes = m.bytes.to_string();
        let ev = RenderStage {
            ts: m.work.start_ns,
            duration: m.work.end_ns - m.work.start_ns,
            event_id: event_id(conn.pid, m.work.correlation),
            queue,
            stage,
            context,
            gpu_id: gpu as i32,
            name: &name,
            extra: &[("bytes", &bytes)],
        };
        self.out.put(|w| w.render_stage(&ev));
        self.agg.memset(m.bytes, m.work.end_ns - m.work.start_ns);
        self.attribute(conn, &m.work);
    }

    pub(super) fn sync(&mut self, conn: &mut Conn, s: &SyncEvent) {
        if s.start_ns == 0 || s.end_ns < s.start_ns {
            self.drops.incomplete += 1;
            return;
        }
        conn.last_ts = conn.last_ts.max(s.end_ns);
        let what = match s.sync_type {
            1 => "event",
            2 => "stream wait event",
            3 => "stream",
            4 => "context",
            _ => "unknown",
        };
        let name = format!("synchronize ({what})");
        self.process_track(conn);
        let gpu = self.gpu(conn, 0);
        let w = Work {
            context: s.context,
            stream: s.stream,
            ..Work::default()
        };
        let queue = self.queue(conn, &w, gpu);
        let context = self.context(conn, s.context);
        let stage = self.other_stage(&name);
        let ev = RenderStage {
            ts: s.start_ns,
            duration: s.end_ns - s.start_ns,
            event_id: event_id(conn.pid, s.correlation),
            queue,
            stage,
            context,
            gpu_id: gpu as i32,
            name: &name,
            extra: &[],
        };
        self.out.put(|w| w.render_stage(&ev));
    }
}
