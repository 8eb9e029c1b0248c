//! The injected process's state: its connection to the recorder (queue,
//! sender thread), interned strings, counts, and the NVTX stack of each
//! thread.
//!
//! One state per process. A forked child (which has only the forking
//! thread, and locks other threads of the parent may have held) never
//! touches its parent's: the `pthread_atfork` child handler bumps
//! [`GENERATION`], and the first event in the child builds a fresh state
//! (new connection, its own `Hello`), leaving the parent's leaked.

use crate::config::Config;
use crate::join::Join;
use gpu_counters_record::client::{socket_path_from_env, Queue, Sender, Stream, RECORD_DIR_VAR};
use gpu_counters_record::protocol::{self, Hello, Name, Notice, Record, Str, Text, Thread};
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// Bumped in a forked child: a state of an older generation is the
/// parent's.
pub static GENERATION: AtomicU64 = AtomicU64::new(1);

static STATE: AtomicPtr<State> = AtomicPtr::new(std::ptr::null_mut());

/// How often the sender thread sends what is queued.
const SEND_PERIOD: Duration = Duration::from_millis(20);

/// Distinct strings interned per process at most; beyond, names go inline.
pub const MAX_STRINGS: usize = 65_536;

/// `CLOCK_MONOTONIC` ns.
pub fn now_ns() -> u64 {
    // SAFETY: timespec is plain data; clock_gettime fills it.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: a valid, writable timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The calling thread's id.
pub fn gettid() -> u32 {
    // SAFETY: gettid cannot fail.
    unsafe { libc::gettid() as u32 }
}

/// Counts sent in the process's `Stats`.
#[derive(Debug, Default)]
pub struct Counts {
    /// Activity records handed over.
    pub records: AtomicU64,
    /// Records with no start or end (unfinished at a forced flush).
    pub incomplete: AtomicU64,
    /// NVTX push ranges open now (what is open at exit is unterminated).
    pub nvtx_open: AtomicU64,
    /// NVTX pops of an empty stack.
    pub nvtx_pop_empty: AtomicU64,
    /// gpu-counters' own kernels (calibration probes), not reported.
    pub own_kernels: AtomicU64,
    /// Records CUPTI dropped.
    pub cupti_dropped: AtomicU64,
    /// Buffers CUPTI asked for and did not get.
    pub buffers_refused: AtomicU64,
    /// PM-sampling hardware-buffer overflows.
    pub pm_overflows: AtomicU64,
    /// Gaps between consecutive PM samples.
    pub pm_gaps: AtomicU64,
}

/// Interned strings, by content and by address of a static string.
#[derive(Default)]
struct Strings {
    ids: HashMap<Vec<u8>, u32>,
    by_ptr: HashMap<usize, u32>,
    next: u32,
}

/// One process's state.
pub struct State {
    /// The process.
    pub pid: u32,
    generation: u64,
    /// Records waiting to be sent.
    pub queue: Arc<Queue>,
    stream: Mutex<Option<Stream>>,
    strings: Mutex<Strings>,
    domains: Mutex<HashMap<Vec<u8>, u32>>,
    /// What `record` asked for.
    pub config: Config,
    /// Why the config could not be read, if it could not.
    pub config_error: Option<String>,
    /// Bits of `protocol::init` set up so far.
    pub flags: AtomicU32,
    /// Counts for `Stats`.
    pub counts: Counts,
    /// The correlation join.
    pub join: Mutex<Join>,
    next_range: AtomicU64,
    /// The exit sequence ran (nothing more is sent).
    pub done: AtomicBool,
}

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("State")
            .field("pid", &self.pid)
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn read_proc(path: &str) -> Vec<u8> {
    std::fs::read(path).unwrap_or_default()
}

/// The library's version as `Hello` carries it.
pub fn lib_version() -> u32 {
    let v = |s: &str| s.parse::<u32>().unwrap_or(0);
    (v(env!("CARGO_PKG_VERSION_MAJOR")) << 16)
        | (v(env!("CARGO_PKG_VERSION_MINOR")) << 8)
        | v(env!("CARGO_PKG_VERSION_PATCH"))
}

impl State {
    /// A state for this process, connected (lazily) to the recorder at
    /// `GPU_COUNTERS_RECORD_DIR`; `None` where it is not set (the library
    /// was loaded outside `gpu-counters record`).
    fn new(generation: u64, flags: u32) -> Option<State> {
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
            flags,
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
        Some(State {
            pid,
            generation,
            queue,
            stream: Mutex::new(stream),
            strings: Mutex::new(Strings {
                next: 1,
                ..Strings::default()
            }),
            domains: Mutex::new(HashMap::new()),
            config,
            config_error,
            flags: AtomicU32::new(flags),
            counts: Counts::default(),
            join: Mutex::new(Join::new()),
            next_range: AtomicU64::new(1),
            done: AtomicBool::new(false),
        })
    }

    /// Appends a record (dropped and counted when the queue is full).
    pub fn push(&self, r: &Record<'_>) {
        self.queue.push(r);
    }

    /// The id of string `s`, sending it first where it is new; `None`
    /// where the table is full (send the text inline instead).
    pub fn intern(&self, s: &[u8]) -> Option<u32> {
        let mut t = lock(&self.strings);
        if let Some(&id) = t.ids.get(s) {
            return Some(id);
        }
        if t.ids.len() >= MAX_STRINGS {
            return None;
        }
        let id = t.next;
        t.next += 1;
        // Sent under the lock: no record naming `id` can be queued before it.
        self.push(&Record::Str(Str {
            id,
            text: Text::new(s),
        }));
        t.ids.insert(s.to_vec(), id);
        Some(id)
    }

    /// The id of the static NUL-terminated string at `ptr` (CUPTI's
    /// function and kernel names: one address per string), interned by
    /// content on first sight.
    ///
    /// # Safety
    ///
    /// `ptr` is null or a NUL-terminated string that never changes while
    /// the process runs (or, where it may be freed, is never reused for a
    /// different string).
    pub unsafe fn intern_static(&self, ptr: *const std::os::raw::c_char) -> u32 {
        if ptr.is_null() {
            return 0;
        }
        if let Some(&id) = lock(&self.strings).by_ptr.get(&(ptr as usize)) {
            return id;
        }
        // SAFETY: the caller's promise.
        let s = unsafe { std::ffi::CStr::from_ptr(ptr) }.to_bytes();
        let id = self.intern(s).unwrap_or(0);
        if id != 0 {
            let mut t = lock(&self.strings);
            if t.by_ptr.len() < MAX_STRINGS {
                t.by_ptr.insert(ptr as usize, id);
            }
        }
        id
    }

    /// `s` as a [`Name`]: its id, or inline where the table is full.
    pub fn name<'a>(&self, s: &'a [u8]) -> Name<'a> {
        match self.intern(s) {
            Some(id) => Name::Id(id),
            None => Name::Text(Text::new(s)),
        }
    }

    /// The id of NVTX domain `name` (sent on first sight; never 0).
    pub fn domain(&self, name: &[u8]) -> u32 {
        let mut d = lock(&self.domains);
        if let Some(&id) = d.get(name) {
            return id;
        }
        let id = d.len() as u32 + 1;
        self.push(&Record::NvtxDomain(protocol::NvtxDomain {
            id,
            name: Text::new(name),
        }));
        d.insert(name.to_vec(), id);
        id
    }

    /// A new NVTX range id (never 0).
    pub fn next_range(&self) -> u64 {
        self.next_range.fetch_add(1, Ordering::Relaxed)
    }

    /// Sends a `Thread` record for the calling thread once (its name from
    /// `/proc`), and returns its id.
    pub fn thread(&self) -> u32 {
        THREAD.with(|t| {
            let (generation, tid) = t.get();
            if generation == self.generation {
                return tid;
            }
            let tid = gettid();
            t.set((self.generation, tid));
            let comm = read_proc(&format!("/proc/self/task/{tid}/comm"));
            let comm = comm.strip_suffix(b"\n").unwrap_or(&comm);
            if let Some(name) = self.intern(comm) {
                self.push(&Record::Thread(Thread { tid, name }));
            }
            tid
        })
    }

    /// Stops the sender thread: sends what is queued, waiting at most
    /// `deadline`. Returns the records left unsent (0 when all went).
    pub fn finish(&self, deadline: Duration) -> u64 {
        let stream = match self.stream.try_lock() {
            Ok(mut s) => s.take(),
            Err(_) => None,
        };
        match stream {
            Some(s) => {
                let f = s.finish(deadline);
                f.records_unsent
            }
            None => 0,
        }
    }
}

thread_local! {
    /// (generation, tid) of the thread once announced.
    static THREAD: std::cell::Cell<(u64, u32)> = const { std::cell::Cell::new((0, 0)) };
    /// The thread's open NVTX push ranges, innermost last: (domain, id).
    static NVTX: RefCell<NvtxStack> = const { RefCell::new(NvtxStack::new()) };
}

/// A thread's NVTX push/pop ranges.
#[derive(Debug)]
pub struct NvtxStack {
    generation: u64,
    open: Vec<(u32, u64)>,
    /// Ranges the thread had open when its process forked: their pops are
    /// counted, not sent, per domain.
    inherited: Vec<(u32, u32)>,
}

impl NvtxStack {
    const fn new() -> Self {
        NvtxStack {
            generation: 0,
            open: Vec::new(),
            inherited: Vec::new(),
        }
    }

    fn adopt(&mut self, generation: u64) {
        if self.generation == generation {
            return;
        }
        if self.generation != 0 {
            // Ranges opened before a fork: the child pops them.
            for &(d, _) in &self.open {
                match self.inherited.iter_mut().find(|(dd, _)| *dd == d) {
                    Some((_, n)) => *n += 1,
                    None => self.inherited.push((d, 1)),
                }
            }
        }
        self.open.clear();
        self.generation = generation;
    }

    /// Pushes range `id` of `domain`; returns its 0-based depth in the
    /// domain.
    pub fn push(&mut self, domain: u32, id: u64) -> i32 {
        self.open.push((domain, id));
        self.open.iter().filter(|(d, _)| *d == domain).count() as i32 - 1
    }

    /// Pops the innermost range of `domain`: `Ok((id, depth))`, or
    /// `Err(true)` for a range inherited over a fork, `Err(false)` for an
    /// empty stack.
    pub fn pop(&mut self, domain: u32) -> Result<(u64, i32), bool> {
        if let Some(i) = self.open.iter().rposition(|(d, _)| *d == domain) {
            let (_, id) = self.open.remove(i);
            let depth = self.open.iter().filter(|(d, _)| *d == domain).count() as i32;
            return Ok((id, depth));
        }
        if let Some((_, n)) = self
            .inherited
            .iter_mut()
            .find(|(d, n)| *d == domain && *n > 0)
        {
            *n -= 1;
            return Err(true);
        }
        Err(false)
    }

    /// The innermost open range of any domain, 0 for none.
    pub fn innermost(&self) -> u64 {
        self.open.last().map_or(0, |&(_, id)| id)
    }
}

/// Runs `f` on the calling thread's NVTX stack (of this generation).
pub fn with_nvtx<R>(f: impl FnOnce(&mut NvtxStack) -> R) -> Option<R> {
    let generation = GENERATION.load(Ordering::Acquire);
    NVTX.try_with(|s| {
        let mut s = s.borrow_mut();
        s.adopt(generation);
        f(&mut s)
    })
    .ok()
}

/// The calling thread's innermost open NVTX range, 0 for none.
pub fn current_range() -> u64 {
    with_nvtx(|s| s.innermost()).unwrap_or(0)
}

/// The process's state, made on first use (and again in a forked child);
/// `flags` are the `init` bits of the entry point asking. `None` outside
/// `gpu-counters record`.
pub fn state_with(flags: u32) -> Option<&'static State> {
    let generation = GENERATION.load(Ordering::Acquire);
    let p = STATE.load(Ordering::Acquire);
    // SAFETY: states are leaked once stored, never freed: a non-null
    // pointer stays valid for the process's life.
    if let Some(s) = unsafe { p.as_ref() } {
        if s.generation == generation {
            return Some(s);
        }
    }
    let fresh = Box::into_raw(Box::new(State::new(generation, flags)?));
    match STATE.compare_exchange(p, fresh, Ordering::AcqRel, Ordering::Acquire) {
        // SAFETY: just leaked, never freed.
        Ok(_) => Some(unsafe { &*fresh }),
        Err(won) => {
            // Another thread made one first: ours goes (its sender thread
            // ends when its queue is dropped... it is stopped here).
            // SAFETY: `fresh` was never shared.
            let mine = unsafe { Box::from_raw(fresh) };
            mine.finish(Duration::ZERO);
            // SAFETY: as above, a stored state is never freed.
            unsafe { won.as_ref() }
        }
    }
}

/// The process's state if it exists (this generation's), without making
/// one.
pub fn current() -> Option<&'static State> {
    let generation = GENERATION.load(Ordering::Acquire);
    // SAFETY: as in `state_with`.
    unsafe { STATE.load(Ordering::Acquire).as_ref() }.filter(|s| s.generation == generation)
}

/// Sends a one-line notice.
pub fn notice(s: &State, sev: u8, text: &str) {
    s.push(&Record::Notice(Notice {
        ts_ns: now_ns(),
        severity: sev,
        text: Text::from_str(text),
    }));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Push returns each range's depth in its domain; pop the innermost of
    /// that domain, whatever other domains opened since; an empty stack
    /// is told apart from one inherited over a fork.
    #[test]
    fn nvtx_stacks_per_domain_and_inherited_pops() {
        let mut s = NvtxStack::new();
        s.adopt(1);
        assert_eq!(s.push(0, 1), 0);
        assert_eq!(s.push(0, 2), 1);
        assert_eq!(s.push(5, 3), 0);
        assert_eq!(s.innermost(), 3);
        assert_eq!(s.pop(0), Ok((2, 1)));
        assert_eq!(s.innermost(), 3);
        assert_eq!(s.pop(5), Ok((3, 0)));
        assert_eq!(s.pop(5), Err(false));
        // A fork: the open range becomes inherited.
        s.adopt(2);
        assert_eq!(s.innermost(), 0);
        assert_eq!(s.pop(0), Err(true));
        assert_eq!(s.pop(0), Err(false));
    }
}
