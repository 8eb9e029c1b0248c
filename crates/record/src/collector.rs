//! The collector: a private directory with a listening socket, a reader
//! thread per connection, a bounded channel to one writer thread.
//!
//! - [`start`] makes the directory (`mkdtemp`, mode 0700, under `$TMPDIR`
//!   or `/tmp`, falling back to `/tmp` when the socket path would not fit
//!   `sun_path`), binds `sock` in it (`SOCK_SEQPACKET | SOCK_CLOEXEC`) and
//!   starts the accept thread. It returns the [`Collector`] (the socket's
//!   side) and the [`Writer`] (the trace's side, run on a thread of the
//!   caller's choosing with [`Writer::run`]).
//! - Each connection gets a reader thread. It receives frames (at most
//!   [`MAX_FRAME`] bytes), checks each whole frame (header, every record)
//!   and its pid, and sends it to the writer over a channel of
//!   [`Options::channel_frames`] frames. When the channel is full the reader
//!   waits, the socket fills and the sender's queue reaches its cap, where
//!   the injection drops and counts: memory here stays bounded. A frame
//!   that fails its check ends the connection with a notice.
//! - A connection ends at EOF (after a `Goodbye` or without one: a killed
//!   process loses only what it had not sent) or when [`Collector::finish`]
//!   closes it after the drain deadline.
//! - The directory is removed when the [`Collector`] is finished or
//!   dropped, on every path.

use crate::client::{sockaddr_un, SOCKET_NAME};
use crate::protocol::{validate_frame, DecodeError, FrameHeader, MAX_FRAME};
use crate::session::Ended;
pub use crate::session::{Caps, Outcome};
use crate::trace::State;
use std::collections::HashMap;
use std::ffi::OsString;
use std::io::{self, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How the collector runs.
#[derive(Debug, Clone)]
pub struct Options {
    /// Frames in flight between the readers and the writer (each at most
    /// [`MAX_FRAME`] bytes).
    pub channel_frames: usize,
    /// The tables' limits.
    pub caps: Caps,
    /// How often the trace gets a clock snapshot.
    pub clock_snapshot_every: Duration,
    /// Where to make the private directory; `None`: `$TMPDIR`, else `/tmp`.
    pub temp_dir: Option<PathBuf>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            channel_frames: 256,
            caps: Caps::default(),
            clock_snapshot_every: Duration::from_secs(10),
            temp_dir: None,
        }
    }
}

/// What readers send the writer.
pub(crate) enum Msg {
    Frame {
        conn: u64,
        header: FrameHeader,
        data: Vec<u8>,
    },
    Closed {
        conn: u64,
        ended: Ended,
    },
}

/// The private directory, removed on drop.
#[derive(Debug)]
struct PrivateDir(PathBuf);

impl Drop for PrivateDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn mkdtemp(base: &Path) -> io::Result<PathBuf> {
    let mut template = base
        .join("gpu-counters-record-XXXXXX")
        .into_os_string()
        .into_vec();
    template.push(0);
    let mut buf = template;
    // SAFETY: `buf` is a NUL-terminated, writable template ending in XXXXXX.
    let r = unsafe { libc::mkdtemp(buf.as_mut_ptr().cast()) };
    if r.is_null() {
        return Err(io::Error::last_os_error());
    }
    buf.pop();
    Ok(PathBuf::from(OsString::from_vec(buf)))
}

fn make_dir(opts: &Options) -> io::Result<PrivateDir> {
    let base = opts
        .temp_dir
        .clone()
        .or_else(|| std::env::var_os("TMPDIR").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("/tmp"));
    // "/gpu-counters-record-XXXXXX/sock" must fit sun_path (108 bytes).
    let fits = |b: &Path| b.as_os_str().len() + 1 + 26 + 1 + SOCKET_NAME.len() < 108;
    let base = if fits(&base) {
        base
    } else {
        PathBuf::from("/tmp")
    };
    let dir = mkdtemp(&base)?;
    // mkdtemp makes it 0700 already; say so explicitly against odd umasks.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))?;
    Ok(PrivateDir(dir))
}

fn listen(path: &Path) -> io::Result<OwnedFd> {
    let addr = sockaddr_un(path)?;
    // SAFETY: plain socket(2) call; the result is checked.
    let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by socket(2) and is owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: `addr` is a valid sockaddr_un of the given length.
    let r = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&addr as *const libc::sockaddr_un).cast(),
            std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: listen(2) on the socket just bound.
    if unsafe { libc::listen(fd.as_raw_fd(), 128) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(fd)
}

fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Waits until one of `fds` is readable; `timeout_ms` -1 waits forever.
/// Returns which are readable.
fn poll_in(fds: &[RawFd], timeout_ms: i32) -> io::Result<Vec<bool>> {
    let mut p: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    loop {
        // SAFETY: `p` is a valid array of pollfd of the given length.
        let r = unsafe { libc::poll(p.as_mut_ptr(), p.len() as libc::nfds_t, timeout_ms) };
        if r >= 0 {
            return Ok(p.iter().map(|p| p.revents != 0).collect());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Frame buffers (each [`MAX_FRAME`] + 1 bytes) passed back from the writer
/// to the readers, so that frames cost no allocation (and memory freed on
/// one thread is not kept by the allocator for another).
#[derive(Clone, Default)]
struct Pool(Arc<Mutex<Vec<Vec<u8>>>>);

impl Pool {
    fn take(&self) -> Vec<u8> {
        let mut b = self
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(MAX_FRAME + 1));
        b.resize(MAX_FRAME + 1, 0);
        b
    }

    fn give(&self, b: Vec<u8>, cap: usize) {
        let mut p = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if p.len() < cap {
            p.push(b);
        }
    }
}

/// Connections open now, and a condition signalled when one ends.
#[derive(Default)]
struct Live {
    conns: Mutex<HashMap<u64, Arc<OwnedFd>>>,
    ended: Condvar,
}

/// The socket's side of the collector; see the module documentation.
pub struct Collector {
    dir: Option<PrivateDir>,
    socket: PathBuf,
    stop: Option<OwnedFd>,
    accept: Option<JoinHandle<Vec<JoinHandle<()>>>>,
    live: Arc<Live>,
}

impl std::fmt::Debug for Collector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Collector")
            .field("socket", &self.socket)
            .finish_non_exhaustive()
    }
}

/// The trace's side of the collector: [`Writer::run`] consumes what the
/// readers receive until the collector is finished.
pub struct Writer {
    rx: Receiver<Msg>,
    opts: Options,
    pool: Pool,
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer").finish_non_exhaustive()
    }
}

/// Makes the private directory and socket and starts accepting; see the
/// module documentation.
pub fn start(opts: Options) -> io::Result<(Collector, Writer)> {
    let dir = make_dir(&opts)?;
    let socket = dir.0.join(SOCKET_NAME);
    let listener = listen(&socket)?;
    let (stop_r, stop_w) = pipe()?;
    let (tx, rx) = sync_channel(opts.channel_frames.max(1));
    let live = Arc::new(Live::default());
    let l = live.clone();
    let pool = Pool::default();
    let p = pool.clone();
    let accept = std::thread::Builder::new()
        .name("gpu-counters-accept".into())
        .spawn(move || accept_loop(listener, stop_r, tx, l, p))?;
    Ok((
        Collector {
            dir: Some(dir),
            socket,
            stop: Some(stop_w),
            accept: Some(accept),
            live,
        },
        Writer { rx, opts, pool },
    ))
}

fn accept_one(listener: &OwnedFd) -> io::Result<OwnedFd> {
    // SAFETY: accept4 on a listening socket; addresses are not wanted.
    let fd = unsafe {
        libc::accept4(
            listener.as_raw_fd(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            libc::SOCK_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: accept4 returned a new descriptor owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn accept_loop(
    listener: OwnedFd,
    stop: OwnedFd,
    tx: SyncSender<Msg>,
    live: Arc<Live>,
    pool: Pool,
) -> Vec<JoinHandle<()>> {
    let mut readers = Vec::new();
    let mut next_conn = 1u64;
    let mut spawn_reader = |fd: OwnedFd, readers: &mut Vec<JoinHandle<()>>| {
        let conn = next_conn;
        next_conn += 1;
        let fd = Arc::new(fd);
        live.conns
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(conn, fd.clone());
        let (tx2, live2, pool2) = (tx.clone(), live.clone(), pool.clone());
        match std::thread::Builder::new()
            .name(format!("gpu-counters-read-{conn}"))
            .spawn(move || read_loop(conn, fd, tx2, live2, pool2))
        {
            Ok(h) => readers.push(h),
            Err(e) => {
                let _ = tx.send(Msg::Closed {
                    conn,
                    ended: Ended::Error(format!("cannot start a reader thread: {e}")),
                });
                live.conns
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(&conn);
            }
        }
    };
    while let Ok(ready) = poll_in(&[listener.as_raw_fd(), stop.as_raw_fd()], -1) {
        if ready[0] {
            match accept_one(&listener) {
                Ok(fd) => spawn_reader(fd, &mut readers),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => {}
            }
        }
        if ready[1] {
            // Stopping: take every connection already waiting, then close.
            while let Ok(r) = poll_in(&[listener.as_raw_fd()], 0) {
                if !r[0] {
                    break;
                }
                match accept_one(&listener) {
                    Ok(fd) => spawn_reader(fd, &mut readers),
                    Err(_) => break,
                }
            }
            break;
        }
    }
    readers
}

fn read_loop(conn: u64, fd: Arc<OwnedFd>, tx: SyncSender<Msg>, live: Arc<Live>, pool: Pool) {
    let mut pid: Option<u32> = None;
    let ended = loop {
        let mut buf = pool.take();
        // SAFETY: `buf` is writable for its length; `fd` is an open socket.
        let n = unsafe {
            libc::recv(
                fd.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                libc::MSG_TRUNC,
            )
        };
        if n == 0 {
            break Ended::Eof;
        }
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            break Ended::Error(e.to_string());
        }
        let n = n as usize;
        if n > MAX_FRAME {
            break Ended::Refused(DecodeError::LongFrame { len: n }.to_string());
        }
        buf.truncate(n);
        let frame = &buf[..];
        let header = match validate_frame(frame) {
            Ok((h, _)) => h,
            Err(e) => break Ended::Refused(e.to_string()),
        };
        match pid {
            None => pid = Some(header.pid),
            Some(p) if p != header.pid => {
                break Ended::Refused(format!(
                    "frame {} says pid {}, the connection's first said pid {p}",
                    header.seq, header.pid
                ))
            }
            Some(_) => {}
        }
        let msg = Msg::Frame {
            conn,
            header,
            data: buf,
        };
        if tx.send(msg).is_err() {
            break Ended::Error("the writer stopped".into());
        }
    };
    let forced = {
        let mut conns = live.conns.lock().unwrap_or_else(|e| e.into_inner());
        conns.remove(&conn).is_none()
    };
    let ended = if forced && ended == Ended::Eof {
        Ended::Forced
    } else {
        ended
    };
    let _ = tx.send(Msg::Closed { conn, ended });
    live.ended.notify_all();
}

/// What [`Collector::finish`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Finish {
    /// Connections still open at the deadline, closed by force.
    pub forced: usize,
}

impl Collector {
    /// The private directory (for `config.json` and the like).
    pub fn dir(&self) -> &Path {
        &self
            .dir
            .as_ref()
            .expect("the directory lives until finish")
            .0
    }

    /// The listening socket.
    pub fn socket_path(&self) -> &Path {
        &self.socket
    }

    /// Connections open now.
    pub fn open_connections(&self) -> usize {
        self.live
            .conns
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .len()
    }

    /// Stops accepting (after taking every connection already waiting),
    /// waits at most `drain` for the open connections to end, closes those
    /// still open, waits for every reader, and removes the directory. The
    /// [`Writer`] then ends once it has taken what was sent.
    pub fn finish(mut self, drain: Duration) -> Finish {
        // Wake the accept thread; it drains the backlog and returns.
        if let Some(w) = self.stop.take() {
            // SAFETY: writing one byte from a valid buffer to our pipe.
            let _ = unsafe { libc::write(w.as_raw_fd(), [1u8].as_ptr().cast(), 1) };
            drop(w);
        }
        let readers = self
            .accept
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default();
        let until = Instant::now() + drain;
        let mut conns = self.live.conns.lock().unwrap_or_else(|e| e.into_inner());
        while !conns.is_empty() {
            let now = Instant::now();
            if now >= until {
                break;
            }
            conns = self
                .live
                .ended
                .wait_timeout(conns, until - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        let forced = conns.len();
        for (_, fd) in conns.drain() {
            // SAFETY: shutdown(2) on an open socket; its reader then sees EOF.
            unsafe { libc::shutdown(fd.as_raw_fd(), libc::SHUT_RDWR) };
        }
        drop(conns);
        for r in readers {
            let _ = r.join();
        }
        self.dir.take();
        Finish { forced }
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        if self.accept.is_some() {
            if let Some(w) = self.stop.take() {
                // SAFETY: writing one byte from a valid buffer to our pipe.
                let _ = unsafe { libc::write(w.as_raw_fd(), [1u8].as_ptr().cast(), 1) };
            }
            let conns: Vec<_> = self
                .live
                .conns
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .drain()
                .collect();
            for (_, fd) in conns {
                // SAFETY: shutdown(2) on an open socket.
                unsafe { libc::shutdown(fd.as_raw_fd(), libc::SHUT_RDWR) };
            }
        }
        // The directory goes with `self.dir`.
    }
}

/// Reads the three clocks of a trace clock snapshot.
pub(crate) fn clock_readings() -> gpu_counters_profiler::export::perfetto_gpu::ClockReadings {
    gpu_counters_profiler::export::perfetto_gpu::ClockReadings {
        monotonic_ns: now_ns(libc::CLOCK_MONOTONIC),
        boottime_ns: Some(now_ns(libc::CLOCK_BOOTTIME)),
        realtime_ns: Some(now_ns(libc::CLOCK_REALTIME)),
    }
}

/// `clock`'s time now, ns.
pub fn now_ns(clock: libc::clockid_t) -> u64 {
    // SAFETY: timespec is plain data; all zeroes is a valid value.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: `ts` is a valid, writable timespec.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    (ts.tv_sec as u64) * 1_000_000_000 + ts.tv_nsec as u64
}

impl Writer {
    /// Takes every frame until the collector is finished, writing the trace
    /// to `out` (none for a summary only), and returns the summary. A write
    /// error stops the trace, not the summary.
    pub fn run<W: Write>(self, out: Option<W>) -> Outcome {
        let mut state = State::new(out, self.opts.caps, clock_readings);
        let mut last_snapshot = Instant::now();
        let keep = self.opts.channel_frames + 16;
        for msg in self.rx.iter() {
            match msg {
                Msg::Frame { conn, header, data } => {
                    state.frame(conn, header, &data);
                    self.pool.give(data, keep);
                }
                Msg::Closed { conn, ended } => state.closed(conn, ended),
            }
            if last_snapshot.elapsed() >= self.opts.clock_snapshot_every {
                last_snapshot = Instant::now();
                state.clock_snapshot();
            }
        }
        state.finish()
    }
}

/// Writes the trace of one connection's frames, as they were received, to
/// `out` (none for the summary only) and returns the summary: the writer
/// thread's work without the socket (for converting a saved stream, tests
/// and benchmarks). A frame that fails its check ends the stream as the
/// collector would end the connection.
pub fn write_frames<'a, W: Write>(
    frames: impl IntoIterator<Item = &'a [u8]>,
    out: Option<W>,
    caps: Caps,
) -> Outcome {
    let mut state = State::new(out, caps, clock_readings);
    let mut ended = Ended::Eof;
    for f in frames {
        match validate_frame(f) {
            Ok((h, _)) => state.frame(1, h, f),
            Err(e) => {
                ended = Ended::Refused(e.to_string());
                break;
            }
        }
    }
    state.closed(1, ended);
    state.finish()
}

/// Writes `config.json` for the injection into `dir`.
pub fn write_config(dir: &Path, json: &serde_json::Value) -> io::Result<()> {
    let path = dir.join("config.json");
    let mut f = std::fs::File::create(path)?;
    f.write_all(json.to_string().as_bytes())?;
    f.write_all(b"\n")
}
