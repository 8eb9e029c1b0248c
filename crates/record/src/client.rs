//! The sending side, as the injected library uses it: a bounded process
//! queue that application threads append records to, and a sender that
//! swaps the queue out and sends it to the collector in frames.
//!
//! - [`Queue`]: a byte buffer of encoded records behind a mutex, capped in
//!   bytes. A record that would pass the cap is dropped and counted
//!   ([`Queue::dropped`]): a stalled collector never blocks or bloats the
//!   program. Appending takes the lock for one encode (about 100 bytes).
//! - [`Sender`]: connects lazily (`AF_UNIX`, `SOCK_SEQPACKET |
//!   SOCK_CLOEXEC`, so children do not inherit the connection) on the first
//!   send, sends its [`Hello`] as the connection's first frame, then cuts
//!   what it is given into frames of at most [`MAX_FRAME`] bytes at record
//!   boundaries, each numbered, sent with `MSG_NOSIGNAL` (a dead collector
//!   is `EPIPE`, never the program's `SIGPIPE`). A frame that cannot be
//!   sent is counted and its number skipped, so the collector sees the gap.
//! - [`Stream`]: a thread that moves the queue to a sender every period or
//!   when the queue passes a threshold, and a deadline-bounded
//!   [`Stream::finish`].
//!
//! [`socket_path_from_env`] finds the collector's socket from
//! `GPU_COUNTERS_RECORD_DIR`, which `gpu-counters record` sets.

use crate::protocol::{
    record_spans, EncodeError, FrameHeader, Hello, Record, HEADER_LEN, MAX_FRAME,
};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

/// The environment variable naming the collector's private directory.
pub const RECORD_DIR_VAR: &str = "GPU_COUNTERS_RECORD_DIR";
/// The socket's file name in that directory.
pub const SOCKET_NAME: &str = "sock";

/// The collector's socket, from [`RECORD_DIR_VAR`]; `None` when unset.
pub fn socket_path_from_env() -> Option<PathBuf> {
    std::env::var_os(RECORD_DIR_VAR).map(|d| Path::new(&d).join(SOCKET_NAME))
}

/// Default cap of a [`Queue`]: 64 MiB.
pub const DEFAULT_QUEUE_BYTES: usize = 64 << 20;
/// Queued bytes at which a [`Stream`] sends without waiting for its period.
pub const SEND_THRESHOLD: usize = 48 << 10;

struct QueueState {
    buf: Vec<u8>,
    records: u64,
}

/// A bounded queue of encoded records, shared by every thread of a process.
pub struct Queue {
    state: Mutex<QueueState>,
    wake: Condvar,
    space: Condvar,
    cap: usize,
    threshold: usize,
    dropped: AtomicU64,
    pushed: AtomicU64,
}

impl std::fmt::Debug for Queue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queue")
            .field("cap", &self.cap)
            .field("dropped", &self.dropped())
            .finish_non_exhaustive()
    }
}

impl Queue {
    /// A queue holding at most `cap_bytes` bytes of records.
    pub fn new(cap_bytes: usize) -> Self {
        Queue {
            state: Mutex::new(QueueState {
                buf: Vec::new(),
                records: 0,
            }),
            wake: Condvar::new(),
            space: Condvar::new(),
            cap: cap_bytes,
            threshold: SEND_THRESHOLD.min(cap_bytes.max(1)),
            dropped: AtomicU64::new(0),
            pushed: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, QueueState> {
        // A thread that panicked while holding the lock left whole records
        // (encode appends or truncates back): the state is usable.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Appends `record`. Returns `false`, counting it in
    /// [`Queue::dropped`], when it would pass the cap or cannot be encoded.
    pub fn push(&self, record: &Record<'_>) -> bool {
        let mut s = self.lock();
        let before = s.buf.len();
        let ok = record.encode(&mut s.buf).is_ok() && s.buf.len() <= self.cap;
        if !ok {
            s.buf.truncate(before);
            drop(s);
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        s.records += 1;
        let wake = before < self.threshold && s.buf.len() >= self.threshold;
        drop(s);
        self.pushed.fetch_add(1, Ordering::Relaxed);
        if wake {
            self.wake.notify_one();
        }
        true
    }

    /// Appends `record`, waiting at most `timeout` for room when the queue
    /// is full (for the last records of a process: its Stats and Goodbye).
    /// Returns `false`, counting it, when there was no room in time or it
    /// cannot be encoded.
    pub fn push_wait(&self, record: &Record<'_>, timeout: Duration) -> bool {
        let until = std::time::Instant::now() + timeout;
        let mut s = self.lock();
        loop {
            let before = s.buf.len();
            match record.encode(&mut s.buf) {
                Err(_) => break,
                Ok(()) if s.buf.len() <= self.cap => {
                    s.records += 1;
                    drop(s);
                    self.pushed.fetch_add(1, Ordering::Relaxed);
                    self.wake.notify_one();
                    return true;
                }
                Ok(()) => s.buf.truncate(before),
            }
            let now = std::time::Instant::now();
            if now >= until {
                break;
            }
            self.wake.notify_one();
            s = self
                .space
                .wait_timeout(s, until - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        drop(s);
        self.dropped.fetch_add(1, Ordering::Relaxed);
        false
    }

    /// Records dropped so far.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Records appended so far.
    pub fn pushed(&self) -> u64 {
        self.pushed.load(Ordering::Relaxed)
    }

    /// Moves every queued record into `into` (cleared first; its capacity is
    /// reused by the queue) and returns how many.
    pub fn take(&self, into: &mut Vec<u8>) -> u64 {
        into.clear();
        let mut s = self.lock();
        std::mem::swap(&mut s.buf, into);
        let n = std::mem::replace(&mut s.records, 0);
        drop(s);
        self.space.notify_all();
        n
    }

    /// Bytes queued now.
    pub fn len_bytes(&self) -> usize {
        self.lock().buf.len()
    }

    /// Waits until the queue holds at least the send threshold or `timeout`
    /// passes.
    pub fn wait(&self, timeout: Duration) {
        let s = self.lock();
        if s.buf.len() >= self.threshold {
            return;
        }
        let _ = self
            .wake
            .wait_timeout_while(s, timeout, |s| s.buf.len() < self.threshold);
    }

    fn wake_all(&self) {
        let _s = self.lock();
        self.wake.notify_all();
    }
}

/// Why records were not sent.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    /// There is no collector: connecting failed (no socket, refused) or the
    /// connection broke (`EPIPE`, `ECONNRESET`). Later sends fail at once.
    #[error("no collector at {path}: {source}")]
    Disconnected {
        /// The socket path.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
    /// Some frames could not be sent (a timeout, another error); their
    /// numbers were skipped.
    #[error("{frames} frames ({records} records) not sent: {source}")]
    Frames {
        /// Frames not sent.
        frames: u64,
        /// Records in them.
        records: u64,
        /// The last error.
        source: io::Error,
    },
}

enum Conn {
    NotYet,
    Open(OwnedFd),
    Broken,
}

/// Sends records to the collector in numbered frames over one connection.
pub struct Sender {
    path: PathBuf,
    pid: u32,
    hello: Vec<u8>,
    conn: Conn,
    seq: u32,
    frame: Vec<u8>,
    timeout: Option<Duration>,
    frames_sent: u64,
    records_unsent: u64,
}

impl std::fmt::Debug for Sender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sender")
            .field("path", &self.path)
            .field("pid", &self.pid)
            .field("seq", &self.seq)
            .finish_non_exhaustive()
    }
}

impl Sender {
    /// A sender of process `pid` to the collector listening at `socket`,
    /// which first sends `hello`. Nothing is connected yet.
    pub fn new(
        socket: impl Into<PathBuf>,
        pid: u32,
        hello: &Hello<'_>,
    ) -> Result<Self, EncodeError> {
        let mut h = Vec::new();
        Record::Hello(*hello).encode(&mut h)?;
        Ok(Sender {
            path: socket.into(),
            pid,
            hello: h,
            conn: Conn::NotYet,
            seq: 0,
            frame: Vec::with_capacity(MAX_FRAME),
            timeout: None,
            frames_sent: 0,
            records_unsent: 0,
        })
    }

    /// Bounds each `send` (`SO_SNDTIMEO`): a collector that stops reading
    /// costs at most this per frame, then the frame is counted as not sent.
    /// `None` blocks (backpressure reaches the queue's cap instead).
    pub fn set_timeout(&mut self, timeout: Option<Duration>) {
        self.timeout = timeout;
        if let Conn::Open(fd) = &self.conn {
            let _ = set_send_timeout(fd, timeout);
        }
    }

    /// Frames sent so far (the Hello's included).
    pub fn frames_sent(&self) -> u64 {
        self.frames_sent
    }

    /// Records that could not be sent so far.
    pub fn records_unsent(&self) -> u64 {
        self.records_unsent
    }

    /// Whether the collector is gone (connecting failed or the connection
    /// broke).
    pub fn is_broken(&self) -> bool {
        matches!(self.conn, Conn::Broken)
    }

    fn connect(&mut self) -> Result<(), SendError> {
        let disconnected = |path: &Path, source| SendError::Disconnected {
            path: path.to_path_buf(),
            source,
        };
        match connect_seqpacket(&self.path) {
            Ok(fd) => {
                if self.timeout.is_some() {
                    let _ = set_send_timeout(&fd, self.timeout);
                }
                self.conn = Conn::Open(fd);
                let hello = std::mem::take(&mut self.hello);
                let r = self.send_frame_of(&hello, 1);
                self.hello = hello;
                r
            }
            Err(e) => {
                self.conn = Conn::Broken;
                Err(disconnected(&self.path, e))
            }
        }
    }

    /// Sends the encoded records in `records` (a stream of whole records,
    /// as [`Queue::take`] gives), connecting first if needed. Records that
    /// cannot be sent are counted in [`Sender::records_unsent`].
    pub fn send(&mut self, records: &[u8]) -> Result<(), SendError> {
        if records.is_empty() {
            return Ok(());
        }
        if matches!(self.conn, Conn::NotYet) {
            if let Err(e) = self.connect() {
                self.records_unsent += record_spans(records).count() as u64;
                return Err(e);
            }
        }
        let mut failed: Option<SendError> = None;
        let mut start = 0usize;
        let mut end = 0usize;
        let mut count = 0u64;
        let limit = MAX_FRAME - HEADER_LEN;
        let spans: Vec<_> = record_spans(records).collect();
        for span in spans
            .iter()
            .cloned()
            .chain(std::iter::once(records.len()..records.len()))
        {
            let last = span.is_empty();
            if last || span.end - start > limit {
                if end > start {
                    if let Err(e) = self.send_frame_of(&records[start..end], count) {
                        failed = Some(merge(failed, e));
                    }
                }
                start = span.start;
                count = 0;
            }
            end = span.end;
            count += 1;
        }
        match failed {
            None => Ok(()),
            Some(e) => Err(e),
        }
    }

    /// Sends one frame holding `body` (`count` records).
    fn send_frame_of(&mut self, body: &[u8], count: u64) -> Result<(), SendError> {
        let fd = match &self.conn {
            Conn::Open(fd) => fd,
            _ => {
                self.records_unsent += count;
                return Err(SendError::Disconnected {
                    path: self.path.clone(),
                    source: io::Error::from(io::ErrorKind::NotConnected),
                });
            }
        };
        self.frame.clear();
        FrameHeader {
            flags: 0,
            pid: self.pid,
            seq: self.seq,
        }
        .encode(&mut self.frame);
        self.frame.extend_from_slice(body);
        self.seq = self.seq.wrapping_add(1);
        let r = loop {
            // SAFETY: `fd` is an open socket owned by `self.conn`; the
            // buffer is valid for its length.
            let n = unsafe {
                libc::send(
                    fd.as_raw_fd(),
                    self.frame.as_ptr().cast(),
                    self.frame.len(),
                    libc::MSG_NOSIGNAL,
                )
            };
            if n >= 0 {
                break Ok(());
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                break Err(e);
            }
        };
        match r {
            Ok(()) => {
                self.frames_sent += 1;
                Ok(())
            }
            Err(e) => {
                self.records_unsent += count;
                let gone = matches!(
                    e.raw_os_error(),
                    Some(libc::EPIPE | libc::ECONNRESET | libc::ENOTCONN | libc::ECONNREFUSED)
                );
                if gone {
                    self.conn = Conn::Broken;
                    Err(SendError::Disconnected {
                        path: self.path.clone(),
                        source: e,
                    })
                } else {
                    Err(SendError::Frames {
                        frames: 1,
                        records: count,
                        source: e,
                    })
                }
            }
        }
    }
}

fn merge(prev: Option<SendError>, e: SendError) -> SendError {
    match (prev, e) {
        (
            Some(SendError::Frames {
                frames, records, ..
            }),
            SendError::Frames {
                frames: f2,
                records: r2,
                source,
            },
        ) => SendError::Frames {
            frames: frames + f2,
            records: records + r2,
            source,
        },
        (_, e) => e,
    }
}

/// A connected `SOCK_SEQPACKET | SOCK_CLOEXEC` socket to `path`.
pub fn connect_seqpacket(path: &Path) -> io::Result<OwnedFd> {
    let addr = sockaddr_un(path)?;
    // SAFETY: plain socket(2) call; the result is checked.
    let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by socket(2) and is owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    loop {
        // SAFETY: `addr` is a valid sockaddr_un of the given length.
        let r = unsafe {
            libc::connect(
                fd.as_raw_fd(),
                (&addr as *const libc::sockaddr_un).cast(),
                std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t,
            )
        };
        if r == 0 {
            return Ok(fd);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// `path` as a `sockaddr_un`; fails when it does not fit `sun_path`.
pub fn sockaddr_un(path: &Path) -> io::Result<libc::sockaddr_un> {
    use std::os::unix::ffi::OsStrExt;
    // SAFETY: sockaddr_un is plain data; all zeroes is a valid value.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let bytes = path.as_os_str().as_bytes();
    if bytes.len() >= addr.sun_path.len() || bytes.contains(&0) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "socket path {} is longer than {} bytes",
                path.display(),
                addr.sun_path.len() - 1
            ),
        ));
    }
    for (d, s) in addr.sun_path.iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    Ok(addr)
}

fn set_send_timeout(fd: &OwnedFd, timeout: Option<Duration>) -> io::Result<()> {
    let t = timeout.unwrap_or(Duration::ZERO);
    let tv = libc::timeval {
        tv_sec: t.as_secs() as libc::time_t,
        tv_usec: t
            .subsec_micros()
            .max(u32::from(timeout.is_some() && t.is_zero())) as libc::suseconds_t,
    };
    // SAFETY: `tv` is a valid timeval for SO_SNDTIMEO on an open socket.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_SNDTIMEO,
            (&tv as *const libc::timeval).cast(),
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// What [`Stream::finish`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Finished {
    /// Frames sent over the stream's life.
    pub frames_sent: u64,
    /// Records that could not be sent (the collector gone, a timeout, the
    /// deadline).
    pub records_unsent: u64,
    /// Records the queue dropped at its cap.
    pub queue_dropped: u64,
    /// Whether the sender thread ended before the deadline.
    pub joined: bool,
}

/// A thread that sends a [`Queue`] through a [`Sender`].
pub struct Stream {
    queue: Arc<Queue>,
    stop: Arc<AtomicBool>,
    unsent: Arc<AtomicU64>,
    done: mpsc::Receiver<Sender>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stream")
            .field("queue", &self.queue)
            .finish_non_exhaustive()
    }
}

impl Stream {
    /// Starts a thread that sends what `queue` holds every `period`, or
    /// sooner when it passes [`SEND_THRESHOLD`].
    pub fn start(mut sender: Sender, queue: Arc<Queue>, period: Duration) -> io::Result<Stream> {
        let stop = Arc::new(AtomicBool::new(false));
        let unsent = Arc::new(AtomicU64::new(0));
        let (q, s, u) = (queue.clone(), stop.clone(), unsent.clone());
        let (tx, done) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("gpu-counters-send".into())
            .spawn(move || {
                let mut buf = Vec::new();
                loop {
                    let stopping = s.load(Ordering::Acquire);
                    if q.take(&mut buf) > 0 {
                        // Errors are counted by the sender.
                        let _ = sender.send(&buf);
                        u.store(sender.records_unsent(), Ordering::Relaxed);
                    }
                    if stopping {
                        let _ = tx.send(sender);
                        return;
                    }
                    q.wait(period);
                }
            })?;
        Ok(Stream {
            queue,
            stop,
            unsent,
            done,
            thread: Some(thread),
        })
    }

    /// The queue this stream sends.
    pub fn queue(&self) -> &Arc<Queue> {
        &self.queue
    }

    /// Records not sent so far (as of the last send).
    pub fn records_unsent(&self) -> u64 {
        self.unsent.load(Ordering::Relaxed)
    }

    /// Sends what is queued and stops the thread, waiting at most
    /// `deadline` for it. A thread still sending then is left to finish on
    /// its own; what it had not sent counts as unsent here.
    pub fn finish(mut self, deadline: Duration) -> Finished {
        self.stop.store(true, Ordering::Release);
        self.queue.wake_all();
        match self.done.recv_timeout(deadline) {
            Ok(sender) => {
                if let Some(t) = self.thread.take() {
                    let _ = t.join();
                }
                Finished {
                    frames_sent: sender.frames_sent(),
                    records_unsent: sender.records_unsent(),
                    queue_dropped: self.queue.dropped(),
                    joined: true,
                }
            }
            Err(_) => Finished {
                frames_sent: 0,
                records_unsent: self.unsent.load(Ordering::Relaxed) + self.queue.lock().records,
                queue_dropped: self.queue.dropped(),
                joined: false,
            },
        }
    }
}
