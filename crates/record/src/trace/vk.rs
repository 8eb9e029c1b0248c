//! The Vulkan layer's records in the trace and the summary.
//!
//! - A device joins the trace's GPUs by its UUID (the same GPU as a CUDA
//!   device of the same UUID), else by (pid, id).
//! - A queue is a hardware queue `GPU{g} {pid}:queue {family}.{index}`
//!   (`...:device {id} queue ...` for a process's devices after its first);
//!   each timed scope (a command buffer's execution, a pass, a label, a
//!   draw or dispatch) is a render-stage event on it, its stage interned
//!   per (kind, name), with its bound, depth and frame as extra data. A
//!   command buffer's execution has the event id that the layer's
//!   `vkQueueSubmit` slice names, so Perfetto draws the flow.
//! - A scope's pipeline statistics are GPU counter events at its end.
//! - A frame is a render-stage event `frame N` on the hardware queue
//!   `GPU{g} {pid}:frames` spanning its executions' GPU time, and a slice
//!   on the process's `Vulkan frames (CPU)` track from its start to its
//!   present.

use super::{Conn, GpuKey, State};
use crate::protocol::{
    execution_correlation, frame_flags, scope_kind, scope_status, Record, VkScope,
};
use crate::summary::VkQueueRow;
use gpu_counters_profiler::export::perfetto_gpu::{
    CounterUnit, GpuCounterSpec, RenderStage, StageCategory,
};
use std::collections::HashMap;
use std::io::Write;
use std::rc::Rc;

/// `InternedGraphicsContext.Api.VULKAN`.
const GRAPHICS_API_VULKAN: i32 = 2;
/// Statistics' GPU counter ids start here (`+ gpu * 64 + i + 1`), apart
/// from CUDA's metric ids.
const STAT_COUNTER_BASE: u32 = 1 << 20;
/// The low half of the event id of a Vulkan scope other than a command
/// buffer's execution: apart from CUDA's correlation ids (which count from
/// 1) and from executions ([`execution_correlation`]).
const SCOPE_EVENT: u32 = 0xC000_0000;
const EVENT_MASK: u32 = 0x3FFF_FFFF;

pub(super) struct VkDeviceState {
    gpu: usize,
    name: Rc<str>,
    calibrated: bool,
    stat_ids: Vec<u32>,
    stat_specs: Vec<GpuCounterSpec>,
    described: bool,
    frames_queue: u64,
    cpu_frames_track: u64,
}

pub(super) struct VkQueueState {
    device: u32,
    gpu: usize,
    hw: u64,
    context: Option<u64>,
    row: usize,
}

/// A connection's Vulkan tables.
#[derive(Default)]
pub(super) struct VkConn {
    devices: HashMap<u32, VkDeviceState>,
    queues: HashMap<u32, VkQueueState>,
    next_scope: u32,
}

impl<W: Write> State<W> {
    /// Applies a Vulkan record; returns `false` for a record that is not one.
    pub(super) fn vk_record(&mut self, conn: &mut Conn, r: &Record<'_>) -> bool {
        match r {
            Record::VkDevice(d) => {
                let name = self.string(conn, d.name);
                let key = if d.uuid == [0; 16] {
                    GpuKey::Local(conn.pid, d.id | 0x8000_0000)
                } else {
                    GpuKey::Uuid(d.uuid)
                };
                let gpu = self.gpu_of(key, name.to_string());
                self.process_track(conn);
                let pid = conn.pid;
                let title = if d.id == 1 {
                    format!("GPU{gpu} {pid}:frames")
                } else {
                    format!("GPU{gpu} {pid}:device {} frames", d.id)
                };
                let frames_queue = self.out.put(|w| Ok(w.queue(&title))).unwrap_or(0);
                if conn.vk.devices.len() < self.caps.queues {
                    conn.vk.devices.insert(
                        d.id,
                        VkDeviceState {
                            gpu,
                            name,
                            calibrated: d.calibration != 0,
                            stat_ids: Vec::new(),
                            stat_specs: Vec::new(),
                            described: false,
                            frames_queue,
                            cpu_frames_track: 0,
                        },
                    );
                } else {
                    self.drops.over_cap += 1;
                }
            }
            Record::VkQueue(q) => {
                let Some(dev) = conn.vk.devices.get(&q.device) else {
                    self.drops.unknown_references += 1;
                    return true;
                };
                let (gpu, dev_name, calibrated) = (dev.gpu, dev.name.clone(), dev.calibrated);
                if self.queue_count >= self.caps.queues {
                    self.drops.over_cap += 1;
                    return true;
                }
                self.queue_count += 1;
                let pid = conn.pid;
                // A process's second device on the same GPU names itself.
                let name = if q.device == 1 {
                    format!("GPU{gpu} {pid}:queue {}.{}", q.family, q.index)
                } else {
                    format!(
                        "GPU{gpu} {pid}:device {} queue {}.{}",
                        q.device, q.family, q.index
                    )
                };
                let hw = self.out.put(|w| Ok(w.queue(&name))).unwrap_or(0);
                let context = self
                    .out
                    .put(|w| Ok(w.graphics_context(pid as i32, GRAPHICS_API_VULKAN)));
                let row = self.vk.queues.len();
                self.vk.queues.push(VkQueueRow {
                    pid,
                    gpu,
                    vk_device: q.device,
                    device: dev_name.to_string(),
                    family: q.family,
                    index: q.index,
                    timestamp_valid_bits: q.valid_bits,
                    timed: q.valid_bits > 0 && calibrated,
                    executions: 0,
                });
                conn.vk.queues.insert(
                    q.id,
                    VkQueueState {
                        device: q.device,
                        gpu,
                        hw,
                        context,
                        row,
                    },
                );
            }
            Record::VkStatNames(n) => {
                let names: Vec<Rc<str>> = n.names.iter().map(|id| self.string(conn, id)).collect();
                let Some(dev) = conn.vk.devices.get_mut(&n.device) else {
                    self.drops.unknown_references += 1;
                    return true;
                };
                let gpu = dev.gpu as u32;
                dev.stat_ids.clear();
                dev.stat_specs.clear();
                for (i, name) in names.iter().enumerate().take(64) {
                    let id = STAT_COUNTER_BASE + gpu * 64 + i as u32 + 1;
                    dev.stat_ids.push(id);
                    dev.stat_specs.push(GpuCounterSpec {
                        id,
                        name: format!("{name} (per pass)"),
                        description: format!(
                            "Vulkan pipeline statistic {name} of each pass on GPU{gpu}, at its end"
                        ),
                        unit: CounterUnit::Count,
                    });
                }
                dev.described = false;
            }
            Record::VkScope(s) => self.vk_scope(conn, s),
            Record::VkFrame(f) => {
                conn.last_ts = conn.last_ts.max(f.cpu_end_ns);
                let timed = f.gpu_end_ns >= f.gpu_start_ns && f.gpu_start_ns != 0;
                self.vk.frame(timed.then(|| f.gpu_end_ns - f.gpu_start_ns));
                let Some(dev) = conn.vk.devices.get(&f.device) else {
                    self.drops.unknown_references += 1;
                    return true;
                };
                let (gpu, queue) = (dev.gpu, dev.frames_queue);
                let name = format!("frame {}", f.frame);
                if timed {
                    conn.last_ts = conn.last_ts.max(f.gpu_end_ns);
                    let stage = self.other_stage("frame");
                    let (bound, number) = (f.bound_ns.to_string(), f.frame.to_string());
                    let presented = if f.flags & frame_flags::PRESENTED != 0 {
                        "1"
                    } else {
                        "0"
                    };
                    let ev = RenderStage {
                        ts: f.gpu_start_ns,
                        duration: f.gpu_end_ns - f.gpu_start_ns,
                        event_id: self.vk_event_id(conn),
                        queue,
                        stage,
                        context: None,
                        gpu_id: gpu as i32,
                        name: &name,
                        extra: &[
                            ("frame", &number),
                            ("bound_ns", &bound),
                            ("presented", presented),
                        ],
                    };
                    self.out.put(|w| w.render_stage(&ev));
                }
                if f.cpu_end_ns >= f.cpu_start_ns && f.cpu_start_ns != 0 {
                    let process = self.process_track(conn);
                    let Some(dev) = conn.vk.devices.get_mut(&f.device) else {
                        return true;
                    };
                    if dev.cpu_frames_track == 0 {
                        let title = format!("Vulkan frames (CPU) GPU{gpu}");
                        dev.cpu_frames_track = self.out.track(|w| w.track(process, &title));
                    }
                    let t = dev.cpu_frames_track;
                    self.out
                        .put(|w| w.slice_begin(t, f.cpu_start_ns, &name, Some("vulkan"), None));
                    self.out.put(|w| w.slice_end(t, f.cpu_end_ns));
                }
            }
            Record::VkStats(s) => {
                conn.vk_stats = s.named().map(|(k, v)| (k.into_owned(), v)).collect();
            }
            _ => return false,
        }
        true
    }

    fn vk_event_id(&mut self, conn: &mut Conn) -> u64 {
        let n = conn.vk.next_scope;
        conn.vk.next_scope = n.wrapping_add(1);
        (u64::from(conn.pid) << 32) | u64::from(SCOPE_EVENT | (n & EVENT_MASK))
    }

    fn vk_scope(&mut self, conn: &mut Conn, s: &VkScope<'_>) {
        if s.status != scope_status::TIMED || s.end_ns < s.start_ns || s.start_ns == 0 {
            self.vk.untimed_scopes += 1;
            return;
        }
        let Some(q) = conn.vk.queues.get(&s.queue) else {
            self.drops.unknown_references += 1;
            return;
        };
        let (gpu, hw, context, row, device) = (q.gpu, q.hw, q.context, q.row, q.device);
        let name = self.name(conn, &s.name);
        conn.last_ts = conn.last_ts.max(s.end_ns);
        let kind_name = scope_kind::name(s.kind);
        let key = (
            Rc::<str>::from(format!("{kind_name}\u{0}{name}")),
            [0u32; 8],
            0u16,
        );
        let stage = match self.stages.get(&key) {
            Some(&st) => Some(st),
            None if self.stages.len() < self.caps.stages => {
                let category = match s.kind {
                    scope_kind::RENDER_PASS | scope_kind::DRAW => StageCategory::Graphics,
                    scope_kind::COMPUTE | scope_kind::DISPATCH => StageCategory::Compute,
                    _ => StageCategory::Other,
                };
                let st = self.out.put(|w| Ok(w.stage(&name, kind_name, category)));
                if let Some(st) = st {
                    self.stages.insert(key, st);
                }
                st
            }
            None => {
                self.drops.over_cap += 1;
                None
            }
        };
        let event_id = if s.kind == scope_kind::COMMAND_BUFFER {
            (u64::from(conn.pid) << 32) | u64::from(execution_correlation(s.execution))
        } else {
            self.vk_event_id(conn)
        };
        let (bound, depth, frame) = (
            s.bound_ns.to_string(),
            s.depth.to_string(),
            s.frame.to_string(),
        );
        let ev = RenderStage {
            ts: s.start_ns,
            duration: s.end_ns - s.start_ns,
            event_id,
            queue: hw,
            stage,
            context,
            gpu_id: gpu as i32,
            name: &name,
            extra: &[
                ("kind", kind_name),
                ("bound_ns", &bound),
                ("depth", &depth),
                ("frame", &frame),
            ],
        };
        self.out.put(|w| w.render_stage(&ev));
        self.gpu_events += 1;
        let duration = s.end_ns - s.start_ns;
        self.vk.scope(s.kind, &name, duration, s.bound_ns);
        if s.kind == scope_kind::COMMAND_BUFFER {
            self.agg.busy(gpu, s.start_ns, s.end_ns);
            if let Some(r) = self.vk.queues.get_mut(row) {
                r.executions += 1;
            }
        }
        if !s.stats.is_empty() {
            let Some(dev) = conn.vk.devices.get_mut(&device) else {
                return;
            };
            let values: Vec<(u32, f64)> = dev
                .stat_ids
                .iter()
                .copied()
                .zip(s.stats.iter().map(|v| v as f64))
                .collect();
            let descriptor = (!dev.described).then(|| dev.stat_specs.clone());
            dev.described = true;
            self.out
                .put(|w| w.gpu_counters(s.end_ns, gpu as i32, descriptor.as_deref(), &values));
        }
    }
}
