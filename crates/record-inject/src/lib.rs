//! `libgpu_counters_inject.so`: what `gpu-counters record` injects into
//! the program it runs.
//!
//! - `InitializeInjection`: CUDA calls it inside the process's first
//!   `cuInit` when `CUDA_INJECTION64_PATH` names this library. It sets
//!   CUPTI up through `gpu_counters_cuda::trace` (API callbacks of launches,
//!   copies, memsets, synchronizations and graph launches of the driver and
//!   runtime APIs; kernel, copy, memset and synchronization records; no
//!   driver call, as it runs inside `cuInit`) and starts the worker that
//!   calibrates each device's clock once its first context exists.
//! - `InitializeInjectionNvtx2`: each NVTX instance calls it on its first
//!   NVTX call when `NVTX_INJECTION64_PATH` names this library; our
//!   handlers go into its function table ([`nvtx`]).
//! - GPU metrics over time ([`pm`], `--gpu-metrics`) and counters of every
//!   kernel ([`counters`], `--counters`), started by the worker on each
//!   device's first context.
//!
//! Both return success once anything was registered (a library the driver
//! unloaded with a thread or `atexit` handler inside it would crash the
//! process), and run their bodies under `catch_unwind`. Outside `gpu-counters
//! record` (no `GPU_COUNTERS_RECORD_DIR`) they do nothing.
//!
//! Records go to the recorder through `gpu_counters_record::client`'s
//! bounded queue and sender thread ([`state`]). At exit (`atexit`, from any
//! thread; or SIGTERM where the program left its default action) the exit
//! sequence runs once: a forced flush of CUPTI's buffers, the counts, a
//! `Goodbye`, and the queue sent within a deadline
//! (`GPU_COUNTERS_RECORD_EXIT_MS`, default 2000); nothing in it waits
//! without one. A forked child gets a fresh state and connection.

pub mod config;
pub mod counters;
pub mod cuda;
pub mod join;
pub mod nvtx;
pub mod pm;
pub mod state;

use gpu_counters_record::protocol::{goodbye, init, severity, Goodbye, Record, Stats};
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Once;
use std::time::Duration;

static HOOKS: Once = Once::new();
static EXITED: AtomicBool = AtomicBool::new(false);
static CUDA_ONCE: Once = Once::new();

/// The exit sequence's deadline for sending what is queued.
fn exit_deadline() -> Duration {
    let ms = std::env::var("GPU_COUNTERS_RECORD_EXIT_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(2000);
    Duration::from_millis(ms)
}

extern "C" fn at_exit() {
    let _ = std::panic::catch_unwind(|| exit_sequence(goodbye::ATEXIT));
}

extern "C" fn at_fork_child() {
    state::GENERATION.fetch_add(1, Ordering::AcqRel);
    // The child runs its own exit sequence.
    EXITED.store(false, Ordering::Release);
}

/// Runs once per process (per generation): the last flush, the counts, a
/// Goodbye, and the queue sent within the deadline.
pub fn exit_sequence(reason: u8) {
    if EXITED.swap(true, Ordering::AcqRel) {
        return;
    }
    let Some(s) = state::current() else { return };
    let cupti = if cuda::started() {
        // The last counters and samples first: their kernels' records come
        // with the forced flush after (the collector matches either order).
        counters::flush(s, false, Duration::from_millis(1000));
        pm::stop_all(Duration::from_millis(1000));
        cuda::exit_flush()
    } else {
        None
    };
    cuda::send_stats(s, cupti);
    // The last Stats counts the ranges still open.
    let open = s.counts.nvtx_open.load(Ordering::Relaxed);
    if open > 0 {
        let deadline = Duration::from_millis(200);
        let join = s.join.lock().map(|j| j.stats()).unwrap_or_default();
        let c = &s.counts;
        let l = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
        s.queue.push_wait(
            &Record::Stats(Stats {
                records: l(&c.records),
                cupti_dropped: l(&c.cupti_dropped),
                buffers_refused: l(&c.buffers_refused),
                incomplete: l(&c.incomplete),
                queue_dropped: s.queue.dropped(),
                unmatched_launches: join.unmatched + join.evicted,
                nvtx_unterminated: open,
                nvtx_pop_empty: l(&c.nvtx_pop_empty),
                pm_overflows: l(&c.pm_overflows),
                pm_gaps: l(&c.pm_gaps),
                own_kernels: l(&c.own_kernels),
            }),
            deadline,
        );
    }
    if std::env::var_os("GPU_COUNTERS_INJECT_DEBUG").is_some() {
        let j = s.join.lock().map(|j| j.stats()).unwrap_or_default();
        let c = &s.counts;
        eprintln!(
            "gpu-counters-inject pid {}: join {:?}; records {}, incomplete {}, own kernels {}, nvtx open {}, queue dropped {}, cupti {:?}",
            s.pid,
            j,
            c.records.load(Ordering::Relaxed),
            c.incomplete.load(Ordering::Relaxed),
            c.own_kernels.load(Ordering::Relaxed),
            open,
            s.queue.dropped(),
            cupti
        );
    }
    s.done.store(true, Ordering::Release);
    s.queue.push_wait(
        &Record::Goodbye(Goodbye { reason, unsent: 0 }),
        Duration::from_millis(200),
    );
    s.finish(exit_deadline());
}

/// The write end of the SIGTERM pipe (-1 before it exists).
static TERM_FD: AtomicI32 = AtomicI32::new(-1);

extern "C" fn on_sigterm(_sig: c_int) {
    let fd = TERM_FD.load(Ordering::Acquire);
    if fd >= 0 {
        let b = 1u8;
        // SAFETY: write(2) is async-signal-safe; a one-byte buffer.
        unsafe { libc::write(fd, (&b as *const u8).cast(), 1) };
    }
}

/// Where SIGTERM has its default action: a handler that wakes a thread,
/// which runs the exit sequence, restores the default and raises SIGTERM
/// again. A handler of the program's is never replaced.
fn hook_sigterm() {
    // SAFETY: reads the current disposition only (null new action).
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: as above; `old` is a valid out-pointer.
    if unsafe { libc::sigaction(libc::SIGTERM, std::ptr::null(), &mut old) } != 0
        || old.sa_sigaction != libc::SIG_DFL
    {
        return;
    }
    let mut fds = [0 as c_int; 2];
    // SAFETY: a valid two-int array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return;
    }
    let read_fd = fds[0];
    TERM_FD.store(fds[1], Ordering::Release);
    let spawned = std::thread::Builder::new()
        .name("gpu-counters-term".into())
        .spawn(move || {
            let mut b = 0u8;
            loop {
                // SAFETY: our pipe's read end, a one-byte buffer.
                let n = unsafe { libc::read(read_fd, (&mut b as *mut u8).cast(), 1) };
                if n == 1 {
                    break;
                }
                if n == 0 {
                    return;
                }
            }
            let _ = std::panic::catch_unwind(|| exit_sequence(goodbye::SIGTERM));
            // SAFETY: restores the default action and raises the signal
            // again on the process, as if we had not been there.
            unsafe {
                libc::signal(libc::SIGTERM, libc::SIG_DFL);
                libc::kill(libc::getpid(), libc::SIGTERM);
            }
        });
    if spawned.is_err() {
        return;
    }
    // SAFETY: a handler that only writes to a pipe; SA_RESTART keeps the
    // program's system calls going.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_sigterm as extern "C" fn(c_int) as usize;
        sa.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(libc::SIGTERM, &sa, std::ptr::null_mut());
    }
}

/// The process-wide hooks, once: `atexit`, the fork handler, SIGTERM.
fn hooks() {
    HOOKS.call_once(|| {
        // SAFETY: registering plain extern "C" functions of this library,
        // which is never unloaded once they are (we return success).
        unsafe {
            libc::atexit(at_exit);
            libc::pthread_atfork(None, None, Some(at_fork_child));
        }
        hook_sigterm();
    });
}

/// CUDA's entry point (`CUDA_INJECTION64_PATH`): 1 (success) always, so
/// that the driver never unloads a library with threads and handlers in
/// it; a failure is sent as a notice.
#[no_mangle]
pub extern "C" fn InitializeInjection() -> c_int {
    let _ = std::panic::catch_unwind(|| {
        CUDA_ONCE.call_once(|| {
            let Some(s) = state::state_with(init::CUDA) else {
                return;
            };
            hooks();
            // Registered again here, inside cuInit: it then runs before the
            // driver's own exit handlers (atexit runs last-registered first).
            // SAFETY: as in `hooks`.
            unsafe { libc::atexit(at_exit) };
            let was = s.flags.fetch_or(init::CUDA, Ordering::AcqRel);
            let _ = was;
            if let Some(e) = &s.config_error {
                cuda::notice(s, severity::WARNING, e);
            }
            if let Err(e) = cuda::start(s) {
                cuda::notice(
                    s,
                    severity::ERROR,
                    &format!("CUDA tracing could not start: {e}"),
                );
            }
        });
    });
    1
}

/// NVTX's entry point (`NVTX_INJECTION64_PATH`), once per NVTX instance:
/// 1 when our handlers are installed, 0 otherwise (NVTX's calls then do
/// nothing).
///
/// # Safety
///
/// NVTX calls it with its instance's `nvtxGetExportTable`.
#[no_mangle]
pub unsafe extern "C" fn InitializeInjectionNvtx2(
    get_export_table: Option<unsafe extern "C" fn(u32) -> *const c_void>,
) -> c_int {
    std::panic::catch_unwind(|| {
        let Some(s) = state::state_with(init::NVTX) else {
            return 0;
        };
        if !s.config.nvtx {
            return 0;
        }
        hooks();
        let was = s.flags.fetch_or(init::NVTX, Ordering::AcqRel);
        if was & init::NVTX == 0 && was != 0 {
            s.push(&Record::Init(gpu_counters_record::protocol::Init {
                flags: was | init::NVTX,
                cupti_version: 0,
                driver_version: 0,
            }));
        }
        // SAFETY: NVTX's getter of the calling instance (our caller's
        // promise).
        unsafe { nvtx::install(get_export_table) }
    })
    .unwrap_or(0)
}
