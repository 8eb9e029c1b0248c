//! A test client of the collector: speaks the protocol through the same
//! queue, sender and stream the injected library uses, and sends a
//! scripted workload ([`gpu_counters_record::synthetic::Script`]).
//!
//! Usage: `record-test-client [OPTIONS]`, with the collector's directory in
//! `GPU_COUNTERS_RECORD_DIR` (as `gpu-counters record` sets it):
//!
//! - `--kernels N` (10), `--names K` (3), `--no-api`, `--steps K` (kernels
//!   per NVTX step range, 0: none), `--copy-every N`, `--memset-every N`;
//! - `--no-cuda`: say NVTX only (no kernels, no device);
//! - `--children N`: start N copies of itself (without `--children`), as
//!   exec'd children; `--fork N`: fork N children first, each sending its
//!   own stream;
//! - `--leave-open`: leave the last NVTX step open;
//! - `--no-goodbye`: end without a Goodbye; `--sigkill`: send everything
//!   queued, then kill itself with SIGKILL (no Goodbye);
//! - `--queue-bytes B`: the queue's cap (default 64 MiB), to make it drop;
//! - `--deadline S`: wait at most S seconds (default 10) for room for the
//!   Stats and Goodbye, and for the stream to be sent at the end;
//! - `--cupti-dropped N`: report N records dropped by CUPTI in its Stats;
//! - `--notice TEXT`: send a warning notice;
//! - `--malformed`: send a Hello, then a frame with a record running past
//!   its end, then exit.
//!
//! It prints one line to stderr: `test-client pid P: sent F frames, U
//! records unsent, D dropped`.

use gpu_counters_record::client::{
    connect_seqpacket, socket_path_from_env, Queue, Sender, Stream, DEFAULT_QUEUE_BYTES,
};
use gpu_counters_record::protocol::{
    goodbye, init, FrameHeader, Goodbye, Record, Stats, HEADER_LEN,
};
use gpu_counters_record::synthetic::Script;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, Clone)]
struct Args {
    script: Script,
    children: u32,
    fork: u32,
    goodbye: bool,
    sigkill: bool,
    queue_bytes: usize,
    cupti_dropped: u64,
    notice: Option<String>,
    malformed: bool,
    deadline: u64,
    raw: Vec<String>,
}

fn parse() -> Result<Args, String> {
    let raw: Vec<String> = std::env::args().skip(1).collect();
    let mut a = Args {
        script: Script::default(),
        children: 0,
        fork: 0,
        goodbye: true,
        sigkill: false,
        queue_bytes: DEFAULT_QUEUE_BYTES,
        cupti_dropped: 0,
        notice: None,
        malformed: false,
        deadline: 10,
        raw: raw.clone(),
    };
    let mut it = raw.into_iter();
    while let Some(arg) = it.next() {
        let mut num = |name: &str| -> Result<u64, String> {
            it.next()
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| format!("{name} needs a number"))
        };
        match arg.as_str() {
            "--kernels" => a.script.kernels = num("--kernels")?,
            "--names" => a.script.names = num("--names")? as u32,
            "--no-api" => a.script.api = false,
            "--steps" => a.script.step_kernels = num("--steps")?,
            "--copy-every" => a.script.copy_every = num("--copy-every")?,
            "--memset-every" => a.script.memset_every = num("--memset-every")?,
            "--no-cuda" => a.script.flags = init::NVTX,
            "--children" => a.children = num("--children")? as u32,
            "--fork" => a.fork = num("--fork")? as u32,
            "--no-goodbye" => a.goodbye = false,
            "--sigkill" => a.sigkill = true,
            "--leave-open" => a.script.leave_open = true,
            "--queue-bytes" => a.queue_bytes = num("--queue-bytes")? as usize,
            "--cupti-dropped" => a.cupti_dropped = num("--cupti-dropped")?,
            "--notice" => a.notice = Some(it.next().ok_or("--notice needs a text")?),
            "--malformed" => a.malformed = true,
            "--deadline" => a.deadline = num("--deadline")?,
            other => return Err(format!("unknown option {other}")),
        }
    }
    Ok(a)
}

/// The arguments without `--children N` and `--fork N`, for children.
fn child_args(raw: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut skip = false;
    for a in raw {
        if skip {
            skip = false;
            continue;
        }
        if a == "--children" || a == "--fork" {
            skip = true;
            continue;
        }
        out.push(a.clone());
    }
    out
}

fn cmdline() -> Vec<u8> {
    let mut v = Vec::new();
    for a in std::env::args() {
        v.extend_from_slice(a.as_bytes());
        v.push(0);
    }
    v
}

fn now_ns() -> u64 {
    // SAFETY: timespec is plain data; clock_gettime fills it.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: `ts` is a valid, writable timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Sends this process's stream; returns the exit code.
fn send(a: &Args) -> u8 {
    let Some(path) = socket_path_from_env() else {
        eprintln!("test-client: GPU_COUNTERS_RECORD_DIR is not set");
        return 3;
    };
    // SAFETY: getpid/getppid cannot fail.
    let (pid, ppid) = unsafe { (libc::getpid() as u32, libc::getppid() as u32) };
    let mut script = a.script.clone();
    script.pid = pid;
    script.ppid = ppid;
    script.tid = pid;
    script.base_ns = now_ns();
    let cmd = cmdline();
    let hello = script.hello(&cmd);
    if a.malformed {
        return malformed(&path, pid, &hello);
    }
    let sender = match Sender::new(&path, pid, &hello) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("test-client: {e}");
            return 1;
        }
    };
    let queue = Arc::new(Queue::new(a.queue_bytes));
    let stream = match Stream::start(sender, queue.clone(), Duration::from_millis(20)) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("test-client: {e}");
            return 1;
        }
    };
    if let Some(n) = &a.notice {
        queue.push(&script.notice(n));
    }
    script.run(&mut |r| {
        queue.push(r);
    });
    let wait = Duration::from_secs(a.deadline);
    let stats = Stats {
        records: a.script.kernels,
        cupti_dropped: a.cupti_dropped,
        queue_dropped: queue.dropped(),
        ..Stats::default()
    };
    queue.push_wait(&Record::Stats(stats), wait);
    if a.goodbye && !a.sigkill {
        queue.push_wait(
            &Record::Goodbye(Goodbye {
                reason: goodbye::ATEXIT,
                unsent: 0,
            }),
            wait,
        );
    }
    let f = stream.finish(wait);
    eprintln!(
        "test-client pid {pid}: sent {} frames, {} records unsent, {} dropped",
        f.frames_sent, f.records_unsent, f.queue_dropped
    );
    if a.sigkill {
        // SAFETY: kill(2) on this process.
        unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
    }
    0
}

fn malformed(
    path: &std::path::Path,
    pid: u32,
    hello: &gpu_counters_record::protocol::Hello<'_>,
) -> u8 {
    let fd = match connect_seqpacket(path) {
        Ok(fd) => fd,
        Err(e) => {
            eprintln!("test-client: {e}");
            return 1;
        }
    };
    let mut good = Vec::new();
    FrameHeader {
        flags: 0,
        pid,
        seq: 0,
    }
    .encode(&mut good);
    Record::Hello(*hello)
        .encode(&mut good)
        .expect("a Hello fits");
    let mut bad = Vec::new();
    FrameHeader {
        flags: 0,
        pid,
        seq: 1,
    }
    .encode(&mut bad);
    // A Kernel record whose length runs 100 bytes past the frame's end.
    bad.extend_from_slice(&[11, 0, 200, 0]);
    bad.extend_from_slice(&[0u8; 100]);
    assert!(bad.len() > HEADER_LEN);
    for frame in [&good, &bad] {
        use std::os::fd::AsRawFd;
        // SAFETY: sending a valid buffer on an open socket.
        let n = unsafe {
            libc::send(
                fd.as_raw_fd(),
                frame.as_ptr().cast(),
                frame.len(),
                libc::MSG_NOSIGNAL,
            )
        };
        if n < 0 {
            eprintln!("test-client: send: {}", std::io::Error::last_os_error());
            return 1;
        }
    }
    eprintln!("test-client pid {pid}: sent a malformed frame");
    0
}

fn main() -> ExitCode {
    let a = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("test-client: {e}");
            return ExitCode::from(2);
        }
    };
    // Forked children first, while this process has one thread.
    let mut forked = Vec::new();
    for _ in 0..a.fork {
        // SAFETY: the process is single-threaded here; the child only runs
        // Rust code of this program and exits with _exit.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            let code = send(&a);
            // SAFETY: ending the forked child without running the parent's
            // exit handlers twice.
            unsafe { libc::_exit(i32::from(code)) };
        }
        if pid > 0 {
            forked.push(pid);
        }
    }
    let mut children = Vec::new();
    let exe = std::env::current_exe().expect("the test client's path");
    for _ in 0..a.children {
        match std::process::Command::new(&exe)
            .args(child_args(&a.raw))
            .spawn()
        {
            Ok(c) => children.push(c),
            Err(e) => {
                eprintln!("test-client: cannot start a child: {e}");
                return ExitCode::from(1);
            }
        }
    }
    let mut code = send(&a);
    for mut c in children {
        match c.wait() {
            Ok(s) if s.success() => {}
            _ => code = 1,
        }
    }
    for pid in forked {
        let mut status = 0;
        // SAFETY: waiting for our own forked child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        if !(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0) {
            code = 1;
        }
    }
    ExitCode::from(code)
}
