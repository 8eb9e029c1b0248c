//! Synthetic record streams, for tests and benchmarks of the collector:
//! what an injected process would send for a scripted workload (kernels of
//! a mix of names and shapes, copies, memsets, launch calls, NVTX steps,
//! stats), with exact counts known in advance.

use crate::protocol::{
    activity, api_kind, copy_kind, init, memory_kind, Api, Device, FrameHeader, Hello, Kernel,
    MemCopy, Memset, Name, Notice, NvtxPop, NvtxRange, Record, Str, Text, Thread, Work, MAX_FRAME,
};

/// A scripted workload; see the module documentation.
#[derive(Debug, Clone)]
pub struct Script {
    /// The process.
    pub pid: u32,
    /// Its parent.
    pub ppid: u32,
    /// The thread that launches everything.
    pub tid: u32,
    /// Kernels to emit.
    pub kernels: u64,
    /// Distinct kernel names (`kernel_000` ...), used with a skewed mix.
    pub names: u32,
    /// Emit a launch call ([`Api`]) per kernel, copy and memset.
    pub api: bool,
    /// Kernels per NVTX `step N` range (pushed and popped on `tid`); 0: none.
    pub step_kernels: u64,
    /// A copy (host to device, 1 MiB) after every this many kernels; 0: none.
    pub copy_every: u64,
    /// A memset after every this many kernels; 0: none.
    pub memset_every: u64,
    /// The first launch's time, `CLOCK_MONOTONIC` ns.
    pub base_ns: u64,
    /// Hello flags ([`init`]).
    pub flags: u32,
    /// Leave the last NVTX step open (a process killed inside it).
    pub leave_open: bool,
}

impl Default for Script {
    fn default() -> Self {
        Script {
            pid: 1,
            ppid: 0,
            tid: 1,
            kernels: 10,
            names: 3,
            api: true,
            step_kernels: 0,
            copy_every: 0,
            memset_every: 0,
            base_ns: 1_000_000_000,
            flags: init::CUDA,
            leave_open: false,
        }
    }
}

/// The UUID every synthetic process reports for its device 0.
pub const DEVICE_UUID: [u8; 16] = *b"synthetic-gpu-00";
/// Ns between kernel launches.
pub const PERIOD_NS: u64 = 4000;

/// The `i`th kernel name, mangled as a C++ compiler would
/// (`_Z10kernel_007Pfi`, `kernel_007(float*, int)` demangled).
pub fn kernel_name(i: u32) -> String {
    let base = format!("kernel_{i:03}");
    format!("_Z{}{base}Pfi", base.len())
}

/// The demangled form of [`kernel_name`].
pub fn kernel_name_demangled(i: u32) -> String {
    format!("kernel_{i:03}(float*, int)")
}

/// The kernel name index of kernel `n`: a fixed skewed mix (low indices
/// far more often), as training loops repeat a few kernels most.
pub fn name_of(n: u64, names: u32) -> u32 {
    let mut x = n
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(0x2545_F491_4F6C_DD1D);
    x ^= x >> 29;
    let r = (x % 1_000_003) as f64 / 1_000_003.0;
    ((r * r * r) * f64::from(names.max(1))) as u32
}

/// The duration of kernel `n`, ns.
pub fn duration_of(n: u64) -> u64 {
    1000 + (n % 7) * 100
}

/// Str ids: 1..=names kernel names, then these.
fn id_launch(names: u32) -> u32 {
    names + 1
}
fn id_memcpy(names: u32) -> u32 {
    names + 2
}
fn id_memset(names: u32) -> u32 {
    names + 3
}
fn id_thread(names: u32) -> u32 {
    names + 4
}
fn id_device(names: u32) -> u32 {
    names + 5
}

impl Script {
    /// Counts the script will produce: (kernels, copies, memsets, steps).
    pub fn counts(&self) -> (u64, u64, u64, u64) {
        let per = |e: u64| self.kernels.checked_div(e).unwrap_or(0);
        let steps = if self.step_kernels == 0 {
            0
        } else {
            self.kernels.div_ceil(self.step_kernels)
        };
        (
            self.kernels,
            per(self.copy_every),
            per(self.memset_every),
            steps,
        )
    }

    /// The preamble: Hello and the strings, thread and device.
    pub fn hello<'a>(&self, cmdline: &'a [u8]) -> Hello<'a> {
        Hello {
            ppid: self.ppid,
            start_ns: self.base_ns,
            lib_version: 0x0001_0000,
            cupti_version: 0,
            driver_version: 0,
            flags: self.flags,
            exe: Text::new(cmdline.split(|&b| b == 0).next().unwrap_or(b"")),
            cmdline: Text::new(cmdline),
        }
    }

    /// Calls `emit` for every record after the Hello, in order (no Stats,
    /// no Goodbye).
    pub fn run(&self, emit: &mut dyn FnMut(&Record<'_>)) {
        let n = self.names;
        if self.flags & init::CUDA != 0 {
            for i in 0..n {
                let s = kernel_name(i);
                emit(&Record::Str(Str {
                    id: i + 1,
                    text: Text::from_str(&s),
                }));
            }
            for (id, s) in [
                (id_launch(n), "cuLaunchKernel"),
                (id_memcpy(n), "cuMemcpyHtoDAsync_v2"),
                (id_memset(n), "cuMemsetD32Async"),
                (id_device(n), "Synthetic GPU"),
            ] {
                emit(&Record::Str(Str {
                    id,
                    text: Text::from_str(s),
                }));
            }
            emit(&Record::Device(Device {
                ordinal: 0,
                uuid: DEVICE_UUID,
                sm_count: 132,
                cc_major: 9,
                cc_minor: 0,
                name: id_device(n),
                chip: 0,
            }));
        }
        emit(&Record::Str(Str {
            id: id_thread(n),
            text: Text::from_str("launcher"),
        }));
        emit(&Record::Thread(Thread {
            tid: self.tid,
            name: id_thread(n),
        }));
        let mut correlation = 0u32;
        let mut step = 0u64;
        let mut range_id = 0u64;
        for k in 0..self.kernels {
            let t = self.base_ns + k * PERIOD_NS;
            if self.step_kernels > 0 && k % self.step_kernels == 0 {
                range_id += 1;
                let step_name = format!("step {step}");
                emit(&Record::NvtxPush(NvtxRange {
                    tid: self.tid,
                    ts_ns: t,
                    range_id,
                    domain: 0,
                    name: Name::Text(Text::from_str(&step_name)),
                    color: 0,
                    category: 0,
                }));
            }
            if self.flags & init::CUDA != 0 {
                correlation += 1;
                let work = |c: u32, start: u64, dur: u64| Work {
                    correlation: c,
                    device: 0,
                    flags: activity::JOINED,
                    context: 1,
                    stream: 7,
                    start_ns: start,
                    end_ns: start + dur,
                    graph_id: 0,
                    graph_node: 0,
                    launch_tid: self.tid,
                    enter_ns: t + 100,
                    range_id: if self.step_kernels > 0 { range_id } else { 0 },
                };
                if self.api {
                    emit(&Record::Api(Api {
                        tid: self.tid,
                        domain: 1,
                        kind: api_kind::LAUNCH,
                        cbid: 307,
                        correlation,
                        enter_ns: t + 100,
                        exit_ns: t + 1500,
                        result: 0,
                        range_id,
                        name: id_launch(n),
                    }));
                }
                let i = name_of(k, n);
                let wide = k % 3 == 0;
                emit(&Record::Kernel(Kernel {
                    work: work(correlation, t + 2000, duration_of(k)),
                    registers: 32,
                    grid: [if wide { 256 } else { 128 }, 1, 1],
                    block: [256, 1, 1],
                    smem_static: 0,
                    smem_dynamic: 4096,
                    name: i + 1,
                }));
                if self.copy_every > 0 && (k + 1) % self.copy_every == 0 {
                    correlation += 1;
                    if self.api {
                        emit(&Record::Api(Api {
                            tid: self.tid,
                            domain: 1,
                            kind: api_kind::COPY,
                            cbid: 279,
                            correlation,
                            enter_ns: t + 3300,
                            exit_ns: t + 3400,
                            result: 0,
                            range_id,
                            name: id_memcpy(n),
                        }));
                    }
                    emit(&Record::Copy(MemCopy {
                        work: work(correlation, t + 3500, 200),
                        kind: copy_kind::HTOD,
                        src_kind: memory_kind::PINNED,
                        dst_kind: memory_kind::DEVICE,
                        bytes: 1 << 20,
                    }));
                }
                if self.memset_every > 0 && (k + 1) % self.memset_every == 0 {
                    correlation += 1;
                    if self.api {
                        emit(&Record::Api(Api {
                            tid: self.tid,
                            domain: 1,
                            kind: api_kind::MEMSET,
                            cbid: 290,
                            correlation,
                            enter_ns: t + 3700,
                            exit_ns: t + 3750,
                            result: 0,
                            range_id,
                            name: id_memset(n),
                        }));
                    }
                    emit(&Record::Memset(Memset {
                        work: work(correlation, t + 3800, 100),
                        memory_kind: u16::from(memory_kind::DEVICE),
                        value: 0,
                        bytes: 4096,
                    }));
                }
            }
            if self.step_kernels > 0
                && ((k + 1) % self.step_kernels == 0 || (k + 1 == self.kernels && !self.leave_open))
            {
                emit(&Record::NvtxPop(NvtxPop {
                    tid: self.tid,
                    ts_ns: t + PERIOD_NS - 1,
                    domain: 0,
                    range_id,
                }));
                step += 1;
            }
        }
    }

    /// The whole stream (Hello, then [`Script::run`]'s records) cut into
    /// numbered frames of at most [`MAX_FRAME`] bytes, as a sender would
    /// send it.
    pub fn frames(&self) -> Vec<Vec<u8>> {
        let cmd = b"synthetic\0".to_vec();
        let mut frames = Vec::new();
        let mut cur = Vec::new();
        let mut seq = 0;
        let pid = self.pid;
        let mut push = |r: &Record<'_>, frames: &mut Vec<Vec<u8>>| {
            let mut rec = Vec::new();
            if r.encode(&mut rec).is_err() {
                return;
            }
            if !cur.is_empty() && cur.len() + rec.len() > MAX_FRAME {
                frames.push(std::mem::take(&mut cur));
            }
            if cur.is_empty() {
                FrameHeader { flags: 0, pid, seq }.encode(&mut cur);
                seq += 1;
            }
            cur.extend_from_slice(&rec);
        };
        push(&Record::Hello(self.hello(&cmd)), &mut frames);
        self.run(&mut |r| push(r, &mut frames));
        if !cur.is_empty() {
            frames.push(cur);
        }
        frames
    }

    /// A notice record.
    pub fn notice<'a>(&self, text: &'a str) -> Record<'a> {
        Record::Notice(Notice {
            ts_ns: self.base_ns,
            severity: crate::protocol::severity::WARNING,
            text: Text::from_str(text),
        })
    }
}
