//! The layer's connection to `gpu-counters record`'s collector: its own
//! `Hello` (with `init::VULKAN`), interned strings, the counts it sends as
//! `VkStats`, and the exit sequence.
//!
//! Records go through `gpu_counters_record::client`'s bounded queue (a full
//! queue drops and counts, never blocks the program) and sender thread.
//! Outside `gpu-counters record` (no `GPU_COUNTERS_RECORD_DIR`) there is no
//! sink and the layer passes every call straight through.
//!
//! A forked child never sends on its parent's connection: every send checks
//! the pid the sink was made in.

use crate::config::Config;
use gpu_counters_record::client::{socket_path_from_env, Queue, Sender, Stream, RECORD_DIR_VAR};
use gpu_counters_record::protocol::{
    goodbye, init, severity, Goodbye, Hello, Name, Notice, Record, Seq, Str, Text, VkStats,
    VK_STAT_FIELDS,
};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// How often the sender thread sends what is queued.
const SEND_PERIOD: Duration = Duration::from_millis(20);
/// Distinct strings interned at most; beyond, names go inline.
pub const MAX_STRINGS: usize = 65_536;

/// Indices into [`Counts`], in [`VK_STAT_FIELDS`] order.
pub mod stat {
    /// Command buffer executions timed.
    pub const EXECUTIONS: usize = 0;
    /// Scopes sent.
    pub const SCOPES: usize = 1;
    /// Frames sent.
    pub const FRAMES: usize = 2;
    /// Executions on queues without timestamps.
    pub const UNTIMED_QUEUE: usize = 3;
    /// Executions whose results the ring could not hold.
    pub const RING_FULL: usize = 4;
    /// Scopes not timed: a command buffer's queries or the device's query
    /// blocks ran out, or a layer command buffer could not be made.
    pub const QUERY_CAP: usize = 5;
    /// Scopes whose timestamps were not available or not convertible.
    pub const UNAVAILABLE: usize = 6;
    /// Label ends without a begin, and labels left open.
    pub const LABEL_UNBALANCED: usize = 7;
    /// Executions of a command buffer already in flight on another queue.
    pub const CONCURRENT: usize = 8;
    /// Scopes recorded in secondary command buffers (timed only as a whole).
    pub const SECONDARY_SCOPES: usize = 9;
    /// Executions lost to a lost device.
    pub const DEVICE_LOST: usize = 10;
    /// Executions still in flight when their device was destroyed or the
    /// process exited.
    pub const UNRETIRED: usize = 11;
    /// Records the queue dropped (filled in when sent).
    pub const QUEUE_DROPPED: usize = 12;
    /// Executions on devices that could not calibrate their clock.
    pub const NO_CALIBRATION: usize = 13;
}

/// The counts of [`VK_STAT_FIELDS`].
#[derive(Debug, Default)]
pub struct Counts([AtomicU64; VK_STAT_FIELDS.len()]);

impl Counts {
    /// Adds `n` to count `i` (one of [`stat`]).
    pub fn add(&self, i: usize, n: u64) {
        if n > 0 {
            self.0[i].fetch_add(n, Ordering::Relaxed);
        }
    }

    /// Count `i`.
    pub fn get(&self, i: usize) -> u64 {
        self.0[i].load(Ordering::Relaxed)
    }
}

/// The process's connection; see the module documentation.
pub struct Sink {
    pid: u32,
    /// Records waiting to be sent.
    queue: Arc<Queue>,
    stream: Mutex<Option<Stream>>,
    strings: Mutex<HashMap<Box<str>, u32>>,
    /// What `record` asked for.
    pub config: Config,
    /// The counts sent as `VkStats`.
    pub counts: Counts,
    done: AtomicBool,
}

impl std::fmt::Debug for Sink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sink")
            .field("pid", &self.pid)
            .finish_non_exhaustive()
    }
}

static SINK: OnceLock<Option<Sink>> = OnceLock::new();

/// `CLOCK_MONOTONIC` ns.
pub fn now_ns() -> u64 {
    gpu_counters_hal::cpu_monotonic_ns()
}

/// The calling thread's id.
pub fn gettid() -> u32 {
    // SAFETY: gettid cannot fail.
    unsafe { libc::gettid() as u32 }
}

fn read_proc(path: &str) -> Vec<u8> {
    std::fs::read(path).unwrap_or_default()
}

fn lib_version() -> u32 {
    let v = |s: &str| s.parse::<u32>().unwrap_or(0);
    (v(env!("CARGO_PKG_VERSION_MAJOR")) << 16)
        | (v(env!("CARGO_PKG_VERSION_MINOR")) << 8)
        | v(env!("CARGO_PKG_VERSION_PATCH"))
}

extern "C" fn at_exit() {
    let _ = std::panic::catch_unwind(|| {
        if let Some(s) = get() {
            s.exit(goodbye::ATEXIT);
        }
    });
}

/// Registers the exit sequence with `atexit` (again): called after each
/// device is made, so that it runs before the exit handlers the driver
/// registered while making it (they run last-registered first).
pub fn register_exit_handler() {
    if get().is_some() {
        // SAFETY: registers a plain extern "C" function of this library,
        // which stays mapped while the process runs.
        unsafe { libc::atexit(at_exit) };
    }
}

/// What the exit sequence runs first, once a device is registered.
static BEFORE_EXIT: OnceLock<fn()> = OnceLock::new();

/// Sets what the exit sequence runs before it sends the counts: the
/// devices' part, given by the module that registers devices (so that the
/// sink knows nothing of devices). Set once; later calls change nothing.
pub fn set_before_exit(f: fn()) {
    let _ = BEFORE_EXIT.set(f);
}

/// The process's sink, made on first use; `None` outside `gpu-counters
/// record` or in a forked child of the process that made it.
pub fn get() -> Option<&'static Sink> {
    let s = SINK.get_or_init(Sink::new).as_ref()?;
    // SAFETY: getpid cannot fail.
    (s.pid == unsafe { libc::getpid() } as u32).then_some(s)
}

impl Sink {
    fn new() -> Option<Sink> {
        let socket = socket_path_from_env()?;
        let dir = std::env::var_os(RECORD_DIR_VAR)?;
        let (config, config_error) = Config::load(std::path::Path::new(&dir));
        // SAFETY: getpid/getppid cannot fail.
        let (pid, ppid) = unsafe { (libc::getpid() as u32, libc::getppid() as u32) };
        let exe = std::fs::read_link("/proc/self/exe")
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
        let cmdline = read_proc("/proc/self/cmdline");
        let hello = Hello {
            ppid,
            start_ns: now_ns(),
            lib_version: lib_version(),
            cupti_version: 0,
            driver_version: 0,
            flags: init::VULKAN,
            exe: Text::from_str(&exe),
            cmdline: Text::new(&cmdline),
        };
        let queue_bytes = std::env::var("GPU_COUNTERS_RECORD_QUEUE_MB")
            .ok()
            .and_then(|v| v.parse::<usize>().ok())
            .map_or(gpu_counters_record::client::DEFAULT_QUEUE_BYTES, |mb| {
                mb << 20
            });
        let queue = Arc::new(Queue::new(queue_bytes));
        let mut sender = Sender::new(socket, pid, &hello).ok()?;
        // A collector that stops reading costs a frame at most this long.
        sender.set_timeout(Some(Duration::from_secs(1)));
        let stream = Stream::start(sender, queue.clone(), SEND_PERIOD).ok();
        // SAFETY: registers a plain extern "C" function of this library,
        // which the loader never unloads while the process runs (the
        // manifest's library stays mapped: see `lib.rs`).
        unsafe { libc::atexit(at_exit) };
        let sink = Sink {
            pid,
            queue,
            stream: Mutex::new(stream),
            strings: Mutex::new(HashMap::new()),
            config,
            counts: Counts::default(),
            done: AtomicBool::new(false),
        };
        if let Some(e) = config_error {
            sink.notice(severity::WARNING, &e);
        }
        Some(sink)
    }

    /// Appends a record (dropped and counted when the queue is full).
    pub fn push(&self, r: &Record<'_>) {
        if !self.done.load(Ordering::Relaxed) {
            self.queue.push(r);
        }
    }

    /// The id of string `s`, sending it first where it is new; `None` where
    /// the table is full.
    pub fn intern(&self, s: &str) -> Option<u32> {
        let mut t = self.strings.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(&id) = t.get(s) {
            return Some(id);
        }
        if t.len() >= MAX_STRINGS {
            return None;
        }
        let id = t.len() as u32 + 1;
        // Sent under the lock: no record naming `id` is queued before it.
        self.push(&Record::Str(Str {
            id,
            text: Text::from_str(s),
        }));
        t.insert(s.into(), id);
        Some(id)
    }

    /// `s` as a [`Name`]: its id, or inline where the table is full.
    pub fn name<'a>(&self, s: &'a str) -> Name<'a> {
        match self.intern(s) {
            Some(id) => Name::Id(id),
            None => Name::Text(Text::from_str(s)),
        }
    }

    /// Sends a notice.
    pub fn notice(&self, sev: u8, text: &str) {
        self.push(&Record::Notice(Notice {
            ts_ns: now_ns(),
            severity: sev,
            text: Text::from_str(text),
        }));
    }

    /// Sends the counts so far.
    pub fn send_stats(&self) {
        let mut values = [0u64; VK_STAT_FIELDS.len()];
        for (i, v) in values.iter_mut().enumerate() {
            *v = self.counts.get(i);
        }
        values[stat::QUEUE_DROPPED] = self.queue.dropped();
        self.push(&Record::VkStats(VkStats {
            values: Seq::Slice(&values),
        }));
    }

    /// The exit sequence, once: the devices' part (see [`set_before_exit`]), the
    /// counts, a `Goodbye`, and what is queued
    /// sent within `GPU_COUNTERS_RECORD_EXIT_MS` (default 2000).
    pub fn exit(&self, reason: u8) {
        if self.done.load(Ordering::Acquire) {
            return;
        }
        if let Some(before) = BEFORE_EXIT.get() {
            before();
        }
        if self.done.swap(true, Ordering::AcqRel) {
            return;
        }
        let mut values = [0u64; VK_STAT_FIELDS.len()];
        for (i, v) in values.iter_mut().enumerate() {
            *v = self.counts.get(i);
        }
        values[stat::QUEUE_DROPPED] = self.queue.dropped();
        let wait = Duration::from_millis(200);
        self.queue.push_wait(
            &Record::VkStats(VkStats {
                values: Seq::Slice(&values),
            }),
            wait,
        );
        self.queue
            .push_wait(&Record::Goodbye(Goodbye { reason, unsent: 0 }), wait);
        let ms = std::env::var("GPU_COUNTERS_RECORD_EXIT_MS")
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(2000);
        let stream = match self.stream.try_lock() {
            Ok(mut s) => s.take(),
            Err(_) => None,
        };
        if let Some(s) = stream {
            s.finish(Duration::from_millis(ms));
        }
    }
}
