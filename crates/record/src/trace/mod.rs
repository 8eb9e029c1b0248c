//! The writer thread's state: records of every connection → the Perfetto
//! GPU trace ([`GpuTraceWriter`]) and the summary's aggregates.
//!
//! Per connection: its strings (per-process ids → names), devices
//! (ordinal → global GPU index by UUID, first seen first), threads (a track
//! each, NVTX push/pop stacks per domain), queues (a hardware queue per
//! process, context and stream), open start/end ranges (on lanes of a
//! per-domain track, since they need not nest) and NVTX ranges awaiting
//! their GPU span. Globally: the process tracks, GPUs, interned stages
//! (kernel name and shape; copies and memsets by kind) and the summary's
//! aggregates. Every table has a cap from [`Caps`]; what does not fit is
//! counted in [`Drops`] and drawn more plainly or not at all.

use crate::protocol::{
    activity, api_kind, copy_kind, decode_frame, init, memory_kind, severity, FrameHeader, Name,
    Record, Stats, Text, Work,
};
use crate::session::{Caps, Ended, Outcome};
use crate::summary::{
    Aggregates, DeviceSummary, Drops, ProcessSummary, Summary, TraceSummary, VkAggregates,
};
use gpu_counters_profiler::export::perfetto_gpu::{
    ClockReadings, CounterUnit, GpuCounterSpec, GpuTraceWriter, RenderStage, StageCategory,
    GRAPHICS_API_CUDA,
};
use std::collections::{HashMap, VecDeque};
use std::io::{self, Write};
use std::rc::Rc;

mod metrics;
mod nvtx;
mod vk;
mod work;

/// Processes listed in the summary at most (all are counted and traced).
const SUMMARY_PROCESSES: usize = 10_000;
/// Kernels remembered for their counters, per connection.
const RECENT_KERNELS: usize = 65_536;
/// Start/end range lanes per process and domain.
const ASYNC_LANES: usize = 64;
/// GPU counter ids per GPU: PM metrics first, per-kernel counters after.
const COUNTERS_PER_GPU: u32 = 64;

/// The trace output, which stops at its first error.
struct Out<W: Write> {
    w: Option<GpuTraceWriter<W>>,
    error: Option<io::Error>,
}

impl<W: Write> Out<W> {
    fn put<R>(&mut self, f: impl FnOnce(&mut GpuTraceWriter<W>) -> io::Result<R>) -> Option<R> {
        let w = self.w.as_mut()?;
        match f(w) {
            Ok(r) => Some(r),
            Err(e) => {
                self.error.get_or_insert(e);
                self.w = None;
                None
            }
        }
    }

    /// A track uuid from `f`, or 0 when nothing is written.
    fn track(&mut self, f: impl FnOnce(&mut GpuTraceWriter<W>) -> io::Result<u64>) -> u64 {
        self.put(f).unwrap_or(0)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum GpuKey {
    Uuid([u8; 16]),
    Local(u32, u32),
}

struct OpenRange {
    range_id: u64,
    ts: u64,
    name: Rc<str>,
}

#[derive(Default)]
struct Stack {
    open: Vec<OpenRange>,
    hidden: usize,
}

struct ThreadState {
    uuid: u64,
    stacks: HashMap<u32, Stack>,
    domain_tracks: HashMap<u32, u64>,
    span_tracks: HashMap<u32, u64>,
}

struct Span {
    tid: u32,
    domain: u32,
    parent: u64,
    name: Rc<str>,
    start: u64,
    end: Option<u64>,
    gpu: Option<(u64, u64)>,
    kernel_ns: u64,
}

struct AsyncOpen {
    domain: u32,
    lane: usize,
    ts: u64,
    name: Rc<str>,
}

/// The GPU counter tracks of one device's PM sampling or per-kernel
/// counters on a connection.
struct MetricTracks {
    gpu: usize,
    ids: Vec<u32>,
    specs: Vec<GpuCounterSpec>,
    /// Per metric: a byte count per sample, drawn as bytes per second.
    per_second: Vec<bool>,
    described: bool,
    /// Kernels of the device seen since the config (per-kernel counters).
    kernels: u64,
    /// Of those, kernels whose counters were drawn.
    measured: u64,
}

/// How a metric is drawn: its unit and whether a PM sample's value (a
/// count over the sample) is divided by the sample's duration. Byte counts
/// sampled over time become bytes per second, so that the track integrates
/// to the bytes moved; per kernel they stay bytes.
pub(crate) fn metric_unit(name: &str, sampled: bool) -> (CounterUnit, bool) {
    let per_second = name.ends_with(".per_second");
    if name.contains("pct") {
        (CounterUnit::Percent, false)
    } else if name.contains("bytes") && per_second {
        (CounterUnit::BytesPerSecond, false)
    } else if name.contains("bytes") && sampled {
        (CounterUnit::BytesPerSecond, true)
    } else if name.contains("bytes") {
        (CounterUnit::Bytes, false)
    } else {
        (CounterUnit::Count, false)
    }
}

/// Per-kernel counters waiting for their kernel's record, per connection.
const PENDING_COUNTERS: usize = 65_536;

#[derive(Default)]
struct Conn {
    pid: u32,
    ppid: u32,
    hello: bool,
    refused: bool,
    flags: u32,
    cmdline: Vec<String>,
    next_seq: u32,
    frames_lost: u64,
    goodbye: Option<u8>,
    stats: Stats,
    last_ts: u64,
    process: u64,
    strings: HashMap<u32, Rc<str>>,
    kernel_names: HashMap<u32, Rc<str>>,
    domains: HashMap<u32, Rc<str>>,
    devices: HashMap<u32, usize>,
    threads: HashMap<u32, ThreadState>,
    queues: HashMap<(u32, u32, usize), u64>,
    contexts: HashMap<u32, u64>,
    lanes: HashMap<u32, Vec<(u64, bool)>>,
    async_open: HashMap<u64, AsyncOpen>,
    spans: HashMap<u64, Span>,
    spans_flushed_upto: u64,
    pm: HashMap<u32, MetricTracks>,
    counters: HashMap<u32, MetricTracks>,
    pending_counters: HashMap<u32, (u32, Vec<f64>)>,
    recent: HashMap<u32, (u64, usize)>,
    recent_order: VecDeque<u32>,
    drops_track: u64,
    vk: vk::VkConn,
    vk_stats: Vec<(String, u64)>,
}

/// Everything the writer thread keeps; see the module documentation.
pub(crate) struct State<W: Write> {
    out: Out<W>,
    caps: Caps,
    clocks: fn() -> ClockReadings,
    conns: HashMap<u64, Conn>,
    process_tracks: HashMap<u32, u64>,
    gpus: Vec<(GpuKey, String)>,
    gpu_index: HashMap<GpuKey, usize>,
    stages: HashMap<(Rc<str>, [u32; 8], u16), u64>,
    other_stages: HashMap<String, u64>,
    overflow_queues: HashMap<usize, u64>,
    queue_count: usize,
    agg: Aggregates,
    drops: Drops,
    processes: Vec<ProcessSummary>,
    cuda: bool,
    gpu_events: u64,
    kernels: u64,
    pm_ran: bool,
    serialized: bool,
    vk: VkAggregates,
    vulkan: bool,
}

fn event_id(pid: u32, correlation: u32) -> u64 {
    (u64::from(pid) << 32) | u64::from(correlation)
}

fn demangle(name: &str) -> String {
    if !name.starts_with("_Z") {
        return name.to_string();
    }
    cpp_demangle::Symbol::new(name.as_bytes())
        .ok()
        .and_then(|s| s.demangle(&cpp_demangle::DemangleOptions::default()).ok())
        .unwrap_or_else(|| name.to_string())
}

fn text(t: Text<'_>) -> String {
    let mut s = t.lossy().into_owned();
    if t.truncated {
        s.push('…');
    }
    s
}

fn severity_name(s: u8) -> &'static str {
    match s {
        severity::INFO => "info",
        severity::WARNING => "warning",
        _ => "error",
    }
}

fn goodbye_name(r: u8) -> &'static str {
    match r {
        crate::protocol::goodbye::ATEXIT => "goodbye (exit)",
        crate::protocol::goodbye::SIGTERM => "goodbye (SIGTERM)",
        crate::protocol::goodbye::FORK_CHILD => "goodbye (forked child)",
        _ => "goodbye",
    }
}

impl<W: Write> State<W> {
    pub(crate) fn new(out: Option<W>, caps: Caps, clocks: fn() -> ClockReadings) -> Self {
        let mut o = Out {
            w: None,
            error: None,
        };
        if let Some(w) = out {
            match GpuTraceWriter::new(w, clocks()) {
                Ok(w) => o.w = Some(w),
                Err(e) => o.error = Some(e),
            }
        }
        State {
            out: o,
            caps,
            clocks,
            conns: HashMap::new(),
            process_tracks: HashMap::new(),
            gpus: Vec::new(),
            gpu_index: HashMap::new(),
            stages: HashMap::new(),
            other_stages: HashMap::new(),
            overflow_queues: HashMap::new(),
            queue_count: 0,
            agg: Aggregates::new(caps.summary_kernels, caps.summary_ranges, caps.notices),
            drops: Drops::default(),
            processes: Vec::new(),
            cuda: false,
            gpu_events: 0,
            kernels: 0,
            pm_ran: false,
            serialized: false,
            vk: VkAggregates::new(caps.summary_ranges),
            vulkan: false,
        }
    }

    pub(crate) fn clock_snapshot(&mut self) {
        let c = (self.clocks)();
        self.out.put(|w| w.clock_snapshot(c));
    }

    /// Applies one frame (already checked by its reader).
    pub(crate) fn frame(&mut self, conn_id: u64, header: FrameHeader, data: &[u8]) {
        let mut conn = self.conns.remove(&conn_id).unwrap_or_default();
        if conn.refused {
            self.conns.insert(conn_id, conn);
            return;
        }
        if header.seq != conn.next_seq {
            conn.frames_lost += u64::from(header.seq.wrapping_sub(conn.next_seq));
        }
        conn.next_seq = header.seq.wrapping_add(1);
        conn.pid = header.pid;
        if let Ok((_, records)) = decode_frame(data) {
            for r in records {
                match r {
                    Ok(r) => {
                        self.record(&mut conn, &r);
                        if conn.refused {
                            break;
                        }
                    }
                    Err(e) => {
                        self.refuse(&mut conn, &e.to_string());
                        break;
                    }
                }
            }
        }
        self.conns.insert(conn_id, conn);
    }

    fn refuse(&mut self, conn: &mut Conn, why: &str) {
        conn.refused = true;
        self.drops.connections_refused += 1;
        self.agg.notice(
            "error",
            &format!("pid {}: connection refused: {why}", conn.pid),
        );
    }

    fn string(&mut self, conn: &Conn, id: u32) -> Rc<str> {
        match conn.strings.get(&id) {
            Some(s) => s.clone(),
            None => {
                self.drops.unknown_references += 1;
                Rc::from(format!("(unknown string {id})"))
            }
        }
    }

    fn name(&mut self, conn: &Conn, n: &Name<'_>) -> Rc<str> {
        match n {
            Name::Id(id) => self.string(conn, *id),
            Name::Text(t) => Rc::from(text(*t)),
        }
    }

    fn domain(&self, conn: &Conn, domain: u32) -> Rc<str> {
        if domain == 0 {
            return Rc::from("default");
        }
        conn.domains
            .get(&domain)
            .cloned()
            .unwrap_or_else(|| Rc::from(format!("domain {domain}")))
    }

    fn process_track(&mut self, conn: &mut Conn) -> u64 {
        if conn.process != 0 || self.out.w.is_none() {
            return conn.process;
        }
        if let Some(&u) = self.process_tracks.get(&conn.pid) {
            conn.process = u;
            return u;
        }
        let name = conn
            .cmdline
            .first()
            .map(|c| c.rsplit('/').next().unwrap_or(c).to_string())
            .unwrap_or_default();
        let args: Vec<&str> = conn.cmdline.iter().map(String::as_str).collect();
        let pid = conn.pid as i32;
        let u = self.out.track(|w| w.process(pid, &name, &args));
        if self.process_tracks.len() < self.caps.threads_per_connection {
            self.process_tracks.insert(conn.pid, u);
        }
        conn.process = u;
        u
    }

    fn thread(&mut self, conn: &mut Conn, tid: u32) -> Option<u64> {
        if let Some(t) = conn.threads.get(&tid) {
            return Some(t.uuid);
        }
        if conn.threads.len() >= self.caps.threads_per_connection {
            self.drops.over_cap += 1;
            return None;
        }
        self.process_track(conn);
        let pid = conn.pid as i32;
        let uuid = self.out.track(|w| w.thread(pid, tid as i32, None));
        conn.threads.insert(
            tid,
            ThreadState {
                uuid,
                stacks: HashMap::new(),
                domain_tracks: HashMap::new(),
                span_tracks: HashMap::new(),
            },
        );
        Some(uuid)
    }

    /// The track NVTX push/pop ranges of `domain` go on: the thread's own
    /// for the default domain, a child track per other domain (ranges of
    /// two domains need not nest).
    fn nvtx_track(&mut self, conn: &mut Conn, tid: u32, domain: u32) -> Option<u64> {
        let uuid = self.thread(conn, tid)?;
        if domain == 0 {
            return Some(uuid);
        }
        if let Some(&u) = conn.threads.get(&tid)?.domain_tracks.get(&domain) {
            return Some(u);
        }
        let name = self.domain(conn, domain);
        let u = self.out.track(|w| w.track(uuid, &name));
        conn.threads.get_mut(&tid)?.domain_tracks.insert(domain, u);
        Some(u)
    }

    fn gpu(&mut self, conn: &Conn, ordinal: u32) -> usize {
        if let Some(&g) = conn.devices.get(&ordinal) {
            return g;
        }
        let key = GpuKey::Local(conn.pid, ordinal);
        self.gpu_of(key, format!("CUDA device {ordinal} of pid {}", conn.pid))
    }

    fn gpu_of(&mut self, key: GpuKey, name: String) -> usize {
        if let Some(&g) = self.gpu_index.get(&key) {
            return g;
        }
        let g = self.gpus.len();
        self.gpus.push((key.clone(), name));
        self.gpu_index.insert(key, g);
        g
    }

    fn queue(&mut self, conn: &mut Conn, w: &Work, gpu: usize) -> u64 {
        let key = (w.context, w.stream, gpu);
        if let Some(&q) = conn.queues.get(&key) {
            return q;
        }
        if self.queue_count >= self.caps.queues {
            self.drops.over_cap += 1;
            if let Some(&q) = self.overflow_queues.get(&gpu) {
                return q;
            }
            let q = self
                .out
                .put(|wr| Ok(wr.queue(&format!("GPU{gpu} (more streams)"))))
                .unwrap_or(0);
            self.overflow_queues.insert(gpu, q);
            return q;
        }
        self.queue_count += 1;
        let name = format!("GPU{gpu} {}:stream {}", conn.pid, w.stream);
        let q = self.out.put(|wr| Ok(wr.queue(&name))).unwrap_or(0);
        conn.queues.insert(key, q);
        q
    }

    fn context(&mut self, conn: &mut Conn, context: u32) -> Option<u64> {
        if let Some(&c) = conn.contexts.get(&context) {
            return Some(c);
        }
        let pid = conn.pid as i32;
        let c = self
            .out
            .put(|w| Ok(w.graphics_context(pid, GRAPHICS_API_CUDA)))?;
        if conn.contexts.len() < self.caps.queues {
            conn.contexts.insert(context, c);
        }
        Some(c)
    }

    fn other_stage(&mut self, name: &str) -> Option<u64> {
        if let Some(&s) = self.other_stages.get(name) {
            return Some(s);
        }
        if self.other_stages.len() >= self.caps.stages {
            self.drops.over_cap += 1;
            return None;
        }
        let s = self
            .out
            .put(|w| Ok(w.stage(name, "", StageCategory::Other)))?;
        self.other_stages.insert(name.to_string(), s);
        Some(s)
    }

    /// Checks a work record; counts and skips an incomplete one.
    fn complete(&mut self, w: &Work) -> bool {
        if w.flags & activity::INCOMPLETE != 0 || w.start_ns == 0 || w.end_ns < w.start_ns {
            self.drops.incomplete += 1;
            return false;
        }
        true
    }

    /// Adds GPU work to the NVTX range it was launched in.
    fn attribute(&mut self, conn: &mut Conn, w: &Work) {
        if w.flags & activity::JOINED == 0 || w.range_id == 0 {
            return;
        }
        match conn.spans.get_mut(&w.range_id) {
            Some(s) => {
                s.gpu = Some(match s.gpu {
                    None => (w.start_ns, w.end_ns),
                    Some((a, b)) => (a.min(w.start_ns), b.max(w.end_ns)),
                });
                s.kernel_ns += w.end_ns - w.start_ns;
            }
            None if w.range_id <= conn.spans_flushed_upto => self.drops.spans_late += 1,
            None => {}
        }
    }

    fn work_common(&mut self, conn: &mut Conn, w: &Work) -> (usize, u64, Option<u64>) {
        self.process_track(conn);
        let gpu = self.gpu(conn, u32::from(w.device));
        let queue = self.queue(conn, w, gpu);
        let context = self.context(conn, w.context);
        conn.last_ts = conn.last_ts.max(w.end_ns);
        self.agg.busy(gpu, w.start_ns, w.end_ns);
        self.gpu_events += 1;
        (gpu, queue, context)
    }

    fn record(&mut self, conn: &mut Conn, r: &Record<'_>) {
        if !conn.hello {
            match r {
                Record::Hello(h) => {
                    conn.hello = true;
                    conn.ppid = h.ppid;
                    conn.flags = h.flags;
                    conn.cmdline = h
                        .cmdline
                        .lossy()
                        .split('\0')
                        .filter(|s| !s.is_empty())
                        .map(str::to_string)
                        .collect();
                    if conn.cmdline.is_empty() {
                        conn.cmdline.push(text(h.exe));
                    }
                    conn.last_ts = h.start_ns;
                    if h.flags & init::CUDA != 0 {
                        self.cuda = true;
                    }
                    if h.flags & init::VULKAN != 0 {
                        self.vulkan = true;
                    }
                    self.process_track(conn);
                }
                other => {
                    let why = format!("its first record has tag {}, not Hello", other.tag());
                    self.refuse(conn, &why);
                }
            }
            return;
        }
        match r {
            Record::Hello(_) => self.refuse(conn, "a second Hello"),
            Record::Str(s) => {
                if s.id == 0 {
                    self.drops.unknown_references += 1;
                } else if conn.strings.len() < self.caps.strings_per_connection
                    || conn.strings.contains_key(&s.id)
                {
                    conn.strings.insert(s.id, Rc::from(text(s.text)));
                } else {
                    self.drops.over_cap += 1;
                }
            }
            Record::Thread(t) => {
                let name = self.string(conn, t.name);
                if let Some(uuid) = self.thread(conn, t.tid) {
                    let pid = conn.pid as i32;
                    self.out
                        .put(|w| w.thread_descriptor(uuid, pid, t.tid as i32, Some(&name)));
                }
            }
            Record::Device(d) => {
                let name = self.string(conn, d.name);
                let g = self.gpu_of(GpuKey::Uuid(d.uuid), name.to_string());
                conn.devices.insert(d.ordinal, g);
            }
            Record::Clock(c) => {
                self.agg.clock(c.bound_ns);
                conn.last_ts = conn.last_ts.max(c.cpu_ns);
            }
            Record::Init(i) => {
                conn.flags |= i.flags;
                if i.flags & init::CUDA != 0 {
                    self.cuda = true;
                }
            }
            Record::Api(a) => {
                conn.last_ts = conn.last_ts.max(a.exit_ns);
                let name = self.string(conn, a.name);
                let launched = matches!(
                    a.kind,
                    api_kind::LAUNCH | api_kind::GRAPH | api_kind::COPY | api_kind::MEMSET
                )
                .then(|| event_id(conn.pid, a.correlation));
                if let Some(t) = self.thread(conn, a.tid) {
                    self.out
                        .put(|w| w.slice_begin(t, a.enter_ns, &name, Some("cuda"), launched));
                    self.out.put(|w| w.slice_end(t, a.exit_ns.max(a.enter_ns)));
                }
            }
            Record::Kernel(k) => self.kernel(conn, k),
            Record::Copy(c) => self.copy(conn, c),
            Record::Memset(m) => self.memset(conn, m),
            Record::Sync(s) => self.sync(conn, s),
            Record::NvtxPush(p) => self.nvtx_push(conn, p),
            Record::NvtxPop(p) => self.nvtx_pop(conn, p),
            Record::NvtxStart(s) => self.nvtx_start(conn, s),
            Record::NvtxEnd(e) => self.nvtx_end(conn, e),
            Record::NvtxMark(m) => self.nvtx_mark(conn, m),
            Record::NvtxDomain(d) => self.nvtx_domain(conn, d),
            Record::PmConfig(c) | Record::CounterConfig(c) => {
                self.metric_config(conn, c, matches!(r, Record::PmConfig(_)))
            }
            Record::PmSample(s) => self.pm_sample(conn, s),
            Record::KernelCounters(k) => self.kernel_counters_record(conn, k),
            Record::Stats(s) => {
                conn.stats = *s;
                let total: u64 = s.cupti_dropped + s.queue_dropped + s.buffers_refused;
                self.process_track(conn);
                if conn.drops_track == 0 && total > 0 {
                    let p = conn.process;
                    conn.drops_track = self
                        .out
                        .track(|w| w.counter_track(p, "dropped records", CounterUnit::Count));
                }
                if conn.drops_track != 0 {
                    let (t, ts) = (conn.drops_track, conn.last_ts);
                    self.out.put(|w| w.counter(t, ts, total as i64));
                }
            }
            Record::Notice(n) => {
                let msg = text(n.text);
                let sev = severity_name(n.severity);
                self.agg.notice(sev, &format!("pid {}: {msg}", conn.pid));
                let p = self.process_track(conn);
                let ts = if n.ts_ns != 0 { n.ts_ns } else { conn.last_ts };
                conn.last_ts = conn.last_ts.max(ts);
                self.out.put(|w| {
                    w.instant(p, ts, &format!("gpu-counters: {msg}"), Some("gpu-counters"))
                });
            }
            Record::Goodbye(g) => {
                conn.goodbye = Some(g.reason);
                self.drops.unsent_at_exit += g.unsent;
            }
            Record::VkDevice(_)
            | Record::VkQueue(_)
            | Record::VkScope(_)
            | Record::VkFrame(_)
            | Record::VkStatNames(_)
            | Record::VkStats(_) => {
                self.vk_record(conn, r);
            }
            Record::Unknown { .. } => self.drops.unknown_records += 1,
        }
    }

    /// A connection ended: closes what it left open, writes its spans,
    /// and adds it to the summary.
    pub(crate) fn closed(&mut self, conn_id: u64, ended: Ended) {
        let Some(mut conn) = self.conns.remove(&conn_id) else {
            if let Ended::Refused(why) = ended {
                self.drops.connections_refused += 1;
                self.agg
                    .notice("error", &format!("a connection was refused: {why}"));
            }
            return;
        };
        let end_ts = conn.last_ts;
        // Ranges left open end where the process's last event was.
        let mut tids: Vec<u32> = conn.threads.keys().copied().collect();
        tids.sort_unstable();
        for tid in tids {
            let mut domains: Vec<u32> = conn.threads[&tid].stacks.keys().copied().collect();
            domains.sort_unstable();
            for domain in domains {
                while let Some(open) = conn
                    .threads
                    .get_mut(&tid)
                    .and_then(|t| t.stacks.get_mut(&domain))
                    .and_then(|s| s.open.pop())
                {
                    self.drops.nvtx_unterminated += 1;
                    if let Some(track) = self.nvtx_track(&mut conn, tid, domain) {
                        self.out.put(|w| w.slice_end(track, end_ts.max(open.ts)));
                    }
                    self.close_span(&mut conn, open, domain, end_ts);
                }
            }
        }
        let open: Vec<(u64, AsyncOpen)> = conn.async_open.drain().collect();
        for (_, o) in open {
            self.drops.nvtx_unterminated += 1;
            if let Some(lanes) = conn.lanes.get(&o.domain) {
                let track = lanes[o.lane].0;
                self.out.put(|w| w.slice_end(track, end_ts.max(o.ts)));
            }
        }
        self.flush_spans(&mut conn, false);
        // Counters whose kernel never came are not drawn.
        self.drops.unknown_references += conn.pending_counters.len() as u64;
        for t in conn.counters.values() {
            self.agg
                .counters(t.gpu, &[], t.measured, t.kernels.saturating_sub(t.measured));
        }
        let how = match (&ended, conn.goodbye) {
            (_, Some(r)) => goodbye_name(r).to_string(),
            (Ended::Eof, None) => "ended without goodbye".to_string(),
            (Ended::Forced, None) => "still connected at the drain deadline".to_string(),
            (Ended::Error(e), None) => format!("connection failed: {e}"),
            (Ended::Refused(e), None) => format!("connection refused: {e}"),
        };
        match &ended {
            Ended::Forced => self.drops.connections_forced += 1,
            Ended::Refused(why) => self.refuse(&mut conn, why),
            _ => {}
        }
        if conn.hello && conn.goodbye.is_none() {
            self.drops.processes_without_goodbye += 1;
        }
        self.drops.frames_lost += conn.frames_lost;
        for (k, v) in conn.stats.named() {
            *self.drops.injected.entry(k.to_string()).or_default() += v;
        }
        for (k, v) in std::mem::take(&mut conn.vk_stats) {
            *self.drops.injected.entry(k).or_default() += v;
        }
        if conn.hello {
            if self.processes.len() < SUMMARY_PROCESSES {
                self.processes.push(ProcessSummary {
                    pid: conn.pid,
                    ppid: conn.ppid,
                    cmdline: conn.cmdline.clone(),
                    cuda: conn.flags & init::CUDA != 0,
                    nvtx: conn.flags & init::NVTX != 0,
                    vulkan: conn.flags & init::VULKAN != 0,
                    ended: how,
                    goodbye: conn.goodbye.is_some(),
                    frames_lost: conn.frames_lost,
                });
            } else {
                self.drops.over_cap += 1;
            }
        }
    }

    /// Ends every connection still known, flushes the trace, and builds the
    /// summary.
    pub(crate) fn finish(mut self) -> Outcome {
        let mut ids: Vec<u64> = self.conns.keys().copied().collect();
        ids.sort_unstable();
        for id in ids {
            self.closed(id, Ended::Forced);
        }
        let (bytes, packets) = self
            .out
            .w
            .as_ref()
            .map_or((0, 0), |w| (w.bytes_written(), w.packets_written()));
        if let Some(w) = self.out.w.as_mut() {
            if let Err(e) = w.flush() {
                self.out.error.get_or_insert(e);
            }
        }
        let vk = std::mem::take(&mut self.vk);
        let mut summary = Summary {
            cuda_initialized: self.cuda,
            vulkan_initialized: self.vulkan,
            vulkan: vk.fill(),
            processes: std::mem::take(&mut self.processes),
            devices: self
                .gpus
                .iter()
                .enumerate()
                .map(|(index, (key, name))| DeviceSummary {
                    index,
                    name: name.clone(),
                    uuid: match key {
                        GpuKey::Uuid(u) => Some(u.iter().map(|b| format!("{b:02x}")).collect()),
                        GpuKey::Local(..) => None,
                    },
                })
                .collect(),
            drops: std::mem::take(&mut self.drops),
            trace: TraceSummary {
                path: None,
                bytes,
                packets,
                gpu_events: self.gpu_events,
                bytes_per_kernel: (self.kernels > 0).then(|| bytes as f64 / self.kernels as f64),
            },
            serialized: self.serialized,
            pm_clocks_locked: self.pm_ran,
            ..Summary::default()
        };
        summary.drops.over_cap += self.agg.notices_dropped;
        summary.processes.sort_by_key(|p| p.pid);
        self.agg.fill(&mut summary);
        Outcome {
            summary,
            write_error: self.out.error.take(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Units follow the names: percentages; byte counts sampled over time
    /// as bytes per second (divided by the sample's duration), per kernel
    /// as bytes; rates already per second as they are; plain counts.
    #[test]
    fn metric_units_follow_their_names() {
        let pct = "sm__throughput.avg.pct_of_peak_sustained_elapsed";
        assert_eq!(metric_unit(pct, true), (CounterUnit::Percent, false));
        assert_eq!(metric_unit(pct, false), (CounterUnit::Percent, false));
        assert_eq!(
            metric_unit("dram__bytes_read.sum", true),
            (CounterUnit::BytesPerSecond, true)
        );
        assert_eq!(
            metric_unit("dram__bytes_read.sum", false),
            (CounterUnit::Bytes, false)
        );
        assert_eq!(
            metric_unit("dram__bytes_read.sum.per_second", true),
            (CounterUnit::BytesPerSecond, false)
        );
        assert_eq!(
            metric_unit("dram__bytes_read.sum.pct_of_peak_sustained_elapsed", true),
            (CounterUnit::Percent, false)
        );
        assert_eq!(
            metric_unit("smsp__inst_executed.sum", true),
            (CounterUnit::Count, false)
        );
    }
}
