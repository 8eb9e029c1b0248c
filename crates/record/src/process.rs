//! Running the recorded command as a shell would: its exit status and
//! signals forwarded.
//!
//! - [`SignalMask::block`] blocks [`FORWARDED`] in the calling thread; call
//!   it before starting any thread, so that every thread inherits the mask
//!   and the signals wait for [`Forwarder`] instead of killing the recorder.
//! - [`spawn`] runs the command with the mask the recorder had before
//!   (masks survive `exec`), in the recorder's process group (a terminal's
//!   Ctrl-C reaches it directly). A command that is not found is
//!   [`SpawnError::NotFound`] (a shell's 127); one that cannot be executed
//!   (permission, a directory, not a program) is
//!   [`SpawnError::NotExecutable`] (126).
//! - [`Forwarder`] reads the blocked signals from a `signalfd` on its
//!   thread: one sent by a process (`kill`, `sigqueue`) other than the
//!   child is passed on to the child; one from the kernel (the terminal's
//!   Ctrl-C, which the child, in the same foreground group, got already) is
//!   not, so the child sees it once.
//! - [`Exit`] is how the child ended; [`reraise`] ends the recorder with
//!   the same signal (SIGINT: so that a calling shell stops its loop).

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// `SIGINT`, which [`reraise`] is for.
pub const SIGINT: i32 = libc::SIGINT;

/// The signals forwarded to the child.
pub const FORWARDED: [libc::c_int; 6] = [
    libc::SIGINT,
    libc::SIGTERM,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGUSR1,
    libc::SIGUSR2,
];

/// A signal's name (`SIGTERM`), or `signal N`.
pub fn signal_name(sig: i32) -> String {
    let known = match sig {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGTRAP => "SIGTRAP",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGUSR2 => "SIGUSR2",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        libc::SIGCHLD => "SIGCHLD",
        libc::SIGCONT => "SIGCONT",
        libc::SIGSTOP => "SIGSTOP",
        libc::SIGTSTP => "SIGTSTP",
        libc::SIGTTIN => "SIGTTIN",
        libc::SIGTTOU => "SIGTTOU",
        libc::SIGURG => "SIGURG",
        libc::SIGXCPU => "SIGXCPU",
        libc::SIGXFSZ => "SIGXFSZ",
        libc::SIGVTALRM => "SIGVTALRM",
        libc::SIGPROF => "SIGPROF",
        libc::SIGWINCH => "SIGWINCH",
        libc::SIGIO => "SIGIO",
        libc::SIGPWR => "SIGPWR",
        libc::SIGSYS => "SIGSYS",
        _ => return format!("signal {sig}"),
    };
    known.to_string()
}

fn forwarded_set() -> libc::sigset_t {
    // SAFETY: sigset_t is plain data; sigemptyset initializes it.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid sigset_t; the signals are valid numbers.
    unsafe {
        libc::sigemptyset(&mut set);
        for s in FORWARDED {
            libc::sigaddset(&mut set, s);
        }
    }
    set
}

/// The calling thread's signal mask before [`SignalMask::block`].
#[derive(Clone, Copy)]
pub struct SignalMask {
    old: libc::sigset_t,
}

impl std::fmt::Debug for SignalMask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SignalMask").finish_non_exhaustive()
    }
}

impl SignalMask {
    /// Blocks [`FORWARDED`] in the calling thread (and so in threads it
    /// starts later) and returns the mask it had.
    pub fn block() -> io::Result<SignalMask> {
        let set = forwarded_set();
        // SAFETY: sigset_t is plain data; pthread_sigmask fills `old`.
        let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
        // SAFETY: both sets are valid; this changes only this thread's mask.
        let r = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut old) };
        if r != 0 {
            return Err(io::Error::from_raw_os_error(r));
        }
        Ok(SignalMask { old })
    }

    /// Restores the mask in the calling thread.
    pub fn restore(&self) {
        // SAFETY: `self.old` is a mask pthread_sigmask returned.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &self.old, std::ptr::null_mut()) };
    }
}

/// Why the command could not be started.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// No such file (a shell's exit 127).
    #[error("{0}")]
    NotFound(io::Error),
    /// It exists but cannot be executed (a shell's exit 126).
    #[error("{0}")]
    NotExecutable(io::Error),
}

impl SpawnError {
    /// The exit code a shell gives: 127 not found, 126 not executable.
    pub fn exit_code(&self) -> u8 {
        match self {
            SpawnError::NotFound(_) => 127,
            SpawnError::NotExecutable(_) => 126,
        }
    }

    /// What went wrong, as `strerror` says it (`No such file or directory`).
    pub fn reason(&self) -> String {
        let e = match self {
            SpawnError::NotFound(e) | SpawnError::NotExecutable(e) => e,
        };
        match e.raw_os_error() {
            // SAFETY: strerror returns a static, NUL-terminated string.
            Some(code) => unsafe { std::ffi::CStr::from_ptr(libc::strerror(code)) }
                .to_string_lossy()
                .into_owned(),
            None => e.to_string(),
        }
    }
}

/// Starts `program` with `args` and the extra environment `env`, with the
/// signal mask `mask` held before [`SignalMask::block`].
pub fn spawn(
    program: &OsStr,
    args: &[OsString],
    env: &[(OsString, OsString)],
    mask: &SignalMask,
) -> Result<Child, SpawnError> {
    let mut cmd = Command::new(program);
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let old = mask.old;
    // SAFETY: the closure runs in the child between fork and exec and only
    // calls pthread_sigmask, which is async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            let r = libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
            if r != 0 {
                return Err(io::Error::from_raw_os_error(r));
            }
            Ok(())
        });
    }
    cmd.spawn().map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => SpawnError::NotFound(e),
        _ => SpawnError::NotExecutable(e),
    })
}

/// How the child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// It exited with this code.
    Code(i32),
    /// A signal killed it.
    Signal(i32),
}

impl Exit {
    /// The status a shell reports: the code, or 128 + the signal.
    pub fn shell_status(&self) -> i32 {
        match *self {
            Exit::Code(c) => c,
            Exit::Signal(s) => 128 + s,
        }
    }
}

/// Waits for the child to end.
pub fn wait(child: &mut Child) -> io::Result<Exit> {
    let status = child.wait()?;
    Ok(match (status.code(), status.signal()) {
        (Some(c), _) => Exit::Code(c),
        (None, Some(s)) => Exit::Signal(s),
        (None, None) => Exit::Code(1),
    })
}

/// Forwards the blocked signals to the child; see the module documentation.
pub struct Forwarder {
    stop: Option<OwnedFd>,
    thread: Option<JoinHandle<()>>,
    forwarded: Arc<AtomicU64>,
}

impl std::fmt::Debug for Forwarder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Forwarder")
            .field("forwarded", &self.forwarded())
            .finish_non_exhaustive()
    }
}

impl Forwarder {
    /// Starts forwarding to `child`. [`FORWARDED`] must be blocked in every
    /// thread ([`SignalMask::block`] before any thread started).
    pub fn start(child: u32) -> io::Result<Forwarder> {
        let set = forwarded_set();
        // SAFETY: signalfd with a valid set; the result is checked.
        let fd = unsafe { libc::signalfd(-1, &set, libc::SFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: signalfd returned a new descriptor owned by nobody else.
        let sfd = unsafe { OwnedFd::from_raw_fd(fd) };
        let mut p = [0; 2];
        // SAFETY: `p` has room for the two descriptors pipe2 writes.
        if unsafe { libc::pipe2(p.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: both descriptors were just created and are owned by nobody else.
        let (stop_r, stop_w) = unsafe { (OwnedFd::from_raw_fd(p[0]), OwnedFd::from_raw_fd(p[1])) };
        let forwarded = Arc::new(AtomicU64::new(0));
        let f = forwarded.clone();
        let thread = std::thread::Builder::new()
            .name("gpu-counters-signals".into())
            .spawn(move || forward_loop(sfd, stop_r, child, f))?;
        Ok(Forwarder {
            stop: Some(stop_w),
            thread: Some(thread),
            forwarded,
        })
    }

    /// Signals passed on so far.
    pub fn forwarded(&self) -> u64 {
        self.forwarded.load(Ordering::Relaxed)
    }

    /// Stops forwarding. Signals that arrive later stay pending (blocked).
    pub fn stop(mut self) -> u64 {
        self.stop.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.forwarded()
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        self.stop.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn forward_loop(sfd: OwnedFd, stop: OwnedFd, child: u32, forwarded: Arc<AtomicU64>) {
    loop {
        let mut p = [
            libc::pollfd {
                fd: sfd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: stop.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: `p` is a valid array of two pollfd.
        let r = unsafe { libc::poll(p.as_mut_ptr(), 2, -1) };
        if r < 0 {
            if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return;
        }
        if p[1].revents != 0 {
            // The write end was closed: stop.
            return;
        }
        if p[0].revents == 0 {
            continue;
        }
        // SAFETY: signalfd_siginfo is plain data.
        let mut info: libc::signalfd_siginfo = unsafe { std::mem::zeroed() };
        let size = std::mem::size_of::<libc::signalfd_siginfo>();
        // SAFETY: reading at most `size` bytes into `info`.
        let n = unsafe {
            libc::read(
                sfd.as_raw_fd(),
                (&mut info as *mut libc::signalfd_siginfo).cast(),
                size,
            )
        };
        if n != size as isize {
            continue;
        }
        let from_process = matches!(
            info.ssi_code,
            libc::SI_USER | libc::SI_QUEUE | libc::SI_TKILL
        );
        if from_process && info.ssi_pid != child {
            // SAFETY: kill(2) on the child's pid with a valid signal.
            if unsafe { libc::kill(child as libc::pid_t, info.ssi_signo as libc::c_int) } == 0 {
                forwarded.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// Ends the calling process with signal `sig` as its cause (default
/// action restored, the signal unblocked and raised); exits with 128 +
/// `sig` if that did not end it.
pub fn reraise(sig: i32) -> ! {
    // SAFETY: restoring the default action, unblocking and raising a valid
    // signal in this process.
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, sig);
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        libc::raise(sig);
    }
    std::process::exit(128 + sig)
}
