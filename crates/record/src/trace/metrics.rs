//! GPU metrics: PM sampling and per-kernel counters, as counter tracks per
//! device.

use super::*;
use crate::protocol::{KernelCounters, MetricConfig, PmSample};

impl<W: Write> State<W> {
    pub(super) fn metric_config(&mut self, conn: &mut Conn, c: &MetricConfig<'_>, pm: bool) {
        let gpu = self.gpu(conn, c.device);
        let base = if pm { 0 } else { COUNTERS_PER_GPU / 2 };
        let mut ids = Vec::new();
        let mut specs = Vec::new();
        let mut per_second = Vec::new();
        let mut names = Vec::new();
        for (i, m) in c.metrics.iter().enumerate().take(32) {
            let id = gpu as u32 * COUNTERS_PER_GPU + base + i as u32 + 1;
            let name = self.string(conn, m);
            let (unit, divide) = metric_unit(&name, pm);
            ids.push(id);
            per_second.push(divide);
            names.push(name.to_string());
            specs.push(GpuCounterSpec {
                id,
                name: if pm {
                    name.to_string()
                } else {
                    format!("{name} (per kernel)")
                },
                description: if pm {
                    format!("PM sampling of {name} on GPU{gpu}")
                } else {
                    format!("{name} of each kernel on GPU{gpu}, at its end")
                },
                unit,
            });
        }
        let tracks = MetricTracks {
            gpu,
            ids,
            specs,
            per_second,
            described: false,
            kernels: 0,
            measured: 0,
        };
        let p = self.process_track(conn);
        let ts = conn.last_ts;
        let what = if pm {
            self.pm_ran = true;
            self.agg.pm_config(gpu, &names);
            conn.pm.insert(c.device, tracks);
            format!(
                "gpu-counters: PM sampling of {} on GPU{gpu}: the GPU clocks are locked while it runs",
                names.join(", ")
            )
        } else {
            self.serialized = true;
            if let Some(old) = conn.counters.insert(c.device, tracks) {
                self.agg.counters(
                    old.gpu,
                    &[],
                    old.measured,
                    old.kernels.saturating_sub(old.measured),
                );
            }
            self.agg.counters(gpu, &names, 0, 0);
            format!(
                "gpu-counters: per-kernel counters ({}) on GPU{gpu}: kernels are serialized",
                names.join(", ")
            )
        };
        self.out
            .put(|w| w.instant(p, ts, &what, Some("gpu-counters")));
    }

    pub(super) fn pm_sample(&mut self, conn: &mut Conn, s: &PmSample<'_>) {
        self.pm_ran = true;
        conn.last_ts = conn.last_ts.max(s.end_ns);
        let Some(cfg) = conn.pm.get_mut(&s.device) else {
            self.drops.unknown_references += 1;
            return;
        };
        let span = s.end_ns.saturating_sub(s.start_ns).max(1) as f64 / 1e9;
        let values: Vec<(u32, f64)> = cfg
            .ids
            .iter()
            .zip(cfg.per_second.iter())
            .zip(s.values.iter())
            .map(|((&id, &divide), v)| (id, if divide { v / span } else { v }))
            .collect();
        let descriptor = (!cfg.described).then(|| cfg.specs.clone());
        cfg.described = true;
        let gpu = cfg.gpu;
        self.agg.pm_sample(gpu, s.start_ns, s.end_ns);
        self.out
            .put(|w| w.gpu_counters(s.end_ns, gpu as i32, descriptor.as_deref(), &values));
    }

    pub(super) fn kernel_counters_record(&mut self, conn: &mut Conn, k: &KernelCounters<'_>) {
        let Some(&(end, _)) = conn.recent.get(&k.correlation) else {
            // Its kernel's record may still be on its way.
            if conn.pending_counters.len() < PENDING_COUNTERS {
                conn.pending_counters
                    .insert(k.correlation, (k.device, k.values.iter().collect()));
            } else {
                self.drops.over_cap += 1;
            }
            return;
        };
        let values: Vec<f64> = k.values.iter().collect();
        self.kernel_counters(conn, k.device, end, &values);
    }

    /// Draws a kernel's counters at its end.
    pub(super) fn kernel_counters(
        &mut self,
        conn: &mut Conn,
        device: u32,
        end: u64,
        values: &[f64],
    ) {
        let Some(cfg) = conn.counters.get_mut(&device) else {
            self.drops.unknown_references += 1;
            return;
        };
        let values: Vec<(u32, f64)> = cfg
            .ids
            .iter()
            .copied()
            .zip(values.iter().copied())
            .collect();
        let descriptor = (!cfg.described).then(|| cfg.specs.clone());
        cfg.described = true;
        cfg.measured += 1;
        let gpu = cfg.gpu as i32;
        self.out
            .put(|w| w.gpu_counters(end, gpu, descriptor.as_deref(), &values));
    }
}
